"""Where to spend a budget of runs when the question is pass@k across an agent's tasks:
the expected-information rule (``bayes_eval.allocation``) against sampling the hardest
tasks (Kazdan et al. 2025) and against uniform allocation, on simulated tables.

Each replicate draws ``--tasks`` task rates from a U-shaped ``Beta(0.3, 0.5)`` (or, with
``--zero-share``, that share never solvable), runs each task ``--initial`` times, fits
``--model`` (``end_to_end_pooled``, or the exact ``end_to_end``), and shares ``--budget``
more runs among the tasks by each rule (in batches of ``--batch``). The new runs are drawn
from the true rates, the model is refitted, and the average pass@k over the tasks at
``--attempts`` is compared with the truth. Reported per rule, over ``--replicates``
replicates (the same tables and the same random outcomes for every rule): the posterior sd
of the average (the rule's own measure: how precisely it is known), its mean absolute
error, the share of replicates whose central 95% interval covers the truth, and how often
the rule's sd was below uniform's.

Run::

    python studies/allocation.py --replicates 40
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from bayes_eval import fit
from bayes_eval.allocation import RULES, allocate

LEVEL = 0.975


def evidence(successes, trials) -> pd.DataFrame:
    tasks = [f"t{t:03d}" for t in range(len(successes))]
    return pd.DataFrame(
        dict(agent="a", task=tasks, method="end_to_end", successes=successes, trials=trials)
    )


def average(posterior, k: int) -> tuple[float, float, float, float]:
    """The average pass@k over the tasks: posterior mean, sd and the central 95% band."""
    row = posterior.population([k], level=LEVEL).iloc[0]
    draws = posterior.draws["p_task"].values.reshape(-1, posterior.draws["p_task"].shape[-1])
    with np.errstate(divide="ignore"):  # a draw of exactly 1: pass@k is 1
        values = (-np.expm1(k * np.log1p(-draws))).mean(axis=1)
    return row.pass_at_mean, float(values.std(ddof=1)), row.pass_at_lower, row.pass_at_upper


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=40)
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--initial", type=int, default=2)
    parser.add_argument("--budget", type=int, default=150)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=100)
    parser.add_argument("--zero-share", type=float, default=0.0)
    parser.add_argument("--model", default="end_to_end_pooled", help="or end_to_end")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    k = args.attempts
    records = []
    for r in range(args.replicates):
        rng = np.random.default_rng([args.seed, r])
        rates = rng.beta(0.3, 0.5, args.tasks)
        rates[rng.uniform(size=args.tasks) < args.zero_share] = 0.0
        truth = float(np.mean(-np.expm1(k * np.log1p(-rates))))
        first = rng.binomial(args.initial, rates)
        posterior = fit(evidence(first, args.initial), args.model)
        # one stream of outcomes per task, shared by the rules: run j of task t is the same
        # Bernoulli draw whichever rule asks for it
        outcomes = rng.uniform(size=(args.tasks, args.budget)) < rates[:, None]
        for rule in RULES:
            plan = allocate(posterior, k, args.budget, rule=rule, batch=args.batch)
            runs = plan["runs"].to_numpy()
            more = np.array([outcomes[t, : runs[t]].sum() for t in range(args.tasks)])
            refit = fit(evidence(first + more, args.initial + runs), args.model)
            mean, sd, low, high = average(refit, k)
            records.append(
                dict(
                    replicate=r,
                    rule=rule,
                    truth=truth,
                    mean=mean,
                    sd=sd,
                    expected_sd=plan.attrs["sd_after"][rule],
                    covered=bool(low <= truth <= high),
                    error=abs(mean - truth),
                )
            )
        print(f"replicate {r + 1}/{args.replicates}", file=sys.stderr)
    results = pd.DataFrame(records)
    uniform = results[results["rule"] == "uniform"].set_index("replicate")["sd"]
    results["below_uniform"] = (
        results["sd"].to_numpy() < uniform.loc[results["replicate"]].to_numpy()
    )
    summary = results.groupby("rule", sort=False).agg(
        sd=("sd", "mean"),
        expected_sd=("expected_sd", "mean"),
        error=("error", "mean"),
        covered=("covered", "mean"),
        sd_below_uniform=("below_uniform", "mean"),
    )
    print(
        f"{args.model}: {args.replicates} replicates, {args.tasks} tasks x {args.initial} "
        f"runs, budget {args.budget} in batches of {args.batch}, pass@{k}"
    )
    print(summary.reset_index().to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
