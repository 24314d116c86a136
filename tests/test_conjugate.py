"""Exact posteriors against closed forms, scipy and independent numerical integration."""

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from bayes_eval.exact.factors import QUANTILE_TOLERANCE
from bayes_eval.exact.products import (
    BetaProduct,
    clopper_pearson_upper,
    log_beta_draws,
    summarise_products,
)
from bayes_eval.exact.saddlepoint import SADDLEPOINT_ERROR

PROBS = np.array([0.01, 0.025, 0.5, 0.975, 0.99])
# Relative error in P allowed by the design (0.1%); the engines promise QUANTILE_TOLERANCE.
REL = 1e-3


def upper_bounds(product, probs=PROBS):
    """P quantiles at 1 - probs (so probs=0.025 gives the 97.5% upper bound)."""
    (summary,) = summarise_products([product], probs)
    return np.exp(-summary.x_quantiles), summary


def telescoping(a1, bs):
    """Beta(a, b1) x Beta(a + b1, b2) x ... is exactly Beta(a, b1 + b2 + ...)."""
    a = np.cumsum([a1, *bs[:-1]])
    return a, np.asarray(bs, dtype=float)


@pytest.mark.parametrize(
    ("a1", "bs"),
    [
        (1.0, [9.0] * 5),  # five factors, P around 1e-5
        (2.0, [40.0] * 10),  # ten factors
        (12.0, [30.0, 25.0, 40.0]),  # saddlepoint regime
        (0.02, [10.0, 0.02]),  # ECR-like near-singular factors
        (0.5, [3.0, 0.7, 12.0, 0.3]),  # small shapes: grid
        (0.05, [1.0, 1.0]),  # lower bounds far below 1e-20
    ],
)
def test_telescoping_products_match_the_closed_form(a1, bs):
    a, b = telescoping(a1, bs)
    bounds, summary = upper_bounds(BetaProduct(((a, b),)))
    truth = stats.beta.isf(PROBS, a1, sum(bs))
    np.testing.assert_allclose(bounds, truth, rtol=REL)
    if a1 == 0.05:
        assert bounds[-1] < 1e-20
    assert summary.engine != "beta"  # several factors: not the one-factor shortcut


@pytest.mark.parametrize("rate", [1.0, 0.5, 0.2])
@pytest.mark.parametrize("m", [2, 5, 10])
def test_products_of_beta_a_1_are_gamma_in_log_space(m, rate):
    # p ~ Beta(a, 1) => -log p ~ Exponential(rate a); sum of m => Gamma(m, scale 1/a).
    product = BetaProduct(((np.full(m, rate), np.ones(m)),))
    (summary,) = summarise_products([product], PROBS)
    truth = stats.gamma.ppf(PROBS, m, scale=1 / rate)
    assert np.max(np.abs(summary.x_quantiles - truth)) <= QUANTILE_TOLERANCE
    # rate 0.2 and m = 10 reaches P ~ 1e-20 and below
    if rate == 0.2 and m == 10:
        assert np.exp(-summary.x_quantiles[-1]) < 1e-20


@pytest.mark.parametrize(
    ("a", "b"), [((3.0, 20.0), (50.0, 4.0)), ((0.7, 1.3), (9.0, 0.4)), ((15.0, 22.0), (85.0, 78.0))]
)
def test_two_factors_against_quadrature(a, b):
    """Independent numerical integration: F(x) = int f1(y) F2(x - y) dy for X = -log P."""

    def cdf(x):
        f1 = lambda y: stats.beta.pdf(math.exp(-y), a[0], b[0]) * math.exp(-y)  # noqa: E731
        f2 = lambda z: stats.beta.sf(math.exp(-z), a[1], b[1]) if z > 0 else 0.0  # noqa: E731
        return integrate.quad(lambda y: f1(y) * f2(x - y), 0, x, limit=400, epsabs=1e-12)[0]

    product = BetaProduct(((np.array(a), np.array(b)),))
    (summary,) = summarise_products([product], np.array([0.025, 0.975]))
    for q, x in zip((0.025, 0.975), summary.x_quantiles, strict=True):
        truth = optimize.brentq(lambda t, q=q: cdf(t) - q, 1e-6, 200.0, xtol=1e-10)
        assert abs(x - truth) <= QUANTILE_TOLERANCE


