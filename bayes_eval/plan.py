"""Trial planning: how many trials certify ``P < tau``, and which run to do next.

"Certify" means the one-sided posterior upper bound at ``level`` falls below ``tau``.

* ``zero_success_trials``: end-to-end trials, all failures, that certify under a Beta
  prior; the uniform prior's closed form is the smallest ``n`` with
  ``1 - (1 - level)^(1 / (n + 1)) <= tau``.
* ``expected_trials``: running end-to-end trials one at a time and stopping as soon as
  the bound certifies, the distribution of the stopping time when the true rate is
  ``p`` (exact, by dynamic programming over the success count).
* ``milestone_trials``: trials per milestone that certify the product of milestone rates
  with a given probability (power), under hypothesised rates, by simulation with the
  exact engine; beside it the end-to-end trials with the same power (exact binomial).
* ``trials_to_decide``: more end-to-end trials after which the bound probably decides
  ``P`` against ``tau`` either way (the report's ``undecided`` verdicts).
* ``zero_success_family`` and ``milestone_family``: the same under each prior of the
  family (``prior_family.beta_family``).
* ``trials_to_separate``: more end-to-end trials of each of two agents after which the
  posterior of the difference of their rates probably decides it against a margin.
* ``next_run``: preposterior analysis of a fitted exact posterior. For each candidate
  (a milestone, or end-to-end where the estimate is end-to-end) and batch size, draw the
  batch's outcomes from the current posterior, update the conjugate posterior, and
  average the new upper bound: the expected reduction of the bound per unit cost ranks
  the candidates.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_eval.constants import (
    AGENT,
    END_TO_END,
    MILESTONE_METHOD,
    PLAN_MAX_TRIALS,
    PLAN_POWER,
    TASK,
)
from bayes_eval.errors import InputError
from bayes_eval.prior_family import beta_family
from bayes_eval.specs import check_level, check_probability

if TYPE_CHECKING:
    from bayes_eval.results.posterior import Posterior

__all__ = [
    "PRIORS",
    "expected_trials",
    "milestone_family",
    "milestone_trials",
    "next_run",
    "parse_prior",
    "trials_to_certify",
    "trials_to_decide",
    "trials_to_separate",
    "zero_success_family",
    "zero_success_trials",
]

# Simulated evaluations per candidate of a plan, and the probability left undecided at
# which the exact stopping-time calculation ends.
PLAN_SIMULATIONS = 400
PLAN_NEGLIGIBLE = 1e-12

PRIORS = {"uniform": (1.0, 1.0), "jeffreys": (0.5, 0.5)}
# The exact specs whose estimates next-run planning can update.
EXACT_PLANNED = ("end_to_end", "mats2024", "phuong2024", "phuong_chain")
# The candidate of end-to-end runs on their own, beside a milestone estimate's milestones.
END_TO_END_ROUTE = "end_to_end (on its own)"


# The largest Beta shape a plan takes: a prior worth 1e300 runs; the prior family scales
# shapes by a small factor, which must stay a finite double.
MAX_PRIOR_SHAPE = 1e300


def parse_prior(text: str) -> tuple[float, float]:
    """``uniform``, ``jeffreys`` or ``ALPHA,BETA`` (both positive) as Beta shapes."""
    if text in PRIORS:
        return PRIORS[text]
    parts = text.split(",")
    try:
        a, b = (float(p) for p in parts)
    except ValueError:
        raise InputError(
            f"prior: '{text}' is not uniform, jeffreys or ALPHA,BETA (two numbers)"
        ) from None
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise InputError(f"prior: {text}: both Beta shapes must be positive and finite")
    if max(a, b) > MAX_PRIOR_SHAPE:
        raise InputError(
            f"prior: {text}: Beta shapes above {MAX_PRIOR_SHAPE:g} are past what the planner "
            "computes with (the prior family's sceptical member doubles them)"
        )
    return a, b


def _certified(successes, trials, threshold, level, prior) -> np.ndarray:
    a, b = prior
    return stats.beta.ppf(level, a + successes, b + (trials - successes)) <= threshold


def trials_to_certify(
    successes: int,
    threshold: float,
    level: float,
    prior=PRIORS["uniform"],
    max_trials=None,
    start: int = 1,
) -> int | None:
    """Smallest number of end-to-end trials that certifies with ``successes`` among them
    (None if more than ``max_trials``, default ``PLAN_MAX_TRIALS``).

    ``start`` is a number known not to exceed the answer (the answer for fewer successes),
    from which the search steps up.
    """
    limit = PLAN_MAX_TRIALS if max_trials is None else max_trials
    lo = max(successes, 1, start)
    if _certified(successes, lo, threshold, level, prior):
        return lo
    step, hi = 1, lo + 1
    while not _certified(successes, hi, threshold, level, prior):
        if hi >= limit:
            return None
        lo, step = hi, 2 * step
        hi = min(lo + step, limit)
    while hi - lo > 1:  # certified at hi, not at lo; the bound falls as failures add up
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _certified(successes, mid, threshold, level, prior) else (mid, hi)
    return hi


@functools.lru_cache(maxsize=1 << 16)  # pairs of equal counts share one posterior
def trials_to_decide(
    mean: float, sd: float, threshold: float, level: float, max_trials=None
) -> int | None:
    """More end-to-end trials after which the posterior probably (chance at least 1/2)
    decides ``P`` against ``threshold``: its upper bound at ``level`` below it, or its
    lower bound above it. None when the posterior is degenerate or more than
    ``max_trials`` (default ``PLAN_MAX_TRIALS``) would be needed.

    The current posterior is taken as the Beta of its mean and sd (exactly the posterior
    of an end-to-end model; an approximation for a product or an MCMC posterior). Given
    ``n`` more trials, the successes ``k`` are Beta-Binomial; the upper bound falls below
    ``threshold`` for ``k`` up to some ``k_below`` and the lower bound rises above it from
    some ``k_above`` on (both found by bisection), so the chance of a decision is two
    Beta-Binomial tails. ``n`` is found by doubling and bisection on that chance, which
    saws with the discreteness of the counts as it rises: the answer is an ``n`` where it
    crosses 1/2 (``chance(n - 1) < 1/2 <= chance(n)``), between the first and the last
    such crossing, so it is "about" (the report rounds it to two figures).
    """
    limit = PLAN_MAX_TRIALS if max_trials is None else max_trials
    shape = _beta_shapes(mean, sd)
    if shape is None:
        return None
    a, b = shape

    # P(P <= tau) after k successes in n (scipy.stats.beta.cdf's own function, called
    # without its argument checks, which took most of the time)
    def below(k, n):  # P(P <= tau) > level after k successes in n: upper bound below tau
        return special.betainc(a + k, b + n - k, threshold) > level

    def above(k, n):  # P(P <= tau) < 1 - level: lower bound above tau
        return special.betainc(a + k, b + n - k, threshold) < 1.0 - level

    def last(test, n):  # the largest k in -1..n with test(k) true (test falls with k)
        lo, hi = -1, n + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if test(mid, n) else (lo, mid)
        return lo

    def chance(n):
        k_below = last(below, n)
        k_above = last(lambda k, m: not above(k, m), n) + 1
        mass = _beta_binomial_mass(n, a, b)
        return float(mass[: k_below + 1].sum() + mass[k_above:].sum())

    return _probably_decided(chance, limit)


def _beta_binomial_mass(n: int, a: float, b: float) -> np.ndarray:
    """``P(k successes in n)`` for ``k = 0 .. n`` when the rate is Beta(a, b): the
    Beta-Binomial's mass, as ``scipy.stats.betabinom.pmf`` computes it, without its
    distribution machinery (a call's overhead was most of a report's trial counts)."""
    k = np.arange(n + 1)
    log_choose = -np.log(n + 1.0) - special.betaln(n - k + 1, k + 1)
    return np.exp(log_choose + special.betaln(k + a, n - k + b) - special.betaln(a, b))


def trials_to_separate(
    mean_a: float,
    sd_a: float,
    mean_b: float,
    sd_b: float,
    margin: float,
    level: float,
    *,
    max_trials=None,
    seed: int = 0,
) -> int | None:
    """More end-to-end trials of each agent (``n`` each) after which the difference
    ``P_B - P_A`` probably (chance at least 1/2) decides against ``margin`` at ``level``:
    its one-sided lower bound above the margin, or its upper bound below it. None when
    either posterior is degenerate or more than ``max_trials`` would be needed.

    Each posterior is taken as the Beta of its mean and sd, as in ``trials_to_decide``;
    the outcomes of ``n`` trials are Beta-Binomial (``PLAN_SIMULATIONS`` simulated pairs of
    counts, common random numbers across ``n``), and the updated difference is taken as
    normal with the two Betas' means and variances. ``n`` is found by doubling and
    bisection on the chance.
    """
    limit = PLAN_MAX_TRIALS if max_trials is None else max_trials
    shapes = [_beta_shapes(m, s) for m, s in ((mean_a, sd_a), (mean_b, sd_b))]
    if None in shapes:
        return None
    rng = np.random.default_rng(seed)
    rates = [rng.beta(a, b, PLAN_SIMULATIONS) for a, b in shapes]
    uniforms = rng.uniform(size=(2, PLAN_SIMULATIONS))
    z = stats.norm.ppf(level)

    def chance(n):
        means, variances = [], []
        for (a, b), rate, u in zip(shapes, rates, uniforms, strict=True):
            k = stats.binom.ppf(u, n, rate) if n > 0 else np.zeros(PLAN_SIMULATIONS)
            a2, b2 = a + k, b + n - k
            means.append(a2 / (a2 + b2))
            variances.append(a2 * b2 / ((a2 + b2) ** 2 * (a2 + b2 + 1)))
        gap = (means[1] - means[0] - margin) / np.sqrt(variances[0] + variances[1])
        return float(np.mean(np.abs(gap) > z))

    return _probably_decided(chance, limit)


def _probably_decided(chance, limit: int) -> int | None:
    """The ``n`` (0 to ``limit``) where ``chance(n)``, a chance of deciding after ``n``
    more trials, first reaches 1/2 under doubling and bisection; None past ``limit``."""
    if chance(0) >= 0.5:
        return 0
    lo, hi = 0, 1
    while chance(hi) < 0.5:
        if hi >= limit:
            return None
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if chance(mid) >= 0.5 else (mid, hi)
    return hi


def _beta_shapes(mean: float, sd: float) -> tuple[float, float] | None:
    """The Beta of a mean and sd, or None where none has them."""
    spread = mean * (1.0 - mean) / sd**2 - 1.0 if sd > 0 else 0.0
    if not (0.0 < mean < 1.0 and spread > 0 and math.isfinite(spread)):
        return None
    return mean * spread, (1.0 - mean) * spread


def zero_success_trials(
    threshold: float, level: float, prior: tuple[float, float] = PRIORS["uniform"]
) -> int:
    """End-to-end trials with no success that certify ``P < threshold`` at ``level``, at
    any threshold.

    For a prior ``Beta(1, b)`` (the uniform one among them) the posterior after ``n``
    failures is ``Beta(1, b + n)``, whose ``level`` quantile ``1 - (1 - level)^(1 / (b +
    n))`` is at most ``threshold`` once ``b + n >= log(1 - level) / log(1 - threshold)``:
    the closed form, checked against the quantile at the answer and one below it. Other
    priors search, the bound falling with every failure. Past ``2^52`` failures, where
    ``n`` and ``n - 1`` are the same double, there is nothing to check or search: the
    answer is the closed form, or for ``Beta(a, b)`` the limit in which ``(b + n) p`` is
    ``Gamma(a, 1)`` (relative error of order ``a / n``, under one trial).
    """
    threshold = check_probability(threshold, "threshold")
    level = check_level(level, "level")
    a, b = prior
    # (b + n) as a ratio of two doubles, taken exactly: at a threshold of 1e-320 it is past
    # the largest double.
    if a == 1.0:
        ratio = Fraction(-math.log1p(-level)) / Fraction(-math.log1p(-threshold))
    else:
        ratio = Fraction(float(stats.gamma.ppf(level, a))) / Fraction(threshold)
    n = max(1, math.ceil(ratio - Fraction(b)))
    if n >= 2**52:
        return n
    if a != 1.0:
        return trials_to_certify(0, threshold, level, prior, max_trials=2**62)
    while n > 1 and _certified(0, n - 1, threshold, level, prior):
        n -= 1
    while not _certified(0, n, threshold, level, prior):
        n += 1
    return n


def zero_success_family(threshold: float, level: float, prior=PRIORS["uniform"]) -> dict:
    """``zero_success_trials`` under each member of the prior's family
    (``prior_family.beta_family``: the prior, uniform, Jeffreys, sceptical, permissive):
    ``{member: trials}``. A decision robust to the prior needs the largest."""
    family = beta_family(*prior)
    return {name: zero_success_trials(threshold, level, shapes) for name, shapes in family.items()}


def milestone_family(rates, threshold, level, prior, power, seed) -> dict:
    """``milestone_trials``' trials per milestone under each member of the prior's family,
    ``{member: trials}`` (see ``zero_success_family``)."""
    family = beta_family(*prior)
    return {
        name: milestone_trials(rates, threshold, level, shapes, power=power, seed=seed)[
            "trials_per_milestone"
        ]
        for name, shapes in family.items()
    }


def expected_trials(
    rate: float,
    threshold: float,
    level: float,
    prior: tuple[float, float] = PRIORS["uniform"],
    max_trials: int | None = None,
) -> dict:
    """Stopping time ``T`` of end-to-end trials run one at a time until certified.

    Exact: the probability of each success count among the runs not yet stopped is
    carried forward trial by trial (counts that can no longer certify within
    ``max_trials`` are dropped as never certifying).

    Returns ``expected_trials`` (the mean of ``min(T, max_trials)``),
    ``probability_certified`` (``P(T <= max_trials)``) and ``median_trials`` (None when
    certification within ``max_trials`` is less likely than not).
    """
    limit = PLAN_MAX_TRIALS if max_trials is None else max_trials
    needed = _needed(threshold, level, prior, limit)
    alive = np.zeros(needed.size)  # P(not stopped, k successes) for certifiable k
    if needed.size:
        alive[0] = 1.0
    certified = total = 0.0
    median = None
    for n in range(1, limit + 1):
        if alive.sum() < PLAN_NEGLIGIBLE:
            break
        alive[1:] = alive[1:] * (1 - rate) + alive[:-1] * rate
        alive[0] *= 1 - rate
        stopping = needed <= n
        stopped = alive[stopping].sum()
        alive[stopping] = 0.0
        certified += stopped
        total += stopped * n
        if median is None and certified >= 0.5:
            median = n
    return {
        "expected_trials": float(total + (1 - certified) * limit),
        "probability_certified": float(min(certified, 1.0)),
        "median_trials": median,
    }


def _needed(threshold, level, prior, limit) -> np.ndarray:
    """Trials that certify with k = 0, 1, ... successes, as long as they are <= ``limit``."""
    needed = []
    start = 1
    while (n := trials_to_certify(len(needed), threshold, level, prior, limit, start)) is not None:
        needed.append(n)
        start = n
    return np.array(needed, dtype=int)


def milestone_trials(
    rates: Sequence[float],
    threshold: float,
    level: float,
    prior: tuple[float, float] = PRIORS["uniform"],
    *,
    power: float = PLAN_POWER,
    simulations: int = PLAN_SIMULATIONS,
    seed: int = 0,
) -> dict:
    """Trials per milestone that certify the task with probability ``power``.

    Under hypothesised milestone ``rates`` (true ``P = prod rates``), each milestone gets
    the same ``n`` trials and a ``prior`` Beta posterior; ``probability_certified(n)`` is
    estimated from ``simulations`` simulated evaluations with common random numbers, and
    the smallest ``n`` reaching ``power`` is found by bisection. ``end_to_end_trials``
    gives the end-to-end trials with the same power (exact binomial).
    """
    rates = np.asarray(rates, dtype=float)
    task_rate = float(np.prod(rates))
    if task_rate >= threshold:
        raise InputError(
            f"rates: their product {task_rate:.3g} is not below the threshold "
            f"{threshold:g}; no number of trials certifies P < {threshold:g}"
        )
    uniforms = np.random.default_rng(seed).uniform(size=(simulations, rates.size))

    def power_at(n: int) -> float:
        k = stats.binom.ppf(uniforms, n, rates)  # common random numbers across n
        upper = _product_upper(prior[0] + k, prior[1] + (n - k), level)
        return float(np.mean(upper <= threshold))

    lo, hi = 0, 1
    while power_at(hi) < power:
        lo, hi = hi, 2 * hi
        if hi > PLAN_MAX_TRIALS:
            raise InputError(f"more than {PLAN_MAX_TRIALS} trials per milestone would be needed")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= power else (mid, hi)
    return {
        "milestone_rates": rates.tolist(),
        "task_rate": task_rate,
        "power": power,
        "trials_per_milestone": hi,
        "total_trials": hi * rates.size,
        "probability_certified": power_at(hi),
        "end_to_end_trials": _end_to_end_power_trials(task_rate, threshold, level, prior, power),
    }


def _end_to_end_power_trials(rate, threshold, level, prior, power) -> int:
    """Smallest ``n`` whose certification probability ``P(K <= k*(n))`` reaches ``power``,
    ``k*(n)`` the most successes among ``n`` trials that still certify: every ``n`` up to
    ``PLAN_MAX_TRIALS``; past it (rare events), doubling then bisection, which the
    probability's small saw-tooth in ``n`` can leave a few trials above the smallest."""
    limit = zero_success_trials(threshold, level, prior)
    while limit <= PLAN_MAX_TRIALS:
        needed = _needed(threshold, level, prior, limit)
        n = np.arange(needed[0], limit + 1)
        most = np.searchsorted(needed, n, side="right") - 1
        reached = np.flatnonzero(stats.binom.cdf(most, n, rate) >= power)
        if reached.size:
            return int(n[reached[0]])
        limit *= 2
    limit //= 2

    def enough(n: int) -> bool:
        low, high = -1, n  # certified with ``low`` successes (-1: none), not with ``high``
        if _certified(n, n, threshold, level, prior):
            return True
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if _certified(mid, n, threshold, level, prior) else (low, mid)
        return low >= 0 and stats.binom.cdf(low, n, rate) >= power

    low, high = limit, 2 * limit
    while not enough(high):
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def next_run(
    posterior: Posterior,
    task: str,
    *,
    agent: str | None = None,
    costs: Sequence[float] | None = None,
    end_to_end_cost: float = 1.0,
    batches: Sequence[int] = (10, 50),
    threshold: float | None = None,
    level: float | None = None,
    simulations: int = PLAN_SIMULATIONS,
    seed: int = 0,
) -> pd.DataFrame:
    """Rank the runs that would lower a task's upper bound most per unit cost.

    Parameters
    ----------
    posterior : Posterior
        An exact fit; the task's estimate must be a milestone product or end-to-end
        (graded or not).
    task, agent : str
        The cell (``agent`` may be omitted when the fit has one agent).
    costs : sequence of float, optional
        Cost of one trial of each milestone (default 1 each); for a task an audited
        grader scored, one cost: of auditing one run. Such a task's routes are more runs
        graded by the grader, ``end_to_end (graded)``, and more runs audited, ``audit``
        (``_graded_next_run``).
    end_to_end_cost : float
        Cost of one end-to-end trial.
    batches : sequence of int
        Batch sizes to consider.
    threshold : float, optional
        Adds ``probability_certified``, the chance the new bound falls below it.
    level : float, optional
        Level of the bound (default: the posterior's).
    simulations : int
        Preposterior draws per candidate.
    seed : int

    Returns
    -------
    pandas.DataFrame
        One row per (run, batch), best first: ``run``, ``trials``, ``cost``,
        ``current_upper``, ``expected_upper``, ``expected_reduction``,
        ``reduction_per_cost`` and, with a threshold, ``probability_certified`` and
        ``certified`` (the current bound is already below it). Beside a milestone
        estimate's milestones, ``end_to_end (on its own)`` is the other route: end-to-end
        runs at ``end_to_end_cost`` each, their outcomes drawn from the current posterior
        and judged alone (uniform prior), so the two routes compare in cost.
    """
    level = posterior.level if level is None else level
    i, j = _position(posterior, agent, task)
    method = posterior.values("method")[i, j]
    if posterior.is_mcmc or posterior.product_at(i, j) is None:
        others = [m for m in EXACT_PLANNED if m != posterior.spec.name]
        raise InputError(
            f"next-run planning needs an exact posterior of task '{task}'; this fit "
            f"({posterior.spec.name}) has {'MCMC draws' if posterior.is_mcmc else 'none'} "
            f"there (fit with {', '.join(others[:-1])} or {others[-1]})"
        )
    if method not in (END_TO_END, MILESTONE_METHOD):
        raise InputError(
            f"next-run planning covers milestone and end-to-end estimates, not {method}"
        )
    if posterior.graded_positions[i, j] and method != END_TO_END:
        raise InputError(
            f"next-run planning of graded milestones is not built yet: task '{task}' of "
            f"agent '{agent}' has milestone counts a grader scored; plan its end-to-end runs"
        )
    if posterior.graded_positions[i, j]:  # more graded runs, or more audited ones
        audit_cost = 1.0 if costs is None else float(costs[0])
        cost = (end_to_end_cost, audit_cost)
        return _graded_next_run(
            posterior, (i, j), cost, batches, threshold=threshold, level=level, seed=seed
        )
    alpha = posterior.values("alpha")[i, j, 0]
    beta = posterior.values("beta")[i, j, 0]
    present = ~np.isnan(alpha)
    alpha, beta = alpha[present], beta[present]
    if method == END_TO_END:
        candidates = [("end_to_end", 0, end_to_end_cost)]
    else:
        costs = [1.0] * alpha.size if costs is None else list(costs)
        if len(costs) != alpha.size:
            raise InputError(
                f"costs: {len(costs)} costs given, task '{task}' has {alpha.size} milestones"
            )
        candidates = [(f"milestone {m + 1}", m, c) for m, c in enumerate(costs)]
        candidates.append((END_TO_END_ROUTE, None, end_to_end_cost))
    current = float(_product_upper(alpha[None], beta[None], level)[0])
    rng = np.random.default_rng(seed)
    rows = []
    for name, m, cost in candidates:
        for n in batches:
            if m is None:  # end-to-end runs on their own: P drawn from the current posterior
                p = np.exp(np.log(_draw_rates(rng, alpha, beta, simulations)).sum(axis=1))
                k = rng.binomial(n, p)
                a, b = 1.0 + k[:, None], 1.0 + (n - k)[:, None]  # the uniform prior
            else:
                p = _draw_rates(rng, alpha[m : m + 1], beta[m : m + 1], simulations)[:, 0]
                k = rng.binomial(n, p)
                a = np.repeat(alpha[None], simulations, axis=0)
                b = np.repeat(beta[None], simulations, axis=0)
                a[:, m] += k
                b[:, m] += n - k
            rows.append(_row(name, n, cost, current, _product_upper(a, b, level), threshold))
    return _table(rows, current, threshold)


