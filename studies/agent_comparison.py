"""Do the bounds of an agent comparison hold, on truths outside the models' families?

    python studies/agent_comparison.py [--models end_to_end end_to_end_pooled crossed]
        [--families logit_normal beta zero_inflated] [--tables 2] [--agents 6]
        [--tasks 20] [--runs 4] [--level 0.975] [--seed 0]

Simulates tables as ``studies/bound_coverage.py`` does (abilities evenly from -7 to +1 on
the logit scale, so neighbouring agents differ by 1.6; each family's departures from
the additive form; ``--runs`` end-to-end runs per cell), fits each model at its defaults
and compares every agent with the next stronger one (``bayes_eval.compare_agents``).
Per task, the one-sided bounds of ``P_B - P_A`` at ``--level`` against the true
difference: the share of upper bounds the truth lies above and of lower bounds it lies
below (each should be at most ``1 - level``), among all tasks, among tasks where both
agents had no success, and for the weakest pair of agents on its own; and how often
``P(P_B > P_A) > level`` although the truth says A is at least as capable (a false
claim that B is ahead).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import compare_agents, fit
from bayes_eval.messages import collected

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bound_coverage import FAMILIES, simulate_table  # noqa: E402

MODELS = ("end_to_end", "end_to_end_pooled", "crossed")


def comparisons(model, family, index, agents, tasks, runs, level, seed) -> pd.DataFrame:
    """One table of ``family``, fitted by ``model``: a row per (pair of neighbours, task)
    with the truth, the bounds and whether each held."""
    rng = np.random.default_rng(seed + 1000 * FAMILIES.index(family) + index)
    table = simulate_table(family, agents, tasks, runs, rng)
    evidence = table["evidence"]
    with collected():  # the simulated tables' notes
        posterior = fit(evidence[evidence["method"] == "end_to_end"], model, seed=seed + index)
    truth = table["truth"].set_index(["agent", "task"])
    names = list(dict.fromkeys(truth.index.get_level_values("agent")))
    rows = []
    for rank, (a, b) in enumerate(zip(names, names[1:], strict=False)):
        result = compare_agents(posterior, a, b, level=level).table
        for row in result[result["task"] != "(across tasks)"].itertuples():
            true_a, true_b = truth.loc[(a, row.task), "truth"], truth.loc[(b, row.task), "truth"]
            zero = truth.loc[(a, row.task), "successes"] + truth.loc[(b, row.task), "successes"]
            rows.append(
                dict(
                    model=model,
                    family=family,
                    table=index,
                    weakest=rank == 0,
                    both_zero=zero == 0,
                    truth=true_b - true_a,
                    above_upper=true_b - true_a > row.diff_upper,
                    below_lower=true_b - true_a < row.diff_lower,
                    false_ahead=row.prob_b_greater > level and true_b <= true_a,
                    passed=posterior.diagnostics is None or bool(posterior.diagnostics.ok),
                )
            )
    return pd.DataFrame(rows)


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Per model and family: the shares of bounds missed, overall and on the hard cells."""
    out = []
    for (model, family), rows in results.groupby(["model", "family"], sort=False):
        zero, weak = rows[rows["both_zero"]], rows[rows["weakest"]]
        out.append(
            dict(
                model=model,
                family=family,
                tasks=len(rows),
                upper_missed=rows["above_upper"].mean(),
                lower_missed=rows["below_lower"].mean(),
                both_zero=len(zero),
                upper_missed_both_zero=zero["above_upper"].mean(),
                lower_missed_both_zero=zero["below_lower"].mean(),
                upper_missed_weakest=weak["above_upper"].mean(),
                lower_missed_weakest=weak["below_lower"].mean(),
                false_ahead=rows["false_ahead"].mean(),
                fits_passed=rows.groupby("table")["passed"].first().mean(),
            )
        )
    return pd.DataFrame(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--tables", type=int, default=2)
    parser.add_argument("--agents", type=int, default=6)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--level", type=float, default=0.975)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    frames = [
        comparisons(model, family, index, args.agents, args.tasks, args.runs, args.level, args.seed)
        for family in args.families
        for index in range(args.tables)
        for model in args.models
    ]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summarise(pd.concat(frames, ignore_index=True)).round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
