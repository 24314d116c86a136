"""Where to run next when the question is pass@k across an agent's tasks: a budget of
end-to-end runs shared among the tasks so that the average pass@k at a target ``k`` is
known as precisely as possible.

With exact per-task posteriors ``P_t ~ Beta(a_t, b_t)`` (independent across tasks), the
average ``A = mean_t g(P_t)``, ``g(P) = 1 - (1 - P)^k``, has variance ``sum_t Var g(P_t) /
T^2``, and ``Var g(P) = R(a, b, 2k) - R(a, b, k)^2`` with ``R(a, b, k) = E[(1 - P)^k] =
B(a, b + k) / B(a, b)``. ``m`` more runs of task ``t`` leave, in expectation over their
outcomes ``y ~ BetaBinomial(m, a_t, b_t)`` (the preposterior), ``V_t(m) = sum_y
P(y) Var g | (a_t + y, b_t + m - y)``: exact, a finite sum. In an ``end_to_end_pooled``
fit a task's rate is ``Beta(mu kappa + k_t, (1 - mu) kappa + n_t - k_t)`` given the
agent's population ``(mu, kappa)``; ``V_t`` is then averaged over ``HYPER_DRAWS`` of the
population's posterior draws, held there: the part of the task's uncertainty its own runs
can remove (more runs also teach the population, which this leaves out).

Where the fit has a share ``pi`` of tasks never solved (``never_share``:
``end_to_end_shared``, ``end_to_end_zero_inflated``), a task without a success in its
``n`` runs is never solved with probability ``w = pi / (pi + (1 - pi) B(a, b + n) / B(a,
b))``, its rate is otherwise ``Beta(a, b + n)``: ``g(P)`` has variance ``(1 - w) Var_B g +
w (1 - w) E_B[g]^2``, and ``m`` more runs give ``y = 0`` with probability ``w + (1 - w)
BB(0 | m)``, after which ``w`` becomes ``w / (w + (1 - w) BB(0 | m))``, or ``y > 0`` with
probability ``(1 - w) BB(y | m)``, after which the task is solvable: the same finite sum,
in two parts. Three rules share a budget:

* ``information`` (ours): greedy, each batch of runs to the task whose ``V_t`` it lowers
  most: the expected posterior variance of ``A`` falls as fast as it can, batch by batch;
* ``hardest``: Kazdan et al. (2025) sample the hardest tasks most; here the budget is
  split evenly among the harder half of the tasks by posterior mean (ties to the lower);
* ``uniform``: the budget split evenly among all tasks.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from bayes_eval.constants import AGENT, END_TO_END, NEVER_SHARE, TASK
from bayes_eval.errors import InputError
from bayes_eval.exact.attempts import log_beta_ratio, mean_at_least_one, never_solved
from bayes_eval.registry import model_of
from bayes_eval.results.attempts import parse_attempts

__all__ = ["RULES", "allocate", "expected_variance"]

RULES = ("information", "hardest", "uniform")
# The largest budget allocated (each greedy step sums a preposterior over its runs).
MAX_BUDGET = 100_000
# Posterior draws of a pooled fit's population (mu, kappa) that a task's preposterior
# averages over, evenly spaced.
HYPER_DRAWS = 256


def expected_variance(a, b, k: int, runs: int, never=0.0) -> float:
    """``V(m)``: the expected posterior variance of ``1 - (1 - P)^k`` after ``runs`` more
    runs, ``P ~ Beta(a, b)`` now, or ``P = 0`` with probability ``never``, averaged over
    the shapes given (arrays: the draws of a pooled fit's population; the module
    docstring)."""
    a, b = np.atleast_1d(a)[None, :], np.atleast_1d(b)[None, :]
    never = np.broadcast_to(np.asarray(never, dtype=float), a.shape)
    y = np.arange(runs + 1)[:, None]
    weights = (1.0 - never) * stats.betabinom.pmf(y, runs, a, b)
    weights[0] += never[0]
    # no success in the runs: the task is never solved with the updated probability
    after = np.where(y == 0, never_solved(never, a, b, runs), 0.0)
    return float(np.mean(np.sum(weights * _variance(a + y, b + runs - y, k, after), axis=0)))


def _variance(a, b, k, never=0.0):
    """``Var[1 - (1 - P)^k]`` for ``P ~ Beta(a, b)``, or ``P = 0`` with probability
    ``never``: ``(1 - w) (R(2k) - R(k)^2) + w (1 - w) (1 - R(k))^2``, never below 0."""
    once = log_beta_ratio(a, b, k)
    twice = log_beta_ratio(a, b, 2 * k)
    solvable = np.maximum(np.exp(twice) - np.exp(2 * once), 0.0)
    return (1.0 - never) * (solvable + never * np.expm1(once) ** 2)


def allocate(
    posterior,
    attempts: int | str,
    budget: int,
    *,
    agent: str | None = None,
    rule: str = "information",
    batch: int = 1,
) -> pd.DataFrame:
    """Share ``budget`` end-to-end runs among an agent's tasks by ``rule``.

    Parameters
    ----------
    posterior : Posterior
        An exact fit whose every task of ``agent`` has an end-to-end Beta posterior
        (``end_to_end``, or ``phuong_chain`` where every task has end-to-end runs), or a
        pooled end-to-end fit (``end_to_end_pooled``, ``end_to_end_shared``,
        ``end_to_end_zero_inflated``).
    attempts : int or str
        The target ``k`` of pass@k.
    budget, batch : int
        Runs to share, in batches of ``batch`` (the last may be smaller).
    agent : str, optional
        Needed where the fit has several agents.
    rule : str
        One of ``RULES``.

    Returns
    -------
    pandas.DataFrame
        One row per task: ``agent``, ``task``, ``successes``, ``trials``, ``pass_at_mean``
        and ``pass_at_sd`` now, ``runs`` to add and ``expected_sd`` after them; its
        ``attrs`` hold the rule, ``k`` and the expected posterior sd of the average pass@k
        now and after the runs under each rule (``sd_now``, ``sd_after``; for a pooled
        fit, of the part the tasks' own runs can remove). ``pass_at_sd`` and
        ``expected_sd`` are that part too.
    """
    ks = parse_attempts(attempts if isinstance(attempts, str) else [attempts])
    if len(ks) != 1:
        raise InputError("attempts: one target number of attempts")
    (k,) = ks
    if rule not in RULES:
        raise InputError(f"rule: {rule!r} is not one of {', '.join(RULES)}")
    if not (isinstance(budget, int) and 1 <= budget <= MAX_BUDGET):
        raise InputError(f"budget: a whole number of runs from 1 to {MAX_BUDGET:,}")
    if not (isinstance(batch, int) and batch >= 1):
        raise InputError("batch: a whole number of runs, 1 or more")
    tasks, shapes = _tasks(posterior, agent)
    plans = {name: _runs(name, shapes, k, budget, batch) for name in RULES}
    runs = plans[rule]
    now = _expected(shapes, k, np.zeros(len(shapes), dtype=int))
    after = _expected(shapes, k, runs)
    means = [float(np.mean((1 - w) * mean_at_least_one(x, y, k))) for x, y, w in shapes]
    table = tasks.assign(
        pass_at_mean=means, pass_at_sd=np.sqrt(now), runs=runs, expected_sd=np.sqrt(after)
    )
    size = len(table)
    table.attrs.update(
        rule=rule,
        attempts=k,
        sd_now=math.sqrt(now.sum()) / size,
        sd_after={
            name: math.sqrt(_expected(shapes, k, plan).sum()) / size for name, plan in plans.items()
        },
    )
    return table


def _runs(rule, shapes, k, budget, batch) -> np.ndarray:
    """Runs per task under ``rule``."""
    size = len(shapes)
    if rule == "uniform":
        return _even(budget, np.arange(size), size)
    if rule == "hardest":
        means = np.array([np.mean((1 - w) * x / (x + y)) for x, y, w in shapes])
        order = np.argsort(means, kind="stable")  # hardest first
        return _even(budget, order[: max(1, size // 2)], size)
    runs = np.zeros(size, dtype=int)
    current = _expected(shapes, k, runs)
    following = _expected(shapes, k, runs + min(batch, budget))
    left = budget
    while left > 0:
        step = min(batch, left)
        if step != batch:  # the last, smaller batch
            following = _expected(shapes, k, runs + step)
        best = int(np.argmax(current - following))
        runs[best] += step
        left -= step
        current[best] = following[best]
        a, b, never = shapes[best]
        following[best] = expected_variance(a, b, k, int(runs[best]) + batch, never)
    return runs


def _expected(shapes, k, runs) -> np.ndarray:
    """``V_t(runs_t)`` of every task."""
    return np.array(
        [expected_variance(a, b, k, int(m), w) for (a, b, w), m in zip(shapes, runs, strict=True)]
    )


def _even(budget, chosen, size) -> np.ndarray:
    """``budget`` runs split evenly among ``chosen`` (in order: the first get the rest)."""
    runs = np.zeros(size, dtype=int)
    share, rest = divmod(budget, len(chosen))
    runs[chosen] = share
    runs[chosen[:rest]] += 1
    return runs


def _tasks(posterior, agent) -> tuple[pd.DataFrame, list]:
    """The agent's tasks (agent, task, successes, trials) and each one's Beta shapes with
    its probability of being never solved: one triple for an exact posterior,
    ``HYPER_DRAWS`` for a pooled one (a refusal otherwise)."""
    agents = posterior.coords[AGENT]
    if agent is None:
        if len(agents) > 1:
            raise InputError(f"agent: the fit has {len(agents)} agents; name one (--agent)")
        agent = agents[0]
    if agent not in agents:
        raise InputError(f"agent: no agent {agent!r} in the fit")
    i = agents.index(agent)
    spec = posterior.spec
    pooled = posterior.is_mcmc
    if pooled and model_of(spec).population != "beta":
        raise InputError(
            f"allocation needs exact per-task posteriors or a pooled end-to-end fit, not "
            f"{spec.name}: the runs of a task must update its rate alone, in closed form"
        )
    if pooled:
        draws = posterior.draws
        mu, kappa = (draws[name].sel(agent=agent).values.ravel() for name in ("mu", "kappa"))
        kept = np.linspace(0, mu.size - 1, min(HYPER_DRAWS, mu.size)).astype(int)
        population = (mu[kept] * kappa[kept], (1 - mu[kept]) * kappa[kept])
        share = (
            draws[NEVER_SHARE].sel(agent=agent).values.ravel()[kept]
            if NEVER_SHARE in draws
            else np.zeros(kept.size)
        )
    rows, shapes = [], []
    for name, task, ii, j in posterior.cells():
        if ii != i:
            continue
        method = posterior.values("method")[ii, j]
        k, n = posterior.values("cp_successes")[ii, j], posterior.values("cp_trials")[ii, j]
        never = 0.0
        if pooled:
            a, b = population[0] + k, population[1] + n - k
            if k == 0:  # never solved, or solvable and failed n times
                never = never_solved(share, *population, n)
        else:
            product = posterior.product_at(ii, j)
            factors = None if product is None or method != END_TO_END else product.factors
            if (
                method != END_TO_END
                or factors is None
                or len(factors) != 1
                or factors[0][0].size != 1
            ):
                raise InputError(
                    f"allocation shares end-to-end runs: task {task!r} of agent {agent!r} "
                    f"has no end-to-end Beta posterior ({method or 'no estimate'}); fit "
                    "with --model end_to_end or end_to_end_pooled"
                )
            a, b = factors[0]
        rows.append({AGENT: name, TASK: task, "successes": int(k), "trials": int(n)})
        shapes.append((np.asarray(a, dtype=float), np.asarray(b, dtype=float), never))
    return pd.DataFrame(rows), shapes
