"""The joint model's sums over paths: how many of a task's end-to-end trials pass each
milestone (``survivor_chain``), how many succeed by the bypass (``bypass_outcomes``,
``path_likelihood``), and the bypass summed out given the product of sampled rates
(``bypass_terms``). Each takes ``xp``, numpy or ``pytensor.tensor``, so that the model's
graph and the numpy forms that the log-likelihood group and the draw-back read are the
same sums."""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = [
    "IMPOSSIBLE",
    "bypass_outcomes",
    "bypass_terms",
    "bypass_true_counts",
    "bypass_true_counts_in_blocks",
    "cells_of",
    "log_rising",
    "path_likelihood",
    "survivor_chain",
    "transition",
    "true_count_terms",
]


def cells_of(layout, pairs):
    """The cells of each pair as a ``(pairs, most milestones)`` index array, padded with
    the pair's first cell, and the number of real ones per pair."""
    lists = [np.flatnonzero(layout.cell_pair == p) for p in pairs]
    width = max(len(c) for c in lists)
    cells = np.array([np.pad(c, (0, width - len(c)), mode="edge") for c in lists])
    return cells, np.array([len(c) for c in lists])


# Below this log probability a path is impossible (finite, unlike -inf, so that a sum of
# impossible terms has a gradient and no NaN).
IMPOSSIBLE = -1e10
# The most terms of ``bypass_true_counts`` held at once by ``bypass_true_counts_in_blocks``
# (memory: 8 bytes each).
TRUE_COUNT_TERMS = 4_000_000


def survivor_chain(xp, a, b, n, counts, n_max):
    """``log P(c_m = c)``, ``c = 0..n_max``, of the number ``c_m`` of a task's ``n``
    end-to-end trials that pass milestones ``1..m`` on the milestone path, ``m = 0..M``:
    one ``(n_max + 1, rows)`` array per ``m``.

    Every trial passes milestone ``m`` with the same rate ``p_m``, and the rates are
    independent ``Beta(a_m, b_m)`` given the hyperparameters, so with ``p_m`` summed out
    ``c_m | c_(m-1) ~ BetaBinomial(c_(m-1), a_m, b_m)`` and the chain is Markov, from
    ``c_0 = n``: ``(n_max + 1)^2`` positive terms per milestone and row, no cancellation
    (``transition``). ``a``, ``b`` are ``(rows, milestones)``; row ``r`` has ``counts[r]``
    real milestones, the rest padding, and rows come with the most milestones first, so
    that milestone ``m`` moves a leading block of rows only (the others keep their
    count). ``n`` is each row's number of trials. ``xp`` is numpy or
    ``pytensor.tensor``.
    """
    logsumexp = special.logsumexp if xp is np else xp.logsumexp
    counts = np.asarray(counts)
    if np.any(np.diff(counts) > 0):
        raise ValueError("survivor_chain: rows must come with the most milestones first")
    rising = [log_rising(xp, shape, n_max) for shape in (a, b, a + b)]
    start = np.where(np.arange(n_max + 1)[:, None] == np.asarray(n)[None, :], 0.0, IMPOSSIBLE)
    chain = [start if xp is np else xp.as_tensor(start)]
    for m in range(int(counts.max())):
        rows = int(np.sum(counts > m))
        moved = logsumexp(
            chain[-1][:, None, :rows] + transition(xp, n_max, *(r[:, m, :rows] for r in rising)),
            axis=0,
        )
        kept = chain[-1][:, rows:]
        chain.append(moved if rows == counts.size else xp.concatenate([moved, kept], axis=1))
    return chain


def log_rising(xp, shape, n_max):
    """``log (s)_r = sum_{t < r} log(s + t)``, ``r = 0..n_max``, of ``shape`` ``(rows,
    milestones)``: ``(n_max + 1, milestones, rows)``."""
    logs = xp.log(shape.T[None] + np.arange(n_max)[:, None, None])
    return xp.concatenate([xp.zeros_like(logs[:1]), xp.cumsum(logs, axis=0)], axis=0)


