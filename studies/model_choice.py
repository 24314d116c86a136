"""Does ``compare --holdout end_to_end`` pick the model a table was drawn from?

    python studies/model_choice.py [--tables 10] [--folds 2] [--agents 6] [--tasks 15]
        [--trials 2] [--draws 500] [--tune 500] [--seed 0] [--out studies/results]
        [--families no_bypass bypass crossed] [--workers N | --scheduler ADDRESS]

Tables of ``--agents`` x ``--tasks`` pairs, ``--trials`` trials per cell, are drawn from
the generative stories of the candidate models (``--families``, default the first three):

- ``no_bypass`` (``hierarchical``'s): every pair run on 2 to 4 milestones and end to end.
  Per agent a mean milestone rate ``mu_a ~ U(0.5, 0.95)``; per pair a task mean ``~
  Beta(10 mu_a, 10 (1 - mu_a))``; per milestone a rate ``~ Beta(20 m, 20 (1 - m))``
  around it; the end-to-end rate is their product.
- ``bypass`` (``joint``'s): the same, with a bypass ``lambda ~ Beta(1, 3)`` per pair, so
  that ``P = Q + (1 - Q) lambda``.
- ``crossed`` (``crossed``'s): end-to-end runs alone, ``logit P = theta_a - b_t + 0.5 e``
  with ``theta_a ~ N(0, 1)``, ``b_t ~ N(0, 1.5)``, ``e ~ N(0, 1)``. The crossed model
  reads no milestone, and its story has none.
- ``guided``: the crossed story's end-to-end runs, and 2 to 4 guided milestone runs of
  each pair, ``logit p_m = theta_a - b_t + u_m``, ``u_m ~ N(1, 1)`` (a guided step is
  easier than the whole task), without the pair's departure ``e``, so that they do not
  multiply to ``P`` but carry the pair's agent and task effects: a model that reads the
  hidden pair's own milestones may then predict it better than the true one, which
  reads none.

Each table's candidates (``hierarchical``, ``joint``, ``crossed``; and
``end_to_end_pooled``, the other model of end-to-end runs alone, for the tables without
milestones, where the two milestone models cannot predict) are ranked by
``bayes_eval.compare_holdout`` (``--folds``-fold over pairs, the fits on a dask cluster
with ``--workers`` or ``--scheduler``). Prints, per family, how often the model the table
was drawn from ranks first, and how often it is first or within two standard errors of
the first; writes one row per table and ranked model to ``model_choice.csv``, table by
table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from bayes_eval import compare_holdout
from bayes_eval.inference.sweep import place_arguments
from bayes_eval.messages import collected

# Each family and the candidate whose generative story it is.
FAMILIES = {
    "no_bypass": "hierarchical",
    "bypass": "joint",
    "crossed": "crossed",
    "guided": "crossed",
}
CANDIDATES = ("hierarchical", "joint", "crossed")
# The families without milestone rows, and the candidate added for them.
END_TO_END_ONLY, END_TO_END_CANDIDATE = ("crossed",), "end_to_end_pooled"


def simulate_table(family: str, agents: int, tasks: int, trials: int, rng) -> pd.DataFrame:
    """One table of ``family`` (the module's stories): the end-to-end rows of every pair,
    and its milestone rows where the story has them."""
    milestones = rng.integers(2, 5, tasks)
    if family in ("crossed", "guided"):
        theta, b = rng.normal(0.0, 1.0, agents), rng.normal(0.0, 1.5, tasks)
        noise = rng.normal(0.0, 1.0, (agents, tasks))
        rate = special.expit(theta[:, None] - b[None, :] + 0.5 * noise)
    else:
        mu = rng.uniform(0.5, 0.95, agents)
    rows = []
    for a in range(agents):
        for t in range(tasks):
            if family in ("crossed", "guided"):
                guided = theta[a] - b[t] + rng.normal(1.0, 1.0, milestones[t])
                p, truth = special.expit(guided)[: 0 if family == "crossed" else None], rate[a, t]
            else:
                mean = rng.beta(10 * mu[a], 10 * (1 - mu[a]))
                p = rng.beta(20 * mean, 20 * (1 - mean), milestones[t])
                truth = p.prod()
                if family == "bypass":
                    truth += (1 - truth) * rng.beta(1.0, 3.0)
            agent, task = f"agent_{a}", f"task_{t:02d}"
            for m, rate_m in enumerate(p):
                rows.append((agent, task, "milestone", m + 1, rng.binomial(trials, rate_m), trials))
            rows.append((agent, task, "end_to_end", np.nan, rng.binomial(trials, truth), trials))
    columns = ["agent", "task", "method", "step", "successes", "trials"]
    return pd.DataFrame(rows, columns=columns)


def study(args, out: Path) -> pd.DataFrame:
    """Every table's ranking, one row per table and ranked candidate, written to
    ``out`` as each table ends."""
    sampler = {"draws": args.draws, "tune": args.tune}
    place = {"workers": args.workers, "scheduler": args.scheduler}
    rows = []
    for index in range(args.tables):  # every family's first table, then the second, ...
        for family in args.families:
            truth, start = FAMILIES[family], time.perf_counter()
            rng = np.random.default_rng([args.seed, list(FAMILIES).index(family), index])
            table = simulate_table(family, args.agents, args.tasks, args.trials, rng)
            candidates = CANDIDATES
            if family in END_TO_END_ONLY:
                candidates += (END_TO_END_CANDIDATE,)
            with collected():  # the candidates' notes on the rows each leaves out
                result = compare_holdout(
                    table, candidates, folds=args.folds, seed=args.seed, sampler=sampler, **place
                )
            ranking = result.table
            best = ranking.index[0]
            for model in ranking.index:
                rows.append(
                    dict(
                        family=family,
                        table=index,
                        truth=truth,
                        model=model,
                        rank=int(ranking.at[model, "rank"]),
                        elpd=float(ranking.at[model, "elpd"]),
                        elpd_diff=float(ranking.at[model, "elpd_diff"]),
                        dse=float(ranking.at[model, "dse"]),
                        diagnostics=ranking.at[model, "diagnostics"],
                        picked=model == best,
                    )
                )
            seconds = time.perf_counter() - start
            pd.DataFrame(rows).to_csv(out, index=False)
            print(
                f"{family} table {index}: {', '.join(ranking.index)} ({seconds:.0f} s)", flush=True
            )
    return pd.DataFrame(rows)


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per family: tables, how often the truth ranks first, and how often it is first or
    within two standard errors of the first."""
    truth = rows[rows["model"] == rows["truth"]]
    near = truth["picked"] | (truth["elpd_diff"].abs() <= 2 * truth["dse"])
    return pd.DataFrame(
        {
            "tables": truth.groupby("family", sort=False).size(),
            "truth_first": truth.groupby("family", sort=False)["picked"].sum(),
            "truth_within_noise": near.groupby(truth["family"], sort=False).sum(),
        }
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--folds", type=int, default=2)
    parser.add_argument("--agents", type=int, default=6)
    parser.add_argument("--tasks", type=int, default=15)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="studies/results")
    parser.add_argument(
        "--families", nargs="+", choices=list(FAMILIES), default=["no_bypass", "bypass", "crossed"]
    )
    place_arguments(parser)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = study(args, out / "model_choice.csv")
    print(summarise(rows).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
