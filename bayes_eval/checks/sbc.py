"""Simulation-based calibration (Talts et al. 2018) of the pooled models.

For each simulation: draw the hyperparameters from the prior, draw the rates and the
counts generatively with the evidence's own design (same tasks, milestones, runs and
trials), fit the model to the simulated counts (compiled once, refitted with new
data), and record the rank of every true quantity among thinned posterior draws;
``p_task`` goes through the same exact redraw as a real fit. If the model and its
inference are right, every rank is uniform on ``0..draws``; a chi-square test per
quantity, Bonferroni-corrected across quantities, says whether they are.

With a grader's audit (the crossed model alone so far), each simulation draws the
grader's sensitivity and specificity from their Betas after the audit, which the fit
keeps as data, and the graded counts through them.

Where the evidence's runs come in clusters, each cluster's rate is drawn around its
rate and its runs from it, and the model is compiled anew for each simulation: the
terms of its exact marginal over clusters are built from the counts.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bayes_eval.constants import END_TO_END
from bayes_eval.counts.grading import GRADER_RATES, audit_draw, with_terms
from bayes_eval.inference.engines import compile_model, nutpie_compiled
from bayes_eval.inference.sweep import replicate_rng, run_sweep
from bayes_eval.pooled import prior as pooled_prior
from bayes_eval.registry import LINKED_PRIORS

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
    """Run SBC of a pooled spec on the design of ``evidence``.

    Parameters
    ----------
    evidence : path, DataFrame or Evidence
        Provides the design (tasks, milestones, runs, trials); its counts are not used.
    model : str or Spec
        A pooled spec.
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
        How the task means (and ``joint``'s milestone rates) are sampled: as ``fit``
        chooses from the design's trials (``hierarchical.choose_form``), or all in one form.
    agents, tasks : path or DataFrame, optional
        Crossed models: the covariate side tables, as for ``fit``.
    workers, scheduler : optional
        Run the simulations on a dask cluster (``bayes_eval.inference.sweep.run_sweep``). Each is
        seeded from ``seed`` and its index, so the ranks are the same on any cluster.
    """
    from bayes_eval.counts.layout import choose_form, layout_of
    from bayes_eval.errors import InputError
    from bayes_eval.evidence.table import load_evidence
    from bayes_eval.fit import check_graded, usable_rows
    from bayes_eval.specs import load_spec

    if (draws + 1) % bins:
        raise ValueError("draws + 1 must be a multiple of bins")
    spec = load_spec(model)
    evidence = load_evidence(evidence)
    evidence_rows = usable_rows(evidence, spec)
    check_graded(evidence, spec)  # a model that does not carry the grader
    if evidence.audit is not None and spec.kind == "joint":
        raise InputError(
            "sbc: the joint model's simulations do not draw graded end-to-end counts yet; "
            "run its SBC without the audit (the grader's own SBC is end_to_end_pooled's)"
        )
    if evidence.audit is not None and evidence.audit.audited_runs.any():
        raise InputError(
            "sbc: the simulations do not draw the truth of audited runs of the evidence "
            "(run_id) yet; run SBC with an audit of other runs"
        )
    sweep = {"workers": workers, "scheduler": scheduler}
    if spec.pooling == "crossed":
        from bayes_eval.crossed.model import design_of
        from bayes_eval.fit import side_tables

        design = design_of(evidence_rows, spec, evidence, side_tables(spec, agents, tasks, ()))
        setup = _Setup(
            spec, evidence_rows, evidence.clusters, design, None, (), (), draws, tune, seed
        )
        rows = run_sweep(_crossed_replicate, simulations, setup, **sweep)
        return _result(rows, draws, bins)
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
    # milestone rates in _simulate, in log space (a prior task mean may be 1 in floating
    # point); each is ranked on its own scale (its sampled logit ranks the same).
    # (joint's sampled milestone rates are ranked through p_task, which they make up)
    hyper = pooled_prior.hyper_roles(layout, spec)
    ranked = tuple(hyper.values())
    also = ("kappa", "mu_task", *GRADER_RATES)
    ranked += tuple(v for v in also if v in built.named_vars and v not in ranked)
    setup = _Setup(
        spec, evidence_rows, evidence.clusters, layout, chosen, hyper, ranked, draws, tune, seed
    )
    rows = run_sweep(_pooled_replicate, simulations, setup, **sweep)
    return _result(rows, draws, bins)


@dataclass(frozen=True)
class _Setup:
    """What every simulation of one SBC run reads (sent to each dask worker once):
    ``design`` is the pooled layout or the crossed design, ``form`` the pooled form,
    ``hyper`` the prior roles drawn (with their variables) and ``ranked`` the variables
    ranked (pooled)."""

    spec: object
    evidence_rows: dict
    clusters: pd.DataFrame | None
    design: object
    form: object
    hyper: dict
    ranked: tuple
    draws: int
    tune: int
    seed: int


def _builder(layout, spec):
    from bayes_eval.registry import model_of

    return model_of(spec).build(clustered=layout.clusters is not None)


def _with_cluster_counts(setup, spec, layout, data):
    """The layout of the evidence's rows with each cluster's simulated successes
    (``data``'s ``k_cluster``, taken out): the terms of the exact marginal over clusters
    depend on the counts, so a clustered simulation is laid out and compiled anew."""
    from bayes_eval.counts.layout import build_layout

    table = setup.clusters.copy()
    table.loc[layout.cluster_rows, "successes"] = data.pop("k_cluster")
    return build_layout(setup.evidence_rows, spec, table)


def _with_graded_counts(layout, data):
    """The layout with the simulated counts (``data``'s ``k_obs``, taken out: end to end,
    or of the milestone or step cells), its graded rates' terms made for their simulated
    graded counts."""
    k = data.pop("k_obs")
    data.pop("k_obs_failures")
    grading = with_terms(layout.grading, k[layout.grading.pairs])
    counts = {"e2e_k": k} if layout.grading.method == END_TO_END else {"k": k}
    return dataclasses.replace(layout, grading=grading, **counts)


def _pooled_replicate(index: int, setup: _Setup) -> dict:
    """The ranks of simulation ``index`` of a pooled spec."""
    from bayes_eval.counts.layout import model_structure
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
            simulated = _with_cluster_counts(setup, spec, layout, data)
            model_data = compile_model(build(simulated, spec, setup.form)).with_data()
        else:  # compiled once per structure in each process, then given the counts
            if layout.grading is not None:
                # the terms of the sum over a graded count's true count are the model's
                # data, made for the simulated counts (the graph does not depend on them)
                simulated = _with_graded_counts(layout, data)
                model = build(simulated, spec, setup.form)
                values = {v.name: v.get_value() for v in model.data_vars}
            compiled = nutpie_compiled(key, lambda: build(layout, spec, setup.form))
            model_data = compiled.with_data(**(data if simulated is layout else values))
        post, keep = _thinned(model_data, setup.draws, setup.tune, setup.seed + index + 1)
    rates = pooled_rates(post, _with_counts(simulated, spec, data), spec, rng)
    row = _ranks(post, truth, setup.ranked, keep, rng)
    row.update(_rate_ranks(rates["p_task"][1], _positions(layout), p_task, keep, rng))
    return row


def _thinned(model_data, draws, tune, seed):
    """Two chains of ``5 (draws + 1)`` draws, thinned by 10 to ``draws`` nearly
    independent ones: the posterior, and the flat indices of the draws kept."""
    import nutpie

    trace = nutpie.sample(
        model_data, draws=5 * (draws + 1), tune=tune, chains=2, seed=seed, progress_bar=False
    )
    post = trace["posterior"].to_dataset()
    keep = np.linspace(0, post.sizes["chain"] * post.sizes["draw"] - 1, draws).astype(int)
    return post, keep


def _ranks(post, truth, names, keep, rng) -> dict:
    """The rank of every element of each true quantity in ``names`` among its kept draws,
    labelled ``name[i]...``."""
    row = {}
    for name in names:
        true = np.asarray(truth[name])
        flat = post[name].values.reshape(-1, *true.shape)[keep]
        for index in np.ndindex(true.shape):
            label = name + "".join(f"[{i}]" for i in index)
            row[label] = _rank(flat[(slice(None), *index)], true[index], rng)
    return row


def _rate_ranks(p_task, positions, truth, keep, rng) -> dict:
    """The rank of every pair's true ``P`` among the kept draws of ``p_task`` (``(chain,
    draw, agent, task)``), the pairs at ``positions`` ``(i, j)``."""
    draws = p_task.reshape(-1, *p_task.shape[2:])[keep]
    return {
        f"p_task[{p}]": _rank(draws[:, i, j], truth[p], rng) for p, (i, j) in enumerate(positions)
    }


def _result(rows, draws, bins) -> SBCResult:
    ranks = pd.DataFrame(rows)
    edges = np.linspace(0, draws + 1, bins + 1)
    p_values = ranks.apply(lambda r: stats.chisquare(np.histogram(r, bins=edges)[0]).pvalue, axis=0)
    return SBCResult(ranks, draws, p_values)


# The crossed model's quantities ranked: its scalars, every coefficient, every agent's
# ability, and the rate of every pair run (drawn back exactly, as in a real fit).
CROSSED_RANKED = (
    "ability_mean",
    "ability_scale",
    "difficulty_scale",
    "group_scale",
    "cell_scale",
    "blocked_share",
    "kappa_cluster",
    *LINKED_PRIORS,
    "agent_coefficient",
    "task_coefficient",
    "ability",
    *GRADER_RATES,
)


def _crossed_replicate(index: int, setup: _Setup) -> dict:
    """The ranks of simulation ``index`` of a crossed spec: every parameter drawn from its
    prior, the counts from the model on the evidence's design (its pairs, trials,
    covariates and clusters)."""
    from bayes_eval.counts.layout import model_structure
    from bayes_eval.registry import model_of

    spec, design = setup.spec, setup.design
    entry = model_of(spec)
    build_model = entry.build()
    names = ("draw_rates", "prior_draw", "simulate")
    draw_rates, prior_draw, simulate = (entry.part(name) for name in names)
    layout = design.layout
    rng = replicate_rng(setup.seed, index)
    truth = prior_draw(design, spec, rng)
    if layout.grading is not None:  # the grader's rates given its audit, which the fit keeps
        truth.update(audit_draw(layout.grading, spec.grader, rng))
    data, p_task = simulate(truth, design, spec, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if layout.clusters is not None:
            simulated = _with_cluster_counts(setup, spec, layout, data)
            simulated = dataclasses.replace(design, layout=simulated)
            model_data = compile_model(build_model(simulated, spec)).with_data()
        else:  # compiled once per structure in each process, then given the counts
            simulated = dataclasses.replace(design, layout=_with_counts(layout, spec, data))
            key = ("sbc crossed", *model_structure(layout, spec))
            compiled = nutpie_compiled(key, lambda: build_model(design, spec))
            model_data = compiled.with_data(**data)
        post, keep = _thinned(model_data, setup.draws, setup.tune, setup.seed + index + 1)
    row = _ranks(post, truth, [name for name in CROSSED_RANKED if name in truth], keep, rng)
    positions = zip(layout.pair_agent, design.pair_task, strict=True)
    rates = draw_rates(post, simulated, spec, rng)["p_task"][1]
    row.update(_rate_ranks(rates, list(positions), p_task, keep, rng))
    return row


def _rank(draws, truth, rng) -> int:
    """Rank of ``truth`` among ``draws``, ties broken at random (values that underflow
    to 0 tie, and must not all rank first)."""
    below = int(np.sum(draws < truth))
    ties = int(np.sum(draws == truth))
    return below + int(rng.integers(ties + 1))


def _with_counts(layout, spec, data):
    """The layout with the simulated counts in place of the design's."""
    from bayes_eval.counts.layout import end_to_end_groups

    if spec.kind == "end_to_end":
        return dataclasses.replace(layout, e2e_k=data.get("k_obs", layout.e2e_k))
    if "e2e_obs" in data:  # a crossed model's end-to-end counts, over the pairs run end to end
        e2e_k = layout.e2e_k.copy()
        e2e_k[layout.e2e_n > 0] = data["e2e_obs"]
        return dataclasses.replace(layout, k=data["k_obs"], e2e_k=e2e_k)
    e2e_k = layout.e2e_k.copy()
    for name, pairs in zip(("e2e_few", "e2e_k"), end_to_end_groups(layout), strict=True):
        if name in data:
            e2e_k[pairs] = data[name]
    return dataclasses.replace(layout, k=data.get("k_obs", layout.k), e2e_k=e2e_k)


def _positions(layout):
    return [(layout.agents.index(a), layout.tasks.index(t)) for a, t in layout.pairs]
