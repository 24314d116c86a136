"""METR's published time-horizon method (Kwa et al. 2025, METR's eval-analysis-public),
faithfully: the method the field quotes, beside the package's models.

Per agent, a weighted logistic regression of success on ``x = log2(human minutes)``,
``P(success) = logistic(a + b x)``, fitted by penalised maximum likelihood: minimise
``sum_t w_t [y_t log(1 + e^-z_t) + (1 - y_t) log(1 + e^z_t)] + (lambda / 2) b^2``,
``z_t = a + b x_t``, ``y_t = k_t / n_t`` the task's share of successful runs (each run a
row of weight ``w_t / n_t`` in METR's code: the same minimiser), and ``lambda`` the
regularisation (METR's 0.1: scikit-learn's ``LogisticRegression(C=1 / lambda)``, the
intercept not penalised). The task weights sum to 1 per agent: ``equal`` (1 per task) or
``invsqrt`` (``1 / sqrt(tasks of its family the agent was run on)``, METR's headline).
An agent's ``q`` horizon is ``2^((logit(q) - a) / b)`` minutes; an agent without a
success has none (METR writes 0) and stays out of the trend.

Intervals come from METR's hierarchical bootstrap: families resampled with replacement,
then the tasks of each family drawn, then each (agent, task)'s runs, the same families and
tasks for every agent; a drawn task keeps its weight (twice drawn, it counts twice), and
an agent whose replicate has no success or no failure has no horizon in it. With counts,
the runs of a task drawn ``m`` times are ``m n`` runs of which ``Binomial(m n, k / n)``
succeed: METR's resampling of runs, in distribution. The trend is the least-squares line
of ``log2`` of the 50% horizon on the release date over the agents with a success (those
released since ``since``, where given); its doubling time is ``12 / slope`` months, its
interval the same line through every replicate's horizons.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from bayes_eval.errors import InputError

__all__ = [
    "MetrHorizons",
    "WEIGHTINGS",
    "cells_of_fit",
    "logistic_fit",
    "metr_horizons",
    "task_weights",
]

WEIGHTINGS = ("invsqrt", "equal")
QUANTITIES = (0.5, 0.8)
CELL_COLUMNS = ("agent", "task", "family", "minutes", "successes", "trials")
# Newton's method on the penalised likelihood (convex): steps until the largest gradient
# entry is below TOLERANCE, at most MAX_STEPS (an unpenalised fit of separable data has no
# minimum and is reported as failed).
TOLERANCE, MAX_STEPS = 1e-10, 100


@dataclass(frozen=True)
class MetrHorizons:
    """METR's method on one table of runs.

    Attributes
    ----------
    agents : pandas.DataFrame
        Per agent: its date (years, where dated), tasks, runs, successes, the fit's
        ``intercept`` and ``slope`` (per doubling of human minutes), and per horizon
        ``h50``, ``h80`` (minutes; NaN without a success) with the bootstrap interval
        (``h50_lower``, ``h50_upper``, ...).
    trend : pandas.DataFrame or None
        One row: ``doubling_months`` with ``lower`` and ``upper``, the agents it rests on
        and the date it starts from; None where fewer than two dated agents have a success.
    settings : dict
        Weighting, regularisation, bootstrap replicates, interval, seed.
    notes : list of str
    replicates : dict
        The bootstrap's ``h50``, ``h80`` and ``slope``, each ``(replicates, agents)`` in
        the order of ``agents`` (NaN where a replicate gives an agent none); empty without
        a bootstrap.
    """

    agents: pd.DataFrame
    trend: pd.DataFrame | None
    settings: dict
    notes: list
    replicates: dict

    def to_dict(self) -> dict:
        """Everything as plain lists and dicts (for JSON)."""
        trend = None if self.trend is None else self.trend.iloc[0].to_dict()
        records = self.agents.to_dict("records")
        return {"agents": records, "trend": trend, "settings": self.settings, "notes": self.notes}

    def heading(self) -> str:
        """What was computed, in a sentence."""
        s = self.settings
        return (
            f"METR's method: per-agent logistic regressions on log2(minutes), {s['weighting']} "
            f"task weights, regularisation {s['regularization']:g}; horizons in minutes "
            f"({s['interval']:.0%} interval: hierarchical bootstrap, {s['bootstrap']} replicates)"
        )

    def sentences(self) -> list[str]:
        """The trend, where there is one, and the notes."""
        lines = []
        if self.trend is not None:
            row = self.trend.iloc[0]
            lines.append(
                f"trend: the 50% horizon doubles every {row['doubling_months']:.3g} months "
                f"({row['lower']:.3g} to {row['upper']:.3g}), {int(row['agents'])} agents "
                f"released since {row['since']:.2f}"
            )
        return lines + [f"note: {note}" for note in self.notes]


def task_weights(cells: pd.DataFrame, weighting: str = "invsqrt") -> np.ndarray:
    """Each row's task weight, summing to 1 per agent (the module docstring)."""
    if weighting not in WEIGHTINGS:
        raise InputError(f"weighting: '{weighting}' is not one of {', '.join(WEIGHTINGS)}")
    weights = np.ones(len(cells))
    if weighting == "invsqrt":
        family_size = cells.groupby(["agent", "family"])["task"].transform("size")
        weights = 1 / np.sqrt(family_size.to_numpy(dtype=float))
    return weights / pd.Series(weights).groupby(cells["agent"].to_numpy()).transform("sum").values


