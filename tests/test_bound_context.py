"""What a pooled or crossed bound rests on: the cell's own-data bound, the runs the bound
is worth, the floor that all runs sharing its agent or task could show, and verdicts
that never rest on an extrapolated bound unless asked."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayes_eval.outputs.verdicts import ABOVE, BELOW, UNDECIDED, verdict_line, verdicts
from bayes_eval.results.summary import bound_context, own_upper, worth_runs

LEVEL = 0.975


@pytest.mark.parametrize("k, n", [(0, 7), (0, 750), (2, 9), (5, 5), (30, 100)])
def test_the_own_bound_is_the_uniform_prior_beta_quantile(k, n):
    assert own_upper(k, n, LEVEL) == pytest.approx(stats.beta.ppf(LEVEL, 1 + k, 1 + n - k))


def test_zero_successes_have_their_closed_form():
    # Beta(1, n + 1): 1 - (1 - L)^(1 / (n + 1)); 0 of 7 runs at 97.5%: 0.369 (worked by hand:
    # 0.025^(1/8) = exp(-3.6889 / 8) = 0.6306)
    assert own_upper(0, 7, LEVEL) == pytest.approx(1 - 0.025 ** (1 / 8), rel=1e-12)
    assert own_upper(0, 7, LEVEL) == pytest.approx(0.3694, abs=1e-4)


@pytest.mark.parametrize("k", [0, 1, 3, 12])
@pytest.mark.parametrize("upper", [0.3, 0.01, 1e-4])
def test_worth_runs_inverts_the_own_bound(k, upper):
    runs = worth_runs(upper, k, LEVEL)
    if own_upper(k, k, LEVEL) < upper:
        assert math.isnan(runs)
    else:
        assert own_upper(k, runs, LEVEL) == pytest.approx(upper, rel=1e-8)


def test_an_astronomically_small_bound_is_worth_astronomically_many_runs():
    # The Beta cell level once bounded a 0-of-7 cell at 6e-128: ln(0.025) / ln(1 - u) - 1
    runs = worth_runs(6e-128, 0, LEVEL)
    assert runs == pytest.approx(-math.log(0.025) / 6e-128, rel=1e-9)
    assert runs > 6e127


def test_a_bound_below_its_floor_is_extrapolated():
    # 0 of 7 in the cell; 750 runs share its agent or task: the floor is their 0-success bound
    context = bound_context(1e-5, 0, 7, 750, LEVEL)
    assert context["floor_upper"] == pytest.approx(1 - 0.025 ** (1 / 751))
    assert context["extrapolated"]
    assert context["worth_runs"] > 750
    above = bound_context(0.01, 0, 7, 750, LEVEL)
    assert not above["extrapolated"] and above["worth_runs"] < 750


def test_no_verdict_rests_on_an_extrapolated_bound_unless_asked():
    summary = pd.DataFrame(
        dict(
            agent="a",
            task=["extrapolated", "on_data"],
            method="crossed",
            lower=[1e-9, 1e-4],
            upper=[1e-5, 0.004],
            floor_upper=[0.0049, 0.0049],
            extrapolated=pd.array([True, False], dtype="boolean"),
            diagnostics_ok=pd.array([True, True], dtype="boolean"),
        )
    )
    none = pd.DataFrame(columns=["agent", "task", "doubtful", "p_value"])
    found = verdicts(summary, none, threshold=0.01)
    assert list(found["verdict"]) == [UNDECIDED, BELOW]
    assert (
        "extrapolated" in found["reason"].iloc[0]
        and "--allow-extrapolated" in (found["reason"].iloc[0])
    )
    asked = verdicts(summary, none, threshold=0.01, allow_extrapolated=True)
    assert list(asked["verdict"]) == [BELOW, BELOW]
    assert asked["reason"].iloc[0].startswith("on an extrapolated bound")
    assert np.all(asked["reason"].iloc[1:] == "")


def test_the_verdict_line_counts_the_rows_that_rest_on_extrapolated_bounds():
    table = pd.DataFrame(
        dict(
            upper=[1e-5, 0.004, 1e-5, 0.3],
            extrapolated=pd.array([True, False, True, pd.NA], dtype="boolean"),
        )
    )
    undecided = table.assign(verdict=[UNDECIDED, BELOW, UNDECIDED, ABOVE])
    assert verdict_line(undecided, 0.01) == (
        "1 below threshold; 1 above threshold; 2 undecided; 0 unreliable. 2 of the "
        "undecided have an extrapolated bound below 0.01 (--allow-extrapolated decides "
        "on them)"
    )
    asked = table.assign(verdict=[BELOW, BELOW, BELOW, ABOVE])
    assert verdict_line(asked, 0.01).endswith(
        "0 unreliable. 2 of the below rest on extrapolated bounds, as asked"
    )
    plain = table.assign(extrapolated=False, verdict=[BELOW, BELOW, BELOW, ABOVE])
    assert verdict_line(plain, 0.01) == (
        "3 below threshold; 1 above threshold; 0 undecided; 0 unreliable"
    )


def _pooled_rows(threshold=0.05):
    """Summary rows of a pooled model, the own bounds from each pair's k of n (scipy's
    Beta quantiles under the uniform prior), the model's bounds set by hand."""
    k = np.array([0, 0, 1, 0, 0, 0, 0, 0])
    n = np.array([200, 35, 8, 20, 7, 10, 0, 0])
    own_lower = np.where(n > 0, stats.beta.ppf(1 - LEVEL, 1 + k, 1 + n - k), np.nan)
    own_upper = np.where(n > 0, stats.beta.ppf(LEVEL, 1 + k, 1 + n - k), np.nan)
    return pd.DataFrame(
        dict(
            agent="a",
            task=[
                "own_below",
                "pooled_below",
                "pooled_above",
                "pooled_undecided",
                "extrapolated",
                "prediction",
                "no_runs",
                "no_estimate",
            ],
            lower=[1e-6, 1e-6, 0.06, 1e-6, 1e-9, 1e-6, 1e-6, np.nan],
            upper=[0.01, 0.011, 0.5, 0.2, 1e-5, 0.01, 0.01, np.nan],
            mean=[0.004, 0.004, 0.2, 0.05, 1e-6, 0.004, 0.004, np.nan],
            own_lower=own_lower,
            own_upper=own_upper,
            extrapolated=pd.array(
                [False, False, False, False, True, False, pd.NA, pd.NA], dtype="boolean"
            ),
            observed=[True] * 5 + [False] + [True] * 2,
        )
    )


