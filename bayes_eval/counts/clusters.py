"""Runs in clusters: the exact marginal likelihood of a rate whose runs share a seed, a
sample or a day, and exact draws of the rate.

A rate ``p ~ Beta(a, b)``; each of its clusters ``c`` has its own rate ``q_c ~ Beta(p phi,
(1 - p) phi)`` and ``k_c`` successes of ``n_c`` runs, so ``k_c ~ BetaBinomial(n_c, p phi,
(1 - p) phi)``. That is a polynomial in ``p``::

    BetaBinomial(k | n, p phi, (1 - p) phi) = C(n, k) (p phi)^(k) ((1 - p) phi)^(n - k) / phi^(n)

with ``x^(m)`` the rising factorial, ``x^(m) = sum_r c(m, r) x^r`` (``c``: the unsigned
Stirling numbers of the first kind). The product over a rate's clusters is then
``sum_(R, S) A_R B_S phi^(R + S) p^R (1 - p)^S / prod_c phi^(n_c)`` (``A``, ``B``: the
convolutions over clusters of ``c(k_c, .)`` and ``c(n_c - k_c, .)``, all positive), and
integrating ``p`` against its Beta prior is a finite sum of Beta functions::

    L = sum_(R, S) A_R B_S phi^(R + S) B(a + R, b + S) / B(a, b) / prod_c phi^(n_c)

(binomial coefficients dropped). It is computed as ``phi^(R + S - N)`` over ``prod_c prod_(i
< n_c) (1 + i / phi)`` (``N = sum_c n_c``), never as ``phi^(R + S)`` over ``phi^(n_c)``: at
``phi`` near 1e20 the difference of their logs (each near 1e22) would be rounding alone, and
NUTS would find a spurious mode there. Given ``a``, ``b`` and ``phi``, ``p`` is the mixture of
``Beta(a + R, b + S)`` with those terms as weights: drawn exactly. With one run per
cluster ``L`` is the Beta-Binomial of the totals, whatever ``phi``.

A rate with ``K`` successes and ``F`` failures has ``(K + 1) (F + 1)`` terms;
``CLUSTER_TERMS_MAX`` bounds them in all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from bayes_eval.errors import InputError

__all__ = [
    "ClusterTerms",
    "array_add_at",
    "cluster_terms",
    "draw_log_rates",
    "log_coefficients",
    "log_given_each_rate",
    "log_marginal",
    "log_marginal_each",
    "log_normaliser",
]

# Terms of the exact marginal over clusters of runs, in all (padded):
# a rate with K successes and F failures has (K + 1)(F + 1); 2 million hold 16 MB a array.
CLUSTER_TERMS_MAX = 2_000_000
# Most term values held at once by ``log_marginal_each`` (memory: 8 bytes each).
CHUNK = 4_000_000

ABSENT = -1e300  # the log weight of a padding term: exp() is 0, and no inf meets a 0


@dataclass(frozen=True)
class ClusterTerms:
    """The terms of every rate's marginal likelihood, padded to one length.

    ``successes`` (R) and ``failures`` (S), ``(rates, terms)``; ``log_weight``, ``log A_R
    + log B_S`` (``ABSENT`` in the padding); ``deficit``, ``N - R - S``. The normaliser
    ``prod_c prod_(i < n_c) (1 + i / phi)`` as ``(rate, i, how many clusters)`` triples,
    ``rising_rate``, ``rising_step``, ``rising_count`` (``i >= 1``). Each cluster's rate,
    runs and successes, ``cluster_rate``, ``cluster_trials`` and ``cluster_successes``.
    """

    successes: np.ndarray
    failures: np.ndarray
    log_weight: np.ndarray
    deficit: np.ndarray
    rising_rate: np.ndarray
    rising_step: np.ndarray
    rising_count: np.ndarray
    cluster_rate: np.ndarray
    cluster_trials: np.ndarray
    cluster_successes: np.ndarray


def cluster_terms(rate: np.ndarray, k: np.ndarray, n: np.ndarray, rates: int) -> ClusterTerms:
    """The terms of ``rates`` rates from their clusters' counts (cluster ``c`` belongs to
    rate ``rate[c]``, ``k[c]`` successes of ``n[c]``).

    Raises
    ------
    InputError
        More than ``CLUSTER_TERMS_MAX`` terms.
    """
    k, n, rate = (np.asarray(x, dtype=np.int64) for x in (k, n, rate))
    totals_k = np.bincount(rate, k, minlength=rates).astype(np.int64)
    totals_f = np.bincount(rate, n - k, minlength=rates).astype(np.int64)
    width = int(((totals_k + 1) * (totals_f + 1)).max())
    if rates * width > CLUSTER_TERMS_MAX:
        worst = int(np.argmax((totals_k + 1) * (totals_f + 1)))
        raise InputError(
            f"clustered runs: the exact marginal over clusters needs (successes + 1) x "
            f"(failures + 1) terms per rate, {rates * width:,} in all for {rates} rates (the "
            f"largest has {totals_k[worst]} successes and {totals_f[worst]} failures), above "
            f"the {CLUSTER_TERMS_MAX:,} it allows; split the table, or give fewer runs per cell"
        )
    stirling = _log_stirling(int(n.max()))
    successes = np.zeros((rates, width), dtype=np.int64)
    failures = np.zeros((rates, width), dtype=np.int64)
    log_weight = np.full((rates, width), ABSENT)
    for r in range(rates):
        mine = rate == r
        log_a, log_b = np.zeros(1), np.zeros(1)
        for kc, fc in zip(k[mine], n[mine] - k[mine], strict=True):
            log_a = _log_convolve(log_a, stirling[kc])
            log_b = _log_convolve(log_b, stirling[fc])
        grid_r, grid_s = np.meshgrid(np.arange(log_a.size), np.arange(log_b.size), indexing="ij")
        size = grid_r.size
        successes[r, :size], failures[r, :size] = grid_r.ravel(), grid_s.ravel()
        log_weight[r, :size] = np.maximum((log_a[:, None] + log_b[None, :]).ravel(), ABSENT)
    trials = totals_k + totals_f
    deficit = np.maximum(trials[:, None] - successes - failures, 0)
    # how many clusters of each rate have more than i runs, for i = 1 .. their largest
    largest = int(n.max())
    more = np.zeros((rates, largest + 1), dtype=np.int64)
    np.add.at(more, (rate, n), 1)
    more = more[:, ::-1].cumsum(axis=1)[:, ::-1]  # clusters with at least j runs
    rising_rate, rising_step = np.nonzero(more[:, 2:])
    rising_step = rising_step + 1  # i >= 1: the clusters with at least i + 1 runs
    rising_count = more[rising_rate, rising_step + 1]
    return ClusterTerms(
        successes, failures, log_weight, deficit, rising_rate, rising_step, rising_count, rate, n, k
    )


def log_marginal(xp, gammaln, logsumexp, log_a, log_b, log_phi, terms: ClusterTerms):
    """``sum log L`` over the rates (the module's formula), from each rate's prior log
    shapes and log ``phi``, each ``(rates,)``; ``xp``, ``gammaln`` and ``logsumexp`` are
    PyTensor's (in a model) or numpy's and scipy's."""
    inverse = xp.exp(-log_phi)[terms.rising_rate]
    rising = terms.rising_count * xp.log1p(terms.rising_step * inverse)
    return xp.sum(_log_terms(xp, gammaln, logsumexp, log_a, log_b, log_phi, terms)) - xp.sum(rising)


def log_marginal_each(log_a, log_b, log_phi, terms: ClusterTerms) -> np.ndarray:
    """``log L`` of each rate, its binomial coefficients included: the log probability of
    its clusters' counts, the rate and the clusters' rates integrated out. ``log_a``,
    ``log_b`` and ``log_phi`` are ``(..., rates)``; the draws are taken in chunks."""
    log_a, log_b, log_phi = np.broadcast_arrays(log_a, log_b, log_phi)
    rates, width = terms.log_weight.shape
    flat = [x.reshape(-1, rates) for x in (log_a, log_b, log_phi)]
    out = np.empty(flat[0].shape)
    rows = max(1, CHUNK // (rates * width))
    for start in range(0, out.shape[0], rows):
        chunk_a, chunk_b, chunk_phi = (x[start : start + rows] for x in flat)
        out[start : start + rows] = _log_terms(
            np, special.gammaln, special.logsumexp, chunk_a, chunk_b, chunk_phi, terms
        ) - log_normaliser(chunk_phi, terms)
    return out.reshape(log_a.shape) + log_coefficients(terms)


def log_coefficients(terms: ClusterTerms) -> np.ndarray:
    """Each rate's ``sum_c log C(n_c, k_c)``: the binomial coefficients of its clusters."""
    k, n = terms.cluster_successes, terms.cluster_trials
    log_choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    return np.bincount(terms.cluster_rate, log_choose, terms.log_weight.shape[0])


def log_normaliser(log_phi: np.ndarray, terms: ClusterTerms) -> np.ndarray:
    """Each rate's ``log prod_c prod_(i < n_c) (1 + i / phi)``, ``log_phi`` ``(..., rates)``."""
    inverse = np.exp(-np.asarray(log_phi, float))[..., terms.rising_rate]
    rising = terms.rising_count * np.log1p(terms.rising_step * inverse)
    return array_add_at(rising, terms.rising_rate, terms.log_weight.shape[0])


def _log_terms(xp, gammaln, logsumexp, log_a, log_b, log_phi, terms: ClusterTerms):
    """Each rate's ``log sum_(R, S) A_R B_S phi^(R + S - N) B(a + R, b + S) / B(a, b)``,
    ``(..., rates)``: ``log L`` but for the normaliser (the module's formula)."""
    a, b = xp.exp(log_a), xp.exp(log_b)
    logs = _term_logs(
        xp, gammaln, a[..., None], b[..., None], log_phi[..., None],
        successes=terms.successes, failures=terms.failures, log_weight=terms.log_weight,
        deficit=terms.deficit,
    )  # fmt: skip
    log_beta = gammaln(a) + gammaln(b) - gammaln(a + b)
    return logsumexp(logs, axis=-1) - log_beta


def array_add_at(values, index, size) -> np.ndarray:
    """``values`` summed along their last axis into ``size`` slots by ``index``."""
    values = np.asarray(values, dtype=float)
    out = np.zeros(values.shape[:-1] + (size,))
    np.add.at(np.moveaxis(out, -1, 0), index, np.moveaxis(values, -1, 0))  # views of out
    return out


def log_given_each_rate(xp, logsumexp, log_p, log_q, log_phi, terms: ClusterTerms, add_at):
    """``log L`` of each rate given its ``p`` (not integrated against a Beta): ``log p``
    and ``log (1 - p)``, each ``(..., rates)``, and ``log phi``, ``(...)``. ``L = sum_(R, S)
    A_R B_S phi^(R + S - N) p^R (1 - p)^S`` over ``prod_c prod_(i < n_c) (1 + i / phi)``:
    the product of the rate's clusters' Beta-Binomials (binomial coefficients dropped),
    every term positive. ``add_at(values, index, size)`` sums ``values`` along their last
    axis into ``size`` slots by ``index`` (the normaliser's terms into their rates)."""
    log_phi = log_phi[..., None]
    logs = (
        terms.log_weight
        - terms.deficit * log_phi[..., None]
        + terms.successes * log_p[..., None]
        + terms.failures * log_q[..., None]
    )
    rising = terms.rising_count * xp.log1p(terms.rising_step * xp.exp(-log_phi))
    return logsumexp(logs, axis=-1) - add_at(rising, terms.rising_rate, terms.log_weight.shape[0])


def draw_log_rates(a, b, phi, terms: ClusterTerms, rng) -> np.ndarray:
    """``log p`` of every rate, one per draw: ``a``, ``b`` and ``phi`` are ``(draws,
    rates)``; the term ``(R, S)`` is drawn by its weight, then ``p ~ Beta(a + R, b + S)``."""
    from bayes_eval.exact.products import log_beta_draws

    out = np.empty(a.shape)
    for r in range(a.shape[-1]):
        shift_a, shift_b = terms.successes[r][None, :], terms.failures[r][None, :]
        ar, br = a[:, r : r + 1], b[:, r : r + 1]
        logs = _term_logs(
            np, special.gammaln, ar, br, np.log(phi[:, r : r + 1]),
            successes=shift_a, failures=shift_b, log_weight=terms.log_weight[r][None, :],
            deficit=terms.deficit[r][None, :],
        )  # fmt: skip
        weights = np.exp(logs - logs.max(axis=-1, keepdims=True))
        cumulative = np.cumsum(weights, axis=-1)
        u = rng.random((a.shape[0], 1)) * cumulative[:, -1:]
        chosen = np.minimum((u > cumulative).sum(axis=-1), weights.shape[-1] - 1)
        out[:, r] = log_beta_draws(
            a[:, r] + shift_a[0, chosen], b[:, r] + shift_b[0, chosen], (), rng
        )
    return out


def _term_logs(xp, gammaln, a, b, log_phi, *, successes, failures, log_weight, deficit):
    """``log (A_R B_S phi^(R + S - N) B(a + R, b + S))`` per term, ``a``, ``b`` and
    ``log_phi`` broadcast against the terms (``B(a, b)`` left to the caller)."""
    total = successes + failures
    return (
        log_weight
        - deficit * log_phi
        + gammaln(a + successes)
        + gammaln(b + failures)
        - gammaln(a + b + total)
    )


def _log_stirling(largest: int) -> list[np.ndarray]:
    """``log c(m, r)``, ``r = 0..m``, for ``m = 0..largest`` (``log 0 = -inf``):
    ``c(m + 1, r) = m c(m, r) + c(m, r - 1)``."""
    rows = [np.zeros(1)]
    for m in range(largest):
        previous = rows[-1]
        row = np.full(m + 2, -np.inf)
        with np.errstate(divide="ignore"):
            row[: m + 1] = previous + np.log(m)
        row[1:] = np.logaddexp(row[1:], previous)
        rows.append(row)
    return rows


def _log_convolve(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``log (exp(u) * exp(v))``, the convolution taken in log space (no term underflows,
    however far apart their sizes)."""
    out = np.full(u.size + v.size - 1, -np.inf)
    for i, value in enumerate(u):
        if np.isfinite(value):
            out[i : i + v.size] = np.logaddexp(out[i : i + v.size], value + v)
    return out
