"""A large end-to-end evidence table through the command line, against the target, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/big_table.py [--cells 200000] [--agents 200] [--seed 0]

Writes a table of one row per (agent, task) cell, 1 to 10 runs each with a rate drawn from
Beta(0.5, 3) (so many cells have no success), then runs ``bayes-eval fit TABLE --model
end_to_end --format csv`` in a fresh process and prints its wall time and peak memory
(that child's own maximum resident set), beside what the arithmetic alone costs: importing
pandas and scipy.stats and computing every cell's Beta quantiles with one
``scipy.stats.beta.ppf`` call, in another fresh process. The issue's target for 200,000
cells: at most 15 s and 1 GB, end to end.
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
import pandas as pd

BASELINE = """
import sys
import pandas as pd
from scipy import stats
table = pd.read_csv(sys.argv[1])
k, n = table["successes"].to_numpy(), table["trials"].to_numpy()
stats.beta.ppf([[0.05], [0.5], [0.95]], k + 1, n - k + 1)
"""


def write_table(path: Path, cells: int, agents: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    trials = rng.integers(1, 11, cells)
    pd.DataFrame(
        {
            "agent": [f"agent-{n % agents:04d}" for n in range(cells)],
            "task": [f"task-{n // agents:06d}" for n in range(cells)],
            "method": "end_to_end",
            "successes": rng.binomial(trials, rng.beta(0.5, 3, cells)),
            "trials": trials,
        }
    ).to_csv(path, index=False)


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of ``command`` in a fresh process."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own peak (ru_maxrss, KB)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200_000)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "table.csv"
        write_table(table, args.cells, args.agents, args.seed)
        base_s, base_mb = timed([sys.executable, "-c", BASELINE, str(table)])
        fit = [sys.executable, "-m", "bayes_eval", "fit", str(table), "--model", "end_to_end"]
        fit_s, fit_mb = timed(fit + ["--format", "csv"])
    print(f"{args.cells:,} cells, one row each")
    print(f"{'':<44} {'seconds':>8} {'peak MB':>8}")
    print(f"{'read + scipy.stats.beta.ppf of every cell':<44} {base_s:>8.1f} {base_mb:>8.0f}")
    print(f"{'bayes-eval fit --model end_to_end':<44} {fit_s:>8.1f} {fit_mb:>8.0f}")
    print(f"ratio {fit_s / base_s:.1f}x the arithmetic; target 15 s and 1,024 MB at 200,000 cells")


if __name__ == "__main__":
    main()
