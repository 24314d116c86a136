"""Held-out end-to-end outcomes: the pooled and crossed models against the milestone
method (studies/held_out.py, a caller of ``compare_holdout``)."""

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval.checks.simulate import CAPTURE_THE_FLAG, random_design


def test_brier_and_paired_differences_match_the_closed_form(jeffreys_spec, tmp_path, load_study):
    """Under an exact milestone model a pair's mean predicted rate is the product of its
    milestones' posterior means; the Brier score is its squared distance from the held-out
    k / n, and the paired difference from mats2024 is the mean of the per-pair differences,
    with their standard error."""
    study = load_study("held_out")
    ranges = {**CAPTURE_THE_FLAG, "agents": (2, 2), "tasks": (6, 6)}
    table, _ = random_design(np.random.default_rng(4), ranges)
    models = ["mats2024", str(jeffreys_spec)]
    result = bayes_eval.compare_holdout(table, models, folds=3, seed=0)
    scores = study.per_pair(result.pointwise, result.table.index)
    end_to_end = table[table["method"] == "end_to_end"]
    assert len(scores) == 2 * len(end_to_end)
    milestones = table[table["method"] == "milestone"]
    outcome = end_to_end.set_index(["agent", "task"])
    labels = [f"{agent} / {task}" for agent, task in outcome.index]
    observed = (outcome["successes"] / outcome["trials"]).to_numpy()
    brier = {}
    for name, prior in (("mats2024", 1.0), ("jeffreys", 0.5)):
        means = (milestones["successes"] + prior) / (milestones["trials"] + 2 * prior)
        p = means.groupby([milestones["agent"], milestones["task"]], sort=False).prod()
        mine = scores[scores["model"] == name].set_index("pair").loc[labels]
        # 4000 draws of a rate in [0, 1]: the Monte Carlo error of a mean is below 0.008
        np.testing.assert_allclose(mine["predicted"], p.loc[outcome.index], atol=0.03)
        np.testing.assert_allclose(mine["brier"], (mine["predicted"] - observed) ** 2)
        brier[name] = mine["brier"].to_numpy()
    summary = study.summarise(scores)
    diff = brier["jeffreys"] - brier["mats2024"]
    assert summary.at["jeffreys", "brier_vs_mats2024"] == pytest.approx(diff.mean())
    se = diff.std(ddof=1) / np.sqrt(diff.size)
    assert summary.at["jeffreys", "brier_vs_mats2024_se"] == pytest.approx(se)
    assert summary.at["mats2024", "pairs"] == len(end_to_end)
    assert summary.at["mats2024", "brier"] == pytest.approx(brier["mats2024"].mean())


def test_the_study_writes_one_row_per_held_out_pair_and_model(
    jeffreys_spec, tmp_path, load_study, capsys
):
    study = load_study("held_out")
    argv = ["--folds", "2", "--models", "mats2024", str(jeffreys_spec)]
    argv += ["--out", str(tmp_path), "--rate", "0.2", "0.9", "--milestones", "2", "3"]
    assert study.main(argv) == 0
    written = pd.read_csv(tmp_path / "held_out.csv")
    assert set(written["model"]) == {"mats2024", "jeffreys"}
    assert written.groupby("model").size().nunique() == 1
    assert not written.duplicated(["pair", "model"]).any()
    assert "predicts held-out end-to-end outcomes" in capsys.readouterr().out


@pytest.mark.slow
def test_joint_predicts_held_out_unguided_runs_better_than_the_milestone_method(load_study):
    """On a simulated capture-the-flag table with a bypass on every task, the joint model's
    mean held-out log score beats the milestone method's by more than two standard errors,
    and every joint fit passes its diagnostics."""
    study = load_study("held_out")
    table, _ = random_design(np.random.default_rng(0), CAPTURE_THE_FLAG)
    result = bayes_eval.compare_holdout(table, ["mats2024", "joint"], folds=5, seed=0)
    assert result.table.at["joint", "diagnostics"] == "5 of 5"
    joint = study.summarise(study.per_pair(result.pointwise, result.table.index)).loc["joint"]
    assert joint["log_score_vs_mats2024"] > 2 * joint["log_score_vs_mats2024_se"]