def test_the_basis_names_what_carries_each_verdict():
    """At 0.05 (own bounds from scipy, uniform prior): 0 of 200 runs allow up to 1.8%, so
    the model's below is carried by them (own); 0 of 35 allow up to 9.7%, so a below needs
    the pooling; 1 of 8 allow as little as 2.8%, so an above needs it too; 0 of 20 allow
    0.12% to 16%, undecided like the model (own). Then an extrapolated bound below the
    threshold, a pair never run, a pair with no runs of its own (the pooling carries it)
    and a pair without an estimate (no basis)."""
    from bayes_eval.results.summary import _basis

    rows = _pooled_rows()
    own_side = np.where(
        rows.own_upper < 0.05, "below", np.where(rows.own_lower > 0.05, "above", "undecided")
    )
    assert list(own_side[:4]) == ["below", "undecided", "undecided", "undecided"]
    assert list(_basis(rows, 0.05, exact=False)[:7]) == [
        "own",
        "pooled",
        "pooled",
        "own",
        "extrapolated",
        "prediction",
        "pooled",
    ]
    assert pd.isna(_basis(rows, 0.05, exact=False)[7])
    exact = _basis(rows.assign(observed=True), 0.05, exact=True)
    assert list(exact[:7]) == ["own"] * 7 and pd.isna(exact[7])
    # undecided by the model where the own runs decide: the pooling carries it
    decided = rows.assign(own_upper=[0.01, 0.03, 0.5, 0.03, 0, 0, np.nan, np.nan])
    assert _basis(decided, 0.05, exact=False)[3] == "pooled"


def test_the_verdict_line_and_the_sentence_say_what_carries_a_verdict():
    """The verdict line counts each verdict by basis; a pooled below-threshold sentence
    puts the pair's own bound beside the model's (0 of 35 runs: up to 9.7%) and what the
    pooling is worth (the runs whose own bound the model's is: worth_runs)."""
    from bayes_eval.outputs.verdicts import sentence

    table = pd.DataFrame(
        dict(
            upper=[0.004, 0.011, 0.5, 0.2],
            verdict=[BELOW, BELOW, ABOVE, UNDECIDED],
            basis=["own", "pooled", "pooled", "own"],
            extrapolated=pd.array([False] * 4, dtype="boolean"),
        )
    )
    assert verdict_line(table, 0.05) == (
        "2 below threshold (1 on own runs, 1 on pooling); 1 above threshold (1 on "
        "pooling); 1 undecided (1 on own runs); 0 unreliable"
    )
    upper = stats.beta.ppf(LEVEL, 1, 36)
    fields = dict(
        agent="a",
        task="t",
        upper=0.011,
        lower=1e-6,
        mean=0.002,
        sd=0.003,
        verdict=BELOW,
        reason="",
        basis="pooled",
        own_runs=35,
        own_lower=7e-4,
        own_upper=upper,
        worth_runs=worth_runs(0.011, 0, LEVEL),
    )
    row = next(pd.DataFrame([fields]).itertuples())
    assert sentence(row, 0.05, LEVEL).endswith(
        "below threshold at τ = 5% on the model's pooling: its own 35 runs allow up to "
        f"9.7%; the pooling is worth {worth_runs(0.011, 0, LEVEL):,.0f} runs."
    )
    assert round(upper, 3) == 0.097 and f"{worth_runs(0.011, 0, LEVEL):,.0f}" == "333"


