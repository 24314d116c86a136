"""Do the bounds hold where decisions are made, on truths outside the models' families?

    python studies/bound_coverage.py [--families logit_normal beta zero_inflated]
        [--models end_to_end end_to_end_pooled crossed ...] [--seeds 1] [--agents 10]
        [--tasks 60] [--runs 8] [--level 0.975] [--unsolvable 0.333] [--concentration 3]
        [--seed 0] [--out studies/results] [--workers N | --scheduler ADDRESS]

Simulates tables whose true success rates ``P[a, t]`` come from three families
(``logit_normal`` has the crossed models' form of departure, the other two are none of the
models' own), fits every shipped model at its defaults, exactly as ``bayes-eval fit``
would (the pooled and crossed ones, the exact ``end_to_end`` as a reference, and the
published milestone methods ``mats2024``, ``phuong2024``, ``phuong_chain`` and
``ecr2024``), and counts how often the true rate lies above the one-sided bound at
``--level``; a cell a model gives no bound is counted apart. Agents' abilities run evenly
from -7 to +1 on the logit scale (rates from 1e-3 to 0.7 on a typical task), tasks'
difficulties are Normal(0, 1.5), and a cell's rate departs from the additive
``expit(ability - difficulty)`` by the family:

* ``logit_normal``: ``logit P = ability - difficulty + e``, ``e ~ Normal(0, 1)``;
* ``beta``: ``P ~ Beta(m k, (1 - m) k)`` with ``m = expit(ability - difficulty)`` and
  ``k = 3`` (``--concentration``): for a weak agent a spike near zero with a long right
  tail;
* ``zero_inflated``: a third of the cells (``--unsolvable``) can never be solved
  (``P = 0``), the rest are ``logit_normal``, so the unsolvable cells pull the model
  towards rates that the solvable ones exceed.

Every cell gets ``--runs`` end-to-end runs. The models that read milestones get each
task's 3 milestones too, ``--runs`` trials each, whose rates multiply to ``P``
(``p_m = P^w_m``, ``w ~ Dirichlet(2, 2, 2)`` per cell; ``ecr_pooled`` and ``ecr2024``
read them as the steps of one expert-guided run). ``time_horizon`` gets a task length
that carries the difficulty (``log2(human_minutes) = 3 + 1.5 difficulty + Normal(0,
1)``), task families of 4 tasks and release dates that follow the abilities (120 days
per unit of log-odds, give or take 60). A family's tables are seeded by ``--seed`` plus
1000 times its place in ``FAMILIES`` plus the table's number.

Prints, per family and model, the share of fits that passed their diagnostics and of
fits refitted, the cells without a bound, and, among the cells with one, the share of
bounds the truth exceeds: among all cells, among zero-success cells (no success in the
cell's end-to-end runs), among the zero-success cells of the 3 weakest agents and among
the zero-success cells whose bound is not marked ``extrapolated`` (those a ``below
threshold`` verdict may rest on by default); the largest of the first two shares on one
table; then the bounds below 1e-7, the rows marked ``extrapolated`` and the median
seconds per fit. Writes one row per cell and model to ``coverage.csv`` as each fit
finishes. ``--workers N`` runs the fits on a local dask cluster, ``--scheduler ADDRESS``
on a running one, with the same bounds as serially (each fit is seeded by its table).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from bayes_eval import fit
from bayes_eval.inference.retry import fit_attempts
from bayes_eval.inference.sweep import place_arguments, run_sweep
from bayes_eval.messages import collected

FAMILIES = ("logit_normal", "beta", "zero_inflated")
MODELS = (
    "end_to_end",
    "end_to_end_pooled",
    "crossed",
    "time_horizon",
    "hierarchical",
    "joint",
    "ecr_pooled",
    "crossed_milestones",
    "mats2024",
    "phuong2024",
    "phuong_chain",
    "ecr2024",
)
EXPERT_MODELS = ("ecr_pooled", "ecr2024")  # read the milestones as one expert-guided run
MILESTONE_MODELS = (
    "hierarchical",
    "joint",
    "crossed_milestones",
    "mats2024",
    "phuong2024",
    "phuong_chain",
    *EXPERT_MODELS,
)
WEAKEST = 3  # the agents reported on their own
MILESTONES = 3
BETA_CONCENTRATION = 3.0
UNSOLVABLE = 1 / 3
LOW_BOUND = 1e-7


def truth(
    family: str,
    agents: int,
    tasks: int,
    rng,
    unsolvable: float = UNSOLVABLE,
    concentration: float = BETA_CONCENTRATION,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true rates ``P[a, t]`` of ``family``, with the abilities and difficulties:
    ``unsolvable`` is the share of ``zero_inflated`` cells that can never be solved,
    ``concentration`` the ``beta`` family's ``k``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    ability = np.linspace(-7.0, 1.0, agents)
    difficulty = rng.normal(0.0, 1.5, tasks)
    additive = ability[:, None] - difficulty[None, :]
    if family == "beta":
        mean = special.expit(additive)
        rates = rng.beta(mean * concentration, (1 - mean) * concentration)
    else:
        rates = special.expit(additive + rng.normal(0.0, 1.0, additive.shape))
    if family == "zero_inflated":
        rates = np.where(rng.random(rates.shape) < unsolvable, 0.0, rates)
    return rates, ability, difficulty


def simulate_table(family: str, agents: int, tasks: int, runs: int, rng, **shape) -> dict:
    """One simulated evaluation: its evidence rows, true rates (of each pair, and of each
    milestone: ``milestone_truth``) and covariate tables (``shape``: ``truth``'s
    ``unsolvable`` and ``concentration``)."""
    rates, ability, difficulty = truth(family, agents, tasks, rng, **shape)
    agent_names = [f"agent_{a}" for a in range(agents)]
    task_names = [f"task_{t:02d}" for t in range(tasks)]
    end_to_end = rng.binomial(runs, rates)
    weights = rng.dirichlet(np.full(MILESTONES, 2.0), size=rates.shape)
    milestone_rates = rates[..., None] ** weights
    milestone_successes = rng.binomial(runs, milestone_rates)
    rows = []
    for a, agent in enumerate(agent_names):
        for t, task in enumerate(task_names):
            rows.append((agent, task, "end_to_end", np.nan, end_to_end[a, t], runs))
            for m in range(MILESTONES):
                rows.append((agent, task, "milestone", m + 1, milestone_successes[a, t, m], runs))
    evidence = pd.DataFrame(
        rows, columns=["agent", "task", "method", "step", "successes", "trials"]
    )
    minutes = 2 ** (3 + 1.5 * difficulty + rng.normal(0.0, 1.0, tasks))
    task_table = pd.DataFrame(
        dict(
            task=task_names,
            human_minutes=minutes,
            task_family=[f"family_{t // 4}" for t in range(tasks)],
        )
    )
    released = pd.Timestamp("2022-01-01") + pd.to_timedelta(
        np.round((ability - ability.min()) * 120 + rng.normal(0, 60, agents)), unit="D"
    )
    agent_table = pd.DataFrame(dict(agent=agent_names, release_date=released.strftime("%Y-%m-%d")))
    truth_frame = pd.DataFrame(
        dict(
            agent=np.repeat(agent_names, tasks),
            task=np.tile(task_names, agents),
            truth=rates.ravel(),
            successes=end_to_end.ravel(),
            trials=runs,
            weakest=np.repeat(np.arange(agents) < WEAKEST, tasks),
        )
    )
    milestone_truth = pd.DataFrame(
        dict(
            agent=np.repeat(agent_names, tasks * MILESTONES),
            task=np.tile(np.repeat(task_names, MILESTONES), agents),
            step=np.tile(np.arange(1, MILESTONES + 1), agents * tasks),
            truth=milestone_rates.ravel(),
        )
    )
    return dict(
        evidence=evidence,
        truth=truth_frame,
        milestone_truth=milestone_truth,
        tasks=task_table,
        agents=agent_table,
    )


def evidence_for(model: str, evidence: pd.DataFrame) -> pd.DataFrame:
    """The rows of a simulated table that ``model`` reads, in the form it reads them."""
    if model in EXPERT_MODELS:
        steps = evidence[evidence["method"] == "milestone"]
        return steps.assign(method="expert_completion", run="1")
    if model in MILESTONE_MODELS:
        return evidence
    return evidence[evidence["method"] == "end_to_end"]


def one_fit(model: str, table: dict, seed: int, level: float) -> pd.DataFrame:
    """Fit ``model`` at its defaults; one row per cell: truth, bound, whether it held
    (missing where the model gives the cell no bound, as ``phuong2024`` gives none from a
    milestone without a success)."""
    start = time.perf_counter()
    covariates = (
        dict(agents=table["agents"], tasks=table["tasks"]) if model == "time_horizon" else {}
    )
    with collected():  # the simulated tables' notes
        posterior = fit(
            evidence_for(model, table["evidence"]), model, level=level, seed=seed, **covariates
        )
    seconds = time.perf_counter() - start
    summary, diagnostics = posterior.summary(), posterior.diagnostics
    columns = ["agent", "task", "upper", "extrapolated", "diagnostics_ok"]
    cells = table["truth"].merge(summary[columns], on=["agent", "task"], how="left")
    return cells.assign(
        model=model,
        missed=(cells["truth"] > cells["upper"]).astype("boolean").mask(cells["upper"].isna()),
        seconds=seconds,
        passed=diagnostics is None or bool(diagnostics.ok),
        attempts=fit_attempts(summary["provenance"].iloc[0]),
        failed="" if diagnostics is None else " | ".join(diagnostics.messages),
    )


def study(
    families,
    models,
    seeds: int,
    *,
    agents: int = 10,
    tasks: int = 60,
    runs: int = 8,
    level: float = 0.975,
    seed: int = 0,
    out: Path | None = None,
    workers=None,
    scheduler=None,
    **shape,
) -> pd.DataFrame:
    """Every (family, seed) table fitted by every model; one row per cell and model. With
    ``out``, each fit's rows are appended to ``out`` as soon as it is done. ``shape``:
    ``truth``'s ``unsolvable`` and ``concentration``."""
    fits = []
    for family in families:
        for replicate in range(seeds):
            table_seed = seed + 1000 * FAMILIES.index(family) + replicate
            rng = np.random.default_rng(table_seed)
            table = simulate_table(family, agents, tasks, runs, rng, **shape)
            fits += [(family, replicate, table_seed, model, table) for model in models]

    def keep(index, frame):
        family, replicate, _, model, _ = fits[index]
        print(f"{family} table {replicate + 1}/{seeds}: {model} done", file=sys.stderr, flush=True)
        if out is not None:
            frame.to_csv(out, mode="a", header=not out.exists(), index=False)

    frames = run_sweep(
        _table_fit,
        len(fits),
        dict(fits=fits, level=level),
        workers=workers,
        scheduler=scheduler,
        on_result=keep,
    )
    return pd.concat(frames, ignore_index=True)


