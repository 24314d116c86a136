"""What the command line costs on a real-size table: wall time, peak memory and run-folder
size of each command a user runs, each as a ratio to a reference measured in the same run.

Run from the repository root (needs the package installed; the ``numpyro`` reference
needs the extra ``bayes_eval[jax]``):

    python benchmarks/real_scale.py RUNS.csv [--from metr] [--rows exact crossed ...]

``RUNS.csv`` is a run table of agent evaluations at real size: METR's public runs (10
agents x 83 tasks, 831 pairs, 6,852 runs) are what the figures in docs/performance.md
were measured on. Every command runs in a new process, as a user runs it, with the
compile cache of the package in a fresh folder (so the first fit of each model
compiles, as on a new machine) and ``--quiet``. A row's ratio is its wall time over its
reference's:

- ``import``: ``python -c "import numpy, pandas"``, the reference of ``--version`` and
  ``--help`` (at most 1);
- a fit without ``--out``: the reference of the same fit with ``--out`` (the cost of
  writing the run folder) and of ``report`` of that run;
- ``numpyro GLM`` (where numpyro is installed): a logistic agent x task GLM with NUTS on
  the same runs (4 chains x 1000 draws after 1000 tuning steps, one core), the peer a
  team would write by hand, and the reference of the crossed fit without ``--out``.

The pooled example's ``hierarchical`` (cold: an empty compile cache; warm: the cache the
cold process left), ``joint`` (cold) and ``compare --models mats2024 hierarchical`` are
timed too, against ``import``. The GLM reads a run table with ``agent``, ``task`` and
``success`` columns (METR's as ``--from metr`` reads them).

Peak memory is the process's maximum resident set (``os.wait4``: the largest of the
command and the processes it waited for, such as the report's drawing process); the
folder's size is every file it holds. ``import pymc`` and ``import pymc, nutpie`` say what
nutpie's own imports (ArviZ, its plots, matplotlib) cost every process that samples. The
targets of the package on 2 cores are printed beside each row.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POOLED = ROOT / "data" / "example_pooled.csv"
ROWS = ("startup", "exact", "crossed", "shared", "pooled", "glm")
GLM = """
import sys, time
import numpy as np, pandas as pd, jax, numpyro, numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
jax.config.update("jax_enable_x64", True)
runs = pd.read_csv(sys.argv[1])
agent, agents = pd.factorize(runs["agent"])
task, tasks = pd.factorize(runs["task"])
success = runs["success"].to_numpy(int)

def model(agent, task, success=None):
    mu = numpyro.sample("mu", dist.Normal(0, 2))
    sa = numpyro.sample("sigma_agent", dist.HalfNormal(1))
    st = numpyro.sample("sigma_task", dist.HalfNormal(2))
    with numpyro.plate("agents", len(agents)):
        a = numpyro.sample("a", dist.Normal(0, 1))
    with numpyro.plate("tasks", len(tasks)):
        t = numpyro.sample("t", dist.Normal(0, 1))
    logit = mu + sa * a[agent] + st * t[task]
    numpyro.sample("y", dist.Bernoulli(logits=logit), obs=success)

mcmc = MCMC(NUTS(model, target_accept_prob=0.95), num_warmup=1000, num_samples=1000,
            num_chains=4, chain_method="sequential", progress_bar=False)
