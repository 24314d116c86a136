"""Risk over k attempts: pass@k, the chance of at least one success in k independent
attempts, ``1 - (1 - P)^k``, and pass^k, the chance that all k succeed, ``P^k``.

Both are monotone in ``P``, so their quantiles are ``P``'s mapped through
(``at_least_one``, ``all_of``). Their posterior means under ``P ~ Beta(a, b)`` are ratios
of Beta functions, ``E[(1 - P)^k] = B(a, b + k) / B(a, b)`` and ``E[P^k] = B(a + k, b) /
B(a, b)``; ``log_beta_ratio`` computes their logarithm to about 1e-9 relative where it is
small, which ``betaln(a, b + k) - betaln(a, b)`` cannot (it cancels to 1% at ``a = 20``,
``b = 1e7``, ``k = 1``). Everything is in log space, for ``k`` up to 1e9 and beyond.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "LogBetaRatio",
    "all_of",
    "at_least_one",
    "log_beta_ratio",
    "mean_all_of",
    "mean_at_least_one",
    "never_solved",
]

# Factors of the ratio's product summed one by one before its Stirling tail: beyond them
# every Gamma argument is at least DIRECT, where three terms of Stirling's series are
# exact to double precision.
DIRECT = 1000
# Cells whose first DIRECT factors are summed at once (memory: CHUNK x DIRECT floats).
CHUNK = 256


def at_least_one(p, k):
    """pass@k, ``1 - (1 - p)^k``, of rates ``p`` (array) over ``k`` attempts."""
    p, k = np.asarray(p, dtype=float), np.asarray(k, dtype=float)
    with np.errstate(divide="ignore"):  # p = 1: log 0 = -inf, pass@k = 1
        return -np.expm1(k * np.log1p(-p))


def all_of(p, k):
    """pass^k, ``p^k``, of rates ``p`` (array) over ``k`` attempts."""
    p, k = np.asarray(p, dtype=float), np.asarray(k, dtype=float)
    with np.errstate(divide="ignore"):  # p = 0: log 0 = -inf, p^k = 0
        return np.exp(k * np.log(p))


def mean_at_least_one(a, b, k):
    """``E[1 - (1 - P)^k]`` for ``P ~ Beta(a, b)``, to about 1e-9 relative."""
    return -np.expm1(log_beta_ratio(a, b, k))


def mean_all_of(a, b, k):
    """``E[P^k]`` for ``P ~ Beta(a, b)``, to about 1e-9 relative."""
    return np.exp(log_beta_ratio(b, a, k))


def never_solved(share, a, b, n):
    """``P(P = 0 | no success in n runs)`` where a ``share`` of tasks is never solved and
    the rest have ``P ~ Beta(a, b)``: ``pi / (pi + (1 - pi) B(a, b + n) / B(a, b))``
    (arrays, broadcast; 0 where ``share`` is 0)."""
    share = np.asarray(share, dtype=float)
    solvable = (1.0 - share) * np.exp(log_beta_ratio(a, b, n))
    total = share + solvable
    return np.divide(share, total, where=share > 0, out=np.zeros(np.shape(total)))


def log_beta_ratio(a, b, k):
    """``log B(a, b + k) / B(a, b) = sum_{j < k} log((b + j) / (a + b + j))``.

    Parameters
    ----------
    a, b : array_like
        Positive Beta shapes.
    k : array_like
        Whole numbers of attempts, 0 or more (broadcast with ``a`` and ``b``).

    Returns
    -------
    ndarray
        The logarithm, accurate in relative terms where it is small: the first
        ``DIRECT`` factors are summed one by one (``log1p(-a / (a + b + j))`` where that
        share is below one half, the quotient itself elsewhere), and the rest by
        Stirling's series, with the terms that cancel taken together.
    """
    a, b, k = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a, b, k)))
    head = np.minimum(k, DIRECT).ravel()
    shares, tops = a.ravel(), b.ravel()
    j = np.arange(DIRECT, dtype=float)
    out = np.zeros(head.shape)
    for start in range(0, out.size, CHUNK):
        cells = slice(start, start + CHUNK)
        width = j[: int(head[cells].max(initial=0))]  # the chunk's factors, no more
        top = tops[cells, None] + width
        bottom = top + shares[cells, None]
        share = shares[cells, None] / bottom
        terms = np.where(share < 0.5, np.log1p(-np.minimum(share, 0.5)), np.log(top / bottom))
        out[cells] = np.where(width < head[cells, None], terms, 0.0).sum(axis=1)
    out = out.reshape(a.shape)
    rest = k - DIRECT
    tail = rest > 0
    if tail.any():
        out[tail] += _stirling_tail(a[tail], b[tail] + DIRECT, rest[tail])
    return out


class LogBetaRatio:
    """``log_beta_ratio(a, b, k)`` of fixed shapes for many ``k`` (a curve, a search for
    the ``k`` that reaches a risk): the first ``DIRECT`` factors, which every ``k`` past
    them shares, summed once, so that each call costs the Stirling tail alone. The same
    numbers as ``log_beta_ratio`` for every ``k`` past ``DIRECT``, and for a ``k`` that is
    one number."""

    def __init__(self, a, b):
        self.a, self.b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
        self._head = None

    def __call__(self, k):
        """The logarithm at ``k`` (broadcast with the shapes)."""
        k = np.broadcast_to(np.asarray(k, dtype=float), self.a.shape)
        far = k > DIRECT
        if not far.any():
            return log_beta_ratio(self.a, self.b, k)
        if self._head is None:
            self._head = log_beta_ratio(self.a, self.b, DIRECT)
        out = np.empty(self.a.shape)
        near = ~far
        if near.any():
            out[near] = log_beta_ratio(self.a[near], self.b[near], k[near])
        a, b = self.a[far], self.b[far]
        out[far] = self._head[far] + _stirling_tail(a, b + DIRECT, k[far] - DIRECT)
        return out


def _stirling_tail(a, top, n):
    """``log Gamma(top + n) / Gamma(top) - log Gamma(top + a + n) / Gamma(top + a)``,
    ``top >= DIRECT``: Stirling's ``(x - 1/2) log x - x`` for each Gamma, its terms paired
    so that the two near ``a`` cancel exactly (``_pair``), plus the series' remainders."""
    bottom = top + a
    paired = _pair(a, top) - _pair(a, top + n) - a * np.log1p(n / bottom)
    remainder = _series(top + n) - _series(top) - _series(bottom + n) + _series(bottom)
    return paired + remainder


def _pair(a, x):
    """``(x - 1/2) log(1 + a / x)``."""
    return (x - 0.5) * np.log1p(a / x)


def _series(x):
    """Stirling's remainder ``log Gamma(x) - (x - 1/2) log x + x - log(2 pi) / 2``."""
    x2 = x * x
    return (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / (1260.0 * x2)) / x2) / x
