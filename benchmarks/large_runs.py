"""Reading a large run file: the pyarrow reader against the row-by-row one, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/large_runs.py [--rows 1000000] [--agents 20] [--tasks 500] [--seed 0]

Writes a per-run file (``runs`` format: agent, task, step (empty for end-to-end runs, 1-5
for milestone runs), success, run id) as CSV and as Parquet in a temporary folder, then
reads each in a fresh process, once through ``read_runs`` (pyarrow in batches) and once
with that path switched off (row by row, the reader before it). Printed per read: wall
time, rows per second, the process's peak resident memory (VmHWM, Linux; imports
included, the bare imports' peak printed first), the cells, and whether the evidence (its
hash) is the same as the row-by-row reader's.

Then the whole command, ``bayes-eval fit runs.csv --runs --model end_to_end --format csv``
(the end-to-end fit, its checks and the milestone-assumption check of the milestone runs),
in a fresh process, against the issue's target: at most twice pandas' pyarrow read of the
same file plus start-up (``bayes-eval --version``), and under 300 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from big_table import timed  # this folder is on the path when the script runs

READ = """
import json, sys, time
from bayes_eval.evidence import columnar, runs
if sys.argv[2] == "row-by-row":
    columnar.read_counts = lambda *args: None
if sys.argv[2] != "imports only":
    start = time.perf_counter()
    evidence = runs.read_runs(sys.argv[1], "runs")
    seconds = time.perf_counter() - start
    cells, digest = len(evidence.table), evidence.hash
else:
    seconds, cells, digest = 0.0, 0, ""
# VmHWM: this process's peak since exec (ru_maxrss would keep the parent's at fork)
status = open("/proc/self/status").read().split("VmHWM:")[1]
peak = int(status.split()[0]) / 1024
print(json.dumps(dict(seconds=seconds, peak_mb=peak, cells=cells, hash=digest)))
"""


PANDAS_READ = """
import sys, time
import pandas as pd
start = time.perf_counter()
pd.read_csv(sys.argv[1], engine="pyarrow")
print(time.perf_counter() - start)
"""


def write_file(folder: Path, rows: int, agents: int, tasks: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    step = rng.integers(0, 6, rows)
    table = pd.DataFrame(
        {
            "agent": np.array([f"agent-{i}" for i in range(agents)])[rng.integers(0, agents, rows)],
            "task": np.array([f"task_{i:04d}" for i in range(tasks)])[rng.integers(0, tasks, rows)],
            "step": np.where(step == 0, "", step.astype(str)),
            "success": rng.integers(0, 2, rows),
            "run": [f"r{i}" for i in range(rows)],
        }
    )
    table.to_csv(folder / "runs.csv", index=False)
    table.to_parquet(folder / "runs.parquet")
    return folder


def read(path: Path, how: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", READ, str(path), how], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_file(Path(tmp), args.rows, args.agents, args.tasks, args.seed)
        base = read(folder / "runs.csv", "imports only")
        print(f"{args.rows:,} runs; peak memory of the imports alone: {base['peak_mb']:.0f} MB")
        rows = []
        for name in ("runs.csv", "runs.parquet"):
            found = {how: read(folder / name, how) for how in ("pyarrow", "row-by-row")}
            for how, result in found.items():
                rows.append(
                    {
                        "file": name,
                        "reader": how,
                        "seconds": round(result["seconds"], 2),
                        "rows_per_s": f"{args.rows / result['seconds']:,.0f}",
                        "peak_mb": round(result["peak_mb"]),
                        "cells": result["cells"],
                        "same_evidence": result["hash"] == found["row-by-row"]["hash"],
                    }
                )
            speed = found["row-by-row"]["seconds"] / found["pyarrow"]["seconds"]
            rows[-2]["speed_up"] = rows[-1]["speed_up"] = round(speed, 1)
        print(pd.DataFrame(rows).to_string(index=False))
        whole_file(folder / "runs.csv")


def whole_file(path: Path) -> None:
    """The fit of the run file against pandas' pyarrow read of it plus start-up."""
    read_s = float(
        subprocess.run(
            [sys.executable, "-c", PANDAS_READ, str(path)], capture_output=True, text=True
        ).stdout
    )
    start_s, _ = timed([sys.executable, "-m", "bayes_eval", "--version"])
    command = [sys.executable, "-m", "bayes_eval", "fit", str(path), "--runs"]
    fit_s, fit_mb = timed(command + ["--model", "end_to_end", "--format", "csv"])
    allowed = 2 * read_s + start_s
    print(f"pandas read_csv(engine='pyarrow') {read_s:.2f} s; bayes-eval --version {start_s:.2f} s")
    print(f"bayes-eval fit --runs --model end_to_end: {fit_s:.1f} s, peak {fit_mb:.0f} MB")
    print(f"ratio {fit_s / allowed:.1f} of the target (2 x read + start-up = {allowed:.2f} s)")


if __name__ == "__main__":
    main()
