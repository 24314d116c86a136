"""The linked crossed model: milestone runs and end-to-end runs of agents x tasks in one
model, the end-to-end rate linked to the milestones by a learned slope.

Guided (milestone) runs and unguided (end-to-end) runs of the same pairs measure two
different things: the chance of passing each subtask when told what it is, and the chance
of solving the whole task alone, by the subtasks' path or by any other. Multiplying the
subtask rates gives the second only where the path is the only one and the guidance
changes nothing; on agentic benchmarks neither holds (most unguided successes come from
pairs whose guided run failed a subtask). This model does not multiply. Each pair has a
*milestone competence*, ``omega_at``, that its guided runs measure, and its end-to-end
rate rises with it by a slope the data set, ``link``::

    omega_at    = milestone_ability_scale y_a - milestone_difficulty_scale x_t
                  + pair_scale u_at
    logit p_atm = milestone_mean + omega_at - step_scale s_tm  (+ milestone_cell_scale e_atm)
    logit P_at  = theta_a - b_t + link omega_at + cell_scale e_at

``theta_a`` and ``b_t`` are the crossed model's abilities and difficulties (covariates and
task groups included), here the part of the end-to-end rate the milestones do not explain:
the bypass, on the logit scale. ``u_at``, ``s_tm``, ``e`` are standard normal, ``y_a``
and ``x_t`` zero-sum normal: the milestone intercept sits in ``milestone_mean`` alone
(with free ``y_a``, well-measured milestone abilities met ``milestone_mean`` on a ridge,
R-hat 1.013 at the defaults on a simulated capture-the-flag table). ``s_tm`` is each
subtask's own difficulty; ``u_at`` how much better or worse the agent does on the task's
subtasks than its ability and the task's difficulty say, shared by all the pair's
subtasks and carried into its end-to-end rate.
With ``link = 0`` the end-to-end part is the ``crossed`` model; the milestones then say
nothing of it.

A milestone cell with one trial has no departure of its own (``e_atm``): one Bernoulli
trial cannot tell a departure from the rest of its log-odds, and its rate is the
departures' average. A cell with more trials has one, sampled non-centred. Every sampled
quantity is non-centred but the abilities and difficulties, whose form the crossed model
chooses (``bayes_eval.crossed.model``), and the milestone abilities of a few agents each
well measured on milestones, sampled centred (``centred_milestone_abilities``); the
provenance names the form (``form_text``).

Every (agent, task) of the design gets draws of ``P``: a pair run on milestones from its
sampled ``u_at``, a pair run end to end from its sampled ``e_at``, and anything never run
from fresh draws of its population, so a pair with guided runs alone is predicted from
them, and a pair never run at all as ``crossed`` predicts it. A new agent described by
covariates gets a fresh ability and a fresh milestone ability.

Its pointwise log-likelihood (``log_likelihood``, for ArviZ's ``loo`` and ``compare``)
is of whole pairs: a pair's guided and unguided runs share ``u_at``, so its unit is the
pair, as ``crossed_milestones``'s is. ``runs``, over a ``pair`` dimension, is the log
probability of all of a pair's counts given the draw of everything the pairs share,
``u_at``, ``e_at`` and the cells' departures integrated out
(``bayes_eval.crossed.linked_likelihood``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from bayes_eval.constants import AGENT, CENTRED_MARGIN, TASK
from bayes_eval.counts.data import count_data, count_data_vars
from bayes_eval.crossed.design import Design
from bayes_eval.crossed.linked_likelihood import pair_log_likelihood
from bayes_eval.crossed.model import (
    CENTRED,
    NON_CENTRED,
    RATE,
    abilities_and_difficulties,
    every_ability,
    information,
    structure_coords,
)
from bayes_eval.errors import InputError
from bayes_eval.registry import LINKED_PRIORS
from bayes_eval.results.predictive import pair_coords

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "LATENT",
    "LATENT_DIMS",
    "MILESTONE_SCALARS",
    "build_model",
    "centred_milestone_abilities",
    "draw_rates",
    "form_text",
    "log_likelihood",
    "redrawn_departures",
    "simulate",
    "steps_of",
]

PAIR, STEP, SEVERAL = "linked_pair", "step", "milestone_rate"
# what a fit drops once its rates are drawn (its subtasks' step_z stay: the pointwise
# log-likelihood reads them)
LATENT = ("ability", "cell_z", "pair_z", "milestone_z", "milestone_ability_z")
LATENT_DIMS = (AGENT, RATE, CENTRED, NON_CENTRED, PAIR, SEVERAL)
# The scalars of the milestone side, each with its prior role of the same name.
MILESTONE_SCALARS = LINKED_PRIORS
# Fewer agents than this, each well measured on milestones, have their milestone
# abilities sampled centred (``centred_milestone_abilities``).
FEW_AGENTS = 4


def steps_of(design: Design) -> tuple[np.ndarray, list[str]]:
    """Each milestone cell's subtask (its task's milestone number, one index per (task,
    milestone) of the design) and the subtasks' names, ``"task / milestone"``."""
    layout = design.layout
    width = max(int(design.milestones.max(initial=0)), 1)
    slot = design.pair_task[layout.cell_pair] * width + layout.cell_factor - 1
    slots, index = np.unique(slot, return_inverse=True)
    names = [f"{layout.tasks[s // width]} / {s % width + 1}" for s in slots]
    return index.astype(np.int64), names


