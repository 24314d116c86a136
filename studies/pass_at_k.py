"""pass@k and pass^k of held-out runs on METR's public runs: does a model predict, from a
few runs per (agent, task), the chance of at least one success and of all successes in
the runs it has not seen?

Data: METR's "Measuring AI Ability to Complete Long Tasks" runs (``--runs``, the compacted
``metr_runs.csv``), or tau-bench's trajectories (``taubench_gpt4o_airline.csv``, 50 tasks
x 4 trials, with ``--cell-runs 4``). The cells with exactly ``--cell-runs`` runs (8) of
every agent but METR's human baseliners are kept (473 cells of 8 agents). In each cell
the first ``--evidence`` runs (2, in the file's order) are the evidence; the others (6)
are held out, and the questions are the two events over them: A, at least one success
(pass@6), and B, every run a success (pass^6).

Predictors, each giving per cell ``P(A)`` and ``P(B)`` and per agent a predictive
distribution of the fraction of its tasks with A:

* ``plug-in``: ``p = s / n`` from the evidence, ``1 - (1 - p)^k`` and ``p^k``;
* ``eb-beta-binomial``: per agent, the Beta-Binomial's maximum-likelihood shapes, then
  each task's Beta posterior (closed-form means; no uncertainty in the shapes);
* each model named in ``--models`` (a shipped spec or a spec file), fitted to the
  evidence, its means from ``Posterior.attempts`` and its fractions from its draws. A
  model may carry other priors, ``end_to_end_pooled@concentration=0,1.5@mean=0.5,0.5``:
  each ``@ROLE=P1,P2`` replaces that prior's parameters (in the spec's order: a
  LogNormal's ``mu, sigma``, a Beta's ``alpha, beta``).

With ``--compare``, the models are also ranked by leave-one-cell-out on the evidence
(``bayes_eval.compare``): what a user without held-out runs would see.

Reported: the held-out log score of both events (natural log, summed over cells;
probabilities clipped to [1e-9, 1 - 1e-9] so that the plug-in's certainties score
finitely), the mean absolute error of each agent's predicted fraction of tasks with A,
and whether each agent's 95% predictive interval of that fraction covers the observed one.

Run::

    python studies/pass_at_k.py --runs PATH/metr_runs.csv --models end_to_end_pooled
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, special

from bayes_eval import compare, fit
from bayes_eval.exact.attempts import all_of, at_least_one, mean_all_of, mean_at_least_one
from bayes_eval.specs import DISTRIBUTIONS, load_spec

CLIP = 1e-9
SEED = 20261127


def read(runs: Path) -> pd.DataFrame:
    """Runs as agent, task, success: METR's compacted runs, or tau-bench's trajectories
    (``task_id``, ``trial``, ``reward``; one agent, named after the file)."""
    table = pd.read_csv(runs)
    if "reward" in table:
        table = table.sort_values(["task_id", "trial"], kind="stable")
        return pd.DataFrame(
            dict(agent=runs.stem, task=table["task_id"].astype(str), success=table["reward"])
        )
    return table[table["agent"] != "human"][["agent", "task", "success"]]


def split(runs: Path, cell_runs: int, evidence_runs: int):
    """The evidence counts and the held-out events per (agent, task)."""
    table = read(runs)
    size = table.groupby(["agent", "task"])["success"].transform("size")
    table = table[size == cell_runs].copy()
    table["order"] = table.groupby(["agent", "task"]).cumcount()
    seen = table[table["order"] < evidence_runs]
    held = table[table["order"] >= evidence_runs]
    cells = seen.groupby(["agent", "task"], sort=True)["success"].agg(["sum", "size"])
    cells.columns = ["successes", "trials"]
    later = held.groupby(["agent", "task"], sort=True)["success"].agg(["sum", "size"])
    cells["any"] = later["sum"] > 0
    cells["all"] = later["sum"] == later["size"]
    return cells.reset_index(), cell_runs - evidence_runs


def plug_in(cells, k, rng):
    p = (cells["successes"] / cells["trials"]).to_numpy()
    draws = np.broadcast_to(p, (4000, p.size))
    return at_least_one(p, k), all_of(p, k), draws


def eb_beta_binomial(cells, k, rng):
    """Per agent, maximum-likelihood Beta-Binomial shapes; then each task's Beta."""
    a = np.empty(len(cells))
    b = np.empty(len(cells))
    for _, rows in cells.groupby("agent").groups.items():
        s = cells.loc[rows, "successes"].to_numpy(float)
        n = cells.loc[rows, "trials"].to_numpy(float)

        def nll(log_shapes, s=s, n=n):
            al, be = np.exp(log_shapes)
            return -np.sum(special.betaln(al + s, be + n - s) - special.betaln(al, be))

        best = optimize.minimize(nll, np.zeros(2), method="Nelder-Mead").x
        al, be = np.exp(np.clip(best, -20, 20))
        a[rows] = al + s
        b[rows] = be + n - s
    draws = rng.beta(a, b, size=(4000, a.size))
    return mean_at_least_one(a, b, k), mean_all_of(a, b, k), draws


