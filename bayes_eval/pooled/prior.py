"""The pooled models' priors: draws of every quantity a fit's posterior holds, drawn
generatively from the spec's priors on the evidence's design (the ``prior`` group of a
fit's tree, and the truths of SBC), and the log prior density of a fit's draws of the
spec's parameters (the ``log_prior`` group, which ``arviz_stats.psense`` power-scales)."""

from __future__ import annotations

import dataclasses

import numpy as np
import xarray as xr

from bayes_eval.constants import (
    AGENT,
    ALL_SOLVABLE,
    ANY_NEVER_SOLVED,
    CELL_CONCENTRATION,
    CONCENTRATION_SCALE,
    END_TO_END,
    EXPERT_COMPLETION,
    MILESTONE,
    NEVER_SHARE,
    NEVER_SHARE_IF_ANY,
    NEVER_SOLVABLE,
    RUN,
    STEP,
    TASK,
)
from bayes_eval.counts.grading import GRADER_RATES, graded_chance
from bayes_eval.exact.graded import graded_success
from bayes_eval.exact.products import log_beta_draws
from bayes_eval.registry import UNRUN_PAIRS, model_of

__all__ = [
    "cluster_counts",
    "hyper_roles",
    "hyper_truth",
    "log_prior",
    "prior_draw",
    "prior_draws",
    "simulate",
    "variable_roles",
]

# The model variable of each prior role (one value per agent, except the concentration
# the agents share where a spec has a concentration_scale): an end-to-end model's, or a
# model of cells' (its cells' concentration, ``CELL_CONCENTRATION``, is ``kappa``), a
# bypass's, and a clustered model's (``variable_roles``).
_END_TO_END = {
    "mean": "mu",
    "concentration": "kappa",
    NEVER_SOLVABLE: NEVER_SHARE,
    ALL_SOLVABLE: ALL_SOLVABLE,
    CONCENTRATION_SCALE: "kappa_scale",
}
_TASK_HIERARCHY = {"task_mean": "mu_agent", "task_concentration": "kappa_agent"}
_BYPASS = {"bypass_mean": "mu_bypass", "bypass_concentration": "kappa_bypass"}
_CLUSTERS = {"cluster_concentration": "kappa_cluster"}
# The concentration the agents share, its scale, and the chance that an agent has no task
# it never solves: one value per draw, not per agent.
_SHARED = ("kappa_population", "kappa_scale", ALL_SOLVABLE)


def prior_draw(prior, size, rng) -> np.ndarray:
    """One draw per agent (``size`` of them; ``None``: one scalar) from a pooled spec's prior
    (Beta mean, LogNormal concentration or scale)."""
    if prior.dist == "Beta":
        return rng.beta(prior.alpha, prior.beta, size)
    return rng.lognormal(prior.params["mu"], prior.params["sigma"], size)


def simulate(truth, layout, spec, rng):
    """Counts (as model data) and the true ``P`` per pair, drawn generatively (a graded
    pair's counts through its grader, ``truth``'s ``sensitivity`` and ``specificity``);
    the true task means (``mu_task``), cell log rates (``log_p``) and bypasses
    (``bypass``) are added to ``truth``."""
    from bayes_eval.counts.data import count_data
    from bayes_eval.pooled.models import joint_data
    from bayes_eval.pooled.rates import mixture_log_product

    agent = layout.pair_agent
    entry = model_of(spec)
    if not entry.cell_method:
        mu, kappa = np.clip(truth["mu"][agent], 1e-12, 1 - 1e-12), truth["kappa"][agent]
        p_task = rng.beta(mu * kappa, (1 - mu) * kappa)
        if NEVER_SHARE in truth:  # tasks never solved
            p_task[rng.uniform(size=p_task.shape) < truth[NEVER_SHARE][agent]] = 0.0
        if layout.clusters is not None:
            return {"k_cluster": cluster_counts(truth, layout, p_task, agent, rng)}, p_task
        runs_at = _graded(truth, layout, p_task)
        return count_data("k_obs", rng.binomial(layout.e2e_n, runs_at), layout.e2e_n), p_task
    mu, kappa = truth["mu_agent"][agent], truth["kappa_agent"][agent]
    truth["mu_task"] = np.exp(log_beta_draws(mu * kappa, (1 - mu) * kappa, (), rng))
    # Tiny concentrations put task means at 0 or 1 in floating point; keep them strictly
    # inside, where a Beta is defined.
    mean = np.clip(truth["mu_task"], 1e-12, 1 - 1e-12)[layout.cell_pair]
    conc = truth["kappa"][agent[layout.cell_pair]]
    log_p = log_beta_draws(mean * conc, (1 - mean) * conc, (), rng)
    truth["log_p"] = log_p
    if layout.clusters is not None:
        k = cluster_counts(truth, layout, np.exp(log_p), agent[layout.cell_pair], rng)
        data = {"k_cluster": k}
    else:
        data = count_data(
            "k_obs", rng.binomial(layout.n, _graded(truth, layout, np.exp(log_p), CELLS)), layout.n
        )
    p_task = np.exp(mixture_log_product(log_p, layout, rng))  # drawn as a real fit draws it
    if entry.paths:  # a bypass besides the milestones' path
        a = truth["mu_bypass"][agent] * truth["kappa_bypass"][agent]
        b = truth["kappa_bypass"][agent] - a
        bypass = truth["bypass"] = rng.beta(a, b)
        p_task = p_task + (1 - p_task) * bypass
        data.update(joint_data(layout, rng.binomial(layout.e2e_n, _graded(truth, layout, p_task))))
    return data, p_task


