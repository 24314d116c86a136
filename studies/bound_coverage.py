"""Do the bounds hold where decisions are made, on truths outside the models' families?

    python studies/bound_coverage.py [--families logit_normal beta zero_inflated surprising]
        [--models end_to_end end_to_end_pooled crossed ...] [--seeds 1] [--agents 10]
        [--tasks 60] [--runs 8] [--level 0.975] [--threshold 0.05] [--unsolvable 0.333]
        [--concentration 3] [--surprise-share 0.03] [--surprise-size 3]
        [--oracle-law SHARE SCALE] [--seed 0]
        [--out studies/results] [--workers N | --scheduler ADDRESS]

Simulates tables whose true success rates ``P[a, t]`` come from four families
(``logit_normal`` has the crossed models' form of departure, the others are none of the
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
  towards rates that the solvable ones exceed;
* ``surprising``: ``logit_normal`` with 3% of the cells (``--surprise-share``) 3 log-odds
  higher (``--surprise-size``): an agent unexpectedly good at one task, the cell an
  evaluation exists to find and the one pooling pulls hardest.

``--models oracle`` is no model: each cell's bound under the true law of its family's
departure from its true additive logit, given its own runs (the logit families only):
what the best pooling could do, and the share of surprising cells that even it misses;
``--oracle-law SHARE SCALE`` makes it assume ``(1 - SHARE) N(0, 1) + SHARE N(0, SCALE)``
instead (a pooling that expects more surprises than the table holds).

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
seconds per fit. Then, where decisions are made (``decisions``), each fit's verdicts at
``--threshold`` as the report gives them (with the fit's predictive checks): the misses
among the surprising cells (with and without an end-to-end success, and those with one
whose truth is below 0.5, where a threshold a decision uses can fall), among the ``below
threshold`` verdicts by what carries them (own runs, pooling), among the surprising cells
with such a verdict, and the pairs left undecided because the model and their own runs
disagree. Writes one row per cell and model to ``coverage.csv`` as each fit
finishes. ``--workers N`` runs the fits on a local dask cluster, ``--scheduler ADDRESS``
on a running one, with the same bounds as serially (each fit is seeded by its table).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_eval import fit
from bayes_eval.checks.assumption import milestone_assumption
from bayes_eval.constants import BASIS_OWN, BASIS_POOLED
from bayes_eval.inference.retry import fit_attempts
from bayes_eval.inference.sweep import place_arguments, run_sweep
from bayes_eval.messages import collected
from bayes_eval.outputs.verdicts import BELOW, DISAGREE, UNDECIDED, verdicts
from bayes_eval.results.predictive import predictive_checks

FAMILIES = ("logit_normal", "beta", "zero_inflated", "surprising")
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
SURPRISE_SHARE = 0.03
SURPRISE_SIZE = 3.0
THRESHOLD = 0.05
# Truths below this are where a threshold a safety decision uses can fall; a miss above it
# (a bound of 0.994 where the truth is 0.997) turns no such decision.
DECIDING = 0.5
LAW_DEFAULTS = dict(surprise_share=SURPRISE_SHARE, surprise_size=SURPRISE_SIZE)
# Not a model: the bound each cell would get from the true law of its family's departures
# and its true additive logit, given its own runs (``oracle_bounds``): what the best pooling
# could do.
ORACLE = "oracle"
ORACLE_GRID = np.linspace(-20.0, 25.0, 9001)  # the departure's grid, in log-odds
# The departure scalars whose posterior median each fit records (where its model has them).
SCALARS = ("cell_scale", "surprise_share", "surprise_width")


class Truth(NamedTuple):
    """A family's true rates ``P[a, t]``, the abilities and difficulties they depart from,
    and which cells carry a surprise (``surprising``: all False but in that family)."""

    rates: np.ndarray
    ability: np.ndarray
    difficulty: np.ndarray
    surprising: np.ndarray


def truth(
    family: str,
    agents: int,
    tasks: int,
    rng,
    unsolvable: float = UNSOLVABLE,
    concentration: float = BETA_CONCENTRATION,
    surprise_share: float = SURPRISE_SHARE,
    surprise_size: float = SURPRISE_SIZE,
) -> Truth:
    """The true rates ``P[a, t]`` of ``family``, with the abilities, difficulties and
    surprising cells: ``unsolvable`` is the share of ``zero_inflated`` cells that can never
    be solved, ``concentration`` the ``beta`` family's ``k``, ``surprise_share`` the share
    of ``surprising`` cells that depart by ``surprise_size`` more log-odds."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    ability = np.linspace(-7.0, 1.0, agents)
    difficulty = rng.normal(0.0, 1.5, tasks)
    additive = ability[:, None] - difficulty[None, :]
    surprising = np.zeros(additive.shape, dtype=bool)
    if family == "beta":
        mean = special.expit(additive)
        rates = rng.beta(mean * concentration, (1 - mean) * concentration)
    else:
        departure = rng.normal(0.0, 1.0, additive.shape)
        if family == "surprising":
            surprising = rng.random(additive.shape) < surprise_share
            departure = departure + surprise_size * surprising
        rates = special.expit(additive + departure)
    if family == "zero_inflated":
        rates = np.where(rng.random(rates.shape) < unsolvable, 0.0, rates)
    return Truth(rates, ability, difficulty, surprising)


