"""pass@k and pass^k across an agent's tasks, as curves over ``k`` with bands.

Two populations per agent, each a number per posterior draw, summarised over draws (mean
and the one-sided bounds at ``level``, ``1 - level``):

* ``observed tasks``: the average over the agent's tasks with a posterior of ``P`` (point
  values and pairs without an estimate left out, and counted in the provenance) of
  ``1 - (1 - P_t)^k`` and ``P_t^k``. Every model with draws has it.
* ``new task``: a task drawn from the agent's population of tasks. In
  ``end_to_end_pooled`` (``P ~ Beta(mu kappa, (1 - mu) kappa)``) the Beta's closed forms
  per draw; in a crossed model without task covariates or groups (``logit P = theta_a -
  b``, ``b`` and the cell's departure normal with scales ``difficulty_scale`` and
  ``cell_scale``) quadrature over the logit, to 1e-6 relative (or 1e-40 absolute) for
  ``k`` up to 1e9. Other models have none: a new task of a milestone
  model needs its milestones, and one of a model with task covariates its covariates.

Under the Beta population the share of new tasks never solved in ``k`` attempts decays as
``k^(-alpha)``, ``alpha = mu kappa``, the Beta's first shape (``power_law``; in
``end_to_end_zero_inflated``, towards the share never solvable, ``never_share``): the
exponent of pass@k's approach to 1, and the reason a fit of a power law to empirical
pass@k curves needs the spread across tasks. ``crossing`` gives, per agent, the least
``k`` at which the new-task pass@k reaches ``threshold``, per draw, with its lower bound at
``level`` (the fewest attempts at which the risk may already be there).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from bayes_eval.constants import (
    AGENT,
    ALL_SOLVABLE,
    NEVER_SHARE,
    NEVER_SOLVABLE,
    SURPRISE_SHARE,
    SURPRISE_WIDTH,
)
from bayes_eval.exact.attempts import LogBetaRatio
from bayes_eval.registry import model_of
from bayes_eval.results.attempts import MAX_ATTEMPTS, parse_attempts
from bayes_eval.specs import check_level, check_probability

__all__ = [
    "POPULATION_COLUMNS",
    "crossing",
    "never_solved_caution",
    "population_curves",
    "power_law",
]

POPULATION_COLUMNS = (
    "agent",
    "population",
    "attempts",
    "level",
    "pass_at_mean",
    "pass_at_lower",
    "pass_at_upper",
    "pass_all_mean",
    "pass_all_lower",
    "pass_all_upper",
    "provenance",
)
NEW_TASK = "new task"
OBSERVED = "observed tasks"
# The crossed model's new-task integral over the task's logit: the trapezoid rule on
# evenly spaced logits from Z_RANGE normal scales below the least centre to as far above
# the greatest (the normal's mass beyond is below 1e-44), spaced GRID_SHARE of the least
# scale and at most MAX_SPACING (``NewTask`` gives the rule's error).
Z_RANGE = 14.0
GRID_SHARE = 0.5
MAX_SPACING = 0.25
# Draws (evenly spaced) of a crossed fit over which its new task is integrated (each
# draw on the rule above) and the crossing k solved.
CROSSED_DRAWS = 1000
# Draws whose new task is integrated at once, and the most values of their densities
# (draws x agents x nodes, 8 bytes each) a block holds: memory, not the numbers (each
# draw's integral is the same whatever the block).
NEW_TASK_BLOCK = 100
NEW_TASK_VALUES = 4_000_000


def population_curves(
    posterior, attempts: Sequence[int] | str, level: float | None = None
) -> pd.DataFrame:
    """pass@k and pass^k of each agent's observed tasks and, where the model has one, of
    a new task, for each ``k`` in ``attempts`` (the module docstring)."""
    ks = np.array(parse_attempts(attempts), dtype=float)
    level = check_level(posterior.level if level is None else level, "level")
    rows = []
    for agent, (rates, left) in _observed_rates(posterior).items():
        if rates.shape[1]:
            note = f"mean over {rates.shape[1]} task(s) with a posterior of P, per draw"
            if left:
                note += f"; {left} task(s) without one (point values, no estimate) left out"
            # at_least_one and all_of, their logs taken once for every k
            with np.errstate(divide="ignore"):  # a rate of 1 or 0: log 0 = -inf
                log_q, log_p = np.log1p(-rates), np.log(rates)
            at = np.stack([-np.expm1(k * log_q).mean(axis=1) for k in ks])
            every = np.stack([np.exp(k * log_p).mean(axis=1) for k in ks])
            rows += _rows(agent, OBSERVED, ks, at, every, level, note)
    new = _new_task(posterior, ks)
    if new is not None:
        at, every, note = new
        for n, agent in enumerate(posterior.coords[AGENT]):
            rows += _rows(agent, NEW_TASK, ks, at[..., n], every[..., n], level, note)
    return pd.DataFrame(rows, columns=list(POPULATION_COLUMNS))


def power_law(posterior, level: float | None = None) -> pd.DataFrame | None:
    """Per agent, the exponent ``alpha = mu kappa`` of ``1 - pass@k ~ k^(-alpha)`` for a
    new task of an ``end_to_end_pooled`` fit: mean and bounds; None for other models."""
    level = check_level(posterior.level if level is None else level, "level")
    shapes = _beta_shapes(posterior)
    if shapes is None:
        return None
    alpha = shapes[0]  # of the solvable tasks, where some are never solved
    low, high = np.quantile(alpha, [1.0 - level, level], axis=0)
    return pd.DataFrame(
        dict(
            agent=posterior.coords[AGENT],
            alpha_mean=alpha.mean(axis=0),
            alpha_lower=low,
            alpha_upper=high,
            level=level,
        )
    )


def crossing(posterior, threshold: float, level: float | None = None) -> pd.DataFrame | None:
    """Per agent, the least ``k`` (to ``MAX_ATTEMPTS``) at which a new task's pass@k
    reaches ``threshold``: its median over draws and its lower bound at ``level``
    (``k_lower``: with probability ``level`` the risk comes no sooner); None where the
    model has no new task. A draw that never reaches it counts as beyond ``MAX_ATTEMPTS``
    (shown as infinite). A crossed fit's is solved on ``CROSSED_DRAWS`` of its draws."""
    tau = check_probability(threshold, "threshold")
    level = check_level(posterior.level if level is None else level, "level")
    shapes = _beta_shapes(posterior)
    if shapes is not None:
        a, b, never = shapes
        ratio = LogBetaRatio(a, b)  # E[(1 - P)^k] = B(a, b + k) / B(a, b)
        found = _least_k(lambda k: (1.0 - never) * -np.expm1(ratio(k)), tau)
    elif _crossed_new_task(posterior):
        tasks = _crossed_new_tasks(posterior)[1]
        found = np.concatenate([task.least_k(tau) for task in tasks])
    else:
        return None
    # whole numbers, some infinite: the order statistics below, never an interpolation
    low, median = np.quantile(found, [1.0 - level, 0.5], axis=0, method="lower")
    return pd.DataFrame(
        dict(agent=posterior.coords[AGENT], threshold=tau, k_median=median, k_lower=low)
    )


