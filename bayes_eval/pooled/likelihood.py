"""The log-likelihood of each observed cell, per posterior draw, for ArviZ's ``loo`` and
``compare``.

It is the likelihood the model conditions on. ``end_to_end_pooled``, ``hierarchical``
and ``ecr_pooled`` marginalise every cell's rate (``bayes_eval.pooled.models``), so a
cell's count is Beta-Binomial given the draw of its prior's mean and concentration: an
end-to-end count given its agent's ``mu`` and ``kappa``, a milestone or step count given
its task's ``mu_task`` and its agent's ``kappa``. A binomial given the cell's own rate
would condition on a parameter that only that cell informs, and PSIS-LOO fails on such
cells (their Pareto k above 0.7). The values are whole log probabilities, binomial
coefficients included, so that sums over cells are log predictive densities.

``joint`` couples a pair's end-to-end counts with its milestone counts (the end-to-end
runs pass the same milestones, and the bypass is per pair), so its unit is the pair:
``runs``, over a ``pair`` dimension, is the log probability of all of a pair's counts
given the draw of the hyperparameters, the sum of the terms the model conditions on:

- its milestone counts, Beta-Binomial given ``mu_task`` and ``kappa`` (as
  ``hierarchical``), where the model marginalises the rates;
- with up to ``MARGINAL_END_TO_END`` end-to-end trials, their count given the milestone
  counts, the rates and the bypass summed out (``survivor_chain``, ``path_likelihood``);
- with more, where the model samples the pair's milestone rates ``p_cell``: the
  milestone counts binomial given them, and the end-to-end count given their product
  with the bypass summed out (``bypass_terms``).

Where an audited grader scored a pair's runs (or a milestone or step cell's), its value
is the log probability of its graded count, its rate and true count summed out
(``bayes_eval.counts.grading``).

Where runs come in clusters, ``end_to_end_pooled`` and ``hierarchical`` marginalise the
cell's rate and its clusters' rates exactly: a cell's value is the log probability of its
clusters' counts given its prior's draw and ``kappa_cluster``
(``bayes_eval.counts.clusters.log_marginal_each``). The crossed models' is
``bayes_eval.crossed.likelihood``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy import special, stats

from bayes_eval.constants import END_TO_END, MILESTONE_METHOD, NEVER_SHARE
from bayes_eval.counts.clusters import log_marginal_each
from bayes_eval.counts.grading import GRADER_RATES, detection_log, graded_log_marginal
from bayes_eval.counts.layout import end_to_end_groups, sampled_cells
from bayes_eval.pooled.paths import (
    bypass_terms,
    bypass_true_counts_in_blocks,
    cells_of,
    path_likelihood,
    survivor_chain,
)
from bayes_eval.pooled.rates import cell_shapes, zero_inflated_log
from bayes_eval.registry import model_of
from bayes_eval.results.predictive import cell_coords, pair_coords

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["log_likelihood"]

# Most values of the end-to-end chain held at once (memory: 8 bytes each).
CHUNK = 4_000_000


def log_likelihood(post: xr.Dataset, layout, spec) -> xr.Dataset:
    """The ``log_likelihood`` group of a pooled fit (the module's forms), over the
    ``cell`` dimension of its predictive groups (``joint``: over its pairs).

    ``post`` holds the draws of the model's hyperparameters (``mu`` and ``kappa`` per
    agent, or ``mu_task`` per pair and ``kappa`` per agent; ``kappa_cluster`` per agent
    where runs come in clusters).
    """
    import xarray as xr

    entry = model_of(spec)
    if entry.paths:  # the joint model: its unit the pair
        return _joint(post, layout)
    if not entry.cell_method:
        tiny = np.finfo(float).tiny  # as ``cell_shapes``: a mean of 1 keeps a proper Beta
        mu = post["mu"].values[..., layout.pair_agent]
        kappa = post["kappa"].values[..., layout.pair_agent]
        a, b = np.maximum(mu * kappa, tiny), np.maximum((1 - mu) * kappa, tiny)
        k, n, rate_agent = layout.e2e_k, layout.e2e_n, layout.pair_agent
        keys = [(END_TO_END, agent, task, "") for agent, task in layout.pairs]
    else:
        a, b = cell_shapes(post, layout, counts=False)
        k, n, rate_agent = layout.k, layout.n, layout.pair_agent[layout.cell_pair]
        keys = [_cell_key(layout, spec, c) for c in range(k.size)]
    if layout.clusters is None:
        values = stats.betabinom.logpmf(k, n, a, b)
        if layout.grading is not None:  # the graded pairs' or cells' through the grader
            graded = layout.grading.pairs
            se, sp = (post[name].values for name in GRADER_RATES)
            values[..., graded] = graded_log_marginal(
                layout.grading, a[..., graded], b[..., graded], se, sp
            )
        if NEVER_SHARE in post:  # a share of the agent's tasks never solved (0 in the draws
            # where the agent has none, under all_solvable: given those, as mu and kappa)
            values = zero_inflated_log(k, values, post[NEVER_SHARE].values[..., rate_agent])
    else:  # the rate's clusters' counts, the rate and theirs integrated out
        log_phi = np.log(post["kappa_cluster"].values[..., rate_agent])
        values = log_marginal_each(np.log(a), np.log(b), log_phi, layout.clusters)
    return xr.Dataset(
        {"successes": (("chain", "draw", "cell"), values)},
        coords={"chain": post["chain"], "draw": post["draw"], **cell_coords(keys)},
    )


def _joint(post: xr.Dataset, layout) -> xr.Dataset:
    """``joint``'s log-likelihood of every pair's counts (the module's form)."""
    import xarray as xr

    pairs = len(layout.pairs)
    a, b = cell_shapes(post, layout, counts=False)
    sample = a.shape[:-1]
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])  # (draws, cells)
    k, n = layout.k, layout.n
    into_pairs = np.zeros((k.size, pairs))
    into_pairs[np.arange(k.size), layout.cell_pair] = 1.0
    sampled = sampled_cells(layout)
    kept = np.flatnonzero(~sampled)
    runs = stats.betabinom.logpmf(k[kept], n[kept], a[:, kept], b[:, kept]) @ into_pairs[kept]
    mean = post["mu_bypass"].values[..., layout.pair_agent].reshape(len(a), pairs)
    conc = post["kappa_bypass"].values[..., layout.pair_agent].reshape(len(a), pairs)
    bypass_a, bypass_b = mean * conc, (1 - mean) * conc
    few, many = end_to_end_groups(layout)
    grading = layout.grading
    if grading is not None:  # each graded pair's P(k | t) per draw
        rates = (post[name].values.reshape(len(a), -1) for name in GRADER_RATES)
        detected = detection_log(grading, *rates)  # (draws, graded pair, t)
        row = grading.rows(pairs)

    def count(values_of, pairs_at, draws=slice(None), true_of=None):
        """``log P(k)`` of ``pairs_at`` at ``draws``: ``values_of(k)`` at their counts, or
        where a grader scored them ``log sum_t P(t) P(k | t)`` over their true counts, ``log
        P(t)`` from ``values_of`` at each ``t`` or ``true_of()`` at once (``(draws, pair,
        t)``)."""
        if grading is None or not (row[pairs_at] >= 0).any():
            return values_of(layout.e2e_k[pairs_at])
        top = int(layout.e2e_n[pairs_at].max())
        if true_of is None:
            each = [values_of(np.full(pairs_at.size, t)) for t in range(top + 1)]
            true = np.stack(each, axis=-1)
        else:
            true = true_of()
        true = np.where(np.arange(top + 1) <= layout.e2e_n[pairs_at, None], true, -np.inf)
        out = values_of(layout.e2e_k[pairs_at])
        scored = row[pairs_at] >= 0
        terms = true[:, scored] + detected[draws][:, row[pairs_at[scored]], : top + 1]
        out[:, scored] = special.logsumexp(terms, axis=-1)
        return out

    if few.size:
        cells, counts = cells_of(layout, few)
        e2e_n = layout.e2e_n[few]
        rows = max(1, CHUNK // (few.size * int(e2e_n.max() + 1) ** 2))
        for start in range(0, len(a), rows):
            draws = slice(start, start + rows)

            def few_values(k_e, draws=draws):
                return _few(
                    a[draws][:, cells] + k[cells], b[draws][:, cells] + (n - k)[cells],
                    bypass_a[draws][:, few], bypass_b[draws][:, few],
                    counts, np.minimum(k_e, e2e_n), e2e_n,
                )  # fmt: skip

            runs[draws, few] += count(few_values, few, draws)
    if many.size:
        where = np.flatnonzero(sampled)
        p = post["p_cell"].values.reshape(len(a), where.size)
        log_p = np.log(p)
        runs += stats.binom.logpmf(k[where], n[where], p) @ into_pairs[where]
        log_q = (log_p @ into_pairs[where])[:, many]  # (draws, many)
        n_e = layout.e2e_n[many]

        def many_values(k_e):
            k_e = np.minimum(k_e, n_e)
            terms = bypass_terms(
                np,
                log_q.reshape(-1, 1),
                np.log(-np.expm1(log_q)).reshape(-1, 1),
                bypass_a[:, many].reshape(-1, 1),
                bypass_b[:, many].reshape(-1, 1),
                k=np.tile(k_e, len(a))[:, None],
                n=np.tile(n_e, len(a))[:, None],
                failures=np.tile(n_e - k_e, len(a))[:, None],
                j_max=int(n_e.max()),
                logsumexp=True,
            )
            return terms.reshape(len(a), many.size)

        def many_true():  # log P(t | Q, bypass) of every many pair at every draw
            rows = [x.reshape(-1) for x in (log_q, np.log(-np.expm1(log_q)))]
            rows += [x[:, many].reshape(-1) for x in (bypass_a, bypass_b)]
            true = bypass_true_counts_in_blocks(*rows, np.tile(n_e, len(a)))
            return true.reshape(len(a), many.size, -1)

        runs[:, many] += count(many_values, many, true_of=many_true)
    labels = pair_coords(layout.pairs)
    return xr.Dataset(
        {"runs": (("chain", "draw", "pair"), runs.reshape(sample + (pairs,)))},
        coords={"chain": post["chain"], "draw": post["draw"], **labels},
    )


def _few(a, b, bypass_a, bypass_b, counts, k, n) -> np.ndarray:
    """``log P(k | milestone counts, hyperparameters)`` of the pairs whose end-to-end
    trials the model sums the rates out of: ``a``, ``b`` ``(draws, pairs, milestones)``
    are each milestone's shapes given its counts, ``bypass_a``, ``bypass_b`` ``(draws,
    pairs)``. Rows are laid out pair by pair, most milestones first (``survivor_chain``)."""
    draws, pairs, width = a.shape
    rows = pairs * draws

    def by_pair(x):
        return np.swapaxes(x, 0, 1).reshape(rows, *x.shape[2:])

    n_rows = np.repeat(n, draws)
    chain = survivor_chain(
        np, by_pair(a), by_pair(b), n_rows, np.repeat(counts, draws), int(n.max())
    )
    k_rows = np.repeat(k, draws)
    log_lik = path_likelihood(
        np, chain[-1], by_pair(bypass_a), by_pair(bypass_b), k_rows, n_rows, n_rows - k_rows
    )
    return log_lik.reshape(pairs, draws).T


def _cell_key(layout, spec, c: int) -> tuple[str, str, str, str]:
    """``(method, agent, task, position)`` of milestone or step cell ``c``, as the
    predictive groups name it."""
    agent, task = layout.pairs[layout.cell_pair[c]]
    step = int(layout.cell_factor[c])
    method = model_of(spec).cell_method
    if method == MILESTONE_METHOD:
        return method, agent, task, f"milestone {step}"
    run = layout.runs[layout.cell_pair[c]][layout.cell_run[c]]
    return method, agent, task, f"run {run}, step {step}"
