"""Trial planning against closed forms and simulation; the next run picks the bottleneck."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayes_eval
from bayes_eval import InputError
from bayes_eval.cli.main import main
from bayes_eval.plan import (
    END_TO_END_ROUTE,
    PRIORS,
    expected_trials,
    milestone_trials,
    next_run,
    parse_prior,
    trials_to_certify,
    zero_success_trials,
)


def closed_form_uniform(tau, level):
    """Smallest n with 1 - (1 - level)^(1 / (n + 1)) <= tau, by counting up."""
    n = 1
    while 1 - (1 - level) ** (1 / (n + 1)) > tau:
        n += 1
    return n


@pytest.mark.parametrize("tau, level", [(0.01, 0.975), (0.05, 0.95), (0.001, 0.99), (0.3, 0.6)])
def test_zero_success_trials_match_the_closed_form(capsys, tau, level):
    assert zero_success_trials(tau, level) == closed_form_uniform(tau, level)
    args = ["plan", "--threshold", str(tau), "--level", str(level), "--format", "json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["trials"] == closed_form_uniform(tau, level)


@pytest.mark.parametrize("tau, level, prior", [(1e-7, 0.975, "uniform"), (1e-9, 0.99, "jeffreys")])
def test_rare_event_thresholds_are_answered(capsys, tau, level, prior):
    """Thresholds of 1e-5 to 1e-9 are what the planner is for: the answer is the smallest
    n whose Beta quantile (scipy's) certifies, tens of millions of trials or more."""
    a, b = PRIORS[prior]
    args = ["plan", "--threshold", str(tau), "--level", str(level), "--prior", prior]
    assert main([*args, "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    n = result["trials"]
    assert stats.beta.ppf(level, a, b + n) <= tau < stats.beta.ppf(level, a, b + n - 1)
    assert "impractical" in result["note"] and "--milestone-rates" in result["note"]
    if prior == "uniform":  # about 37 million: log(0.025) / log(1 - 1e-7) - 1
        assert n == math.ceil(math.log(1 - level) / math.log1p(-tau) - 1)


@pytest.mark.parametrize("tau", [1e-16, 1e-300, 5e-324])
@pytest.mark.parametrize("prior", ["uniform", "jeffreys"])
def test_thresholds_past_a_doubles_whole_numbers_have_the_closed_form(capsys, tau, prior):
    """Past 2^52 failures n and n - 1 are one double: the answer is the closed form (for
    Jeffreys, (b + n) p is Gamma(1/2) in the limit), computed here in mpmath at 50 digits.
    At 1e-300 the search used to spin for ever, and at 5e-324 it overflowed."""
    import mpmath as mp

    a, b = PRIORS[prior]
    with mp.workdps(50):
        if prior == "uniform":
            want = mp.log1p(-mp.mpf(0.975)) / mp.log1p(-mp.mpf(tau)) - b
        else:
            want = mp.mpf(float(stats.gamma.ppf(0.975, a))) / mp.mpf(tau) - b
        n = zero_success_trials(tau, 0.975, PRIORS[prior])
        assert abs(n / want - 1) < 1e-14
    assert main(["plan", "--threshold", str(tau), "--prior", prior, "--rate", "0"]) == 0
    out = capsys.readouterr().out
    assert f"trials: about {n / 10 ** (len(str(n)) - 1):.3f}e+{len(str(n)) - 1}" in out
    assert "certifying takes at least about" in out and "expected_trials" not in out


def test_other_priors_by_their_beta_quantile():
    for prior in (PRIORS["jeffreys"], (2.0, 5.0)):
        n = zero_success_trials(0.02, 0.975, prior)
        a, b = prior
        assert stats.beta.ppf(0.975, a, b + n) <= 0.02 < stats.beta.ppf(0.975, a, b + n - 1)
    assert parse_prior("2,5") == (2.0, 5.0)
    with pytest.raises(InputError, match="must be positive"):
        parse_prior("0,1")


def test_expected_trials_agree_with_simulation():
    tau, level, rate = 0.05, 0.95, 0.01
    exact = expected_trials(rate, tau, level)
    needed = np.array([trials_to_certify(k, tau, level) for k in range(40)])
    rng = np.random.default_rng(0)
    successes = np.cumsum(rng.random((4000, needed[-1])) < rate, axis=1)
    trials = np.arange(1, needed[-1] + 1)
    # Stop at the first n whose count of successes k needs no more than n trials.
    stops = trials[np.argmax(trials >= needed[successes], axis=1)]
    assert exact["probability_certified"] == pytest.approx(1.0)
    assert abs(stops.mean() - exact["expected_trials"]) < 4 * stops.std() / math.sqrt(stops.size)
    # With no success the first certification comes at the zero-success count.
    assert expected_trials(0.0, tau, level)["expected_trials"] == zero_success_trials(tau, level)


def test_milestone_power_matches_simulation_and_end_to_end_is_exact():
    rates, tau, level = [0.2, 0.1], 0.05, 0.975
    result = milestone_trials(rates, tau, level, power=0.8, simulations=300, seed=1)
    n = result["trials_per_milestone"]
    assert result["probability_certified"] >= 0.8
    # Independent check of the power at n with fresh draws and scipy's Beta quantiles of
    # the two-factor product, by Monte Carlo within each simulated evaluation.
    rng = np.random.default_rng(7)
    hits = []
    for _ in range(150):
        k = rng.binomial(n, rates)
        draws = np.prod(rng.beta(1 + k, 1 + n - k, size=(20000, 2)), axis=1)
        hits.append(np.quantile(draws, level) <= tau)
    assert np.mean(hits) > 0.8 - 3 * math.sqrt(0.16 / 150)
    m = result["end_to_end_trials"]
    most = max(k for k in range(m + 1) if stats.beta.ppf(level, 1 + k, 1 + m - k) <= tau)
    assert stats.binom.cdf(most, m, 0.02) >= 0.8


def test_next_run_picks_the_bottleneck_milestone(capsys, tmp_path):
    frame = pd.DataFrame(
        dict(
            task="t",
            method="milestone",
            step=[1, 2, 3],
            successes=[45, 1, 40],
            trials=[100, 5, 100],
        )
    )
    posterior = bayes_eval.fit(frame, "mats2024")
    table = next_run(posterior, "t", batches=(10, 50), threshold=0.01)
    assert table.iloc[0]["run"] == "milestone 2"
    milestones = table[table["run"].str.startswith("milestone")]
    assert (milestones["expected_upper"] <= milestones["current_upper"] + 1e-9).all()
    assert not table["certified"].any()
    # A bottleneck a thousand times as costly per trial is no longer worth it per unit cost.
    costly = next_run(posterior, "t", costs=[1, 1000, 1], batches=(10,))
    assert costly.iloc[0]["run"] != "milestone 2"
    run = tmp_path / "run"
    frame.to_csv(tmp_path / "e.csv", index=False)
    assert main(["fit", str(tmp_path / "e.csv"), "--model", "mats2024", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["plan", str(run), "--task", "t", "--threshold", "0.01", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["run"] == "milestone 2"


def test_next_run_end_to_end_and_exact_update():
    frame = pd.DataFrame([dict(task="t", method="end_to_end", successes=0, trials=20)])
    posterior = bayes_eval.fit(frame, "end_to_end")
    table = next_run(posterior, "t", batches=(30,), simulations=2000, seed=3)
    assert list(table["run"]) == ["end_to_end"]
    # Preposterior mean of the new bound, by summing over the Beta-Binomial outcomes.
    k = np.arange(31)
    weights = stats.betabinom.pmf(k, 30, 1, 21)
    expected = (weights * stats.beta.ppf(0.975, 1 + k, 21 + 30 - k)).sum()
    sd = np.sqrt((weights * (stats.beta.ppf(0.975, 1 + k, 51 - k) - expected) ** 2).sum())
    assert abs(table.iloc[0]["expected_upper"] - expected) < 4 * sd / math.sqrt(2000)


def test_next_run_compares_the_end_to_end_route_in_cost(capsys, tmp_path):
    """Beside a one-milestone estimate Beta(a, b), end-to-end runs on their own: cost n x
    the end-to-end cost, expected bound the Beta-Binomial average of the uniform-prior
    bound (closed form, within Monte Carlo error)."""
    frame = pd.DataFrame([dict(task="t", method="milestone", step=1, successes=2, trials=40)])
    posterior = bayes_eval.fit(frame, "mats2024")
    table = next_run(posterior, "t", end_to_end_cost=3.0, batches=(20,), simulations=4000)
    route = table[table["run"] == END_TO_END_ROUTE].iloc[0]
    assert route["cost"] == 60.0
    a, b = 1 + 2, 1 + 38  # the milestone's posterior under mats2024's uniform prior
    k = np.arange(21)
    weights = stats.betabinom.pmf(k, 20, a, b)
    bounds = stats.beta.ppf(0.975, 1 + k, 1 + 20 - k)
    expected = (weights * bounds).sum()
    sd = np.sqrt((weights * (bounds - expected) ** 2).sum())
    assert abs(route["expected_upper"] - expected) < 4 * sd / math.sqrt(4000)


def test_plan_says_when_a_task_is_already_certified(capsys, tmp_path):
    frame = pd.DataFrame([dict(task="t", method="end_to_end", successes=0, trials=400)])
    frame.to_csv(tmp_path / "e.csv", index=False)
    run = tmp_path / "run"
    assert main(["fit", str(tmp_path / "e.csv"), "--model", "end_to_end", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["plan", str(run), "--task", "t", "--threshold", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "already certified: the upper bound" in out and "run next" not in out


def test_plan_never_suggests_the_model_in_use(capsys, tmp_path):
    frame = pd.DataFrame(dict(task="t", method="expert_best_of_n", step=[1], chosen_index=[3]))
    posterior = bayes_eval.fit(frame, "phuong_chain")
    with pytest.raises(InputError) as info:
        next_run(posterior, "t")
    assert "fit with end_to_end, mats2024 or phuong2024" in str(info.value)
    assert "phuong_chain)" in str(info.value) and "or phuong_chain" not in str(info.value)


@pytest.mark.parametrize(
    "args, message",
    [
        (["plan", "--threshold", "0.01", "--prior", "flat"], "--prior: 'flat' is not"),
        (
            ["plan", "--threshold", "0.01", "--prior", "1e308,1e308"],
            "--prior: 1e308,1e308: Beta shapes above 1e+300 are past what the planner",
        ),
        (["plan", "--threshold", "2"], "--threshold: 2 must lie strictly between 0 and 1"),
        (["plan", "--threshold", "0.01", "--level", "0.5"], "--level: 0.5 must lie strictly"),
        (["plan", "--threshold", "0.01", "--milestone-rates", "0.5", "0.1"], "not below"),
        (["plan", "--threshold", "0.01", "--rate", "x"], "--rate: 'x' is not a number"),
        (["plan", "somewhere", "--threshold", "0.01"], "needs --task"),
        (["plan"], "plan: --threshold is required (except with --budget)"),
    ],
)
def test_bad_plan_arguments(capsys, args, message):
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize(("a", "b", "tau"), [(3.0, 40.0, 0.05), (2.0, 30.0, 0.1), (6.0, 20.0, 0.2)])
def test_trials_to_decide_matches_enumeration(a, b, tau):
    """The chance of a decided bound (upper below tau or lower above it) after n more
    trials, enumerated over every n and outcome with scipy's Beta quantiles: the answer is
    a crossing of 1/2, between the first and the last (the chance saws as it rises)."""
    from scipy import stats

    from bayes_eval.plan import trials_to_decide

    level = 0.975
    mean, sd = stats.beta.mean(a, b), stats.beta.std(a, b)

    def chance(n):
        k = np.arange(n + 1)
        upper = stats.beta.ppf(level, a + k, b + n - k)
        lower = stats.beta.ppf(1 - level, a + k, b + n - k)
        return stats.betabinom.pmf(k, n, a, b)[(upper < tau) | (lower > tau)].sum()

    found = trials_to_decide(mean, sd, tau, level)
    chances = np.array([chance(n) for n in range(2 * found)])
    assert chances[found - 1] < 0.5 <= chances[found]
    crossings = np.flatnonzero((chances[:-1] < 0.5) & (chances[1:] >= 0.5)) + 1
    assert crossings[0] <= found <= crossings[-1]
    assert np.all(chances[crossings[-1] :] >= 0.5)  # no crossing beyond 2 found
    assert trials_to_decide(mean, sd, tau, level, max_trials=found // 2) is None


def test_plan_prints_numbers_for_reading(capsys):
    """Four figures, thousands separated, lists item by item; JSON keeps every digit."""
    assert main(["plan", "--threshold", "0.0001", "--rate", "0.00002"]) == 0
    out = capsys.readouterr().out
    assert "trials: 36,886\n" in out and "prior: 1, 1\n" in out
    expected = next(line for line in out.splitlines() if line.startswith("expected_trials"))
    assert len(expected.split(": ")[1].replace(",", "").replace(".", "")) <= 5
    assert main(["plan", "--threshold", "0.0001", "--rate", "0.00002", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["trials"] == 36886


def test_a_rate_above_the_threshold_is_said_in_words(capsys):
    """At a true rate of 0.02 above a threshold of 0.01, certification within the horizon
    is a wrong certificate, and rare: its chance is P(T <= horizon) (expected_trials),
    said in words, and no expectation cut at the horizon is printed."""
    exact = expected_trials(0.02, 0.01, 0.975)
    assert exact["median_trials"] is None and exact["probability_certified"] < 0.01
    assert main(["plan", "--threshold", "0.01", "--rate", "0.02", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["expected_trials"] is None and found["median_trials"] is None
    assert found["probability_certified"] == exact["probability_certified"]
    assert "above the threshold 0.01: a certificate would be wrong" in found["rate_note"]
    assert main(["plan", "--threshold", "0.01", "--rate", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "expected_trials: None" in out and "certifying is unlikely" in out


@pytest.mark.parametrize(("n", "a", "b"), [(0, 2.0, 3.0), (7, 0.5, 0.5), (5000, 1.2, 300.0)])
def test_the_beta_binomial_mass_is_scipys(n, a, b):
    """The planner's Beta-Binomial mass is scipy's ``betabinom.pmf`` and sums to 1."""
    from scipy import stats

    from bayes_eval.plan import _beta_binomial_mass

    k = np.arange(n + 1)
    np.testing.assert_allclose(
        _beta_binomial_mass(n, a, b), stats.betabinom.pmf(k, n, a, b), rtol=1e-14
    )
    assert _beta_binomial_mass(n, a, b).sum() == pytest.approx(1.0, abs=1e-11)
