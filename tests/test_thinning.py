"""Binomial counts under a product of Beta rates, by thinning one factor at a time, against
closed forms (the beta-binomial; a product of Betas that is itself a Beta) and scipy's
numerical integration."""

import numpy as np
import pytest
from scipy import integrate, stats

from bayes_eval.exact.thinning import THINNING_MAX_STATES, product_binomial_sf


def beta_binomial_tail(k, n, a, b):
    """``P(Y >= k)``, ``Y ~ BetaBinomial(n, a, b)``: scipy's probabilities of ``k..n``
    added up (``betabinom.sf`` is ``1 - cdf``, which keeps no relative precision in a small
    tail)."""
    return np.array(
        [
            stats.betabinom.pmf(np.arange(max(ki, 0), ni + 1), ni, ai, bi).sum()
            for ki, ni, ai, bi in zip(k, n, a, b, strict=True)
        ]
    )


def test_one_factor_is_the_beta_binomial_tail():
    rng = np.random.default_rng(1)
    n = rng.integers(1, 60, 400)
    k = rng.integers(0, n + 2)
    a, b = rng.uniform(0.05, 30, (2, 400))
    got = product_binomial_sf(k, n, a[:, None], b[:, None])
    np.testing.assert_allclose(got, beta_binomial_tail(k, n, a, b), rtol=1e-11)


def test_a_product_that_is_a_beta_gives_that_betas_tail():
    """``Beta(a, b) * Beta(a + b, c) * Beta(a + b + c, d)`` is ``Beta(a, b + c + d)`` (the
    factors independent): the chain of three must give the one-factor tail."""
    rng = np.random.default_rng(2)
    a, b, c, d = rng.uniform(0.3, 8, (4, 200))
    n = rng.integers(1, 80, 200)
    k = rng.integers(1, n + 1)
    alpha = np.stack([a, a + b, a + b + c], axis=1)
    beta = np.stack([b, c, d], axis=1)
    got = product_binomial_sf(k, n, alpha, beta)
    np.testing.assert_allclose(got, beta_binomial_tail(k, n, a, b + c + d), rtol=1e-11)


@pytest.mark.parametrize(("k", "n", "shapes"), [(4, 9, (3, 2, 5, 1.5)), (1, 6, (0.5, 0.5, 2, 7))])
def test_two_factors_against_numerical_integration(k, n, shapes):
    a1, b1, a2, b2 = shapes

    def integrand(p2, p1):
        density = stats.beta.pdf(p1, a1, b1) * stats.beta.pdf(p2, a2, b2)
        return stats.binom.sf(k - 1, n, p1 * p2) * density

    expected = integrate.dblquad(integrand, 0, 1, 0, 1, epsabs=1e-12, epsrel=1e-10)[0]
    got = product_binomial_sf([k], [n], [[a1, a2]], [[b1, b2]])
    np.testing.assert_allclose(got, [expected], rtol=1e-7)


def test_point_masses_absent_factors_and_edges():
    one = stats.betabinom.sf(2, 9, 3.0, 2.0)
    # b = 0 passes every trial; NaN pads an absent factor
    got = product_binomial_sf(
        [3, 3], [9, 9], [[3.0, 7.0], [3.0, np.nan]], [[2.0, 0.0], [2.0, np.nan]]
    )
    np.testing.assert_allclose(got, [one, one], rtol=1e-12)
    # no successes asked for: certain; more than the trials: impossible
    assert product_binomial_sf([0, 10], [9, 9], [[3.0], [3.0]], [[2.0], [2.0]]).tolist() == [
        1.0,
        0.0,
    ]
    # an improper factor (a = 0, a Haldane zero) and a chain past the limit: no answer
    n = THINNING_MAX_STATES + 5
    got = product_binomial_sf([3, 2], [9, n], [[0.0], [3.0]], [[2.0], [2.0]])
    assert np.isnan(got).all()


def test_the_tail_falls_with_k_and_starts_at_one():
    rng = np.random.default_rng(3)
    n = 25
    k = np.arange(0, n + 2)
    alpha = np.broadcast_to(rng.uniform(0.5, 9, 4), (k.size, 4))
    beta = np.broadcast_to(rng.uniform(0.5, 9, 4), (k.size, 4))
    tail = product_binomial_sf(k, np.full(k.size, n), alpha, beta)
    assert tail[0] == 1.0 and tail[-1] == 0.0
    assert np.all(np.diff(tail) <= 0)
