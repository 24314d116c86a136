"""The ``log_likelihood`` group: one value per observed cell and draw, the likelihood the
model conditions on, read by ``arviz_stats.loo`` and ``compare`` unchanged."""

import pickle

import arviz_stats
import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import bayes_eval
from bayes_eval.counts.layout import build_layout, choose_form
from bayes_eval.exact.grid import log_sum_exp
from bayes_eval.fit import usable_rows
from bayes_eval.messages import collected
from bayes_eval.registry import model_of
from bayes_eval.results.predictive import binomial_logpmf, exact_log_predictive, exact_loo

SMALL = {"draws": 150, "tune": 150, "chains": 2}


def _sparse_end_to_end():
    """Ragged and sparse: one trial in most cells, a missing cell, zero-success rows."""
    rows = [
        ("a", "t1", 0, 1), ("a", "t2", 1, 1), ("a", "t3", 0, 1), ("a", "t4", 0, 3),
        ("b", "t1", 1, 1), ("b", "t2", 0, 1), ("b", "t4", 2, 5),
        ("c", "t1", 0, 1), ("c", "t2", 0, 1), ("c", "t3", 0, 1), ("c", "t4", 0, 1),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["agent", "task", "successes", "trials"]).assign(
        method="end_to_end"
    )


def _sparse_milestones():
    rows = []
    for agent, tasks in (("a", ("t1", "t2", "t3")), ("b", ("t1", "t3"))):
        for t, task in enumerate(tasks):
            for step in (1, 2, 3):
                k = int((step + t) % 2 == 0) if agent == "a" else 0
                rows.append((agent, task, "milestone", step, k, 1))
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])


def _likelihood_potentials(posterior, names):
    """The sum of the model's own likelihood terms (its ``pm.Potential``s named
    ``names``), as a function of one posterior draw ``(chain, draw)``, evaluated by PyMC
    at that draw of its free variables (in the form the fit was kept in: a fit that
    failed its diagnostics is refitted in the other form)."""
    import pytensor.tensor as pt

    spec, evidence = posterior.spec, posterior.evidence
    with collected():
        layout = build_layout(usable_rows(evidence, spec), spec)
    build, form = model_of(spec).build(), choose_form(layout, spec)
    model = build(layout, spec, form)
    if any(rv.name not in posterior.draws for rv in model.free_RVs):
        model = build(layout, spec, form.flipped())  # the fit was kept in the other form
    terms = model.replace_rvs_by_values([p for p in model.potentials if p.name in names])
    assert len(terms) == len(names)
    total = model.compile_fn(
        pt.sum([pt.sum(term) for term in terms]),
        inputs=model.value_vars,
        on_unused_input="ignore",
    )

    def at(chain, draw) -> float:
        point = {}
        for rv in model.free_RVs:
            value = posterior.draws[rv.name].values[chain, draw]
            transform = model.rvs_to_transforms[rv]
            if transform is not None:
                value = transform.forward(pt.as_tensor(value), *rv.owner.inputs).eval()
            point[model.rvs_to_values[rv].name] = value
        return float(total(point))

    return at


def _log_binomial_coefficients(k, n):
    return float(
        np.sum(special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1))
    )


def test_an_exact_fit_has_its_binomial_log_likelihood_per_cell():
    posterior = bayes_eval.fit(_sparse_end_to_end(), "end_to_end")
    tree = posterior.tree
    log_lik = tree["log_likelihood"]["successes"]
    assert log_lik.dims == ("chain", "draw", "cell")
    assert list(log_lik["cell"].values) == list(tree["observed_data"]["cell"].values)
    assert log_lik.sizes["cell"] == 11
    cell = "b / t4 / end_to_end"
    p = tree["posterior"]["p_task"].sel(agent="b", task="t4").values
    expected = stats.binom.logpmf(2, 5, p)
    np.testing.assert_allclose(log_lik.sel(cell=cell).values, expected, rtol=1e-12)
    loo = arviz_stats.loo(tree)
    assert np.isfinite(loo.elpd) and loo.pareto_k.sizes["cell"] == 11


