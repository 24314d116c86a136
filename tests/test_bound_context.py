"""What a pooled or crossed bound rests on: the cell's own-data bound, the runs the bound
is worth, the floor that all runs sharing its agent or task could show, and verdicts
that never rest on an extrapolated bound unless asked."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayes_eval.outputs.report import ABOVE, BELOW, UNDECIDED, verdict_line, verdicts
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
