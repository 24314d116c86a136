"""The partially pooled models on PyMC, one builder per model (``bayes_eval.registry``).

Mean/concentration parameterisation, ``p ~ Beta(mu kappa, (1 - mu) kappa)``. Where
the rates enter the likelihood only through their own counts they are marginalised
(``k ~ BetaBinomial(n, mu kappa, (1 - mu) kappa)``) and drawn back exactly for every
posterior draw, ``p | mu, kappa, k ~ Beta(mu kappa + k, (1 - mu) kappa + n - k)``, so
NUTS explores only the hyperparameters:

* ``end_to_end`` / ``tasks``: per agent ``mu``, ``kappa``; each task's ``P`` pooled. Where
  an audited grader scored the runs, its sensitivity and specificity are parameters and
  the graded counts' likelihood sums over the true counts (``bayes_eval.counts.grading``).
  With a ``never_solvable`` prior, a share ``never_share`` of the agent's tasks has
  ``P = 0``; with an ``all_solvable`` prior too, the agent has no such task with a chance
  ``all_solvable`` the agents share, else a share ``never_share_if_any`` (both cases
  summed over per agent; which one drawn back exactly, ``any_never_solved``); with a
  ``concentration_scale`` prior, the agents' ``kappa`` are drawn around
  one they share (``kappa_population``, ``kappa_scale``).
* ``milestone`` / ``partial`` (the ``hierarchical`` spec): milestone rates pooled within
  a task around the task mean ``mu_task``; task means pooled across tasks around the
  agent's ``mu_agent`` with concentration ``kappa_agent``; ``P = prod p_m``.
* ``expert_completion`` / ``steps``: the same hierarchy over a run's steps; a task's
  ``P`` is the equal mixture over its runs of the product of their step rates. In both,
  a cell an audited grader scored sums over its true count as ``end_to_end`` does.
* ``joint`` / ``partial``: the milestone hierarchy plus end-to-end counts
  ``k ~ Binomial(n, Q + (1 - Q) lambda)``, ``Q = prod p_m``, with a bypass probability
  ``lambda`` per task pooled across tasks (``mu_bypass``, ``kappa_bypass`` per agent).
  Here the milestone rates of a task also explain its end-to-end counts; they are still
  marginalised for tasks with up to ``MARGINAL_END_TO_END`` end-to-end trials (an exact
  finite sum, ``survivor_chain``) and sampled above; ``lambda`` is marginalised (a finite
  sum, see ``joint_model``); both are drawn back exactly; a task without end-to-end
  runs takes its ``lambda`` from the population.

Runs that come in clusters (a shared seed, sample or day: ``Evidence.clusters``) are
not independent trials. ``end_to_end`` / ``tasks`` and ``milestone`` / ``partial`` then
give each cluster its own rate around the rate it shares, ``q_c ~ Beta(p kappa_cluster,
(1 - p) kappa_cluster)`` with one ``kappa_cluster`` per agent; both ``q_c`` and ``p`` are
marginalised exactly (a finite sum, ``bayes_eval.counts.clusters``) and ``p`` drawn back
exactly, so the bounds widen as much as the clusters differ and NUTS still explores only
the hyperparameters.

PyMC is imported only inside the builders, and only when a pooled model is fitted.
"""

from __future__ import annotations

import numpy as np

from bayes_eval.constants import (
    AGENT,
    ALL_SOLVABLE,
    CELL_CONCENTRATION,
    CONCENTRATION_SCALE,
    NEVER_SHARE,
    NEVER_SHARE_IF_ANY,
    NEVER_SOLVABLE,
)
from bayes_eval.counts.clusters import log_marginal
from bayes_eval.counts.data import count_data, count_data_vars
from bayes_eval.counts.grading import detection_graph, graded_log_likelihood, grader_rates
from bayes_eval.counts.layout import end_to_end_groups, sampled_cells
from bayes_eval.pooled.paths import (
    bypass_terms,
    bypass_true_counts,
    cells_of,
    path_likelihood,
    survivor_chain,
    true_count_terms,
)
from bayes_eval.registry import model_of

__all__ = [
    "clustered_end_to_end_model",
    "clustered_hierarchy_model",
    "end_to_end_model",
    "hierarchy_model",
    "joint_data",
    "joint_model",
]


