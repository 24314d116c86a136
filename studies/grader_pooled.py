"""Do the pooled and crossed bounds hold when the grader errs? ``end_to_end_pooled`` and
``crossed`` (or, with ``--milestones``, ``crossed_milestones``; ``--models hierarchical``
the pooled milestone model) with the grader's audit against the same models taking the
grader as perfect, on tables whose truth is none of the models' family.

    python studies/grader_pooled.py [--models end_to_end_pooled crossed]
        [--tables 30] [--tasks 12] [--runs 100] [--agents 1] [--milestones 0]
        [--sensitivity 0.75] [--specificity 0.995] [--positives 50] [--negatives 500]
        [--level 0.975] [--seed 0] [--csv FILE]

Each table has ``--agents`` stronger and as many weaker agents of ``--tasks`` tasks each:
the stronger agents' true rates log-uniform in [10^-2.5, 10^-0.7], the weaker's in
[10^-3.5, 10^-1.5] (a log-uniform, not the Beta the model pools with), ``--runs`` runs a
task, each graded by a grader of the given sensitivity and specificity, and an audit of
``--positives`` true successes and ``--negatives`` true failures through the same
grader. With ``--milestones M`` each pair is run on M milestones instead, ``--runs`` runs
each, the milestones' true rates log-uniform in [10^-0.9, 10^-0.05] (stronger) and
[10^-1.6, 10^-0.3] (weaker), each milestone's runs graded by the same grader, the truth
their product (not the crossed model's additive logit). Every fit uses NUTS (nutpie) with
the spec's sampler settings; a fit that fails its diagnostics is counted and kept.

Printed per model and bound: the share of pairs whose true rate lies above the one-sided
bound at ``--level`` (at most ``1 - level`` for a bound that holds), among all pairs,
among those graded without a success (on a milestone, with ``--milestones``), and among
the weaker agents'; the median bound; and the fits that failed their diagnostics.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

import bayes_eval
from bayes_eval.messages import collected

# log10 bands of the agents' true rates: the stronger, then the weaker; of a milestone's
MILESTONE_BANDS = {"strong": (-0.9, -0.05), "weak": (-1.6, -0.3)}
BANDS = {"strong": (-2.5, -0.7), "weak": (-3.5, -1.5)}


def table_of(rng, args):
    """One simulated table: its graded counts, each pair's truth (its rate, and its
    graded count or, for milestones, its least) and its grader's audit."""
    rows, truths = [], []
    se, sp, runs = args.sensitivity, args.specificity, args.runs
    steps = max(args.milestones, 1)
    bands = MILESTONE_BANDS if args.milestones else BANDS
    for band, (low, high) in bands.items():
        for copy in range(args.agents):
            agent = band if args.agents == 1 else f"{band}-{copy + 1}"
            rates = 10 ** rng.uniform(low, high, (args.tasks, steps))
            true = rng.binomial(runs, rates)
            graded = rng.binomial(true, se) + rng.binomial(runs - true, 1 - sp)
            for t in range(args.tasks):
                task = f"t{t:02d}"
                truths.append(
                    dict(agent=agent, task=task, truth=rates[t].prod(), graded=graded[t].min())
                )
                for m in range(steps):
                    row = dict(agent=agent, task=task, method="end_to_end")
                    if args.milestones:
                        row.update(method="milestone", step=m + 1)
                    rows.append(row | dict(successes=int(graded[t, m]), trials=runs))
    detected = rng.binomial(args.positives, se)
    cleared = rng.binomial(args.negatives, sp)
    audit = pd.DataFrame(
        dict(
            grader="judge",
            truth=[1, 1, 0, 0],
            graded=[1, 0, 0, 1],
            runs=[detected, args.positives - detected, cleared, args.negatives - cleared],
        )
    )
    return pd.DataFrame(rows), pd.DataFrame(truths), audit[audit["runs"] > 0]


def study(args) -> pd.DataFrame:
    rng = np.random.default_rng(args.seed)
    out = []
    for number in range(args.tables):
        evidence, truths, audit = table_of(rng, args)
        for model in args.models:
            out += cells_of(model, evidence, truths, audit, args.level, number)
        print(f"table {number + 1} of {args.tables} fitted", flush=True)
    return pd.DataFrame(out)


def cells_of(model, evidence, truths, audit, level, number) -> list:
    """The rows of one table's pairs under ``model``, with its audit and without."""
    out = []
    for bound, given in (("audited", audit), ("perfect", None)):
        with collected():
            fit = bayes_eval.fit(evidence, model, audit=given, level=level, seed=number)
        summary = fit.summary().set_index(["agent", "task"])
        for row in truths.itertuples():
            out.append(
                dict(
                    table=number,
                    model=model,
                    bound=bound,
                    agent=row.agent,
                    task=row.task,
                    truth=row.truth,
                    graded=row.graded,
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
        zero, weak = part["graded"] == 0, part["agent"].str.startswith("weak")
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
    parser.add_argument("--models", nargs="+")
    parser.add_argument("--tables", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--agents", type=int, default=1, help="agents of each band")
    parser.add_argument("--milestones", type=int, default=0, help="milestones a task")
    parser.add_argument("--sensitivity", type=float, default=0.75)
    parser.add_argument("--specificity", type=float, default=0.995)
    parser.add_argument("--positives", type=int, default=50)
    parser.add_argument("--negatives", type=int, default=500)
    parser.add_argument("--level", type=float, default=0.975)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="write every cell's bounds here")
    args = parser.parse_args(argv)
    if args.models is None:
        milestones = ["crossed_milestones"]
        args.models = milestones if args.milestones else ["end_to_end_pooled", "crossed"]
    cells = study(args)
    if args.csv:
        cells.to_csv(args.csv, index=False)
    print(summarise(cells).to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
