"""What a grader's audit costs a fit: each model fitted to the same runs with and without
an audit, in one process, the ratio of their wall times.

Run from the repository root:

    python benchmarks/graded.py [RUNS.csv --from metr] [--models end_to_end end_to_end_pooled]
    python benchmarks/graded.py --milestones 831 --models mats2024 crossed_milestones

Without a run table, the runs are the pooled grader study's first table
(``studies/grader_pooled.py``: 2 agents x 12 tasks, 100 runs a task); with one (METR's
public runs, ``--from metr``), those runs; with ``--milestones PAIRS``, that many simulated
pairs of three milestones of 10 runs each (their rates log-uniform in 0.05-0.9; agents of
28 tasks each, every agent on the same tasks), for the milestone models (exact:
``exact.graded_product``; ``crossed_milestones``). The audit is a near-perfect judge's, 100 of 100
successes found and no false alarm in 900 failures, so that both fits read the same
counts and the same model but for the grader's error. Each fit runs once after a warm-up
fit of the same structure (the compile cache is the machine's), and prints its wall time,
the ratio, and whether the fit passed its diagnostics.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import bayes_eval
from bayes_eval.messages import collected
from bayes_eval.pipeline import read_evidence

AUDIT = pd.DataFrame({"truth": [1, 0], "graded": [1, 0], "runs": [100, 900]})


def runs_of(args):
    """The evidence: the run table given, simulated milestones, or the pooled grader
    study's first table."""
    if args.milestones:
        rng = np.random.default_rng(0)
        rates = 10 ** rng.uniform(-1.3, -0.05, size=(args.milestones, 3))
        rows = [
            (f"agent-{pair // 28}", f"task-{pair % 28}", "milestone", step + 1, k, 10)
            for pair, counts in enumerate(rng.binomial(10, rates))
            for step, k in enumerate(counts)
        ]
        columns = ["agent", "task", "method", "step", "successes", "trials"]
        return bayes_eval.load_evidence(pd.DataFrame(rows, columns=columns))
    if args.runs is not None:
        return read_evidence([args.runs], input_format=args.input_format)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "studies"))
    from grader_pooled import table_of

    study = argparse.Namespace(
        tasks=12,
        runs=100,
        agents=1,
        milestones=0,
        sensitivity=0.75,
        specificity=0.995,
        positives=50,
        negatives=500,
    )
    table, _, _ = table_of(np.random.default_rng(0), study)
    return bayes_eval.load_evidence(table)


def timed(evidence, model, audit):
    with collected():
        start = time.perf_counter()
        fit = bayes_eval.fit(evidence, model, audit=audit)
        fit.summary()
        return time.perf_counter() - start, fit


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", help="a run table (default: a simulated one)")
    parser.add_argument("--from", dest="input_format", default="metr")
    parser.add_argument("--models", nargs="+", default=["end_to_end", "end_to_end_pooled"])
    parser.add_argument("--milestones", type=int, default=0, help="simulated milestone pairs")
    args = parser.parse_args(argv)
    evidence = runs_of(args)
    for model in args.models:
        for audit in (None, AUDIT):  # a warm-up of each structure: its compile cached
            timed(evidence, model, audit)
        plain, _ = timed(evidence, model, None)
        graded, fit = timed(evidence, model, AUDIT)
        ok = fit.diagnostics.ok if fit.diagnostics is not None else True
        print(
            f"{model}: {plain:.1f} s without the audit, {graded:.1f} s with it, "
            f"ratio {graded / plain:.1f} (diagnostics {'passed' if ok else 'failed'})"
        )


if __name__ == "__main__":
    main()
