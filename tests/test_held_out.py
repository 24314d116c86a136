"""Held-out end-to-end outcomes: the joint model against the milestone method
(studies/held_out.py)."""

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval.checks.simulate import CAPTURE_THE_FLAG, random_design
from bayes_eval.specs import load_spec


def test_scores_match_the_closed_form_of_the_milestone_method(load_study):
    """Under mats2024 (uniform priors) a held-out 1/1 has predictive probability E[P] =
    prod (k + 1) / (n + 2), and 0/1 has 1 - E[P]; the draws' estimate is within Monte Carlo
    error of the log of each."""
    study = load_study("held_out")
    milestones = pd.DataFrame(
        dict(agent="a", task="t", method="milestone", step=[1, 2], successes=[3, 1], trials=4)
    )
    posterior = bayes_eval.fit(milestones, "mats2024")
    mean = (4 / 6) * (2 / 6)
    held = pd.DataFrame(dict(agent="a", task="t", successes=[1, 0], trials=1))
    scores = study.predictive_scores(posterior, held)
    p = posterior.draws["p_task"].values.ravel()
    error = 4 * p.std() / np.sqrt(p.size)  # 4 Monte Carlo standard errors of E[P]
    assert scores["predicted"].tolist() == pytest.approx([mean, mean], abs=error)
    assert scores["log_score"].iloc[0] == pytest.approx(np.log(mean), abs=error / mean)
    assert scores["log_score"].iloc[1] == pytest.approx(np.log(1 - mean), abs=error / (1 - mean))
    assert scores["brier"].tolist() == pytest.approx([(1 - mean) ** 2, mean**2], abs=2 * error)


def test_every_held_out_row_is_scored_once_per_model(load_study):
    study = load_study("held_out")
    ranges = {**CAPTURE_THE_FLAG, "agents": (2, 2), "tasks": (6, 6)}
    table, _ = random_design(np.random.default_rng(4), ranges)
    end_to_end = table[table["method"] == "end_to_end"]
    scores = study.study(table, ["mats2024"], folds=3, seed=0)
    assert len(scores) == len(end_to_end)
    assert sorted(zip(scores["agent"], scores["task"], strict=True)) == sorted(
        zip(end_to_end["agent"], end_to_end["task"], strict=True)
    )
    assert set(scores["fold"]) == {0, 1, 2}
    summary = study.summarise(scores)
    assert summary.loc["mats2024", "pairs"] == len(end_to_end)
    assert summary.loc["mats2024", "log_score"] == pytest.approx(scores["log_score"].mean())


def test_models_that_read_end_to_end_rows_are_refitted_fold_by_fold(load_study):
    study = load_study("held_out")
    models = ("joint", "crossed", "mats2024", "crossed_milestones")
    kind = {model: load_spec(model).kind for model in models}
    assert study.refitted(kind["joint"]) and study.refitted(kind["crossed"])
    assert not study.refitted(kind["mats2024"])
    assert not study.refitted(kind["crossed_milestones"])
    table, _ = random_design(np.random.default_rng(4), {**CAPTURE_THE_FLAG, "agents": (2, 2)})
    with pytest.raises(ValueError, match="cannot predict a pair whose rows are held out"):
        study.study(table, ["end_to_end_pooled"], folds=3, seed=0)


@pytest.mark.slow
def test_joint_predicts_held_out_unguided_runs_better_than_the_milestone_method(load_study):
    """On a simulated capture-the-flag table with a bypass on every task, the joint model's
    mean held-out log score beats the milestone method's by more than two standard errors,
    and every joint fit passes its diagnostics."""
    study = load_study("held_out")
    table, _ = random_design(np.random.default_rng(0), CAPTURE_THE_FLAG)
    scores = study.study(table, ["mats2024", "joint"], folds=5, seed=0)
    summary = study.summarise(scores)
    joint = summary.loc["joint"]
    assert joint["all_passed"]
    assert joint["log_score_vs_mats2024"] > 2 * joint["log_score_vs_mats2024_se"]


def test_a_cluster_gives_the_serial_scores(load_study, dask_scheduler):
    study = load_study("held_out")
    ranges = {**CAPTURE_THE_FLAG, "agents": (2, 2), "tasks": (6, 6)}
    table, _ = random_design(np.random.default_rng(4), ranges)
    serial = study.study(table, ["mats2024"], folds=3, seed=0)
    on_cluster = study.study(table, ["mats2024"], folds=3, seed=0, scheduler=dask_scheduler)
    pd.testing.assert_frame_equal(
        on_cluster.drop(columns="seconds"), serial.drop(columns="seconds")
    )
