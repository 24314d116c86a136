"""The pooled family: partially pooled PyMC models (``bayes_eval.pooled``)."""

from __future__ import annotations

from bayes_eval.errors import InputError
from bayes_eval.families.base import AgentLevel
from bayes_eval.registry import POOLED, model_of

__all__ = ["PooledFamily"]

# The report's paragraph on every pooled model.
POOLED_TEXT = (
    "Partial pooling",
    "Pooled models share strength across an agent's tasks (and a task's milestones) through "
    "a hierarchy; they assume the tasks are exchangeable. They are fitted by MCMC, whose "
    "diagnostics (R-hat, effective sample size, divergences, E-BFMI) must pass before a "
    "bound is trusted.",
)


class PooledFamily:
    """Partially pooled models, fitted by MCMC (``Family``)."""

    name = POOLED
    fits_agents_apart = True

    def fit(self, evidence, by_pair, spec, options):
        from bayes_eval.pooled.sampling import fit_pooled

        return fit_pooled(evidence, by_pair, spec, options)

    def prior_only(self, evidence, by_pair, spec, options):
        from bayes_eval.pooled.sampling import prior_pooled

        return prior_pooled(evidence, by_pair, spec, seed=options.seed)

    def read_back(self, stored, by_pair, path):
        from bayes_eval.pooled.sampling import derivation_of_fit
        from bayes_eval.results.fits import McmcPosterior

        derivation = derivation_of_fit(stored.evidence, by_pair, stored.spec, stored.seed)
        return McmcPosterior(stored.tree, stored.spec, stored.evidence, derivation=derivation)

    def agent_level(self, spec):
        """An agent's mean rate (``mu``), or the mean of its task means (``mu_agent``)
        where the model's rates are cells."""
        name = "mu_agent" if model_of(spec).cell_method else "mu"
        return AgentLevel(name, name)

    def variable_roles(self, spec):
        from bayes_eval.pooled.prior import variable_roles

        return variable_roles(spec)

    def report_paragraphs(self, model):
        own = [(model.title, model.text)] if model.title else []
        return [*own, POOLED_TEXT]

    def clustered_spec(self, spec):
        return "hierarchical" if model_of(spec).cell_method else "end_to_end_pooled"

    def sbc_setup(self, evidence, evidence_rows, spec, *, form, side, draws, tune, seed, **_):
        """What each simulation of SBC reads: the layout of the evidence's rows with its
        graded pairs' terms, the form sampled (``form``: ``chosen`` as ``fit`` chooses, or
        all ``centred`` or ``non-centred``), the prior roles drawn and the variables
        ranked (the agent-level parameters, ``kappa``, ``mu_task``, a grader's rates)."""
        import dataclasses

        import numpy as np

        from bayes_eval.counts.grading import GRADER_RATES
        from bayes_eval.counts.layout import choose_form, layout_of
        from bayes_eval.families.simulation import SimulationSetup
        from bayes_eval.pooled import prior as pooled_prior

        if evidence.audit is not None and model_of(spec).paths:
            raise InputError(
                "sbc: the joint model's simulations do not draw graded end-to-end counts "
                "yet; run its SBC without the audit (the grader's own SBC is "
                "end_to_end_pooled's)"
            )
        layout = layout_of(evidence, evidence_rows, spec)  # with its graded pairs' terms
        chosen = choose_form(layout, spec)
        if form != "chosen":
            centred = form == "centred"
            chosen = dataclasses.replace(  # the tail scales stay: they are not a choice of form
                chosen,
                pairs=np.full_like(chosen.pairs, centred),
                cells=np.full_like(chosen.cells, centred),
            )
        built = _builder(layout, spec)(layout, spec, chosen)
        # The agent-level parameters are drawn from the spec's priors; task means and
        # milestone rates in simulate, in log space (a prior task mean may be 1 in floating
        # point); each is ranked on its own scale (its sampled logit ranks the same).
        # (joint's sampled milestone rates are ranked through p_task, which they make up)
        hyper = pooled_prior.hyper_roles(layout, spec)
        ranked = tuple(hyper.values())
        also = ("kappa", "mu_task", *GRADER_RATES)
        ranked += tuple(v for v in also if v in built.named_vars and v not in ranked)
        return SimulationSetup(
            spec, evidence_rows, evidence.clusters, layout, form=chosen, hyper=hyper,
            ranked=ranked, draws=draws, tune=tune, seed=seed,
        )  # fmt: skip

    def sbc_replicate(self, index, setup):
        """The ranks of simulation ``index``: the agent-level parameters drawn from their
        priors (a grader's rates from their Betas after its audit, which the fit keeps),
        the counts from the model on the evidence's design; the model compiled once per
        structure and given each simulation's counts (clustered runs: compiled anew)."""
        import warnings

        from bayes_eval.counts.grading import audit_draw
        from bayes_eval.counts.layout import model_structure
        from bayes_eval.families.simulation import (
            ranks,
            rate_ranks,
            thinned,
            with_cluster_counts,
            with_counts,
            with_graded_counts,
        )
        from bayes_eval.inference.engines import compile_model, nutpie_compiled
        from bayes_eval.inference.sweep import replicate_rng
        from bayes_eval.pooled import prior as pooled_prior
        from bayes_eval.pooled.rates import pooled_rates

        spec, layout = setup.spec, setup.design
        rng = replicate_rng(setup.seed, index)
        truth = pooled_prior.hyper_truth(setup.hyper, spec, len(layout.agents), rng)
        if layout.grading is not None:  # the grader's rates given its audit, which the fit keeps
            truth.update(audit_draw(layout.grading, spec.grader, rng))
        data, p_task = pooled_prior.simulate(truth, layout, spec, rng)
        simulated = layout
        key = ("sbc", *model_structure(layout, spec), setup.form.key())
        build = _builder(layout, spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if layout.clusters is not None:
                # the terms of the exact marginal over clusters depend on the counts (as
                # constants of the graph): laid out and compiled anew
                simulated = with_cluster_counts(setup, spec, layout, data)
                model_data = compile_model(build(simulated, spec, setup.form)).with_data()
            else:  # compiled once per structure in each process, then given the counts
                if layout.grading is not None:
                    # the terms of the sum over a graded count's true count are the model's
                    # data, made for the simulated counts (the graph does not depend on them)
                    simulated = with_graded_counts(layout, data)
                    model = build(simulated, spec, setup.form)
                    values = {v.name: v.get_value() for v in model.data_vars}
                compiled = nutpie_compiled(key, lambda: build(layout, spec, setup.form))
                model_data = compiled.with_data(**(data if simulated is layout else values))
            post, keep = thinned(model_data, setup, index)
        rates = pooled_rates(post, with_counts(simulated, spec, data), spec, rng)
        row = ranks(post, truth, setup.ranked, keep, rng)
        positions = [(layout.agents.index(a), layout.tasks.index(t)) for a, t in layout.pairs]
        row.update(rate_ranks(rates["p_task"][1], positions, p_task, keep, rng))
        return row


def _builder(layout, spec):
    """The model's builder (for clustered runs where the layout has clusters)."""
    return model_of(spec).build(clustered=layout.clusters is not None)