def _lognormal(pm, name, prior, dims):
    """The model variable of a LogNormal prior (a concentration or a scale)."""
    return pm.LogNormal(name, mu=prior.params["mu"], sigma=prior.params["sigma"], dims=dims)


def _concentration(pm, name, prior, dims):
    """``log kappa`` of a LogNormal concentration (``name``, sampled on the log scale)."""
    import pytensor.tensor as pt

    return pt.log(_lognormal(pm, name, prior, dims))


def _agent_concentration(pm, spec):
    """``log kappa`` per agent: each agent's own LogNormal, or, with a
    ``concentration_scale`` prior, ``log kappa_population + kappa_scale z`` (``z`` standard
    normal per agent, sampled as ``kappa_z``): the agents' concentrations spread around
    one they share, which every agent's tasks inform; ``kappa`` is kept per agent."""
    if CONCENTRATION_SCALE not in spec.priors:
        return _concentration(pm, "kappa", spec.priors["concentration"], AGENT)
    log_shared = _concentration(pm, "kappa_population", spec.priors["concentration"], None)
    scale = _lognormal(pm, "kappa_scale", spec.priors[CONCENTRATION_SCALE], None)
    log_kappa = log_shared + scale * pm.Normal("kappa_z", 0.0, 1.0, dims=AGENT)
    pm.Deterministic("kappa", pm.math.exp(log_kappa), dims=AGENT)
    return log_kappa


def _mean(pm, name, prior, dims):
    """``log mu`` and ``log (1 - mu)`` of a Beta-distributed mean, sampled as its logit."""
    import pytensor.tensor as pt

    model = pm.modelcontext(None)
    size = model.dim_lengths[dims]
    log_a, log_b = (pt.full((size,), np.log(v)) for v in (prior.alpha, prior.beta))
    return _beta_parts(pm, name, log_a, log_b, np.ones(len(model.coords[dims]), dtype=bool), dims)


def _design(pm, name, values):
    """A design array of the table (indices, trials) as model data, never a constant of the
    graph: the compiled model then holds no sizes, and a table of other sizes with the same
    structure loads it from the cache (``bayes_eval.inference.nutpie_model``)."""
    return pm.Data(name, np.asarray(values))


def _coords(layout):
    return {
        AGENT: layout.agents,
        "pair": np.arange(len(layout.pairs)),
        "cell": np.arange(layout.k.size),
    }


def end_to_end_model(layout, spec, form=None):
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model(coords=_coords(layout)) as model:
        log_mu, log_1mu = _mean(pm, "mu", spec.priors["mean"], AGENT)
        log_kappa = _agent_concentration(pm, spec)
        a, b = pt.exp(log_mu + log_kappa), pt.exp(log_1mu + log_kappa)
        if ALL_SOLVABLE in spec.priors or NEVER_SOLVABLE in spec.priors:
            k, f = count_data_vars(pm, "k_obs", layout.e2e_k, layout.e2e_n, "pair")
            group = _design(pm, "pair_agent", layout.pair_agent)
            shared = _shared_terms(pm, a, b, layout.pair_agent, layout.e2e_n)
        if ALL_SOLVABLE in spec.priors:
            log_pi, log_1pi = _mean(pm, NEVER_SHARE_IF_ANY, spec.priors[NEVER_SOLVABLE], AGENT)
            all_solvable = _chance(pm, ALL_SOLVABLE, spec.priors[ALL_SOLVABLE])
            each = _zero_inflated(a, b, log_pi, log_1pi, group, shared, k=k, failures=f)
            total = _spike(each, all_solvable, group, model.dim_lengths[AGENT])
        elif NEVER_SOLVABLE in spec.priors:
            log_pi, log_1pi = _mean(pm, NEVER_SHARE, spec.priors[NEVER_SOLVABLE], AGENT)
            each = _zero_inflated(a, b, log_pi, log_1pi, group, shared, k=k, failures=f)
            total = pt.sum(each[0])
        else:
            total = _counts_likelihood(
                pm, layout, spec, (a, b, layout.pair_agent), layout.e2e_k, layout.e2e_n, "pair"
            )
        pm.Potential("k_end_to_end", total)
    return model


