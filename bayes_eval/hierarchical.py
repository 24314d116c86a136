"""Partially pooled models on PyMC.

Mean/concentration parameterisation, ``p ~ Beta(mu kappa, (1 - mu) kappa)``. Where
the rates enter the likelihood only through their own counts they are marginalised
(``k ~ BetaBinomial(n, mu kappa, (1 - mu) kappa)``) and drawn back exactly for every
posterior draw, ``p | mu, kappa, k ~ Beta(mu kappa + k, (1 - mu) kappa + n - k)``, so
NUTS explores only the hyperparameters:

* ``end_to_end`` / ``tasks``: per agent ``mu``, ``kappa``; each task's ``P`` pooled.
* ``milestone`` / ``partial`` (the ``hierarchical`` spec): milestone rates pooled within
  a task around the task mean ``mu_task``; task means pooled across tasks around the
  agent's ``mu_agent`` with concentration ``kappa_agent``; ``P = prod p_m``.
* ``expert_completion`` / ``steps``: the same hierarchy over a run's steps; a task's
  ``P`` is the equal mixture over its runs of the product of their step rates.
* ``joint`` / ``partial``: the milestone hierarchy plus end-to-end counts
  ``k ~ Binomial(n, Q + (1 - Q) lambda)``, ``Q = prod p_m``, with a bypass probability
  ``lambda`` per task pooled across tasks (``mu_bypass``, ``kappa_bypass`` per agent).
  Here the milestone rates of a task also explain its end-to-end counts, so they are
  sampled, not marginalised; ``lambda`` is marginalised (a finite sum, see
  ``_joint_model``) and drawn back exactly; a task without end-to-end runs takes its
  ``lambda`` from the population.

Task means are sampled centred first; if that fit fails its diagnostics (the funnel of
a population whose tasks' data say little about their means), the model is refitted
with the same prior sampled non-centred, and the provenance says so.

PyMC and nutpie are imported only here, and only when a pooled model is fitted.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bayes_eval.conjugate import log_beta_draws
from bayes_eval.constants import (
    AGENT,
    COMPILE_CACHE_SIZE,
    END_TO_END,
    EXPERT_COMPLETION,
    MILESTONE,
    MILESTONE_METHOD,
    RUN,
    SAMPLER_DEFAULTS,
    STEP,
    TASK,
)

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["fit_pooled"]

ALL_DIMS = ("chain", "draw", AGENT, TASK)


@dataclass
class Layout:
    """The evidence of a pooled model as flat arrays.

    ``pairs`` are the (agent, task) estimated; ``pair_agent`` indexes ``agents``.
    Cells are milestone or step counts: ``cell_pair``, ``cell_run`` (0 for
    milestones), ``cell_factor`` (milestone or step number), ``k``, ``n``.
    End-to-end counts per pair are ``e2e_k``, ``e2e_n`` (``n = 0``: none).
    """

    agents: list
    tasks: list
    pairs: list
    pair_agent: np.ndarray
    cell_pair: np.ndarray
    cell_run: np.ndarray
    cell_factor: np.ndarray
    k: np.ndarray
    n: np.ndarray
    e2e_k: np.ndarray
    e2e_n: np.ndarray
    runs: list


def fit_pooled(evidence, by_pair, spec, *, level, seed, sampler=None, log=sys.stderr):
    """Fit a pooled spec with MCMC and return a ``Posterior`` carrying its draws.

    Parameters
    ----------
    evidence : Evidence
    by_pair : dict
        ``{(agent, task): {method: rows}}`` of the rows the model uses.
    spec : Spec
    level : float
    seed : int
    sampler : dict, optional
        Overrides of the spec's ``[sampler]`` (engine, draws, tune, chains,
        target_accept).
    log : file, optional
        Where progress lines go (stderr); None for silence.
    """
    from bayes_eval.posterior import Posterior

    settings = {**SAMPLER_DEFAULTS, **spec.sampler, **(sampler or {})}
    layout = _layout(by_pair, spec)
    build, key = BUILDERS[spec.kind], _structure(layout, spec)

    def run(model, key, **provenance):
        trace = _sample(model, settings, seed, log, key=key)
        draws = trace["posterior"].to_dataset()
        rates = _rates(draws, layout, spec, np.random.default_rng(seed + 1))
        draws = draws.assign(rates).assign_coords({TASK: layout.tasks})
        for dim, name in ((MILESTONE, "p_milestone"), (STEP, "p_step")):
            if name in draws:
                draws = draws.assign_coords({dim: np.arange(1, draws.sizes[dim] + 1)})
        if "p_step" in draws:
            draws = draws.assign_coords({RUN: np.arange(1, draws.sizes[RUN] + 1)})
        groups = {
            "posterior": draws,
            "sample_stats": trace["sample_stats"].to_dataset(),
            "conjugate": _estimates(layout, spec, seed, {**settings, **provenance}),
        }
        return Posterior.build(groups, spec, evidence, level=level, seed=seed)

    if spec.kind == "end_to_end":  # no task means
        return run(build(layout, spec), key)
    posterior = run(build(layout, spec), key, task_means="centred")
    failed = posterior.diagnostics.messages
    if not failed:
        return posterior
    if log is not None:
        print(
            f"sampling: the centred task means failed diagnostics ({failed[0]}); "
            "refitting them non-centred",
            file=log,
            flush=True,
        )
    return run(
        build(layout, spec, noncentred=True),
        (*key, "non-centred"),
        task_means=f"non-centred (centred failed: {'; '.join(failed)})",
    )


def _estimates(layout, spec, seed, engine) -> xr.Dataset:
    """The ``conjugate`` group of a pooled fit: method, provenance (model, priors, sampler)
    and the end-to-end counts behind the Clopper-Pearson bound, per (agent, task)."""
    import xarray as xr

    shape = (len(layout.agents), len(layout.tasks))
    method = np.full(shape, "", dtype=object)
    provenance = np.full(shape, "", dtype=object)
    priors = ", ".join(f"{role} {prior.label()}" for role, prior in spec.priors.items())
    run = (
        f"{engine['engine']} {engine['chains']} chains x {engine['draws']} draws "
        f"(tune {engine['tune']}, target_accept {engine['target_accept']:g}, seed {seed})"
    )
    if "task_means" in engine:
        run += f"; task means {engine['task_means']}"
    e2e = np.full(shape + (2,), -1, dtype=np.int64)
    for p, (agent, task) in enumerate(layout.pairs):
        i, j = layout.agents.index(agent), layout.tasks.index(task)
        method[i, j] = spec.kind
        provenance[i, j] = f"{spec.name}; {spec.kind}/{spec.pooling}; {priors}; {run}"
        if layout.e2e_n[p] > 0 and spec.kind in ("end_to_end", "joint"):
            e2e[i, j] = (layout.e2e_k[p], layout.e2e_n[p])
    pair = (AGENT, TASK)
    return xr.Dataset(
        {
            "method": (pair, method.astype(str)),
            "provenance": (pair, provenance.astype(str)),
            "reason": (pair, np.full(shape, "", dtype=str)),
            "point_log": (pair, np.full(shape, np.nan)),
            "cp_successes": (pair, e2e[..., 0]),
            "cp_trials": (pair, e2e[..., 1]),
        },
        coords={AGENT: layout.agents, TASK: layout.tasks},
    )


# ---------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------


def _layout(by_pair, spec) -> Layout:
    pairs = list(by_pair)
    agents = list(dict.fromkeys(a for a, _ in pairs))
    tasks = list(dict.fromkeys(t for _, t in pairs))
    cell_method = {
        "milestone": MILESTONE_METHOD,
        "expert_completion": EXPERT_COMPLETION,
        "joint": MILESTONE_METHOD,
    }.get(spec.kind)
    cells, e2e, runs = [], [], []
    for p, pair in enumerate(pairs):
        rows = by_pair[pair]
        run_names = []
        if cell_method is not None:
            table = rows[cell_method]
            run_names = sorted(set(table["run"])) if cell_method == EXPERT_COMPLETION else [""]
            for run, step, k, n in zip(
                table["run"], table["step"], table["successes"], table["trials"], strict=True
            ):
                cells.append((p, run_names.index(run) if run in run_names else 0, step, k, n))
        runs.append(run_names)
        if END_TO_END in rows:
            row = rows[END_TO_END].iloc[0]
            e2e.append((int(row["successes"]), int(row["trials"])))
        else:
            e2e.append((0, 0))
    cells = np.array(cells, dtype=np.int64).reshape(-1, 5)
    e2e = np.array(e2e, dtype=np.int64).reshape(-1, 2)
    return Layout(
        agents=agents,
        tasks=tasks,
        pairs=pairs,
        pair_agent=np.array([agents.index(a) for a, _ in pairs]),
        cell_pair=cells[:, 0],
        cell_run=cells[:, 1],
        cell_factor=cells[:, 2],
        k=cells[:, 3],
        n=cells[:, 4],
        e2e_k=e2e[:, 0],
        e2e_n=e2e[:, 1],
        runs=runs,
    )


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------


def _prior(pm, name, prior, dims):
    if prior.dist == "Beta":
        return pm.Beta(name, alpha=prior.alpha, beta=prior.beta, dims=dims)
    return pm.LogNormal(name, mu=prior.params["mu"], sigma=prior.params["sigma"], dims=dims)


def _coords(layout):
    return {
        AGENT: layout.agents,
        "pair": np.arange(len(layout.pairs)),
        "cell": np.arange(layout.k.size),
    }


def _end_to_end_model(layout, spec):
    import pymc as pm

    with pm.Model(coords=_coords(layout)) as model:
        mu = _prior(pm, "mu", spec.priors["mean"], AGENT)
        kappa = _prior(pm, "kappa", spec.priors["concentration"], AGENT)
        k = pm.Data("k_obs", layout.e2e_k, dims="pair")
        log_lik = _beta_binomial(mu * kappa, (1 - mu) * kappa, layout.pair_agent, k, layout.e2e_n)
        pm.Potential("k_end_to_end", log_lik)
    return model


def _task_hierarchy(pm, layout, spec, noncentred):
    """Agent-level mean of task means, task means, and the within-task concentration.

    ``mu_task ~ Beta(a, b)``, ``a = mu_agent kappa_agent``, ``b = (1 - mu_agent)
    kappa_agent``: centred, or exactly the same prior sampled non-centred through
    ``mu_task_z`` (``_noncentred_beta``). Centred suits tasks whose data pin their mean
    (milestones alike); where they say little about it (milestones unlike each other),
    ``logit mu_task`` and ``kappa_agent`` form a funnel (E-BFMI about 0.2, a biased
    ``kappa_agent``) that the non-centred form removes, at several times lower ESS in the
    first case.
    """
    import pytensor.tensor as pt

    agent = layout.pair_agent
    mu_agent = _prior(pm, "mu_agent", spec.priors["task_mean"], AGENT)
    kappa_agent = _prior(pm, "kappa_agent", spec.priors["task_concentration"], AGENT)
    a, b = (mu_agent * kappa_agent)[agent], ((1 - mu_agent) * kappa_agent)[agent]
    if noncentred:
        log_mu, log_density = _noncentred_beta(a, b, pm.Flat("mu_task_z", dims="pair"))
        pm.Potential("mu_task_prior", pt.sum(log_density))
        mu_task = pm.Deterministic("mu_task", pt.exp(log_mu), dims="pair")
    else:
        mu_task = pm.Beta("mu_task", alpha=a, beta=b, dims="pair")
    role = "step_concentration" if spec.kind == "expert_completion" else "milestone_concentration"
    kappa = _prior(pm, "kappa", spec.priors[role], AGENT)
    return mu_task, kappa


def _noncentred_beta(a, b, z):
    """``log p`` and the log density of ``z`` for ``p ~ Beta(a, b)`` written as
    ``logit p = log(a / b) + z sqrt(1 / a + 1 / b)``.

    The shift and scale are the Beta's logit mean and sd to first order, so ``z`` is
    about standard normal whatever ``a`` and ``b``; the density (Beta log-density plus
    ``log |dp / dz| = log p (1 - p) scale``) keeps ``p`` exactly Beta. Neither needs
    digamma or trigamma, whose gradients numba would run in object mode.
    """
    import pytensor.tensor as pt

    scale = pt.sqrt(1 / a + 1 / b)
    logit = pt.log(a) - pt.log(b) + scale * z
    log_p, log_1mp = -pt.softplus(-logit), -pt.softplus(logit)
    log_beta = pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(a + b)
    return log_p, a * log_p + b * log_1mp - log_beta + pt.log(scale)


def _hierarchy_model(layout, spec, noncentred=False):
    import pymc as pm

    with pm.Model(coords=_coords(layout)) as model:
        mu_task, kappa = _task_hierarchy(pm, layout, spec, noncentred)
        conc = kappa[layout.pair_agent]
        k = pm.Data("k_obs", layout.k, dims="cell")
        log_lik = _beta_binomial(
            mu_task * conc, (1 - mu_task) * conc, layout.cell_pair, k, layout.n
        )
        pm.Potential("k_cell", log_lik)
    return model


def _beta_binomial(alpha, beta, group, k, n):
    """``sum log BetaBinomial(k | n, alpha[group], beta[group])`` over the cells, without
    the binomial coefficients (constant in the parameters).

    ``log B(k + a, n - k + b) - log B(a, b)`` has two log-gamma terms that depend on
    the cell's successes; the others depend only on the group and the trials, so they
    are computed once per group (``B(a, b)``) and once per (group, trials) pair
    (``Gamma(n + a + b)``): two log-gamma terms per cell, and as many in the gradient,
    where ``pm.BetaBinomial`` has nine (it also recomputes the coefficients from the data).
    As there, a shape that underflows to 0 makes the log-likelihood ``-inf``.
    """
    import pytensor.tensor as pt
    from pymc.distributions.dist_math import check_parameters

    a, b = alpha[group], beta[group]
    per_cell = pt.gammaln(k + a) + pt.gammaln(n - k + b)
    per_group = pt.gammaln(alpha + beta) - pt.gammaln(alpha) - pt.gammaln(beta)
    (group_u, n_u), cells = np.unique(np.stack([group, n]), axis=1, return_counts=True)
    per_trials = cells * pt.gammaln(n_u + alpha[group_u] + beta[group_u])
    total = pt.sum(per_cell) + pt.sum(per_group[group]) - pt.sum(per_trials)
    return check_parameters(total, pt.all(alpha > 0), pt.all(beta > 0), msg="alpha, beta > 0")


def _joint_model(layout, spec, noncentred=False):
    """Milestone hierarchy plus end-to-end counts, with the bypass marginalised.

    With ``s = Q + (1 - Q) lambda`` and ``lambda ~ Beta(a, b)``, expanding ``s^k``
    binomially gives ``P(k | Q) = C(n, k) (1 - Q)^(n - k) sum_j C(k, j) Q^(k - j)
    (1 - Q)^j B(a + j, b + n - k) / B(a, b)``, j = 0..k: a finite sum, so NUTS never
    sees lambda (``_bypass`` draws it back exactly).
    """
    import pymc as pm
    import pytensor.tensor as pt

    cell_agent = layout.pair_agent[layout.cell_pair]
    with_e2e = np.flatnonzero(layout.e2e_n > 0)
    with pm.Model(coords=_coords(layout)) as model:
        mu_task, kappa = _task_hierarchy(pm, layout, spec, noncentred)
        mean, conc = mu_task[layout.cell_pair], kappa[cell_agent]
        p = pm.Beta("p_cell", alpha=mean * conc, beta=(1 - mean) * conc, dims="cell")
        pm.Binomial(
            "k_cell", n=layout.n, p=p, observed=pm.Data("k_obs", layout.k, dims="cell"), dims="cell"
        )
        log_q = pt.inc_subtensor(pt.zeros(len(layout.pairs))[layout.cell_pair], pt.log(p))
        mu_bypass = _prior(pm, "mu_bypass", spec.priors["bypass_mean"], AGENT)
        kappa_bypass = _prior(pm, "kappa_bypass", spec.priors["bypass_concentration"], AGENT)
        if with_e2e.size:
            agent = layout.pair_agent[with_e2e]
            a = (mu_bypass[agent] * kappa_bypass[agent])[:, None]
            b = ((1 - mu_bypass[agent]) * kappa_bypass[agent])[:, None]
            e2e_k = pm.Data("e2e_k", layout.e2e_k[with_e2e])
            n = layout.e2e_n[with_e2e][:, None]
            log_lik = _bypass_terms(
                pt, log_q[with_e2e][:, None], a, b, e2e_k[:, None], n, int(n.max()), logsumexp=True
            )
            pm.Potential("end_to_end", pt.sum(log_lik))
    return model


def _bypass_terms(xp, log_q, a, b, k, n, j_max, logsumexp):
    """``log`` of the terms j = 0..j_max of the marginal above (``-inf`` for j > k).

    ``xp`` is ``pytensor.tensor`` (in the model, where ``k`` is data that may change and
    ``j_max`` is the largest possible ``k``) or numpy (for the exact redraw); with
    ``logsumexp`` the terms are summed into ``log P(k | Q)`` per task.
    """
    from scipy import special

    gammaln = special.gammaln if xp is np else xp.gammaln
    j = np.arange(j_max + 1)[None, :]
    j_safe = xp.minimum(k, j)
    log_choose = gammaln(k + 1) - gammaln(j_safe + 1) - gammaln(k - j_safe + 1)
    log_1mq = xp.log1p(-xp.exp(log_q))

    def betaln(x, y):
        return gammaln(x) + gammaln(y) - gammaln(x + y)

    # Q^(k - j) is 1 at j = k even when Q underflows to 0 (0 * -inf would be NaN).
    q_power = xp.where(k - j_safe > 0, (k - j_safe) * log_q, 0.0)
    terms = log_choose + q_power + j_safe * log_1mq + betaln(a + j_safe, b + (n - k)) - betaln(a, b)
    terms = xp.where(k >= j, terms, -np.inf)
    if not logsumexp:
        return terms
    top = xp.max(terms, axis=1, keepdims=True)
    total = top[:, 0] + xp.log(xp.sum(xp.exp(terms - top), axis=1))
    log_binom = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    return log_binom[:, 0] + (n - k)[:, 0] * log_1mq[:, 0] + total


BUILDERS = {
    "end_to_end": _end_to_end_model,
    "milestone": _hierarchy_model,
    "expert_completion": _hierarchy_model,
    "joint": _joint_model,
}


# ---------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------


# nutpie models compiled in this process, by model structure (the counts are data), so
# that studies refitting one design to new counts compile once.
_COMPILED: dict = {}


def _structure(layout, spec) -> tuple:
    """Everything a compiled model depends on except the observed successes."""
    arrays = (layout.pair_agent, layout.cell_pair, layout.cell_run, layout.n, layout.e2e_n)
    return (
        spec.kind,
        spec.pooling,
        repr(sorted(spec.priors.items())),
        tuple(layout.agents),
        *(a.tobytes() for a in arrays),
    )


def _nutpie_model(model, key):
    """The compiled nutpie model of ``model``, from the cache when its structure matches,
    with ``model``'s data in place."""
    import nutpie

    if key not in _COMPILED:
        if len(_COMPILED) >= COMPILE_CACHE_SIZE:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[key] = nutpie.compile_pymc_model(model)
    return _COMPILED[key].with_data(**{v.name: v.get_value() for v in model.data_vars})


