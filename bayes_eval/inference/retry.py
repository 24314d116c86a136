"""Sample a model until its fit passes the diagnostics gate, or the retries run out.

A fit that fails is refitted with a higher target_accept (and more draws where the ESS
is short), then in the other form (centred or non-centred); a fit still short only of
draws (an ESS or R-hat short, no divergence) is refitted with twice the draws of the best
so far, again and again within the refit budget (``REFIT_DRAWS`` times the spec's draws,
``REFIT_SECONDS`` of sampling). The best fit by its diagnostics is kept, and the
provenance names every attempt, which one was kept and why, and where the budget ended
the refits. The pooled and crossed models share it.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

from bayes_eval.constants import (
    EBFMI_MIN,
    ESS_MIN,
    RETRY_TARGET_ACCEPT,
    RHAT_MAX,
    SAMPLER_LIMITS,
)
from bayes_eval.inference.diagnostics import diagnose
from bayes_eval.messages import progress

__all__ = ["REFIT_DRAWS", "REFIT_SECONDS", "fit_attempts", "sample_until_diagnosed"]

# The refit budget of a fit short only of draws: its draws doubled up to this many times
# the spec's, and sampling (all its attempts together) within these seconds.
REFIT_DRAWS = 8
REFIT_SECONDS = 1200.0


def sample_until_diagnosed(build, finish, form, settings, seed, key, *, cells, unstored=()):
    """Sample a model until its fit passes the diagnostics gate, or the retries run out.

    The engine is chosen once (``engines.choose_engine``: ``auto`` says why, as
    progress).
    The first fit uses ``form``, ``settings`` and ``seed``; if it fails, it is refitted with
    ``_retry_settings`` in the forms ``form.refits`` names (the same form, then the other
    one), one after another until one passes, attempt ``i`` (from 0) with seed
    ``seed + i``. The best fit by its diagnostics is kept.

    Parameters
    ----------
    build : callable
        ``build(form)`` returns the PyMC model.
    finish : callable
        ``finish(trace)`` returns the draws the fit keeps (the sampled parameters, as it
        stores them) and the posterior Dataset (rates drawn back, coordinates).
    form : Form
    settings : SamplerSettings
    seed : int
    key : tuple
        The model's structure, for the compiled-model cache (``model_structure``).
    cells : int
        The table's count cells, for ``auto``'s choice.
    unstored : tuple of str
        Free variables sampled but not kept in the trace (``engines.sample``).

    Returns
    -------
    groups : dict
        Of the fit kept: ``posterior`` (the draws it keeps), ``sample_stats`` and
        ``draws`` (its posterior Dataset).
    run_text : str
        The sampler settings and form of the kept fit, and every attempt where there
        were several (the provenance's words).
    diagnostics : Diagnostics
        The kept fit's.
    """
    import xarray as xr

    from bayes_eval.inference.engines import choose_engine, sample

    engine = choose_engine(settings.engine, cells)
    if engine.reason:
        progress(f"engine: {engine.name}, chosen by auto: {engine.reason}")

    def run(form, tried, attempt):
        # a refit starts its chains afresh (seed + attempt): a chain stuck in its warm-up
        # (its step size collapsed) would otherwise be stuck again in the same place
        model = build(form)
        trace = sample(model, engine, tried, seed + attempt, (*key, form.key()), unstored)
        kept, draws = finish(trace["posterior"].to_dataset().isel(draw=tried.kept))
        stats = trace["sample_stats"].to_dataset()
        stats.attrs["target_accept"] = tried.target_accept
        # the divergences and E-BFMI of every draw, the rest of the draws kept
        diagnostics = diagnose(xr.DataTree.from_dict({"posterior": draws, "sample_stats": stats}))
        stats = stats.isel(draw=tried.kept)
        return {"posterior": kept, "sample_stats": stats, "draws": draws}, diagnostics

    plans = [(form, settings)]
    fits, attempts, seconds = [], [], []
    while plans:
        form, tried = plans.pop(0)
        attempt = len(fits)
        start = time.perf_counter()
        fits.append((*run(form, tried, attempt), form, tried))
        seconds.append(time.perf_counter() - start)
        failed = fits[-1][1].messages
        reseeded = f", seed {seed + attempt}" if attempt else ""
        attempts.append(
            f"{_attempt(form, tried, engine)}{reseeded}: " + ("; ".join(failed) or "passed")
        )
        if not failed:
            break
        plans = _next_plans(fits, plans, seconds, settings)
        if plans:
            progress(
                f"sampling: the fit failed its diagnostics ({failed[0]}); refitting with "
                f"{_attempt(*plans[0], engine)}"
            )
    best = min(range(len(fits)), key=lambda i: _badness(fits[i][1]))
    groups, diagnostics, form, tried = fits[best]
    record = ""
    if len(fits) > 1:
        why = "it passed" if diagnostics.ok else "the fewest failed checks"
        record = f"; kept attempt {best + 1} of {len(fits)} ({why}): " + "; ".join(
            f"attempt {i + 1} {text}" for i, text in enumerate(attempts)
        )
        if _short_of_draws(diagnostics):
            record += f"; {_budget_text(fits, seconds, settings)}"
    chosen = f"; engine chosen by auto: {engine.reason}" if engine.reason else ""
    return groups, _attempt(form, tried, engine) + record + chosen, diagnostics


def _next_plans(fits, plans, seconds, settings) -> list:
    """The refits to run after the last of ``fits`` failed, ``(form, settings)`` each:
    after the first, its refits (``_retry_settings``, in the forms ``form.refits`` names);
    when none is left, the best fit short only of draws with more (``_longer``); and once
    the last fit diverged, each at target_accept ``RETRY_TARGET_ACCEPT`` (``_steeper``)."""
    _, diagnostics, form, _ = fits[-1]
    if len(fits) == 1:
        retry = _retry_settings(diagnostics, settings)
        # the same form and settings again would only repeat the fit
        plans = [
            (other, retry)
            for other in form.refits(diagnostics)
            if other.key() != form.key() or retry != settings
        ]
    if not plans:  # a fit short only of draws: twice as many, within the budget
        plans = _longer(fits, seconds, settings)
    if diagnostics.divergences:  # once a fit diverges, every refit takes smaller steps
        plans = [(other, _steeper(planned)) for other, planned in plans]
    return plans


def _short_of_draws(diagnostics) -> bool:
    """Whether a fit failed only for want of draws: an ESS or R-hat short, with no
    divergence and every chain exploring the energy well."""
    return (
        not diagnostics.ok
        and not diagnostics.divergences
        and min(diagnostics.ebfmi, default=1.0) >= EBFMI_MIN
    )


def _longer(fits, seconds, settings) -> list:
    """The next refit of a fit short of draws (``_short_of_draws``): the best such fit so
    far, in its form and settings with twice the most draws any fit had, where that stays
    within ``REFIT_DRAWS`` times the spec's draws and its sampling, projected from the
    longest fit's time (warm-up and draws alike), within ``REFIT_SECONDS`` of sampling in
    all; none otherwise."""
    short = [i for i in range(len(fits)) if _short_of_draws(fits[i][1])]
    if not short:
        return []
    _, _, form, tried = fits[min(short, key=lambda i: _badness(fits[i][1]))]
    longest = max(range(len(fits)), key=lambda i: fits[i][3].draws)
    most = fits[longest][3]
    longer = replace(tried, draws=2 * most.draws)
    projected = seconds[longest] * (longer.tune + longer.draws) / (most.tune + most.draws)
    if (
        longer.draws > REFIT_DRAWS * settings.draws
        or longer.draws > SAMPLER_LIMITS["draws"][1]
        or sum(seconds) + projected > REFIT_SECONDS
    ):
        return []
    return [(form, longer)]


def _budget_text(fits, seconds, settings) -> str:
    """Why a fit short of draws was not refitted with more: the refit budget."""
    return (
        f"no longer refit: the refit budget is {REFIT_DRAWS} times the spec's "
        f"{settings.draws} draws per chain and {REFIT_SECONDS / 60:g} minutes of sampling "
        f"({sum(seconds):.0f} s spent); run longer with --draws"
    )


def _attempt(form, settings, engine) -> str:
    """One fit's sampler settings, engine and form, as the provenance names them."""
    text = (
        f"{engine.name} ({engine.device}) {settings.chains} chains x {settings.draws} draws "
        f"(tune {settings.tune}, target_accept {settings.target_accept:g})"
    )
    if settings.thin > 1:
        text += f", one draw in {settings.thin} kept"
    return text + (f", {form.describe()}" if form.flippable else "")


def fit_attempts(provenance: str) -> int:
    """How many fits a pooled estimate took, read from its provenance ("kept attempt i of
    N", which ``fit_pooled`` writes only where there was more than one)."""
    found = re.search(r"kept attempt \d+ of (\d+)", provenance)
    return int(found.group(1)) if found else 1


def _retry_settings(diagnostics, settings):
    """The settings of the refit: target_accept raised to 0.99 where the fit diverged (or
    its energy was explored poorly), the draws doubled where an ESS fell short or the
    chains disagreed (within ``SAMPLER_LIMITS``)."""
    out = settings
    if diagnostics.divergences or min(diagnostics.ebfmi, default=1.0) < EBFMI_MIN:
        out = _steeper(out)
    table = diagnostics.table
    short = (table[["ess_bulk", "ess_tail"]] < ESS_MIN).any(axis=None)
    if short or (table["r_hat"] > RHAT_MAX).any():
        out = replace(out, draws=min(2 * settings.draws, SAMPLER_LIMITS["draws"][1]))
    return out


def _steeper(settings):
    """``settings`` with target_accept raised to ``RETRY_TARGET_ACCEPT`` (kept where
    higher)."""
    return replace(settings, target_accept=max(RETRY_TARGET_ACCEPT, settings.target_accept))


def _badness(diagnostics) -> tuple:
    """Order of fits, best first: passed, then fewer failed checks, fewer divergences, a
    smaller largest R-hat and a larger smallest tail ESS."""
    table = diagnostics.table
    return (
        not diagnostics.ok,
        len(diagnostics.messages),
        diagnostics.divergences,
        float(table["r_hat"].max()),
        -float(table["ess_tail"].min()),
    )