def _chance(pm, name, prior):
    """``log c`` and ``log (1 - c)`` of one probability ``c ~ Beta(alpha, beta)`` shared by
    the agents, sampled as its logit."""
    c = pm.Beta(name, alpha=prior.alpha, beta=prior.beta)
    return pm.math.log(c), pm.math.log1p(-c)


def _spike(each, chance, pair_agent, n_agents):
    """``sum log`` over agents of ``c L_beta + (1 - c) L_share``: each agent has no task it
    never solves with chance ``c`` (its tasks' counts then ``Beta(a, b)``-Binomial, the
    second of ``each``), or a share ``pi`` of such tasks (the first of ``each``)."""
    import pytensor.tensor as pt

    log_c, log_1c = chance
    share, beta = (pt.inc_subtensor(pt.zeros((n_agents,))[pair_agent], terms) for terms in each)
    return pt.sum(pt.logaddexp(log_c + beta, log_1c + share))


def _shared_terms(pm, alpha, beta, group, n):
    """Each pair's terms of ``log BetaBinomial(k | n, alpha[group], beta[group])`` that do
    not depend on its successes, ``log Gamma(a + b) - log Gamma(a) - log Gamma(b) - log
    Gamma(n + a + b)``: computed once per group and once per (group, trials) (``Gamma(n +
    a + b)``), then read per pair. The design (the pairs' (group, trials), and which of
    them each pair has) enters as data (``_design``)."""
    import pytensor.tensor as pt

    (group_u, n_u), at = np.unique(np.stack([group, n]), axis=1, return_inverse=True)
    group_u, n_u, at = (
        _design(pm, f"pair_{part}", values)
        for part, values in (("trials_agent", group_u), ("trials", n_u), ("trials_of", at.ravel()))
    )
    per_group = pt.gammaln(alpha + beta) - pt.gammaln(alpha) - pt.gammaln(beta)
    per_trials = per_group[group_u] - pt.gammaln(n_u + alpha[group_u] + beta[group_u])
    return per_trials[at]


def _zero_inflated(a, b, log_pi, log_1pi, group, shared, *, k, failures):
    """Each pair's log count where a share ``pi`` of the agent's tasks is never solved (rate
    0) and the rest are ``Beta(a, b)``: ``log(pi + (1 - pi) BB(0 | n))`` for a pair without
    a success, ``log(1 - pi) + log BB(k | n)`` (without the binomial coefficient, constant
    in the parameters) for the others; and each pair's ``log BB(k | n)`` alone. ``group``
    is each pair's agent, ``shared`` its terms that do not depend on its successes
    (``_shared_terms``): two log-gamma terms per pair, where the whole Beta-Binomial has
    six."""
    import pytensor.tensor as pt

    beta_binomial = pt.gammaln(k + a[group]) + pt.gammaln(failures + b[group]) + shared
    solvable = log_1pi[group] + beta_binomial
    # from the data variable, not the layout's counts: a model is refitted to new counts
    each = pt.where(pt.eq(k, 0), pt.logaddexp(log_pi[group], solvable), solvable)
    return each, beta_binomial


def _task_hierarchy(pm, pair_agent, spec, form):
    """Agent-level mean of task means, task means, and the within-task concentration;
    ``pair_agent`` is each pair's agent (``_design``).

    ``mu_task ~ Beta(a, b)``, ``a = mu_agent kappa_agent``, ``b = (1 - mu_agent)
    kappa_agent``, sampled centred (``mu_task_logit``) for the pairs ``form.pairs`` marks
    and non-centred (``mu_task_z``) for the others: exactly the same prior either way.
    Returns ``log mu_task``, ``log (1 - mu_task)`` and ``log kappa``.
    """
    log_mu, log_1mu = _mean(pm, "mu_agent", spec.priors["task_mean"], AGENT)
    log_kappa = _concentration(pm, "kappa_agent", spec.priors["task_concentration"], AGENT)
    log_a, log_b = (log_mu + log_kappa)[pair_agent], (log_1mu + log_kappa)[pair_agent]
    log_task, log_1m_task = _beta_parts(pm, "mu_task", log_a, log_b, form.pairs, "pair")
    role = CELL_CONCENTRATION[model_of(spec).cell_method]
    return log_task, log_1m_task, _concentration(pm, "kappa", spec.priors[role], AGENT)