def _row(name, n, cost, current, upper, threshold) -> dict:
    """One route's row: its cost, and the bounds its simulated outcomes leave."""
    row = dict(
        run=name,
        trials=n,
        cost=n * cost,
        current_upper=current,
        expected_upper=float(upper.mean()),
        expected_reduction=current - float(upper.mean()),
    )
    row["reduction_per_cost"] = row["expected_reduction"] / row["cost"]
    if threshold is not None:
        row["probability_certified"] = float(np.mean(upper <= threshold))
    return row


def _table(rows, current, threshold) -> pd.DataFrame:
    table = pd.DataFrame(rows).sort_values("reduction_per_cost", ascending=False)
    if threshold is not None:
        table["certified"] = current <= threshold
    return table.reset_index(drop=True)


# Simulations of each graded route (a graded posterior each, milliseconds).
GRADED_SIMULATIONS = 400
# The routes of a task an audited grader scored.
GRADED_RUNS_ROUTE, AUDIT_ROUTE = "end_to_end (graded)", "audit"


def _graded_next_run(
    posterior, at: tuple, costs, batches, *, threshold, level, seed
) -> pd.DataFrame:
    """``next_run`` of the task at ``at`` (agent and task indices) an audited grader
    scored: more runs graded by the same grader (``costs[0]`` each), or more of its runs
    audited (``costs[1]`` each; as many true successes among them, in share, as its audit
    has), each simulated ``GRADED_SIMULATIONS`` times from the joint posterior of ``p``,
    ``se`` and ``sp``."""
    from bayes_eval.exact.graded import graded_rate

    rate = posterior.graded_at(*at)
    prior = posterior.spec.priors["end_to_end"]
    prior = (prior.alpha, prior.beta)
    k, n = rate.graded, rate.runs
    (s1, s2), (c1, c2) = rate.sensitivity, rate.specificity
    before = posterior.spec.grader  # the Betas before the audit: its counts are the rest
    positives = s1 + s2 - before["sensitivity"].alpha - before["sensitivity"].beta
    negatives = c1 + c2 - before["specificity"].alpha - before["specificity"].beta
    share = positives / max(positives + negatives, 1.0)
    rng = np.random.default_rng(seed)

    def bounds(route, more):
        joint = rate.joint_draws(GRADED_SIMULATIONS, rng)
        out = np.empty(GRADED_SIMULATIONS)
        for s in range(GRADED_SIMULATIONS):
            se, sp, runs, graded = (s1, s2), (c1, c2), n, k
            if route == AUDIT_ROUTE:
                true = rng.binomial(more, share)
                found = rng.binomial(true, joint["se"][s])
                cleared = rng.binomial(more - true, joint["sp"][s])
                se = (s1 + found, s2 + true - found)
                sp = (c1 + cleared, c2 + more - true - cleared)
            else:
                runs, graded = n + more, k + rng.binomial(more, joint["q"][s])
            out[s] = graded_rate(graded, runs, prior, se, sp).quantile(level)
        return out

    current = rate.quantile(level)
    routes = ((GRADED_RUNS_ROUTE, costs[0]), (AUDIT_ROUTE, costs[1]))
    rows = [
        _row(name, more, cost, current, bounds(name, more), threshold)
        for name, cost in routes
        for more in batches
    ]
    return _table(rows, current, threshold)


