"""Exact draws of the pooled models' rates given each posterior draw of their
hyperparameters.

The rates a model marginalises (each task's, milestone's or step's, each bypass, each
cluster's) are drawn back from their exact conditional posterior, so the summary and the
predictive checks read them like any sampled variable.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from bayes_eval.constants import (
    AGENT,
    ALL_SOLVABLE,
    ANY_NEVER_SOLVED,
    EXPERT_COMPLETION,
    MILESTONE,
    NEVER_SHARE,
    NEVER_SHARE_IF_ANY,
    RUN,
    STEP,
    TASK,
)
from bayes_eval.counts.clusters import draw_log_rates
from bayes_eval.counts.grading import GRADER_RATES, detection_log, draw_graded, graded_chance
from bayes_eval.counts.layout import end_to_end_groups, sampled_cells
from bayes_eval.exact.attempts import never_solved
from bayes_eval.exact.graded import graded_success
from bayes_eval.exact.products import log_beta_draws
from bayes_eval.pooled.paths import (
    bypass_outcomes,
    bypass_terms,
    bypass_true_counts_in_blocks,
    log_rising,
    survivor_chain,
    transition,
)
from bayes_eval.registry import UNRUN_PAIRS, model_of

__all__ = [
    "any_never_solved",
    "by_agent_and_task",
    "cell_shapes",
    "mixture_log_product",
    "pooled_rates",
    "task_means",
    "with_unrun",
    "zero_inflated_log",
]

ALL_DIMS = ("chain", "draw", AGENT, TASK)


def pooled_rates(post, layout, spec, rng) -> dict:
    """``p_task`` and the per-milestone or per-step rates, per posterior draw."""
    chains, draws = post.sizes["chain"], post.sizes["draw"]
    shape = (chains, draws)
    agents, tasks = layout.agents, layout.tasks
    grid = np.full(shape + (len(agents), len(tasks)), np.nan)
    where = [(agents.index(a), tasks.index(t)) for a, t in layout.pairs]
    # failures are counted before they are added: (tiny + n) - k rounds to 0 when k = n
    entry = model_of(spec)
    if not entry.cell_method and layout.clusters is not None:
        mu, kappa, phi = (
            post[name].values[..., layout.pair_agent] for name in ("mu", "kappa", "kappa_cluster")
        )
        p = np.exp(_clustered_draws(mu * kappa, (1 - mu) * kappa, phi, layout, rng))
        return with_unrun({"p_task": (ALL_DIMS, _gridded(grid, where, p))}, post, layout, rng)
    if not entry.cell_method:
        spike = {}
        if NEVER_SHARE_IF_ANY in post:  # whether each agent has tasks it never solves
            spike = any_never_solved(post, layout, rng)
            post = post.assign(spike)
        k, n, agent = layout.e2e_k, layout.e2e_n, layout.pair_agent
        none = k == 0  # a pair without a success may be one never solved
        p, never = np.empty(shape + k.shape), np.zeros(shape + k.shape)
        # a chain at a time (pairs x draws, 50 MB an array); the generator deals the
        # chains' draws in the order one call over all of them would
        for chain in range(chains):
            mu, kappa = (
                post["mu"].values[chain][..., agent],
                post["kappa"].values[chain][..., agent],
            )
            p[chain] = rng.beta(mu * kappa + k, (1 - mu) * kappa + (n - k))
            if NEVER_SHARE in post:  # computed for those pairs alone: the rest keep their draw
                share = post[NEVER_SHARE].values[chain][..., agent[none]]
                a, b = mu[..., none] * kappa[..., none], (1 - mu[..., none]) * kappa[..., none]
                never[chain][..., none] = never_solved(share, a, b, n[none])
        if NEVER_SHARE in post:
            p[none & (rng.uniform(size=p.shape) < never)] = 0.0
        out = {"p_task": (ALL_DIMS, _gridded(grid, where, p)), **spike}
        if layout.grading is not None:  # the graded pairs' p given their graded counts
            out.update(_graded_rates(post, layout, rng, p, grid, where))
        return with_unrun(out, post, layout, rng)
    graded_q = None  # the graded cells' chance of a graded success, where a grader errs
    if entry.paths:  # a grader's only of its end-to-end runs (``check_graded``)
        detected = _detected_by_pair(post, layout)
        log_p, bypass_few = _marginal_draws(post, layout, rng, shape, detected)
        cell_p = np.exp(log_p)
    elif layout.clusters is not None:
        a, b = cell_shapes(post, layout, counts=False)
        phi = post["kappa_cluster"].values[..., layout.pair_agent[layout.cell_pair]]
        log_p = _clustered_draws(a, b, phi, layout, rng)
        cell_p = np.exp(log_p)
    else:
        # drawn in log space: rates far below 1e-300 must not underflow to log 0
        log_p = log_beta_draws(*cell_shapes(post, layout), (), rng)
        if layout.grading is not None:  # the graded cells' rates given their graded counts
            graded_q = _graded_cells(post, layout, rng, log_p)
        cell_p = np.exp(log_p)
    n_runs = max(len(r) for r in layout.runs)
    n_factors = int(layout.cell_factor.max())
    factor = np.full(shape + (len(agents), len(tasks), n_runs, n_factors), np.nan)
    pair_i = np.array([w[0] for w in where])[layout.cell_pair]
    pair_j = np.array([w[1] for w in where])[layout.cell_pair]
    at = (slice(None), slice(None), pair_i, pair_j, layout.cell_run, layout.cell_factor - 1)
    factor[at] = cell_p
    log_q = mixture_log_product(log_p, layout, rng)
    p_task = np.exp(log_q)
    out = {}
    if graded_q is not None:
        chance = np.full_like(factor, np.nan)
        chance[at] = graded_q
        name, dims, values = graded_chance(entry.cell_method, chance)
        out[name] = (ALL_DIMS + dims, values)
    if entry.paths:
        bypass = _bypass(post, layout, rng, shape, log_q, detected)
        for p, drawn in bypass_few.items():
            bypass[..., p] = drawn
        out["bypass_task"] = (ALL_DIMS, _gridded(np.full_like(grid, np.nan), where, bypass))
        p_task = p_task + (1 - p_task) * bypass
        if layout.grading is not None:  # the chance a graded pair's run is graded a success
            graded = layout.grading
            se, sp = (post[name].values[..., graded.grader] for name in GRADER_RATES)
            chance = np.full(p_task.shape, np.nan)
            true = p_task[..., graded.pairs]
            chance[..., graded.pairs] = graded_success(true, se, sp)
            out["p_graded"] = (ALL_DIMS, _gridded(np.full_like(grid, np.nan), where, chance))
    out["p_task"] = (ALL_DIMS, _gridded(grid, where, p_task))
    if entry.cell_method == EXPERT_COMPLETION:
        out["p_step"] = (ALL_DIMS + (RUN, STEP), factor)
    else:
        out["p_milestone"] = (ALL_DIMS + (MILESTONE,), factor[..., 0, :])
    # a new pair's runs and steps are unknown to the expert-step model
    return with_unrun(out, post, layout, rng) if UNRUN_PAIRS in entry.predicts else out


def _graded_rates(post, layout, rng, p, grid, where) -> dict:
    """``p_task`` with the graded pairs' rates drawn back through their grader
    (``bayes_eval.counts.grading.draw_graded``), and ``p_graded``, the chance that one of
    their runs is graded a success (NaN for the others)."""
    grading = layout.grading
    agent = layout.pair_agent[grading.pairs]
    mu, kappa = (post[name].values[..., agent] for name in ("mu", "kappa"))
    shape = mu.shape[:2]
    flat = [x.reshape(-1, x.shape[-1]) for x in (mu, kappa)]
    se, sp = (post[name].values.reshape(-1, post[name].shape[-1]) for name in GRADER_RATES)
    tiny = np.finfo(float).tiny  # as ``cell_shapes``: a mean of 1 keeps a proper Beta
    a, b = np.maximum(flat[0] * flat[1], tiny), np.maximum((1 - flat[0]) * flat[1], tiny)
    drawn, q = draw_graded(grading, a, b, se, sp, rng)
    p[..., grading.pairs] = drawn.reshape(shape + (-1,))
    graded = np.full(p.shape, np.nan)
    graded[..., grading.pairs] = q.reshape(shape + (-1,))
    return {
        "p_task": (ALL_DIMS, _gridded(grid.copy(), where, p)),
        "p_graded": (ALL_DIMS, _gridded(np.full_like(grid, np.nan), where, graded)),
    }


def _graded_cells(post, layout, rng, log_p) -> np.ndarray:
    """``log_p`` (``(chain, draw, cell)``) with the graded cells' rates drawn back through
    their grader (``bayes_eval.counts.grading.draw_graded``, in place); returns ``q``, the
    chance that one of a cell's runs is graded a success, NaN for the cells no grader that
    errs scored."""
    grading = layout.grading
    a, b = (x[..., grading.pairs] for x in cell_shapes(post, layout, counts=False))
    shape = a.shape[:2]
    flat = [x.reshape(-1, x.shape[-1]) for x in (a, b)]
    se, sp = (post[name].values.reshape(-1, post[name].shape[-1]) for name in GRADER_RATES)
    drawn, q = draw_graded(grading, *flat, se, sp, rng)
    with np.errstate(divide="ignore"):  # a draw of 0 under a shape near 0
        log_p[..., grading.pairs] = np.log(drawn).reshape(shape + (-1,))
    chance = np.full(log_p.shape, np.nan)
    chance[..., grading.pairs] = q.reshape(shape + (-1,))
    return chance


def any_never_solved(post, layout, rng) -> dict:
    """Per draw and agent, whether the agent has tasks it never solves (``any_never_solved``,
    1 or 0), drawn from its exact conditional given the draw's ``mu``, ``kappa``,
    ``never_share_if_any`` and ``all_solvable`` (``c``): 1 with probability ``(1 - c)
    L_share / (c L_beta + (1 - c) L_share)``, the likelihoods of the agent's counts with
    and without the share (``bayes_eval.pooled.models``); and ``never_share``, the share
    drawn times that."""
    agent, k, n = layout.pair_agent, layout.e2e_k, layout.e2e_n
    share = post[NEVER_SHARE_IF_ANY].values
    agents = range(share.shape[-1])
    sums = np.empty((2, *share.shape))  # per chain, draw and agent: with and without
    for chain in range(share.shape[0]):  # a chain at a time: pairs x draws, 50 MB each
        mu, kappa = post["mu"].values[chain][..., agent], post["kappa"].values[chain][..., agent]
        tiny = np.finfo(float).tiny  # as ``cell_shapes``: a mean of 1 keeps a proper Beta
        a, b = np.maximum(mu * kappa, tiny), np.maximum((1 - mu) * kappa, tiny)
        # as the model writes it: scipy's betaln loses shapes near 1e-70 (a chain astray)
        beta = (
            special.gammaln(k + a)
            + special.gammaln(n - k + b)
            + special.gammaln(a + b)
            - special.gammaln(a)
            - special.gammaln(b)
            - special.gammaln(n + a + b)
        )
        each = zero_inflated_log(k, beta, share[chain][..., agent])
        sums[0, chain] = np.stack([each[..., agent == i].sum(-1) for i in agents], -1)
        sums[1, chain] = np.stack([beta[..., agent == i].sum(-1) for i in agents], -1)
    c = post[ALL_SOLVABLE].values[..., None]
    log_some, log_none = np.log1p(-c) + sums[0], np.log(c) + sums[1]
    some = np.log(rng.uniform(size=share.shape)) < log_some - np.logaddexp(log_some, log_none)
    dims = ("chain", "draw", AGENT)
    return {ANY_NEVER_SOLVED: (dims, some.astype(float)), NEVER_SHARE: (dims, share * some)}


def zero_inflated_log(k, log_count, share):
    """Each pair's log count where a ``share`` of the agent's tasks is never solved:
    ``log(share + (1 - share) C)`` for a pair without a success, ``log(1 - share) + log C``
    for the others, ``log C`` (``log_count``) its Beta-Binomial log count (arrays,
    broadcast; a share of 0 leaves ``log C``)."""
    with np.errstate(divide="ignore"):  # a share of 0: an agent without such tasks
        log_share = np.log(share)
    solvable = np.log1p(-share) + log_count
    return np.where(k == 0, np.logaddexp(log_share, solvable), solvable)


def with_unrun(out: dict, post, layout, rng) -> dict:
    """``out`` with each pair the table never ran predicted, as a new task of its agent
    (the model's tasks are exchangeable within an agent): its rate, and for milestone
    models its task mean (``mu_task_unrun``, which the fit lays over ``mu_task``), the
    task's milestones (as many as any agent was run on) and bypass, drawn from the agent's
    population per posterior draw. Drawn after every rate of a pair run, which they leave
    as they were."""
    p_task = out["p_task"][1]
    unrun = np.argwhere(np.isnan(p_task[0, 0]))
    if not len(unrun):
        return out
    agent, task = unrun[:, 0], unrun[:, 1]
    if "mu" in post:  # end to end: P ~ Beta(mu kappa, (1 - mu) kappa)
        mu, kappa = post["mu"].values[..., agent], post["kappa"].values[..., agent]
        p = np.exp(log_beta_draws(mu * kappa, (1 - mu) * kappa, (), rng))
        if NEVER_SHARE in post:  # or never solved, with the agent's share
            never = rng.uniform(size=p.shape) < post[NEVER_SHARE].values[..., agent]
            p = np.where(never, 0.0, p)
        p_task[..., agent, task] = p
        return out
    mean, conc = post["mu_agent"].values[..., agent], post["kappa_agent"].values[..., agent]
    tiny = np.finfo(float).tiny
    log_mu = log_beta_draws(
        np.maximum(mean * conc, tiny), np.maximum((1 - mean) * conc, tiny), (), rng
    )
    mu_task = np.full_like(p_task, np.nan)
    mu_task[..., agent, task] = np.exp(log_mu)
    widths = np.zeros(len(layout.tasks), dtype=int)
    np.maximum.at(widths, layout.pair_task[layout.cell_pair], layout.cell_factor)
    milestones = out["p_milestone"][1]
    kappa = post["kappa"].values[..., agent]
    mu = np.exp(log_mu)
    log_q = np.zeros_like(mu)
    for m in range(int(widths.max())):
        has = m < widths[task]
        a = np.maximum(mu * kappa, tiny)[..., has]
        b = np.maximum((1 - mu) * kappa, tiny)[..., has]
        log_p = log_beta_draws(a, b, (), rng)
        milestones[..., agent[has], task[has], m] = np.exp(log_p)
        with np.errstate(over="ignore"):  # two log-rates near -1e308 sum to -inf: Q is 0
            log_q[..., has] += log_p
    q = np.exp(log_q)
    if "bypass_task" in out:
        mean, conc = post["mu_bypass"].values[..., agent], post["kappa_bypass"].values[..., agent]
        bypass = rng.beta(mean * conc, (1 - mean) * conc)
        out["bypass_task"][1][..., agent, task] = bypass
        q = q + (1 - q) * bypass
    p_task[..., agent, task] = q
    out["mu_task_unrun"] = (ALL_DIMS, mu_task)
    return out


def _clustered_draws(a, b, phi, layout, rng):
    """``log p`` of every clustered rate per posterior draw, from its prior's shapes and
    ``kappa_cluster``, each ``(chain, draw, rate)`` (``bayes_eval.counts.clusters``)."""
    flat = (x.reshape(-1, x.shape[-1]) for x in (a, b, phi))
    return draw_log_rates(*flat, layout.clusters, rng).reshape(a.shape)


def mixture_log_product(log_p, layout, rng):
    """``log P`` per pair from cell log rates ``(..., cell)``: the log product of one run's
    cells, the run drawn uniformly (the equal mixture over runs; milestones have one run)."""
    shape = log_p.shape[:-1]
    n_runs = max(len(r) for r in layout.runs)
    log_run = np.zeros((len(layout.pairs), n_runs) + shape)
    np.add.at(log_run, (layout.cell_pair, layout.cell_run), np.moveaxis(log_p, -1, 0))
    log_run = np.moveaxis(log_run, (0, 1), (-2, -1))
    counts = np.array([max(len(r), 1) for r in layout.runs])
    chosen = (rng.random(shape + (len(layout.pairs),)) * counts).astype(int)
    return np.take_along_axis(log_run, chosen[..., None], axis=-1)[..., 0]


def _gridded(grid, where, values):
    """Place per-pair values ``(..., pair)`` on the ``(..., agent, task)`` grid."""
    for p, (i, j) in enumerate(where):
        grid[..., i, j] = values[..., p]
    return grid


def _detected_by_pair(post, layout) -> dict:
    """``{pair: log P(k | t)}`` per draw and true count ``t`` (``(draws, t)``) of the pairs
    whose end-to-end runs an audited grader scored (``detection_log``)."""
    grading = layout.grading
    if grading is None:
        return {}
    rates = (post[name].values.reshape(-1, post[name].shape[-1]) for name in GRADER_RATES)
    detected = detection_log(grading, *rates)
    return {int(p): detected[:, g] for g, p in enumerate(grading.pairs)}


def _true_count(log_p, detected, rng) -> np.ndarray:
    """Per draw, a graded pair's true count ``t`` of its runs, drawn by ``P(t) P(k | t)``:
    ``log_p`` is ``log P(t)`` per draw and ``t``, ``detected`` ``log P(k | t)``."""
    return _categorical(log_p + detected[:, : log_p.shape[-1]], rng)


def _bypass(post, layout, rng, shape, log_q, detected):
    """Exact draws of each task's bypass probability, per posterior draw.

    Without end-to-end runs: from the population, ``Beta(mu kappa, (1 - mu) kappa)``.
    With more than ``MARGINAL_END_TO_END``: from its posterior given ``Q``, the mixture
    over j = 0..k of ``Beta(a + j, b + n - k)`` weighted by the terms of the marginal
    likelihood; where a grader scored the runs (``detected``, per pair), ``k`` is the true
    count, drawn first by its terms. (With fewer, ``_marginal_draws`` draws it with the
    milestone rates.)
    """
    agent = layout.pair_agent
    a = post["mu_bypass"].values[..., agent] * post["kappa_bypass"].values[..., agent]
    b = post["kappa_bypass"].values[..., agent] - a
    bypass = rng.beta(a, b)
    for p in end_to_end_groups(layout)[1]:
        n = layout.e2e_n[p]
        ap, bp = a[..., p].reshape(-1, 1), b[..., p].reshape(-1, 1)
        q = log_q[..., p].reshape(-1, 1)
        # 0 * -inf where Q underflows, log 0 where it rounds to 1: both masked inside
        with np.errstate(invalid="ignore", divide="ignore"):
            log_1mq = np.log(-np.expm1(q))
            k = np.full((ap.size, 1), layout.e2e_k[p])
            if p in detected:
                runs = np.full(q.shape[0], n)  # per draw: the task's runs
                log_p = bypass_true_counts_in_blocks(
                    q[:, 0], log_1mq[:, 0], ap[:, 0], bp[:, 0], runs
                )
                k = _true_count(log_p, detected[p], rng)[:, None]
            j = _categorical(
                bypass_terms(
                    np,
                    q,
                    log_1mq,
                    ap,
                    bp,
                    k=k,
                    n=np.array([[n]]),
                    failures=n - k,
                    j_max=int(k.max()),
                    logsumexp=False,
                ),  # fmt: skip
                rng,
            )
        bypass[..., p] = rng.beta(ap[:, 0] + j, bp[:, 0] + (n - k[:, 0])).reshape(shape)
    return bypass


def _marginal_draws(post, layout, rng, shape, detected):
    """Log milestone rates of every cell of the joint model, and the bypass of each task
    with at most ``MARGINAL_END_TO_END`` end-to-end trials, per posterior draw.

    Sampled rates are read from ``p_cell``. Marginalised ones are drawn exactly: given
    the hyperparameters, a cell's rate is ``Beta(a', b')``, ``a' = mu kappa + k``,
    ``b' = (1 - mu) kappa + n - k``, and the task's end-to-end trials add a path of
    survivor counts (``survivor_chain``). The path is drawn from its end: ``c_M`` trials
    through every milestone, the other ``k - c_M`` successes by the bypass (``lambda ~
    Beta(alpha + k - c_M, beta + n - k)``); then backwards, ``c_(m-1)`` given ``c_m``, with
    weights ``P(c_(m-1)) P(c_m | c_(m-1))``; and ``p_m ~ Beta(a'_m + c_m, b'_m + c_(m-1) -
    c_m)``. Where a grader scored the end-to-end runs (``detected``, per pair), ``k`` is
    their true count, drawn first by ``P(k) P(graded count | k)``.
    """
    agent = layout.pair_agent
    a, b = cell_shapes(post, layout)
    extra_a, extra_b = np.zeros_like(a), np.zeros_like(b)
    bypass_a = post["mu_bypass"].values[..., agent] * post["kappa_bypass"].values[..., agent]
    bypass_b = post["kappa_bypass"].values[..., agent] - bypass_a
    bypass_few = {}
    for p in end_to_end_groups(layout)[0]:
        cells = np.flatnonzero(layout.cell_pair == p)
        k, n = int(layout.e2e_k[p]), int(layout.e2e_n[p])
        ap, bp = bypass_a[..., p].ravel(), bypass_b[..., p].ravel()
        ac, bc = a[..., cells].reshape(-1, cells.size), b[..., cells].reshape(-1, cells.size)
        rows = np.full(ap.size, 1)
        chain = survivor_chain(np, ac, bc, n * rows, cells.size * rows, n)

        def outcomes(k, chain=chain, ap=ap, bp=bp, n=n, rows=rows):
            return bypass_outcomes(
                np, special.gammaln, chain[-1], ap, bp,
                k=k * rows, n=n * rows, failures=(n - k) * rows,
            )  # fmt: skip

        if p in detected:
            log_p = [special.logsumexp(outcomes(t), axis=0) for t in range(n + 1)]
            k = _true_count(np.stack(log_p, axis=-1), detected[p], rng)
        survivors = _categorical(outcomes(k).T, rng)
        bypass_few[p] = rng.beta(ap + k - survivors, bp + (n - k)).reshape(shape)
        rising = [log_rising(np, shape_m, n) for shape_m in (ac, bc, ac + bc)]
        shift_a, shift_b = np.zeros_like(ac), np.zeros_like(bc)
        draws = np.arange(ap.size)
        for m in reversed(range(cells.size)):
            # recomputed, not kept from the forward chain: (n + 1)^2 values per draw
            step = transition(np, n, *(r[:, m] for r in rising))[:, survivors, draws]
            before = _categorical((chain[m] + step).T, rng)
            shift_a[:, m], shift_b[:, m] = survivors, before - survivors
            survivors = before
        extra_a[..., cells] = shift_a.reshape(shape + (cells.size,))
        extra_b[..., cells] = shift_b.reshape(shape + (cells.size,))
    log_p = log_beta_draws(a + extra_a, b + extra_b, (), rng)
    sampled = sampled_cells(layout)
    if sampled.any():
        with np.errstate(divide="ignore"):  # a sampled rate may underflow to 0
            log_p[..., sampled] = np.log(post["p_cell"].values)
    return log_p, bypass_few


def task_means(post, layout) -> np.ndarray:
    """``mu_task`` per pair, ``(..., pairs)``, whether the draws hold it per pair (as
    sampled) or over ``(agent, task)`` (as a fit's tree does, ``by_agent_and_task``)."""
    mu_task = post["mu_task"]
    if "pair" in mu_task.dims:
        return mu_task.values
    return mu_task.values[..., layout.pair_agent, layout.pair_task]


def by_agent_and_task(values: np.ndarray, layout) -> np.ndarray:
    """Per-pair values ``(..., pairs)`` laid out over ``(..., agent, task)``, NaN where
    no pair was fitted."""
    out = np.full(values.shape[:-1] + (len(layout.agents), len(layout.tasks)), np.nan)
    out[..., layout.pair_agent, layout.pair_task] = values
    return out


def cell_shapes(post, layout, counts=True):
    """Per posterior draw, the Beta shapes of every milestone cell's rate given its task
    mean and its counts, ``mu kappa + k`` and ``(1 - mu) kappa + n - k``."""
    mean = task_means(post, layout)[..., layout.cell_pair]
    conc = post["kappa"].values[..., layout.pair_agent[layout.cell_pair]]
    # A sampled mean whose logit exceeds 37 is 1 in floating point (and one below -745 is
    # 0): each prior shape is floored at the smallest normal number, 2.2e-308, so that an
    # all-success (or all-failure) cell's Beta stays proper and its log-gamma finite
    # (scipy's gammaln is inf below it).
    tiny = np.finfo(float).tiny
    a, b = np.maximum(mean * conc, tiny), np.maximum((1 - mean) * conc, tiny)
    if not counts:  # the prior's shapes: clustered counts enter through their terms
        return a, b
    return a + layout.k, b + (layout.n - layout.k)


def _categorical(log_weights, rng) -> np.ndarray:
    """One index per row of ``log_weights`` (unnormalised), drawn by its weights."""
    weights = np.exp(log_weights - log_weights.max(axis=-1, keepdims=True))
    cumulative = np.cumsum(weights, axis=-1)
    u = rng.random(log_weights.shape[:-1] + (1,)) * cumulative[..., -1:]
    return np.minimum((u > cumulative).sum(axis=-1), log_weights.shape[-1] - 1)