def _beta_parts(pm, name, log_a, log_b, centred, dim, tails=None):
    """``log p`` and ``log (1 - p)`` of ``p ~ Beta(a, b)`` over ``dim``, from the shapes'
    logs. Sampled on the logit scale, centred (``{name}_logit``) where ``centred`` and
    non-centred (``{name}_z``, ``_noncentred_beta``) elsewhere, except where ``tails``
    is 1 or -1: there on the upper or lower tail scale (``{name}_upper``,
    ``{name}_lower``, ``_tail_beta``). ``p`` is recorded as the deterministic ``name``.

    Every form keeps ``log p`` and ``log (1 - p)`` exact where ``p`` rounds to 0 or 1 (an
    all-success task whose mean's logit wanders to 40): PyMC's Beta would make the shape
    ``(1 - p) kappa`` 0 there, and the step a divergence.
    """
    import pytensor.tensor as pt

    model = pm.modelcontext(None)
    tails = np.zeros(centred.size, dtype=np.int8) if tails is None else tails
    log_p, log_1mp = (pt.zeros((model.dim_lengths[dim],)) for _ in range(2))
    forms = {
        "logit": (centred & (tails == 0), _logit_beta),
        "z": (~centred & (tails == 0), _noncentred_beta),
        "upper": (tails == 1, _tail_beta),
        "lower": (tails == -1, _tail_beta),
    }
    for form, (mask, parts) in forms.items():
        where = np.flatnonzero(mask)
        if not where.size:
            continue
        # labelled by the positions it covers, over a dim of its own (``sampling``
        # names the pairs and cells after sampling)
        free_dim = f"{name}_{form}_{dim}"
        model.add_coord(free_dim, np.asarray(model.coords[dim])[where])
        free = pm.Flat(f"{name}_{form}", dims=free_dim)
        where = _design(pm, f"{free_dim}_at", where)
        if form == "lower":  # the upper tail of 1 - p ~ Beta(b, a)
            log_1mx, log_x, log_density = parts(log_b[where], log_a[where], free)
        else:
            log_x, log_1mx, log_density = parts(log_a[where], log_b[where], free)
        pm.Potential(f"{name}_{form}_prior", pt.sum(log_density))
        log_p = pt.set_subtensor(log_p[where], log_x)
        log_1mp = pt.set_subtensor(log_1mp[where], log_1mx)
    pm.Deterministic(name, pt.exp(log_p), dims=dim)
    return log_p, log_1mp


def _logit_beta(log_a, log_b, x):
    """``log p``, ``log (1 - p)`` and the log density of ``x = logit p``, ``p ~ Beta(a, b)``:
    ``a log p + b log (1 - p) - log B(a, b)`` (the Beta density times ``p (1 - p)``)."""
    import pytensor.tensor as pt

    a, b = pt.exp(log_a), pt.exp(log_b)
    log_p, log_1mp = -pt.softplus(-x), -pt.softplus(x)
    log_beta = pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(a + b)
    return log_p, log_1mp, a * log_p + b * log_1mp - log_beta


def _noncentred_beta(log_a, log_b, z):
    """``log p``, ``log (1 - p)`` and the log density of ``z`` for ``p ~ Beta(a, b)`` written
    as ``logit p = log(a / b) + z sqrt(1 / a + 1 / b + 1 / a^2 + 1 / b^2)``.

    The scale follows the sd of ``logit p``, ``sqrt(trigamma(a) + trigamma(b))``: about
    ``sqrt(1 / a + 1 / b)`` for large shapes and ``sqrt(1 / a^2 + 1 / b^2)`` for small
    ones, so ``z`` is about standard normal whatever ``a`` and ``b``. With the large-shape
    scale alone, the tails of ``z`` under shapes near 0.05 (a concentration near 0.1)
    would decay at rate ``sqrt(a)``, a heavy tail that NUTS crosses only with long
    trajectories. The density (``_logit_beta`` plus ``log |d logit p / dz| = log scale``)
    keeps ``p`` exactly Beta. Neither needs digamma or trigamma, whose gradients numba
    would run in object mode.
    """
    import pytensor.tensor as pt

    inverse_a, inverse_b = pt.exp(-log_a), pt.exp(-log_b)
    scale = pt.sqrt(inverse_a * (1 + inverse_a) + inverse_b * (1 + inverse_b))
    log_p, log_1mp, log_density = _logit_beta(log_a, log_b, log_a - log_b + scale * z)
    return log_p, log_1mp, log_density + pt.log(scale)