@pytest.mark.parametrize(
    ("model", "table", "potential"),
    [
        ("end_to_end_pooled", _sparse_end_to_end, "k_end_to_end"),
        # about a minute; the default run checks the pooled log likelihood on end_to_end_pooled
        pytest.param("hierarchical", _sparse_milestones, "k_cell", marks=pytest.mark.slow),
    ],
)
def test_a_pooled_fit_has_the_marginal_likelihood_it_conditions_on(model, table, potential):
    posterior = bayes_eval.fit(table(), model, sampler=SMALL, seed=4)
    posterior = pickle.loads(pickle.dumps(posterior))  # as a sweep's worker sends it back
    tree = posterior.tree
    log_lik = tree["log_likelihood"]["successes"]
    observed, trials = tree["observed_data"]["successes"], tree["constant_data"]["trials"]
    assert list(log_lik["cell"].values) == list(observed["cell"].values)
    assert not np.isnan(log_lik.values).any()
    k, n = observed.values, trials.values
    for chain, draw in ((0, 0), (1, 77)):
        # the model's Potential drops the binomial coefficients; ours keeps them
        expected = _likelihood_potentials(posterior, [potential])(chain, draw)
        total = float(log_lik.values[chain, draw].sum()) - _log_binomial_coefficients(k, n)
        assert total == pytest.approx(expected, rel=1e-9, abs=1e-9)
    loo = arviz_stats.loo(tree)
    assert np.isfinite(loo.elpd) and loo.pareto_k.sizes["cell"] == k.size


def _integrated(eta, scale, k, n) -> float:
    """``log integral Binomial(k | n, expit(eta + s e)) phi(e) de`` by scipy's adaptive
    quadrature, scaled at the integrand's peak so that tiny values keep their digits."""
    from scipy import integrate, optimize

    def log_f(e):
        return stats.binom.logpmf(k, n, special.expit(eta + scale * e)) + stats.norm.logpdf(e)

    peak = optimize.minimize_scalar(lambda e: -log_f(e), bounds=(-60, 60), method="bounded").x
    top = log_f(peak)
    kink = [-eta / scale] if abs(-eta / scale - peak) < 12 else None
    value, _ = integrate.quad(
        lambda e: np.exp(log_f(e) - top), peak - 12, peak + 12, points=kink,
        epsabs=0, epsrel=1e-13, limit=2000,
    )  # fmt: skip
    return float(np.log(value) + top)