def _least_k(curve, tau) -> np.ndarray:
    """Per draw and agent, the least whole ``k`` with ``curve(k) >= tau`` (inf if none to
    ``MAX_ATTEMPTS``): bisection, the curve increasing in ``k``."""
    top = curve(np.float64(MAX_ATTEMPTS))
    low = np.zeros(top.shape)  # curve(0) = 0 < tau
    high = np.full(top.shape, float(MAX_ATTEMPTS))
    for _ in range(int(math.log2(MAX_ATTEMPTS)) + 2):
        middle = np.floor((low + high) / 2)
        reached = curve(np.maximum(middle, 1.0)) >= tau
        high = np.where(reached, middle, high)
        low = np.where(reached, low, middle)
    return np.where(top >= tau, np.maximum(high, 1.0), np.inf)


def _rows(agent, population, ks, at, every, level, note) -> list[dict]:
    """One row per ``k`` from per-draw values ``at`` and ``every`` (``k`` by draw)."""
    at_q = np.quantile(at, [1.0 - level, level], axis=1)
    every_q = np.quantile(every, [1.0 - level, level], axis=1)
    return [
        dict(
            agent=agent,
            population=population,
            attempts=int(k),
            level=level,
            pass_at_mean=at[n].mean(),
            pass_at_lower=at_q[0, n],
            pass_at_upper=at_q[1, n],
            pass_all_mean=every[n].mean(),
            pass_all_lower=every_q[0, n],
            pass_all_upper=every_q[1, n],
            provenance=note,
        )
        for n, k in enumerate(ks)
    ]