def _tail_beta(log_a, log_b, w):
    """``log p``, ``log (1 - p)`` and the log density of ``w`` for ``p ~ Beta(a, b)``
    written as ``-log(1 - p) = exp(w) / b``.

    For a rate whose counts are all successes. As its task mean nears 1, ``b = (1 - mu)
    kappa`` nears 0 and the logit of ``p`` gets an exponential tail of scale ``1 / b``: a
    chain that follows the mean there cannot cross it on the logit scale (the second
    robustness design, R-hat 1.38). On this scale ``b (-log(1 - p))`` tends to an
    Exponential(1) as ``b`` shrinks, so ``w`` keeps the same shape whatever ``b``; for a
    large ``b`` it is about the log of a Gamma(a), and the successes bound its lower tail
    at rate ``a + k``. The density is the Beta's times ``|dp / dw| = (1 - p) exp(w) / b``:
    ``(a - 1) log p - exp(w) + w - log Gamma(a) - log Gamma(b + 1) + log Gamma(a + b)``,
    with ``Gamma(b) = Gamma(b + 1) / b`` taken in closed form, so nothing cancels as ``b``
    goes to 0. Where ``e = exp(w) / b`` is below 1e-10, ``log p = log e - e / 2`` (its
    series, which does not underflow with ``e``).
    """
    import pytensor.tensor as pt

    a, b = pt.exp(log_a), pt.exp(log_b)
    log_e = w - log_b
    e = pt.exp(log_e)
    small = log_e < np.log(1e-10)
    # the other branch sees a safe value, so its gradient is never 0 x inf
    log_p = pt.switch(small, log_e - e / 2, pt.log(-pt.expm1(-pt.switch(small, 1.0, e))))
    log_norm = pt.gammaln(a + b) - pt.gammaln(a) - pt.gammaln(b + 1)
    return log_p, -e, (a - 1) * log_p - pt.exp(w) + w + log_norm


def hierarchy_model(layout, spec, form):
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model(coords=_coords(layout)) as model:
        pair_agent = _design(pm, "pair_agent", layout.pair_agent)
        log_mu, log_1mu, log_kappa = _task_hierarchy(pm, pair_agent, spec, form)
        log_kappa = log_kappa[pair_agent]
        a, b = pt.exp(log_mu + log_kappa), pt.exp(log_1mu + log_kappa)
        total = _counts_likelihood(
            pm, layout, spec, (a, b, layout.cell_pair), layout.k, layout.n, "cell"
        )
        pm.Potential("k_cell", total)
    return model


def _counts_likelihood(pm, layout, spec, rates, k, n, dim):
    """``sum log P(k | a, b)`` over the rates (``dim``: pairs, or milestone or step cells),
    ``rates`` their groups' ``a``, ``b`` and each one's group: a graded count through its
    grader (``graded_log_likelihood``), the others' Beta-Binomial (``k_obs``)."""
    a, b, group = rates
    own, total = np.arange(k.size), 0.0
    if layout.grading is not None:  # the graded rates' counts through their grader
        own = np.setdiff1d(own, layout.grading.pairs)
        total = graded_log_likelihood(pm, layout.grading, spec.grader, a, b, group)
    if own.size:
        dims = dim if own.size == k.size else None
        successes, failures = count_data_vars(pm, "k_obs", k[own], n[own], dims)
        total += _beta_binomial(pm, dim, a, b, group[own], k=successes, failures=failures, n=n[own])
    return total


