"""Fit a pooled spec: sample its model until it passes its diagnostics, draw its rates back,
and return a ``Posterior``.

Each task mean (and, in ``joint``, each milestone rate) is sampled in the form
``bayes_eval.counts.layout.choose_form`` picks. If the fit fails its diagnostics, it is
refitted (``bayes_eval.inference.retry``); the best fit by its diagnostics is kept, and the
provenance names every attempt and which one was kept and why.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from bayes_eval.constants import (
    AGENT,
    END_TO_END,
    MILESTONE,
    RUN,
    STEP,
    TASK,
)
from bayes_eval.counts.grading import grader_provenance, with_graders
from bayes_eval.counts.layout import choose_form, layout_of, model_structure
from bayes_eval.inference.retry import sample_until_diagnosed
from bayes_eval.pooled.likelihood import log_likelihood
from bayes_eval.pooled.prior import log_prior, prior_draws
from bayes_eval.pooled.rates import by_agent_and_task, pooled_rates
from bayes_eval.registry import model_of
from bayes_eval.settings import stream_rng

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["derivation_of_fit", "fit_pooled", "prior_pooled"]


def fit_pooled(evidence, by_pair, spec, options):
    """Fit a pooled spec with MCMC and return a ``Posterior`` carrying its draws.

    Parameters
    ----------
    evidence : Evidence
    by_pair : dict
        ``{(agent, task): {method: rows}}`` of the rows the model uses.
    spec : Spec
    options : FitOptions
        The level, seed and sampler settings (the spec's, with the fit's overrides in
        place: ``fit``); progress goes to ``bayes_eval.progress``.
    """
    from bayes_eval.results.fits import McmcPosterior

    level, seed, sampler = options.level, options.seed, options.sampler

    layout = layout_of(evidence, by_pair, spec)
    build = model_of(spec).build(clustered=layout.clusters is not None)
    derivation = _derivation(layout, spec, seed)

    def finish(kept):
        return kept, derivation.rates(kept)

    groups, run_text, diagnostics = sample_until_diagnosed(
        lambda form: build(layout, spec, form),
        finish,
        choose_form(layout, spec),
        sampler,
        seed,
        model_structure(layout, spec),
        cells=layout.n.size + layout.e2e_n.size,
    )
    if layout.clusters is not None:
        run_text += (
            f"; runs in {layout.clusters.cluster_rate.size} clusters, over-dispersed within "
            "a cluster (a Beta-Binomial per cluster, kappa_cluster per agent)"
        )
    draws = groups.pop("draws")
    groups["conjugate"] = _estimates(layout, spec, seed, run_text)
    return McmcPosterior.build(
        groups,
        spec,
        evidence,
        level=level,
        seed=seed,
        derivation=derivation,
        draws=draws,
        diagnostics=diagnostics,
    )


def derivation_of_fit(evidence, by_pair, spec, seed):
    """The ``Derivation`` of a pooled fit read from a file: its layout made again from the
    rows it used (``by_pair``), as the fit made it."""
    return _derivation(layout_of(evidence, by_pair, spec), spec, seed)


def _derivation(layout, spec, seed):
    """How a pooled fit's groups follow from its kept draws (partials, not lambdas: a
    sweep's workers send the posterior back pickled)."""
    from bayes_eval.results.posterior import Derivation

    return Derivation(
        rates=functools.partial(_rates, layout=layout, spec=spec, seed=seed),
        log_likelihood=functools.partial(log_likelihood, layout=layout, spec=spec),
        prior=functools.partial(_prior, layout=layout, spec=spec),
        log_prior=functools.partial(_log_prior, layout=layout, spec=spec),
    )