def simulate_table(family: str, agents: int, tasks: int, runs: int, rng, **shape) -> dict:
    """One simulated evaluation: its evidence rows, true rates (of each pair, with its
    additive logit ``ability - difficulty``; and of each milestone: ``milestone_truth``),
    covariate tables, and the family's law (``family``, ``shape``: ``truth``'s
    ``unsolvable``, ``concentration``, ``surprise_share`` and ``surprise_size``)."""
    rates, ability, difficulty, surprising = truth(family, agents, tasks, rng, **shape)
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
            surprising=surprising.ravel(),
            additive=(ability[:, None] - difficulty[None, :]).ravel(),
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
        law=(family, {**LAW_DEFAULTS, **shape}),
    )


def evidence_for(model: str, evidence: pd.DataFrame) -> pd.DataFrame:
    """The rows of a simulated table that ``model`` reads, in the form it reads them."""
    if model in EXPERT_MODELS:
        steps = evidence[evidence["method"] == "milestone"]
        return steps.assign(method="expert_completion", run="1")
    if model in MILESTONE_MODELS:
        return evidence
    return evidence[evidence["method"] == "end_to_end"]


def oracle_bounds(table: dict, level: float, assumed=None) -> np.ndarray:
    """Each cell's ``level`` bound under the true law of its departure from its true
    additive logit, given its own end-to-end runs: the posterior of the departure on
    ``ORACLE_GRID`` (its prior density times the binomial likelihood), its quantile read
    off the cumulative sum. Defined for the logit families (``logit_normal``,
    ``surprising``), whose law is a mixture of unit normals. With ``assumed``, ``(share,
    scale)``, the law is taken to be ``(1 - share) N(0, 1) + share N(0, scale)`` instead:
    what a pooling that expects more (or fewer) surprises than the table holds would
    give."""
    family, shape = table["law"]
    if family not in ("logit_normal", "surprising"):
        raise ValueError(f"the oracle knows the logit families' laws, not {family!r}")
    grid = ORACLE_GRID
    if assumed is not None:
        share, scale = assumed
        prior = (1 - share) * stats.norm.pdf(grid) + share * stats.norm.pdf(grid, 0.0, scale)
    else:
        share = shape["surprise_share"] if family == "surprising" else 0.0
        size = shape["surprise_size"]
        prior = (1 - share) * stats.norm.pdf(grid) + share * stats.norm.pdf(grid, size)
    cells = table["truth"]
    rate = special.expit(cells["additive"].to_numpy()[:, None] + grid[None, :])
    k, n = (cells[c].to_numpy()[:, None] for c in ("successes", "trials"))
    cumulative = np.cumsum(prior * stats.binom.pmf(k, n, rate), axis=1)
    at = (cumulative < level * cumulative[:, -1:]).sum(axis=1)
    return special.expit(cells["additive"].to_numpy() + grid[np.minimum(at, grid.size - 1)])


def _oracle_cells(table: dict, level: float, threshold: float, assumed) -> pd.DataFrame:
    """``one_fit``'s rows of the oracle (``oracle_bounds``, its law ``assumed`` where
    given): below the threshold where its bound is, a pooled verdict (it reads what every
    other cell says of the cell's law)."""
    upper = oracle_bounds(table, level, assumed)
    cells = table["truth"].assign(upper=upper, extrapolated=False, **dict.fromkeys(SCALARS, np.nan))
    below = cells["upper"] < threshold
    return cells.assign(
        diagnostics_ok=True,
        basis=BASIS_POOLED,
        verdict=np.where(below, BELOW, UNDECIDED),
        verdict_reason="",
        model=ORACLE,
        missed=(cells["truth"] > cells["upper"]).astype("boolean"),
        seconds=0.0,
        passed=True,
        attempts=1,
        failed="",
    )


