"""Where a milestone model's bound of a pair misses: each milestone, or their product?

    python studies/milestone_tails.py [--model crossed_milestones] [--family logit_normal]
        [--seed 0] [--above 0.5]

Fits ``--model`` at its defaults to one table of ``studies/bound_coverage.py`` (seeded as
its first table of ``--family`` with ``--seed``) and compares, per milestone and per pair,
the 97.5% bound with the truth. Prints the share of milestones whose own bound missed,
the share of pairs whose bound (of the product) missed, both among all pairs and among
those whose true rate is above ``--above``, and, for the milestones of those pairs, how
far the posterior mean lies below the truth on the log-odds scale, apart for the pairs
that missed and those that held. Where each milestone's bound holds but the product's
misses, and the missed pairs' milestones all sit low together, the model's milestones
vary independently where the truth's move together.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from bound_coverage import FAMILIES, evidence_for, simulate_table
from scipy import special

from bayes_eval import fit
from bayes_eval.messages import collected


def milestone_tails(model: str, family: str, seed: int, above: float, level: float = 0.975):
    """Per milestone of every pair: its truth, posterior mean and bound, and whether the
    pair's and the milestone's bounds missed; the pairs above ``above`` flagged."""
    rng = np.random.default_rng(seed + 1000 * FAMILIES.index(family))
    table = simulate_table(family, 10, 60, 8, rng)
    with collected():  # the simulated tables' notes
        posterior = fit(evidence_for(model, table["evidence"]), model, seed=seed)
    draws = posterior.tree["posterior"]["p_milestone"]
    cells = [label.split(" / ") for label in draws["milestone_cell"].values]
    per_step = pd.DataFrame(
        {
            "agent": [agent for agent, _, _ in cells],
            "task": [task for _, task, _ in cells],
            "step": [int(at.removeprefix("milestone ")) for _, _, at in cells],
            "mean": draws.mean(("chain", "draw")).values,
            "bound": draws.quantile(level, ("chain", "draw")).values,
        }
    )
    steps = table["milestone_truth"].merge(per_step, on=["agent", "task", "step"])
    assert len(steps) == len(table["milestone_truth"]), "a milestone without its draws"
    pairs = table["truth"].merge(posterior.summary()[["agent", "task", "upper"]])
    pairs["pair_missed"] = pairs["truth"] > pairs["upper"]
    steps = steps.merge(pairs[["agent", "task", "pair_missed"]].assign(pair_truth=pairs["truth"]))
    steps["missed"] = steps["truth"] > steps["bound"]
    steps["gap"] = special.logit(steps["mean"]) - special.logit(steps["truth"])
    steps["high"] = steps["pair_truth"] > above
    return steps, pairs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="crossed_milestones")
    parser.add_argument("--family", default="logit_normal", choices=FAMILIES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--above", type=float, default=0.5)
    args = parser.parse_args(argv)
    steps, pairs = milestone_tails(args.model, args.family, args.seed, args.above)
    high = steps[steps["high"]]
    high_pairs = pairs[pairs["truth"] > args.above]
    print(f"milestones whose own bound missed: {steps['missed'].mean():.1%} of {len(steps)}")
    print(f"  of pairs above {args.above}: {high['missed'].mean():.1%} of {len(high)}")
    print(f"pairs whose bound missed: {pairs['pair_missed'].mean():.1%} of {len(pairs)}")
    print(f"  above {args.above}: {high_pairs['pair_missed'].mean():.1%} of {len(high_pairs)}")
    gaps = high.groupby("pair_missed")["gap"].agg(["mean", "median", "size"])
    print("posterior mean minus truth, log-odds, milestones of pairs above the threshold,")
    print("by whether their pair's bound missed:")
    print(gaps.to_string(float_format="%.2f"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