def logistic_fit(x, y, w, regularization: float = 0.1) -> tuple[float, float]:
    """``(a, b)`` minimising the penalised weighted log loss (the module docstring), by
    Newton's method; NaN where it does not converge (no minimum without a penalty)."""
    x, y, w = (np.asarray(v, dtype=float) for v in (x, y, w))
    theta = np.array([special.logit(np.clip(np.average(y, weights=w), 1e-3, 1 - 1e-3)), 0.0])
    design = np.column_stack([np.ones_like(x), x])
    for _ in range(MAX_STEPS):
        p = special.expit(design @ theta)
        gradient = design.T @ (w * (p - y)) + np.array([0.0, regularization * theta[1]])
        if np.max(np.abs(gradient)) < TOLERANCE:
            return float(theta[0]), float(theta[1])
        hessian = (design.T * (w * p * (1 - p))) @ design + np.diag([0.0, regularization])
        try:
            theta = theta - np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            break
    return np.nan, np.nan


def _horizon(a: float, b: float, q: float) -> float:
    """``2^((logit(q) - a) / b)`` minutes (NaN for a failed fit; inf beyond floats)."""
    with np.errstate(over="ignore"):
        return float(np.exp2((special.logit(q) - a) / b))


def metr_horizons(
    cells: pd.DataFrame,
    dates: pd.Series | None = None,
    *,
    weighting: str = "invsqrt",
    regularization: float = 0.1,
    bootstrap: int = 1000,
    interval: float = 0.95,
    seed: int = 0,
    since: float | None = None,
) -> MetrHorizons:
    """METR's horizons, their bootstrap intervals and the trend (the module docstring).

    Parameters
    ----------
    cells : pandas.DataFrame
        One row per (agent, task): ``CELL_COLUMNS`` (``minutes``: the task's human
        minutes; ``family``: its task family).
    dates : pandas.Series, optional
        Release dates as decimal years, indexed by agent: the trend.
    weighting : {"invsqrt", "equal"}
    regularization : float
        METR's ``regularization`` (``C = 1 / regularization``); 0 for none.
    bootstrap : int
        Replicates of the hierarchical bootstrap (0: no intervals).
    interval : float
        Central level of the intervals.
    seed : int
    since : float, optional
        The trend's first date (decimal years): agents released before are left out of it.
    """
    cells = _checked(cells, regularization, bootstrap)
    weights = task_weights(cells, weighting)
    rows, notes = [], []
    for agent, mine in cells.groupby("agent", sort=False):
        at = mine.index.to_numpy()
        k, n = mine["successes"].to_numpy(float), mine["trials"].to_numpy(float)
        row = {"agent": agent, "date": np.nan if dates is None else dates.get(agent, np.nan)}
        row |= {"tasks": len(mine), "runs": int(n.sum()), "successes": int(k.sum())}
        a = b = np.nan
        if k.sum() > 0:
            a, b = logistic_fit(np.log2(mine["minutes"]), k / n, weights[at], regularization)
        if k.sum() > 0 and not np.isfinite(b):
            notes.append(f"{agent}: the fit did not converge (no minimum without a penalty)")
        elif np.isfinite(b) and b >= 0:
            notes.append(f"{agent}: longer tasks are not harder in its fit (slope {b:.3g})")
        row |= {"intercept": a, "slope": b}
        for q in QUANTITIES:
            row[f"h{round(100 * q)}"] = _horizon(a, b, q)
        rows.append(row)
    agents = pd.DataFrame(rows)
    none = agents.loc[agents["successes"] == 0, "agent"].tolist()
    if none:
        notes.append(
            f"{', '.join(none)}: no success, no horizon (METR's code writes 0) and no place "
            "in the trend"
        )
    replicates = _bootstrap(cells, weights, regularization, bootstrap, seed)
    tails = ((1 - interval) / 2, (1 + interval) / 2)
    for q in QUANTITIES:
        name = f"h{round(100 * q)}"
        low = high = np.full(len(agents), np.nan)
        if bootstrap:
            with warnings.catch_warnings():  # an agent with no horizon in any replicate
                warnings.simplefilter("ignore", RuntimeWarning)
                low, high = np.nanquantile(replicates[name], tails, axis=0)
        agents[name + "_lower"], agents[name + "_upper"] = low, high
    trend = None
    if dates is not None:
        trend = _trend(agents, replicates.get("h50"), tails, since, notes)
    settings = {
        "method": "metr",
        "weighting": weighting,
        "regularization": regularization,
        "bootstrap": bootstrap,
        "interval": interval,
        "seed": seed,
    }
    return MetrHorizons(agents, trend, settings, notes, replicates)


