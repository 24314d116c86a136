"""The pooled models at their defaults on random realistic tables (studies/robustness.py)."""

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval.checks.simulate import DESIGN_RANGES, random_design
from bayes_eval.inference.retry import _badness


def test_random_designs_cover_the_ranges_and_the_hard_cells():
    rng = np.random.default_rng(3)
    designs = [random_design(rng) for _ in range(30)]
    for table, design in designs:
        milestones = table[table["method"] == "milestone"]
        assert 1 <= design["agents"] <= 10 and 3 <= design["tasks"] <= 50
        assert milestones["trials"].between(1, 100).all()
        assert milestones.groupby(["agent", "task"]).size().between(2, 8).all()
        assert (milestones["successes"] <= milestones["trials"]).all()
        assert design["pairs"] == len(milestones.groupby(["agent", "task"]))
        bayes_eval.load_evidence(table)  # a valid evidence table
    summary = pd.DataFrame([d for _, d in designs])
    assert (summary["pairs"] < summary["agents"] * summary["tasks"]).mean() > 0.5  # missing
    assert (summary["zero_cells"] > 0).mean() > 0.3 and (summary["full_cells"] > 0).all()
    assert summary["trials"].min() < 5 and summary["trials"].max() > 30
    assert summary["end_to_end_cells"].gt(0).all()


@pytest.mark.slow  # a study of every model; each keeps a real-MCMC check (tests/test_sbc.py)
def test_a_small_design_passes_at_the_defaults(load_study):
    """One sparse design, each pooled model as `bayes-eval fit` runs it (real sampling)."""
    study = load_study("robustness")
    ranges = {**DESIGN_RANGES, "agents": (2, 2), "tasks": (4, 4), "trials": (2, 2)}
    table, _ = random_design(np.random.default_rng(5), ranges)
    rows = [study.one_fit(model, table, seed=1) for model in study.MODELS]
    results = pd.DataFrame(rows)
    assert results["passed"].all(), results[["model", "failed"]]
    summary = study.summarise(results)
    assert list(summary.index) == list(study.MODELS)
    assert (summary["passed"] == 1.0).all()


def test_a_fit_that_passed_is_preferred_to_one_that_failed():
    """The order that picks the fit to keep, on real fits of the same table."""
    frame = pd.DataFrame(
        dict(task=list("abcdef"), method="end_to_end", successes=[0, 1, 5, 2, 9, 3], trials=10)
    )
    starved = bayes_eval.fit(
        frame, "end_to_end_pooled", sampler={"draws": 30, "tune": 20, "chains": 2}, seed=1
    ).diagnostics
    full = bayes_eval.fit(frame, "end_to_end_pooled", seed=1).diagnostics
    assert full.ok and not starved.ok
    assert _badness(full) < _badness(starved)
    assert sorted([starved, full], key=_badness)[0] is full


@pytest.mark.slow
def test_most_random_designs_pass_at_the_defaults(load_study):
    study = load_study("robustness")
    results = study.study(10, ("hierarchical", "joint"), seed=100)
    assert results["passed"].mean() >= 0.9, results[["design", "model", "failed"]]


# pooled fits on a cluster; test_holdout and test_sweep keep a cluster's serial numbers
@pytest.mark.slow
def test_a_cluster_gives_the_serial_fits_and_keeps_each_as_it_finishes(
    load_study, dask_scheduler, tmp_path
):
    """Every (design, model) fit once, in design order, each row in the CSV as it ends;
    the same diagnostics as serially (the times differ)."""
    study = load_study("robustness")
    ranges = {**DESIGN_RANGES, "agents": (1, 2), "tasks": (3, 4), "end_to_end_share": (1, 1)}
    models = ("end_to_end_pooled",)
    serial = study.study(2, models, seed=7, ranges=ranges)
    out = tmp_path / "robustness.csv"
    on_cluster = study.study(2, models, seed=7, ranges=ranges, out=out, scheduler=dask_scheduler)
    assert list(on_cluster["design"]) == [0, 1]
    pd.testing.assert_frame_equal(
        on_cluster.drop(columns="seconds"), serial.drop(columns="seconds")
    )
    written = pd.read_csv(out).sort_values("design", ignore_index=True)
    assert list(written["design"]) == [0, 1]
