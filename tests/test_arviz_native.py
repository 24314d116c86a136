"""A fit's tree works in ArviZ unchanged: ``arviz_stats`` summarises it, computes LOO,
compares and checks LOO-PIT, and ``arviz_plots`` draws its PIT plots; every dimension is
labelled, and agents and tasks keep the input's order."""

import matplotlib
import numpy as np
import pandas as pd
import pytest

import bayes_eval

matplotlib.use("Agg")

SMALL = {"draws": 200, "tune": 200, "chains": 2}


def _ragged_end_to_end():
    """Agents and tasks in an order no sort gives, one trial in most cells, a pair never
    run and zero-success rows."""
    rows = [
        ("zeta", "t9", 0, 1), ("zeta", "t2", 1, 1), ("zeta", "t5", 0, 1), ("zeta", "t1", 0, 3),
        ("alpha", "t9", 1, 1), ("alpha", "t2", 0, 1), ("alpha", "t1", 2, 5),
        ("mu", "t9", 0, 1), ("mu", "t2", 1, 1), ("mu", "t5", 0, 1), ("mu", "t1", 0, 1),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["agent", "task", "successes", "trials"]).assign(
        method="end_to_end"
    )


def _milestones_then_end_to_end():
    """A task's end-to-end row after its milestone rows, tasks out of sorted order (a
    sort by step would put the end-to-end tasks first), and of 3 and 2 milestones."""
    rows = []
    for agent in ("b", "a"):
        for t, task in enumerate(("x3", "x1", "x2")):
            for step in range(1, 4 if task == "x3" else 3):
                rows.append((agent, task, "milestone", step, int((step + t) % 2 == 0), 2))
            if task != "x1":
                rows.append((agent, task, "end_to_end", None, int(agent == "a"), 1))
    columns = ["agent", "task", "method", "step", "successes", "trials"]
    return pd.DataFrame(rows, columns=columns)


CASES = [
    pytest.param("end_to_end", _ragged_end_to_end, None, id="end_to_end"),
    pytest.param("mats2024", _milestones_then_end_to_end, None, id="mats2024"),
    pytest.param("end_to_end_pooled", _ragged_end_to_end, SMALL, id="end_to_end_pooled"),
    pytest.param("crossed", _ragged_end_to_end, SMALL, id="crossed", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("model", "table", "sampler"), CASES)
def test_arviz_reads_the_tree_unchanged(model, table, sampler):
    import arviz_plots
    import arviz_stats

    evidence = table()
    posterior = bayes_eval.fit(evidence, model, sampler=sampler, seed=5)
    tree = posterior.tree
    for name, group in tree.children.items():
        unlabelled = [dim for dim in group.dims if dim.endswith("_dim_0")]
        assert not unlabelled, (name, unlabelled)
    agents, tasks = list(dict.fromkeys(evidence["agent"])), list(dict.fromkeys(evidence["task"]))
    p_task = tree["posterior"]["p_task"]
    assert list(p_task["agent"].values) == agents
    assert list(p_task["task"].values) == [t for t in tasks if t in p_task["task"].values]
    summary = arviz_stats.summary(tree)
    estimated = {f"[{agent}, {task}]" for agent, task, _, _ in posterior.cells()}
    unestimated = [row for row in summary.index if row[row.index("[") :] not in estimated]
    blank = summary.index[summary.isna().any(axis=1)]
    # only a pair the model gives no posterior (never run) has a row without numbers:
    # no padded milestone slot, no unlabelled dimension
    assert set(blank) <= {row for row in unestimated if row.startswith("p_task[")}, blank
    assert (summary.loc[summary.index.str.startswith("p_"), "r_hat"].dropna() < 1.1).all()
    assert tree["posterior"].sizes["chain"] > 1
    loo = arviz_stats.loo(tree, pointwise=True)
    assert np.isfinite(loo.elpd) and loo.pareto_k.size == tree["observed_data"].sizes["cell"]
    pit = arviz_stats.loo_pit(tree)
    values = pit["successes"].values
    assert ((values >= 0) & (values <= 1)).all()
    assert arviz_plots.plot_ppc_pit(tree, backend="matplotlib") is not None
    assert arviz_plots.plot_loo_pit(tree, backend="matplotlib") is not None
    if sampler is not None and table is _ragged_end_to_end:  # the same cells as the exact fit
        trees = {model: tree, "end_to_end": bayes_eval.fit(evidence, "end_to_end").tree}
        ranked = arviz_stats.compare(trees)
        assert sorted(ranked.index) == sorted(trees)
        assert ranked["weight"].sum() == pytest.approx(1.0)


def test_a_pooled_milestone_tree_has_task_means_on_their_agent_and_task():
    import arviz_stats

    table = _milestones_then_end_to_end()
    tree = bayes_eval.fit(table, "hierarchical", sampler=SMALL, seed=5).tree
    assert not [dim for dim in tree["posterior"].dims if dim.endswith("_dim_0")]
    assert np.isfinite(arviz_stats.loo(tree).elpd)
    mu_task = tree["posterior"]["mu_task"]
    assert mu_task.dims == ("chain", "draw", "agent", "task")
    assert list(mu_task["task"].values) == ["x3", "x1", "x2"]
    assert np.isfinite(mu_task.sel(agent="a", task="x1").values).all()
    assert "pair" not in tree["posterior"].dims