def clustered_hierarchy_model(layout, spec, form):
    """``hierarchical`` with clustered runs: each milestone rate and its clusters' rates
    marginalised exactly (``bayes_eval.counts.clusters``) around the sampled task means."""
    import pymc as pm

    with pm.Model(coords=_coords(layout)) as model:
        log_mu, log_1mu, log_kappa = _task_hierarchy(pm, layout.pair_agent, spec, form)
        pair = layout.cell_pair
        log_kappa = log_kappa[layout.pair_agent][pair]
        log_phi = _cluster_concentration(pm, spec)[layout.pair_agent][pair]
        _cluster_marginal(pm, log_mu[pair] + log_kappa, log_1mu[pair] + log_kappa, log_phi, layout)
    return model


def clustered_end_to_end_model(layout, spec, form=None):
    """``end_to_end_pooled`` with clustered runs: each task's ``P`` and its clusters' rates
    marginalised exactly (``bayes_eval.counts.clusters``); NUTS sees ``mu``, ``kappa`` and
    ``kappa_cluster`` per agent."""
    import pymc as pm

    with pm.Model(coords=_coords(layout)) as model:
        log_mu, log_1mu = _mean(pm, "mu", spec.priors["mean"], AGENT)
        log_kappa = _agent_concentration(pm, spec)
        log_phi = _cluster_concentration(pm, spec)
        agent = layout.pair_agent
        log_a, log_b = (log_mu + log_kappa)[agent], (log_1mu + log_kappa)[agent]
        _cluster_marginal(pm, log_a, log_b, log_phi[agent], layout)
    return model


def _cluster_concentration(pm, spec):
    """``log kappa_cluster`` per agent: how alike the rates of one rate's clusters are."""
    return _concentration(pm, "kappa_cluster", spec.priors["cluster_concentration"], AGENT)


def _cluster_marginal(pm, log_a, log_b, log_phi, layout):
    """The exact log-likelihood of every rate's clusters given its prior's log shapes and
    log ``kappa_cluster`` (``bayes_eval.counts.clusters.log_marginal``)."""
    import pytensor.tensor as pt

    total = log_marginal(pt, pt.gammaln, pt.logsumexp, log_a, log_b, log_phi, layout.clusters)
    pm.Potential("k_clusters", total)


def _beta_binomial(pm, name, alpha, beta, group, *, k, failures, n):
    """``sum log BetaBinomial(k | n, alpha[group], beta[group])`` over the cells, without
    the binomial coefficients (constant in the parameters); ``failures`` is ``n - k``
    (``count_data``). The design (``group``, ``n``) enters as data named ``{name}_...``
    (``_design``).

    ``log B(k + a, n - k + b) - log B(a, b)`` has two log-gamma terms that depend on
    the cell's successes; the others depend only on the group and the trials, so they
    are computed once per group (``B(a, b)``) and once per (group, trials) pair
    (``Gamma(n + a + b)``): two log-gamma terms per cell, and as many in the gradient,
    where ``pm.BetaBinomial`` has nine (it also recomputes the coefficients from the data).
    As there, a shape that underflows to 0 makes the log-likelihood ``-inf``.
    """
    import pytensor.tensor as pt
    from pymc.distributions.dist_math import check_parameters

    (group_u, n_u), cells = np.unique(np.stack([group, n]), axis=1, return_counts=True)
    group_u, n_u, cells = (
        _design(pm, f"{name}_{part}", values)
        for part, values in (("group", group_u), ("trials", n_u), ("repeats", cells))
    )
    group = _design(pm, f"{name}_of", group)
    a, b = alpha[group], beta[group]
    per_cell = pt.gammaln(k + a) + pt.gammaln(failures + b)
    per_group = pt.gammaln(alpha + beta) - pt.gammaln(alpha) - pt.gammaln(beta)
    per_trials = cells * pt.gammaln(n_u + alpha[group_u] + beta[group_u])
    total = pt.sum(per_cell) + pt.sum(per_group[group]) - pt.sum(per_trials)
    return check_parameters(total, pt.all(alpha > 0), pt.all(beta > 0), msg="alpha, beta > 0")