def _draw_rates(rng, alpha, beta, size) -> np.ndarray:
    """``size`` draws of each ``Beta(alpha, beta)`` rate, ``(size, rates)``; a zero beta is
    a point mass at 1 (Haldane, k = n)."""
    p = rng.beta(alpha, np.maximum(beta, 1e-300), (size, alpha.size))
    return np.where(beta == 0, 1.0, p)


def _product_upper(a: np.ndarray, b: np.ndarray, level: float) -> np.ndarray:
    """Upper bounds at ``level`` of products of ``Beta(a_m, b_m)``, one per row (exact)."""
    from bayes_eval.exact.products import BetaProduct, summarise_products

    products = [BetaProduct(((ar, br),)) for ar, br in zip(a, b, strict=True)]
    return np.array([np.exp(-s.x_quantiles[0]) for s in summarise_products(products, [1 - level])])


def _position(posterior, agent, task) -> tuple[int, int]:
    agents, tasks = list(posterior.coords[AGENT]), list(posterior.coords[TASK])
    if agent is None:
        if len(agents) != 1:
            raise InputError(f"agent: the fit has {len(agents)} agents; name one of {agents}")
        agent = agents[0]
    if agent not in agents:
        raise InputError(f"agent: no agent '{agent}' in the fit; agents: {', '.join(agents)}")
    if task not in tasks:
        raise InputError(f"task: no task '{task}' in the fit; tasks: {', '.join(tasks)}")
    return agents.index(agent), tasks.index(task)