def _observed_rates(posterior) -> dict:
    """Per agent: draws (flattened) by task of the rates of the tasks it ran that have a
    posterior, and how many of the tasks it ran have none."""
    p_task = posterior.draws["p_task"]
    values = p_task.values.reshape(-1, *p_task.shape[-2:])
    method, reason = posterior.values("method"), posterior.values("reason")
    point = ~np.isnan(posterior.values("point_log")) if not posterior.is_mcmc else None
    # a crossed fit's pairs never run are predictions, not observed tasks
    run = (
        posterior.values("observed")
        if "observed" in posterior.group("conjugate")
        else np.ones(method.shape, dtype=bool)
    )
    out = {}
    for i, agent in enumerate(posterior.coords[AGENT]):
        present = (method[i] != "") & run[i]
        usable = present & (reason[i] == "")
        if point is not None:
            usable &= ~point[i]
        usable &= ~np.isnan(values[:, i, :]).any(axis=0)
        out[agent] = (values[:, i, usable], int(present.sum() - usable.sum()))
    return out


def _beta_shapes(posterior):
    """``(mu kappa, (1 - mu) kappa)`` per draw and agent of an ``end_to_end_pooled`` fit,
    with the share of tasks never solved (0 without ``never_share``)."""
    spec = posterior.spec
    if not posterior.is_mcmc or model_of(spec).population != "beta":
        return None
    mu = posterior.draws["mu"].values.reshape(-1, len(posterior.coords[AGENT]))
    kappa = posterior.draws["kappa"].values.reshape(mu.shape)
    never = (
        posterior.draws[NEVER_SHARE].values.reshape(mu.shape)
        if NEVER_SHARE in posterior.draws
        else np.zeros(mu.shape)
    )
    return mu * kappa, (1.0 - mu) * kappa, never


def _crossed_new_task(posterior) -> bool:
    """A crossed end-to-end fit whose tasks have no covariates, groups or discriminations
    (a 2PL task's rate is not logit-normal around the ability)."""
    spec = posterior.spec
    return (
        posterior.is_mcmc
        and model_of(spec).population == "logit"
        and not {"task_coefficient", "group", "discrimination"} & set(posterior.draws.data_vars)
    )


def _crossed_logit(posterior):
    """Per draw (``CROSSED_DRAWS`` of them) and agent: the centre of a new task's logit
    rate, and its normal components, each a weight and a scale: one, or, where a share of
    the pairs depart with a wider scale (``surprise_share``), two."""
    draws = posterior.draws
    ability = draws["ability"].values.reshape(-1, len(posterior.coords[AGENT]))
    kept = np.linspace(0, len(ability) - 1, min(CROSSED_DRAWS, len(ability))).astype(int)
    difficulty = draws["difficulty_scale"].values.reshape(-1, 1)[kept]
    cell = draws["cell_scale"].values.reshape(-1, 1)[kept]
    if SURPRISE_SHARE not in draws:
        return ability[kept], [(np.ones_like(cell), np.hypot(difficulty, cell))]
    share = draws[SURPRISE_SHARE].values.reshape(-1, 1)[kept]
    wide = cell * (1.0 + draws[SURPRISE_WIDTH].values.reshape(-1, 1)[kept])
    return ability[kept], [
        (1.0 - share, np.hypot(difficulty, cell)),
        (share, np.hypot(difficulty, wide)),
    ]