def joint_model(layout, spec, form):
    """Milestone hierarchy plus end-to-end counts, with the bypass marginalised.

    With ``s = Q + (1 - Q) lambda`` and ``lambda ~ Beta(a, b)``, expanding ``s^k``
    binomially gives ``P(k | Q) = C(n, k) (1 - Q)^(n - k) sum_j C(k, j) Q^(k - j)
    (1 - Q)^j B(a + j, b + n - k) / B(a, b)``, j = 0..k: a finite sum, so NUTS never
    sees lambda (``rates._bypass`` draws it back exactly).

    The milestone rates are sampled only where that is needed. A task without end-to-end
    runs has its rates marginalised as in ``hierarchical`` (Beta-Binomial). A task with
    at most ``MARGINAL_END_TO_END`` end-to-end trials (one, in the usual agentic
    benchmark) too: given the hyperparameters its rates are independent Betas, and its
    end-to-end likelihood is a finite sum over how many trials pass each milestone
    (``survivor_chain``, ``path_likelihood``); ``rates._marginal_draws`` draws the rates and
    lambda back. Only tasks with more end-to-end trials sample their rates (``p_cell``,
    over ``sampled_cell``).
    """
    import pymc as pm
    import pytensor.tensor as pt

    sampled = sampled_cells(layout)
    few, many = end_to_end_groups(layout)
    coords = {**_coords(layout), "sampled_cell": np.flatnonzero(sampled)}
    with pm.Model(coords=coords) as model:
        log_mu, log_1mu, log_kappa = _task_hierarchy(pm, layout.pair_agent, spec, form)
        log_kappa = log_kappa[layout.pair_agent]
        log_a, log_b = log_mu + log_kappa, log_1mu + log_kappa  # per pair
        k, f = count_data_vars(pm, "k_obs", layout.k, layout.n, "cell")
        kept = np.flatnonzero(~sampled)
        if kept.size:
            a, b, group = pt.exp(log_a), pt.exp(log_b), layout.cell_pair[kept]
            total = _beta_binomial(
                pm, "cell", a, b, group, k=k[kept], failures=f[kept], n=layout.n[kept]
            )
            pm.Potential("k_cell", total)
        log_bypass, log_1m_bypass = _mean(pm, "mu_bypass", spec.priors["bypass_mean"], AGENT)
        log_kappa_bypass = _concentration(
            pm, "kappa_bypass", spec.priors["bypass_concentration"], AGENT
        )
        bypass_a = pt.exp(log_bypass + log_kappa_bypass)[layout.pair_agent]
        bypass_b = pt.exp(log_1m_bypass + log_kappa_bypass)[layout.pair_agent]
        graded = _graded_pairs(pm, layout, spec)
        if few.size:
            cells, counts = cells_of(layout, few)
            group = layout.cell_pair[cells]
            a = pt.exp(log_a)[group] + k[cells]
            b = pt.exp(log_b)[group] + f[cells]
            n = layout.e2e_n[few]
            survivors = survivor_chain(pt, a, b, n, counts, int(n.max()))[-1]
            plain, mine = _split(few, graded)
            if plain.size:
                e2e_k, e2e_f = count_data_vars(pm, "e2e_few", layout.e2e_k[few[plain]], n[plain])
                log_lik = path_likelihood(
                    pt, survivors if not mine.size else _columns(survivors, plain, n[plain]),
                    bypass_a[few[plain]], bypass_b[few[plain]], e2e_k,
                    n[plain], e2e_f,
                )  # fmt: skip
                pm.Potential("end_to_end_few", pt.sum(log_lik))
            if mine.size:  # graded: the sum over the true count t of P(t) P(k | t)
                pairs, runs = few[mine], n[mine]

                def few_terms(row, t):
                    at = pairs[row]
                    ends = _columns(survivors, mine[row], runs)
                    return path_likelihood(
                        pt, ends, bypass_a[at], bypass_b[at], t, runs[row], runs[row] - t
                    )

                log_p_true = true_count_terms(pt, runs, few_terms)
                pm.Potential("graded_few", _through_grader(pt, log_p_true, graded, pairs))
        if many.size:
            where = np.flatnonzero(sampled)
            group = layout.cell_pair[where]
            log_p, log_1mp = _beta_parts(
                pm, "p_cell", log_a[group], log_b[group], form.cells, "sampled_cell", form.tails
            )
            pm.Potential("k_sampled", pt.sum(k[where] * log_p + f[where] * log_1mp))
            log_q = pt.inc_subtensor(pt.zeros(len(layout.pairs))[group], log_p)[many]
            log_1mq = _log_1m_product(pt, layout, many, where, log_p, log_1mp)
            n = layout.e2e_n[many]
            plain, mine = _split(many, graded)
            if plain.size:
                at = many[plain]
                e2e_k, e2e_f = count_data_vars(pm, "e2e_k", layout.e2e_k[at], n[plain])
                log_lik = bypass_terms(
                    pt, log_q[plain][:, None], log_1mq[plain][:, None], bypass_a[at][:, None],
                    bypass_b[at][:, None], k=e2e_k[:, None], n=n[plain][:, None],
                    failures=e2e_f[:, None], j_max=int(n[plain].max()), logsumexp=True,
                )  # fmt: skip
                pm.Potential("end_to_end", pt.sum(log_lik))
            if mine.size:  # graded: the sum over the true count t of P(t) P(k | t)
                at = many[mine]
                log_p_true = bypass_true_counts(
                    pt, log_q[mine], log_1mq[mine], bypass_a[at], bypass_b[at], n[mine]
                )
                pm.Potential("graded", _through_grader(pt, log_p_true, graded, at))
    return model