def one_fit(
    model: str,
    table: dict,
    seed: int,
    level: float,
    threshold: float = THRESHOLD,
    assumed=None,
) -> pd.DataFrame:
    """Fit ``model`` at its defaults; one row per cell: truth, bound, whether it held
    (missing where the model gives the cell no bound, as ``phuong2024`` gives none from a
    milestone without a success), and its verdict at ``threshold`` with what carries it
    (``outputs.verdicts.verdicts``, with the fit's posterior predictive and
    milestone-assumption checks, as the report decides them), with the posterior median
    of each departure scalar the model has (``SCALARS``; empty where it has none).
    ``assumed`` is the oracle's law
    (``oracle_bounds``)."""
    if model == ORACLE:
        return _oracle_cells(table, level, threshold, assumed)
    start = time.perf_counter()
    covariates = (
        dict(agents=table["agents"], tasks=table["tasks"]) if model == "time_horizon" else {}
    )
    with collected():  # the simulated tables' notes
        posterior = fit(
            evidence_for(model, table["evidence"]), model, level=level, seed=seed, **covariates
        )
    seconds = time.perf_counter() - start
    summary, diagnostics = posterior.summary(threshold=threshold), posterior.diagnostics
    checks = (
        predictive_checks(posterior),
        milestone_assumption(posterior.evidence, fitted=posterior),
    )
    judged = summary.join(verdicts(summary, checks[1], threshold, checks[0], False, diagnostics))
    judged = judged.rename(columns={"reason": "verdict_reason"})
    columns = ["agent", "task", "upper", "extrapolated", "diagnostics_ok", "basis"]
    columns += ["verdict", "verdict_reason"]
    cells = table["truth"].merge(judged[columns], on=["agent", "task"], how="left")
    scalars = {  # every fit's rows have the same columns (they are appended to one file)
        name: float(np.median(posterior.draws[name].values))
        if posterior.is_mcmc and name in posterior.draws
        else np.nan
        for name in SCALARS
    }
    return cells.assign(
        **scalars,
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
    threshold: float = THRESHOLD,
    seed: int = 0,
    out: Path | None = None,
    assumed=None,
    workers=None,
    scheduler=None,
    **shape,
) -> pd.DataFrame:
    """Every (family, seed) table fitted by every model; one row per cell and model. With
    ``out``, each fit's rows are appended to ``out`` as soon as it is done. ``shape``:
    ``truth``'s ``unsolvable``, ``concentration``, ``surprise_share`` and
    ``surprise_size``; ``assumed``, the oracle's law (``oracle_bounds``)."""
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
        dict(fits=fits, level=level, threshold=threshold, assumed=assumed),
        workers=workers,
        scheduler=scheduler,
        on_result=keep,
    )
    return pd.concat(frames, ignore_index=True)


def _table_fit(index: int, setup: dict) -> pd.DataFrame:
    family, replicate, table_seed, model, table = setup["fits"][index]
    cells = one_fit(model, table, table_seed, setup["level"], setup["threshold"], setup["assumed"])
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


def decisions(results: pd.DataFrame) -> pd.DataFrame:
    """Per family and model, where decisions are made: the share of bounds missed among
    the surprising cells, those of them with at least one end-to-end success (and of
    those, the ones whose truth is below ``DECIDING``, where a threshold a decision uses
    can fall) and those without; the ``below threshold`` verdicts with the share
    missed, by what carries them (``own`` runs, ``pooled``); the surprising cells with
    such a verdict and the share missed; and the pairs left ``undecided`` because the
    model and their own runs disagree."""
    rows = []
    for (family, model), cells in results.groupby(["family", "model"], sort=False):
        surprising = cells[cells["surprising"].astype(bool)]
        seen = surprising["successes"] > 0
        below = cells[cells["verdict"] == BELOW]
        row = dict(
            family=family,
            model=model,
            surprising=len(surprising),
            surprising_missed=surprising["missed"].mean(),
            seen=int(seen.sum()),
            seen_missed=surprising.loc[seen, "missed"].mean(),
            seen_deciding_missed=surprising.loc[
                seen & (surprising["truth"] < DECIDING), "missed"
            ].mean(),
            unseen_missed=surprising.loc[~seen, "missed"].mean(),
            below=len(below),
        )
        for basis in (BASIS_OWN, BASIS_POOLED):
            on = below[below["basis"] == basis]
            row[f"below_{basis}"] = len(on)
            row[f"below_{basis}_missed"] = on["missed"].mean()
        caught = below[below["surprising"].astype(bool)]
        row.update(
            surprising_below=len(caught),
            surprising_below_missed=int(caught["missed"].sum()),
            disagree=int(cells["verdict_reason"].fillna("").str.startswith(DISAGREE).sum()),
        )
        rows.append(row)
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
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help="tau of the verdicts")
    parser.add_argument(
        "--unsolvable", type=float, default=UNSOLVABLE, help="zero_inflated: share never solvable"
    )
    parser.add_argument(
        "--concentration", type=float, default=BETA_CONCENTRATION, help="beta: its k"
    )
    parser.add_argument(
        "--surprise-share", type=float, default=SURPRISE_SHARE, help="surprising: their share"
    )
    parser.add_argument(
        "--surprise-size", type=float, default=SURPRISE_SIZE, help="surprising: log-odds added"
    )
    parser.add_argument(
        "--oracle-law",
        nargs=2,
        type=float,
        metavar=("SHARE", "SCALE"),
        help="the oracle assumes (1 - SHARE) N(0, 1) + SHARE N(0, SCALE), not the truth",
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
        threshold=args.threshold,
        seed=args.seed,
        out=table,
        workers=args.workers,
        scheduler=args.scheduler,
        unsolvable=args.unsolvable,
        concentration=args.concentration,
        surprise_share=args.surprise_share,
        surprise_size=args.surprise_size,
        assumed=args.oracle_law,
    )
    shown = dict(index=False, float_format=lambda x: f"{x:.3g}")
    print(summarise(results).to_string(**shown))
    print(f"\nwhere decisions are made (verdicts at {args.threshold:g}):")
    print(decisions(results).to_string(**shown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