# ``_graded``'s rates of cells (milestones, expert steps), not of pairs end to end.
CELLS = "cells"


def _graded(truth, layout, p, rates: str = END_TO_END) -> np.ndarray:
    """The chance that a run of each rate (pair or cell, its rate ``p``; ``rates``:
    ``END_TO_END`` or ``CELLS``) is graded a success: its rate, or where a grader scored it
    ``se p + (1 - sp)(1 - p)`` with ``truth``'s ``sensitivity`` and ``specificity``."""
    grading = layout.grading
    if grading is None or (grading.method == END_TO_END) != (rates == END_TO_END):
        return p
    p = p.copy()
    se, sp = (truth[name][grading.grader] for name in GRADER_RATES)
    true = p[grading.pairs]
    p[grading.pairs] = graded_success(true, se, sp)
    return p


def cluster_counts(truth, layout, rate, rate_agent, rng) -> np.ndarray:
    """Successes of every cluster (in the evidence's cluster order): its own rate ``q ~
    Beta(p phi, (1 - p) phi)`` around its rate ``p``, then its runs."""
    terms = layout.clusters
    p = np.clip(rate[terms.cluster_rate], 1e-12, 1 - 1e-12)
    phi = truth["kappa_cluster"][rate_agent[terms.cluster_rate]]
    q = np.exp(log_beta_draws(p * phi, (1 - p) * phi, (), rng))
    return rng.binomial(terms.cluster_trials, q)


def hyper_roles(layout, spec) -> dict:
    """``{prior role: model variable}`` of the agent-level parameters ``spec`` draws
    from its priors on this design (the cluster concentration only with clusters)."""
    return {
        role: name
        for name, role in variable_roles(spec).items()
        if role not in _CLUSTERS or layout.clusters is not None
    }


def variable_roles(spec) -> dict:
    """``{model variable: prior role}`` of every parameter ``spec``'s priors govern (the
    cluster concentration's whether or not the evidence has clusters)."""
    entry = model_of(spec)
    if entry.cell_method:
        names = {**_TASK_HIERARCHY, CELL_CONCENTRATION[entry.cell_method]: "kappa"}
    else:
        names = dict(_END_TO_END)
    names |= _BYPASS if entry.paths else {}
    names |= _CLUSTERS if entry.clustered else {}
    if CONCENTRATION_SCALE in spec.priors:
        names["concentration"] = "kappa_population"
    if ALL_SOLVABLE in spec.priors:
        names[NEVER_SOLVABLE] = NEVER_SHARE_IF_ANY
    return {names[role]: role for role in spec.priors if role in names}


def hyper_truth(roles, spec, n_agents, rng) -> dict:
    """One draw of the parameters ``roles`` (from ``hyper_roles``) from their priors: one
    per agent, and the concentration the agents share and its scale as scalars, with the
    agents' ``kappa`` drawn around it; with ``all_solvable``, whether each agent has tasks
    it never solves, and their share (``never_share``, 0 where it has none)."""
    shared = CONCENTRATION_SCALE in spec.priors
    truth = {
        name: prior_draw(spec.priors[role], None if name in _SHARED else n_agents, rng)
        for role, name in roles.items()
    }
    if shared:
        z = rng.standard_normal(n_agents)
        truth["kappa"] = np.exp(np.log(truth["kappa_population"]) + truth["kappa_scale"] * z)
    if ALL_SOLVABLE in truth:
        some = rng.uniform(size=n_agents) >= truth[ALL_SOLVABLE]
        truth[ANY_NEVER_SOLVED] = some.astype(float)
        truth[NEVER_SHARE] = truth[NEVER_SHARE_IF_ANY] * some
    return truth