def transition(xp, n_max, rising_a, rising_b, rising_ab):
    """``log BetaBinomial(c' | c, a, b) = log C(c, c') + log (a)_c' + log (b)_(c - c') -
    log (a + b)_c`` as ``(c, c', rows)`` (``IMPOSSIBLE`` for ``c' > c``), from the log
    rising factorials ``(c, rows)`` of one milestone's shapes, ``c = 0..n_max``."""
    c = np.arange(n_max + 1)
    passed = c[None, :] <= c[:, None]
    failed = np.where(passed, c[:, None] - c[None, :], 0)
    log_choose = special.gammaln(c + 1)[:, None] - special.gammaln(c + 1)[None, :]
    log_choose = np.where(passed, log_choose - special.gammaln(failed + 1), 0.0)[..., None]
    terms = log_choose + rising_a[None] + rising_b[failed] - rising_ab[:, None]
    return xp.where(passed[..., None], terms, IMPOSSIBLE)


def bypass_outcomes(xp, gammaln, survivors, alpha, beta, *, k, n, failures):
    """``log P(c_M = c, k successes)``, ``c = 0..max(n)``: ``c`` trials through the milestones
    (``survivors``, the last array of ``survivor_chain``) and the other ``k - c``
    successes by the bypass, ``C(n - c, k - c) B(alpha + k - c, beta + n - k) / B(alpha,
    beta)`` (``lambda`` summed out); ``IMPOSSIBLE`` for ``c > k``. ``alpha``, ``beta``,
    ``k``, ``n`` and ``failures`` (``n - k``, ``count_data``) are per row."""
    n = np.asarray(n)[None, :]
    c = np.arange(n.max() + 1)[:, None]
    through = c <= k[None, :]
    by_bypass = xp.maximum(k[None, :] - c, 0)
    rest = np.maximum(n - c, 0)
    log_choose = gammaln(rest + 1) - gammaln(by_bypass + 1) - gammaln(rest - by_bypass + 1)
    bypass = _log_beta(gammaln, alpha[None, :] + by_bypass, beta[None, :] + failures[None, :])
    terms = survivors + log_choose + bypass - _log_beta(gammaln, alpha, beta)[None, :]
    return xp.where(through, terms, IMPOSSIBLE)


def _log_beta(gammaln, p, q):
    """``log B(p, q)`` from ``gammaln`` (scipy's or PyTensor's)."""
    return gammaln(p) + gammaln(q) - gammaln(p + q)


def path_likelihood(xp, survivors, alpha, beta, k, n, failures):
    """``log P(k | hyperparameters)`` of ``k`` end-to-end successes in ``n`` trials per row:
    the sum over ``c`` of ``bypass_outcomes``."""
    logsumexp = special.logsumexp if xp is np else xp.logsumexp
    gammaln = special.gammaln if xp is np else xp.gammaln
    terms = bypass_outcomes(xp, gammaln, survivors, alpha, beta, k=k, n=n, failures=failures)
    return logsumexp(terms, axis=0)


def bypass_terms(xp, log_q, log_1mq, a, b, *, k, n, failures, j_max, logsumexp):
    """``log`` of the terms j = 0..j_max of the marginal above (``-inf`` for j > k);
    ``log_1mq`` is ``log(1 - Q)`` and ``failures`` is ``n - k`` (``count_data``).

    ``xp`` is ``pytensor.tensor`` (in the model, where ``k`` is data that may change and
    ``j_max`` is the largest possible ``k``) or numpy (for the exact redraw); with
    ``logsumexp`` the terms are summed into ``log P(k | Q)`` per task.
    """
    from scipy import special

    gammaln = special.gammaln if xp is np else xp.gammaln
    j = np.arange(j_max + 1)[None, :]
    j_safe = xp.minimum(k, j)
    log_choose = gammaln(k + 1) - gammaln(j_safe + 1) - gammaln(k - j_safe + 1)
    # Q^(k - j) is 1 at j = k even when Q underflows to 0, and (1 - Q)^0 is 1 even when Q
    # rounds to 1 (0 * -inf would be NaN).
    q_power = xp.where(k - j_safe > 0, (k - j_safe) * log_q, 0.0)
    terms = log_choose + q_power + xp.where(j_safe > 0, j_safe * log_1mq, 0.0)
    terms = terms + _log_beta(gammaln, a + j_safe, b + failures) - _log_beta(gammaln, a, b)
    terms = xp.where(k >= j, terms, -np.inf)
    if not logsumexp:
        return terms
    top = xp.max(terms, axis=1, keepdims=True)
    total = top[:, 0] + xp.log(xp.sum(xp.exp(terms - top), axis=1))
    log_binom = gammaln(n + 1) - gammaln(k + 1) - gammaln(failures + 1)
    failed = xp.where(failures[:, 0] > 0, failures[:, 0] * log_1mq[:, 0], 0.0)
    return log_binom[:, 0] + failed + total


