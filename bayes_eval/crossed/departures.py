"""A crossed fit's pair departures per posterior draw, as its rates are drawn back: a pair
run departs by its sampled departure, at the wider scale where it is drawn surprising (with
its posterior probability given the draw), a pair never run by a fresh one; every pair's
rate a block of draws at a time."""

from __future__ import annotations

import numpy as np
from scipy import special

from bayes_eval.constants import SURPRISE_SHARE, SURPRISE_WIDTH, TASK
from bayes_eval.counts.clusters import array_add_at, log_given_each_rate
from bayes_eval.counts.layout import Layout
from bayes_eval.crossed import redraw
from bayes_eval.crossed.design import Design
from bayes_eval.crossed.grader import graded_counts, graded_pair_rates
from bayes_eval.crossed.likelihood import surprising_scale

__all__ = [
    "RATE_VALUES",
    "additive",
    "clustered",
    "drawn_again",
    "pair_rates",
    "redrawn",
    "surprise_scales",
]

# The most values (chains x draws x agents x tasks, 8 bytes each) of the pairs' rates drawn
# at once: memory, not the numbers.
RATE_VALUES = 2_000_000


def additive(post, ability) -> np.ndarray:
    """``(chain, draw, agent, task)``: every pair's additive logit per draw of ``post``,
    ``a_t (theta_a - b_t)``."""
    eta = ability[..., :, None] - post["difficulty"].values[..., None, :]
    if "discrimination" in post:
        eta = post["discrimination"].values[..., None, :] * eta
    return eta


def redrawn(design: Design) -> bool:
    """Whether a fit of ``design`` keeps no departure, every reader drawing them again
    from their conditional (``redraw``): end-to-end runs read as they are (no grader, no
    clusters), where a C compiler is found."""
    layout = design.layout
    return layout.clusters is None and layout.grading is None and redraw.available()


def pair_rates(post, ability, design: Design, rng) -> np.ndarray:
    """``(chain, draw, agent, task)``: every pair's rate per draw, a pair run from its
    sampled departure (or, where the fit keeps none, one drawn from its conditional given
    the draw: ``redraw``), one never run from a fresh one (the wider for a surprising
    pair, ``surprise_scales``). Drawn a block of draws at a time, at most ``RATE_VALUES``
    values, each block from its own generator spawned from ``rng``: the same numbers
    every time, and the memory of a block, not of the fit."""
    chains, draws, agents = ability.shape
    size = max(1, RATE_VALUES // (chains * agents * post.sizes[TASK]))
    starts = range(0, draws, size)
    seed = None if "cell_z" in post else int(rng.integers(2**63))
    out = np.empty((chains, draws, agents, post.sizes[TASK]))
    for start, block_rng in zip(starts, rng.spawn(len(starts)), strict=True):
        at = slice(start, start + size)
        part = post.isel(draw=at)
        eta = additive(part, ability[:, at])
        z = block_rng.standard_normal(eta.shape)
        if seed is not None:
            place = np.arange(draws)[at] + draws * np.arange(chains)[:, None]
            scale = drawn_again(part, eta, z, design, block_rng, (seed, place))
        else:
            z[..., design.layout.pair_agent, design.pair_task] = part["cell_z"].values
            scale = part["cell_scale"].values[..., None, None]
            if SURPRISE_SHARE in part:  # a surprising pair's departure is the wider one
                scale = surprise_scales(part, eta, z, design, block_rng)
        out[:, at] = special.expit(eta + scale * z)
    return out


def drawn_again(post, eta, z, design: Design, rng, key) -> np.ndarray:
    """The scale of each pair's departure per draw (``surprise_scales``), with each run
    pair's departure and whether it surprises drawn from their conditional given the
    draw into ``z`` (``redraw.redraw``; ``key``: the seed and each row's place among the
    fit's chains x draws), a pair never run surprising with ``surprise_share``."""
    layout = design.layout
    narrow = post["cell_scale"].values
    wide, share = narrow, np.zeros_like(narrow)
    if SURPRISE_SHARE in post:
        wide = surprising_scale(narrow, post[SURPRISE_WIDTH].values)
        share = post[SURPRISE_SHARE].values
    with np.errstate(divide="ignore"):
        log_share, log_usual = np.log(share).ravel(), np.log1p(-share).ravel()
    at = (..., layout.pair_agent, design.pair_task)
    run_eta = eta[at]
    pairs = run_eta.shape[-1]
    seed, place = key
    run_z, run_surprising = redraw.redraw(
        run_eta.reshape(-1, pairs),
        (narrow.ravel(), wide.ravel()),
        (log_usual, log_share),
        graded_counts(layout),
        place.ravel() * pairs,
        seed,
    )
    surprising = rng.random(eta.shape) < share[..., None, None]
    z[at], surprising[at] = run_z.reshape(run_eta.shape), run_surprising.reshape(run_eta.shape)
    return np.where(surprising, wide[..., None, None], narrow[..., None, None])


def surprise_scales(post, eta, z, design: Design, rng) -> np.ndarray:
    """``(chain, draw, agent, task)``: the scale of each pair's departure per draw,
    ``cell_scale``, or ``cell_scale (1 + surprise_width)`` where the pair is drawn
    surprising: a pair run with its posterior probability given the draw, ``share L_w /
    (share L_w + (1 - share) L)`` (``L``, ``L_w``: its runs' likelihood at the two
    departures of its sampled ``z``), a pair never run with ``surprise_share``."""
    layout = design.layout
    narrow = post["cell_scale"].values[..., None, None]
    wide = surprising_scale(narrow, post[SURPRISE_WIDTH].values[..., None, None])
    share = post[SURPRISE_SHARE].values[..., None, None]
    surprising = rng.random(eta.shape) < share
    at = (..., layout.pair_agent, design.pair_task)
    run_eta, run_z = eta[at], z[at]
    usual = _pair_log_likelihood(post, run_eta + narrow[..., 0] * run_z, layout)
    departed = _pair_log_likelihood(post, run_eta + wide[..., 0] * run_z, layout)
    odds = np.log(share[..., 0]) + departed - np.log1p(-share[..., 0]) - usual
    surprising[at] = rng.random(odds.shape) < special.expit(odds)
    return np.where(surprising, wide, narrow)


def _pair_log_likelihood(post, logit, layout: Layout) -> np.ndarray:
    """``(chain, draw, pair)``: the log-likelihood of each pair's end-to-end runs given its
    logit rate per draw (binomial coefficients dropped), as the model reads them: through
    an audited grader (its runs audited again binomial in the rate), or in clusters."""
    log_p, log_q = -np.logaddexp(0.0, -logit), -np.logaddexp(0.0, logit)
    if layout.clusters is not None:
        return clustered(post, log_p, log_q, layout.clusters)
    k, n = graded_counts(layout)
    own = 0.0
    if layout.grading is not None:
        log_p, log_q, own = graded_pair_rates(post, layout, log_p, log_q)
    return k * log_p + (n - k) * log_q + own


def clustered(post, log_p, log_q, clusters) -> np.ndarray:
    """``(chain, draw, rate)``: the log-likelihood of each rate's clustered runs given its
    ``log p`` and ``log (1 - p)`` per draw (``log_given_each_rate``), a chain at a time."""
    log_phi = np.log(post["kappa_cluster"].values)
    return np.stack(
        [
            log_given_each_rate(np, special.logsumexp, p, q, phi, clusters, array_add_at)
            for p, q, phi in zip(log_p, log_q, log_phi, strict=True)
        ]
    )
