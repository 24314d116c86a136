"""R-hat, ESS and the quantiles' MCSE of many quantities at once equal arviz_stats' element
by element."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from arviz_stats.base import array_stats

from bayes_eval.inference.chain_stats import convergence, quantile_mcse

PROB = 0.89  # arviz_stats.summary's interval (rcParams["stats.ci_prob"])


def per_element(values):
    """arviz_stats' array functions: R-hat, bulk ESS, tail ESS of each element."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (
            array_stats.rhat(values),
            array_stats.ess(values, method="bulk"),
            array_stats.ess(values, method="tail", prob=PROB),
        )


def assert_same(got, want):
    for ours, theirs in zip(got, want, strict=True):
        assert np.array_equal(np.isnan(ours), np.isnan(theirs))
        finite = ~np.isnan(theirs)
        np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-12, atol=0)


def ar1(rng, elements, chains, draws, phi):
    """Autoregressive chains, from anti-correlated to nearly stuck."""
    x = np.zeros((elements, chains, draws))
    noise = rng.standard_normal((elements, chains, draws))
    for t in range(1, draws):
        x[..., t] = phi[:, None] * x[..., t - 1] + noise[..., t]
    return x


def chains_of(kind: str, rng) -> np.ndarray:
    if kind == "autocorrelated":
        return ar1(rng, 120, 4, 401, rng.uniform(-0.95, 0.99, 120))
    if kind == "disagreeing":  # chains offset from one another: R-hat well above 1
        return rng.standard_normal((60, 4, 300)) + rng.normal(0, 0.5, (60, 4, 1))
    if kind == "tied":
        return rng.integers(0, 3, (60, 4, 200)).astype(float)
    if kind == "rare":  # an indicator that is almost always 0
        return (rng.random((60, 4, 500)) < 0.004).astype(float)
    if kind == "short":
        return rng.standard_normal((40, 2, 9))
    if kind == "four_draws":
        return rng.standard_normal((20, 3, 4))
    if kind == "one_chain":
        return rng.standard_normal((20, 1, 100))
    values = rng.standard_normal((12, 4, 100))
    values[:4] = 2.5  # constant elements
    values[5, 2, 17] = np.nan  # one draw lost
    values[6] = np.nan  # an element without draws
    return values


@pytest.mark.parametrize(
    "kind",
    [
        "autocorrelated",
        "disagreeing",
        "tied",
        "rare",
        "short",
        "four_draws",
        "one_chain",
        "constant_and_nan",
    ],
)
def test_every_element_is_arviz_stats_own(kind):
    values = chains_of(kind, np.random.default_rng(len(kind)))
    assert_same(convergence(values, PROB), per_element(values))


@pytest.mark.parametrize(
    "kind",
    ["autocorrelated", "disagreeing", "tied", "rare", "short", "one_chain", "constant_and_nan"],
)
@pytest.mark.parametrize("prob", [0.5, 0.975, 0.999])
def test_every_quantiles_mcse_is_arviz_stats_own(kind, prob):
    values = chains_of(kind, np.random.default_rng(len(kind)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = array_stats.mcse(values, method="quantile", prob=prob)
    assert_same([quantile_mcse(values, prob)], [want])


def test_blocks_change_nothing(monkeypatch):
    """More elements than a block: the same numbers as in one block."""
    import bayes_eval.inference.chain_stats as chain_stats

    values = ar1(np.random.default_rng(3), 50, 4, 200, np.full(50, 0.7))
    whole = convergence(values, PROB)
    mcse = quantile_mcse(values, 0.975)
    monkeypatch.setattr(chain_stats, "BLOCK", 7)
    for one, other in zip(convergence(values, PROB), whole, strict=True):
        assert np.array_equal(one, other)
    assert np.array_equal(quantile_mcse(values, 0.975), mcse)


@pytest.fixture(scope="module")
def pooled_fit():
    from bayes_eval import fit, load_evidence
    from bayes_eval.messages import collected

    with collected():  # the end-to-end rows the milestone model leaves out
        return fit(load_evidence("data/example_pooled.csv"), "hierarchical", seed=5)


def test_a_fits_diagnostics_are_arviz_summarys_own(pooled_fit):
    """On a real fit (the pooled example's ``hierarchical``), the gate's table is ArviZ's
    own summary of the same quantities (``arviz_stats.summary``, element by element), and
    so is the verdict on each."""
    import arviz_stats

    from bayes_eval.constants import ESS_MIN, RHAT_MAX
    from bayes_eval.inference.diagnostics import diagnose

    table = diagnose(pooled_fit.tree).table.set_index("variable")
    names = list(dict.fromkeys(table.index.str.replace(r"\[.*", "", regex=True)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = arviz_stats.summary(
            pooled_fit.tree, var_names=names, kind="diagnostics", round_to="none"
        )
    want = want.loc[table.index, ["r_hat", "ess_bulk", "ess_tail"]].astype(float)
    assert len(table) > 20
    np.testing.assert_allclose(table[["r_hat", "ess_bulk", "ess_tail"]], want, rtol=1e-12)
    ok = (want["r_hat"] <= RHAT_MAX) & (want["ess_bulk"] >= ESS_MIN) & (want["ess_tail"] >= ESS_MIN)
    assert table["ok"].equals(ok)


def test_the_gate_checks_a_block_of_scalars_at_a_time_to_the_same_table(pooled_fit, monkeypatch):
    """The gate's table copies a block of scalars at a time (``CHECKED_VALUES`` draws):
    in blocks of one, three or every scalar, the same table, row for row."""
    import bayes_eval.inference.diagnostics as diagnostics

    whole = diagnostics.diagnose(pooled_fit.tree).table
    draws = pooled_fit.tree["posterior"].sizes["chain"] * pooled_fit.tree["posterior"].sizes["draw"]
    for scalars in (1, 3):
        monkeypatch.setattr(diagnostics, "CHECKED_VALUES", scalars * draws)
        pd.testing.assert_frame_equal(diagnostics.diagnose(pooled_fit.tree).table, whole)


def test_the_summary_reads_a_block_of_pairs_at_a_time_to_the_same_table(pooled_fit, monkeypatch):
    """An MCMC fit's summary copies a block of pairs' draws at a time (``SUMMARY_VALUES``):
    in blocks of one, three or every pair, the same table."""
    import bayes_eval.results.summary as summary

    whole = summary.summarise(pooled_fit, 0.975, 0.05)
    draws = pooled_fit.draws.sizes["chain"] * pooled_fit.draws.sizes["draw"]
    for pairs in (1, 3):
        monkeypatch.setattr(summary, "SUMMARY_VALUES", pairs * draws)
        pd.testing.assert_frame_equal(summary.summarise(pooled_fit, 0.975, 0.05), whole)
