"""Calibration against ground truth: hand-worked values, known truth, the published table."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayes_eval
from bayes_eval.checks.calibration import calibrate, published_calibration
from bayes_eval.checks.simulate import paths_study
from bayes_eval.cli.main import main
from bayes_eval.resources import shipped_datasets

APPENDIX = str(shipped_datasets()["mats2024_appendix"])
COUNTS = str(shipped_datasets()["mats2024_counts"])


def e2e(task, successes, trials):
    return dict(task=task, method="end_to_end", successes=successes, trials=trials)


def test_beta_binomial_predictive_by_hand():
    # Uniform prior, 1 of 2 -> Beta(2, 2). One ground-truth run that succeeds:
    # P(K = 1) = E[P] = 1/2 and P(K < 1) = 1/2, so the PIT lies in [1/2, 1].
    posterior = bayes_eval.fit(pd.DataFrame([e2e("t", 1, 2)]), "end_to_end")
    result = calibrate(posterior, pd.DataFrame([e2e("t", 1, 1)]), seed=3)
    cell = result.cells.iloc[0]
    assert cell["log_score"] == pytest.approx(np.log(0.5))
    assert 0.5 <= cell["pit"] <= 1.0
    # The bound is below 1, so the one run exceeds it exactly when it succeeds.
    assert cell["exceed_chance"] == pytest.approx(0.5)
    # Beta(2, 2) predictive of 3 runs, none a success: B(2, 5) / B(2, 2) = (1/30) / (1/6).
    result = calibrate(posterior, pd.DataFrame([e2e("t", 0, 3)]), seed=3)
    assert result.cells.iloc[0]["log_score"] == pytest.approx(np.log(0.2))
    assert result.cells.iloc[0]["pit"] <= 0.2


def test_product_predictive_from_draws_matches_the_exact_mean():
    # Two milestones, posterior Beta(31, 71) x Beta(21, 81) under the uniform prior;
    # one ground-truth run: P(K = 1) = E[P] = product of the means, exactly.
    frame = pd.DataFrame(
        [
            dict(task="t", method="milestone", step=1, successes=30, trials=100),
            dict(task="t", method="milestone", step=2, successes=20, trials=100),
        ]
    )
    posterior = bayes_eval.fit(frame, "mats2024")
    result = calibrate(posterior, pd.DataFrame([e2e("t", 1, 1)]))
    exact = (31 / 102) * (21 / 102)
    draws = posterior.tree["posterior"]["p_task"].values.ravel()
    tolerance = 4 * draws.std() / np.sqrt(draws.size)
    assert abs(np.exp(result.cells.iloc[0]["log_score"]) - exact) < tolerance


def test_pit_uniform_when_well_specified_and_not_under_bypass():
    """The issue's criterion: uniform at the 1% level on data drawn from the model's own
    prior; the milestone method's miscalibration detected when a bypass path exists."""
    results = paths_study(
        models=("mats2024",), tasks=300, milestones=2, strengths=(0.0, 0.2), seed=1
    ).set_index("strength")
    assert results.loc[0.0, "pit_ks_p_value"] > 0.01
    assert results.loc[0.2, "pit_ks_p_value"] < 0.01
    # Bounds below the true P: nominal 2.5% when well specified (99% binomial range) ...
    assert results.loc[0.0, "bound_failures"] <= stats.binom.ppf(0.99, 300, 0.025)
    # ... and most of them with a bypass of 0.2.
    assert results.loc[0.2, "failure_rate"] > 0.5


def test_coverage_and_exceedance_on_simulated_truth():
    rng = np.random.default_rng(4)
    truth_p = rng.uniform(size=400)
    evidence = pd.DataFrame(
        [e2e(f"t{i}", int(rng.binomial(20, p)), 20) for i, p in enumerate(truth_p)]
    )
    truth = pd.DataFrame(
        [e2e(f"t{i}", int(rng.binomial(50, p)), 50) for i, p in enumerate(truth_p)]
    )
    result = calibrate(bayes_eval.fit(evidence, "end_to_end"), truth, seed=5)
    coverage = result.coverage()
    for row in coverage.itertuples():  # binomial test per level, Bonferroni at 1% overall
        assert stats.binomtest(row.covered, row.cells, row.nominal).pvalue > 0.01 / len(coverage)
    assert result.to_dict()["calibrated_cells"] == 400
    # Exceedances are independent Bernoulli(exceed_chance) when the model is calibrated.
    chance = result.cells["exceed_chance"]
    spread = np.sqrt((chance * (1 - chance)).sum())
    observed = result.exceedance()["exceeded"]
    assert abs(observed - chance.sum()) < 3 * spread
    assert chance.sum() > 2 * 0.025 * 400  # ground-truth noise: far above the nominal 2.5%