def true_count_terms(xp, n, log_p_of):
    """``log P(t)`` of ``t = 0..max(n)`` true successes in each row's ``n`` trials, ``(rows,
    max(n) + 1)`` (``IMPOSSIBLE`` past a row's ``n``), where a grader's verdicts stand
    between them and the counts (``bayes_eval.counts.grading.detection_graph``):
    ``log_p_of(row, t)`` is ``log P(t)`` of the rows ``row`` (each repeated once per
    ``t``) at the counts ``t``, as ``path_likelihood`` or ``bypass_terms`` gives it."""
    n = np.asarray(n)
    top = int(n.max())
    row = np.repeat(np.arange(n.size), top + 1)
    t = np.tile(np.arange(top + 1), n.size)
    values = log_p_of(row, np.minimum(t, n[row])).reshape((n.size, top + 1))
    return xp.where((t <= n[row]).reshape(n.size, top + 1), values, IMPOSSIBLE)


def bypass_true_counts(xp, log_q, log_1mq, a, b, n):
    """``log P(t | Q, a, b)``, ``t = 0..max(n)``, of ``t`` successes in each row's ``n``
    trials with the bypass summed out (``(rows, max(n) + 1)``, ``IMPOSSIBLE`` past a row's
    ``n``): ``bypass_terms``' sum at every ``t`` at once, its Beta functions ``B(a + j, b
    + n - t)`` from ``O(n)`` log-gamma values a row (``log Gamma(a + j)``, ``log Gamma(b +
    f)``, ``log Gamma(a + b + m)``) rather than three a term. ``log_q``, ``log_1mq``, ``a``,
    ``b`` are per row; ``xp`` is numpy or ``pytensor.tensor``."""
    gammaln = special.gammaln if xp is np else xp.gammaln
    logsumexp = special.logsumexp if xp is np else xp.logsumexp
    n = np.asarray(n)
    rows, top = n.size, int(n.max())
    t = np.arange(top + 1)[None, :, None]
    j = np.arange(top + 1)[None, None, :]
    whole = n[:, None, None]
    possible = (j <= t) & (t <= whole)
    failed = np.where(possible, whole - t, 0)
    through = np.where(possible, j, 0)
    row = np.arange(rows)[:, None, None]
    shape = (rows, top + 1, top + 1)

    def table(shapes, size, at):  # log Gamma(shape + i), i < size, read at ``at`` per row
        values = gammaln(shapes[:, None] + np.arange(size)[None, :])
        return values.reshape((-1,))[(row * size + at).ravel()].reshape(shape)

    beta = (
        table(a, top + 1, through)
        + table(b, top + 1, failed)
        - table(a + b, 2 * top + 1, through + failed)
        - (gammaln(a) + gammaln(b) - gammaln(a + b))[:, None, None]
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        choose = np.where(
            possible,
            special.gammaln(whole + 1)
            - special.gammaln(t - through + 1)
            - special.gammaln(through + 1)
            - special.gammaln(failed + 1),
            0.0,
        )
    up, down = np.where(possible, t - j, 0), np.where(possible, failed + j, 0)
    # Q^0 is 1 even where Q underflows, (1 - Q)^0 even where Q rounds to 1 (0 * -inf)
    q_power = xp.where(up > 0, up * log_q[:, None, None], 0.0)
    r_power = xp.where(down > 0, down * log_1mq[:, None, None], 0.0)
    terms = xp.where(possible, choose + q_power + r_power + beta, IMPOSSIBLE)
    return xp.where(t[..., 0] <= n[:, None], logsumexp(terms, axis=2), IMPOSSIBLE)


def bypass_true_counts_in_blocks(log_q, log_1mq, a, b, n) -> np.ndarray:
    """``bypass_true_counts`` (numpy) of many rows, a block of rows at a time so that no
    block holds more than ``TRUE_COUNT_TERMS`` terms (``(max(n) + 1)^2`` a row), as one
    ``(rows, max(n) + 1)`` array: a block's columns past its own largest ``n`` are
    ``IMPOSSIBLE``, as they are within a block."""
    n = np.asarray(n)
    width = int(n.max()) + 1
    rows = max(1, TRUE_COUNT_TERMS // width**2)
    out = np.full((n.size, width), IMPOSSIBLE)
    for start in range(0, n.size, rows):
        block = slice(start, start + rows)
        part = bypass_true_counts(np, log_q[block], log_1mq[block], a[block], b[block], n[block])
        out[block, : part.shape[1]] = part
    return out