def _graded_pairs(pm, layout, spec):
    """Where an audited grader scored some pairs' end-to-end runs (``joint``): its
    ``log P(k | t)`` per graded pair and true count (``detection_graph``, each grader's
    rates in the model, its audit their data) and each pair's row in it (-1: none)."""
    if layout.grading is None:
        return None
    grading = layout.grading
    se, sp = grader_rates(pm, grading, spec.grader)
    return detection_graph(pm, grading, se, sp), grading.rows(len(layout.pairs))


def _columns(survivors, index, n):
    """The survivor counts ``0..max(n)`` of the rows ``index`` (columns of ``survivors``),
    indexed on the first axis only (as the C writer takes an index)."""
    return survivors.T[index].T[: int(np.max(n)) + 1]


def _split(pairs, graded):
    """Positions in ``pairs`` of those no audited grader scored, and of those it did."""
    if graded is None:
        return np.arange(pairs.size), np.array([], dtype=int)
    mine = graded[1][pairs] >= 0
    return np.flatnonzero(~mine), np.flatnonzero(mine)


def _through_grader(pt, log_p_true, graded, pairs):
    """``sum log sum_t P(t) P(k | t)`` over ``pairs``: their ``log P(t)`` (``(pair, t)``,
    ``true_count_terms``) and ``P(k | t)`` of their graded counts (``_graded_pairs``)."""
    detected, row = graded
    terms = log_p_true + detected[row[pairs]][:, : log_p_true.shape[1]]
    return pt.sum(pt.logsumexp(terms, axis=1))


def _log_1m_product(pt, layout, pairs, sampled, log_p, log_1mp):
    """``log(1 - Q)`` of each of ``pairs``, ``Q`` the product of its sampled rates (given
    over the cells ``sampled`` by their ``log p`` and ``log (1 - p)``), built milestone by
    milestone from ``1 - Q = (1 - p_1) + p_1 (1 - Q_rest)``: exact where ``Q`` rounds to 1
    (an all-success task on the tail scale), where ``log(1 - exp(log Q))`` would be
    ``-inf`` and its gradient NaN."""
    cells, counts = cells_of(layout, pairs)
    position = np.full(layout.k.size, -1)
    position[sampled] = np.arange(sampled.size)
    index = position[cells]
    total = log_1mp[index[:, 0]]
    for m in range(1, index.shape[1]):
        step = pt.logaddexp(log_1mp[index[:, m]], log_p[index[:, m]] + total)
        total = pt.where(m < counts, step, total)
    return total


def joint_data(layout, e2e_k) -> dict:
    """The joint model's end-to-end data (``pm.Data`` by name) for per-pair successes (of
    the pairs no audited grader scored: a graded count's terms are the model's structure)."""
    graded = np.zeros(len(layout.pairs), dtype=bool)
    if layout.grading is not None:
        graded[layout.grading.pairs] = True
    data = {}
    for name, pairs in zip(("e2e_few", "e2e_k"), end_to_end_groups(layout), strict=True):
        pairs = pairs[~graded[pairs]]
        if pairs.size:
            data.update(count_data(name, e2e_k[pairs], layout.e2e_n[pairs]))
    return data