def test_on_own_runs_only_a_pairs_own_runs_say_below():
    """``--basis own``: a below verdict the pooling carries becomes undecided, naming the
    runs without a success after which the pair's own bound would be below 0.05, counted
    here by scipy run by run (0 of 35: 71 runs in all, so 36 more; 1 of 10, and a pair
    with no runs); a below verdict on its own runs, and every other verdict, stay."""
    from bayes_eval.outputs.verdicts import on_own_runs

    def runs_to_decide(k, n):  # the fewest more failures whose own bound is below 0.05
        m = 0
        while stats.beta.ppf(LEVEL, 1 + k, 1 + n + m - k) >= 0.05:
            m += 1
        return m

    table = pd.DataFrame(
        dict(
            agent="a",
            task=["t0", "t1", "t2", "t3", "t4"],
            verdict=[BELOW, BELOW, BELOW, BELOW, ABOVE],
            reason="",
            basis=["pooled", "pooled", "pooled", "own", "pooled"],
            own_runs=[35, 10, np.nan, 200, 8],
            own_upper=[
                stats.beta.ppf(LEVEL, 1, 36),
                stats.beta.ppf(LEVEL, 2, 10),
                np.nan,
                0.018,
                0.5,
            ],
        )
    )
    found = on_own_runs(table, 0.05, LEVEL, {("a", "t1"): 1, ("a", "t4"): 1})
    assert list(found["verdict"]) == [UNDECIDED, UNDECIDED, UNDECIDED, BELOW, ABOVE]
    assert runs_to_decide(0, 35) == 36
    assert found["reason"][0] == (
        "only its own runs may say below (--basis own), and its own 35 runs (0 successes) "
        "allow up to 9.7%; 36 more runs without a success would decide it"
    )
    assert found["reason"][1].endswith(
        f"; {runs_to_decide(1, 10):,} more runs without a success would decide it"
    )
    assert "no end-to-end runs of its own; " in found["reason"][2]
    assert found["reason"][2].endswith(
        f"; {runs_to_decide(0, 0)} more runs without a success would decide it"
    )
    assert list(found["reason"][3:]) == ["", ""]


def test_pooling_never_certifies_a_pair_its_own_runs_contradict():
    """A pooled bound below 0.05 decides nothing where the pair's own runs say otherwise:
    1 success in 7 runs (an observed rate of 14%, above 5%: METR's gpt-3.5-turbo-instruct
    on mystery_function_8), or an end-to-end count the predictive check flags; the pair is
    undecided with the reason, and the verdict line counts it apart. A below verdict its
    own runs carry (0 of 200), a pooled one they do not contradict (0 of 35) and a flag of
    another pair change nothing."""
    summary = pd.DataFrame(
        dict(
            agent="a",
            task=["one_in_seven", "flagged", "own", "pooled"],
            lower=1e-6,
            upper=[0.038, 0.02, 0.01, 0.011],
            own_runs=pd.array([7, 40, 200, 35], dtype="Int64"),
            own_successes=pd.array([1, 2, 0, 0], dtype="Int64"),
            basis=["pooled", "pooled", "own", "pooled"],
            extrapolated=pd.array([False] * 4, dtype="boolean"),
            diagnostics_ok=pd.array([True] * 4, dtype="boolean"),
            method="end_to_end",
        )
    )
    checks = pd.DataFrame(
        dict(
            agent="a",
            task=["flagged", "own"],
            evidence="end_to_end",
            successes=[2, 0],
            trials=[40, 200],
            p_value=[0.004, 0.5],
            flagged=[True, False],
        )
    )
    none = pd.DataFrame(columns=["agent", "task", "doubtful", "p_value"])
    found = verdicts(summary, none, 0.05, checks)
    assert list(found["verdict"]) == [UNDECIDED, UNDECIDED, BELOW, BELOW]
    assert found["reason"].iloc[0] == (
        "the model and the pair's own runs disagree: 1 of its own 7 runs succeeded, an "
        "observed rate of 14%, above 5%; pooling does not certify a pair against its own runs"
    )
    assert (
        found["reason"]
        .iloc[1]
        .startswith(
            "the model and the pair's own runs disagree: the fit's posterior predictive check "
            "flags its end-to-end count (2/40, p = 0.004)"
        )
    )
    assert list(found["reason"].iloc[2:]) == ["", ""]
    line = verdict_line(summary.join(found), 0.05)
    assert line == (
        "2 below threshold (1 on own runs, 1 on pooling); 0 above threshold; 2 undecided "
        "(2 on pooling); 0 unreliable; 2 of the undecided where the model and the pair's "
        "own runs disagree (the model's bound is below 0.05, its own runs say otherwise)"
    )