def prior_draws(layout, spec, n_draws: int, seed: int) -> xr.Dataset:
    """``n_draws`` draws (one chain) of the parameters, task means, rates and ``p_task``
    of a pooled fit on ``layout``, each from the spec's priors through the model, as
    ``simulate`` draws a truth: the ``prior`` group, with the posterior's variables
    (not the sampler's reparametrised parts, ``*_logit`` and ``*_z``)."""
    rng = np.random.default_rng(seed)
    roles = hyper_roles(layout, spec)
    agents, tasks = layout.agents, layout.tasks
    at = (np.array([agents.index(a) for a, _ in layout.pairs]), layout.pair_task)
    grid = (n_draws, len(agents), len(tasks))
    values = {}
    p_task, mu_task, bypass = (np.full(grid, np.nan) for _ in range(3))
    factor = None
    entry = model_of(spec)
    if entry.cell_method:
        n_runs = max(len(r) for r in layout.runs)
        factor = np.full(grid + (n_runs, int(layout.cell_factor.max())), np.nan)
    ungraded = dataclasses.replace(layout, grading=None)  # the rates alone: no counts kept
    for d in range(n_draws):
        truth = hyper_truth(roles, spec, len(agents), rng)
        drawn = list(truth)  # before simulate adds the task means and rates
        _, p_task[(d, *at)] = simulate(truth, ungraded, spec, rng)
        for name in drawn:
            values.setdefault(name, np.empty((n_draws, *np.shape(truth[name]))))[d] = truth[name]
        if factor is not None:
            mu_task[(d, *at)] = truth["mu_task"]
            cell = (d, *(i[layout.cell_pair] for i in at), layout.cell_run, layout.cell_factor - 1)
            factor[cell] = np.exp(truth["log_p"])
        if "bypass" in truth:
            bypass[(d, *at)] = truth["bypass"]
    dims = ("chain", "draw", AGENT, TASK)
    data = {name: (_hyper_dims(name), v[None]) for name, v in values.items()}
    data["p_task"] = (dims, p_task[None])
    coords = {"chain": [0], "draw": np.arange(n_draws), AGENT: agents, TASK: tasks}
    if factor is not None:
        data["mu_task"] = (dims, mu_task[None])
        if entry.cell_method == EXPERT_COMPLETION:
            data["p_step"] = (dims + (RUN, STEP), factor[None])
            coords[RUN] = np.arange(1, factor.shape[-2] + 1)
            coords[STEP] = np.arange(1, factor.shape[-1] + 1)
        else:
            data["p_milestone"] = (dims + (MILESTONE,), factor[None, ..., 0, :])
            coords[MILESTONE] = np.arange(1, factor.shape[-1] + 1)
    if entry.paths:
        data["bypass_task"] = (dims, bypass[None])
    if layout.grading is not None:  # each grader's rates, and the chance of a graded success
        rates = p_task if layout.grading.method == END_TO_END else factor
        data.update(_grader_draws(layout, spec, rates, at, n_draws, rng))
        coords["grader"] = layout.grading.graders
    if UNRUN_PAIRS in entry.predicts:  # the pairs never run, as a fit predicts them
        from bayes_eval.pooled.rates import with_unrun

        hyper = xr.Dataset({name: (_hyper_dims(name), v[None]) for name, v in values.items()})
        data = with_unrun(data, hyper, layout, rng)
        if "mu_task_unrun" in data:
            unrun = data.pop("mu_task_unrun")[1]
            data["mu_task"] = (dims, np.where(np.isnan(mu_task[None]), unrun, mu_task[None]))
    return xr.Dataset(data, coords=coords)


def _grader_draws(layout, spec, rates, at, n_draws, rng) -> dict:
    """Draws of each grader's sensitivity and specificity from the spec's ``[grader]``
    priors, and the chance ``se p + (1 - sp)(1 - p)`` of a graded success of each rate it
    scored: ``p_graded`` of a pair (``rates``: ``p_task``, ``(draw, agent, task)``), or
    ``p_graded_milestone``, ``p_graded_step`` of a cell (``rates``: the cells' rates,
    ``(draw, agent, task, run, factor)``)."""
    grading = layout.grading
    size = (n_draws, len(grading.graders))
    se, sp = (prior_draw(spec.grader[name], size, rng) for name in GRADER_RATES)
    graded = np.full(rates.shape, np.nan)
    if grading.method == END_TO_END:
        cell = tuple(x[grading.pairs] for x in at)
    else:
        rate = grading.pairs
        pair = layout.cell_pair[rate]
        cell = (at[0][pair], at[1][pair], layout.cell_run[rate], layout.cell_factor[rate] - 1)
    p = rates[(slice(None), *cell)]
    graded[(slice(None), *cell)] = se[:, grading.grader] * p + (1 - sp[:, grading.grader]) * (1 - p)
    name, dims, graded = graded_chance(grading.method, graded)
    return {
        "sensitivity": (("chain", "draw", "grader"), se[None]),
        "specificity": (("chain", "draw", "grader"), sp[None]),
        name: (("chain", "draw", AGENT, TASK, *dims), graded[None]),
    }


def _hyper_dims(name):
    return ("chain", "draw") if name in _SHARED else ("chain", "draw", AGENT)


def log_prior(post: xr.Dataset, layout, spec) -> xr.Dataset:
    """The log density of each posterior draw of the agent-level parameters under the
    spec's priors, one variable per parameter over ``(chain, draw, agent)`` (``(chain,
    draw)`` for a concentration the agents share and its scale): what
    ``arviz_stats.psense`` power-scales. The task means and rates below them are the
    model's population, not a prior, and are left unscaled (Kallioinen et al. 2024
    power-scale the top-level priors of a hierarchical model). A grader's sensitivity and
    specificity are scaled under their ``[grader]`` priors."""
    priors = {name: spec.priors[role] for role, name in hyper_roles(layout, spec).items()}
    priors |= {name: spec.grader[name] for name in GRADER_RATES if name in post}
    return xr.Dataset(
        {
            name: post[name].copy(data=prior.distribution().logpdf(post[name].values))
            for name, prior in priors.items()
        }
    )
