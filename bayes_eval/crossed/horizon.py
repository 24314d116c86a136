"""Time horizons from a crossed fit, and their trend across release dates.

An agent's ``q`` time horizon is the task length at which its predicted success is ``q``:
the success of a new task of that length, averaged over what the fit says about tasks'
other differences (its own difficulty and, where tasks are grouped, a new group's) and
over the agent's departure on it (``cell_scale``; a surprising pair's wider one with its
share, where the fit has one), other task covariates at their means.
With ``u ~ N(0, difficulty_scale^2 + group_scale^2)``, ``e ~ N(0, 1)`` and
the length term's coefficient ``beta`` (per standard deviation ``s`` of the term, centred
at ``m``), success at term value ``x`` is ``E[logistic(a (theta - beta (x - m) / s - u) +
cell_scale e)]``, ``a`` the new task's discrimination (1, or ``log a ~ N(0,
discrimination_scale^2)`` in 2PL); it equals ``q`` at ``x = m + s (theta - c_q) / beta``,
where ``E[logistic(a (c_q - u) + cell_scale e)] = q`` (``c_0.5 = 0`` by symmetry). Where
the recorded lengths carry an error (``length_error_scale``), ``x`` is a true length:
``difficulty_scale`` is the spread among tasks of one true length, the error aside. Each
posterior draw gives one horizon, so an agent with few or no successes gets the wide,
finite interval its ability's posterior implies.

Where an agent covariate is a date and the length term is a log, the horizon doubles
every ``12 s_d beta / (s beta_d k)`` months (``beta_d``, ``s_d``: the date's coefficient
and standard deviation; ``k``: doublings per unit of the term): the trend of a typical
agent, other agent covariates at their means. A forecast for a date is given twice: the
trend's horizon then, and a new agent's, whose ability also varies as agents do
(``ability_scale``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from bayes_eval.constants import (
    AGENT,
    DISCRIMINATION_SCALE,
    LENGTH_ERROR,
    SURPRISE_SHARE,
    SURPRISE_WIDTH,
)
from bayes_eval.crossed.likelihood import surprising_scale
from bayes_eval.errors import InputError
from bayes_eval.evidence.covariates import parse_term
from bayes_eval.registry import model_of
from bayes_eval.settings import stream_rng

__all__ = ["HorizonResult", "horizons", "success_offset"]

QUANTITIES = (0.5, 0.8)
# N(0, 1) quadrature: against adaptive quadrature, the mean of logistic(c - sigma u) is
# within 1e-9 for sigma <= 4 and 4e-6 at sigma = 8 (the logistic's poles slow it there)
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(200)
WEIGHTS = WEIGHTS / WEIGHTS.sum()
# N(0, 1) quadrature of a 2PL task's log discrimination, and the draws solved at once.
# Against adaptive quadrature the mean is within 3e-8 of q for sigma to 2.5 (spreads to
# 0.6; 0.9 at sigma 0.5), 2e-7 at METR's fitted scales (sigma 3.3, cell 1.5, spread
# 0.35) and 1e-4 at a spread of 0.9 there: a steep task's width outgrows the inner rule
# (an error of 1e-3 log-odds in c_0.8, far below the horizons' Monte Carlo error)
SLOPE_NODES, SLOPE_WEIGHTS = np.polynomial.hermite_e.hermegauss(24)
SLOPE_WEIGHTS = SLOPE_WEIGHTS / SLOPE_WEIGHTS.sum()
OFFSET_CHUNK, OFFSET_STEPS = 256, 40


@dataclass(frozen=True)
class HorizonResult:
    """Horizons per agent, the trend and forecasts.

    Attributes
    ----------
    agents : pandas.DataFrame
        Per agent: its date (where dated), runs and successes, and per horizon ``q`` the
        median and the central interval at ``interval`` (``h50``, ``h50_lower``, ...).
    trend : pandas.DataFrame or None
        Doubling time in months (median and interval) where agents are dated.
    forecasts : pandas.DataFrame
        Per forecast date: the trend's horizon and a new agent's.
    unit : str
        The length column, whose unit the horizons are in.
    interval : float
    notes : list of str
    date_column : str or None
        The agents' date covariate, where there is one.
    lengths : tuple of float
        The shortest and longest task of the fit: horizons outside are extrapolations.
    """

    agents: pd.DataFrame
    trend: pd.DataFrame | None
    forecasts: pd.DataFrame
    unit: str
    interval: float
    notes: list
    date_column: str | None
    lengths: tuple

    def to_dict(self) -> dict:
        """Everything as plain lists and dicts (for JSON)."""
        return {
            "unit": self.unit,
            "interval": self.interval,
            "agents": self.agents.to_dict("records"),
            "trend": None if self.trend is None else self.trend.iloc[0].to_dict(),
            "forecasts": self.forecasts.to_dict("records"),
            "task_lengths": list(self.lengths),
            "notes": self.notes,
        }


def success_offset(
    q: float,
    sigma: np.ndarray,
    cell: np.ndarray | float = 0.0,
    spread: np.ndarray | float = 0.0,
    wide: np.ndarray | float = 0.0,
    share: np.ndarray | float = 0.0,
) -> np.ndarray:
    """``c`` with ``E[logistic(a (c - u) + s e)] = q`` per draw: ``u ~ N(0, sigma^2)`` the
    new task's difficulty around its length's, ``e ~ N(0, 1)`` the departure with scale
    ``s = cell`` (or, with probability ``share``, a surprising pair's ``s = wide``),
    ``log a ~ N(0, spread^2)`` its discrimination (2PL; 1 where ``spread`` is 0). Given
    ``a`` and ``s``, ``a (c - u) + s e`` is normal, so the mean is Gauss-Hermite quadrature
    over ``log a`` (one node where every spread is 0) of the module's ``N(0, 1)`` rule,
    weighted over the two scales; ``c`` by Newton's steps kept within a bisection's
    bracket (the mean is increasing in ``c``)."""
    sigma, cell, spread, wide, share = np.broadcast_arrays(
        *(np.asarray(x, float) for x in (sigma, cell, spread, wide, share))
    )
    out = np.empty(sigma.shape)
    flat = [x.reshape(-1) for x in (sigma, cell, spread, wide, share)]
    nodes, weights = (SLOPE_NODES, SLOPE_WEIGHTS) if flat[2].any() else (np.zeros(1), np.ones(1))
    for start in range(0, flat[0].size, OFFSET_CHUNK):
        part = slice(start, start + OFFSET_CHUNK)
        slope = np.exp(flat[2][part, None] * nodes)  # (draws, slope nodes)
        departures = [(1.0 - flat[4][part], flat[1][part])]  # weight and scale of each
        if flat[4].any():
            departures.append((flat[4][part], flat[3][part]))
        widths = [(w, np.hypot(slope * flat[0][part, None], s[:, None])) for w, s in departures]
        low, high = np.full(slope.shape[0], -60.0), np.full(slope.shape[0], 60.0)
        c = np.zeros(slope.shape[0])
        for _ in range(OFFSET_STEPS):
            mean, rise = np.zeros(c.shape), np.zeros(c.shape)
            for w, width in widths:
                p = special.expit(slope[..., None] * c[:, None, None] - width[..., None] * NODES)
                mean += w * ((p @ WEIGHTS) @ weights)
                rise += w * (((p * (1 - p)) @ WEIGHTS * slope) @ weights)
            if np.all(np.abs(mean - q) < 1e-12):
                break
            below = mean < q
            low, high = np.where(below, c, low), np.where(below, high, c)
            step = c - (mean - q) / np.maximum(rise, 1e-300)
            c = np.where((step > low) & (step < high), step, (low + high) / 2)
        out.reshape(-1)[part] = c
    return out


def horizons(posterior, *, interval: float = 0.95, forecast=()) -> HorizonResult:
    """Time horizons of every agent of a crossed end-to-end fit with a length covariate.

    Parameters
    ----------
    posterior : Posterior
    interval : float
        Central credible level of the intervals.
    forecast : sequence of str
        ISO dates to forecast the horizon for (needs a date covariate).

    Raises
    ------
    InputError
        A fit that is not crossed end-to-end, has no length covariate, or a forecast
        without a date covariate or with a bad date.
    """
    spec = posterior.spec
    entry = model_of(spec)  # a logit population of abilities on end-to-end runs
    if entry.population != "logit" or entry.cell_method:
        raise InputError(
            f"horizon: model {spec.name} is {spec.kind}/{spec.pooling}; horizons need a "
            "crossed end-to-end fit with a length covariate (the shipped time_horizon)"
        )
    cov = posterior.group("covariates")
    length = cov.attrs["length"]
    if not length:
        raise InputError(
            f"horizon: model {spec.name} names no length covariate ([covariates] length, "
            "one of its task terms, as the shipped time_horizon has)"
        )
    term = parse_term(length, "length")
    draws = posterior.draws
    used = ("ability", "ability_mean", "ability_scale", "difficulty_scale", "group_scale")
    used += ("cell_scale", "agent_coefficient", "task_coefficient", DISCRIMINATION_SCALE)
    flat = {  # the parameters horizons need, one row per draw (not the rates)
        name: draws[name].values.reshape(-1, *draws[name].shape[2:])
        for name in used
        if name in draws
    }
    task_terms = list(cov["task_covariate"].values)
    at = task_terms.index(length)
    beta = flat["task_coefficient"][:, at]
    centre, scale = float(cov["task_centre"].values[at]), float(cov["task_scale"].values[at])
    sigma = np.hypot(flat["difficulty_scale"], flat.get("group_scale", 0.0))
    slopes = flat.get(DISCRIMINATION_SCALE, 0.0)
    wide = share = 0.0
    if SURPRISE_SHARE in draws:  # a share of the pairs depart with a wider scale
        share = draws[SURPRISE_SHARE].values.reshape(-1)
        wide = surprising_scale(flat["cell_scale"], draws[SURPRISE_WIDTH].values.reshape(-1))
    offsets = {
        q: success_offset(q, sigma, flat["cell_scale"], slopes, wide, share) for q in QUANTITIES
    }
    notes = []
    if LENGTH_ERROR in draws:
        error = np.median(draws[LENGTH_ERROR].values)
        notes.append(
            f"the horizons are at true lengths: the fit takes each recorded {length} to "
            f"err by a standard deviation of {error:.2g} (posterior median) around the "
            "task's true one, a scale its prior sets (counts cannot tell a length's error "
            "from a task's own difficulty)"
        )
    flat_share = float(np.mean(beta <= 0))
    if flat_share:
        notes.append(
            f"in {flat_share:.1%} of draws longer tasks are not harder (coefficient of "
            f"{length} <= 0): there the horizon is unbounded (inf)"
        )

    def horizon(ability, q):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            value = term.inverse(centre + scale * (ability - offsets[q]) / beta)
        return np.where(beta > 0, value, np.inf)

    tails = ((1 - interval) / 2, 0.5, (1 + interval) / 2)
    agents = list(draws[AGENT].values)
    dates = json.loads(cov.attrs["agent_dates"])
    agent_terms = list(cov["agent_covariate"].values)
    date_at = next((i for i, is_date in enumerate(dates) if is_date), None)
    predicted = set(json.loads(cov.attrs["predicted"]))
    evidence = posterior.evidence.table
    rows = []
    for i, agent in enumerate(agents):
        mine = evidence[(evidence["agent"] == agent) & (evidence["method"] == "end_to_end")]
        row = {"agent": agent, "predicted": agent in predicted}
        if date_at is not None:
            row[agent_terms[date_at]] = float(cov["agent_value"].values[i, date_at])
        row["runs"], row["successes"] = int(mine["trials"].sum()), int(mine["successes"].sum())
        for q in QUANTITIES:
            values = horizon(flat["ability"][:, i], q)
            name = f"h{round(100 * q)}"
            row[name + "_lower"], row[name], row[name + "_upper"] = _quantiles(values, tails)
        rows.append(row)
    table = pd.DataFrame(rows)
    lengths = term.inverse(cov["task_value"].values[:, at])
    shortest, longest = float(lengths.min()), float(lengths.max())
    outside = table[(table["h50"] < shortest) | (table["h50"] > longest)]
    if len(outside):
        notes.append(
            f"the 50% horizons of {', '.join(outside['agent'])} lie outside the task lengths "
            f"fitted ({shortest:.3g} to {longest:.3g} {term.column}): extrapolations of the "
            "fitted line"
        )
    trend, forecasts = None, pd.DataFrame()
    if date_at is not None and term.doublings is None:
        notes.append(f"no trend: {length} is not a log, so the horizon has no doubling time")
    elif date_at is not None:
        beta_d = flat["agent_coefficient"][:, date_at]
        scale_d = float(cov["agent_scale"].values[date_at])
        centre_d = float(cov["agent_centre"].values[date_at])
        with np.errstate(divide="ignore"):
            per_year = term.doublings * scale * beta_d / (scale_d * beta)
            months = np.where(per_year > 0, 12 / per_year, np.inf)
        trend = pd.DataFrame(
            [dict(zip(("lower", "median", "upper"), _quantiles(months, tails), strict=True))],
            index=["doubling time (months)"],
        )
        shrinking = float(np.mean(per_year <= 0))
        if shrinking:
            notes.append(f"in {shrinking:.1%} of draws the horizon does not grow with the date")
        records = []
        rng = stream_rng(posterior.seed, "forecast")
        for text in forecast:
            year = _year(text)
            line = flat["ability_mean"] + beta_d * (year - centre_d) / scale_d
            new = line + flat["ability_scale"] * rng.standard_normal(line.shape)
            for what, ability in (("trend", line), ("new agent", new)):
                lower, median, upper = _quantiles(horizon(ability, 0.5), tails)
                records.append(
                    {
                        "date": text,
                        "what": what,
                        "h50_lower": lower,
                        "h50": median,
                        "h50_upper": upper,
                    }
                )
        forecasts = pd.DataFrame(records)
    elif forecast:
        raise InputError("forecast: the fit has no date covariate of the agents to trend on")
    date_column = None if date_at is None else agent_terms[date_at]
    return HorizonResult(
        table, trend, forecasts, term.column, interval, notes, date_column, (shortest, longest)
    )


def _quantiles(values: np.ndarray, tails: tuple) -> np.ndarray:
    """``np.quantile`` of draws some of which may be infinite (an unbounded horizon): a
    quantile interpolated towards an infinite draw is infinite (numpy's interpolation
    gives NaN there)."""
    with np.errstate(invalid="ignore"):
        out = np.quantile(values, tails)
    return np.where(np.isnan(out), np.inf, out)


def _year(text: str) -> float:
    from bayes_eval.evidence.covariates import decimal_year

    return decimal_year(text.strip(), f"forecast {text}")
