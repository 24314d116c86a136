"""Simulation-based calibration (Talts et al. 2018) of the pooled and crossed models.

For each simulation: draw the hyperparameters from the prior, draw the rates and the
counts generatively with the evidence's own design (same tasks, milestones, runs and
trials), fit the model to the simulated counts (compiled once, refitted with new
data), and record the rank of every true quantity among thinned posterior draws;
``p_task`` goes through the same exact redraw as a real fit. If the model and its
inference are right, every rank is uniform on ``0..draws``; a chi-square test per
quantity, Bonferroni-corrected across quantities, says whether they are.

With a grader's audit, each simulation draws the grader's sensitivity and specificity
from their Betas after the audit, which the fit keeps as data, and the graded counts
through them. Where the evidence's runs come in clusters, each cluster's rate is drawn
around its rate and its runs from it, and the model is compiled anew for each
simulation: the terms of its exact marginal over clusters are built from the counts.

Each family draws, simulates and fits its own simulations (``sbc_setup`` and
``sbc_replicate`` of ``bayes_eval.families``); this module runs them and tests the ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bayes_eval.inference.sweep import run_sweep

__all__ = ["SBCResult", "sbc"]


@dataclass(frozen=True)
class SBCResult:
    """Ranks and uniformity tests of one SBC run.

    Attributes
    ----------
    ranks : pandas.DataFrame
        One row per simulation, one column per checked quantity; values in ``0..draws``.
    draws : int
        Posterior draws each rank is taken among.
    p_values : pandas.Series
        Chi-square uniformity p-value per quantity.
    """

    ranks: pd.DataFrame
    draws: int
    p_values: pd.Series

    def passed(self, alpha: float = 0.01) -> bool:
        """Uniform at level ``alpha`` for every quantity (Bonferroni across quantities)."""
        return bool(self.p_values.min() >= alpha / len(self.p_values))


def sbc(
    evidence,
    model,
    *,
    simulations=20,
    draws=99,
    bins=4,
    tune=300,
    seed=0,
    form="chosen",
    agents=None,
    tasks=None,
    workers=None,
    scheduler=None,
) -> SBCResult:
    """Run SBC of a pooled or crossed spec on the design of ``evidence``.

    Parameters
    ----------
    evidence : path, DataFrame or Evidence
        Provides the design (tasks, milestones, runs, trials); its counts are not used.
    model : str or Spec
        A pooled or crossed spec (an exact one is refused: its posterior is closed-form).
    simulations : int
        Number of simulated data sets.
    draws : int
        Posterior draws kept per fit (thinned from two chains).
    bins : int
        Histogram bins of the uniformity test (``draws + 1`` must be a multiple).
    tune : int
        Tuning steps per chain.
    seed : int
    form : {"chosen", "centred", "non-centred"}
        How a pooled model's task means (and ``joint``'s milestone rates) are sampled: as
        ``fit`` chooses from the design's trials (``bayes_eval.counts.layout.choose_form``),
        or all in one form (the crossed models choose their own: another form is refused).
    agents, tasks : path or DataFrame, optional
        Crossed models: the covariate side tables, as for ``fit``.
    workers, scheduler : optional
        Run the simulations on a dask cluster (``bayes_eval.inference.sweep.run_sweep``). Each is
        seeded from ``seed`` and its index, so the ranks are the same on any cluster.
    """
    from bayes_eval.errors import InputError
    from bayes_eval.evidence.table import load_evidence
    from bayes_eval.families import family_of
    from bayes_eval.fit import check_graded, side_tables, usable_rows
    from bayes_eval.specs import load_spec

    if (draws + 1) % bins:
        raise ValueError("draws + 1 must be a multiple of bins")
    spec = load_spec(model)
    evidence = load_evidence(evidence)
    evidence_rows = usable_rows(evidence, spec)
    check_graded(evidence, spec)  # a model that does not carry the grader
    if evidence.audit is not None and evidence.audit.audited_runs.any():
        raise InputError(
            "sbc: the simulations do not draw the truth of audited runs of the evidence "
            "(run_id) yet; run SBC with an audit of other runs"
        )
    family = family_of(spec)
    side = side_tables(spec, agents, tasks, ())
    options = {"form": form, "side": side, "draws": draws, "tune": tune, "seed": seed}
    setup = family.sbc_setup(evidence, evidence_rows, spec, simulations=simulations, **options)
    rows = run_sweep(family.sbc_replicate, simulations, setup, workers=workers, scheduler=scheduler)
    return _result(rows, draws, bins)


def _result(rows, draws, bins) -> SBCResult:
    ranks = pd.DataFrame(rows)
    edges = np.linspace(0, draws + 1, bins + 1)
    p_values = ranks.apply(lambda r: stats.chisquare(np.histogram(r, bins=edges)[0]).pvalue, axis=0)
    return SBCResult(ranks, draws, p_values)
