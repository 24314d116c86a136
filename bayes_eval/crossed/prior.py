"""The crossed models' priors: draws of every quantity a fit's posterior holds, from the
spec's priors through the model (the ``prior`` group), and the log prior density of a
fit's draws of the spec's parameters (the ``log_prior`` group, for ``arviz_stats.psense``)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import xarray as xr

from bayes_eval.constants import AGENT, END_TO_END, MILESTONE, TASK
from bayes_eval.counts.grading import GRADER_RATES
from bayes_eval.crossed.design import Design
from bayes_eval.crossed.groups import covariate_group, estimates_group
from bayes_eval.crossed.linked import MILESTONE_SCALARS
from bayes_eval.crossed.model import (
    AGENT_TERM,
    GROUP,
    TASK_TERM,
    covariate_coords,
)
from bayes_eval.registry import model_of

__all__ = ["log_prior", "log_prior_of_fit", "prior_crossed", "prior_draws", "prior_of_fit"]

# The dims of the parameters over more than one value (the rest are scalars).
DIMS = {
    "difficulty_z": (TASK,),
    "difficulty": (TASK,),
    "milestone_difficulty_z": (TASK,),
    "milestone_difficulty": (TASK,),
    "agent_coefficient": (AGENT_TERM,),
    "task_coefficient": (TASK_TERM,),
    "group_z": (GROUP,),
    **{name: ("grader",) for name in GRADER_RATES},
}
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
    **{name: name for name in MILESTONE_SCALARS},
}


def prior_draws(post: xr.Dataset | None, design, spec, n_draws: int, seed: int) -> xr.Dataset:
    """``n_draws`` draws (one chain) from the prior of the model's variables, those of the
    posterior ``post`` where given: the parameters from ``prior_draw``, every rate from
    them as a fit draws it back, with no counts (a pair of failed milestone runs is
    blocked with the prior's ``blocked_share``)."""
    rng = np.random.default_rng(seed)
    entry = model_of(spec)
    truths = [entry.part("prior_draw")(design, spec, rng) for _ in range(n_draws)]
    sample = {"chain": [0], "draw": np.arange(n_draws)}
    stacked = {name: np.array([t[name] for t in truths])[None] for name in truths[0]}
    prior = xr.Dataset(
        {
            name: (("chain", "draw", *(f"{name}_dim",) * (v.ndim - 2)), v)
            for name, v in stacked.items()
        }
    )
    layout = design.layout
    unseen = dataclasses.replace(
        layout, k=np.zeros_like(layout.k), n=np.zeros_like(layout.n), clusters=None
    )
    if "cell_z" not in prior:  # a departure per rate run (per pair end to end, per milestone cell)
        rates_run = len(layout.pairs) if spec.kind == END_TO_END else layout.cell_pair.size
        z = rng.standard_normal((1, n_draws, rates_run))
        prior["cell_z"] = (("chain", "draw", "cell_z_dim"), z)
    unseen = dataclasses.replace(design, layout=unseen)
    rates = entry.part("draw_rates")(prior, unseen, spec, rng)
    # the rates on their rectangle, as draw_rates makes them (stacked as the posterior's
    # by the caller); the parameters on the posterior's dims
    names = list(rates) + [n for n in ROLES if n in prior] + list(DIMS)
    if post is not None:
        names = [n for n in post.data_vars if n in names]
    out = {name: rates[name] for name in names if name in rates}
    out.update(
        {
            name: (("chain", "draw", *DIMS.get(name, ())), prior[name].values)
            for name in names
            if name not in rates and name in prior
        }
    )
    coords = {AGENT: design.agents, TASK: layout.tasks, **covariate_coords(design)}
    if layout.grading is not None:
        coords["grader"] = layout.grading.graders
    coords = {d: v for d, v in coords.items() if any(d in dims for dims, _ in out.values())}
    if MILESTONE in out.get("p_milestone", ((),))[0]:
        coords[MILESTONE] = np.arange(1, out["p_milestone"][1].shape[-1] + 1)
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
    """A crossed spec on ``design`` before any sampling: a ``Posterior`` whose
    ``prior_groups`` draw its prior (it has no posterior draws)."""
    from bayes_eval.results.posterior import Derivation, Posterior

    groups = {
        "conjugate": estimates_group(design, spec, seed, "prior only (no sampling)"),
        "covariates": covariate_group(design),
    }
    derivation = Derivation(prior=functools.partial(prior_of_fit, design=design, spec=spec))
    return Posterior.build(
        groups, spec, evidence, level=spec.level, seed=seed, derivation=derivation
    )


def prior_of_fit(posterior, draws, n_draws, seed, *, design, spec):
    """``prior_draws`` as a fit's tree asks for them (``Derivation``)."""
    return prior_draws(draws, design, spec, n_draws, seed)


def log_prior_of_fit(posterior, draws, *, spec):
    """``log_prior`` as a fit's tree asks for it (``Derivation``)."""
    return log_prior(draws, spec)
