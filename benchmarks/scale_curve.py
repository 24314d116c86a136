"""The crossed model at a programme's size, nutpie against numpyro, in one run; and the
exact route (``end_to_end``) through the same tables.

Run from the repository root (numpyro needs the package's ``jax`` extra; on an NVIDIA GPU
``jax-cuda``):

    python benchmarks/scale_curve.py [--pairs 1000 5000 20000 50000]
        [--engines nutpie numpyro exact] [--timeout 1800] [--seed 0] [--keep DIR]

Each size is a seeded synthetic table of ``benchmarks/crossed_tables.py`` (1,000 pairs:
10 agents x 125 tasks; 5,000: 25 x 250; 20,000: 50 x 500; 50,000: 100 x 625; a fifth of
each never run, 1 to 5 runs a pair). Every fit is the command a user runs, in a new
process, ``bayes-eval fit TABLE --model crossed --threshold 0.05 --out RUN --quiet
--engine ENGINE``, at the spec's defaults with its diagnostics gate and refits, the
compile cache of the package warm from an earlier fit of the same structure (so the
figures are those of a user's second table, not of the first fit on a machine; numpyro's
JAX cache likewise). ``exact`` is ``bayes-eval fit TABLE --model end_to_end --threshold
0.05 --out RUN --quiet``: each pair on its own runs, no MCMC, what the run folder and the
report cost at that size.

Printed per size and engine, as each fit ends: the pairs, wall seconds, peak resident
memory (``os.wait4``), the run folder's size and its ``report.html``'s, whether the
diagnostics passed (and the fits it took), the smallest bulk ESS over the sampled
quantities and per second of wall, the device the provenance names, and the wall time's
ratio to the first engine's (nutpie's by default) at the smallest size; then per engine
the fitted growth, the exponent ``b`` of ``wall = c pairs^b`` by least squares on the
logs. A fit that runs past ``--timeout`` is printed as such and ends its engine's curve.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crossed_tables import SIZES, crossed_table  # noqa: E402
from real_scale import folder_mb  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# The engine name that runs the exact route (``--model end_to_end``) instead of crossed.
EXACT = "exact"
HEADER = (
    "| pairs | engine | wall s | peak MB | folder MB | report.html MB | diagnostics "
    "| least bulk ESS | ESS / s | device | wall / the first engine's at the smallest |"
)


def run_fit(table: Path, out: Path, engine: str, seed: int, timeout: float):
    """Wall seconds, peak resident MB and exit status of one ``fit`` in a new process
    (None for the status where it ran past ``timeout``)."""
    model = "end_to_end" if engine == EXACT else "crossed"
    command = [sys.executable, "-m", "bayes_eval", "fit", str(table), "--model", model]
    command += ["--threshold", "0.05", "--out", str(out), "--quiet", "--seed", str(seed)]
    if engine != EXACT:
        command += ["--engine", engine]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            process.kill()
            os.wait4(process.pid, 0)
            return time.perf_counter() - start, float("nan"), None, ""
        time.sleep(0.2)
    wall = time.perf_counter() - start
    error = process.stderr.read().decode().strip().splitlines()
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), " ".join(error[-1:])


def read_run(out: Path) -> dict:
    """What the run folder says: its size, its report's, the gate, the least bulk ESS of
    the sampled quantities and the device the provenance names."""
    from bayes_eval import load_posterior
    from bayes_eval.inference.retry import fit_attempts

    posterior = load_posterior(out / "posterior.nc")
    diagnostics = posterior.diagnostics
    if diagnostics is None:  # an exact fit
        return dict(
            folder=folder_mb(out),
            report=(out / "report.html").stat().st_size / 2**20,
            passed="exact, no MCMC",
            ess=float("nan"),
            device="-",
        )
    provenance = posterior.summary()["provenance"].iloc[0]
    device = next((part for part in provenance.split("; ") if " chains x " in part), "")
    return dict(
        folder=folder_mb(out),
        report=(out / "report.html").stat().st_size / 2**20,
        passed=("passed" if diagnostics.ok else "failed") + f" ({fit_attempts(provenance)} fits)",
        ess=float(diagnostics.table["ess_bulk"].min()),
        device=device.split(" chains x ")[0].rsplit(" ", 1)[0],
    )


def growth(pairs: list[int], walls: list[float]) -> float:
    """The exponent ``b`` of ``wall = c pairs^b`` (least squares on the logs)."""
    return float(np.polyfit(np.log(pairs), np.log(walls), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", nargs="+", type=int, choices=sorted(SIZES), default=list(SIZES))
    parser.add_argument("--engines", nargs="+", default=["nutpie", "numpyro"])
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="a folder to keep the tables and run folders in")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(args.keep or scratch)
        where.mkdir(parents=True, exist_ok=True)
        tables, pairs_of = {}, {}
        for size in sorted(args.pairs):
            tables[size] = where / f"table_{size}.csv"
            table = crossed_table(*SIZES[size], seed=args.seed)
            table.to_csv(tables[size], index=False)
            pairs_of[size] = len(table)
        smallest = min(tables)
        # a fit of the smallest table first, so that every timed fit finds its compile warm
        for engine in args.engines:
            run_fit(tables[smallest], where / f"warm_{engine}", engine, args.seed, args.timeout)
        print(HEADER)
        print("|---" * (HEADER.count("|") - 1) + "|", flush=True)
        reference, curves = None, {}
        for engine in args.engines:
            for size, table in tables.items():
                out = where / f"run_{engine}_{size}"
                wall, peak, status, error = run_fit(table, out, engine, args.seed, args.timeout)
                pairs = pairs_of[size]
                if status != 0:
                    what = "timed out" if status is None else f"exit {status}: {error}"
                    print(
                        f"| {pairs:,} | {engine} | {wall:.0f} | {peak:.0f} | {what} |", flush=True
                    )
                    break
                run = read_run(out)
                if engine == args.engines[0] and size == smallest:
                    reference = wall
                curves.setdefault(engine, []).append((pairs, wall))
                ratio = f"{wall / reference:.2f}" if reference else ""
                print(
                    f"| {pairs:,} | {engine} | {wall:.1f} | {peak:.0f} | {run['folder']:.1f} "
                    f"| {run['report']:.2f} | {run['passed']} | {run['ess']:.0f} "
                    f"| {run['ess'] / wall:.1f} | {run['device']} | {ratio} |",
                    flush=True,
                )
        print()
        for engine, points in curves.items():
            if len(points) > 1:
                sizes, walls = zip(*points, strict=True)
                print(f"{engine}: wall grows as pairs^{growth(list(sizes), list(walls)):.2f}")


if __name__ == "__main__":
    main()
