"""Do the pooled and crossed bounds hold when the grader errs? ``end_to_end_pooled`` and
``crossed`` with the grader's audit against the same models taking the grader as
perfect, on tables whose truth is neither model's family.

    python studies/grader_pooled.py [--models end_to_end_pooled crossed]
        [--tables 30] [--tasks 12] [--runs 100]
        [--sensitivity 0.75] [--specificity 0.995] [--positives 50] [--negatives 500]
        [--level 0.975] [--seed 0] [--csv FILE]

Each table has two agents of ``--tasks`` tasks each: the stronger agent's true rates
log-uniform in [10^-2.5, 10^-0.7], the weaker's in [10^-3.5, 10^-1.5] (a log-uniform, not
the Beta the model pools with), ``--runs`` runs a task, each graded by a grader of the
given sensitivity and specificity, and an audit of ``--positives`` true successes and
``--negatives`` true failures through the same grader. Every fit uses NUTS (nutpie) with
the spec's sampler settings; a fit that fails its diagnostics is counted and kept.

Printed per model and bound: the share of cells whose true rate lies above the one-sided bound at
``--level`` (at most ``1 - level`` for a bound that holds), among all cells, among those
graded without a success, and among the weaker agent's; the median bound; and the fits
that failed their diagnostics.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

import bayes_eval
from bayes_eval.messages import collected

# log10 bands of the agents' true rates: the stronger, then the weaker
BANDS = {"strong": (-2.5, -0.7), "weak": (-3.5, -1.5)}


def table_of(rng, tasks, runs, se, sp, positives, negatives):
    """One simulated table: its graded counts, its truth and its grader's audit."""
    rows = []
    for agent, band in BANDS.items():
        truth = 10 ** rng.uniform(*band, tasks)
        true = rng.binomial(runs, truth)
        graded = rng.binomial(true, se) + rng.binomial(runs - true, 1 - sp)
        for t in range(tasks):
            rows.append(
                dict(
                    agent=agent,
                    task=f"t{t:02d}",
                    method="end_to_end",
                    successes=int(graded[t]),
                    trials=runs,
                    truth=truth[t],
                )
            )
    detected, cleared = rng.binomial(positives, se), rng.binomial(negatives, sp)
    audit = pd.DataFrame(
        dict(
            truth=[1, 1, 0, 0],
            graded=[1, 0, 0, 1],
            runs=[detected, positives - detected, cleared, negatives - cleared],
        )
    )
    return pd.DataFrame(rows), audit[audit["runs"] > 0]


def study(args) -> pd.DataFrame:
    rng = np.random.default_rng(args.seed)
    out = []
    for number in range(args.tables):
        table, audit = table_of(
            rng,
            args.tasks,
            args.runs,
            args.sensitivity,
            args.specificity,
            args.positives,
            args.negatives,
        )
        evidence = table.drop(columns="truth")
        for model in args.models:
            out += cells_of(model, evidence, table, audit, args.level, number)
        print(f"table {number + 1} of {args.tables} fitted", flush=True)
    return pd.DataFrame(out)


def cells_of(model, evidence, table, audit, level, number) -> list:
    """The rows of one table's cells under ``model``, with its audit and without."""
    out = []
    for bound, given in (("audited", audit), ("perfect", None)):
        with collected():
            fit = bayes_eval.fit(evidence, model, audit=given, level=level, seed=number)
        summary = fit.summary().set_index(["agent", "task"])
        for row in table.itertuples():
            out.append(
                dict(
                    table=number,
                    model=model,
                    bound=bound,
                    agent=row.agent,
                    task=row.task,
                    truth=row.truth,
                    graded=row.successes,
                    upper=summary.loc[(row.agent, row.task), "upper"],
                    diagnostics_ok=bool(fit.diagnostics.ok),
                )
            )
    return out


def summarise(cells: pd.DataFrame) -> pd.DataFrame:
    """Per model and bound: misses among all cells, those graded without a success and the
    weaker agent's, the median bound and the fits that failed their diagnostics."""
    rows = []
    for (model, bound), part in cells.groupby(["model", "bound"], sort=False):
        missed = part["truth"] > part["upper"]
        zero, weak = part["graded"] == 0, part["agent"] == "weak"
        fits = part.drop_duplicates("table")
        rows.append(
            dict(
                model=model,
                bound=bound,
                cells=len(part),
                missed=missed.mean(),
                graded_zero=int(zero.sum()),
                missed_zero=missed[zero].mean() if zero.any() else math.nan,
                missed_weak=missed[weak].mean(),
                median_bound=part["upper"].median(),
                failed_fits=int((~fits["diagnostics_ok"]).sum()),
            )
        )
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["end_to_end_pooled", "crossed"])
    parser.add_argument("--tables", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--sensitivity", type=float, default=0.75)
    parser.add_argument("--specificity", type=float, default=0.995)
    parser.add_argument("--positives", type=int, default=50)
    parser.add_argument("--negatives", type=int, default=500)
    parser.add_argument("--level", type=float, default=0.975)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="write every cell's bounds here")
    args = parser.parse_args(argv)
    cells = study(args)
    if args.csv:
        cells.to_csv(args.csv, index=False)
    print(summarise(cells).to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