def test_single_factor_is_scipy():
    product = BetaProduct(((np.array([3.0]), np.array([17.0])),))
    bounds, summary = upper_bounds(product)
    np.testing.assert_allclose(bounds, stats.beta.isf(PROBS, 3, 17), rtol=1e-10)
    assert summary.engine == "beta" and summary.error == 0


def test_haldane_all_successes_is_a_point_mass_at_one():
    # Beta(20, 0) is a point mass at 1 and drops out of the product.
    with_point = BetaProduct(((np.array([20.0, 4.0]), np.array([0.0, 6.0])),))
    alone = BetaProduct(((np.array([4.0]), np.array([6.0])),))
    np.testing.assert_allclose(upper_bounds(with_point)[0], upper_bounds(alone)[0])
    assert with_point.moments() == pytest.approx(alone.moments())
    only_points = BetaProduct(((np.array([5.0, 9.0]), np.array([0.0, 0.0])),))
    np.testing.assert_array_equal(upper_bounds(only_points)[0], 1.0)
    assert only_points.moments() == (1.0, 0.0)


def test_mixture_over_runs_against_scipy():
    # Equal mixture of Beta(2, 30) and Beta(0.02 + 9, 0.02 + 1) (one-step runs).
    runs = ((np.array([2.0]), np.array([30.0])), (np.array([9.02]), np.array([1.02])))
    bounds, summary = upper_bounds(BetaProduct(runs))

    def mixture_sf(p):
        return 0.5 * (stats.beta.sf(p, 2, 30) + stats.beta.sf(p, 9.02, 1.02))

    truth = [
        optimize.brentq(lambda p, q=q: mixture_sf(p) - q, 1e-12, 1 - 1e-12, xtol=1e-14)
        for q in PROBS
    ]
    np.testing.assert_allclose(bounds, truth, rtol=REL)
    assert summary.engine == "grid"


def test_moments_are_exact():
    a, b = np.array([3.0, 5.0, 0.5]), np.array([7.0, 2.0, 9.5])
    mean, sd = BetaProduct(((a, b),)).moments()
    m1 = np.prod(a / (a + b))
    m2 = np.prod(a * (a + 1) / ((a + b) * (a + b + 1)))
    assert mean == pytest.approx(m1, rel=1e-12)
    assert sd == pytest.approx(math.sqrt(m2 - m1**2), rel=1e-10)
    # mixture: average of the components' moments
    runs = ((np.array([1.0]), np.array([3.0])), (np.array([2.0, 2.0]), np.array([2.0, 6.0])))
    mean, _ = BetaProduct(runs).moments()
    assert mean == pytest.approx(0.5 * (0.25 + 0.5 * 0.25))


def test_saddlepoint_agrees_with_grid_where_it_is_used():
    from bayes_eval.exact.grid import grid_summary

    rng = np.random.default_rng(7)
    for trial in range(30):
        m = int(rng.integers(2, 11))
        a = np.exp(rng.uniform(np.log(10), np.log(200), m))
        b = np.exp(rng.uniform(np.log(10), np.log(200), m))
        a[0] = 10.0  # the edge of the regime, where the approximation is worst
        if trial % 2:
            b[-1] = 10.0
        (fast,) = summarise_products([BetaProduct(((a, b),))], PROBS)
        assert fast.engine == "saddlepoint"
        grid = grid_summary(((a, b),), PROBS, np.zeros(0))
        assert grid.error <= QUANTILE_TOLERANCE
        assert np.max(np.abs(fast.x_quantiles - grid.x_quantiles)) <= SADDLEPOINT_ERROR