def centred_milestone_abilities(design: Design, spec) -> bool:
    """Whether to sample the milestone abilities centred: where the agents are few and
    each one's milestone runs say more of its milestone ability than its population does
    (``CENTRED_MARGIN`` times ``1 / milestone_ability_scale ** 2`` at the scale's prior
    median; an agent's runs read as ``centred_abilities`` reads them).

    With few agents the abilities' scale is barely learnt, its posterior nearly its
    prior, and non-centred abilities pinch where the scale is large: the shipped pooled
    example's two agents, 50 trials per milestone cell, diverged there. With many (a
    1,000-pair table of 20 agents) the scale is learnt and centred abilities, sampled
    there, failed their first fit; a few agents with few runs leave their abilities to
    the population, and stay non-centred.
    """
    layout = design.layout
    if len(layout.agents) >= FEW_AGENTS:
        return False
    scale = np.exp(spec.priors["milestone_ability_scale"].params["mu"])
    carried = information(layout, spec, layout.pair_agent, len(layout.agents), milestones=True)
    return bool((carried >= CENTRED_MARGIN / scale**2).all())


def form_text(design: Design, spec) -> str:
    """How the parts sampled besides the abilities and difficulties are, for the
    provenance."""
    form = "centred" if centred_milestone_abilities(design, spec) else "non-centred"
    return f"milestone abilities zero-sum {form}; departures non-centred"


def build_model(design: Design, spec):
    """The PyMC model of ``design`` (the module's form)."""
    import pymc as pm
    import pytensor.tensor as pt

    layout, priors = design.layout, spec.priors
    ran, several = layout.e2e_n > 0, layout.n > 1
    if not layout.k.size or not ran.any():
        missing, use = (
            ("milestone", "crossed") if ran.any() else ("end_to_end", "crossed_milestones")
        )
        raise InputError(
            f"model {spec.name}: the table has no {missing} rows, and this model learns how "
            f"end-to-end runs follow milestone runs from pairs with both; use {use}"
        )
    step, subtasks = steps_of(design)
    coords = structure_coords(design)
    coords.update(
        {
            RATE: np.flatnonzero(ran),
            PAIR: np.arange(len(layout.pairs)),
            STEP: subtasks,
            SEVERAL: np.flatnonzero(several),
        }
    )
    with pm.Model(coords=coords) as model:
        ability, difficulty = abilities_and_difficulties(pm, pt, design, spec)
        scalar = {
            name: pm.Normal(name, **priors[name].params)
            if priors[name].dist == "Normal"
            else pm.LogNormal(name, **priors[name].params)
            for name in MILESTONE_SCALARS
        }
        if centred_milestone_abilities(design, spec):
            own = pm.ZeroSumNormal(
                "milestone_ability", sigma=scalar["milestone_ability_scale"], dims=AGENT
            )
        else:
            own = scalar["milestone_ability_scale"] * pm.ZeroSumNormal(
                "milestone_ability_z", sigma=1.0, dims=AGENT
            )
            pm.Deterministic("milestone_ability", own, dims=AGENT)
        hard = scalar["milestone_difficulty_scale"] * pm.ZeroSumNormal(
            "milestone_difficulty_z", sigma=1.0, dims=TASK
        )
        hard = pm.Deterministic("milestone_difficulty", hard, dims=TASK)
        omega = own[layout.pair_agent] - hard[design.pair_task]
        omega = omega + scalar["pair_scale"] * pm.Normal("pair_z", 0.0, 1.0, dims=PAIR)
        cell = scalar["milestone_mean"] + omega[layout.cell_pair]
        cell = cell - scalar["step_scale"] * pm.Normal("step_z", 0.0, 1.0, dims=STEP)[step]
        if several.any():
            z = pm.Normal("milestone_z", 0.0, 1.0, dims=SEVERAL)
            where = np.flatnonzero(several)
            cell = pt.inc_subtensor(cell[where], scalar["milestone_cell_scale"] * z)
        k, f = count_data_vars(pm, "k_obs", layout.k, layout.n)
        pm.Potential("k_binomial", pt.sum(k * -pt.softplus(-cell) + f * -pt.softplus(cell)))
        scale = pm.LogNormal("cell_scale", **priors["cell_scale"].params)
        eta = ability[layout.pair_agent] - difficulty[design.pair_task] + scalar["link"] * omega
        logit = eta[ran] + scale * pm.Normal("cell_z", 0.0, 1.0, dims=RATE)
        k, f = count_data_vars(pm, "e2e_obs", layout.e2e_k[ran], layout.e2e_n[ran])
        pm.Potential("e2e_binomial", pt.sum(k * -pt.softplus(-logit) + f * -pt.softplus(logit)))
    return model


