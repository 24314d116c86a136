"""The crossed families: agents x tasks on one logit scale (``bayes_eval.crossed``), the
crossed model itself and the one linking milestones to end-to-end runs."""

from __future__ import annotations

from bayes_eval.constants import DISCRIMINATION_SCALE, LENGTH_ERROR, SURPRISE_SHARE, SURPRISE_WIDTH
from bayes_eval.counts.grading import GRADER_RATES
from bayes_eval.errors import InputError
from bayes_eval.families.base import AgentLevel
from bayes_eval.registry import LINKED, LINKED_PRIORS, model_of

__all__ = ["CrossedFamily"]

CROSSED_TITLE = "Crossed agents x tasks"
CROSSED_TEXT = (
    "Every agent has an ability and every task a difficulty on one logit scale, and each "
    "pair's rate departs from their difference by a logit-normal amount whose scale the "
    "data set; pairs never run are predicted."
)
CROSSED_MCMC_TEXT = "It is fitted by MCMC, whose diagnostics must pass before a bound is trusted."
ABILITY_LABEL = "ability θ (log-odds; ratio: odds ratio)"
# The quantities SBC ranks: the scalars, every coefficient, every agent's ability, and
# a grader's rates (and the rate of every pair run, drawn back exactly as in a real fit).
CROSSED_RANKED = (
    "ability_mean",
    "ability_scale",
    "difficulty_scale",
    "group_scale",
    "cell_scale",
    "blocked_share",
    "kappa_cluster",
    DISCRIMINATION_SCALE,
    LENGTH_ERROR,
    SURPRISE_SHARE,
    SURPRISE_WIDTH,
    *LINKED_PRIORS,
    "agent_coefficient",
    "task_coefficient",
    "ability",
    *GRADER_RATES,
)


class CrossedFamily:
    """Crossed models, fitted by MCMC with their agents together (``Family``); ``name``
    is ``crossed`` or ``linked``."""

    fits_agents_apart = False

    def __init__(self, name: str):
        self.name = name

    def fit(self, evidence, by_pair, spec, options):
        from bayes_eval.crossed.model import design_of
        from bayes_eval.crossed.sampling import fit_crossed

        design = design_of(by_pair, spec, evidence, options.side, options.predict)
        return fit_crossed(evidence, design, spec, options)

    def prior_only(self, evidence, by_pair, spec, options):
        from bayes_eval.crossed.model import design_of
        from bayes_eval.crossed.prior import prior_crossed

        design = design_of(by_pair, spec, evidence, options.side, options.predict)
        return prior_crossed(evidence, design, spec, seed=options.seed)

    def read_back(self, stored, by_pair, path):
        from bayes_eval.crossed.model import design_of_fit
        from bayes_eval.crossed.sampling import derivation_of_fit
        from bayes_eval.results.fits import McmcPosterior

        covariates = stored.tree["covariates"].to_dataset()
        design = design_of_fit(by_pair, stored.spec, stored.evidence, covariates)
        derivation = derivation_of_fit(design, stored.spec, stored.seed)
        return McmcPosterior(stored.tree, stored.spec, stored.evidence, derivation=derivation)

    def agent_level(self, spec):
        """The ability, where it is the agents' place on the end-to-end logit scale; none
        where milestones are linked to the end-to-end runs (the ability is then the
        bypass's, one part of the end-to-end rate)."""
        if self.name == LINKED:
            return None
        return AgentLevel("ability", ABILITY_LABEL, log_odds=True)

    def variable_roles(self, spec):
        from bayes_eval.crossed.prior import ROLES

        return dict(ROLES)

    def report_paragraphs(self, model):
        return [(CROSSED_TITLE, " ".join((CROSSED_TEXT, model.text, CROSSED_MCMC_TEXT)))]

    def clustered_spec(self, spec):
        return "crossed"

    def sbc_setup(
        self, evidence, evidence_rows, spec, *, simulations, form, side, draws, tune, seed
    ):
        """What each simulation of SBC reads: the design of the evidence's rows (its side
        tables' covariates), the variables ranked (``CROSSED_RANKED``) and every
        simulation's truth, drawn at once through the model's graph (its ``prior`` stream
        of ``seed``); the crossed models choose their own form (``form`` must be
        ``chosen``)."""
        from bayes_eval.crossed.model import design_of
        from bayes_eval.crossed.prior import graph_draws
        from bayes_eval.families.simulation import SimulationSetup
        from bayes_eval.settings import stream_rng

        if form != "chosen":
            raise InputError(f"sbc: form {form!r} is the pooled models'; {spec.name} is crossed")
        design = design_of(evidence_rows, spec, evidence, side)
        truths = graph_draws(design, spec, simulations, stream_rng(seed, "prior"))
        return SimulationSetup(
            spec, evidence_rows, evidence.clusters, design, form=None, hyper={},
            ranked=CROSSED_RANKED, draws=draws, tune=tune, seed=seed, truths=truths,
        )  # fmt: skip

    def sbc_replicate(self, index, setup):
        """The ranks of simulation ``index``: every parameter its truth (drawn from its prior
        through the model's graph, ``sbc_setup``; a grader's rates from their Betas after
        its audit), the counts from the model on the evidence's design (its pairs, trials,
        covariates and clusters)."""
        import dataclasses
        import warnings

        from bayes_eval.counts.grading import audit_draw
        from bayes_eval.counts.layout import model_structure
        from bayes_eval.families.simulation import (
            ranks,
            rate_ranks,
            thinned,
            with_cluster_counts,
            with_counts,
        )
        from bayes_eval.inference.engines import compile_model, nutpie_compiled
        from bayes_eval.inference.sweep import replicate_rng

        spec, design = setup.spec, setup.design
        entry = model_of(spec)
        build_model = entry.build()
        draw_rates, simulate = entry.part("draw_rates"), entry.part("simulate")
        layout = design.layout
        rng = replicate_rng(setup.seed, index)
        truth = {name: values[index] for name, (_, values) in setup.truths.items()}
        if layout.grading is not None:  # the grader's rates given its audit, which the fit keeps
            truth.update(audit_draw(layout.grading, spec.grader, rng))
        data, p_task = simulate(truth, design, spec, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if layout.clusters is not None:
                simulated = with_cluster_counts(setup, spec, layout, data)
                simulated = dataclasses.replace(design, layout=simulated)
                model_data = compile_model(build_model(simulated, spec)).with_data()
            else:  # compiled once per structure in each process, then given the counts
                simulated = dataclasses.replace(design, layout=with_counts(layout, spec, data))
                key = ("sbc crossed", *model_structure(layout, spec))
                compiled = nutpie_compiled(key, lambda: build_model(design, spec))
                model_data = compiled.with_data(**data)
            post, keep = thinned(model_data, setup, index)
        row = ranks(post, truth, [name for name in setup.ranked if name in truth], keep, rng)
        positions = zip(layout.pair_agent, design.pair_task, strict=True)
        rates = draw_rates(post, simulated, spec, rng)["p_task"][1]
        row.update(rate_ranks(rates, list(positions), p_task, keep, rng))
        return row
