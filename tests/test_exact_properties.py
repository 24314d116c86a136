"""Exact posteriors against an independent reference (mpmath, 50 digits) and their
properties over generated inputs (Hypothesis); the evidence parser never crashes."""

import io
import math

import mpmath
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayes_eval import InputError, load_evidence
from bayes_eval.exact.factors import QUANTILE_TOLERANCE
from bayes_eval.exact.products import BetaProduct, summarise_products

mpmath.mp.dps = 50


def reference_moments(components):
    """Mean and sd of the equal mixture of products of Beta factors, from the moments
    ``E[p^k] = Gamma(a + k) Gamma(a + b) / (Gamma(a) Gamma(a + b + k))`` in 50 digits."""

    def moment(a, b, k):
        return mpmath.fprod(
            mpmath.rf(mpmath.mpf(x), k) / mpmath.rf(mpmath.mpf(x) + mpmath.mpf(y), k)
            for x, y in zip(a, b, strict=True)
        )

    first = sum(moment(a, b, 1) for a, b in components) / len(components)
    second = sum(moment(a, b, 2) for a, b in components) / len(components)
    return float(first), float(mpmath.sqrt(second - first**2))


@pytest.mark.parametrize(
    "components",
    [
        [([5e8 + 1], [5e8 + 1])],  # 5e8 of 1e9 trials, uniform prior: the sd was 0
        [([1.0], [1e15 + 1])],  # 0 of 1e15: the mean was 77% off
        [([1e15 + 1], [1.0])],
        [([10 + 1.0] * 4, [1e6 - 10 + 1.0] * 4)],  # four factors of 10/10^6
        [([0.02, 10.02], [0.02, 0.02]), ([3.0], [1e12])],  # near-singular, and a mixture
    ],
)
def test_moments_at_any_count_match_high_precision(components):
    product = BetaProduct(tuple((np.array(a), np.array(b)) for a, b in components))
    mean, sd = product.moments()
    want_mean, want_sd = reference_moments(components)
    assert mean == pytest.approx(want_mean, rel=1e-12)
    assert sd == pytest.approx(want_sd, rel=1e-9)


shapes = st.floats(min_value=0.05, max_value=1e4, allow_nan=False)
factors = st.lists(st.tuples(shapes, shapes), min_size=1, max_size=4)


def summary(pairs, probs, x_points=()):
    a, b = (np.array(v) for v in zip(*pairs, strict=True))
    return summarise_products([BetaProduct(((a, b),))], np.asarray(probs), np.array(x_points))[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=factors, levels=st.lists(st.floats(0.5, 1 - 1e-9), min_size=2, max_size=5))
def test_quantiles_are_monotone_in_level(pairs, levels):
    levels = np.sort(np.array(levels))
    result = summary(pairs, 1.0 - levels)  # X quantile at 1 - level is P's at level
    upper = np.exp(-result.x_quantiles)
    slack = 2 * max(result.error, QUANTILE_TOLERANCE)
    assert np.all(np.diff(upper) >= -slack * upper[1:])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=factors, level=st.floats(0.6, 0.999))
def test_exceedance_agrees_with_the_quantile(pairs, level):
    """``P(P > upper) = 1 - level`` at the upper bound, within the stated error in X."""
    result = summary(pairs, [1.0 - level])
    x = float(result.x_quantiles[0])
    # the stated tolerance (or the error reported, if larger), relative to X below X = 1
    width = 2 * max(result.error, QUANTILE_TOLERANCE) * min(1.0, x) + 1e-12
    cdf = summary(pairs, [0.5], [x - width, x + width]).x_cdf
    assert cdf[0] - 1e-9 <= 1.0 - level <= cdf[1] + 1e-9


