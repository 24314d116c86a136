"""End-to-end runs scored by a grader that errs: the exact posterior of the true rate.

A run succeeds with probability ``p``; the grader calls a true success a success with
probability ``se`` (its sensitivity) and a true failure a success with probability
``1 - sp`` (``sp``: its specificity), so a run is *graded* a success with probability
``q = se p + (1 - sp)(1 - p)``. With ``p ~ Beta(a, b)``, ``se ~ Beta(s1, s2)`` and ``sp ~
Beta(c1, c2)`` independent (the grader's priors updated by its audit,
``evidence.audit.GraderCounts``), ``k`` runs graded successes of ``n``:

    p | k  ~  sum_t W_t Beta(a + t, b + n - t),
    W_t  ∝  C(n, t) B(a + t, b + n - t) / B(a, b)
            sum_j BB(j; t, s1, s2) BB(k - j; n - t, c2, c1),

a finite mixture over ``t``, the true successes among the ``n`` runs, of which ``j`` were
detected and ``k - j`` are false alarms. ``BB`` is the Beta-Binomial: ``se`` and ``sp`` are
integrated out exactly, and the runs themselves update them too (their joint posterior,
not their audit alone). Nothing is approximated: the mean, the CDF and every quantile are
the mixture's, found by root finding on its CDF to 1e-12 relative.

A perfect grader (``se = sp = 1``) leaves one component, ``t = k``: the plain Beta.
Where the grader's false alarms could explain every graded success, the components down
to ``t = 0`` keep weight, and the bound cannot fall below what the grader's specificity
allows: the floor the audit sets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

__all__ = ["GradedRate", "graded_rate"]

# Components below this share of the largest weight are dropped (they move no figure).
NEGLIGIBLE_WEIGHT = 1e-18
# Rows of true successes handled at once: memory stays near ROWS x (k + 1) numbers.
CHUNK_ROWS = 4096


@dataclass(frozen=True)
class GradedRate:
    """The posterior of ``p``: the mixture ``sum_t weights[t] Beta(alpha[t], beta[t])``."""

    weights: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray

    @property
    def mean(self) -> float:
        return float(np.sum(self.weights * self.alpha / (self.alpha + self.beta)))

    @property
    def sd(self) -> float:
        total = self.alpha + self.beta
        second = self.alpha * (self.alpha + 1) / (total * (total + 1))
        return float(np.sqrt(max(np.sum(self.weights * second) - self.mean**2, 0.0)))

    def cdf(self, x: float) -> float:
        """``P(p <= x)``."""
        return float(np.sum(self.weights * special.betainc(self.alpha, self.beta, x)))

    def sf(self, x: float) -> float:
        """``P(p > x)``, from the upper tails (exact where the CDF is near 1)."""
        return float(np.sum(self.weights * special.betaincc(self.alpha, self.beta, x)))

    def quantile(self, level: float) -> float:
        """The ``level`` quantile (an upper bound for ``level`` above one half)."""
        if level > 0.5:  # the upper tail, where 1 - CDF would lose its digits
            gap = lambda x: self.sf(x) - (1.0 - level)  # noqa: E731
        else:
            gap = lambda x: self.cdf(x) - level  # noqa: E731
        # the components' own quantiles bracket the mixture's
        ends = special.betaincinv(self.alpha, self.beta, level)
        low, high = float(ends.min()), float(ends.max())
        if low == high:
            return low
        return float(optimize.brentq(gap, low, high, xtol=1e-300, rtol=1e-12))

    def draws(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` independent draws of ``p``."""
        pick = rng.choice(len(self.weights), size=size, p=self.weights)
        return rng.beta(self.alpha[pick], self.beta[pick])


def graded_rate(
    graded: int,
    runs: int,
    prior: tuple[float, float],
    sensitivity: tuple[float, float],
    specificity: tuple[float, float],
) -> GradedRate:
    """The posterior of the true rate after ``graded`` of ``runs`` graded successes
    (the module docstring), with ``prior`` the Beta of ``p`` and ``sensitivity``,
    ``specificity`` the Betas of the grader's (its audit included)."""
    a, b = prior
    s1, s2 = sensitivity
    c1, c2 = specificity
    k, n = int(graded), int(runs)
    if not 0 <= k <= n:
        raise ValueError(f"graded successes {k} of {n} runs")
    t = np.arange(n + 1)
    log_weight = np.empty(n + 1)
    j = np.arange(k + 1)
    for start in range(0, n + 1, CHUNK_ROWS):
        rows = t[start : start + CHUNK_ROWS, None]
        # j detected of t true successes, k - j false alarms of the n - t failures
        possible = (j <= rows) & (k - j <= n - rows)
        with np.errstate(invalid="ignore"):
            detected = _log_beta_binomial(j, rows, s1, s2)
            alarms = _log_beta_binomial(k - j, n - rows, c2, c1)
        terms = np.where(possible, detected + alarms, -np.inf)
        log_weight[start : start + CHUNK_ROWS] = special.logsumexp(terms, axis=1)
    log_weight += _log_choose(n, t) + special.betaln(a + t, b + n - t) - special.betaln(a, b)
    weight = np.exp(log_weight - log_weight.max())
    kept = weight >= NEGLIGIBLE_WEIGHT
    weight = weight[kept] / weight[kept].sum()
    return GradedRate(weight, a + t[kept], b + n - t[kept])


def _log_choose(n, t):
    return special.gammaln(n + 1) - special.gammaln(t + 1) - special.gammaln(n - t + 1)


def _log_beta_binomial(x, m, a: float, b: float):
    """``log BB(x; m, a, b)``, the Beta-Binomial's log pmf (NaN where ``x > m``)."""
    return _log_choose(m, x) + special.betaln(x + a, m - x + b) - special.betaln(a, b)