def test_cdf_at_threshold_matches_scipy():
    product = BetaProduct(((np.array([2.0, 5.0]), np.array([3.0, 10.0])),))  # = Beta(2, 13)
    tau = 0.05
    (summary,) = summarise_products([product], PROBS, np.array([-math.log(tau)]))
    assert summary.x_cdf[0] == pytest.approx(stats.beta.sf(tau, 2, 13), abs=2e-4)


def test_log_beta_draws_simulation():
    rng = np.random.default_rng(3)
    draws = np.exp(log_beta_draws(np.array([2.0, 0.02]), np.array([8.0, 5.0]), (200_000,), rng))
    assert np.all(np.isfinite(np.log(draws[:, 0])))
    # means within 4 Monte Carlo standard errors
    for j, (a, b) in enumerate([(2.0, 8.0), (0.02, 5.0)]):
        sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
        assert abs(draws[:, j].mean() - a / (a + b)) < 4 * sd / math.sqrt(len(draws))
    tiny = log_beta_draws(np.array([0.02]), np.array([10.0]), (1000,), rng)
    assert np.all(np.isfinite(tiny))  # no underflow to log 0


def test_clopper_pearson_zero_and_all_successes():
    level = 0.975
    assert clopper_pearson_upper(0, 10, level) == pytest.approx(1 - (1 - level) ** (1 / 10))
    assert clopper_pearson_upper(10, 10, level) == 1.0
    assert clopper_pearson_upper(3, 10, level) == pytest.approx(stats.beta.ppf(level, 4, 7))


@pytest.mark.slow
def test_random_products_with_tiny_shapes_stay_within_design_tolerance():
    """Random telescoping products, shapes 0.02 to 100, up to ten factors: within 0.1%.

    The grid's own error estimate can understate such pathological cases (measured:
    true 5.8e-4 against an estimate of 6e-5), which is why provenance calls it an estimate.
    """
    rng = np.random.default_rng(11)
    for _ in range(60):
        m = int(rng.integers(2, 11))
        a1 = float(np.exp(rng.uniform(np.log(0.02), np.log(50))))
        bs = np.exp(rng.uniform(np.log(0.02), np.log(100), m))
        a = np.cumsum([a1, *bs[:-1]])
        (summary,) = summarise_products([BetaProduct(((a, bs),))], PROBS)
        truth = -np.log(stats.beta.isf(PROBS, a1, bs.sum()))
        assert np.max(np.abs(summary.x_quantiles - truth)) <= REL


@pytest.mark.parametrize(
    ("m", "rate"), [(200, 5.0), pytest.param(3000, 5.0, marks=pytest.mark.slow)]
)
def test_long_products_on_the_grid_are_gamma_in_log_space_within_their_reported_error(m, rate):
    """Hundreds to thousands of factors (an expert run of many steps): ``-log p`` of
    Beta(rate, 1) is Exponential(rate), so the sum is Gamma(m, 1 / rate). Past a few
    hundred factors no step within ``GRID_MAX_POINTS`` meets the tolerance (the
    midpoint's bias adds up over the factors): the quantiles are computed at the finest
    step allowed and their reported error must cover the truth (it claimed 1e-4 where
    the error was 3e-4 at 200 factors; each factor kept 2^21 points before, 10 GB at
    500 factors, and the tilted sums overflowed: the median came out near P = 1)."""
    factors = (np.full(m, rate), np.ones(m))
    (summary,) = summarise_products([BetaProduct((factors,))], PROBS)
    assert summary.engine == "grid"
    actual = np.max(np.abs(summary.x_quantiles - stats.gamma.ppf(PROBS, m, scale=1 / rate)))
    assert actual <= summary.error
    if m <= 200:  # 3 times the truth's distance; at 3,000 factors 0.54 against 0.18
        assert summary.error <= 1e-3
