"""The log-likelihood of each observed count of a crossed fit, per posterior draw, for
ArviZ's ``loo`` and ``compare``.

A pair's departure ``e_at`` is informed by that pair's counts alone, so a binomial given
the sampled rate would make PSIS fail on most pairs. The likelihood is instead the one
that integrates the departure out, given the draw of the pair's additive logit
``eta = a_t (theta_a - b_t)`` (``a_t`` 1 but in 2PL) and of ``cell_scale`` ``s``::

    L(k | eta, s) = integral of Binomial(k | n, expit(eta + s e)) phi(e) de

The integrand is log-concave with second log-derivative at most -1, so it lies below a
unit-variance Gaussian around its mode ``e*`` (found by safeguarded Newton steps within
``[s (k - n), s k]``) and ``e* +- 9`` holds all of it but ``exp(-40)``. On that window
the trapezoid rule converges geometrically for so smooth an integrand (its nearest
complex poles are ``pi / s`` away); its spacing is ``SPACING`` times the narrower of
``1 / s`` and the integrand's width at the mode, ``(1 + s^2 n p (1 - p))^(-1/2)``. The
relative error is below 1e-12 against scipy's adaptive quadrature from ``s`` = 0.05 to 10,
``eta`` from -15 to 15 and up to 200 trials (``tests/test_log_likelihood.py`` checks fitted
draws). The values are whole log probabilities, binomial coefficients included.

Where a share of the pairs surprise (``surprise_share``: their departure has the wider
scale ``cell_scale (1 + surprise_width)``), a pair's value is ``log((1 - share) L(k | eta,
s) + share L(k | eta, s_wide))``, each integral by the rule above.

Where an audited grader scored a pair's runs, its graded count ``k`` is seen through the
grader's sensitivity and specificity, ``q = se P + (1 - sp)(1 - P)``, and ``log(c + d
expit(x))`` is not concave in ``x``: the integrand may have two modes, and no one mode
locates it. But it is the sum over the true count ``t`` of ``P(k | t, se, sp)`` times
``Binomial(t | n, expit(eta + s e)) phi(e)``, each term log-concave with its mode between
those of ``t = 0`` and ``t = n``; one grid from 9 below the first to 9 above the last, its
spacing ``SPACING`` times the narrowest any term can be (``(1 + s^2 n / 4)^(-1/2)``),
holds every term as the rule above holds one, and summed at once the terms are
``Binomial(k | n, q) phi(e)`` (``log_marginal_graded``).

``crossed_milestones`` conditions on a mixture over whole pairs: a pair whose every
milestone run failed may be blocked (probability ``blocked_share``: every run fails
whatever the rates), so its cells are not independent given the parameters. Its unit is
the pair: ``runs``, over a ``pair`` dimension, is the log probability of all of a pair's
milestone counts, ``log((1 - share) prod_m L_m + share [every run failed])``, each
``L_m`` the integral above over that cell's own departure. A cell an audited grader
scored has its graded ``L_m`` (above), and were the pair blocked its graded successes
are false alarms: the bracket becomes ``prod Binomial(k_m | n_m, 1 - sp)`` over the
graded cells, and ``[every run failed]`` asks it of the other cells alone. (Its
predictive groups stay per cell; ``loo_pit`` needs a per-cell likelihood and has none to
read here.)

Clustered runs (``bayes_eval.counts.clusters``): a rate's clusters each have their own
rate around it, and their counts' likelihood given the rate is a sum of positive terms
``w_(R, S) phi^(R + S - N) p^R (1 - p)^S`` over a normaliser in ``phi``. The departure
enters through ``p`` alone, so it is integrated out term by term, each ``p^R (1 - p)^S``
by the rule above (``k = R``, ``n = R + S``, without its binomial coefficient), and the
terms summed in log space: the same rule, no new quadrature. The values carry the
clusters' binomial coefficients, as ``log_marginal_each`` does for the pooled models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from bayes_eval.constants import END_TO_END, SURPRISE_SHARE, SURPRISE_WIDTH
from bayes_eval.counts.clusters import (
    ABSENT,
    ClusterTerms,
    array_add_at,
    log_coefficients,
    log_normaliser,
)
from bayes_eval.counts.grading import GRADER_RATES
from bayes_eval.crossed.grader import graded_logs
from bayes_eval.registry import model_of
from bayes_eval.results.predictive import cell_coords, pair_coords

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "departure_mode",
    "log_likelihood",
    "log_marginal",
    "log_marginal_clusters",
    "log_marginal_graded",
    "surprising_scale",
]

# The trapezoid rule's spacing, as a share of the integrand's narrowest feature, and the
# half-width of its window around the mode (the module's docstring).
SPACING, HALF_WIDTH = 0.35, 9.0
# Most values of the integrand held at once (memory: 8 bytes each).
CHUNK = 4_000_000


def log_likelihood(post: xr.Dataset, design, spec) -> xr.Dataset:
    """The ``log_likelihood`` group of a crossed fit (the module's form), over the
    ``cell`` dimension of its predictive groups.

    ``post`` holds the draws of ``ability`` (the fitted agents first), ``difficulty``
    and ``cell_scale`` (and ``kappa_cluster`` for clustered runs).
    """
    import xarray as xr

    layout, clusters = design.layout, design.layout.clusters
    ability = post["ability"].values[..., layout.pair_agent]
    eta = ability - post["difficulty"].values[..., design.pair_task]  # (chain, draw, pair)
    if "discrimination" in post:  # 2PL: each task's slope in ability
        eta = post["discrimination"].values[..., design.pair_task] * eta
    scale = post["cell_scale"].values[..., None]
    sample = {"chain": post["chain"], "draw": post["draw"]}
    if not model_of(spec).cell_method:
        values = _pair_marginal(post, eta, scale, layout)
        if SURPRISE_SHARE in post:  # a share of the pairs depart with a wider scale
            wide = surprising_scale(scale, post[SURPRISE_WIDTH].values[..., None])
            share = post[SURPRISE_SHARE].values[..., None]
            values = np.logaddexp(
                np.log1p(-share) + values,
                np.log(share) + _pair_marginal(post, eta, wide, layout),
            )
        keys = [(END_TO_END, agent, task, "") for agent, task in layout.pairs]
        return xr.Dataset(
            {"successes": (("chain", "draw", "cell"), values)},
            coords={**sample, **cell_coords(keys)},
        )
    eta = eta[..., layout.cell_pair]
    if clusters is None:
        each, k, cell = log_marginal(eta, scale, layout.k, layout.n), layout.k, layout.cell_pair
    else:
        log_phi = np.log(post["kappa_cluster"].values)[..., None]
        each = log_marginal_clusters(eta, scale, log_phi, clusters)
        k, cell = clusters.cluster_successes, layout.cell_pair[clusters.cluster_rate]
    blocked = 0.0  # the log-likelihood of a blocked pair's counts: every run failed
    if layout.grading is not None:  # graded cells through their grader; blocked: false alarms
        each, blocked = _graded_cells(post, eta, scale, each, layout)
        k = np.where(np.isin(np.arange(k.size), layout.grading.pairs), 0, k)
    described = array_add_at(each, layout.cell_pair, len(layout.pairs))
    share = post["blocked_share"].values[..., None]
    failed = np.bincount(cell, k, len(layout.pairs)) == 0  # every run of the pair failed
    runs = np.log1p(-share) + described
    runs = np.where(failed, np.logaddexp(np.log(share) + blocked, runs), runs)
    pairs = pair_coords(layout.pairs)
    return xr.Dataset({"runs": (("chain", "draw", "pair"), runs)}, coords={**sample, **pairs})


def surprising_scale(cell_scale, width):
    """The scale of a surprising pair's departure: ``cell_scale (1 + width)``, wider than
    any other pair's whatever the two (numpy or PyTensor)."""
    return cell_scale * (1.0 + width)


def _pair_marginal(post, eta, scale, layout) -> np.ndarray:
    """``(chain, draw, pair)``: each pair's end-to-end counts' likelihood with its departure
    of ``scale`` integrated out, as the model reads them (through an audited grader, or in
    clusters)."""
    if layout.clusters is not None:
        log_phi = np.log(post["kappa_cluster"].values)[..., None]
        return log_marginal_clusters(eta, scale, log_phi, layout.clusters)
    values = log_marginal(eta, scale, layout.e2e_k, layout.e2e_n)
    if layout.grading is not None:
        rates = [post[name].values for name in GRADER_RATES]
        graded = layout.grading.pairs
        values[..., graded] = log_marginal_graded(eta[..., graded], scale, layout.grading, *rates)
    return values


def _graded_cells(post, eta, scale, each, layout) -> tuple:
    """``each`` with the milestone cells an audited grader scored through their grader
    (``log_marginal_graded``), and per pair the log probability of its graded counts were
    it blocked, every graded success a false alarm (``Binomial(k | n, 1 - sp)`` per cell)."""
    from dataclasses import replace

    grading, at = layout.grading, layout.grading.pairs
    k, n = layout.k[at], layout.n[at]
    se, sp = (post[name].values for name in GRADER_RATES)
    each = each.copy()
    counted = replace(grading, graded=k, runs=n)  # the counts fitted (simulated ones in SBC)
    each[..., at] = log_marginal_graded(eta[..., at], scale, counted, se, sp)
    sp = sp[..., grading.grader]
    alarms = special.xlog1py(k, -sp) + special.xlogy(n - k, sp)
    alarms += special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    return each, array_add_at(alarms, layout.cell_pair[at], len(layout.pairs))


def log_marginal(eta, scale, k, n, slope: bool = False):
    """``log integral Binomial(k | n, expit(eta + s e)) phi(e) de`` (the module's rule).

    ``eta`` is ``(..., pairs)``, ``scale`` broadcasts against it, ``k`` and ``n`` are
    ``(pairs,)``. With ``slope``, also its derivative in ``eta``, the mean of
    ``k - n expit(eta + s e)`` under the normalised integrand.

    Each value (a draw's pair) has its own spacing, ``SPACING`` times its own integrand's
    narrowest feature, and its own window around its mode (``_by_nodes`` groups the
    values of about as many nodes): a draw of a wide scale costs no other draw its nodes.
    """
    eta, scale = np.broadcast_arrays(np.asarray(eta, float), np.asarray(scale, float))
    k, n = np.asarray(k, float), np.asarray(n, float)
    mode = departure_mode(eta, scale, k, n)
    p = special.expit(eta + scale * mode)
    width = 1.0 / np.sqrt(1.0 + scale**2 * n * p * (1.0 - p))
    spacing = SPACING * np.minimum(1.0 / np.maximum(scale, 1.0), width)
    pair = np.broadcast_to(np.arange(eta.shape[-1]), eta.shape).reshape(-1)
    e_flat, s_flat, m_flat, h_flat = (x.reshape(-1) for x in (eta, scale, mode, spacing))
    out, rise = np.empty(e_flat.size), np.empty(e_flat.size)
    half = np.ceil(HALF_WIDTH / h_flat)
    for size, members in _by_nodes(half):
        steps = np.arange(-size, size + 1)
        for at in np.array_split(members, max(1, members.size * steps.size // CHUNK)):
            e = m_flat[at, None] + steps * h_flat[at, None]  # (values, nodes)
            x = e_flat[at, None] + s_flat[at, None] * e
            kk, nn = k[pair[at], None], n[pair[at], None]
            log_f = kk * -np.logaddexp(0.0, -x) + (nn - kk) * -np.logaddexp(0.0, x) - 0.5 * e**2
            top = log_f.max(axis=-1, keepdims=True)  # scipy's logsumexp, without its dispatch
            weight = np.exp(log_f - top)
            total = weight.sum(axis=-1)
            out[at] = top[:, 0] + np.log(total)
            if slope:
                rise[at] = (weight * (kk - nn * special.expit(x))).sum(axis=-1) / total
    log_choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    out += np.log(h_flat) - 0.5 * np.log(2 * np.pi) + log_choose[pair]
    out, rise = out.reshape(eta.shape), rise.reshape(eta.shape)
    return (out, rise) if slope else out


def _by_nodes(half: np.ndarray):
    """The values grouped by their nodes' count, each half-count ``half`` rounded up to a
    power of two (16 at least): ``(half-count, the values' flat indices)`` per group."""
    size = 2.0 ** np.ceil(np.log2(np.maximum(half, 16.0)))
    for value in np.unique(size):
        yield int(value), np.flatnonzero(size == value)


def log_marginal_graded(eta, scale, grading, sensitivity, specificity) -> np.ndarray:
    """``log integral Binomial(k | n, q(expit(eta + s e))) phi(e) de`` per graded pair,
    ``k`` its graded count and ``q(P) = se P + (1 - sp)(1 - P)`` (the module's rule on a
    grid that holds every true count's integrand), times ``Binomial(t | m, P)`` of its
    ``m`` runs the audit scored again with ``t`` true successes (``grading.trusted``).
    ``eta`` is ``(..., graded pairs)``, ``scale`` broadcasts against it, the rates are
    ``(..., graders)``. Each value has its own grid (``log_marginal``)."""
    eta, scale = np.broadcast_arrays(np.asarray(eta, float), np.asarray(scale, float))
    k, n = grading.graded.astype(float), grading.runs.astype(float)
    m, t = grading.trusted[:, :2].T.astype(float)
    whole = n + m  # every run of the pair, graded or audited
    se = np.asarray(sensitivity, float)[..., grading.grader]
    sp = np.asarray(specificity, float)[..., grading.grader]
    low = departure_mode(eta, scale, np.zeros_like(whole), whole) - HALF_WIDTH
    high = departure_mode(eta, scale, whole, whole) + HALF_WIDTH
    # the narrowest any true count's integrand can be: its log's curvature is at most
    # 1 + s^2 n / 4
    narrowest = np.minimum(1.0 / np.maximum(scale, 1.0), 1.0 / np.sqrt(1.0 + scale**2 * whole / 4))
    spacing = SPACING * narrowest
    shape = eta.shape
    pair = np.broadcast_to(np.arange(shape[-1]), shape).reshape(-1)
    e_flat, s_flat, se, sp, l_flat, h_flat = (
        np.broadcast_to(x, shape).reshape(-1) for x in (eta, scale, se, sp, low, spacing)
    )
    out = np.empty(e_flat.size)
    span = (high - low).reshape(-1)
    for size, members in _by_nodes(np.ceil(span / h_flat) / 2):
        steps = np.arange(2 * size + 1)
        for at in np.array_split(members, max(1, members.size * steps.size // CHUNK)):
            e = l_flat[at, None] + steps * h_flat[at, None]  # (values, nodes)
            x = e_flat[at, None] + s_flat[at, None] * e
            log_p, log_1mp = -np.logaddexp(0.0, -x), -np.logaddexp(0.0, x)
            log_q, log_1mq = graded_logs(np, se[at, None], sp[at, None], log_p, log_1mp)
            g = pair[at, None]
            log_f = k[g] * log_q + (n[g] - k[g]) * log_1mq - 0.5 * e**2
            log_f += t[g] * log_p + (m[g] - t[g]) * log_1mp  # the audited runs' truth
            top = log_f.max(axis=-1, keepdims=True)
            out[at] = top[:, 0] + np.log(np.exp(log_f - top).sum(axis=-1))
    log_choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    log_choose += special.gammaln(m + 1) - special.gammaln(t + 1) - special.gammaln(m - t + 1)
    out += np.log(h_flat) - 0.5 * np.log(2 * np.pi) + log_choose[pair]
    return out.reshape(shape)


def log_marginal_clusters(
    eta: np.ndarray, scale: np.ndarray, log_phi: np.ndarray, terms: ClusterTerms
) -> np.ndarray:
    """``log integral L(expit(eta + s e)) phi(e) de`` per rate, ``L`` the likelihood of
    the rate's clusters' counts (the module's rule), their binomial coefficients included.

    ``eta`` is ``(..., rates)``; ``scale`` and ``log_phi`` (log ``kappa_cluster``)
    broadcast against it. The rates are taken in groups of about ``CHUNK`` term values
    over the draws; a rate's terms are summed in log space.
    """
    eta = np.asarray(eta, float)
    scale, log_phi = (np.broadcast_to(x, eta.shape) for x in (scale, log_phi))
    rates = terms.log_weight.shape[0]
    term_rate, term = np.nonzero(terms.log_weight > ABSENT)  # by rate, every rate has one
    k, f = terms.successes[term_rate, term], terms.failures[term_rate, term]
    offset = terms.log_weight[term_rate, term] - special.gammaln(k + f + 1)
    offset += special.gammaln(k + 1) + special.gammaln(f + 1)  # less log C(k + f, k)
    flat = [x.reshape(-1, rates) for x in (eta, scale, log_phi)]
    out = np.empty(flat[0].shape)
    group = np.cumsum(np.bincount(term_rate, minlength=rates)) // max(1, CHUNK // len(out))
    for rates_in in (np.flatnonzero(group == g) for g in np.unique(group)):
        mine = np.flatnonzero(np.isin(term_rate, rates_in))
        rate = term_rate[mine]
        logs = log_marginal(flat[0][:, rate], flat[1][:, rate], k[mine], k[mine] + f[mine])
        logs += offset[mine] - terms.deficit[rate, term[mine]] * flat[2][:, rate]
        starts = np.flatnonzero(np.r_[True, rate[1:] != rate[:-1]])  # each rate's first
        top = np.maximum.reduceat(logs, starts, axis=-1)
        summed = np.add.reduceat(
            np.exp(logs - np.repeat(top, np.diff(np.r_[starts, rate.size]), axis=-1)),
            starts,
            axis=-1,
        )
        out[:, rates_in] = top + np.log(summed)
    out -= log_normaliser(flat[2], terms)
    return out.reshape(eta.shape) + log_coefficients(terms)


def departure_mode(eta, scale, k, n, steps: int = 60) -> np.ndarray:
    """The mode of ``log phi(e) + k log p + (n - k) log (1 - p)``, ``p = expit(eta + s e)``:
    Newton's steps, bisection where a step would leave the bracket ``[s (k - n), s k]``
    (where the derivative changes sign)."""
    low, high = scale * (k - n), scale * k
    e = 0.5 * (low + high)
    for _ in range(steps):
        p = special.expit(eta + scale * e)
        slope = -e + scale * (k - n * p)
        curve = -1.0 - scale**2 * n * p * (1.0 - p)
        low, high = np.where(slope > 0, e, low), np.where(slope > 0, high, e)
        step = e - slope / curve
        e = np.where((step > low) & (step < high), step, 0.5 * (low + high))
    return e
