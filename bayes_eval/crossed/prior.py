"""The crossed models' priors: draws of every quantity a fit's posterior holds, from the
spec's priors through the model (the ``prior`` group), and the log prior density of a
fit's draws of the spec's parameters (the ``log_prior`` group, for ``arviz_stats.psense``)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import xarray as xr

from bayes_eval.constants import (
    AGENT,
    DISCRIMINATION_SCALE,
    LENGTH_ERROR,
    MILESTONE,
    SURPRISE_SHARE,
    SURPRISE_WIDTH,
    TASK,
)
from bayes_eval.counts.grading import GRADER_RATES
from bayes_eval.crossed.design import Design
from bayes_eval.crossed.groups import covariate_group, estimates_group
from bayes_eval.crossed.linked import MILESTONE_SCALARS
from bayes_eval.crossed.model import covariate_coords
from bayes_eval.registry import model_of

__all__ = [
    "graph_draws",
    "log_prior",
    "log_prior_of_fit",
    "prior_crossed",
    "prior_draws",
    "prior_of_fit",
]

# The variables a prior group keeps besides the rates and the parameters of ``ROLES``.
KEPT = (
    "difficulty_z",
    "difficulty",
    "milestone_difficulty_z",
    "milestone_difficulty",
    "agent_coefficient",
    "task_coefficient",
    "group_z",
    "discrimination",
    *GRADER_RATES,
)
# The prior role of each parameter the crossed models sample.
ROLES = {
    "ability_mean": "ability_mean",
    "ability_scale": "ability_scale",
    "difficulty_scale": "difficulty_scale",
    "cell_scale": "cell_scale",
    "agent_coefficient": "coefficient",
    "task_coefficient": "coefficient",
    "group_scale": "group_scale",
    "kappa_cluster": "cluster_concentration",
    "blocked_share": "blocked_share",
    DISCRIMINATION_SCALE: DISCRIMINATION_SCALE,
    LENGTH_ERROR: LENGTH_ERROR,
    SURPRISE_SHARE: SURPRISE_SHARE,
    SURPRISE_WIDTH: SURPRISE_WIDTH,
    **{name: name for name in MILESTONE_SCALARS},
}


def graph_draws(design, spec, n_draws: int, rng) -> dict:
    """``n_draws`` draws of every variable the model of ``design`` samples or derives (the
    abilities, difficulties, milestone competences), forward through the model's own graph
    (``pm.draw``): its prior as the fitted model states it, each as ``(dims, values)``, its
    dims the model's after ``draw``. A grader's rates are drawn before its audit (the
    audit is their data, not their prior)."""
    import pymc as pm

    model = model_of(spec).build()(design, spec)
    variables = model.free_RVs + model.deterministics
    values = pm.draw(variables, draws=n_draws, random_seed=rng)
    if n_draws == 1:
        values = [v[None] for v in values]
    dims = model.named_vars_to_dims
    return {
        v.name: (("draw", *dims.get(v.name, ())), np.asarray(x))
        for v, x in zip(variables, values, strict=True)
    }


def prior_draws(post: xr.Dataset | None, design, spec, n_draws: int, seed: int) -> xr.Dataset:
    """``n_draws`` draws (one chain) from the prior of the model's variables, those of the
    posterior ``post`` where given: the parameters from the model's graph
    (``graph_draws``), every rate from them as a fit draws it back, with no counts (a pair
    of failed milestone runs is blocked with the prior's ``blocked_share``)."""
    rng = np.random.default_rng(seed)
    drawn = graph_draws(design, spec, n_draws, rng)
    prior = xr.Dataset({name: (("chain", *dims), v[None]) for name, (dims, v) in drawn.items()})
    layout = design.layout
    unseen = dataclasses.replace(
        layout, k=np.zeros_like(layout.k), n=np.zeros_like(layout.n), clusters=None
    )
    unseen = dataclasses.replace(design, layout=unseen)
    rates = model_of(spec).part("draw_rates")(prior, unseen, spec, rng)
    # the rates on their rectangle, as draw_rates makes them (stacked as the posterior's
    # by the caller); the parameters on the model's dims
    names = list(rates) + [n for n in (*ROLES, *KEPT) if n in prior]
    if post is not None:
        names = [n for n in post.data_vars if n in names]
    out = {name: rates[name] for name in names if name in rates}
    out.update({name: prior[name].variable for name in names if name not in rates})
    coords = {AGENT: design.agents, TASK: layout.tasks, **covariate_coords(design)}
    if layout.grading is not None:
        coords["grader"] = layout.grading.graders
    used = {d for value in out.values() for d in getattr(value, "dims", value[0])}
    coords = {d: v for d, v in coords.items() if d in used}
    if MILESTONE in out.get("p_milestone", ((),))[0]:
        coords[MILESTONE] = np.arange(1, out["p_milestone"][1].shape[-1] + 1)
    sample = {"chain": [0], "draw": np.arange(n_draws)}
    return xr.Dataset(out, coords={**coords, **sample})


def log_prior(post: xr.Dataset, spec) -> xr.Dataset:
    """The log density of each posterior draw of the parameters under the spec's priors,
    one variable per parameter (a grader's sensitivity and specificity under its
    ``[grader]`` priors): what ``arviz_stats.psense`` power-scales. (Abilities,
    difficulties and departures are the model's populations, left unscaled.)"""
    priors = {name: spec.priors[role] for name, role in ROLES.items() if name in post}
    priors |= {name: spec.grader[name] for name in GRADER_RATES if name in post}
    return xr.Dataset(
        {
            name: post[name].copy(data=prior.distribution().logpdf(post[name].values))
            for name, prior in priors.items()
        }
    )


def prior_crossed(evidence, design: Design, spec, *, seed):
    """A crossed spec on ``design`` before any sampling: a ``ModelPrior`` whose
    ``prior_groups`` draw its prior (it has no posterior draws)."""
    from bayes_eval.results.fits import ModelPrior
    from bayes_eval.results.posterior import Derivation

    groups = {
        "conjugate": estimates_group(design, spec, seed, "prior only (no sampling)"),
        "covariates": covariate_group(design),
    }
    derivation = Derivation(prior=functools.partial(prior_of_fit, design=design, spec=spec))
    return ModelPrior.build(
        groups, spec, evidence, level=spec.level, seed=seed, derivation=derivation
    )


def prior_of_fit(posterior, draws, n_draws, seed, *, design, spec):
    """``prior_draws`` as a fit's tree asks for them (``Derivation``)."""
    return prior_draws(draws, design, spec, n_draws, seed)


def log_prior_of_fit(posterior, draws, *, spec):
    """``log_prior`` as a fit's tree asks for it (``Derivation``)."""
    return log_prior(draws, spec)
