"""Exact fits of long products (many milestones, many expert steps, many runs) through the
command line, each in a fresh process, with its wall time and peak memory, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/long_products.py

Each case is one task, fitted with ``bayes-eval fit TABLE --model MODEL --format csv``:

- ``mats2024``, 100 milestones at 1 of 100,000 each;
- ``ecr2024``, one run of 200 steps at 0 of 100,000;
- ``ecr2024``, 3 runs of 300 steps at 9 of 10;
- ``ecr2024``, one run of 500 steps, and one of 5,000 steps, at 9 of 10;
- ``ecr2024``, 201 runs of one step: past the limit of 200 runs, refused before any work.

Printed per case: the exit status, the seconds and the child's own peak resident memory,
and the first line of its standard error where it failed. Then, from the library (the
command line refuses it), the exact summary of one task of 400 runs of 5 steps: why the
limit is 200 runs. The contract: each case finishes within a minute or is refused at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = "task,method,step,run,successes,trials"
OVER_THE_LIMIT = """
import resource, time
import numpy as np
from bayes_eval.exact.products import BetaProduct, summarise_products
start = time.perf_counter()
runs = [(np.full(5, 0.02) + k, 0.02 + 10 - k) for k in np.arange(400) % 10]
runs = [(a, np.full(5, b)) for a, b in runs]
summarise_products([BetaProduct(tuple(runs))], np.array([0.025, 0.5, 0.975]))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{time.perf_counter() - start:.1f} {peak:.0f}")
"""


def cases() -> list[tuple[str, str, list[str]]]:
    """(what, model, rows) of each case."""
    return [
        (
            "100 milestones at 1/100,000",
            "mats2024",
            [f"t,milestone,{m},,1,100000" for m in range(1, 101)],
        ),
        (
            "1 run of 200 steps at 0/100,000",
            "ecr2024",
            [f"t,expert_completion,{s},1,0,100000" for s in range(1, 201)],
        ),
        ("3 runs of 300 steps at 9/10", "ecr2024", _steps(3, 300)),
        ("1 run of 500 steps at 9/10", "ecr2024", _steps(1, 500)),
        ("1 run of 5,000 steps at 9/10", "ecr2024", _steps(1, 5000)),
        ("201 runs of 1 step (over the limit)", "ecr2024", _steps(201, 1)),
    ]


def _steps(runs: int, steps: int) -> list[str]:
    return [
        f"t,expert_completion,{s},{r},9,10" for r in range(1, runs + 1) for s in range(1, steps + 1)
    ]


def timed(command: list[str]) -> tuple[int, float, float, str]:
    """Exit status, seconds, the child's own peak MB (``os.wait4``) and its first line
    of stderr where it failed."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        err.seek(0)
        first = err.readline().strip()
    code = os.waitstatus_to_exitcode(status)
    return code, seconds, usage.ru_maxrss / 1024, first if code else ""


def main() -> None:
    print(f"{'case':<40} {'model':<9} {'status':>6} {'seconds':>8} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for what, model, rows in cases():
            path = Path(folder) / "table.csv"
            path.write_text("\n".join([HEADER, *rows]) + "\n")
            command = [sys.executable, "-m", "bayes_eval", "fit", str(path), "--model", model]
            status, seconds, peak, first = timed([*command, "--format", "csv"])
            print(f"{what:<40} {model:<9} {status:>6} {seconds:>8.1f} {peak:>8.0f}")
            if first:
                print(f"    {first[:160]}")
    done = subprocess.run([sys.executable, "-c", OVER_THE_LIMIT], capture_output=True, text=True)
    seconds, peak = done.stdout.split()
    print(f"library, 400 runs of 5 steps: summary {seconds} s, peak {peak} MB")


if __name__ == "__main__":
    main()