def _sample(model, settings, seed, log, key):
    engine = settings["engine"]
    draws, tune, chains = int(settings["draws"]), int(settings["tune"]), int(settings["chains"])
    target = float(settings["target_accept"])
    if log is not None:
        print(
            f"sampling: {engine}, {chains} chains x ({tune} tune + {draws} draws), "
            f"target_accept {target:g} ...",
            file=log,
            flush=True,
        )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if engine == "nutpie":
            import nutpie

            trace = nutpie.sample(
                _nutpie_model(model, key),
                draws=draws,
                tune=tune,
                chains=chains,
                seed=seed,
                # nutpie's terminal bar (indicatif) draws on stderr, and only on a terminal
                progress_bar=log is not None,
                target_accept=target,
            )
        else:
            import pymc as pm

            trace = pm.sample(
                draws=draws,
                nuts_sampler="pymc",  # PyMC 6 would otherwise choose nutpie itself
                tune=tune,
                chains=chains,
                cores=1,
                random_seed=seed,
                target_accept=target,
                model=model,
                progressbar=False,
                compute_convergence_checks=False,
            )
    if log is not None:
        print(f"sampling: done in {time.perf_counter() - start:.1f} s", file=log, flush=True)
    return trace


# ---------------------------------------------------------------------------
# exact draws of the rates given each posterior draw
# ---------------------------------------------------------------------------


