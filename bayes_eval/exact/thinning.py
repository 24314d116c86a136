"""Binomial counts under a product of Beta rates, exactly, by thinning one factor at a time.

When ``P = prod_m p_m`` with independent ``p_m ~ Beta(a_m, b_m)``, the count
``Y ~ Binomial(n, P)`` is the end of a chain: ``Y_0 = n`` and ``Y_m ~ Binomial(Y_(m-1),
p_m)`` (a trial passes the product when it passes every factor). Each ``p_m`` is independent
of the counts before it, so integrating it out makes each link a beta-binomial:
``Y_m | Y_(m-1) = j ~ BetaBinomial(j, a_m, b_m)``. The law of ``Y`` is therefore a vector of
``n + 1`` probabilities pushed through one transition matrix per factor: exact, with no
draws and no grid, in ``O(M n^2)`` per cell. ``Y`` never rises along the chain, so for
``P(Y >= k)`` only the states ``k..n`` are kept.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["THINNING_MAX_STATES", "product_binomial_sf"]

# Most states (n - k + 1) one cell's chain may keep: its transition matrices hold this many
# squared (32 MB at 2,000). A cell beyond it gets NaN; the caller says how it was answered.
THINNING_MAX_STATES = 2000


def product_binomial_sf(successes, trials, alpha, beta) -> np.ndarray:
    """``P(Y >= successes)`` for ``Y ~ Binomial(trials, prod_m p_m)``, ``p_m ~ Beta(a, b)``.

    Parameters
    ----------
    successes, trials : array of int, shape (cells,)
    alpha, beta : array, shape (cells, factors)
        Each cell's factors, NaN-padded. ``b = 0`` is a point mass at 1 (the factor passes
        every trial).

    Returns
    -------
    array, shape (cells,)
        1 where ``successes <= 0``; NaN where a present factor is not a proper Beta
        (``a <= 0``: an improper posterior) or the chain would keep more than
        ``THINNING_MAX_STATES`` states.
    """
    k = np.asarray(successes, dtype=np.int64)
    n = np.asarray(trials, dtype=np.int64)
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    present = ~np.isnan(alpha)
    proper = ~present | ((alpha > 0) & (beta >= 0) & np.isfinite(alpha) & np.isfinite(beta))
    out = np.full(k.shape, np.nan)
    out[k <= 0] = 1.0
    out[(k > n) & (k > 0)] = 0.0
    todo = (k > 0) & (k <= n) & proper.all(axis=1) & (n - k + 1 <= THINNING_MAX_STATES)
    for value in np.unique(np.stack([k[todo], n[todo]], axis=1), axis=0):
        cells = np.flatnonzero(todo & (k == value[0]) & (n == value[1]))
        out[cells] = _chain_sf(int(value[0]), int(value[1]), alpha[cells], beta[cells])
    return out


def _chain_sf(k, n, alpha, beta):
    """The chain for cells of the same ``k`` and ``n``: the mass left at ``k..n``."""
    states = np.arange(k, n + 1, dtype=float)
    mass = np.zeros((alpha.shape[0], states.size))
    mass[:, -1] = 1.0  # Y_0 = n
    for m in range(alpha.shape[1]):
        a, b = alpha[:, m], beta[:, m]
        moves = ~np.isnan(a) & (b > 0)  # absent factors and point masses at 1 keep Y
        if moves.any():
            step = _transitions(states, a[moves], b[moves])
            mass[moves] = np.einsum("cj,cji->ci", mass[moves], step)
    return mass.sum(axis=1)


def _transitions(states, a, b):
    """``T[c, j, i] = P(Y_m = states[i] | Y_(m-1) = states[j])`` under ``BetaBinomial(
    states[j], a_c, b_c)``, zero above the diagonal (a count cannot rise)."""
    j, i = states[:, None], states[None, :]
    a, b = a[:, None, None], b[:, None, None]
    falls = j >= i
    drop = np.where(falls, j - i, 0.0)
    log_pmf = (
        special.gammaln(j + 1)
        - special.gammaln(i + 1)
        - special.gammaln(drop + 1)
        + special.betaln(i + a, drop + b)
        - special.betaln(a, b)
    )
    return np.where(falls, np.exp(log_pmf), 0.0)
