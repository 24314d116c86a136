"""Forecasts of later agents backtested on METR's runs: ``time_horizon`` beside METR's
method extrapolated, at every release-date cut-off that leaves at least three later agents
(``bayes_eval.checks.backtest``).

Data: METR's public runs (``--runs``, the compacted ``metr_runs.csv``) without the human
baseliners, and the agents' release dates (``--dates``). At each cut-off both methods see
only the earlier agents' runs; each later agent is predicted from its release date alone.

Run::

    python studies/backtest_metr.py --runs PATH/metr_runs.csv --dates PATH/metr_release_dates.csv \\
        --out studies/results

(one ``time_horizon`` fit per cut-off, about four minutes on 2 cores; ``--models
time_horizon time_horizon_2pl`` adds the 2PL variant's, about ten minutes more).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from bayes_eval import read_runs
from bayes_eval.checks.backtest import backtest
from bayes_eval.evidence.table import load_evidence


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, type=Path)
    parser.add_argument("--dates", required=True, type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--models", nargs="+", default=["time_horizon"])
    args = parser.parse_args(argv)
    runs = read_runs(args.runs, "metr")
    table = runs.table[runs.table["agent"] != "human"]
    columns = ["agent", "task", "method", "successes", "trials", *runs.kept]
    evidence = load_evidence(table[columns].reset_index(drop=True), keep_columns=True)
    start = time.perf_counter()
    dates = pd.read_csv(args.dates)
    result = backtest(evidence, dates, models=args.models, bootstrap=args.bootstrap, seed=args.seed)
    seconds = time.perf_counter() - start
    shown = result.table.assign(cutoff=result.table["cutoff"].map(lambda y: f"{y:.2f}"))
    print("| " + " | ".join(shown.columns) + " |")
    print("|" + "---|" * len(shown.columns))
    for row in shown.itertuples(index=False):
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in row]
        print("| " + " | ".join(cells) + " |")
    for note in result.notes:
        print(f"note: {note}")
    totals = result.table.groupby("method")[["log_score", "pairs"]].sum()
    print(f"\nlog score over every cut-off: {totals['log_score'].round(1).to_dict()}")
    print(f"{seconds:.0f} s")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result.table.to_csv(args.out / "backtest_metr.csv", index=False)
        result.pairs.to_csv(args.out / "backtest_metr_pairs.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