def _rates(post, layout, spec, rng) -> dict:
    """``p_task`` and the per-milestone or per-step rates, per posterior draw."""
    chains, draws = post.sizes["chain"], post.sizes["draw"]
    shape = (chains, draws)
    agents, tasks = layout.agents, layout.tasks
    grid = np.full(shape + (len(agents), len(tasks)), np.nan)
    where = [(agents.index(a), tasks.index(t)) for a, t in layout.pairs]
    # failures are counted before they are added: (tiny + n) - k rounds to 0 when k = n
    if spec.kind == "end_to_end":
        mu = post["mu"].values[..., layout.pair_agent]
        kappa = post["kappa"].values[..., layout.pair_agent]
        p = rng.beta(mu * kappa + layout.e2e_k, (1 - mu) * kappa + (layout.e2e_n - layout.e2e_k))
        return {"p_task": (ALL_DIMS, _gridded(grid, where, p))}
    if spec.kind == "joint":
        cell_p = post["p_cell"].values
        with np.errstate(divide="ignore"):  # a sampled rate may underflow to 0
            log_p = np.log(cell_p)
    else:
        mean = post["mu_task"].values[..., layout.cell_pair]
        conc = post["kappa"].values[..., layout.pair_agent[layout.cell_pair]]
        # drawn in log space: rates far below 1e-300 must not underflow to log 0
        log_p = log_beta_draws(
            mean * conc + layout.k, (1 - mean) * conc + (layout.n - layout.k), (), rng
        )
        cell_p = np.exp(log_p)
    n_runs = max(len(r) for r in layout.runs)
    n_factors = int(layout.cell_factor.max())
    factor = np.full(shape + (len(agents), len(tasks), n_runs, n_factors), np.nan)
    pair_i = np.array([w[0] for w in where])[layout.cell_pair]
    pair_j = np.array([w[1] for w in where])[layout.cell_pair]
    factor[:, :, pair_i, pair_j, layout.cell_run, layout.cell_factor - 1] = cell_p
    log_q = mixture_log_product(log_p, layout, rng)
    p_task = np.exp(log_q)
    out = {}
    if spec.kind == "joint":
        bypass = _bypass(post, layout, rng, shape, log_q)
        out["bypass_task"] = (ALL_DIMS, _gridded(np.full_like(grid, np.nan), where, bypass))
        p_task = p_task + (1 - p_task) * bypass
    out["p_task"] = (ALL_DIMS, _gridded(grid, where, p_task))
    if spec.kind == "expert_completion":
        out["p_step"] = (ALL_DIMS + (RUN, STEP), factor)
    else:
        out["p_milestone"] = (ALL_DIMS + (MILESTONE,), factor[..., 0, :])
    return out


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


