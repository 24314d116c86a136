"""Exact tails and exceedance probabilities against independent high-precision references.

The claim (docs/models.md, "How the exact numbers are computed"): each quantile of
``X = -log P`` is within ``QUANTILE_TOLERANCE * min(1, X)`` of the truth, so both ``P``
and ``1 - P`` carry a relative error of at most 1e-4, from level 0.5 to 1 - 1e-12; and
``P(P > tau)`` is the exact probability at a threshold within that distance of ``tau``.
Each check brackets the answer: ``F(x - d) <= q <= F(x + d)``, with ``F`` from
``tests/reference.py``.
"""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import special, stats

from bayes_eval.exact.factors import QUANTILE_TOLERANCE
from bayes_eval.exact.grid import GRID_SMALLEST_X
from bayes_eval.exact.products import BetaProduct, summarise_products
from tests.reference import beta_tails, boost_beta_tails, bromwich_tails, two_factor_tails

LEVELS = np.array([0.5, 0.975, 1 - 1e-6, 1 - 1e-12])
PROBS = np.concatenate([1 - LEVELS[1:], LEVELS])  # upper bounds, then lower bounds


def summarise(components, probs=PROBS, x_points=()):
    product = BetaProduct(tuple((np.array(a, float), np.array(b, float)) for a, b in components))
    return summarise_products([product], probs, np.array(x_points, float))[0]


def reach(x, error=QUANTILE_TOLERANCE):
    """The claimed accuracy at ``x``."""
    return error * max(min(1.0, x), GRID_SMALLEST_X)


def assert_quantiles_bracketed(summary, tails, probs=PROBS, claim=QUANTILE_TOLERANCE):
    """Within the tolerance; or, where ``claim`` allows more, within the error reported."""
    assert summary.error <= claim
    for q, x in zip(probs, summary.x_quantiles, strict=True):
        d = reach(x, max(summary.error, QUANTILE_TOLERANCE))
        below, above = tails(max(x - d, 0.0)), tails(x + d)
        if q < 0.5:
            assert below[0] <= q <= above[0], (q, x)
        else:
            assert above[1] <= 1 - q <= below[1], (q, x)


def assert_exceedance_bracketed(summary, x_points, tails):
    for x, value in zip(x_points, summary.x_cdf, strict=True):
        d = reach(x)
        assert tails(max(x - d, 0.0))[0] <= value <= tails(x + d)[0], (x, value)


# The references themselves, against closed forms.


def test_bromwich_reference_is_the_closed_form():
    # Beta(2, 3) x Beta(5, 10) is exactly Beta(2, 13)
    for x in (0.5, 20.0):
        lower, upper = bromwich_tails([2, 5], [3, 10], x)
        assert float(lower) == pytest.approx(stats.beta.sf(math.exp(-x), 2, 13), rel=1e-12)
        assert float(upper) == pytest.approx(stats.beta.cdf(math.exp(-x), 2, 13), rel=1e-12)


def test_two_factor_reference_is_the_closed_form_at_tiny_shapes():
    # Beta(10.02, 0.02) x Beta(10, 0.02) is exactly Beta(10, 0.04)
    for x in ("1e-41", "1e-9", "0.01", "3"):
        got = two_factor_tails([10.02, 10.0], [0.02, 0.02], mp.mpf(x))
        want = beta_tails(10.0, 0.04, mp.mpf(x))
        assert abs(got[0] / want[0] - 1) < 1e-15
        assert abs(got[1] / want[1] - 1) < 1e-8  # far beyond the 1e-4 checked below


@pytest.mark.parametrize(
    ("a", "b", "xs"),
    [
        (2e5, 606.0, ["0.003", "0.0037", "0.005"]),
        (0.1, 2005.0, ["1e-5", "3", "215"]),
        (1e4, 0.04, ["1e-30", "1e-6", "2e-3"]),
        (0.05, 3e3, ["0.9", "40", "900"]),  # past x = 700: the power law
    ],
)
def test_boost_reference_agrees_with_mpmath(a, b, xs):
    for x in xs:
        want = beta_tails(a, b, mp.mpf(x))
        got = boost_beta_tails(a, b, float(x))
        for g, w in zip(got, want, strict=True):
            # scipy's log-Beta loses about 1e-12 of the power law's exponent at b = 3e3
            assert abs(g - float(w)) <= 1e-10 * float(w), (x, g, w)


# The package against them.


