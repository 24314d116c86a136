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
# The crossed model's new-task integral over the task's standardised logit ``z``: a
# composite Gauss-Legendre rule on [-Z_RANGE, Z_RANGE] (the normal's mass beyond is below
# 1e-44) of NODES_PER_PANEL nodes per panel; the rate's step from 0 to 1 in ``z`` is
# ``1 / scale`` wide, so a panel is ``1 / scale`` of the largest scale, at most MAX_PANEL.
Z_RANGE = 14.0
MAX_PANEL = 0.5
NODES_PER_PANEL = 8
# Draws (evenly spaced) of a crossed fit over which its new task is integrated (each
# draw on the rule above) and the crossing k solved.
CROSSED_DRAWS = 1000
# Draws whose new task is integrated at once (memory, not the numbers: each draw's
# integral is the same whatever the block).
NEW_TASK_BLOCK = 100


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
        found = np.concatenate([_least_k(task.at_least_one, tau) for task in tasks])
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
        return ability[kept], [(1.0, np.hypot(difficulty, cell))]
    share = draws[SURPRISE_SHARE].values.reshape(-1, 1)[kept]
    wide = cell * (1.0 + draws[SURPRISE_WIDTH].values.reshape(-1, 1)[kept])
    return ability[kept], [
        (1.0 - share, np.hypot(difficulty, cell)),
        (share, np.hypot(difficulty, wide)),
    ]


def _crossed_new_tasks(posterior) -> tuple[int, Iterator[NewTask]]:
    """The number of draws of a crossed fit's new task (``_crossed_logit``) and its
    ``NewTask`` a block of ``NEW_TASK_BLOCK`` draws at a time, each component on one rule
    for all its draws, sized by its own largest scale (a block's nodes x draws x agents
    are 10 MB; a fit's, 200 MB; the narrow component's rule is the shorter)."""
    centre, parts = _crossed_logit(posterior)
    rules = [_normal_rule(float(np.max(scale))) for _, scale in parts]

    def block(b):
        at = slice(b, b + NEW_TASK_BLOCK)
        return NewTask(
            centre[at],
            [scale[at] for _, scale in parts],
            rules,
            [np.asarray(w)[at] for w, _ in parts],
        )

    return len(centre), (block(b) for b in range(0, len(centre), NEW_TASK_BLOCK))


def _normal_rule(largest_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of ``E[f(z)]``, ``z ~ Normal(0, 1)``, for rates whose logit has
    scales up to ``largest_scale`` (the module constants)."""
    panel = min(MAX_PANEL, 1.0 / max(largest_scale, 1e-12))
    panels = math.ceil(2 * Z_RANGE / panel)
    panel = 2 * Z_RANGE / panels
    x, w = np.polynomial.legendre.leggauss(NODES_PER_PANEL)
    starts = -Z_RANGE + panel * np.arange(panels)
    nodes = (starts[:, None] + (x + 1.0) * panel / 2).ravel()
    density = np.exp(-(nodes**2) / 2) / math.sqrt(2 * math.pi)
    return nodes, np.tile(w * panel / 2, panels) * density


class NewTask:
    """``E[pass@k]`` and ``E[pass^k]`` of ``logit P ~ Normal(centre, scale)`` (per draw and
    agent), on the rule ``_normal_rule`` gives for the scale (or ``rules``, one pair of
    nodes and weights per scale); ``log P`` and ``log (1 - P)`` at its nodes are computed
    once, for every ``k`` asked for. With a list of scales and one of ``weights`` (each
    per draw, summing to 1), the logit is that mixture of normals about ``centre``."""

    def __init__(self, centre, scale, rules=None, weights=None):
        scales = scale if isinstance(scale, list) else [scale]
        self.parts = [1.0] if weights is None else weights
        if rules is None:
            rules = [_normal_rule(float(np.max(s))) for s in scales]
        self.weights = [w for _, w in rules]
        logits = [
            np.asarray(centre)[..., None] + np.asarray(s)[..., None] * nodes
            for s, (nodes, _) in zip(scales, rules, strict=True)
        ]
        self.log_p = [-np.logaddexp(0.0, -logit) for logit in logits]
        self.log_q = [-np.logaddexp(0.0, logit) for logit in logits]

    def at_least_one(self, k):
        """``E[pass@k]``; ``k`` one for all, or per draw and agent."""
        k = np.asarray(k, dtype=float)[..., None]
        return self._mixed(-np.expm1(k * log_q) for log_q in self.log_q)

    def every(self, k):
        """``E[pass^k]``; ``k`` one for all, or per draw and agent."""
        k = np.asarray(k, dtype=float)[..., None]
        return self._mixed(np.exp(k * log_p) for log_p in self.log_p)

    def _mixed(self, values):
        """The components' expectations, each on its rule, weighted."""
        return sum(
            part * (value @ weights)
            for part, value, weights in zip(self.parts, values, self.weights, strict=True)
        )


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
            f"{_surprise_words(posterior)}: composite Gauss-Legendre quadrature over the "
            f"normal, on {draws} draws"
        )
        blocks = [
            (np.stack([task.at_least_one(k) for k in ks]), np.stack([task.every(k) for k in ks]))
            for task in tasks
        ]
        at, every = (np.concatenate(values, axis=1) for values in zip(*blocks, strict=True))
        return at, every, note
    return None
