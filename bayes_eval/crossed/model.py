"""The crossed model: agents' abilities and tasks' difficulties on one logit scale.

Every agent ``a`` has an ability ``theta_a`` and every task ``t`` a difficulty ``b_t``,
both partially pooled (item-response style)::

    theta_a = ability_mean + x_a . beta_agent + ability_scale z_a
    b_t     = x_t . beta_task + group_scale u_(g(t)) + difficulty_scale z_t
    mu_at   = logistic(theta_a - b_t)

with ``z``, ``u`` standard normal (non-centred) and ``x`` the standardised covariates
(``bayes_eval.crossed.covariates``). The intercept sits in the ability alone, so the
difficulties average zero over a typical task. No (agent, task) is exactly additive: an
agent's rate on a task departs from ``mu_at`` as ``P_at ~ Beta(mu_at kappa, (1 - mu_at)
kappa)`` (``end_to_end`` kind), or, for milestone runs, each milestone's rate does,
``p_atm ~ Beta(mu_at kappa, (1 - mu_at) kappa)`` and ``P_at = prod_m p_atm``. Those rates
are marginalised (Beta-Binomial) and drawn back exactly, so NUTS sees the abilities,
difficulties and scales only. Where runs come in clusters, each cluster's rate varies
around its rate with one ``kappa_cluster`` (``bayes_eval.clusters``).

Every (agent, task) of the design gets draws of ``P``: a pair that was run from its
posterior, a pair never run from the same Beta without counts (a prediction), and a new
agent described by covariates alone from a fresh ability, ``ability_mean + x . beta_agent
+ ability_scale z`` with ``z`` drawn anew per posterior draw.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import numpy as np
from scipy import special

from bayes_eval.clusters import draw_log_rates, log_marginal
from bayes_eval.conjugate import log_beta_draws
from bayes_eval.constants import AGENT, END_TO_END, MILESTONE, SAMPLER_DEFAULTS, TASK
from bayes_eval.crossed.covariates import Covariates, predicted_agents, read_covariates
from bayes_eval.errors import InputError
from bayes_eval.hierarchical import (
    Form,
    Layout,
    _beta_binomial,
    _count_data,
    _layout,
    _structure,
    sample_until_diagnosed,
)

__all__ = [
    "Design",
    "build_model",
    "design_of",
    "draw_rates",
    "fit_crossed",
    "prior_draw",
    "simulate",
]

AGENT_TERM, TASK_TERM, GROUP = "agent_covariate", "task_covariate", "task_group"


@dataclass(frozen=True)
class Design:
    """The crossed design: the layout of the evidence, the covariates, and the agents
    predicted from covariates alone.

    ``pair_task`` indexes ``layout.tasks`` per pair; ``milestones`` is each task's number
    of milestones (the most any agent's runs have; 0 for the end-to-end kind).
    """

    layout: Layout
    covariates: Covariates
    pair_task: np.ndarray
    milestones: np.ndarray
    predicted: tuple = ()
    predicted_raw: np.ndarray | None = None

    @property
    def agents(self) -> list:
        """The fitted agents, then the predicted ones."""
        return [*self.layout.agents, *self.predicted]

    def observed(self) -> np.ndarray:
        """``(agents, tasks)``: whether the pair was run."""
        grid = np.zeros((len(self.agents), len(self.layout.tasks)), dtype=bool)
        grid[self.layout.pair_agent, self.pair_task] = True
        return grid


def design_of(by_pair, spec, evidence, side=None, predict=()) -> Design:
    """The design of ``by_pair``: its layout, the covariates ``spec`` names (from the side
    tables ``side``, ``{"agent": table, "task": table}``, or the evidence) and the new
    agents of ``predict`` (``name,column=value,...`` texts).

    Raises
    ------
    InputError
        A covariate that cannot be read (``read_covariates``), a bad prediction text, or a
        predicted agent named as a fitted one.
    """
    layout = _layout(by_pair, spec, evidence.clusters)
    covariates = read_covariates(spec.covariates, evidence, layout.agents, layout.tasks, side)
    names, raw = predicted_agents(predict, covariates)
    for name in names:
        if name in layout.agents:
            raise InputError(
                f"--predict-agent {name}: '{name}' is an agent of the evidence, predicted "
                "from its runs already; give the new agent another name"
            )
    pair_task = np.array([layout.tasks.index(t) for _, t in layout.pairs], dtype=np.int64)
    milestones = np.zeros(len(layout.tasks), dtype=np.int64)
    if spec.kind != END_TO_END:
        np.maximum.at(milestones, pair_task[layout.cell_pair], layout.cell_factor)
    return Design(layout, covariates, pair_task, milestones, tuple(names), raw)


def build_model(design: Design, spec):
    """The PyMC model of ``design`` (named dims ``agent``, ``task``, ``task_group``,
    ``agent_covariate``, ``task_covariate``)."""
    import pymc as pm
    import pytensor.tensor as pt

    layout, cov = design.layout, design.covariates
    coords = {
        AGENT: layout.agents,
        TASK: layout.tasks,
        AGENT_TERM: [t.text for t in cov.agent_terms],
        TASK_TERM: [t.text for t in cov.task_terms],
        GROUP: cov.groups,
    }
    priors = spec.priors
    with pm.Model(coords=coords) as model:
        ability = _normal(pm, "ability_mean", priors["ability_mean"]) + _scaled(
            pm, "ability", priors["ability_scale"], AGENT
        )
        if cov.agent_terms:
            beta = _normal(pm, "agent_coefficient", priors["coefficient"], AGENT_TERM)
            ability = ability + pt.dot(cov.agent_matrix, beta)
        difficulty = _scaled(pm, "difficulty", priors["difficulty_scale"], TASK)
        if cov.task_terms:
            beta = _normal(pm, "task_coefficient", priors["coefficient"], TASK_TERM)
            difficulty = difficulty + pt.dot(cov.task_matrix, beta)
        if cov.groups:
            group = _scaled(pm, "group", priors["group_scale"], GROUP)
            difficulty = difficulty + group[cov.task_group]
        ability = pm.Deterministic("ability", ability, dims=AGENT)
        difficulty = pm.Deterministic("difficulty", difficulty, dims=TASK)
        eta = ability[layout.pair_agent] - difficulty[design.pair_task]
        log_a, log_b = -pt.softplus(-eta), -pt.softplus(eta)  # log mu, log (1 - mu)
        role = "concentration" if spec.kind == END_TO_END else "milestone_concentration"
        log_kappa = pt.log(_lognormal(pm, "kappa", priors[role]))
        log_a, log_b = log_a + log_kappa, log_b + log_kappa
        if spec.kind != END_TO_END:  # the rates are the milestone cells
            log_a, log_b = log_a[layout.cell_pair], log_b[layout.cell_pair]
        if layout.clusters is not None:
            log_phi = pt.log(_lognormal(pm, "kappa_cluster", priors["cluster_concentration"]))
            log_phi = pt.ones_like(log_a) * log_phi
            total = log_marginal(
                pt, pt.gammaln, pt.logsumexp, log_a, log_b, log_phi, layout.clusters
            )
            pm.Potential("k_clusters", total)
        elif spec.kind == END_TO_END:
            k, f = _count_data(pm, "k_obs", layout.e2e_k, layout.e2e_n)
            rates = np.arange(len(layout.pairs))
            pm.Potential(
                "k_end_to_end",
                _beta_binomial(pt.exp(log_a), pt.exp(log_b), rates, k, f, layout.e2e_n),
            )
        else:
            k, f = _count_data(pm, "k_obs", layout.k, layout.n)
            cells = np.arange(layout.k.size)
            pm.Potential(
                "k_cell", _beta_binomial(pt.exp(log_a), pt.exp(log_b), cells, k, f, layout.n)
            )
    return model


def _normal(pm, name, prior, dims=None):
    return pm.Normal(name, mu=prior.params["mu"], sigma=prior.params["sigma"], dims=dims)


def _lognormal(pm, name, prior):
    return pm.LogNormal(name, mu=prior.params["mu"], sigma=prior.params["sigma"])


def _scaled(pm, name, prior, dims):
    """``{name}_scale * {name}_z`` over ``dims``: a non-centred normal effect."""
    scale = _lognormal(pm, f"{name}_scale", prior)
    return scale * pm.Normal(f"{name}_z", 0.0, 1.0, dims=dims)


# ---------------------------------------------------------------------------
# draws of every (agent, task)'s rate
# ---------------------------------------------------------------------------


def draw_rates(post, design: Design, spec, rng) -> dict:
    """``ability`` of every agent (the predicted ones drawn anew) and ``p_task`` (with
    ``p_milestone`` for milestone runs) of every (agent, task), per posterior draw."""
    layout, cov = design.layout, design.covariates
    ability = post["ability"].values
    if design.predicted:
        fresh = post["ability_mean"].values[..., None] + post["ability_scale"].values[
            ..., None
        ] * rng.standard_normal(ability.shape[:2] + (len(design.predicted),))
        if cov.agent_terms:
            x = cov.standard_agents(design.predicted_raw)
            fresh = fresh + post["agent_coefficient"].values @ x.T
        ability = np.concatenate([ability, fresh], axis=-1)
    eta = ability[..., :, None] - post["difficulty"].values[..., None, :]
    kappa = post["kappa"].values[..., None, None]
    tiny = np.finfo(float).tiny  # shapes of a rate whose mean rounds to 0 or 1
    a = np.maximum(special.expit(eta) * kappa, tiny)
    b = np.maximum(special.expit(-eta) * kappa, tiny)
    agents, tasks = layout.pair_agent, design.pair_task
    out = {"ability": (("chain", "draw", AGENT), ability)}
    if spec.kind == END_TO_END:
        k, f = np.zeros(a.shape[-2:]), np.zeros(a.shape[-2:])
        if layout.clusters is None:  # else the pairs' counts enter through their terms
            k[agents, tasks] = layout.e2e_k
            f[agents, tasks] = layout.e2e_n - layout.e2e_k
        log_p = log_beta_draws(a + k, b + f, (), rng)
        if layout.clusters is not None:
            pair_a, pair_b = a[..., agents, tasks], b[..., agents, tasks]
            log_p[..., agents, tasks] = _clustered(pair_a, pair_b, post, layout, rng)
        out["p_task"] = (("chain", "draw", AGENT, TASK), np.exp(log_p))
        return out
    width = int(design.milestones.max())
    shape = a.shape + (width,)
    k, f = np.zeros(shape[-3:]), np.zeros(shape[-3:])
    pair_of_cell = layout.cell_pair
    steps = layout.cell_factor - 1
    ca, ct = agents[pair_of_cell], tasks[pair_of_cell]
    if layout.clusters is None:
        k[ca, ct, steps] = layout.k
        f[ca, ct, steps] = layout.n - layout.k
    log_p = log_beta_draws(a[..., None] + k, b[..., None] + f, (), rng)
    if layout.clusters is not None:
        cell_a, cell_b = a[..., ca, ct], b[..., ca, ct]
        log_p[..., ca, ct, steps] = _clustered(cell_a, cell_b, post, layout, rng)
    # A pair that was run has the milestones it was run on; one never run, as many as
    # the task has (the most any agent was run on).
    ran = np.zeros(shape[-3:], dtype=bool)
    ran[ca, ct, steps] = True
    task_has = np.arange(width)[None, :] < design.milestones[:, None]  # (task, milestone)
    present = np.where(design.observed()[..., None], ran, task_has[None])
    log_p = np.where(present, log_p, np.nan)
    out["p_task"] = (("chain", "draw", AGENT, TASK), np.exp(np.nansum(log_p, axis=-1)))
    out["p_milestone"] = (("chain", "draw", AGENT, TASK, MILESTONE), np.exp(log_p))
    return out


def _clustered(a, b, post, layout, rng):
    """``log p`` of the clustered rates, each ``(chain, draw, rate)`` (``clusters``)."""
    phi = np.broadcast_to(post["kappa_cluster"].values[..., None], a.shape)
    flat = (x.reshape(-1, x.shape[-1]) for x in (a, b, phi))
    return draw_log_rates(*flat, layout.clusters, rng).reshape(a.shape)


# ---------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------


def fit_crossed(evidence, design: Design, spec, *, level, seed, sampler=None, log=sys.stderr):
    """Fit a crossed spec with MCMC: a ``Posterior`` over every (agent, task) of the
    design (``design_of``), with its covariates in the ``covariates`` group."""
    from bayes_eval.posterior import Posterior

    settings = {**SAMPLER_DEFAULTS, **spec.sampler, **(sampler or {})}
    layout, cov = design.layout, design.covariates

    def finish(draws):
        rates = draw_rates(draws, design, spec, np.random.default_rng(seed + 1))
        draws = draws.drop_vars("ability").drop_dims(AGENT, errors="ignore")
        draws = draws.assign_coords({AGENT: design.agents})
        draws = draws.assign(rates).assign_coords({TASK: layout.tasks})
        if MILESTONE in draws.dims:
            draws = draws.assign_coords({MILESTONE: np.arange(1, draws.sizes[MILESTONE] + 1)})
        return draws

    key = (*_structure(layout, spec), cov.agent_raw.tobytes(), cov.task_raw.tobytes())
    key += (cov.task_group.tobytes(),)
    empty = np.zeros(0, dtype=bool)
    groups, run_text = sample_until_diagnosed(
        lambda form: build_model(design, spec),  # one form: non-centred throughout
        finish,
        Form(empty, empty),
        settings,
        seed,
        log,
        key,
        cells=layout.n.size + layout.e2e_n.size,
    )
    if layout.clusters is not None:
        run_text += (
            f"; runs in {layout.clusters.cluster_rate.size} clusters, over-dispersed within "
            "a cluster (a Beta-Binomial per cluster, one kappa_cluster)"
        )
    groups["conjugate"] = _estimates(design, spec, seed, run_text)
    groups["covariates"] = covariate_group(design)
    return Posterior.build(groups, spec, evidence, level=level, seed=seed)


def _estimates(design: Design, spec, seed, run):
    """The ``conjugate`` group: method, provenance and ``observed`` per (agent, task),
    and the end-to-end counts behind the Clopper-Pearson bound of the pairs run."""
    import xarray as xr

    layout, cov = design.layout, design.covariates
    agents, tasks = design.agents, layout.tasks
    shape = (len(agents), len(tasks))
    observed = design.observed()
    priors = ", ".join(f"{role} {prior.label()}" for role, prior in spec.priors.items())
    head = f"{spec.name}; {spec.kind}/crossed; {priors}; {cov.describe()}; {run}; seed {seed}"
    provenance = np.full(shape, "", dtype=object)
    counts = np.full(shape + (2,), -1, dtype=np.int64)
    for p, (i, j) in enumerate(zip(layout.pair_agent, design.pair_task, strict=True)):
        if spec.kind == END_TO_END:
            counts[i, j] = (layout.e2e_k[p], layout.e2e_n[p])
    fitted = len(layout.agents)
    for i, agent in enumerate(agents):
        for j in range(len(tasks)):
            if observed[i, j]:
                provenance[i, j] = head
            elif i < fitted:
                provenance[i, j] = (
                    f"{head}; PREDICTION: never run; from the agent's ability on the tasks it "
                    "ran and the task's difficulty for the agents that ran it"
                )
            else:
                given = zip(cov.agent_terms, design.predicted_raw[i - fitted], strict=True)
                values = ", ".join(f"{term.text} {value:g}" for term, value in given)
                provenance[i, j] = (
                    f"{head}; PREDICTION: new agent '{agent}' described by its covariates "
                    f"alone ({values}), its ability drawn from the agents' trend"
                )
    pair = (AGENT, TASK)
    return xr.Dataset(
        {
            "method": (pair, np.full(shape, spec.kind)),
            "provenance": (pair, provenance.astype(str)),
            "reason": (pair, np.full(shape, "", dtype=str)),
            "point_log": (pair, np.full(shape, np.nan)),
            "cp_successes": (pair, counts[..., 0]),
            "cp_trials": (pair, counts[..., 1]),
            "observed": (pair, observed),
        },
        coords={AGENT: agents, TASK: tasks},
    )


def covariate_group(design: Design):
    """The ``covariates`` group: every agent's and task's covariate values on the terms'
    scale, how they were standardised, the task groups, and (attributes) the terms, the
    length term, the date terms, the predicted agents and where values came from."""
    import xarray as xr

    cov = design.covariates
    groups = cov.task_group if cov.groups else np.full(len(design.layout.tasks), -1)
    raw = cov.agent_raw
    if design.predicted:
        raw = np.concatenate([raw, design.predicted_raw], axis=0)
    data = xr.Dataset(
        {
            "agent_value": ((AGENT, AGENT_TERM), raw),
            "agent_centre": ((AGENT_TERM,), cov.agent_centre),
            "agent_scale": ((AGENT_TERM,), cov.agent_scale),
            "task_value": ((TASK, TASK_TERM), cov.task_raw),
            "task_centre": ((TASK_TERM,), cov.task_centre),
            "task_scale": ((TASK_TERM,), cov.task_scale),
            "task_group": ((TASK,), groups),
        },
        coords={
            AGENT: design.agents,
            TASK: design.layout.tasks,
            AGENT_TERM: [t.text for t in cov.agent_terms],
            TASK_TERM: [t.text for t in cov.task_terms],
        },
    )
    data.attrs = {
        "groups": json.dumps(cov.groups),
        "group_column": cov.group_column or "",
        "length": cov.length.text if cov.length else "",
        "agent_dates": json.dumps(list(cov.agent_dates)),
        "predicted": json.dumps(list(design.predicted)),
        "sources": json.dumps(cov.sources),
    }
    return data


# ---------------------------------------------------------------------------
# simulation from the prior (SBC)
# ---------------------------------------------------------------------------


def prior_draw(design: Design, spec, rng) -> dict:
    """One draw of every sampled parameter from the spec's priors, by model name."""
    cov, priors = design.covariates, spec.priors

    def draw(role, size=None):
        prior = priors[role]
        mu, sigma = prior.params["mu"], prior.params["sigma"]
        return (
            rng.lognormal(mu, sigma, size)
            if prior.dist == "LogNormal"
            else rng.normal(mu, sigma, size)
        )

    truth = {
        "ability_mean": draw("ability_mean"),
        "ability_scale": draw("ability_scale"),
        "ability_z": rng.standard_normal(len(design.layout.agents)),
        "difficulty_scale": draw("difficulty_scale"),
        "difficulty_z": rng.standard_normal(len(design.layout.tasks)),
        "kappa": draw("concentration" if spec.kind == END_TO_END else "milestone_concentration"),
    }
    if cov.agent_terms:
        truth["agent_coefficient"] = draw("coefficient", len(cov.agent_terms))
    if cov.task_terms:
        truth["task_coefficient"] = draw("coefficient", len(cov.task_terms))
    if cov.groups:
        truth["group_scale"] = draw("group_scale")
        truth["group_z"] = rng.standard_normal(len(cov.groups))
    if design.layout.clusters is not None:
        truth["kappa_cluster"] = draw("cluster_concentration")
    ability = truth["ability_mean"] + truth["ability_scale"] * truth["ability_z"]
    difficulty = truth["difficulty_scale"] * truth["difficulty_z"]
    if cov.agent_terms:
        ability = ability + cov.agent_matrix @ truth["agent_coefficient"]
    if cov.task_terms:
        difficulty = difficulty + cov.task_matrix @ truth["task_coefficient"]
    if cov.groups:
        difficulty = difficulty + truth["group_scale"] * truth["group_z"][cov.task_group]
    truth["ability"], truth["difficulty"] = ability, difficulty
    return truth


def simulate(truth: dict, design: Design, spec, rng):
    """Counts drawn generatively from ``truth`` on the design (the model's data, or the
    clusters' successes as ``k_cluster``) and the true ``P`` of every pair run."""
    from bayes_eval.hierarchical import count_data

    layout = design.layout
    eta = truth["ability"][layout.pair_agent] - truth["difficulty"][design.pair_task]
    mean = np.clip(special.expit(eta), 1e-12, 1 - 1e-12)
    kappa = truth["kappa"]
    if spec.kind == END_TO_END:
        log_p = log_beta_draws(mean * kappa, (1 - mean) * kappa, (), rng)
        p_task, trials = np.exp(log_p), layout.e2e_n
    else:
        cell_mean = mean[layout.cell_pair]
        log_p = log_beta_draws(cell_mean * kappa, (1 - cell_mean) * kappa, (), rng)
        p_task = np.exp(np.bincount(layout.cell_pair, log_p, minlength=len(layout.pairs)))
        trials = layout.n
    rate = np.exp(log_p)
    if layout.clusters is not None:
        terms = layout.clusters
        p = np.clip(rate[terms.cluster_rate], 1e-12, 1 - 1e-12)
        phi = truth["kappa_cluster"]
        q = np.exp(log_beta_draws(p * phi, (1 - p) * phi, (), rng))
        return {"k_cluster": rng.binomial(terms.cluster_trials, q)}, p_task
    return count_data("k_obs", rng.binomial(trials, rate), trials), p_task