def _bypass(post, layout, rng, shape, log_q):
    """Exact draws of each task's bypass probability, per posterior draw.

    Without end-to-end runs: from the population, ``Beta(mu kappa, (1 - mu) kappa)``.
    With them: from its posterior given ``Q``, the mixture over j = 0..k of
    ``Beta(a + j, b + n - k)`` weighted by the terms of the marginal likelihood.
    """
    agent = layout.pair_agent
    a = post["mu_bypass"].values[..., agent] * post["kappa_bypass"].values[..., agent]
    b = post["kappa_bypass"].values[..., agent] - a
    bypass = rng.beta(a, b)
    for p in np.flatnonzero(layout.e2e_n > 0):
        k, n = layout.e2e_k[p], layout.e2e_n[p]
        ap, bp = a[..., p].reshape(-1, 1), b[..., p].reshape(-1, 1)
        with np.errstate(invalid="ignore"):  # 0 * -inf where Q underflows; masked inside
            terms = _bypass_terms(
                np,
                log_q[..., p].reshape(-1, 1),
                ap,
                bp,
                np.array([[k]]),
                np.array([[n]]),
                k,
                logsumexp=False,
            )
        weights = np.exp(terms - terms.max(axis=1, keepdims=True))
        cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
        j = (rng.random((ap.shape[0], 1)) > cumulative).sum(axis=1)
        bypass[..., p] = rng.beta(ap[:, 0] + j, bp[:, 0] + (n - k)).reshape(shape)
    return bypass
