"""The crossed model: agents' abilities and tasks' difficulties on one logit scale.

Every agent ``a`` has an ability ``theta_a`` and every task ``t`` a difficulty ``b_t``,
both partially pooled (item-response style)::

    theta_a = ability_mean + x_a . beta_agent + ability_scale z_a
    b_t     = x_t . beta_task + group_scale u_(g(t)) + difficulty_scale z_t
    logit P_at = a_t (theta_a - b_t) + cell_scale e_at

with ``x`` the standardised covariates (``bayes_eval.evidence.covariates``), ``z_a`` and
``e_at`` standard normal, and ``z_t``, ``u`` zero-sum normal: the difficulties average
zero over the design's tasks, so the intercept sits in the ability alone and the two
cannot trade along a ridge. No (agent, task) is exactly additive: ``e_at``, one per pair
run (for milestone runs, one per milestone cell, ``P_at = prod_m p_atm``), is the pair's
departure on the logit scale. A small additive mean never turns into a spike at zero: a
pair's rate stays within ``cell_scale`` log-odds of it, whatever the mean. (A Beta cell
level, ``Beta(mu kappa, (1 - mu) kappa)``, made the rate of a weak agent on a hard task a
spike whose 97.5% quantile was as low as 1e-128.)

Where the spec gives a ``surprise_share`` (the shipped ``crossed`` does), a share of the
pairs surprise: an agent unexpectedly good, or bad, at one task departs further than the
others, with scale ``cell_scale (1 + surprise_width)`` where the rest have ``cell_scale``
(a scale mixture of normals: a departure law whose tail the data widen). The pair's one
``e_at`` serves both: the likelihood of its runs is ``(1 - share) L(cell_scale) + share
L(wide)`` at its ``e_at``, the choice summed out; each posterior draw then draws whether
the pair surprises from its probability given that draw (where the fit keeps no
departure, ``redrawn_departures``, the two together from their conditional), and a pair
never run surprises with probability ``share``. With normal departures alone the one
scale had to fit the surprising pairs too, and shrank the others' bounds toward the
additive prediction hardest exactly where a pair's own runs contradicted it
(docs/coverage.md).

``a_t`` is 1 unless the spec gives a ``discrimination_scale`` (2PL): then each task has
its own slope of success in ability, ``log a_t = discrimination_scale w_t`` with ``w``
zero-sum normal (the discriminations' geometric mean is 1 over the design's tasks, so
they cannot trade scale with the abilities), ``discrimination`` in the posterior.

Where the spec gives a ``length_error_scale`` ``tau`` (in units of the length term, e.g.
doublings of ``log2(human_minutes)``), the recorded length ``x_t`` is the true one plus an
error: ``true_t = x_t + tau v_t``, ``v_t`` standard normal around the recorded value
(the Berkson form, a true length scattered around the one recorded), and the
difficulty follows the true length. ``v_t`` is summed out: it adds ``beta tau v_t / s``
(``beta`` the length's coefficient, ``s`` its standard deviation) to a difficulty, a
normal term of the same form as ``difficulty_scale z_t``, so the residual is sampled with
scale ``sqrt(difficulty_scale^2 + (beta tau / s)^2)`` and ``difficulty_scale`` is the
spread of difficulties among tasks of one true length. Counts alone cannot tell the two
apart (each moves every count of a task alike): ``tau`` is set by its prior, and it moves
the horizons, which are read at a true length (``bayes_eval.crossed.horizon``).

Milestone runs may be blocked. A pair whose every milestone run failed is, with
probability ``blocked_share`` (learned, Beta prior), one whose milestone runs do not bear
on its rate: every run fails whatever the rates (the guided path is closed to the agent,
or it solves the task another way), and its rate is the additive prediction with fresh
departures, as for a pair never run. Without it, where pairs that can never be solved
fail every milestone, the one departure scale grew to fit them (2.8 where the solvable
pairs' is 1) and a single milestone without a success then pulled its pair's bound below
the truth. The mixture is summed out in the likelihood; each posterior draw then draws
whether the pair is blocked from its probability given that draw.

NUTS samples the abilities (centred where every agent's runs say more about its ability
than its population does, ``centred_abilities``), the difficulties, the scales and the
departures (non-centred). Where runs come in clusters, each cluster's rate varies around
its pair's (or milestone cell's) with one ``kappa_cluster`` (``bayes_eval.counts.clusters``).

Where an audited grader scored a pair's end-to-end runs (or a milestone cell's), each
run is graded a success with ``q = se P + (1 - sp)(1 - P)`` (``p`` for a cell): the
grader's sensitivity ``se`` and specificity ``sp`` are sampled, one each per grader, with
the spec's ``[grader]`` priors and the audit as their binomial data
(``bayes_eval.counts.grading``), and the graded count is binomial in ``q``; ``p_graded``
(``p_graded_milestone``) holds ``q`` beside ``P``. A blocked pair's runs all fail, so
its graded successes are false alarms, each cell's ``Binomial(k | n, 1 - sp)``, and any
pair whose successes were all graded by an audited grader may be blocked.

Every (agent, task) of the design gets draws of ``P``: a pair that was run from its
posterior, a pair never run with a fresh departure (a prediction), and a new agent
described by covariates alone from a fresh ability, ``ability_mean + x . beta_agent +
ability_scale z`` with ``z`` drawn anew per posterior draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from bayes_eval.constants import (
    AGENT,
    CENTRED_MARGIN,
    DISCRIMINATION_SCALE,
    EBFMI_MIN,
    END_TO_END,
    LENGTH_ERROR,
    MILESTONE,
    SURPRISE_SHARE,
    SURPRISE_WIDTH,
    TASK,
)
from bayes_eval.counts.clusters import array_add_at, log_given_each_rate
from bayes_eval.counts.data import count_data_vars
from bayes_eval.counts.grading import GRADER_RATES, grader_rates
from bayes_eval.counts.layout import Layout, centred_text, layout_of
from bayes_eval.crossed.departures import additive, clustered, pair_rates, redrawn
from bayes_eval.crossed.design import Design
from bayes_eval.crossed.grader import (
    false_alarms,
    graded_cells,
    graded_counts,
    graded_pairs,
    graded_rates,
    through_grader,
)
from bayes_eval.crossed.groups import (
    AGENT_TERM,
    TASK_TERM,
    covariates_of_group,
)
from bayes_eval.crossed.likelihood import log_likelihood, surprising_scale
from bayes_eval.errors import InputError
from bayes_eval.evidence.covariates import predicted_agents, read_covariates
from bayes_eval.exact.graded import graded_success
from bayes_eval.exact.products import log_beta_draws
from bayes_eval.registry import model_of

__all__ = [
    "LATENT",
    "LATENT_DIMS",
    "abilities_and_difficulties",
    "build_model",
    "design_of_fit",
    "centred_abilities",
    "design_of",
    "draw_rates",
    "every_ability",
    "form_text",
    "information",
    "log_likelihood",
    "redrawn_departures",
    "simulate",
    "structure_coords",
]

GROUP = "task_group"
RATE = "rate"  # the rates that depart from the additive mean: pairs, or milestone cells
CENTRED, NON_CENTRED = "agent_centred", "agent_non_centred"  # the abilities, as sampled
# What a fit drops once the rates are drawn (they live on in the rates), and its dims.
LATENT, LATENT_DIMS = ("ability", "cell_z"), (AGENT, RATE, CENTRED, NON_CENTRED)


@dataclass(frozen=True)
class CrossedForm:
    """Which abilities (``abilities``, per agent) and whether the difficulties are sampled
    centred (``centred_abilities`` and ``centred_difficulties`` choose for the first fit).

    A fit that fails its diagnostics is refitted (``refits``): in the same form with more
    draws, then in the other form, all non-centred where any part was centred, else all
    centred (where covariates explain most of the abilities or difficulties, their
    residual scale can fall far enough to meet centred parameters in a funnel). Where
    centred difficulties' quantities alone failed, and the sampler neither diverged nor
    explored the energy poorly, the difficulties go non-centred first: where half the
    cells can never be solved, the departures' scale grows to 3, the difficulties (judged
    centred from their runs alone) meet their scale in a funnel (difficulty_scale R-hat
    1.034) and the same form with twice the draws failed again, while the abilities' form
    was sound. A narrow failure of ``ability_mean`` is not such a sign: flipping the
    abilities then failed where twice the draws passed (2 of 18 simulated tables).
    """

    abilities: np.ndarray
    difficulties: bool
    flippable = True

    def key(self) -> tuple:
        return self.abilities.tobytes(), self.difficulties

    def flipped(self) -> CrossedForm:
        centred = not (self.abilities.any() or self.difficulties)
        return CrossedForm(np.full_like(self.abilities, centred), centred)

    def refits(self, diagnostics) -> list:
        """The forms to refit in, in order, after a first fit that failed ``diagnostics``."""
        if self.difficulties and implicated_part(diagnostics) == TASK:
            return [CrossedForm(self.abilities, False), self]
        return [self, self.flipped()]

    def describe(self) -> str:
        difficulties = "centred" if self.difficulties else "non-centred"
        return f"abilities {centred_text(self.abilities)}, difficulties zero-sum {difficulties}"


# The sampled quantities of each part of the design, by their names' beginnings.
PARTS = {AGENT: ("ability", "agent_coefficient"), TASK: ("difficulty", "task_coefficient", "group")}


def implicated_part(diagnostics) -> str | None:
    """``agent`` or ``task`` where every quantity that failed its checks belongs to that
    part of the design (``PARTS``; the departures' scale and the rates, which belong to
    neither, aside) and the sampler neither diverged nor explored the energy poorly
    (a funnel that no quantity's R-hat locates); None otherwise."""
    if diagnostics.divergences or min(diagnostics.ebfmi, default=1.0) < EBFMI_MIN:
        return None
    failed = diagnostics.table.loc[~diagnostics.table["ok"], "variable"]
    parts = {part for name in failed for part, starts in PARTS.items() if name.startswith(starts)}
    return parts.pop() if len(parts) == 1 else None


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
    layout = layout_of(evidence, by_pair, spec, terms=False)
    covariates = read_covariates(spec.covariates, evidence, layout.agents, layout.tasks, side)
    names, raw = predicted_agents(predict, covariates)
    for name in names:
        if name in layout.agents:
            raise InputError(
                f"predict {name}: '{name}' is an agent of the evidence, predicted "
                "from its runs already; give the new agent another name"
            )
    return _design(layout, spec, covariates, tuple(names), raw)


def design_of_fit(by_pair, spec, evidence, covariates) -> Design:
    """The design of a crossed fit read from a file: its layout made again from the rows
    it used (``by_pair``), its covariates and predicted agents from its ``covariates``
    group (``covariates_of_group``)."""
    layout = layout_of(evidence, by_pair, spec, terms=False)
    return _design(layout, spec, *covariates_of_group(covariates, spec.covariates))


def _design(layout, spec, covariates, names: tuple, raw) -> Design:
    """The design of ``layout`` with its covariates and the predicted agents."""
    pair_task = layout.pair_task
    milestones = np.zeros(len(layout.tasks), dtype=np.int64)
    if model_of(spec).cell_method:
        np.maximum.at(milestones, pair_task[layout.cell_pair], layout.cell_factor)
    centred = centred_abilities(layout, spec)
    tasks = centred_difficulties(layout, spec, pair_task)
    return Design(layout, covariates, pair_task, milestones, centred, tasks, names, raw)


def centred_abilities(layout: Layout, spec) -> np.ndarray:
    """Which agents' abilities to sample centred: those whose runs say more about their
    ability than their population does.

    An agent's runs on a rate (a pair, or a milestone cell) carry ``1 / (1 + 1 / (n p (1
    - p)))`` about its ability on the logit scale (``information``). Centred where the
    agent's sum is ``CENTRED_MARGIN`` times the population's, ``1 / ability_scale ** 2``,
    taken one prior sd below the scale's log-median (``exp(mu - sigma)``, 0.37 for
    ``LogNormal(0, 1)``): where covariates explain the abilities their scale can be that
    small, and a centred ability would meet it in a funnel (a simulated table of 8 agents
    with 45 runs each, sampled centred, diverged). Non-centred otherwise (an agent with
    few runs, or no success): there the data leave the ability to its population. On
    METR's runs 8 of 10 agents carry 34 to 56 and are centred (sampled all non-centred,
    they meet their mean on a ridge: R-hat 1.016 at the defaults); the two weakest carry
    0.5 and 3.3.
    """
    prior = spec.priors["ability_scale"].params
    scale = np.exp(prior["mu"] - prior["sigma"])
    return information(layout, spec, layout.pair_agent, len(layout.agents)) >= (
        CENTRED_MARGIN / scale**2
    )


def centred_difficulties(layout: Layout, spec, pair_task: np.ndarray) -> bool:
    """Whether to sample the difficulties centred (all of them, zero-sum either way): where
    the median task's runs carry ``CENTRED_MARGIN`` times the population's information,
    ``1 / difficulty_scale ** 2`` at the scale's prior median. On METR's runs (median 6)
    the difficulties' scale mixes five times faster centred (bulk ESS 1,800 to 2,000
    against 370 to 620 of 4,000 draws); a table with a few runs per pair stays
    non-centred."""
    scale = np.exp(spec.priors["difficulty_scale"].params["mu"])
    carried = information(layout, spec, pair_task, len(layout.tasks))
    return bool(np.median(carried) >= CENTRED_MARGIN / scale**2)


def form_text(design: Design, spec) -> str:
    """How the parts sampled besides the abilities and difficulties are, for the
    provenance."""
    return "departures non-centred"


def information(
    layout: Layout, spec, group: np.ndarray, size: int, milestones: bool | None = None
) -> np.ndarray:
    """What each agent's or task's runs (``group`` per pair: its index) say about its
    place on the logit scale: ``sum 1 / (1 + 1 / (n p (1 - p)))`` over its rates (pairs,
    or milestone cells), ``n p (1 - p)`` the binomial information of ``n`` trials at its
    pooled rate ``p = (K + 1/2) / (N + 1)``, and 1 the departure's variance at its prior's
    median scale. ``milestones`` chooses the milestone cells (by default, for a spec of
    that kind) or the end-to-end pairs."""
    if milestones is None:
        milestones = END_TO_END not in model_of(spec).uses
    if not milestones:  # abilities on end-to-end runs (alone, or linked)
        owner, k, n = group, layout.e2e_k, layout.e2e_n
    else:
        owner, k, n = group[layout.cell_pair], layout.k, layout.n
    runs = np.bincount(owner, n, minlength=size)
    rate = (np.bincount(owner, k, minlength=size) + 0.5) / (runs + 1)
    binomial = n * rate[owner] * (1 - rate[owner])
    carried = np.divide(binomial, binomial + 1, out=np.zeros(n.size), where=n > 0)
    return np.bincount(owner, carried, minlength=size)


def structure_coords(design: Design) -> dict:
    """The dims of the abilities and difficulties (``abilities_and_difficulties``)."""
    layout = design.layout
    return {
        AGENT: layout.agents,
        TASK: layout.tasks,
        **covariate_coords(design),
        CENTRED: [a for a, c in zip(layout.agents, design.centred, strict=True) if c],
        NON_CENTRED: [a for a, c in zip(layout.agents, design.centred, strict=True) if not c],
    }


def covariate_coords(design: Design) -> dict:
    """The covariates' dims: agent and task terms and task groups, by name."""
    cov = design.covariates
    return {
        AGENT_TERM: [t.text for t in cov.agent_terms],
        TASK_TERM: [t.text for t in cov.task_terms],
        GROUP: cov.groups,
    }


def build_model(design: Design, spec):
    """The PyMC model of ``design`` (named dims ``agent``, ``task``, ``task_group``,
    ``agent_covariate``, ``task_covariate``)."""
    import pymc as pm
    import pytensor.tensor as pt

    layout, cells = design.layout, bool(model_of(spec).cell_method)
    coords = structure_coords(design)
    coords[RATE] = np.arange(layout.k.size if cells else len(layout.pairs))
    priors = spec.priors
    with pm.Model(coords=coords) as model:
        ability, difficulty = abilities_and_difficulties(pm, pt, design, spec)
        eta = ability[layout.pair_agent] - difficulty[design.pair_task]
        if DISCRIMINATION_SCALE in priors:
            slope = pt.exp(_zero_sum(pm, "discrimination", priors[DISCRIMINATION_SCALE], TASK))
            eta = pm.Deterministic("discrimination", slope, dims=TASK)[design.pair_task] * eta
        if cells:  # the rates are the milestone cells
            eta = eta[layout.cell_pair]
        cell_scale = _lognormal(pm, "cell_scale", priors["cell_scale"])
        z = pm.Normal("cell_z", 0.0, 1.0, dims=RATE)
        given = _rate_likelihood(pm, pt, layout, spec, cells)
        logit = eta + cell_scale * z
        each, sp = given(*_log_rates(pt, logit))
        if SURPRISE_SHARE in priors:  # a share of the rates depart further (the module's docstring)
            share = pm.Beta(SURPRISE_SHARE, **priors[SURPRISE_SHARE].params)
            width = _lognormal(pm, SURPRISE_WIDTH, priors[SURPRISE_WIDTH])
            logit = eta + surprising_scale(cell_scale, width) * z
            wide, _ = given(*_log_rates(pt, logit))
            each = pt.logaddexp(pt.log1p(-share) + each, pt.log(share) + wide)
        if not cells:
            pm.Potential(given.name, pt.sum(each))
            return model
        share = pm.Beta("blocked_share", **priors["blocked_share"].params)
        blocked = 0.0  # were the pair blocked, every run fails: a graded success a false alarm
        if layout.grading is not None:
            k, f = given.counts
            blocked = false_alarms(_tensor_add_at, k, f, pt.log1p(-sp), pt.log(sp), layout)
        pm.Potential(given.name, _blocked_mixture(pt, each, given.failed, share, layout, blocked))
    return model


def _log_rates(pt, logit):
    """``log p`` and ``log (1 - p)`` of the rates at ``logit``, through one softplus: ``log
    (1 - p) = log p - logit`` exactly, so the gradient takes one sigmoid a rate, not two."""
    log_p = -pt.softplus(-logit)
    return log_p, log_p - logit


def _rate_likelihood(pm, pt, layout: Layout, spec, cells: bool):
    """In the model being built: the data of the counts (and a grader's rates, a cluster's
    concentration), and a function of the rates' logits giving each rate's log-likelihood
    and ``sp`` per graded rate (None where no grader). The function carries the
    likelihood's ``name``, per rate whether it ``failed`` (no success), and the ``counts``
    (successes and failures, as data; None for clustered runs).

    The runs a grader's audit scored again are part of their pair's end-to-end likelihood;
    of a milestone cell, a term of their own (a blocked pair's mixture leaves them out)."""
    if layout.clusters is not None:
        log_phi = pt.log(_lognormal(pm, "kappa_cluster", spec.priors["cluster_concentration"]))
        counts, name, failed = None, "k_clusters", _failed_cells(layout)
    else:
        k, n = graded_counts(layout) if not cells else (layout.k, layout.n)
        counts = count_data_vars(pm, "k_obs", k, n)
        name, failed = "k_binomial", pt.eq(counts[0], 0)
    grader = None
    if layout.grading is not None:
        grader = grader_rates(pm, layout.grading, spec.grader)
    audited = []  # the milestone cells' audited runs, once

    def given(log_p, log_q):
        if layout.clusters is not None:
            each = log_given_each_rate(
                pt, pt.logsumexp, log_p, log_q, log_phi, layout.clusters, _tensor_add_at
            )
            return each, None
        sp = own = None
        if grader is not None:  # a run is graded a success with se P + (1 - sp)(1 - P)
            log_p, log_q, sp, own = through_grader(pt, layout.grading, *grader, log_p, log_q)
        each = counts[0] * log_p + counts[1] * log_q
        if own is not None and not cells:
            each = pt.inc_subtensor(each[layout.grading.pairs], own)
        elif own is not None and not audited and layout.grading.trusted.any():
            audited.append(pm.Potential("own_audited", pt.sum(own)))
        return each, sp

    given.name, given.failed, given.counts = name, failed, counts
    return given


def abilities_and_difficulties(pm, pt, design: Design, spec):
    """The abilities (``ability``, over ``agent``) and the difficulties (``difficulty``,
    over ``task``) of the module's form, with their covariates and task groups, in the
    model being built."""
    cov, priors = design.covariates, spec.priors
    mean = _normal(pm, "ability_mean", priors["ability_mean"])
    if cov.agent_terms:
        beta = _normal(pm, "agent_coefficient", priors["coefficient"], AGENT_TERM)
        mean = mean + pt.dot(cov.agent_matrix, beta)
    scale = _lognormal(pm, "ability_scale", priors["ability_scale"])
    ability = pm.Deterministic("ability", _abilities(pm, pt, mean, scale, design), dims=AGENT)
    beta = None  # the task terms' coefficients, sampled first where the length's error needs them
    if LENGTH_ERROR in priors:
        beta = _normal(pm, "task_coefficient", priors["coefficient"], TASK_TERM)
    spread = _lognormal(pm, "difficulty_scale", priors["difficulty_scale"])
    if beta is not None:  # the true length's error, summed out (the module's docstring)
        at = [term.text for term in cov.task_terms].index(spec.covariates["length"])
        error = _lognormal(pm, LENGTH_ERROR, priors[LENGTH_ERROR])
        spread = pt.sqrt(spread**2 + (beta[at] * error / cov.task_scale[at]) ** 2)
    if design.centred_tasks:
        difficulty = pm.ZeroSumNormal("difficulty_offset", sigma=spread, dims=TASK)
    else:
        difficulty = spread * pm.ZeroSumNormal("difficulty_z", sigma=1.0, dims=TASK)
    if cov.task_terms:
        if beta is None:
            beta = _normal(pm, "task_coefficient", priors["coefficient"], TASK_TERM)
        difficulty = difficulty + pt.dot(cov.task_matrix, beta)
    if cov.groups:
        group = _zero_sum(pm, "group", priors["group_scale"], GROUP)
        difficulty = difficulty + group[cov.task_group]
    return ability, pm.Deterministic("difficulty", difficulty, dims=TASK)


def _tensor_add_at(values, index, size):
    """``values`` summed into ``size`` slots by ``index`` (a PyTensor vector)."""
    import pytensor.tensor as pt

    return pt.inc_subtensor(pt.zeros(size)[index], values)


def _blocked_mixture(pt, each, failed, share, layout, blocked):
    """``sum log L`` over the pairs run on milestones, each pair's milestone runs either
    described by its milestone rates (probability ``1 - share``: the product of its
    cells' likelihoods ``each``) or blocked (``share``: every run fails, whatever the
    rates, with likelihood ``exp(blocked)``: 1, or its graded successes' as false alarms,
    ``false_alarms``), which only a pair whose every cell ``failed`` or was graded can
    be."""
    described = pt.log1p(-share) + _tensor_add_at(each, layout.cell_pair, len(layout.pairs))
    mixed = pt.logaddexp(pt.log(share) + blocked, described)
    return pt.sum(pt.switch(_may_be_blocked(pt, _tensor_add_at, failed, layout), mixed, described))


def _failed_cells(layout) -> np.ndarray:
    """Per cell of clustered runs: whether none of its clusters had a success."""
    return layout.clusters.successes.max(axis=1) == 0


def _may_be_blocked(xp, add_at, failed, layout):
    """Per pair run on milestones: whether every one of its cells ``failed`` or was scored
    by an audited grader (its graded successes may all be false alarms)."""
    succeeded = xp.where(failed, 0.0, 1.0)
    if layout.grading is not None:
        trusted = np.ones(layout.k.size)
        trusted[layout.grading.pairs] = 0.0
        succeeded = succeeded * trusted
    return add_at(succeeded, layout.cell_pair, len(layout.pairs)) < 0.5


def _normal(pm, name, prior, dims=None):
    return pm.Normal(name, mu=prior.params["mu"], sigma=prior.params["sigma"], dims=dims)


def _lognormal(pm, name, prior):
    return pm.LogNormal(name, mu=prior.params["mu"], sigma=prior.params["sigma"])


def _abilities(pm, pt, mean, scale, design: Design):
    """The abilities around ``mean`` (a scalar, or one per agent) with ``scale``: sampled
    centred (``ability_centred``) for the agents ``design.centred`` marks, non-centred
    (``ability_z``) for the others."""
    agents = len(design.layout.agents)
    mean = mean * pt.ones(agents)
    ability = pt.zeros(agents)
    centred, other = np.flatnonzero(design.centred), np.flatnonzero(~design.centred)
    if centred.size:
        raw = pm.Normal("ability_centred", mean[centred], scale, dims=CENTRED)
        ability = pt.set_subtensor(ability[centred], raw)
    if other.size:
        z = pm.Normal("ability_z", 0.0, 1.0, dims=NON_CENTRED)
        ability = pt.set_subtensor(ability[other], mean[other] + scale * z)
    return ability


def _zero_sum(pm, name, prior, dims):
    """``{name}_scale * {name}_z`` over ``dims``, ``z`` zero-sum normal: a non-centred
    effect that averages zero over the design's levels."""
    scale = _lognormal(pm, f"{name}_scale", prior)
    return scale * pm.ZeroSumNormal(f"{name}_z", sigma=1.0, dims=dims)


# ---------------------------------------------------------------------------
# draws of every (agent, task)'s rate
# ---------------------------------------------------------------------------


def redrawn_departures(design: Design, spec) -> tuple:
    """The departures a fit keeps none of, its readers drawing them again from their
    conditional (``departures.redrawn``): a pair's, of end-to-end runs read as they are."""
    return () if model_of(spec).cell_method or not redrawn(design) else ("cell_z",)


def draw_rates(post, design: Design, spec, rng) -> dict:
    """``ability`` of every agent (the predicted ones drawn anew) and ``p_task`` (with
    ``p_milestone`` for milestone runs) of every (agent, task), per posterior draw: a rate
    that was run from its sampled departure, one never run from a fresh one."""
    layout, cells = design.layout, bool(model_of(spec).cell_method)
    ability = every_ability(post, design, rng)
    out = {"ability": (("chain", "draw", AGENT), ability)}
    if not cells:
        out["p_task"] = (("chain", "draw", AGENT, TASK), pair_rates(post, ability, design, rng))
        if layout.grading is not None:
            out["p_graded"] = (
                ("chain", "draw", AGENT, TASK),
                graded_pairs(post, design, out["p_task"][1]),
            )
        return out
    eta = additive(post, ability)
    scale = post["cell_scale"].values[..., None, None]
    sampled = post["cell_z"].values
    agents, tasks = layout.pair_agent, design.pair_task
    width = int(design.milestones.max())
    z = rng.standard_normal(eta.shape + (width,))
    pair_of_cell, steps = layout.cell_pair, layout.cell_factor - 1
    ca, ct = agents[pair_of_cell], tasks[pair_of_cell]
    blocked = _blocked_draws(post, eta[..., ca, ct] + scale[..., 0] * sampled, layout, rng)
    # a blocked pair's milestones say nothing of its rate: fresh departures, as never run
    z[..., ca, ct, steps] = np.where(blocked[..., pair_of_cell], z[..., ca, ct, steps], sampled)
    log_p = -np.logaddexp(0.0, -(eta[..., None] + scale[..., None] * z))  # log expit
    # A pair that was run has the milestones it was run on; one never run, as many as
    # the task has (the most any agent was run on).
    ran = np.zeros(z.shape[-3:], dtype=bool)
    ran[ca, ct, steps] = True
    task_has = np.arange(width)[None, :] < design.milestones[:, None]  # (task, milestone)
    present = np.where(design.observed()[..., None], ran, task_has[None])
    log_p = np.where(present, log_p, np.nan)
    out["p_task"] = (("chain", "draw", AGENT, TASK), np.exp(np.nansum(log_p, axis=-1)))
    out["p_milestone"] = (("chain", "draw", AGENT, TASK, MILESTONE), np.exp(log_p))
    if layout.grading is not None:
        graded = graded_cells(post, design, log_p, blocked)
        out["p_graded_milestone"] = (("chain", "draw", AGENT, TASK, MILESTONE), graded)
    return out


def every_ability(post, design: Design, rng) -> np.ndarray:
    """``(chain, draw, agent)``: the fitted agents' abilities, then the predicted agents',
    drawn anew per posterior draw from the agents' trend and spread."""
    ability, cov = post["ability"].values, design.covariates
    if not design.predicted:
        return ability
    fresh = post["ability_mean"].values[..., None] + post["ability_scale"].values[
        ..., None
    ] * rng.standard_normal(ability.shape[:2] + (len(design.predicted),))
    if cov.agent_terms:
        x = cov.standard_agents(design.predicted_raw)
        fresh = fresh + post["agent_coefficient"].values @ x.T
    return np.concatenate([ability, fresh], axis=-1)


def _blocked_draws(post, logit, layout, rng) -> np.ndarray:
    """Per posterior draw and pair run: whether it is blocked, drawn from its posterior
    probability given the draw, ``share / (share + (1 - share) L)`` for a pair whose
    every milestone run failed (``L``: its runs' likelihood given the draw's milestone
    rates, ``logit`` per cell), never for any other pair."""
    log_p, log_q = -np.logaddexp(0.0, -logit), -np.logaddexp(0.0, logit)
    blocked = 0.0  # a blocked pair's likelihood: 1, or its graded successes' as false alarms
    if layout.grading is not None:  # graded cells: a run is a graded success with chance q
        log_p, log_q, blocked = graded_rates(post, layout, log_p, log_q)
    if layout.clusters is None:
        each = layout.k * log_p + (layout.n - layout.k) * log_q
        failed = layout.k == 0
    else:
        each = clustered(post, log_p, log_q, layout.clusters)
        failed = _failed_cells(layout)
    can_block = _may_be_blocked(np, array_add_at, failed, layout)
    described = array_add_at(each, layout.cell_pair, len(layout.pairs))
    share = post["blocked_share"].values[..., None]
    # log of the odds of blocked: log share + log L(blocked) - log (1 - share) - log L
    odds = np.log(share) + blocked - np.log1p(-share) - described
    return can_block & (rng.random(described.shape) < special.expit(odds))


# ---------------------------------------------------------------------------
# simulation from the prior (SBC)
# ---------------------------------------------------------------------------


def simulate(truth: dict, design: Design, spec, rng):
    """Counts drawn generatively from ``truth`` on the design (the model's data, or the
    clusters' successes as ``k_cluster``; a graded rate's counts through its grader) and
    the true ``P`` of every pair run. A blocked pair of milestone runs
    (``blocked_share``) fails every run (its graded counts are false alarms); its ``P`` is
    the product of its milestone rates all the same."""
    from bayes_eval.counts.data import count_data

    layout, cells = design.layout, bool(model_of(spec).cell_method)
    eta = truth["ability"][layout.pair_agent] - truth["difficulty"][design.pair_task]
    if "discrimination" in truth:
        eta = truth["discrimination"][design.pair_task] * eta
    if not cells:
        trials = layout.e2e_n
    else:
        eta, trials = eta[layout.cell_pair], layout.n
    scale = truth["cell_scale"]
    if SURPRISE_SHARE in truth:  # a surprising rate departs with the wider scale
        wide = surprising_scale(scale, truth[SURPRISE_WIDTH])
        scale = np.where(rng.random(eta.size) < truth[SURPRISE_SHARE], wide, scale)
    rate = special.expit(eta + scale * rng.standard_normal(eta.size))
    p_task, runs_at = rate, rate
    if cells:
        log_p = np.log(rate)
        p_task = np.exp(np.bincount(layout.cell_pair, log_p, minlength=len(layout.pairs)))
        blocked = rng.random(len(layout.pairs)) < truth["blocked_share"]
        runs_at = np.where(blocked[layout.cell_pair], 0.0, rate)
    grading = layout.grading
    if grading is not None:  # a graded rate's runs are graded successes with chance q
        se, sp = (truth[name][grading.grader] for name in GRADER_RATES)
        true = runs_at[grading.pairs]  # a blocked pair's: 0, every graded success a false alarm
        runs_at = runs_at.copy()
        runs_at[grading.pairs] = graded_success(true, se, sp)
    if layout.clusters is not None:
        terms = layout.clusters
        p = np.clip(runs_at[terms.cluster_rate], 1e-12, 1 - 1e-12)
        phi = truth["kappa_cluster"]
        q = np.exp(log_beta_draws(p * phi, (1 - p) * phi, (), rng))
        q = np.where(runs_at[terms.cluster_rate] == 0, 0.0, q)
        return {"k_cluster": rng.binomial(terms.cluster_trials, q)}, p_task
    return count_data("k_obs", rng.binomial(trials, runs_at), trials), p_task
