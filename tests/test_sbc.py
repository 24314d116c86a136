"""Simulation-based calibration of every pooled model (small here, larger under slow)."""

import pandas as pd
import pytest

import bayes_eval
import bayes_eval.families.simulation
from bayes_eval.checks.sbc import sbc


def design(model: str) -> pd.DataFrame:
    """A small evidence design per model; its counts are ignored by SBC."""
    if model == "end_to_end_shared":  # the concentration shared across three agents
        return pd.DataFrame(
            dict(
                agent=[f"a{t % 3}" for t in range(12)],
                task=[f"t{t // 3}" for t in range(12)],
                method="end_to_end",
                successes=0,
                trials=10,
            )
        )
    if model.startswith("end_to_end"):
        return pd.DataFrame(
            dict(task=[f"t{t}" for t in range(6)], method="end_to_end", successes=0, trials=30)
        )
    if model == "ecr_pooled":
        return pd.DataFrame(
            [
                dict(
                    task=f"t{t}", method="expert_completion", run=r, step=s, successes=0, trials=10
                )
                for t in range(2)
                for r in ("a", "b")
                for s in (1, 2, 3)
            ]
        )
    rows = [
        dict(task=f"t{t}", method="milestone", step=s, successes=0, trials=30)
        for t in range(4)
        for s in (1, 2)
    ]
    if model == "joint":
        # rates sampled (20 end-to-end trials), marginalised (3 trials, and none)
        rows += [dict(task=f"t{t}", method="end_to_end", successes=0, trials=20) for t in (0, 1)]
        rows += [dict(task="t2", method="end_to_end", successes=0, trials=3)]
    return pd.DataFrame(rows)


# end_to_end_zero_inflated's rates have a point mass at 0: ties with the truth are broken
# at random, so its ranks are uniform too.
MODELS = [
    "end_to_end_pooled",
    "end_to_end_zero_inflated",
    "end_to_end_shared",
    "hierarchical",
    "ecr_pooled",
    "joint",
]
# Task means (and joint's milestone rates) sampled centred and non-centred: the three
# models with task means share that code, so the default run checks the non-centred task
# means once (hierarchical). Joint, whose SBC takes two minutes to compile and sample in
# either form, is checked under slow; its real-MCMC check in the default run is a fit
# that must pass its diagnostics (test_hierarchical).
CENTRED = [(m, "centred") for m in MODELS]
NONCENTRED = [(m, "non-centred") for m in MODELS if not m.startswith("end_to_end")]


@pytest.mark.parametrize("model, form", [*CENTRED[:-1], NONCENTRED[0]])
def test_small_sbc_ranks_are_uniform(model, form):
    result = sbc(design(model), model, simulations=20, draws=99, bins=4, seed=11, form=form)
    if not model.startswith("end_to_end"):
        assert "mu_task[0]" in result.ranks.columns
    assert result.ranks.shape[0] == 20
    assert result.ranks.to_numpy().min() >= 0 and result.ranks.to_numpy().max() <= 99
    assert any(c.startswith("p_task") for c in result.ranks.columns)
    assert result.passed(alpha=0.01), result.p_values.sort_values().head()


def test_sbc_detects_a_broken_redraw(monkeypatch):
    """Negative control: redraw the rates from the design's counts instead of the
    simulated ones (a bug SBC caught during development); p_task ranks must fail."""
    monkeypatch.setattr(
        bayes_eval.families.simulation, "with_counts", lambda layout, spec, data: layout
    )
    result = sbc(design("hierarchical"), "hierarchical", simulations=20, draws=99, bins=4, seed=11)
    assert not result.passed(alpha=0.01)
    failing = result.p_values[result.p_values < 0.01 / len(result.p_values)]
    assert all(name.startswith("p_task") for name in failing.index)


@pytest.mark.slow
@pytest.mark.parametrize("model, form", CENTRED + NONCENTRED)
def test_larger_sbc_ranks_are_uniform(model, form):
    result = sbc(design(model), model, simulations=100, draws=99, bins=10, seed=12, form=form)
    assert result.passed(alpha=0.01), result.p_values.sort_values().head()


def clustered_design(model: str) -> pd.DataFrame:
    """Runs in clusters of unequal size (1 to 4 runs); counts ignored by SBC."""
    steps = [None] if model == "end_to_end_pooled" else [1, 2]
    method = "end_to_end" if model == "end_to_end_pooled" else "milestone"
    rows = [
        dict(task=f"t{t}", method=method, step=s, cluster=f"c{c}", successes=0, trials=1 + c)
        for t in range(5 if method == "end_to_end" else 3)
        for s in steps
        for c in range(4)
    ]
    frame = pd.DataFrame(rows)
    return frame.drop(columns="step") if steps == [None] else frame


@pytest.mark.slow
@pytest.mark.parametrize("model", ["end_to_end_pooled", "hierarchical"])
def test_clustered_sbc_ranks_are_uniform(model):
    """The exact marginal over clusters and its redraw (compiled anew per simulation)."""
    result = sbc(clustered_design(model), model, simulations=100, draws=99, bins=10, seed=13)
    assert "kappa_cluster[0]" in result.ranks.columns
    assert result.passed(alpha=0.01), result.p_values.sort_values().head()


def test_sbc_of_an_exact_model_is_refused_by_its_family():
    """An exact posterior has no sampler to calibrate: its family refuses SBC in one line
    (it failed with a KeyError on a pooled prior's role)."""
    with pytest.raises(bayes_eval.InputError, match="sbc: model mats2024 is exact"):
        sbc(design("hierarchical"), "mats2024", simulations=2)


def test_a_form_for_a_crossed_model_is_refused():
    """The crossed models choose their own form: asking for one is refused, not ignored."""
    with pytest.raises(bayes_eval.InputError, match="form 'centred' is the pooled models'"):
        sbc(design("end_to_end_pooled"), "crossed", simulations=2, form="centred")