mcmc.run(jax.random.PRNGKey(0), agent, task, success)
"""


def measured(command: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MB) of ``command`` in a new process."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}\n{process.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


class Table:
    """Rows printed as they are measured: what, seconds, reference, ratio, memory, folder."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        print("| command | wall s | reference | ratio | peak MB | folder MB | target (2 cores) |")
        print("|---|---|---|---|---|---|---|")

    def row(self, name, wall, memory, reference=None, folder=None, target=""):
        self.seconds[name] = wall
        ratio = f"{wall / self.seconds[reference]:.2f}" if reference in self.seconds else ""
        size = f"{folder_mb(folder):.1f}" if folder is not None else ""
        peak = "" if memory is None else f"{memory:.0f}"
        print(
            f"| {name} | {wall:.1f} | {reference or ''} | {ratio} | {peak} | {size} | {target} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", help="a real-size run table (METR's public runs)")
    parser.add_argument("--from", dest="input_format", default="metr")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    args = parser.parse_args()
    cli = [sys.executable, "-m", "bayes_eval"]
    table = Table()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}
        fit = [*cli, "fit", args.runs, "--from", args.input_format, "--quiet"]
        if "startup" in args.rows:
            table.row(
                "import numpy, pandas", *measured([sys.executable, "-c", "import numpy, pandas"])
            )
            for flag in ("--version", "--help"):
                table.row(
                    f"bayes-eval {flag}",
                    *measured([*cli, flag]),
                    "import numpy, pandas",
                    target="ratio <= 1",
                )
        if "glm" in args.rows:
            try:
                import numpyro  # noqa: F401
            except ImportError:
                print("| numpyro GLM | | | | | | numpyro not installed |")
            else:
                script = tmp / "glm.py"
                script.write_text(GLM)
                glm_env = {**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
                table.row(
                    "numpyro GLM", *measured([sys.executable, str(script), args.runs], glm_env)
                )
        cases = {
            "exact": (
                "default exact model",
                ["--threshold", "0.05"],
                "at most 3 s over the fit, folder <= 5 MB",
            ),
            "crossed": (
                "crossed",
                ["--model", "crossed", "--threshold", "0.05"],
                "<= 15 s, <= 600 MB, folder <= 10 MB",
            ),
            "shared": (
                "end_to_end_shared --attempts 10,1e6",
                ["--model", "end_to_end_shared", "--attempts", "10,1e6"],
                "<= 60 s, <= 800 MB, folder <= 30 MB",
            ),
        }
        for key, (name, flags, target) in cases.items():
            if key not in args.rows:
                continue
            bare = f"{name}, no --out"
            reference = "numpyro GLM" if key == "crossed" else None
            table.row(bare, *measured([*fit, *flags], env), reference)
            run = tmp / key
            wall, memory = measured([*fit, *flags, "--out", str(run)], env)
            table.row(f"{name}, --out", wall, memory, bare, run, target)
            if key == "exact":  # the cost of the run folder, beside its own target
                over = wall - table.seconds[bare]
                table.row(f"{name}, --out over the fit", over, None, target="<= 3 s")
            if key == "crossed":
                report = [
                    *cli,
                    "report",
                    str(run),
                    "--threshold",
                    "0.05",
                    "--out",
                    str(tmp / "report"),
                    "--quiet",
                ]
                wall, memory = measured(report, env)
                table.row(
                    "report of the crossed run", wall, memory, bare, tmp / "report", "<= 20 s"
                )
        if "pooled" in args.rows:
            pooled = [*cli, "fit", str(POOLED), "--quiet"]
            cold = {**env, "XDG_CACHE_HOME": str(tmp / "cold")}
            for model, state, target in (
                ("hierarchical", "cold", "<= 10 s"),
                ("hierarchical", "warm", "<= 4 s"),
                ("joint", "cold", "<= 20 s"),
            ):
                if state == "cold":
                    cold = {**env, "XDG_CACHE_HOME": str(tmp / f"cold-{model}")}
                wall, memory = measured([*pooled, "--model", model], cold)
                reference = "import numpy, pandas" if "startup" in args.rows else None
                table.row(
                    f"pooled example {model}, {state}", wall, memory, reference, target=target
                )
            # what nutpie imports beyond PyMC (ArviZ, its plots, matplotlib), outside the
            # package, in every process that samples with it
            table.row("import pymc", *measured([sys.executable, "-c", "import pymc"]))
            table.row(
                "import pymc, nutpie", *measured([sys.executable, "-c", "import pymc, nutpie"])
            )
            nutpie = table.seconds["import pymc, nutpie"] - table.seconds["import pymc"]
            table.row("nutpie's imports beyond PyMC", nutpie, None)
            compare = [*cli, "compare", str(POOLED), "--models", "mats2024", "hierarchical"]
            table.row(
                "compare pooled example mats2024 hierarchical", *measured(compare, cold), reference
            )


if __name__ == "__main__":
    main()
