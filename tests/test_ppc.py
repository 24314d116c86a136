"""Posterior predictive checks: mid-p values and the predictive groups."""

import numpy as np
import pandas as pd
from scipy import stats

import bayes_eval
from bayes_eval.results.predictive import beta_binomial_sf, mid_p, predictive_checks


def test_mid_p_value_matches_the_beta_binomial_predictive():
    # end_to_end (uniform prior): k_rep ~ BetaBinomial(n, 1 + k, 1 + n - k) exactly
    frame = pd.DataFrame(
        dict(task=["a", "b"], method="end_to_end", successes=[2, 9], trials=[20, 10])
    )
    posterior = bayes_eval.fit(frame, "end_to_end")
    checks = predictive_checks(posterior).set_index("task")
    for task, k, n in (("a", 2, 20), ("b", 9, 10)):
        truth = stats.betabinom(n, 1 + k, 1 + n - k)
        expected = truth.sf(k) + 0.5 * truth.pmf(k)
        draws = posterior.tree["posterior"]["p_task"].sel(task=task).values.ravel()
        per_draw = stats.binom.sf(k, n, draws) + 0.5 * stats.binom.pmf(k, n, draws)
        standard_error = per_draw.std() / np.sqrt(draws.size)
        assert abs(checks.loc[task, "p_value"] - expected) < 4 * standard_error
    assert not checks["flagged"].any()


def test_mid_p_at_a_subnormal_rate_draw():
    """A rate drawn at 6e-309 (scipy's binom.pmf raises OverflowError between about
    5.6e-309 and 7.6e-309): by hand, P(k_rep > 0) + P(k_rep = 0) / 2 is 1/2 (to 1e-308)
    at that p and 1/2 + 1/4 at p = 1/2, mean 0.625; with k = 1 of 3 it is 3p^2 + 3p (1 -
    p)^2 / 2 at p, and 0 at p = 0: mean 4.5e-309."""
    import pytest

    assert mid_p(0, 1, np.array([6e-309, 0.5])) == 0.625
    assert mid_p(1, 3, np.array([6e-309, 0.0])) == pytest.approx(4.5e-309, rel=1e-9)


def test_predictive_groups_replicate_every_cell_in_arviz_layout(tmp_path):
    posterior = bayes_eval.fit(bayes_eval.resources.example_evidence())
    tree = posterior.tree
    replicated = tree["posterior_predictive"]["successes"]
    observed = tree["observed_data"]["successes"]
    trials = tree["constant_data"]["trials"]
    checks = predictive_checks(posterior)
    assert replicated.dims == ("chain", "draw", "cell")
    assert replicated.sizes["cell"] == observed.sizes["cell"] == len(checks) > 0
    assert list(observed["task"].values) == list(checks["task"])
    assert (observed.values == checks["successes"].to_numpy()).all()
    assert (trials.values == checks["trials"].to_numpy()).all()
    assert (replicated.values <= trials.values).all() and (replicated.values >= 0).all()
    loaded = bayes_eval.load_posterior(posterior.to_netcdf(tmp_path / "p.nc"))
    assert loaded.tree["posterior_predictive"]["successes"].equals(replicated)
    assert loaded.tree["observed_data"]["successes"].equals(observed)


def test_the_beta_binomial_tail_over_many_cells_is_scipys_to_the_last_bit():
    """Exact fits' p-values sum each cell's probabilities as scipy does, cells of one k
    at once: equal to ``scipy.stats.betabinom.sf`` bit for bit, edges included (k = n,
    a zero shape, a count beyond n)."""
    rng = np.random.default_rng(7)
    n = rng.integers(1, 200, 5_000).astype(float)
    k = np.floor(rng.random(5_000) * (n + 1))
    a, b = rng.gamma(0.5, 2, 5_000) + k, rng.gamma(0.5, 2, 5_000) + n - k
    edges = np.array([[0, 3, 0, 1], [3, 3, 1, 0], [5, 4, 1, 2], [2, 7, 0.5, 0.5]]).T
    k, n, a, b = (np.concatenate([x, e]) for x, e in zip((k, n, a, b), edges, strict=True))
    expected = stats.betabinom.sf(k, n, a, b)
    assert np.array_equal(beta_binomial_sf(k, n, a, b), expected, equal_nan=True)


def test_each_cells_pit_is_randomised_between_its_beta_binomial_cdfs():
    """An end-to-end cell under the uniform prior has the predictive BetaBinomial(n, 1 + k,
    1 + n - k): its PIT lies between scipy's cdf(k - 1) and cdf(k), at a uniform place
    between them (Kolmogorov-Smirnov over 400 cells), and one seed gives one PIT."""
    rng = np.random.default_rng(3)
    n = rng.integers(1, 30, size=400)
    k = rng.binomial(n, rng.uniform(size=400))
    frame = pd.DataFrame(
        dict(task=[f"t{i}" for i in range(400)], method="end_to_end", successes=k, trials=n)
    )
    posterior = bayes_eval.fit(frame, "end_to_end")
    checks = predictive_checks(posterior)
    truth = stats.betabinom(n, 1 + k, 1 + n - k)
    low, high = truth.cdf(k - 1), truth.cdf(k)
    pit = checks["pit"].to_numpy()
    assert (low - 1e-12 <= pit).all() and (pit <= high + 1e-12).all()
    place = (pit - low) / (high - low)
    assert stats.kstest(place, "uniform").pvalue > 0.01
    assert (predictive_checks(posterior)["pit"].to_numpy() == pit).all()
