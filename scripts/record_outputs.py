"""Record the CSV files that fitting every shipped example writes, so that a change of the
code can be checked to leave the numbers byte for byte (``tests/test_shipped_outputs.py``).

    python scripts/record_outputs.py [--out tests/data/shipped_outputs]

Each case is ``bayes-eval fit data/DATASET.csv --model MODEL --out DIR``, at the spec's
own level and seed, as a user runs it from a clone; its CSV files (``summary.csv``,
``ppc.csv`` and, where the table has milestone and end-to-end runs,
``milestone_check.csv``) are kept as ``DATASET.MODEL.FILE``. ``RECORDED.md`` beside them
names the commit, the numerical stack and the processor that recorded them
(``stack.json``): the files are the same bytes on the same stack and processor (another
processor may move the last digits of the exact models' numbers, and MCMC draws compiled
for it). Record again, in a commit of its own that says why, only when a change of the
numbers is meant.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXACT = (
    ("example_evidence", "phuong_chain"),
    ("example_evidence", "end_to_end"),
    ("example_evidence", "mats2024"),
    ("example_evidence", "phuong2024"),
    ("example_evidence", "ecr2024"),
    ("mats2024_counts", "phuong2024"),
    ("mats2024_counts", "mats2024"),
)
POOLED = (
    ("example_evidence", "ecr_pooled"),
    ("example_pooled", "end_to_end_pooled"),
    ("example_pooled", "hierarchical"),
    ("example_pooled", "joint"),
    ("example_pooled", "crossed"),
    ("example_pooled", "crossed_milestones"),
)
CASES = EXACT + POOLED
STACK = ("numpy", "scipy", "pandas", "xarray", "pymc", "pytensor", "nutpie", "arviz")


def outputs(dataset: str, model: str) -> dict[str, bytes]:
    """The CSV files of ``bayes-eval fit data/DATASET.csv --model MODEL --out DIR``, by the
    name they are recorded under."""
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder) / "run"
        command = [sys.executable, "-m", "bayes_eval", "fit", str(ROOT / "data" / f"{dataset}.csv")]
        done = subprocess.run(
            [*command, "--model", model, "--out", str(run), "--quiet"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{dataset} with {model} failed: {done.stderr.strip()}")
        return {f"{dataset}.{model}.{path.name}": path.read_bytes() for path in run.glob("*.csv")}


def moved(old: bytes, new: bytes) -> str:
    """How far a summary's upper bounds moved between two recordings: the largest change
    relative to the old bound, and, for MCMC fits, in units of the two bounds' combined
    Monte Carlo standard error."""
    import numpy as np
    import pandas as pd

    a, b = (pd.read_csv(io.BytesIO(content)) for content in (old, new))
    if len(a) != len(b) or list(a["task"]) != list(b["task"]):
        return "another table of pairs"
    change = (b["upper"] - a["upper"]).abs()
    text = f"upper bounds moved by at most {(change / a['upper']).max():.2g} relative"
    if "upper_mcse" in a and a["upper_mcse"].notna().any():
        z = change / np.hypot(a["upper_mcse"], b["upper_mcse"])
        text += f", {z.max():.2f} combined MCSE"
    return text


def stack() -> dict[str, str]:
    """The numerical stack and the processor the numbers depend on: a change of either may
    move the last digits (numpy's vectorised exp and log differ between processors)."""
    versions = {name: metadata.version(name) for name in STACK}
    cpu, simd = platform.processor() or platform.machine(), ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        cpu = fields.get("model name", cpu)
        flags = fields.get("flags", "").split()
        simd = " ".join(sorted(f for f in flags if f.startswith(("avx", "fma", "sse4"))))
    return {**versions, "cpu": cpu, "simd": simd}


def provenance(recorded: dict[str, str], dirty: bool) -> str:
    """``RECORDED.md``: the commit (``dirty``: with changes not committed), Python, the
    stack and the processor that recorded the files."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    versions = ", ".join(f"{name} {recorded[name]}" for name in STACK)
    state = " (with uncommitted changes)" if dirty else ""
    return (
        "# Recorded outputs of the shipped examples\n\n"
        f"Recorded by `python scripts/record_outputs.py` at commit {commit}{state}, on\n"
        f"Python {platform.python_version()}, {recorded['cpu']} ({recorded['simd']}), with\n"
        f"{versions}\n"
        "(`stack.json`).\n"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "shipped_outputs"))
    out = Path(parser.parse_args(argv).out)
    dirty = subprocess.run(  # before the files are written, which would count themselves
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    out.mkdir(parents=True, exist_ok=True)
    earlier = {path.name: path.read_bytes() for path in out.glob("*.csv")}
    for old in out.glob("*.csv"):
        old.unlink()
    for dataset, model in CASES:
        written = outputs(dataset, model)
        for name, content in written.items():
            (out / name).write_bytes(content)
        summary = f"{dataset}.{model}.summary.csv"
        said = "recorded"
        if summary in earlier and earlier[summary] != written[summary]:
            said += f" ({moved(earlier[summary], written[summary])})"
        elif summary in earlier:
            said += " (the same summary)"
        print(f"{dataset} with {model}: {said}", file=sys.stderr)
    recorded = stack()
    (out / "stack.json").write_text(json.dumps(recorded, indent=1) + "\n")
    (out / "RECORDED.md").write_text(provenance(recorded, bool(dirty)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
