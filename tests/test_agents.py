"""Agent comparisons: P(P_B > P_A) against numerical integration of two exact posteriors,
a hand computation from the same draws of a joint posterior, refusals by name, margins."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, stats

import bayes_eval
from bayes_eval.checks.agents import ACROSS_TASKS, compare_agents
from bayes_eval.plan import trials_to_separate

EXAMPLE = bayes_eval.shipped_datasets()["example_evidence"]


def _table(counts):
    rows = [
        dict(agent=agent, task=task, method="end_to_end", successes=k, trials=n)
        for (agent, task), (k, n) in counts.items()
    ]
    return pd.DataFrame(rows)


def test_exact_comparison_matches_the_integral_of_two_beta_posteriors():
    counts = {("a", "t"): (3, 20), ("b", "t"): (8, 20), ("a", "u"): (0, 10), ("b", "u"): (1, 10)}
    posterior = bayes_eval.fit(_table(counts), "end_to_end")
    result = compare_agents(posterior, "a", "b")
    for task in ("t", "u"):
        (ka, na), (kb, nb) = counts[("a", task)], counts[("b", task)]
        pa, pb = stats.beta(1 + ka, 1 + na - ka), stats.beta(1 + kb, 1 + nb - kb)
        # P(P_B > P_A) = integral of f_B(x) F_A(x) dx
        exact = integrate.quad(lambda x, pa=pa, pb=pb: pb.pdf(x) * pa.cdf(x), 0, 1)[0]
        row = result.table.set_index("task").loc[task]
        # 4000 independent draws: Monte Carlo sd at most 0.008
        assert row["prob_b_greater"] == pytest.approx(exact, abs=0.03)
        assert row["diff_mean"] == pytest.approx(pb.mean() - pa.mean(), abs=0.01)
    across = result.table.set_index("task").loc[ACROSS_TASKS]
    assert across["quantity"] == "mean P over 2 tasks"


def test_example_matches_a_hand_computation_and_refuses_the_point_value_by_name():
    posterior = bayes_eval.fit(EXAMPLE, "phuong_chain")
    result = compare_agents(posterior, "agent-a", "agent-b", level=0.9)
    p = posterior.draws["p_task"]
    for row in result.table[result.table["task"] != ACROSS_TASKS].itertuples():
        pa = p.sel(agent="agent-a", task=row.task).values.ravel()
        pb = p.sel(agent="agent-b", task=row.task).values.ravel()
        assert row.prob_b_greater == np.mean(pb > pa)
        assert row.diff_upper == pytest.approx(np.quantile(pb - pa, 0.9))
        # the ratio's bounds are draws (no interpolation): the 400th of 4000 sorted
        assert row.ratio_lower == np.sort(pb / pa)[399]
    assert "privilege_escalation" not in set(result.table["task"])
    assert result.refused == [
        "privilege_escalation: agent-a has a point value (expert_best_of_n), "
        "no posterior to compare"
    ]


def test_a_joint_posterior_compares_draw_by_draw():
    frame = _table(
        {("a", f"t{i}"): (i % 3, 8) for i in range(4)}
        | {("b", f"t{i}"): (2 + i % 2, 8) for i in range(4)}
    )
    posterior = bayes_eval.fit(
        frame, "end_to_end_pooled", sampler={"draws": 300, "tune": 300, "chains": 2}, seed=2
    )
    result = compare_agents(posterior, "a", "b", margin=0.0)
    mu = posterior.draws["mu"]
    ma, mb = (mu.sel(agent=x).values.ravel() for x in ("a", "b"))
    across = result.table.set_index("task").loc[ACROSS_TASKS]
    assert across["quantity"] == "mu"
    assert across["prob_b_greater"] == np.mean(mb > ma)
    assert across["diff_lower"] == pytest.approx(np.quantile(mb - ma, 1 - posterior.level))


def test_margin_verdicts_and_the_trials_that_decide():
    counts = {
        ("a", "t"): (2, 200),
        ("b", "t"): (150, 200),
        ("a", "u"): (5, 10),
        ("b", "u"): (5, 10),
    }
    posterior = bayes_eval.fit(_table(counts), "end_to_end")
    table = compare_agents(posterior, "a", "b", margin=0.1).table.set_index("task")
    assert table.loc["t", "verdict"] == "more capable"
    assert table.loc["u", "verdict"] == "undecided"
    assert table.loc["u", "trials_to_decide"] > 0
    table = compare_agents(posterior, "b", "a", margin=0.1).table.set_index("task")
    assert table.loc["t", "verdict"] == "not more capable"


def test_trials_to_separate_against_the_normal_limit():
    # two Beta(50, 50) posteriors. After n more trials each, the difference's posterior
    # sd is s_n = sqrt(2 * 0.25 / (100 + n)), and its mean, seen from now, is about
    # normal with variance v_n = 2 * 0.25 * (1 / 101 - 1 / (100 + n)) (preposterior):
    # the chance of a decision at margin M is P(|X - M| > z s_n), X ~ N(0, v_n).
    sd = np.sqrt(0.25 / 101)
    z = stats.norm.ppf(0.975)

    def chance(n, margin):
        s_n = np.sqrt(0.5 / (100 + n))
        v = np.sqrt(0.5 * (1 / 101 - 1 / (100 + n)))
        return stats.norm.sf((margin + z * s_n) / v) + stats.norm.cdf((margin - z * s_n) / v)

    # margin 0.2 lies 4.5 sd away already
    assert trials_to_separate(0.5, sd, 0.5, sd, 0.2, 0.975) == 0
    expected = optimize.brentq(lambda n: chance(n, 0.05) - 0.5, 1, 1e5)
    n = trials_to_separate(0.5, sd, 0.5, sd, 0.05, 0.975)
    assert n == pytest.approx(expected, rel=0.15)
    assert trials_to_separate(0.5, 0.0, 0.5, sd, 0.05, 0.975) is None


def test_compare_agents_on_the_command_line(tmp_path):
    out = tmp_path / "run"
    run = [sys.executable, "-m", "bayes_eval"]
    subprocess.run([*run, "fit", str(EXAMPLE), "--out", str(out)], capture_output=True, check=True)
    done = subprocess.run(
        [
            *run,
            "compare-agents",
            str(out),
            "agent-a",
            "agent-b",
            "--margin",
            "0",
            "--format",
            "csv",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    assert "not compared: privilege_escalation: agent-a has a point value" in done.stderr
    assert "verdict" in done.stdout.splitlines()[0]
    table = subprocess.run(
        [*run, "compare-agents", str(out), "agent-a", "agent-b"], capture_output=True, text=True
    )  # the table for reading says what it left out beside it
    assert "not compared: privilege_escalation: agent-a has a point value" in table.stdout
    bad = subprocess.run(
        [*run, "compare-agents", str(out), "agent-a", "agent-z"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "error: compare-agents: no agent 'agent-z' in the fit; agents: agent-a, agent-b"
    ]
    wide = subprocess.run(
        [*run, "compare-agents", str(out), "agent-a", "agent-b", "--margin", "2"],
        capture_output=True,
        text=True,
    )
    assert wide.returncode == 2 and wide.stdout == ""
    assert wide.stderr.strip().splitlines() == [
        "error: --margin: 2.0 must lie strictly between -1 and 1 (a difference of P)"
    ]


def test_difference_bounds_are_calibrated_where_the_truth_is_the_models_own_prior():
    # rates drawn from the uniform prior of end_to_end: the posterior of each difference
    # is exact, so its one-sided 0.9 bounds miss the truth 10% of the time each
    rng = np.random.default_rng(11)
    tasks = 1000
    rates = rng.uniform(size=(2, tasks))
    trials = rng.integers(1, 6, size=(2, tasks))
    successes = rng.binomial(trials, rates)
    counts = {
        (agent, f"t{t}"): (successes[i, t], trials[i, t])
        for i, agent in enumerate("ab")
        for t in range(tasks)
    }
    posterior = bayes_eval.fit(_table(counts), "end_to_end")
    table = compare_agents(posterior, "a", "b", level=0.9).table
    table = table[table["task"] != ACROSS_TASKS]
    truth = rates[1] - rates[0]
    # binomial sd of a 10% share of 1000: 0.0095; 3 sd
    assert np.mean(truth > table["diff_upper"].to_numpy()) == pytest.approx(0.1, abs=0.03)
    assert np.mean(truth < table["diff_lower"].to_numpy()) == pytest.approx(0.1, abs=0.03)


def test_the_comparison_study_runs_on_a_small_table(load_study):
    study = load_study("agent_comparison")
    rows = study.comparisons("end_to_end", "beta", 0, 3, 4, 2, 0.975, 0)
    assert len(rows) == 2 * 4  # two pairs of neighbours, four tasks
    assert rows["both_zero"].any()
    summary = study.summarise(rows)
    assert summary["tasks"].iloc[0] == 8 and summary["upper_missed"].between(0, 1).all()


def test_a_task_one_agent_never_ran_is_refused_by_name():
    counts = {("a", "t"): (3, 20), ("b", "t"): (8, 20), ("a", "u"): (0, 10)}
    posterior = bayes_eval.fit(_table(counts), "end_to_end")
    result = compare_agents(posterior, "a", "b")
    assert list(result.table["task"]) == ["t", ACROSS_TASKS]
    assert result.refused == ["u: b has no estimate (not run)"]
    with pytest.raises(bayes_eval.InputError, match="no task where both a and b"):
        compare_agents(
            bayes_eval.fit(_table({("a", "u"): (0, 10), ("b", "t"): (1, 5)}), "end_to_end"),
            "a",
            "b",
        )
