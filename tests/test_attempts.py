"""pass@k and pass^k of a Beta posterior against mpmath at 60 digits, and the quantile
mapping against a direct computation."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayes_eval.exact.attempts import (
    DIRECT,
    all_of,
    at_least_one,
    log_beta_ratio,
    mean_all_of,
    mean_at_least_one,
)

SHAPES = (0.05, 0.5, 1.0, 3.0, 20.5, 1e3, 1e6)
SECOND_SHAPES = (0.05, 0.5, 2.0, 100.0, 1e4, 1e7, 2e9)
# k on both sides of the direct sum's end, and the deployment scales
ATTEMPTS = (1, 10, DIRECT - 1, DIRECT, DIRECT + 1, DIRECT + 17, 10**6, 10**9)


def _reference(a: float, b: float, k: int) -> tuple[float, float]:
    """``E[1 - (1 - P)^k]`` and ``E[P^k]`` for ``P ~ Beta(a, b)``, at 60 digits."""
    with mp.workdps(60):
        a, b, k = mp.mpf(a), mp.mpf(b), mp.mpf(k)
        log_beta = mp.log(mp.beta(a, b))
        none = mp.log(mp.beta(a, b + k)) - log_beta
        every = mp.log(mp.beta(a + k, b)) - log_beta
        return float(-mp.expm1(none)), float(mp.exp(every))


@pytest.mark.parametrize("a", SHAPES)
def test_the_means_match_mpmath_to_1e_9(a):
    b, k = np.meshgrid(SECOND_SHAPES, ATTEMPTS, indexing="ij")
    pairs = zip(b.ravel(), k.ravel(), strict=True)
    expected = np.array([_reference(a, bb, kk) for bb, kk in pairs])
    at_least = mean_at_least_one(a, b, k).ravel()
    every = mean_all_of(a, b, k).ravel()
    np.testing.assert_allclose(at_least, expected[:, 0], rtol=1e-9, atol=0)
    np.testing.assert_allclose(every, expected[:, 1], rtol=1e-9, atol=1e-300)


def test_the_naive_difference_of_betaln_would_fail_where_the_ratio_holds():
    """The case that motivates the direct sum: a 1% error from cancellation."""
    from scipy.special import betaln

    a, b, k = 20.5, 1e7, 1
    expected = _reference(a, b, k)[0]
    naive = -np.expm1(betaln(a, b + k) - betaln(a, b))
    assert abs(naive / expected - 1) > 1e-3
    assert abs(mean_at_least_one(a, b, k) / expected - 1) < 1e-12


def test_one_attempt_is_the_beta_mean_and_none_is_nothing():
    a, b = np.array([0.5, 3.0, 40.0]), np.array([7.0, 0.25, 2e6])
    np.testing.assert_allclose(mean_at_least_one(a, b, 1), a / (a + b), rtol=1e-14)
    np.testing.assert_allclose(mean_all_of(a, b, 1), a / (a + b), rtol=1e-14)
    np.testing.assert_array_equal(log_beta_ratio(a, b, 0), 0.0)


@settings(max_examples=200, deadline=None)
@given(
    p=st.floats(0.0, 1.0),
    k=st.integers(1, 10**9),
)
def test_the_quantile_mapping_is_the_direct_power_and_monotone(p, k):
    digits = 40 + (0 if p == 0 else max(0, -int(np.floor(np.log10(p)))))
    with mp.workdps(digits):  # enough digits that 1 - p keeps p's own
        at_least, every = 1 - (1 - mp.mpf(p)) ** k, mp.mpf(p) ** k
    assert at_least_one(p, k) == pytest.approx(float(at_least), rel=1e-9, abs=1e-300)
    assert all_of(p, k) == pytest.approx(float(every), rel=1e-6, abs=1e-300)
    # monotone in P: a quantile of P maps to the same quantile of pass@k and pass^k
    assert at_least_one(min(1.0, p * 1.01), k) >= at_least_one(p, k)
    assert all_of(min(1.0, p * 1.01), k) >= all_of(p, k)


def test_the_mean_of_draws_converges_to_the_closed_form():
    """Monte Carlo with known truth: 400,000 Beta draws, well inside 5 standard errors."""
    rng = np.random.default_rng(7)
    a, b, k = 0.4, 2.5, 12
    draws = rng.beta(a, b, 400_000)
    for value, mean in (
        (at_least_one(draws, k), mean_at_least_one(a, b, k)),
        (all_of(draws, k), mean_all_of(a, b, k)),
    ):
        se = value.std() / np.sqrt(value.size)
        assert abs(value.mean() - mean) < 5 * se


def test_a_ratio_of_fixed_shapes_is_log_beta_ratio_at_every_k():
    """``LogBetaRatio`` sums the first DIRECT factors once: at one k for all shapes it is
    ``log_beta_ratio`` to the bit, below, at and past DIRECT; at a k per shape (some
    near, some far), the same to 1e-13 relative."""
    from bayes_eval.exact.attempts import DIRECT, LogBetaRatio, log_beta_ratio

    rng = np.random.default_rng(0)
    a, b = rng.gamma(1.0, 2.0, size=(300, 4)), rng.gamma(1.0, 5.0, size=(300, 4))
    ratio = LogBetaRatio(a, b)
    for k in (1, 7, DIRECT - 1, DIRECT, DIRECT + 1, 10**4, 10**9):
        assert (ratio(float(k)) == log_beta_ratio(a, b, float(k))).all()
    k = rng.choice([3.0, 999.0, 1000.0, 1001.0, 5e5], size=a.shape)
    np.testing.assert_allclose(ratio(k), log_beta_ratio(a, b, k), rtol=1e-13)