def cells_of_fit(posterior) -> tuple[pd.DataFrame, pd.Series | None, list]:
    """The cells, release dates and notes METR's method reads from a crossed end-to-end
    fit with a length covariate (the shipped ``time_horizon``): each (agent, task)'s
    end-to-end runs, the task's length on its own scale (``log2(human_minutes)``: minutes)
    and group (its family; each task a family of its own where the fit has no groups),
    and the fitted agents' date covariate as decimal years, where there is one."""
    import json

    from bayes_eval.evidence.covariates import parse_term

    try:
        cov = posterior.group("covariates")
    except KeyError:  # a fit without covariates
        cov = None
    if cov is None or not cov.attrs["length"]:
        raise InputError(
            f"horizon --method metr: model {posterior.spec.name} has no length covariate "
            "(the shipped time_horizon has log2(human_minutes))"
        )
    term = parse_term(cov.attrs["length"], "length")
    at = list(cov["task_covariate"].values).index(cov.attrs["length"])
    tasks = pd.Index(cov["task"].values)
    groups = json.loads(cov.attrs["groups"])
    family = [groups[g] for g in cov["task_group"].values] if groups else list(tasks)
    notes = [] if groups else ["no task groups in the fit: each task is a family of its own"]
    table = posterior.evidence.table
    runs = table[table["method"] == "end_to_end"]
    cells = runs.groupby(["agent", "task"], sort=False)[["successes", "trials"]].sum()
    cells = cells.reset_index()
    where = tasks.get_indexer(cells["task"])
    cells["minutes"] = term.inverse(cov["task_value"].values[where, at])
    cells["family"] = np.asarray(family, dtype=object)[where]
    dates = None
    is_date = json.loads(cov.attrs["agent_dates"])
    if any(is_date):
        column = is_date.index(True)
        fitted = list(cov["agent"].values)[
            : len(cov["agent"]) - len(json.loads(cov.attrs["predicted"]))
        ]
        values = cov["agent_value"].values[: len(fitted), column]
        dates = pd.Series(values.astype(float), index=fitted)
    return cells[list(CELL_COLUMNS)], dates, notes