def test_grids_capped_at_other_points_share_their_edges_and_their_numbers():
    """The grids of one product at one step, capped at different points (a CDF value at
    each of two points), read the factors' CDFs at the edges the first computed: the
    same numbers, bit for bit, as grids each made alone."""
    from bayes_eval.exact.grid import _Grid, _supports

    factors = ((np.array([8.77, 7.38, 0.07]), np.array([3.1, 640.0, 0.9])),)
    supports = [_supports(a, b) for a, b in factors]
    shared = _Grid(factors, supports, 3, 1e-3, None)
    for cap in (2.0, 2.5, 1.5):  # longer, then shorter, than the edges kept
        alone = _Grid(factors, supports, 3, 1e-3, None)._cdfs(1e-3, cap - 0.1, cap)
        kept = shared._cdfs(1e-3, cap - 0.1, cap)
        assert shared.tails, "the shared grid keeps its factors' edges"
        for one, other in zip(alone, kept, strict=True):
            assert np.array_equal(one.lower, other.lower) and one.start == other.start


@pytest.mark.xfail(
    strict=True,
    reason="known defect: with a strongly singular density of X near 0 (sum of b about "
    "0.36) the grid converges slower than second order, and its quantile is 2.2e-4 off "
    "relative to X (mpmath: P(X <= x) = 0.4000322 at the 0.4 quantile) while it reports "
    "6.0e-5, above QUANTILE_TOLERANCE; the upper bound on P is 1.3e-4 too low, relatively",
)
def test_exceedance_at_a_strongly_singular_product():
    """A counterexample Hypothesis found to ``test_exceedance_agrees_with_the_quantile``."""
    test_exceedance_agrees_with_the_quantile.hypothesis.inner_test(
        pairs=[(0.3125, 0.3125), (0.3125, 0.05078125)], level=0.6
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=factors.filter(lambda p: len(p) > 1), seed=st.integers(0, 2**32 - 1))
def test_results_do_not_depend_on_the_order_of_factors(pairs, seed):
    order = np.random.default_rng(seed).permutation(len(pairs))
    one = summary(pairs, [0.025, 0.5])
    two = summary([pairs[i] for i in order], [0.025, 0.5])
    # exactly: a product is solved in one canonical order of its factors
    assert np.array_equal(one.x_quantiles, two.x_quantiles) and one.error == two.error


cell = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", "1", "0", "-1", "1.5", "1e3", "nan", "inf", "１", "1_0", "9" * 25]),
)
methods = st.sampled_from(["end_to_end", "milestone", "expert_completion", "teleport", ""])


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(st.text(max_size=4), methods, cell, cell, cell), min_size=1, max_size=6)
)
def test_the_parser_reads_or_rejects_with_a_place_never_crashes(tmp_path_factory, rows):
    """Generated malformed tables: either every row is read (and the counts are the ones
    written) or one InputError names the file and a row or column."""
    path = tmp_path_factory.mktemp("fuzz") / "e.csv"
    frame = pd.DataFrame(rows, columns=["task", "method", "step", "successes", "trials"])
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    try:
        evidence = load_evidence(path)
    except InputError as exc:
        text = str(exc)
        assert text.startswith(f"{path}: ") and "\n" not in text
        return
    table = evidence.table
    assert int(table["n_rows"].sum()) == len(rows)
    for record in table.itertuples():
        assert 0 <= record.successes <= record.trials < 2**63


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), min_size=1, max_size=5)
)
def test_valid_counts_round_trip_exactly(tmp_path_factory, counts):
    path = tmp_path_factory.mktemp("round") / "e.csv"
    lines = [f"t{i},end_to_end,{min(k, n)},{max(k, n, 1)}" for i, (k, n) in enumerate(counts)]
    path.write_text("task,method,successes,trials\n" + "\n".join(lines) + "\n")
    table = load_evidence(path).table
    want = [(min(k, n), max(k, n, 1)) for k, n in counts]
    assert list(zip(table["successes"], table["trials"], strict=True)) == want
    assert all(math.isfinite(v) for v in table["successes"])