def redrawn_departures(design, spec) -> tuple:
    """None: a linked fit keeps every departure it samples."""
    return ()


def draw_rates(post, design: Design, spec, rng) -> dict:
    """``ability``, ``milestone_ability`` (the predicted agents' drawn anew) and ``p_task``,
    the end-to-end rate of every (agent, task), per posterior draw: each pair's sampled
    competence and departure where it was run, fresh ones where it was not."""
    layout = design.layout
    ability = every_ability(post, design, rng)
    own = post["milestone_ability"].values
    if design.predicted:
        fresh = post["milestone_ability_scale"].values[..., None] * rng.standard_normal(
            own.shape[:2] + (len(design.predicted),)
        )
        own = np.concatenate([own, fresh], axis=-1)
    agents, tasks = layout.pair_agent, design.pair_task
    u = rng.standard_normal(ability.shape + (len(layout.tasks),))
    u[..., agents, tasks] = post["pair_z"].values
    omega = own[..., :, None] - post["milestone_difficulty"].values[..., None, :]
    omega = omega + post["pair_scale"].values[..., None, None] * u
    e = rng.standard_normal(u.shape)
    ran = layout.e2e_n > 0
    e[..., agents[ran], tasks[ran]] = post["cell_z"].values
    eta = ability[..., :, None] - post["difficulty"].values[..., None, :]
    eta = eta + post["link"].values[..., None, None] * omega
    p = special.expit(eta + post["cell_scale"].values[..., None, None] * e)
    return {
        "ability": (("chain", "draw", AGENT), ability),
        "milestone_ability": (("chain", "draw", AGENT), own),
        "p_task": (("chain", "draw", AGENT, TASK), p),
    }


def simulate(truth: dict, design: Design, spec, rng):
    """Counts drawn from ``truth`` on the design (the model's data: ``k_obs`` for the
    milestone cells, ``e2e_obs`` for the pairs run end to end) and the true ``P`` of every
    pair (a fresh departure where it was not run end to end)."""
    layout = design.layout
    agents, tasks = layout.pair_agent, design.pair_task
    omega = truth["milestone_ability"][agents] - truth["milestone_difficulty"][tasks]
    omega = omega + truth["pair_scale"] * truth["pair_z"]
    cell = truth["milestone_mean"] + omega[layout.cell_pair]
    cell = cell - truth["step_scale"] * truth["step_z"][steps_of(design)[0]]
    several = layout.n > 1
    if several.any():  # a cell of one trial has no departure of its own
        cell[several] += truth["milestone_cell_scale"] * truth["milestone_z"]
    ran = layout.e2e_n > 0
    e = rng.standard_normal(len(layout.pairs))
    e[ran] = truth["cell_z"]
    eta = truth["ability"][agents] - truth["difficulty"][tasks] + truth["link"] * omega
    p_task = special.expit(eta + truth["cell_scale"] * e)
    data = count_data("k_obs", rng.binomial(layout.n, special.expit(cell)), layout.n)
    e2e = rng.binomial(layout.e2e_n[ran], p_task[ran])
    return {**data, **count_data("e2e_obs", e2e, layout.e2e_n[ran])}, p_task


def log_likelihood(post: xr.Dataset, design: Design, spec) -> xr.Dataset:
    """The ``log_likelihood`` group of a fit (the module's form): ``runs``, the log
    probability of each pair's counts, over a ``pair`` dimension."""
    import xarray as xr

    layout = design.layout
    agents, tasks = layout.pair_agent, design.pair_task

    def draws(name):
        return post[name].values.reshape(-1, *post[name].shape[2:])

    base = draws("milestone_ability")[:, agents] - draws("milestone_difficulty")[:, tasks]
    cell = draws("milestone_mean")[:, None] + base[:, layout.cell_pair]
    cell = cell - draws("step_scale")[:, None] * draws("step_z")[:, steps_of(design)[0]]
    eta = draws("ability")[:, agents] - draws("difficulty")[:, tasks]
    eta = eta + draws("link")[:, None] * base
    scales = {name: draws(name)[:, None] for name in ("pair_scale", "link", "cell_scale")}
    scales["milestone_cell_scale"] = draws("milestone_cell_scale")[:, None]
    runs = pair_log_likelihood(cell, eta, scales, layout)
    shape = post["link"].shape + (len(layout.pairs),)
    pairs = pair_coords(layout.pairs)
    sample = {"chain": post["chain"], "draw": post["draw"]}
    return xr.Dataset(
        {"runs": (("chain", "draw", "pair"), runs.reshape(shape))}, coords={**sample, **pairs}
    )