def _crossed_new_tasks(posterior) -> tuple[int, Iterator[NewTask]]:
    """The number of draws of a crossed fit's new task (``_crossed_logit``) and its
    ``NewTask`` a block of draws at a time (``NEW_TASK_BLOCK``, fewer where their
    densities would pass ``NEW_TASK_VALUES``), every block on the one grid of logits that
    holds every draw (``logit_grid``)."""
    centre, parts = _crossed_logit(posterior)
    grid = logit_grid(centre, [scale for _, scale in parts])
    size = max(1, min(NEW_TASK_BLOCK, NEW_TASK_VALUES // (centre.shape[1] * grid[0].size)))

    def block(b):
        at = slice(b, b + size)
        scales = [np.broadcast_to(scale, centre.shape)[at] for _, scale in parts]
        weights = [np.broadcast_to(w, centre.shape)[at] for w, _ in parts]
        return NewTask(centre[at], scales, weights, grid)

    return len(centre), (block(b) for b in range(0, len(centre), size))


def logit_grid(centre, scales: list) -> tuple[np.ndarray, float]:
    """Evenly spaced logits and their spacing for ``E[f(X)]``, ``X`` normal about each
    ``centre`` with each of ``scales`` (arrays broadcasting against it): from ``Z_RANGE``
    of the largest scale below the least centre to as far above the greatest (the
    normal's mass beyond is below 1e-44), spaced ``GRID_SHARE`` of the least scale and at
    most ``MAX_SPACING``."""
    centre = np.asarray(centre, dtype=float)
    largest = max(float(np.max(s)) for s in scales)
    least = min(float(np.min(s)) for s in scales)
    low = float(np.min(centre)) - Z_RANGE * largest
    high = float(np.max(centre)) + Z_RANGE * largest
    spacing = min(MAX_SPACING, GRID_SHARE * least)
    nodes = math.ceil((high - low) / spacing)
    return low + spacing * np.arange(nodes + 1), spacing


class NewTask:
    """``E[pass@k]`` and ``E[pass^k]`` of a logit rate normal about ``centre`` with
    ``scale`` (per draw and agent): with a list of scales and one of ``weights`` (each per
    draw and agent, summing to 1), a mixture of such normals. The trapezoid rule on the
    grid of logits ``grid`` (by default ``logit_grid`` of these draws): each value's
    normal density at the nodes once, ``log P`` and ``log (1 - P)`` at the nodes once, so
    that a ``k`` shared by every value is one matrix product.

    The integrands are analytic and, where they matter, decay like the normal, so the
    rule converges geometrically in the spacing: its error is of order
    ``exp(-2 pi^2 s^2 / h^2)`` for a normal of scale ``s`` on spacing ``h`` (1e-34 at
    ``h = s / 2``), and ``exp(-pi^2 / h)`` for the rate's powers, whose singularities lie
    ``pi`` off the real line and which stay bounded within ``pi / 2`` of it (1e-17 at
    ``h = 1 / 4``).
    """

    def __init__(self, centre, scale, weights=None, grid=None):
        scales = scale if isinstance(scale, list) else [scale]
        parts = [1.0] * len(scales) if weights is None else weights
        centre = np.asarray(centre, dtype=float)
        logits, spacing = logit_grid(centre, scales) if grid is None else grid
        self.log_p = -np.logaddexp(0.0, -logits)
        self.log_q = -np.logaddexp(0.0, logits)
        density = np.zeros(centre.shape + logits.shape)
        for part, s in zip(parts, scales, strict=True):
            s = np.asarray(s, dtype=float)[..., None]
            z = (logits - centre[..., None]) / s
            density += np.asarray(part, dtype=float)[..., None] / s * np.exp(-0.5 * z * z)
        self.density = density * (spacing / math.sqrt(2 * math.pi))

    def at_least_one(self, k):
        """``E[pass@k]``; ``k`` one for all, or per draw and agent."""
        return self._mean(lambda k: -np.expm1(k * self.log_q), k)

    def every(self, k):
        """``E[pass^k]``; ``k`` one for all, or per draw and agent."""
        return self._mean(lambda k: np.exp(k * self.log_p), k)

    def curves(self, ks) -> tuple[np.ndarray, np.ndarray]:
        """``E[pass@k]`` and ``E[pass^k]`` for each of ``ks``, ``k`` first: one matrix
        product each."""
        ks = np.asarray(ks, dtype=float)[None, :]
        at = self.density @ -np.expm1(ks * self.log_q[:, None])
        every = self.density @ np.exp(ks * self.log_p[:, None])
        return np.moveaxis(at, -1, 0), np.moveaxis(every, -1, 0)

    def least_k(self, tau: float) -> np.ndarray:
        """Per draw and agent, the least whole ``k`` (to ``MAX_ATTEMPTS``; inf if none)
        with ``E[pass@k] >= tau``: the powers of two bracket it, by one matrix product,
        and bisection within each bracket narrows it, on the values not yet settled."""
        ladder = np.array([*(2.0 ** np.arange(math.ceil(math.log2(MAX_ATTEMPTS)))), MAX_ATTEMPTS])
        curve = self.density @ -np.expm1(ladder[None, :] * self.log_q[:, None])
        reached = curve >= tau
        first = np.argmax(reached, axis=-1)
        high = np.where(reached.any(axis=-1), ladder[first], np.inf)
        low = np.where(first > 0, ladder[np.maximum(first - 1, 0)], 0.0)
        rows, high, low = self.density.reshape(-1, self.log_q.size), high.ravel(), low.ravel()
        open_ = np.flatnonzero(np.isfinite(high) & (high - low > 1))
        while open_.size:
            middle = np.floor((low[open_] + high[open_]) / 2)
            value = (rows[open_] * -np.expm1(middle[:, None] * self.log_q)).sum(axis=-1)
            up = value >= tau
            high[open_] = np.where(up, middle, high[open_])
            low[open_] = np.where(up, low[open_], middle)
            open_ = open_[high[open_] - low[open_] > 1]
        return np.maximum(high, 1.0).reshape(self.density.shape[:-1])

    def _mean(self, power, k):
        """The mean of ``power(k)`` at the nodes under each value's density."""
        k = np.asarray(k, dtype=float)
        if k.ndim == 0:
            return self.density @ power(k)
        return (self.density * power(k[..., None])).sum(axis=-1)


def _surprise_words(posterior) -> str:
    """How a crossed fit's new task departs where a share of pairs depart wider."""
    if SURPRISE_SHARE not in posterior.draws:
        return ""
    return " (or, with the share surprise_share, with the wider scale of a surprising pair)"


def never_solved_caution(spec) -> str:
    """What a new task's pass@k at large k rests on under a model with tasks never solved:
    the prior of their share (and of the chance that there are none), and, where neither
    favours small shares (no such chance, the share's first shape 1 or more), that the
    upper bound is not conservative."""
    prior = spec.priors[NEVER_SOLVABLE]
    text = (
        "a task not solved in its runs may be one solved rarely, which no few runs tell "
        "apart, so for k far beyond the runs per task the bounds rest on the prior of that "
        f"share, {prior.label()}"
    )
    if ALL_SOLVABLE in spec.priors:
        text += (
            ", and on the chance that an agent has no such task at all, "
            f"{spec.priors[ALL_SOLVABLE].label()}, which the agents share and learn"
        )
    elif prior.alpha >= 1:
        text += (
            ", which does not favour small shares: it takes rarely solved tasks for "
            "impossible, and the upper bound is not conservative (end_to_end_shared's "
            "chance that an agent has none keeps both open)"
        )
    return text


def _new_task(posterior, ks):
    """Per ``k``, draw and agent: a new task's pass@k and pass^k, with the provenance;
    None where the model has no new task."""
    shapes = _beta_shapes(posterior)
    if shapes is not None:
        a, b, never = shapes
        # E[(1 - P)^k] = B(a, b + k) / B(a, b) and E[P^k] = B(b, a + k) / B(a, b)
        failing, passing = LogBetaRatio(a, b), LogBetaRatio(b, a)
        at = np.stack([(1.0 - never) * -np.expm1(failing(k)) for k in ks])
        every = np.stack([(1.0 - never) * np.exp(passing(k)) for k in ks])
        note = "a new task, P ~ Beta(mu kappa, (1 - mu) kappa) per draw: closed forms"
        if NEVER_SHARE in posterior.draws:
            note += "; or never solved (P = 0), with the agent's share never_share: " + (
                never_solved_caution(posterior.spec)
            )
        return at, every, note
    if _crossed_new_task(posterior):
        draws, tasks = _crossed_new_tasks(posterior)
        note = (
            "a new task, logit P ~ Normal(ability, difficulty and cell scales) per draw"
            f"{_surprise_words(posterior)}: the trapezoid rule on a grid of logits, on "
            f"{draws} draws"
        )
        blocks = [task.curves(ks) for task in tasks]
        at, every = (np.concatenate(values, axis=1) for values in zip(*blocks, strict=True))
        return at, every, note
    return None
