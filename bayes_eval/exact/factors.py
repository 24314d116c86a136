"""One factor: ``X = -log p`` for ``p ~ Beta(a, b)``, its CDF, tails and quantiles; a
weighted mixture of such factors (``mixture_summary``); and ``ProductSummary``, what every
engine returns of a product, to ``QUANTILE_TOLERANCE``.

scipy's Beta functions, read on the ``X`` scale so that rates down to 1e-300 keep their
precision; below ``BETA_POWER_LAW_BELOW`` a quantile comes from the leading power law
of the lower tail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

__all__ = [
    "GRID_TAIL_MASS",
    "ProductSummary",
    "QUANTILE_TOLERANCE",
    "mixture_summary",
    "x_cdf",
    "x_isf",
    "x_ppf",
    "x_tails",
]

# Exact quantiles: largest error in X = -log P where X >= 1, and relative to X below, so
# that the relative error of both P and 1 - P is at most 1e-4 (0.01%).
QUANTILE_TOLERANCE = 1e-4


# Tail mass of each Beta factor that the grid may lump at the edge of its support.
GRID_TAIL_MASS = 1e-18
# Beta quantiles below this come from the leading power law of the lower tail (scipy's
# inverse stops at the smallest normal double).
BETA_POWER_LAW_BELOW = 1e-290


@dataclass(frozen=True)
class ProductSummary:
    """Deterministic summaries of ``X = -log P`` for one ``BetaProduct``.

    Attributes
    ----------
    x_quantiles : ndarray
        ``X`` quantiles at the requested probabilities (``P`` quantile at ``1 - q``
        is ``exp(-x_quantiles)``).
    x_cdf : ndarray
        ``P(X <= x)`` at the requested points, i.e. ``P(P >= exp(-x))``.
    error : float
        Bound or estimate (grid) or validated size (saddlepoint) of the error in ``X``,
        relative to ``X`` where ``X < 1`` (so in both ``P`` and ``1 - P``); 0 if exact.
    engine : str
        ``"point"``, ``"beta"``, ``"mixture"``, ``"saddlepoint"`` or ``"grid"``.
    """

    x_quantiles: np.ndarray
    x_cdf: np.ndarray
    error: float
    engine: str


def x_cdf(a, b, x):
    """``P(-log p <= x)``, precise however small."""
    return x_tails(a, b, x)[0]


def x_tails(a, b, x):
    """``P(-log p <= x)`` and ``P(-log p > x)``, each precise however small.

    One regularised incomplete Beta function gives one tail outright (through
    ``1 - p`` below ``x = log 2``, through ``p`` above); the other is one minus it,
    except where that would lose more than three digits, where scipy's (slower)
    complement is used. Where ``e^-x`` is below ``BETA_POWER_LAW_BELOW`` (it underflows
    past ``x = 745``) the upper tail is the power law ``e^(-a x) / (a B(a, b))``, exact
    to double precision there.
    """
    a, b, x = np.broadcast_arrays(a, b, np.maximum(np.asarray(x, dtype=float), 0.0))
    near = x < math.log(2)
    far = x > -math.log(BETA_POWER_LAW_BELOW)
    middle = ~near & ~far
    direct = np.empty(x.shape)  # each function only where it is used
    direct[near] = special.betainc(b[near], a[near], -np.expm1(-x[near]))  # P(1 - p <= 1 - e^-x)
    direct[middle] = special.betainc(a[middle], b[middle], np.exp(-x[middle]))
    log_far_tail = -a[far] * x[far] - np.log(a[far]) - special.betaln(a[far], b[far])
    direct[far] = np.exp(log_far_tail)
    other = np.subtract(1.0, direct, out=np.empty(x.shape))
    other[far] = -np.expm1(log_far_tail)
    small = (other < 1e-3) & ~far
    if np.any(small):
        xs, ns, a_small, b_small = x[small], near[small], a[small], b[small]
        other[small] = np.where(
            ns,
            special.betaincc(b_small, a_small, -np.expm1(-np.where(ns, xs, 0.0))),
            special.betaincc(a_small, b_small, np.exp(-np.where(ns, 1.0, xs))),
        )
    return np.where(near, direct, other), np.where(near, other, direct)


def x_ppf(a, b, q):
    """Quantile of ``-log p`` at probability ``q``, precise in both tails."""
    q = np.asarray(q, dtype=float)
    one_minus_p = np.exp(_log_beta_quantile(b, a, q))  # 1 - p at the q-quantile of X
    with np.errstate(divide="ignore"):
        log_p = _log_beta_quantile(a, b, 1.0 - q)  # p at the same point
        return np.where(one_minus_p < 0.5, -np.log1p(-one_minus_p), -log_p)


def x_isf(a, b, tail):
    """``x`` with ``P(-log p > x) = tail``, for small ``tail``."""
    return -_log_beta_quantile(a, b, tail)


def _log_beta_quantile(a, b, q):
    """``log`` of the ``Beta(a, b)`` quantile at ``q``.

    Where scipy's inverse gives NaN (it does for ``a`` just above 1 below q = 1e-16,
    as at the grid's ``GRID_TAIL_MASS``) or a quantile below ``BETA_POWER_LAW_BELOW``
    (it stops at the smallest normal double, 2.2e-308, where a small ``a`` puts the
    quantile at 1e-900), the leading term of the lower tail, ``P(p < t) ~ t^a / (a
    B(a, b))``, gives it: its relative error is of order ``t``.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log(special.betaincinv(a, b, q))
        power_law = (np.log(q) + np.log(a) + special.betaln(a, b)) / a
    return np.where(np.isnan(exact) | (exact < math.log(BETA_POWER_LAW_BELOW)), power_law, exact)


def mixture_summary(a, b, weights, probs, x_points) -> ProductSummary:
    """``ProductSummary`` of ``P ~ sum_t weights[t] Beta(a[t], b[t])``, exactly: the
    mixture's CDF of ``X`` is the weighted sum of the components' (``x_tails``, precise in
    both tails), and each quantile is its root, found to 1e-13 relative between the
    components' own quantiles (which bracket it)."""
    a, b, weights = (np.asarray(v, dtype=float) for v in (a, b, weights))
    probs = np.asarray(probs, dtype=float)

    def tails(x):
        low, high = x_tails(a, b, x)
        return float(np.sum(weights * low)), float(np.sum(weights * high))

    quantiles = []
    for q in probs:
        ends = x_ppf(a, b, q)
        low, high = float(ends.min()), float(ends.max())
        if q < 0.5:  # the lower tail of X, where its CDF keeps its digits
            gap = lambda x, q=q: tails(x)[0] - q  # noqa: E731
        else:
            gap = lambda x, q=q: (1.0 - q) - tails(x)[1]  # noqa: E731
        found = low if low == high else optimize.brentq(gap, low, high, xtol=1e-300, rtol=1e-13)
        quantiles.append(found)
    x_cdf_values = np.array([tails(x)[0] for x in np.asarray(x_points, dtype=float)])
    return ProductSummary(np.array(quantiles), x_cdf_values, 0.0, "mixture")
