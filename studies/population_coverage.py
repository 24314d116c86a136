"""Do the bands of an agent's pass@k across tasks cover the truth, on task populations
the model does not assume?

Each table has ``--agents`` agents, each with its own population of ``--tasks`` task
rates, from one of two families:

* ``u_shaped``: ``Beta(a, b)`` with ``a`` from 0.15 to 0.7 and ``b`` from 0.2 to 0.9 (most
  tasks almost always or almost never solved: METR's and tau-bench's shape);
* ``zero_inflated``: a share ``pi`` from 0.2 to 0.5 of tasks never solvable (rate 0), the
  rest ``Beta(a, b)``, ``a`` and ``b`` from 0.3 to 1.5 (none of the models' own family).

Every (agent, task) cell gets ``--runs`` end-to-end runs; each model in ``--models``
(a spec, or ``NAME@ROLE=P1,P2`` as in ``studies/pass_at_k.py``) is fitted at its defaults
and its population pass@k (``Posterior.population``) is compared, for each ``k`` in
``--attempts``, with the truth: for ``observed tasks`` the mean over the agent's tasks of
``1 - (1 - p_t)^k``; for ``new task`` the population's own, ``(1 - pi) (1 - B(a, b + k) /
B(a, b))``. Reported per family, runs, population and ``k``: the share of agents whose
band (the one-sided bounds at 0.025 and 0.975, a central 95% interval) covers the truth,
the shares missed above its upper bound (the safety-relevant miss) and below, and the
share missed above the one-sided 95% upper bound (``bound``, the package's default).

Run::

    python studies/population_coverage.py --runs 2 5 20 --tables 6
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import fit
from bayes_eval.exact.attempts import mean_at_least_one

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pass_at_k import with_priors  # noqa: E402

FAMILIES = ("u_shaped", "zero_inflated")
LEVEL = 0.975
BOUND = 0.95


def population(family: str, rng) -> dict:
    """One agent's task population: Beta shapes and the share never solvable."""
    if family == "u_shaped":
        return dict(a=rng.uniform(0.15, 0.7), b=rng.uniform(0.2, 0.9), pi=0.0)
    return dict(a=rng.uniform(0.3, 1.5), b=rng.uniform(0.3, 1.5), pi=rng.uniform(0.2, 0.5))


def table(family, agents, tasks, runs, rng):
    """Evidence rows, each agent's population and its task rates."""
    rows, truths = [], {}
    for i in range(agents):
        agent = f"agent-{i}"
        pop = population(family, rng)
        rates = rng.beta(pop["a"], pop["b"], size=tasks)
        rates[rng.uniform(size=tasks) < pop["pi"]] = 0.0
        successes = rng.binomial(runs, rates)
        rows += [
            dict(agent=agent, task=f"t{t:03d}", method="end_to_end", successes=int(s), trials=runs)
            for t, s in enumerate(successes)
        ]
        truths[agent] = (pop, rates)
    return pd.DataFrame(rows), truths


def truth(pop, rates, k) -> dict:
    observed = float(np.mean(-np.expm1(k * np.log1p(-rates))))
    new = (1.0 - pop["pi"]) * float(mean_at_least_one(pop["a"], pop["b"], k))
    return {"observed tasks": observed, "new task": new}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--models", nargs="+", default=["end_to_end_pooled"])
    parser.add_argument("--runs", nargs="+", type=int, default=[2, 5, 20])
    parser.add_argument("--tables", type=int, default=6)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--attempts", default="1,10,100,10000,1000000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    ks = [int(float(k)) for k in args.attempts.split(",")]
    records = []
    for family in args.families:
        for runs in args.runs:
            for n in range(args.tables):
                rng = np.random.default_rng([args.seed, FAMILIES.index(family), runs, n])
                evidence, truths = table(family, args.agents, args.tasks, runs, rng)
                for model in args.models:
                    started = time.perf_counter()
                    posterior = fit(evidence, with_priors(model))
                    curves = posterior.population(ks, level=LEVEL)
                    bounds = posterior.population(ks, level=BOUND)["pass_at_upper"]
                    ok = bool(posterior.diagnostics.ok)
                    for row, bound in zip(curves.itertuples(), bounds, strict=True):
                        pop, rates = truths[row.agent]
                        value = truth(pop, rates, row.attempts)[row.population]
                        records.append(
                            dict(
                                family=family,
                                runs=runs,
                                table=n,
                                model=model,
                                agent=row.agent,
                                population=row.population,
                                attempts=row.attempts,
                                truth=value,
                                lower=row.pass_at_lower,
                                upper=row.pass_at_upper,
                                above=value > row.pass_at_upper,
                                below=value < row.pass_at_lower,
                                above_bound=value > bound,
                                diagnostics_ok=ok,
                            )
                        )
                    print(
                        f"{family} runs {runs} table {n + 1}/{args.tables} {model}: "
                        f"{time.perf_counter() - started:.0f} s",
                        file=sys.stderr,
                    )
    results = pd.DataFrame(records)
    keys = ["family", "runs", "model", "population", "attempts"]
    summary = results.groupby(keys, sort=False).agg(
        agents=("truth", "size"),
        covered=("above", lambda s: 1 - (s | results.loc[s.index, "below"]).mean()),
        missed_above=("above", "mean"),
        missed_below=("below", "mean"),
        missed_bound=("above_bound", "mean"),
        diagnostics_ok=("diagnostics_ok", "mean"),
    )
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(summary.reset_index().to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        results.to_csv(args.out / "population_coverage.csv", index=False)
        summary.reset_index().to_csv(args.out / "population_coverage_summary.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