def with_priors(text: str):
    """A spec from ``NAME@ROLE=P1,P2@...``: the named spec with those priors' parameters."""
    name, *changes = text.split("@")
    spec = load_spec(name)
    priors = dict(spec.priors)
    for change in changes:
        role, values = change.split("=")
        prior = priors[role]
        numbers = [float(v) for v in values.split(",")]
        params = dict(zip(DISTRIBUTIONS[prior.dist], numbers, strict=True))
        priors[role] = replace(prior, params=params)
    return replace(spec, priors=priors)


FITS: dict = {}  # each model's fit to the evidence, for --compare


def model(text):
    spec = with_priors(text)

    def predict(cells, k, rng):
        evidence = cells.assign(method="end_to_end")[
            ["agent", "task", "method", "successes", "trials"]
        ]
        posterior = FITS[text] = fit(evidence, spec)
        table = posterior.attempts([k]).set_index(["agent", "task"])
        keys = list(zip(cells["agent"], cells["task"], strict=True))
        p_task = posterior.draws["p_task"]
        draws = np.stack([p_task.sel(agent=a, task=t).values.ravel() for a, t in keys], axis=1)
        ok = table["diagnostics_ok"].all()
        print(f"  {text}: diagnostics {'passed' if ok else 'FAILED'}", file=sys.stderr)
        return (
            table.loc[keys, "pass_at_mean"].to_numpy(),
            table.loc[keys, "pass_all_mean"].to_numpy(),
            draws,
        )

    return predict


def score(cells, k, name, predictor, rng) -> tuple[dict, pd.DataFrame]:
    at, every, draws = predictor(cells, k, rng)
    at, every = np.clip(at, CLIP, 1 - CLIP), np.clip(every, CLIP, 1 - CLIP)
    hit, full = cells["any"].to_numpy(), cells["all"].to_numpy()
    log_score = np.sum(np.where(hit, np.log(at), np.log1p(-at))) + np.sum(
        np.where(full, np.log(every), np.log1p(-every))
    )
    # per agent: the fraction of its tasks with a success in the held-out runs
    events = rng.uniform(size=draws.shape) < at_least_one(draws, k)
    rows = []
    for agent, index in cells.groupby("agent").indices.items():
        fractions = events[:, index].mean(axis=1)
        low, high = np.quantile(fractions, [0.025, 0.975])
        observed = hit[index].mean()
        rows.append(
            dict(
                predictor=name,
                agent=agent,
                tasks=index.size,
                predicted=at[index].mean(),
                observed=observed,
                low=low,
                high=high,
                covered=bool(low <= observed <= high),
            )
        )
    agents = pd.DataFrame(rows)
    result = dict(
        predictor=name,
        log_score=log_score,
        mae_pass_at=float(np.mean(np.abs(agents["predicted"] - agents["observed"]))),
        covered=f"{int(agents['covered'].sum())}/{len(agents)}",
    )
    return result, agents


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--cell-runs", type=int, default=8)
    parser.add_argument("--evidence", type=int, default=2)
    parser.add_argument("--models", nargs="*", default=["end_to_end_pooled"])
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also rank the models by leave-one-cell-out on the evidence (bayes_eval.compare)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    cells, k = split(args.runs, args.cell_runs, args.evidence)
    print(
        f"{len(cells)} cells of {cells['agent'].nunique()} agents; evidence {args.evidence} "
        f"runs per cell, {k} held out",
        file=sys.stderr,
    )
    predictors = {"plug-in": plug_in, "eb-beta-binomial": eb_beta_binomial}
    predictors.update({str(spec): model(spec) for spec in args.models})
    results, agents = [], []
    for name, predictor in predictors.items():
        result, per_agent = score(cells, k, name, predictor, np.random.default_rng(SEED))
        results.append(result)
        agents.append(per_agent)
    results = pd.DataFrame(results)
    agents = pd.concat(agents, ignore_index=True)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(results.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print()
        print(agents.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.compare and len(FITS) > 1:
        ranked = compare(FITS)
        print()
        print(ranked.table[["rank", "elpd", "elpd_diff", "dse"]].to_string())
        print(ranked.sentence)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        results.to_csv(args.out / "pass_at_k.csv", index=False)
        agents.to_csv(args.out / "pass_at_k_agents.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