def test_near_singular_factors_have_exact_tails_and_exceedance():
    """Issue case: steps at 10/10 under Beta(1/50, 1/50); mass piled at P = 1."""
    components = [([10.02, 10.02], [0.02, 0.02])]
    x_points = [1e-5, -math.log(0.999), -math.log(0.5)]
    summary = summarise(components, x_points=x_points)
    tails = lambda x: two_factor_tails([10.02, 10.02], [0.02, 0.02], x)  # noqa: E731
    assert_quantiles_bracketed(summary, tails)
    assert_exceedance_bracketed(summary, x_points, tails)
    assert summary.x_cdf[0] == pytest.approx(0.7060, abs=1e-3)  # P(P > 1 - 1e-5)
    assert 0 < summary.x_quantiles[1] < 1e-40  # the 97.5% upper bound is 1 - 5e-42


def test_tiny_shapes_at_ten_million_trials_match_the_closed_form():
    components = [([1e7 + 0.02, 1e7], [0.02, 0.02])]  # exactly Beta(10^7, 0.04)
    x_points = [1e-30, 1e-9]
    summary = summarise(components, x_points=x_points)
    tails = lambda x: beta_tails(1e7, 0.04, x)  # noqa: E731
    assert_quantiles_bracketed(summary, tails)
    assert_exceedance_bracketed(summary, x_points, tails)


@pytest.mark.parametrize(
    "components",
    [
        [([11.0] * 4, [1e6 - 9] * 4)],  # four factors of 10/10^6: the median was 1.2% off
        pytest.param([([10.0, 1e7], [1e7, 10.0])], marks=pytest.mark.slow),  # shapes 10 and 10^7
        pytest.param([([4.0, 21.0], [18.0, 5.0])], marks=pytest.mark.slow),  # small counts
    ],
)
def test_products_have_exact_tails_at_any_level(components):
    ((a, b),) = components
    x_points = [float(x) for x in summarise(components, np.array([1e-9, 0.3])).x_quantiles]
    summary = summarise(components, x_points=x_points)
    tails = lambda x: bromwich_tails(a, b, x)  # noqa: E731
    assert_quantiles_bracketed(summary, tails)
    assert_exceedance_bracketed(summary, x_points, tails)


def test_exceedance_deep_in_the_lower_tail_of_many_factors():
    """Ten factors of shape 2.5 (a telescoping product: exactly Beta(8.5, 25)), where
    P(P > 1 - 1e-5) is 1e-127. Untilted, the grid capped just above x lost it in the
    FFT's rounding (by a factor of 1,000): the sum's mass sits near ten times the cap."""
    a, b = np.cumsum([8.5] + [2.5] * 9), [2.5] * 10
    x_points = [1e-5, 1e-2, 0.5]
    summary = summarise([(a, b)], np.array([0.5]), x_points)
    assert_exceedance_bracketed(summary, x_points, lambda x: beta_tails(8.5, 25.0, x))


def test_bounds_far_above_the_mean_of_large_shapes():
    """Beta(2e5, 600) x Beta(200600, 6), exactly Beta(2e5, 606): the lower bound at level
    1 - 1e-6 was 44% off, and P(P > tau) there 1 where it is 1 - 1e-6. The grid capped
    just above it was tilted upwards, which scaled its low end's rounding up by 1e27."""
    components = [([2e5, 2e5 + 600], [600.0, 6.0])]
    x_points = [0.0032, 0.0037, 0.0040]  # the 90%, 99.99998% and 1 - 1e-12 points
    summary = summarise(components, x_points=x_points)
    tails = lambda x: beta_tails(2e5, 606.0, x)  # noqa: E731
    assert_quantiles_bracketed(summary, tails)
    assert_exceedance_bracketed(summary, x_points, tails)


def test_exceedance_far_in_a_heavy_upper_tail():
    """Beta(0.1, 2000) x Beta(2000.1, 5), exactly Beta(0.1, 2005), at P = e^-215, where
    P(P > tau) is 1 - 1e-9: it was read from the grid's CDF, 6e-5 off in its tail."""
    components = [([0.1, 2000.1], [2000.0, 5.0])]
    x_points = [215.33]
    summary = summarise(components, np.array([0.5]), x_points)
    tails = lambda x: beta_tails(0.1, 2005.0, x)  # noqa: E731
    assert_exceedance_bracketed(summary, x_points, tails)
    assert 1 - summary.x_cdf[0] == pytest.approx(float(tails(215.33)[1]), rel=1e-5)