def test_point_values_are_listed_not_calibrated():
    frame = pd.DataFrame(
        [
            dict(task="t", method="expert_best_of_n", step=1, chosen_index=2),
            dict(task="u", method="end_to_end", successes=1, trials=10),
        ]
    )
    posterior = bayes_eval.fit(frame, "phuong_chain")
    result = calibrate(posterior, pd.DataFrame([e2e("t", 1, 10), e2e("u", 1, 10)]))
    noted = result.cells.set_index("task")
    assert noted.loc["t", "note"].startswith("no posterior to calibrate")
    assert np.isnan(noted.loc["t", "pit"]) and noted.loc["u", "note"] == ""
    assert result.exceedance()["cells"] == 1


def test_published_counts_from_the_command(capsys):
    assert main(["calibrate", "--published", APPENDIX, "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["end_to_end"]["exceeded"], result["end_to_end"]["tasks"]) == (1, 10)
    assert result["end_to_end"]["exceeded_tasks"] == ["agent_script"]
    assert (result["end_grading_only"]["exceeded"], result["end_grading_only"]["tasks"]) == (7, 10)


def test_published_rank_correlations():
    correlations = published_calibration(APPENDIX)["correlations"]
    table = pd.read_csv(APPENDIX)
    # Spearman's rho from its definition on untied ranks, 1 - 6 sum d^2 / (n (n^2 - 1)).
    d = table["milestone_mean"].rank() - table["end_to_end"].rank()
    rho = 1 - 6 * (d**2).sum() / (10 * (10**2 - 1))
    assert correlations["milestone_mean"]["end_to_end"]["spearman"] == pytest.approx(rho)
    # The published finding: best-of-N is poorly related to either ground truth.
    for truth in ("end_to_end", "end_grading_only"):
        best_of_n = correlations["expert_best_of_n"][truth]
        assert (
            best_of_n["spearman"] < 0.3 < correlations["expert_completion_ratio"][truth]["spearman"]
        )
    # marathon_pace's best-of-N estimate is 0, left out of the log-scale correlation.
    assert correlations["expert_best_of_n"]["end_to_end"]["n_log10"] == 9


def test_calibrate_run_dir_writes_table_and_plot(capsys, tmp_path):
    run = tmp_path / "run"
    assert main(["fit", COUNTS, "--model", "mats2024", "--out", str(run)]) == 0
    appendix = pd.read_csv(APPENDIX).set_index("task")
    tasks = pd.read_csv(COUNTS)["task"].unique()
    truth = pd.DataFrame(
        [e2e(t, round(100 * appendix.loc[t, "end_grading_only"]), 100) for t in tasks]
    )
    truth.to_csv(tmp_path / "truth.csv", index=False)
    capsys.readouterr()
    status = main(["calibrate", str(run), "--truth", str(tmp_path / "truth.csv")])
    out = capsys.readouterr().out
    assert status == 0 and "PIT uniformity" in out
    assert (run / "calibration.png").stat().st_size > 0
    cells = pd.read_csv(run / "calibration.csv")
    assert len(cells) == len(tasks)
    assert (
        main(["calibrate", str(run), "--truth", str(tmp_path / "truth.csv"), "--format", "json"])
        == 0
    )
    overall = json.loads(capsys.readouterr().out)
    # Final-answer grading: the milestone bounds miss most tasks (6 of these 8).
    assert overall["exceedance"]["exceeded"] == int((cells["exceeded"]).sum()) >= 5
    assert overall["pit_ks_p_value"] < 0.01


@pytest.mark.parametrize(
    "rows, message",
    [
        (
            [dict(task="agent_script", method="milestone", step=1, successes=1, trials=2)],
            "row 2, column method: 'milestone' is not end_to_end",
        ),
        ([e2e("nonexistent", 1, 2)], "row 2, column task: task 'nonexistent'"),
        ([e2e("agent_script", 3, 2)], "row 2, column successes"),
        # the predictive is summed over every count: 10^18 was a MemoryError (exit 1)
        ([e2e("agent_script", 1, 10**18)], "row 2, column trials: 1000000000000000000 ground"),
    ],
)
def test_bad_truth_is_one_line_and_writes_nothing(capsys, tmp_path, rows, message):
    run = tmp_path / "run"
    assert main(["fit", COUNTS, "--model", "mats2024", "--out", str(run)]) == 0
    before = sorted(p.name for p in run.iterdir())
    pd.DataFrame(rows).to_csv(tmp_path / "truth.csv", index=False)
    capsys.readouterr()
    status = main(["calibrate", str(run), "--truth", str(tmp_path / "truth.csv")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and message in err
    assert err.startswith(f"error: {tmp_path / 'truth.csv'}")
    assert sorted(p.name for p in run.iterdir()) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["calibrate"], "needs RUN_DIR and --truth"),
        (["calibrate", "--published", APPENDIX, "somewhere"], "either --published"),
        (["calibrate", "--published", "missing.csv"], "missing.csv: no such file"),
    ],
)
def test_bad_calibrate_arguments(capsys, args, message):
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1


def test_bad_published_value(capsys, tmp_path):
    table = pd.read_csv(APPENDIX)
    table.loc[3, "end_to_end"] = 1.5
    table.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["calibrate", "--published", str(tmp_path / "bad.csv")]) == 2
    assert "row 5, column end_to_end: '1.5' is not a probability" in capsys.readouterr().err