def _checked(cells: pd.DataFrame, regularization: float, bootstrap: int) -> pd.DataFrame:
    missing = [c for c in CELL_COLUMNS if c not in cells.columns]
    if missing:
        raise InputError(f"cells: no column {', '.join(missing)} (needs {', '.join(CELL_COLUMNS)})")
    if not (np.isfinite(regularization) and regularization >= 0):
        raise InputError(f"regularization: {regularization} is not a number >= 0")
    if bootstrap < 0:
        raise InputError(f"bootstrap: {bootstrap} replicates; give 0 or more")
    cells = cells.reset_index(drop=True)
    if (cells["minutes"] <= 0).any() or (cells["trials"] < 1).any():
        raise InputError("cells: every task needs human minutes > 0 and every row a trial")
    return cells


def _bootstrap(cells, weights, regularization, replicates: int, seed: int) -> dict:
    """Every replicate's horizons and slope, ``{"h50": (replicates, agents), ...,
    "slope": ...}`` (NaN where an agent's replicate has no success or no failure)."""
    if not replicates:
        return {}
    rng = np.random.default_rng(seed)
    tasks = cells["task"].drop_duplicates().to_numpy()
    family_of = cells.drop_duplicates("task").set_index("task")["family"]
    families = {f: np.asarray(t) for f, t in family_of.groupby(family_of).groups.items()}
    names = list(families)
    task_at = {task: i for i, task in enumerate(tasks)}
    row_task = cells["task"].map(task_at).to_numpy()
    agents = list(dict.fromkeys(cells["agent"]))
    by_agent = [np.flatnonzero(cells["agent"].to_numpy() == agent) for agent in agents]
    x = np.log2(cells["minutes"].to_numpy(float))
    k, n = cells["successes"].to_numpy(float), cells["trials"].to_numpy(float)
    keys = [f"h{round(100 * q)}" for q in QUANTITIES] + ["slope"]
    out = {key: np.full((replicates, len(agents)), np.nan) for key in keys}
    for r in range(replicates):
        drawn = np.zeros(len(tasks))
        for f in rng.choice(len(names), size=len(names)):
            members = families[names[f]]
            np.add.at(drawn, [task_at[t] for t in rng.choice(members, size=len(members))], 1)
        m = drawn[row_task]
        runs = (m * n).astype(np.int64)
        successes = rng.binomial(runs, k / n)
        for j, rows in enumerate(by_agent):
            rows = rows[m[rows] > 0]
            s, t = successes[rows], runs[rows]
            if s.sum() == 0 or s.sum() == t.sum():
                continue
            a, b = logistic_fit(x[rows], s / t, m[rows] * weights[rows], regularization)
            out["slope"][r, j] = b
            for q in QUANTITIES:
                out[f"h{round(100 * q)}"][r, j] = _horizon(a, b, q)
    return out


def _trend(agents, replicates, tails, since, notes) -> pd.DataFrame | None:
    """The doubling time of the 50% horizon (the module docstring)."""
    use = agents["date"].notna() & (agents["successes"] > 0) & np.isfinite(agents["h50"])
    if since is not None:
        use &= agents["date"] >= since
    if use.sum() < 2:
        notes.append("no trend: fewer than two dated agents with a success")
        return None
    dates = agents.loc[use, "date"].to_numpy(float)
    slope = np.polyfit(dates, np.log2(agents.loc[use, "h50"].to_numpy(float)), 1)[0]
    slopes = []
    if replicates is not None:
        for row in replicates[:, use.to_numpy()]:
            ok = np.isfinite(row) & (row > 0)
            if ok.sum() >= 2:
                slopes.append(np.polyfit(dates[ok], np.log2(row[ok]), 1)[0])
    low, high = np.quantile(slopes, tails) if slopes else (np.nan, np.nan)
    with np.errstate(divide="ignore"):
        months = (12 / slope, 12 / high if high > 0 else np.inf, 12 / low if low > 0 else np.inf)
    return pd.DataFrame(
        [
            {
                "doubling_months": months[0],
                "lower": months[1],
                "upper": months[2],
                "agents": int(use.sum()),
                "since": float(dates.min()),
                "replicates": len(slopes),
            }
        ]
    )