def _rates(kept, *, layout, spec, seed):
    """The ``posterior`` group of a pooled fit from its kept draws: the rates drawn back
    (the ``rates`` stream of ``seed``), on the agents' and tasks' coordinates."""
    from bayes_eval.results.factors import stack_factor_rates

    rates = pooled_rates(kept, layout, spec, stream_rng(seed, "rates"))
    draws = kept.assign(rates).assign_coords({TASK: layout.tasks, **_labels(layout, kept)})
    for dim, name in ((MILESTONE, "p_milestone"), (STEP, "p_step")):
        if name in draws:
            draws = draws.assign_coords({dim: np.arange(1, draws.sizes[dim] + 1)})
    if "p_step" in draws:
        draws = draws.assign_coords({RUN: np.arange(1, draws.sizes[RUN] + 1)})
    if "mu_task" in draws:  # on the agent and task it belongs to, for .sel(agent, task)
        values = by_agent_and_task(draws["mu_task"].values, layout)
        if "mu_task_unrun" in draws:  # the pairs never run, predicted
            unrun = draws["mu_task_unrun"].values
            values = np.where(np.isnan(values), unrun, values)
        draws = draws.drop_vars(["mu_task", "pair", "mu_task_unrun"], errors="ignore")
        draws["mu_task"] = (("chain", "draw", AGENT, TASK), values)
    return stack_factor_rates(draws)


def prior_pooled(evidence, by_pair, spec, *, seed):
    """A pooled spec on the evidence's design before any sampling: a ``ModelPrior`` whose
    ``prior_groups`` draw its prior (it has no posterior draws)."""
    from bayes_eval.results.fits import ModelPrior
    from bayes_eval.results.posterior import Derivation

    layout = layout_of(evidence, by_pair, spec)
    groups = {"conjugate": _estimates(layout, spec, seed, "prior only (no sampling)")}
    derivation = Derivation(prior=functools.partial(_prior, layout=layout, spec=spec))
    return ModelPrior.build(
        groups, spec, evidence, level=spec.level, seed=seed, derivation=derivation
    )


def _prior(posterior, draws, n_draws, seed, *, layout, spec):
    """``prior_draws`` as a fit's tree asks for them (``Derivation``)."""
    return prior_draws(layout, spec, n_draws, seed)


def _log_prior(posterior, draws, *, layout, spec):
    """``log_prior`` as a fit's tree asks for it (``Derivation``)."""
    return log_prior(draws, layout, spec)


def _labels(layout, draws) -> dict:
    """Names for the pooled models' index dimensions, as the diagnostics show them:
    ``agent, task`` for a pair, ``agent, task, milestone m`` for a sampled cell; on
    ``pair`` and ``sampled_cell`` and on the dims of the variables sampled over part of
    them (``mu_task_logit_pair``)."""

    def cell(c):
        agent, task = layout.pairs[layout.cell_pair[c]]
        return f"{agent}, {task}, milestone {layout.cell_factor[c]}"

    def pair(p):
        return ", ".join(layout.pairs[p])

    name = {"pair": pair, "sampled_cell": cell}
    labels = {}
    for dim in draws.dims:
        base = next((b for b in name if dim == b or dim.endswith(f"_{b}")), None)
        if base is not None:
            labels[dim] = [name[base](int(i)) for i in draws[dim].values]
    return labels


def _estimates(layout, spec, seed, run) -> xr.Dataset:
    """The ``conjugate`` group of a pooled fit: method, provenance (model, priors, sampler)
    and the end-to-end counts behind the Clopper-Pearson bound, per (agent, task)."""
    import xarray as xr

    shape = (len(layout.agents), len(layout.tasks))
    method = np.full(shape, "", dtype=object)
    provenance = np.full(shape, "", dtype=object)
    priors = ", ".join(f"{role} {prior.label()}" for role, prior in spec.priors.items())
    run = f"{run}; seed {seed}"
    e2e = np.full(shape + (2,), -1, dtype=np.int64)
    graders = {} if layout.grading is None else grader_provenance(layout.grading, spec, layout)
    for p, (agent, task) in enumerate(layout.pairs):
        i, j = layout.agents.index(agent), layout.tasks.index(task)
        method[i, j] = spec.kind
        provenance[i, j] = f"{spec.name}; {spec.kind}/{spec.pooling}; {priors}; {run}"
        provenance[i, j] += graders.get(p, "")
        if layout.e2e_n[p] > 0 and END_TO_END in model_of(spec).uses:
            e2e[i, j] = (layout.e2e_k[p], layout.e2e_n[p])
    pair = (AGENT, TASK)
    conjugate = xr.Dataset(
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
    if layout.grading is None:
        return conjugate
    return with_graders(conjugate, layout.grading, layout, spec)