def _table_fit(index: int, setup: dict) -> pd.DataFrame:
    family, replicate, table_seed, model, table = setup["fits"][index]
    cells = one_fit(model, table, table_seed, setup["level"])
    return cells.assign(family=family, table=replicate)


def flagged(cells: pd.DataFrame) -> pd.Series:
    """The rows whose bound is marked ``extrapolated`` (empty counts as not)."""
    return cells["extrapolated"].astype("boolean").fillna(False).astype(bool)


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Per family and model: fits passing and fits refitted, the cells without a bound,
    and the share of bounds missed (of the cells with one) among all cells, zero-success
    cells, the weakest agents' zero-success cells and the zero-success cells whose bound
    is not extrapolated (those a verdict may rest on); the largest share of zero-success
    and weakest zero-success cells missed on one table (``*_worst``); then the bounds
    below 1e-7, the extrapolated rows and the median seconds per fit."""
    rows = []
    for (family, model), cells in results.groupby(["family", "model"], sort=False):
        zero = cells[cells["successes"] == 0]
        weakest = zero[zero["weakest"]]
        fits = cells.drop_duplicates("table")

        def worst(subset):
            return subset.groupby("table")["missed"].mean().max()

        rows.append(
            dict(
                family=family,
                model=model,
                passed=fits["passed"].mean(),
                refitted=(fits["attempts"] > 1).mean(),
                cells=len(cells),
                no_bound=int(cells["upper"].isna().sum()),
                missed=cells["missed"].mean(),
                zero_cells=len(zero),
                zero_missed=zero["missed"].mean(),
                weakest_zero_cells=len(weakest),
                weakest_zero_missed=weakest["missed"].mean(),
                zero_missed_worst=worst(zero),
                weakest_zero_missed_worst=worst(weakest),
                kept_zero_missed=zero.loc[~flagged(zero), "missed"].mean(),
                below_1e7=int((cells["upper"] < LOW_BOUND).sum()),
                extrapolated=int(flagged(cells).sum()),
                seconds=fits["seconds"].median(),
            )
        )
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--seeds", type=int, default=1, help="tables per family")
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--level", type=float, default=0.975)
    parser.add_argument(
        "--unsolvable", type=float, default=UNSOLVABLE, help="zero_inflated: share never solvable"
    )
    parser.add_argument(
        "--concentration", type=float, default=BETA_CONCENTRATION, help="beta: its k"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="studies/results")
    place_arguments(parser)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = out / "coverage.csv"
    table.unlink(missing_ok=True)
    results = study(
        args.families,
        args.models,
        args.seeds,
        agents=args.agents,
        tasks=args.tasks,
        runs=args.runs,
        level=args.level,
        seed=args.seed,
        out=table,
        workers=args.workers,
        scheduler=args.scheduler,
        unsolvable=args.unsolvable,
        concentration=args.concentration,
    )
    print(summarise(results).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