@pytest.mark.parametrize("scale", [0.05, 0.5, 1.0, 3.0, 8.0])
def test_the_departure_integral_matches_adaptive_quadrature(scale):
    from bayes_eval.crossed.likelihood import log_marginal

    eta = np.array([-12.0, -4.0, -1.0, 0.0, 2.5, 9.0])
    k = np.array([0, 1, 2, 0, 40, 120])
    n = np.array([1, 1, 5, 20, 50, 200])
    got = log_marginal(eta[None, :], np.full((1, 1), scale), k, n)[0]
    expected = [_integrated(e, scale, kk, nn) for e, kk, nn in zip(eta, k, n, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=1e-10)


# a crossed fit; the departure integral is held to quadrature without sampling
# (tests/test_crossed.py)
@pytest.mark.slow
def test_a_crossed_fit_integrates_each_pairs_departure_out():
    """Each pair's value is ``log integral Binomial(k | n, expit(eta + s e)) phi(e) de``
    at the draw's ``eta = ability - difficulty`` and ``s = cell_scale``: checked against
    scipy's adaptive quadrature; a pair never run gets none."""
    posterior = bayes_eval.fit(_sparse_end_to_end(), "crossed", sampler=SMALL, seed=4)
    tree = pickle.loads(pickle.dumps(posterior)).tree
    log_lik = tree["log_likelihood"]["successes"]
    observed, trials = tree["observed_data"]["successes"], tree["constant_data"]["trials"]
    assert list(log_lik["cell"].values) == list(observed["cell"].values)
    assert log_lik.sizes["cell"] == 11  # the pair (b, t3) was never run
    draws = tree["posterior"]
    for chain, draw, cell in ((0, 0, 0), (1, 77, 6), (0, 149, 10)):
        agent, task = str(log_lik["agent"].values[cell]), str(log_lik["task"].values[cell])
        eta = float(draws["ability"].sel(agent=agent).values[chain, draw])
        eta -= float(draws["difficulty"].sel(task=task).values[chain, draw])
        scale = float(draws["cell_scale"].values[chain, draw])
        k, n = int(observed.values[cell]), int(trials.values[cell])
        expected = _integrated(eta, scale, k, n)
        assert log_lik.values[chain, draw, cell] == pytest.approx(expected, rel=1e-10)
    loo = arviz_stats.loo(tree)
    assert np.isfinite(loo.elpd) and loo.pareto_k.sizes["cell"] == 11


@pytest.mark.slow  # about a minute; crossed_milestones keeps its SBC (tests/test_crossed.py)
def test_crossed_milestones_scores_whole_pairs_with_their_blocked_mixture():
    """A pair's value is ``log((1 - share) prod_m L_m + share [every run failed])``, each
    ``L_m`` the integral over cell m's own departure (by quadrature here)."""
    table = _sparse_milestones()
    posterior = bayes_eval.fit(table, "crossed_milestones", sampler=SMALL, seed=4)
    tree = pickle.loads(pickle.dumps(posterior)).tree
    runs = tree["log_likelihood"]["runs"]
    assert runs.dims == ("chain", "draw", "pair") and runs.sizes["pair"] == 5
    draws = tree["posterior"]
    for chain, draw in ((0, 3), (1, 120)):
        share = float(draws["blocked_share"].values[chain, draw])
        scale = float(draws["cell_scale"].values[chain, draw])
        for (agent, task), cells in table.groupby(["agent", "task"], sort=False):
            eta = float(draws["ability"].sel(agent=agent).values[chain, draw])
            eta -= float(draws["difficulty"].sel(task=task).values[chain, draw])
            described = sum(
                _integrated(eta, scale, int(k), int(n))
                for k, n in zip(cells["successes"], cells["trials"], strict=True)
            )
            expected = np.log1p(-share) + described
            if cells["successes"].sum() == 0:  # agent b: may be blocked
                expected = np.logaddexp(np.log(share), expected)
            got = runs.sel(pair=f"{agent} / {task}").values[chain, draw]
            assert got == pytest.approx(expected, rel=1e-10)
    loo = arviz_stats.loo(tree)
    assert np.isfinite(loo.elpd) and loo.pareto_k.sizes["pair"] == 5
    # beside a fit of single cells of the same rows there is nothing to leave out, and
    # compare says so before it refits any cell
    cells = bayes_eval.fit(table, "mats2024")
    refused = r"^fits: pairs \(crossed_milestones\) scores each pair's runs together"
    with pytest.raises(bayes_eval.InputError, match=refused):
        bayes_eval.compare({"pairs": posterior, "cells": cells})


def _guided():
    """Milestone runs and end-to-end runs of the same pairs, one trial each (the joint
    model sums the rates out), and one pair of 12 end-to-end trials (it samples that
    pair's milestone rates)."""
    rows = []
    for agent in ("a", "b"):
        for t, task in enumerate(("t1", "t2", "t3")):
            for step in range(1, 2 + t):
                rows.append((agent, task, "milestone", step, int((step + t) % 2 == 0), 1))
            rows.append((agent, task, "end_to_end", None, int(agent == "a" and t == 1), 1))
    rows.append(("b", "t4", "milestone", 1, 9, 12))
    rows.append(("b", "t4", "milestone", 2, 7, 12))
    rows.append(("b", "t4", "end_to_end", None, 5, 12))
    columns = ["agent", "task", "method", "step", "successes", "trials"]
    return pd.DataFrame(rows, columns=columns)


@pytest.mark.slow  # two compilations of the joint model, about 3 minutes
def test_joint_scores_whole_pairs_with_the_terms_it_conditions_on():
    """Summed over pairs, ``runs`` is the sum of the model's own likelihood terms (PyMC's
    Potentials at the draw), with the binomial coefficients the milestone terms drop:
    pairs of one end-to-end trial (rates summed out) and one of twelve (rates sampled)."""
    table = _guided()
    posterior = bayes_eval.fit(table, "joint", sampler=SMALL, seed=4)
    tree = pickle.loads(pickle.dumps(posterior)).tree
    runs = tree["log_likelihood"]["runs"]
    assert runs.dims == ("chain", "draw", "pair")
    assert list(runs["pair"].values)[:3] == ["a / t1", "a / t2", "a / t3"]
    milestones = table[table["method"] == "milestone"]
    choose = _log_binomial_coefficients(milestones["successes"], milestones["trials"])
    names = ["k_cell", "end_to_end_few", "k_sampled", "end_to_end"]
    potentials = _likelihood_potentials(posterior, names)
    for chain, draw in ((0, 0), (1, 77)):
        expected = potentials(chain, draw)
        total = float(runs.values[chain, draw].sum()) - choose  # as k_cell and k_sampled
        assert total == pytest.approx(expected, rel=1e-9, abs=1e-9)
    loo = arviz_stats.loo(tree)
    assert np.isfinite(loo.elpd) and loo.pareto_k.sizes["pair"] == runs.sizes["pair"]


def test_compare_ranks_two_fits_of_the_same_cells():
    table = _sparse_end_to_end()
    exact = bayes_eval.fit(table, "end_to_end")
    pooled = bayes_eval.fit(table, "end_to_end_pooled", sampler=SMALL, seed=4)
    ranked = arviz_stats.compare({"end_to_end": exact.tree, "end_to_end_pooled": pooled.tree})
    assert sorted(ranked.index) == ["end_to_end", "end_to_end_pooled"]
    assert np.isclose(ranked["weight"].sum(), 1.0)


def test_exact_leave_one_out_is_the_prior_predictive_of_the_cell():
    """Checked against Monte Carlo over the prior (the refit without the cell leaves its
    rate at the prior), and against PSIS-LOO where PSIS can see it."""
    table = _sparse_end_to_end()
    posterior = bayes_eval.fit(table, "end_to_end")  # Beta(1, 1) prior
    loo = exact_loo(posterior)
    assert list(loo["cell"].values) == list(posterior.tree["observed_data"]["cell"].values)
    rng = np.random.default_rng(0)
    p = rng.beta(1.0, 1.0, 400_000)
    for cell, (k, n) in {"b / t4 / end_to_end": (2, 5), "a / t4 / end_to_end": (0, 3)}.items():
        monte_carlo = np.log(stats.binom.pmf(k, n, p).mean())
        assert loo.sel(cell=cell).item() == pytest.approx(monte_carlo, abs=0.01)
    # a one-trial cell under a uniform prior: either outcome has probability 1/2
    assert loo.sel(cell="a / t1 / end_to_end").item() == pytest.approx(np.log(0.5), rel=1e-12)
    milestones = pd.DataFrame(
        dict(task="t", method="milestone", step=[1, 2], successes=[1, 2], trials=[3, 4])
    )
    haldane = exact_loo(bayes_eval.fit(milestones, "phuong2024"))  # proper posteriors
    assert haldane.sizes["cell"] == 2 and np.isnan(haldane.values).all()  # improper prior


def test_exact_in_sample_density_is_the_posterior_predictive_of_the_cell():
    """``compare`` scores an exact fit without draws: each cell's in-sample log predictive
    density in closed form, checked by hand, against the mean over the tree's own draws,
    and at a point-mass posterior (Haldane's prior after zero successes)."""
    posterior = bayes_eval.fit(_sparse_end_to_end(), "end_to_end")  # Beta(1, 1) prior
    lppd = exact_log_predictive(posterior)["lppd"]
    # one success in one trial: Beta(2, 1), so P(success) = E[p] = 2/3
    assert lppd.sel(cell="a / t2 / end_to_end").item() == pytest.approx(np.log(2 / 3), rel=1e-12)
    (log_lik,) = posterior.tree["log_likelihood"].data_vars.values()
    values = log_lik.values.reshape(-1, log_lik.sizes["cell"])
    monte_carlo = special.logsumexp(values, axis=0) - np.log(values.shape[0])
    assert list(lppd["cell"].values) == list(log_lik["cell"].values)
    np.testing.assert_allclose(lppd.values, monte_carlo, atol=0.02)
    milestones = pd.DataFrame(
        dict(task="t", method="milestone", step=[1, 2], successes=[4, 2], trials=[4, 4])
    )
    haldane = exact_log_predictive(bayes_eval.fit(milestones, "phuong2024"))
    # Beta(4, 0): p = 1, so four successes are certain; Beta(2, 2): the beta-binomial
    assert haldane["lppd"].values[0] == 0.0
    assert haldane["lppd"].values[1] == pytest.approx(stats.betabinom.logpmf(2, 4, 2, 2))
    assert np.isnan(haldane["elpd_loo"].values).all()  # the improper prior predicts nothing


def test_the_hand_written_kernels_are_scipys_arithmetic_bit_for_bit():
    """The binomial log-likelihood of an exact tree and the bisections of the exact
    product's small-x law skip scipy's per-call overhead; their numbers may not move."""
    rng = np.random.default_rng(0)
    n = rng.integers(1, 200, size=2000)
    k = rng.integers(0, n + 1)
    k[:50], k[50:100] = 0, n[50:100]
    p = rng.uniform(size=(6, 2000))
    p[0, ::3], p[1, ::5], p[2, ::7] = 0.0, 1.0, np.nan
    p[3] = rng.beta(0.01, 0.01, size=2000)
    np.testing.assert_array_equal(binomial_logpmf(k, n, p), stats.binom.logpmf(k, n, p))
    for columns in (1, 2, 7, 40):
        values = rng.normal(scale=50.0, size=(300, columns)).round(rng.integers(0, 3))
        values[0] = values[0].max()  # ties at the top
        np.testing.assert_array_equal(log_sum_exp(values), special.logsumexp(values, axis=1))


def test_the_crossed_pointwise_likelihood_integrates_the_graphs_own_terms():
    """The crossed model samples each pair's departure ``cell_z``; its pointwise
    log-likelihood integrates it out in numpy. Held to the graph: at random points of the
    model PyMC samples, a pair's value is ``log integral exp(L(z)) phi(z) dz`` plus its
    binomial coefficient, ``L(z)`` the pair's own term of the graph's ``k_binomial`` (the
    vector the potential sums: the mixture of the usual and the surprising departure) as
    its ``cell_z`` moves, by scipy's adaptive quadrature."""
    import pytensor.tensor as pt
    import xarray as xr

    from bayes_eval.crossed.likelihood import log_likelihood
    from bayes_eval.crossed.model import build_model, design_of
    from bayes_eval.fit import usable_rows
    from bayes_eval.specs import load_spec

    spec = load_spec("crossed")
    evidence = bayes_eval.load_evidence(_sparse_end_to_end())
    with collected():
        design = design_of(usable_rows(evidence, spec), spec, evidence)
    model = build_model(design, spec)
    (total,) = model.replace_rvs_by_values([model["k_binomial"]])
    assert isinstance(total.owner.op, pt.math.Sum)  # the potential sums one term per pair
    each = model.compile_fn(
        total.owner.inputs[0], inputs=model.value_vars, on_unused_input="ignore"
    )
    scalars = ["cell_scale", "surprise_share", "surprise_width"]  # the shipped spec's mixture
    assert set(scalars) <= set(model.named_vars)
    names = ["ability", "difficulty", *scalars]
    derived = model.compile_fn(
        model.replace_rvs_by_values([model[v] for v in names]),
        inputs=model.value_vars,
        on_unused_input="ignore",
    )
    layout, rng = design.layout, np.random.default_rng(11)
    start = model.initial_point()
    for _ in range(3):
        point = {name: v + rng.normal(0, 0.7, np.shape(v)) for name, v in start.items()}
        ability, difficulty, *values = derived(point)
        draws = xr.Dataset(
            {
                "ability": (("chain", "draw", "agent"), ability[None, None]),
                "difficulty": (("chain", "draw", "task"), difficulty[None, None]),
                **{
                    name: (("chain", "draw"), np.array([[value]]))
                    for name, value in zip(scalars, values, strict=True)
                },
            }
        )
        twin = log_likelihood(draws, design, spec)["successes"].values[0, 0]
        for pair in range(len(layout.pairs)):
            integral = _integrated_departure(each, point, pair)
            coefficient = _log_binomial_coefficients(layout.e2e_k[pair], layout.e2e_n[pair])
            expected = integral + coefficient
            assert twin[pair] == pytest.approx(expected, rel=1e-9, abs=1e-9)


def _integrated_departure(each, point, pair) -> float:
    """``log integral exp(L(z)) phi(z) dz``, ``L(z)`` the graph's term of ``pair`` (``each``
    at ``point``, the pair's ``cell_z`` at ``z``), by scipy's adaptive quadrature around
    the integrand's peak, scaled there so that tiny values keep their digits."""
    from scipy import integrate, optimize

    def log_f(z):
        moved = point["cell_z"].copy()
        moved[pair] = z
        return float(each({**point, "cell_z": moved})[pair]) + stats.norm.logpdf(z)

    peak = optimize.minimize_scalar(lambda z: -log_f(z), bounds=(-30, 30), method="bounded").x
    top = log_f(peak)
    value, _ = integrate.quad(
        lambda z: np.exp(log_f(z) - top), peak - 12, peak + 12,
        epsabs=0, epsrel=1e-13, limit=2000,
    )  # fmt: skip
    return float(np.log(value) + top)