def test_mixture_over_runs_has_exact_tails():
    components = [([10.02, 3.0], [0.02, 8.0]), ([2.0, 10.02], [1.0, 0.02])]

    def tails(x):
        parts = [two_factor_tails(a, b, x) for a, b in components]
        return tuple(sum(p[k] for p in parts) / 2 for k in (0, 1))

    x_points = [1e-3, 0.5]
    summary = summarise(components, x_points=x_points)
    assert_quantiles_bracketed(summary, tails)
    assert_exceedance_bracketed(summary, x_points, tails)


@pytest.mark.parametrize(
    ("a1", "bs", "claim"),
    [
        (0.5, [3.0, 0.7, 12.0, 0.3], QUANTILE_TOLERANCE),
        (2.0, [40.0] * 10, QUANTILE_TOLERANCE),
        # Mass piled at P = 0 as well: X spans 1e-190 to 1400, and P at the lower bounds
        # (1e-294, 1e-594) is below any double: a grid of the finest affordable step,
        # placed by each bin's mean.
        pytest.param(0.02, [0.02, 0.02, 0.02], QUANTILE_TOLERANCE, marks=pytest.mark.slow),
    ],
)
def test_many_factors_match_telescoping_closed_forms_at_any_level(a1, bs, claim):
    """Beta(a, b1) x Beta(a + b1, b2) x ... is exactly Beta(a, b1 + b2 + ...)."""
    a = np.cumsum([a1, *bs[:-1]])
    summary = summarise([(a, bs)])
    assert_quantiles_bracketed(summary, lambda x: beta_tails(a1, sum(bs), x), claim=claim)


def test_shapes_where_scipy_cannot_invert_the_far_tail():
    """scipy's ``betaincinv`` gives NaN for a just above 1 below 1e-16, where the grid
    sets its support (found by Hypothesis: Beta(1, 1) x Beta(0.75, 1.03125))."""
    components = [([1.0, 0.75], [1.0, 1.03125])]
    summary = summarise(components, np.array([0.025, 0.5, 0.975]))
    tails = lambda x: two_factor_tails([1.0, 0.75], [1.0, 1.03125], x)  # noqa: E731
    assert_quantiles_bracketed(summary, tails, np.array([0.025, 0.5, 0.975]))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_random_telescoping_products_at_any_level(seed):
    """Shapes drawn log-uniform from 0.02 to 10^7, 2 to 5 factors: each is exactly
    Beta(a1, sum b). Quantiles at every level and exceedance at points from 1e-9 to 1 -
    1e-9 of the closed form."""
    rng = np.random.default_rng(seed)
    a1 = float(np.exp(rng.uniform(math.log(0.02), math.log(1e7))))
    bs = np.exp(rng.uniform(math.log(0.02), math.log(1e7), rng.integers(2, 6)))
    a = np.cumsum([a1, *bs[:-1]])
    b_sum = float(bs.sum())
    qs = np.array([1e-9, 0.01, 0.5, 0.99, 1 - 1e-9])
    with np.errstate(divide="ignore"):
        x_points = np.where(
            qs < 0.5,
            -np.log1p(-special.betaincinv(b_sum, a1, qs)),
            -np.log(special.betaincinv(a1, b_sum, 1 - qs)),
        )
    x_points = x_points[np.isfinite(x_points) & (x_points > 1e-290)]
    summary = summarise([(a, bs)], x_points=x_points)
    tails = lambda x: boost_beta_tails(a1, b_sum, x)  # noqa: E731
    assert_quantiles_bracketed(summary, tails)
    assert_exceedance_bracketed(summary, x_points, tails)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "smallest", "probs"),
    [(0, 1.0, PROBS), (1, 1.0, PROBS)]
    + [(seed, 10.0, np.array([0.01, 0.025, 0.1, 0.5, 0.9, 0.975, 0.99])) for seed in range(3)],
)
def test_random_products_of_large_shapes_at_any_level(seed, smallest, probs):
    """Products that do not telescope, shapes log-uniform from ``smallest`` to 10^7,
    against the inversion integral. With every shape >= 10 and levels to 0.99 these take
    the saddlepoint; otherwise the grid."""
    rng = np.random.default_rng(1000 + seed)
    m = int(rng.integers(2, 5))
    a, b = np.exp(rng.uniform(math.log(smallest), math.log(1e7), (2, m)))
    x_points = summarise([(a, b)], np.array([0.05, 0.3, 0.9])).x_quantiles
    summary = summarise([(a, b)], probs, x_points)
    assert summary.engine == ("saddlepoint" if smallest >= 10 else "grid")
    tails = lambda x: bromwich_tails(a, b, x)  # noqa: E731
    assert_quantiles_bracketed(summary, tails, probs)
    assert_exceedance_bracketed(summary, x_points, tails)
