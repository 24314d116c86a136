"""The saddlepoint: second-order Lugannani-Rice for sums of ``-log Beta``, vectorised.

The cumulant generating function of ``-log p`` is closed-form in log-gamma
differences; each tail is computed on its own side. Within ``SADDLEPOINT_ERROR`` of
mpmath where it is used (tests/test_exact_reference.py).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

__all__ = [
    "SADDLEPOINT_ERROR",
    "SADDLEPOINT_MAX_PROB",
    "SADDLEPOINT_MIN_SHAPE",
    "cgf",
    "saddlepoint_cdf",
    "saddlepoint_quantiles",
]

# Shape parameters at or above which the second-order saddlepoint is used for
# products of two or more factors, the largest probability of X = -log P it is used for
# (beyond it, in the upper tail of X, that is the lower bound at levels above 0.99, its
# error grows to 7e-4 where a shape is 10), and its error in X there: at most 6.6e-5
# against mpmath from level 0.5 to 1 - 1e-12 (tests/test_exact_reference.py).
SADDLEPOINT_MIN_SHAPE = 10.0
SADDLEPOINT_MAX_PROB = 0.99
SADDLEPOINT_ERROR = 1e-4


def _pad(a_list, b_list):
    width = max(len(a) for a in a_list)
    # Padding factors have b = 0, so every term of the CGF is 0 for them; their
    # a is the row's largest so that min(a) is still the real factors' minimum.
    a = np.repeat([[ai.max()] for ai in a_list], width, axis=1)
    b = np.zeros((len(a_list), width))
    for i, (ai, bi) in enumerate(zip(a_list, b_list, strict=True)):
        a[i, : ai.size] = ai
        b[i, : bi.size] = bi
    return a, b


def cgf(a, b, s):
    """Cumulant generating function of ``sum -log p`` and its first four derivatives."""
    s = s[:, None]
    k0 = _log_gamma_ratio(a + b, s) - _log_gamma_ratio(a, s)
    k1 = special.digamma(a + b - s) - special.digamma(a - s)
    k2 = special.polygamma(1, a - s) - special.polygamma(1, a + b - s)
    k3 = special.polygamma(2, a + b - s) - special.polygamma(2, a - s)
    k4 = special.polygamma(3, a - s) - special.polygamma(3, a + b - s)
    return [k.sum(axis=1) for k in (k0, k1, k2, k3, k4)]


# Stirling's series for log Gamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2): the
# coefficients of z^-1, z^-3, ..., z^-9. Beyond STIRLING_FROM its next term is below 1e-17.
STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)
STIRLING_FROM = 20.0


def _log_gamma_ratio(z, s):
    """``log Gamma(z) - log Gamma(z - s)``, precise when both arguments are huge.

    A plain difference of ``gammaln`` loses ``|log Gamma(z)| * 1e-16`` (1e-9 at a
    million trials), which the saddlepoint's second-order terms amplify into percent
    errors. From ``STIRLING_FROM`` on, the difference is taken term by term, with
    ``log(z / (z - s))`` as ``-log1p(-s / z)``.
    """
    z, s = np.broadcast_arrays(z, s)
    out = special.gammaln(z) - special.gammaln(z - s)
    large = np.minimum(z, z - s) >= STIRLING_FROM
    if np.any(large):
        zl, sl = z[large], s[large]
        rest = zl - sl
        series = sum(
            c * (zl ** -(2 * k + 1) - rest ** -(2 * k + 1)) for k, c in enumerate(STIRLING)
        )
        out[large] = sl * np.log(zl) - (rest - 0.5) * np.log1p(-sl / zl) - sl + series
    return out


def _window(a, b):
    """Half-width in s of the window around 0 where Lugannani-Rice is interpolated."""
    return 0.05 / np.sqrt(cgf(a, b, np.zeros(a.shape[0]))[2])


def _lugannani_rice(a, b, s, edge):
    """``(P(X <= K'(s)), P(X > K'(s)))`` by second-order Lugannani-Rice.

    Each tail is computed on its own side, so both keep their relative precision far
    out (a lower tail of 1e-30 is not ``1 - (1 - 1e-30)``). Near s = 0 the terms cancel
    catastrophically (0/0 in the limit): within ``|s| < edge`` (``|u| < 0.05``, a
    twentieth of a standard deviation, where the CDF is nearly linear) interpolate
    linearly in s between the window's edges.
    """
    near = np.abs(s) < edge
    lower, upper = _lugannani_rice_tails(a, b, np.where(near, edge, s))
    if np.any(near):
        left_lower, left_upper = _lugannani_rice_tails(a, b, -edge)
        weight = (s + edge) / (2 * edge)
        lower = np.where(near, left_lower + weight * (lower - left_lower), lower)
        upper = np.where(near, left_upper + weight * (upper - left_upper), upper)
    return lower, upper


def _lugannani_rice_tails(a, b, s):
    k0, k1, k2, k3, k4 = cgf(a, b, s)
    w = np.sign(s) * np.sqrt(np.maximum(2 * (s * k1 - k0), 0.0))
    u = s * np.sqrt(k2)
    l3 = k3 / k2**1.5
    l4 = k4 / k2**2
    correction = stats.norm.pdf(w) * (
        1 / u - 1 / w + (l4 / 8 - 5 * l3**2 / 24) / u - l3 / (2 * u**2) - 1 / u**3 + 1 / w**3
    )
    lower = np.clip(stats.norm.cdf(w) - correction, 0.0, 1.0)
    upper = np.clip(stats.norm.sf(w) + correction, 0.0, 1.0)
    return lower, upper


def _solve_saddlepoint(a, b, target, value_of, guess):
    """Find s with ``value_of(s) == target`` (increasing in s), s in (-inf, min a).

    Works in ``t = log(min a - s)``, where ``value_of`` decreases; starts from a bracket
    of width 1 around ``guess`` (an approximate s), widened to the whole range
    (t from -30, s next to min a, to +30, s ~ -1e13) where it does not hold, and
    narrows it by the Illinois variant of regula falsi.
    """
    a_min = a.min(axis=1)

    def g(t):
        return value_of(a_min - np.exp(t)) - target

    centre = np.log(np.maximum(a_min - guess, 1e-12))
    lo, hi = centre - 0.5, centre + 0.5
    g_lo, g_hi = g(lo), g(hi)
    lo, g_lo = np.where(g_lo >= 0, lo, -30.0), np.where(g_lo >= 0, g_lo, np.inf)
    hi, g_hi = np.where(g_hi <= 0, hi, 30.0), np.where(g_hi <= 0, g_hi, -np.inf)
    if np.any(np.isinf(g_lo)) or np.any(np.isinf(g_hi)):
        g_lo = np.where(np.isinf(g_lo), g(lo), g_lo)
        g_hi = np.where(np.isinf(g_hi), g(hi), g_hi)
    side = np.zeros(target.shape)
    for _ in range(100):
        span = g_lo - g_hi
        t = np.where(
            span > 0, lo + g_lo * (hi - lo) / np.where(span > 0, span, 1.0), 0.5 * (lo + hi)
        )
        t = np.clip(t, lo, hi)
        g_t = g(t)
        right = g_t > 0  # root lies above t
        lo, g_lo = np.where(right, t, lo), np.where(right, g_t, g_lo)
        hi, g_hi = np.where(right, hi, t), np.where(right, g_hi, g_t)
        # Illinois: halve the stale end's value when the same end moves twice.
        g_hi = np.where(right & (side > 0), 0.5 * g_hi, g_hi)
        g_lo = np.where(~right & (side < 0), 0.5 * g_lo, g_lo)
        side = np.where(right, 1.0, -1.0)
        if np.all((hi - lo < 1e-10) | (np.abs(g_t) < 1e-10)):
            break
    return a_min - np.exp(t)


def saddlepoint_quantiles(a_list, b_list, probs):
    """X quantiles, each found on the logarithm of its smaller tail (relative precision)."""
    a, b = _pad(a_list, b_list)
    edge = _window(a, b)
    _, mean, var, _, _ = cgf(a, b, np.zeros(a.shape[0]))
    out = np.empty((a.shape[0], probs.size))
    for j, q in enumerate(probs):
        target = np.full(a.shape[0], math.log(q) if q < 0.5 else -math.log1p(-q))
        tail = 0 if q < 0.5 else 1
        sign = 1.0 if q < 0.5 else -1.0  # -log of the upper tail increases with s

        def log_tail(s, tail=tail, sign=sign):
            return sign * np.log(np.maximum(_lugannani_rice(a, b, s, edge)[tail], 1e-300))

        guess = stats.norm.ppf(q) / np.sqrt(var)  # s of the normal approximation
        s = _solve_saddlepoint(a, b, target, log_tail, guess)
        out[:, j] = cgf(a, b, s)[1]
    return out


def saddlepoint_cdf(a_list, b_list, x):
    a, b = _pad(a_list, b_list)
    _, mean, var, _, _ = cgf(a, b, np.zeros(a.shape[0]))
    edge = _window(a, b)
    out = np.empty(x.shape)
    for j in range(x.shape[1]):
        positive = x[:, j] > 0
        target = np.where(positive, x[:, j], 1.0)
        guess = (target - mean) / var  # s of the normal approximation
        s = _solve_saddlepoint(a, b, target, lambda s: cgf(a, b, s)[1], guess)
        out[:, j] = np.where(positive, _lugannani_rice(a, b, s, edge)[0], 0.0)
    return out
