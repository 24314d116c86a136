"""An SBC sweep serially and on a 2-worker dask LocalCluster, in one run.

Run from the repository root (needs the package with its ``distributed`` extra):

    python benchmarks/sweep.py [--simulations 40] [--tasks 20] [--workers 2] [--seed 0]

The design: TASKS end-to-end tasks with 1 to 10 trials each (``end_to_end_pooled``).
SBC (99 thinned draws of two chains per simulation) runs once in this process and once on
a LocalCluster of WORKERS single-threaded processes, each worker compiling the model
once. Printed: both wall times (the cluster's start-up included), the speed-up, and
whether the two rank tables are byte-identical.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

warnings.simplefilter("ignore")


def main() -> None:
    from bayes_eval.checks.sbc import sbc

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=40)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    trials = rng.integers(1, 11, args.tasks)
    design = pd.DataFrame(
        dict(
            task=[f"t{i:03d}" for i in range(args.tasks)],
            method="end_to_end",
            successes=rng.binomial(trials, 0.3),
            trials=trials,
        )
    )
    run = dict(simulations=args.simulations, seed=args.seed)
    start = time.perf_counter()
    serial = sbc(design, "end_to_end_pooled", **run)
    serial_s = time.perf_counter() - start
    start = time.perf_counter()
    parallel = sbc(design, "end_to_end_pooled", workers=args.workers, **run)
    parallel_s = time.perf_counter() - start
    same = serial.ranks.to_csv(index=False) == parallel.ranks.to_csv(index=False)
    print(f"SBC, {args.simulations} simulations, {args.tasks} tasks (end_to_end_pooled)")
    print(f"serial:                {serial_s:7.1f} s")
    print(f"{args.workers} workers (LocalCluster): {parallel_s:7.1f} s")
    print(f"speed-up:              {serial_s / parallel_s:7.2f}x")
    print(f"ranks byte-identical:  {same}")


if __name__ == "__main__":
    main()
