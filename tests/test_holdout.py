"""Comparing models on end-to-end outcomes hidden from them (``checks.holdout``)."""

import io

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval.checks.holdout import _hidden, _split, compare_holdout
from bayes_eval.cli.main import main
from bayes_eval.evidence.table import load_evidence

SMALL = {"draws": 300, "tune": 300, "chains": 2}


def _guided_table(seed=5, agents=2, tasks=12, milestones=3):
    """Per pair one guided run of each milestone and one unguided run, one trial each
    (a capture-the-flag layout), with rates that give both outcomes."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(agents):
        for t in range(tasks):
            p = rng.uniform(0.3, 0.95, milestones)
            for m in range(milestones):
                rows.append((f"agent{a}", f"task{t:02d}", "milestone", m + 1,
                             int(rng.random() < p[m]), 1))  # fmt: skip
            rows.append((f"agent{a}", f"task{t:02d}", "end_to_end", np.nan,
                         int(rng.random() < p.prod()), 1))  # fmt: skip
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])


def test_every_pair_is_held_out_once_and_keeps_its_milestones():
    evidence = load_evidence(_guided_table())
    split = _split(evidence, 5, seed=7)
    pairs = [pair for fold in split for pair in fold]
    assert sorted(pairs) == sorted(evidence.pairs()) and len(set(pairs)) == 24
    assert sorted(len(fold) for fold in split) == [4, 5, 5, 5, 5]
    shown = _hidden(evidence, split[0], 0, 5).table
    hidden = set(split[0])
    for agent, task in hidden:
        rows = shown[(shown["agent"] == agent) & (shown["task"] == task)]
        assert list(rows["method"]) == ["milestone"] * 3
    assert len(shown) == len(evidence.table) - len(hidden)
    assert split == _split(evidence, 5, seed=7)  # the seed decides the split


def test_exact_milestone_models_score_the_closed_form_predictive(jeffreys_spec, tmp_path):
    """One unguided trial per pair: its predictive probability of success under the
    milestone method is the product of the milestones' posterior means (independent
    Betas), so the log score of the hidden outcome is known in closed form; the draws
    estimate it to within their Monte Carlo error."""
    table = _guided_table()
    models = ["mats2024", str(jeffreys_spec), "end_to_end"]
    result = compare_holdout(table, models, folds=3, seed=1)
    milestones = table[table["method"] == "milestone"]
    outcome = table[table["method"] == "end_to_end"].set_index(["agent", "task"])["successes"]
    for name, prior in (("mats2024", 1.0), ("jeffreys", 0.5)):
        means = (milestones["successes"] + prior) / (milestones["trials"] + 2 * prior)
        p = means.groupby([milestones["agent"], milestones["task"]], sort=False).prod()
        exact = np.where(outcome.loc[p.index] == 1, p, 1 - p)
        labels = [f"{agent} / {task}" for agent, task in p.index]
        scored = result.pointwise.loc[labels, f"log_score {name}"].to_numpy()
        # 4000 draws of a rate in [0, 1]: the Monte Carlo error of a mean is below 0.008
        np.testing.assert_allclose(np.exp(scored), exact, atol=0.03)
        predicted = result.pointwise.loc[labels, f"predicted {name}"].to_numpy()
        np.testing.assert_allclose(predicted, p.to_numpy(), atol=0.03)
        assert result.table.at[name, "elpd"] == pytest.approx(scored.sum())
        assert result.table.at[name, "predicted"] == "24 of 24"
        assert result.table.at[name, "observed"] == int(outcome.sum())
        assert result.table.at[name, "expected"] == pytest.approx(p.sum(), abs=0.2)
    held = result.pointwise.loc[[f"{a} / {t}" for a, t in outcome.index]]
    assert (held["successes"].to_numpy() == outcome.to_numpy()).all()
    assert (held["trials"] == 1).all()
    # the end-to-end model has nothing of a pair whose end-to-end rows are hidden
    assert set(result.unscored) == {"end_to_end"}
    assert "end_to_end cannot predict a held-out end-to-end outcome" in result.sentence


def test_the_folds_fitted_on_a_dask_cluster_give_the_serial_numbers(
    jeffreys_spec, tmp_path, dask_scheduler
):
    table = _guided_table()
    models = ["mats2024", str(jeffreys_spec), "end_to_end"]
    serial = compare_holdout(table, models, folds=3, seed=1)
    swept = compare_holdout(table, models, folds=3, seed=1, scheduler=dask_scheduler)
    pd.testing.assert_frame_equal(swept.table, serial.table)
    pd.testing.assert_frame_equal(swept.pointwise, serial.pointwise)
    assert swept.unscored == serial.unscored and swept.sentence == serial.sentence


def test_a_model_that_predicts_some_pairs_is_ranked_on_those_alone():
    """Haldane's prior (phuong2024) estimates no pair with a failed milestone at one
    trial; the ranking uses the pairs both models predict, and says how many."""
    table = _guided_table()
    result = compare_holdout(table, ["mats2024", "phuong2024"], folds=2, seed=1)
    milestones = table[table["method"] == "milestone"]
    all_passed = milestones.groupby(["agent", "task"])["successes"].min() == 1
    shared = int(all_passed.sum())
    assert 0 < shared < 24
    assert (result.table["pairs"] == shared).all() and len(result.pointwise) == shared
    assert result.table.at["phuong2024", "predicted"] == f"{shared} of 24"
    assert result.table.at["mats2024", "predicted"] == "24 of 24"
    # where every milestone passed, Haldane's posterior is a point mass at P = 1, so an
    # unguided failure there has probability 0: minus infinity, ranked last, no weight
    outcome = table[table["method"] == "end_to_end"].set_index(["agent", "task"])["successes"]
    zero = int((outcome[all_passed[all_passed].index] == 0).sum())
    assert zero > 0
    assert list(result.table.index) == ["mats2024", "phuong2024"]
    assert result.table.at["phuong2024", "elpd"] == -np.inf
    assert result.table.at["phuong2024", "weight"] == 0.0
    assert f"phuong2024 gives probability 0 to {zero} held-out outcome(s)" in result.sentence
    assert f"phuong2024 predicts {shared} of 24 held-out pairs (no estimate: " in result.sentence


@pytest.mark.slow  # two crossed fits, about a minute
def test_a_crossed_model_predicts_hidden_pairs_and_the_end_to_end_model_cannot():
    table = _guided_table(agents=3, tasks=8)
    result = compare_holdout(
        table, ["crossed", "end_to_end", "mats2024"], folds=2, seed=3, sampler=SMALL
    )
    assert set(result.table.index) == {"crossed", "mats2024"}
    assert result.table.at["crossed", "predicted"] == "24 of 24"
    assert result.table.at["crossed", "diagnostics"].endswith("of 2")
    assert result.table.at["mats2024", "diagnostics"] == "-"
    assert list(result.unscored) == ["end_to_end"]
    assert np.isfinite(result.pointwise.to_numpy()).all()
    assert result.table["weight"].sum() == pytest.approx(1.0)


def test_the_command_refuses_what_it_cannot_hold_out(tmp_path, capsys):
    table = tmp_path / "t.csv"
    _guided_table(tasks=3).astype({"step": "Int64"}).to_csv(table, index=False)
    cases = [
        (["--models", "mats2024", "phuong2024", "--folds", "9"], "--folds: 9 folds of 6 pair"),
        (["--models", "mats2024", "--folds", "2"], "--models: name two models or more"),
        (["--models", "mats2024", "phuong2024", "--folds", "1"], "--folds: 1 must be >= 2"),
    ]
    for extra, message in cases:
        assert main(["compare", str(table), "--holdout", "end_to_end", *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith(f"error: {message}"), err
    milestones_only = tmp_path / "m.csv"
    pd.DataFrame(
        dict(task="t", method="milestone", step=[1, 2], successes=[1, 2], trials=[3, 4])
    ).to_csv(milestones_only, index=False)
    code = main(["compare", str(milestones_only), "--models", "mats2024", "phuong2024",
                 "--holdout", "end_to_end"])  # fmt: skip
    assert code == 2
    assert "no end_to_end rows, so no end-to-end outcome to hold out" in capsys.readouterr().err
    # one comparison of fitted models runs here: nothing for a dask cluster to do
    assert (
        main(["compare", str(table), "--models", "mats2024", "phuong2024", "--workers", "2"]) == 2
    )
    assert "--workers: applies to --holdout's fits" in capsys.readouterr().err


def test_the_command_prints_the_ranking_and_what_could_not_be_scored(
    jeffreys_spec, tmp_path, capsys
):
    table = tmp_path / "t.csv"
    _guided_table(tasks=4).astype({"step": "Int64"}).to_csv(table, index=False)
    models = ["mats2024", "end_to_end", str(jeffreys_spec)]
    args = ["compare", str(table), "--models", *models, "--holdout", "end_to_end"]
    assert main([*args, "--folds", "2", "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert set(frame["model"]) == {"mats2024", "jeffreys"}
    assert (frame["pairs"] == 8).all()
    assert bayes_eval.compare_holdout is compare_holdout
    assert main([*args, "--folds", "2"]) == 0
    out = capsys.readouterr().out
    assert "predicts held-out end-to-end outcomes best (8 pairs shared)" in out
    assert "end_to_end cannot predict a held-out end-to-end outcome" in out
