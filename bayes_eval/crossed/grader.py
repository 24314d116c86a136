"""The crossed models' counts through an audited grader that errs.

A run an audited grader scored is graded a success with ``q = se P + (1 - sp)(1 - P)``
(``P``: the pair's end-to-end rate, or a milestone cell's rate ``p``), each grader's
sensitivity ``se`` and specificity ``sp`` sampled with the spec's ``[grader]`` priors and
its audit as their binomial data (``bayes_eval.counts.grading``). A blocked pair of
milestone runs fails every run, so its graded successes are false alarms: each graded
cell's ``Binomial(k | n, 1 - sp)``. Here are the model's terms, and the draws of ``q``
(``p_graded``, ``p_graded_milestone``) that the predictive checks read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bayes_eval.counts.clusters import array_add_at
from bayes_eval.counts.grading import GRADER_RATES
from bayes_eval.exact.graded import graded_success

if TYPE_CHECKING:
    from bayes_eval.crossed.design import Design

__all__ = [
    "false_alarms",
    "graded_cells",
    "graded_counts",
    "graded_logs",
    "graded_pair_rates",
    "graded_pairs",
    "graded_rates",
    "through_grader",
]


def through_grader(pt, grading, se, sp, log_p, log_q):
    """``log q`` and ``log (1 - q)`` in place of ``log P`` and ``log (1 - P)`` at the rates
    (pairs, or milestone cells) an audited grader scored, in the model being built (``se``
    and ``sp``: each grader's sensitivity and specificity, ``grader_rates``). Returns the
    two, ``sp`` per graded rate, and per graded rate the log-likelihood of its runs the
    audit scored again (their true counts, binomial in ``P``; 0 where none)."""
    se, sp = se[grading.grader], sp[grading.grader]
    p, q = log_p[grading.pairs], log_q[grading.pairs]
    runs, true = grading.trusted[:, 0], grading.trusted[:, 1]
    graded, cleared = graded_logs(pt, se, sp, p, q)
    return (
        pt.set_subtensor(log_p[grading.pairs], graded),
        pt.set_subtensor(log_q[grading.pairs], cleared),
        sp,
        true * p + (runs - true) * q,
    )


def graded_logs(xp, se, sp, log_p, log_q) -> tuple:
    """``log q`` and ``log (1 - q)``, ``q = se P + (1 - sp)(1 - P)``, from ``log P`` and
    ``log (1 - P)`` (``xp``: numpy or PyTensor)."""
    return (
        xp.logaddexp(xp.log(se) + log_p, xp.log1p(-sp) + log_q),
        xp.logaddexp(xp.log1p(-se) + log_p, xp.log(sp) + log_q),
    )


def graded_pair_rates(post, layout, log_p, log_q) -> tuple:
    """``through_grader``'s numpy form for end-to-end pairs at the posterior draws ``post``
    (``log_p``, ``log_q``: ``(chain, draw, pair)``): the two at the graded pairs through
    their grader, and per pair the log-likelihood of its runs the audit scored again."""
    grading = layout.grading
    p, q = log_p[..., grading.pairs], log_q[..., grading.pairs]
    runs, true = grading.trusted[:, 0], grading.trusted[:, 1]
    own = np.zeros(log_p.shape)
    own[..., grading.pairs] = true * p + (runs - true) * q
    log_p, log_q, _ = _through_grader_at(post, grading, log_p, log_q)
    return log_p, log_q, own


def graded_rates(post, layout, log_p, log_q) -> tuple:
    """``through_grader``'s numpy form at the posterior draws ``post`` (``log_p``,
    ``log_q``: ``(chain, draw, cell)``), for milestone cells, with ``false_alarms`` per
    pair: returns the three."""
    k, f = layout.k, layout.n - layout.k
    log_p, log_q, sp = _through_grader_at(post, layout.grading, log_p, log_q)
    return log_p, log_q, false_alarms(array_add_at, k, f, np.log1p(-sp), np.log(sp), layout)


def _through_grader_at(post, grading, log_p, log_q) -> tuple:
    """Copies of ``log_p`` and ``log_q`` with the graded rates' seen through their grader
    at the posterior draws ``post``, and ``sp`` per graded rate."""
    se, sp = (post[name].values[..., grading.grader] for name in GRADER_RATES)
    p, q = log_p[..., grading.pairs], log_q[..., grading.pairs]
    log_p, log_q = log_p.copy(), log_q.copy()
    log_p[..., grading.pairs], log_q[..., grading.pairs] = graded_logs(np, se, sp, p, q)
    return log_p, log_q, sp


def graded_counts(layout) -> tuple:
    """The end-to-end counts the model reads through the grader or as they are: of a
    graded pair, its runs the audit did not score again (``Grading.runs``, ``graded``)."""
    k, n = layout.e2e_k.copy(), layout.e2e_n.copy()
    if layout.grading is not None:
        k[layout.grading.pairs], n[layout.grading.pairs] = (
            layout.grading.graded,
            layout.grading.runs,
        )
    return k, n


def false_alarms(add_at, k, f, log_alarm, log_sp, layout):
    """Per pair run on milestones: the log-likelihood of its graded milestone counts were
    it blocked (every run a true failure, each graded count ``k`` of ``k + f`` runs then
    false alarms, ``log_alarm`` = ``log(1 - sp)`` per graded cell), without binomial
    coefficients; 0 for a pair no audited grader scored. ``add_at`` sums by index
    (PyTensor's or numpy's)."""
    at = layout.grading.pairs
    terms = k[at] * log_alarm + f[at] * log_sp
    return add_at(terms, layout.cell_pair[at], len(layout.pairs))


def graded_pairs(post, design: Design, p) -> np.ndarray:
    """``(chain, draw, agent, task)``: the chance that a run is graded a success, ``se P +
    (1 - sp)(1 - P)`` (``p``: the draws of ``P``), at the pairs an audited grader scored
    (NaN elsewhere)."""
    grading = design.layout.grading
    at = design.layout.pair_agent[grading.pairs], design.pair_task[grading.pairs]
    se, sp = (post[name].values[..., grading.grader] for name in GRADER_RATES)
    scored = p[..., at[0], at[1]]
    graded = np.full(p.shape, np.nan)
    graded[..., at[0], at[1]] = graded_success(scored, se, sp)
    return graded


def graded_cells(post, design: Design, log_p, blocked) -> np.ndarray:
    """``(chain, draw, agent, task, milestone)``: the chance that a run of a milestone cell
    an audited grader scored is graded a success, ``se p + (1 - sp)(1 - p)`` (``log_p``:
    the draws of ``log p`` on that rectangle), or ``1 - sp`` in a draw where its pair is
    ``blocked`` (every run fails); NaN at every other cell."""
    layout, grading = design.layout, design.layout.grading
    pair = layout.cell_pair[grading.pairs]
    at = layout.pair_agent[pair], design.pair_task[pair], layout.cell_factor[grading.pairs] - 1
    se, sp = (post[name].values[..., grading.grader] for name in GRADER_RATES)
    p = np.exp(log_p[(..., *at)])
    graded = np.full(log_p.shape, np.nan)
    graded[(..., *at)] = np.where(blocked[..., pair], 1.0 - sp, graded_success(p, se, sp))
    return graded
