"""Fit a crossed spec: sample its model until it passes its diagnostics, keep its sampled
draws, and draw every (agent, task)'s rate from them (``derivation_of_fit``), in the fit
as in a fit read back from its file."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from bayes_eval.constants import AGENT, MILESTONE, TASK
from bayes_eval.counts.layout import model_structure
from bayes_eval.crossed.design import Design
from bayes_eval.crossed.groups import covariate_group, estimates_group
from bayes_eval.crossed.model import CrossedForm
from bayes_eval.inference.retry import sample_until_diagnosed
from bayes_eval.registry import model_of
from bayes_eval.settings import stream_rng

__all__ = ["compact", "derivation_of_fit", "fit_crossed", "rates_of_fit"]


def fit_crossed(evidence, design: Design, spec, options):
    """Fit a crossed spec with MCMC: a ``Posterior`` over every (agent, task) of the
    design (``design_of``), with its covariates in the ``covariates`` group, at the level,
    seed and sampler settings of ``options`` (``FitOptions``). The fit keeps its sampled
    draws, the departures (one per pair or cell: most of its numbers) to float32 or not
    at all (``compact``), and draws its rates from them (``derivation``)."""
    from bayes_eval.results.fits import McmcPosterior

    level, seed, sampler = options.level, options.seed, options.sampler

    layout, cov = design.layout, design.covariates
    entry = model_of(spec)
    derivation = derivation_of_fit(design, spec, seed)

    def finish(trace):
        kept = compact(trace, design, spec)
        return kept, derivation.rates(kept)

    key = (*model_structure(layout, spec), cov.agent_raw.tobytes(), cov.task_raw.tobytes())
    key += (cov.task_group.tobytes(),)

    builder = entry.build()

    def build(form):
        return builder(
            replace(design, centred=form.abilities, centred_tasks=form.difficulties), spec
        )

    groups, run_text, diagnostics = sample_until_diagnosed(
        build,
        finish,
        CrossedForm(design.centred, design.centred_tasks),
        sampler,
        seed,
        key,
        cells=layout.n.size + layout.e2e_n.size,
        unstored=entry.part("redrawn_departures")(design, spec),
    )
    run_text += "; " + entry.part("form_text")(design, spec)
    if layout.clusters is not None:
        run_text += (
            f"; runs in {layout.clusters.cluster_rate.size} clusters, over-dispersed within "
            "a cluster (a Beta-Binomial per cluster around its rate, one kappa_cluster)"
        )
    draws = groups.pop("draws")
    groups["conjugate"] = estimates_group(design, spec, seed, run_text)
    groups["covariates"] = covariate_group(design)
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


def compact(trace, design: Design, spec):
    """The draws a crossed fit keeps: its trace, with the departures (``LATENT`` but the
    abilities, one per pair or cell and draw) in float32, 7 significant digits (their
    rates are drawn from them in float64, the same numbers in the fit as read back), or
    none where every reader draws them again (the model's ``redrawn_departures``)."""
    entry = model_of(spec)
    # (nutpie through the package's C keeps none of them in the trace already)
    trace = trace.drop_vars(list(entry.part("redrawn_departures")(design, spec)), errors="ignore")
    departures = [name for name in entry.part("LATENT") if name != "ability"]
    return trace.assign(
        {name: trace[name].astype(np.float32) for name in departures if name in trace}
    )


def derivation_of_fit(design: Design, spec, seed):
    """How a crossed fit's groups follow from its kept draws (partials, not lambdas: a
    sweep's workers send the posterior back pickled)."""
    from bayes_eval.crossed.prior import log_prior_of_fit, prior_of_fit
    from bayes_eval.results.posterior import Derivation

    pointwise = model_of(spec).part("log_likelihood")
    return Derivation(
        rates=functools.partial(rates_of_fit, design=design, spec=spec, seed=seed),
        log_likelihood=pointwise and functools.partial(pointwise, design=design, spec=spec),
        prior=functools.partial(prior_of_fit, design=design, spec=spec),
        log_prior=functools.partial(log_prior_of_fit, spec=spec),
    )


def rates_of_fit(kept, *, design: Design, spec, seed):
    """The ``posterior`` group of a crossed fit from its kept draws: every (agent, task)'s
    rate drawn (the ``rates`` stream of ``seed``; ``draw_rates``), the departures dropped (they
    live on in the rates), the abilities with the predicted agents'."""
    from bayes_eval.results.factors import stack_factor_rates

    entry = model_of(spec)
    rates = entry.part("draw_rates")(kept, design, spec, stream_rng(seed, "rates"))
    draws = kept.drop_vars(list(entry.part("LATENT")), errors="ignore")
    draws = draws.drop_dims(list(entry.part("LATENT_DIMS")), errors="ignore")
    draws = draws.assign_coords({AGENT: design.agents})
    draws = draws.assign(rates).assign_coords({TASK: design.layout.tasks})
    if MILESTONE in draws.dims:
        draws = draws.assign_coords({MILESTONE: np.arange(1, draws.sizes[MILESTONE] + 1)})
    return stack_factor_rates(draws)
