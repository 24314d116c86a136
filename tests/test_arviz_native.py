"""A fit's tree works in ArviZ unchanged: ``arviz_stats`` summarises it, computes LOO,
compares and checks LOO-PIT, and ``arviz_plots`` draws its PIT plots; every dimension is
labelled, and agents and tasks keep the input's order."""

from pathlib import Path

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
    unestimated = [row for row in summary.index if row[row.find("[") :] not in estimated]
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


def _prior_groups_match(tree):
    """The prior has the posterior's variables (less the sampler's parts it has no prior for)
    on the same dims and coordinates, and its predictive the posterior's cells."""
    posterior, prior = tree["posterior"], tree["prior"]
    parts = {v for v in posterior.data_vars if v.endswith(("_logit", "_z"))}
    assert set(prior.data_vars) <= set(posterior.data_vars)
    assert set(posterior.data_vars) - set(prior.data_vars) <= parts
    for name in prior.data_vars:
        assert prior[name].dims == posterior[name].dims, name
        for dim in prior[name].dims[2:]:
            assert list(prior[dim].values) == list(posterior[dim].values), (name, dim)
    cells = tree["prior_predictive"]["cell"].values
    assert list(cells) == list(tree["posterior_predictive"]["cell"].values)


def test_an_exact_prior_is_the_spec_prior_and_its_log_density(tmp_path):
    """Under a Beta(2, 2) end-to-end prior the prior draws of every pair are Beta(2, 2)
    (KS against scipy), a cell of 1 trial succeeds half the time before any data, and
    the log prior of each posterior draw is log(6 p (1 - p)) (by hand)."""
    from scipy import stats

    text = (Path(bayes_eval.__file__).parents[1] / "models" / "end_to_end.toml").read_text()
    spec = tmp_path / "beta22.toml"
    spec.write_text(text.replace("alpha = 1.0\nbeta = 1.0", "alpha = 2.0\nbeta = 2.0"))
    evidence = _ragged_end_to_end()
    tree = bayes_eval.fit(evidence, str(spec), seed=3).tree
    _prior_groups_match(tree)
    prior = tree["prior"]["p_task"]
    draws = prior.sel(agent="zeta", task="t9").values.ravel()
    assert stats.kstest(draws, stats.beta(2, 2).cdf).pvalue > 0.01
    assert np.isnan(prior.sel(agent="alpha", task="t5")).all()  # never run
    replicated = tree["prior_predictive"]["successes"].sel(cell="zeta / t9 / end_to_end")
    replicated = replicated.values.ravel()
    assert abs(replicated.mean() - 0.5) < 4 * 0.5 / np.sqrt(replicated.size)
    p = tree["posterior"]["p_task"].sel(agent="mu", task="t2").values
    log_prior = tree["log_prior"]["p_task"].sel(agent="mu", task="t2").values
    assert np.allclose(log_prior, np.log(6 * p * (1 - p)))


def test_a_uniform_prior_has_no_log_prior_to_power_scale():
    """Beta(1, 1) is the same at every power: no log_prior group, and prior draws that
    are uniform."""
    from scipy import stats

    tree = bayes_eval.fit(_ragged_end_to_end(), "end_to_end", seed=3).tree
    assert "log_prior" not in tree
    draws = tree["prior"]["p_task"].sel(agent="mu", task="t1").values.ravel()
    assert stats.kstest(draws, stats.uniform.cdf).pvalue > 0.01


def _pooled_prior_checks(posterior, name: str, role: str) -> None:
    """The prior groups mirror the posterior; ``log_prior`` of ``name`` is its spec
    density (a LogNormal, of prior ``role``, by hand) at its posterior draws;
    ``psense_summary`` and ``plot_prior_posterior`` run on the tree unchanged."""
    import arviz_plots
    import arviz_stats

    tree = posterior.tree
    _prior_groups_match(tree)
    mu, sigma = (posterior.spec.priors[role].params[k] for k in ("mu", "sigma"))
    x = tree["posterior"][name].values
    by_hand = -np.log(x * sigma * np.sqrt(2 * np.pi)) - (np.log(x) - mu) ** 2 / (2 * sigma**2)
    assert np.allclose(tree["log_prior"][name].values, by_hand)
    sensitivity = arviz_stats.psense_summary(tree, var_names=["p_task"])
    estimated = [f"p_task[{a}, {t}]" for a, t, _, _ in posterior.cells()]
    assert np.isfinite(sensitivity.loc[estimated, ["prior", "likelihood"]].values).all()
    assert arviz_plots.plot_prior_posterior(tree, var_names=["p_task"], backend="matplotlib")


@pytest.mark.parametrize(
    ("model", "table", "name", "role"),
    [
        pytest.param(
            "end_to_end_pooled", _ragged_end_to_end, "kappa", "concentration", id="pooled"
        ),
        pytest.param(
            "crossed_milestones",
            _milestones_then_end_to_end,
            "cell_scale",
            "cell_scale",
            id="crossed",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_pooled_prior_feeds_psense_and_the_prior_plots(model, table, name, role):
    _pooled_prior_checks(bayes_eval.fit(table(), model, sampler=SMALL, seed=5), name, role)


def test_a_pooled_milestone_tree_labels_task_means_and_predicts_a_pair_never_run():
    """Task means live on their agent and task, in the input's order. Agent a never ran
    x2 (2 milestones, which agent b ran): ``hierarchical`` draws it as a new task of a's
    population, so the tree has no NaN row, and per draw the rate's expectation is the
    task mean to the power of the task's milestones: the draws' mean of ``p_task`` agrees
    with that of ``mu_task ** 2`` within Monte Carlo error. Its prior groups and
    ``log_prior`` are ArviZ's to read (``_pooled_prior_checks``)."""
    import arviz_stats

    table = _milestones_then_end_to_end()
    table = table[~((table["agent"] == "a") & (table["task"] == "x2"))]
    posterior = bayes_eval.fit(table, "hierarchical", sampler=SMALL, seed=5)
    _pooled_prior_checks(posterior, "kappa", "milestone_concentration")
    tree = posterior.tree
    prior = tree["prior"]["p_task"].sel(agent="a", task="x2").values
    assert np.isfinite(prior).all()  # the prior predicts the pair never run, as the fit
    assert not [dim for dim in tree["posterior"].dims if dim.endswith("_dim_0")]
    assert np.isfinite(arviz_stats.loo(tree).elpd)
    mu_task = tree["posterior"]["mu_task"]
    assert mu_task.dims == ("chain", "draw", "agent", "task")
    assert list(mu_task["task"].values) == ["x3", "x1", "x2"]
    assert np.isfinite(mu_task.sel(agent="a", task="x1").values).all()
    assert "pair" not in tree["posterior"].dims
    assert ("a", "x2") not in {(a, t) for a, t, _, _ in posterior.cells()}  # no summary row
    summary = arviz_stats.summary(tree)
    assert not summary.isna().any(axis=1).any(), summary.index[summary.isna().any(axis=1)]
    draws = tree["posterior"]
    p = draws["p_task"].sel(agent="a", task="x2").values.ravel()
    mu = draws["mu_task"].sel(agent="a", task="x2").values.ravel()
    assert abs(p.mean() - (mu**2).mean()) < 4 * p.std() / np.sqrt(p.size)
    cells = [f"a / x2 / milestone {m}" for m in (1, 2)]
    assert set(cells) <= set(draws["milestone_cell"].values)
    assert "a / x2 / milestone 3" not in draws["milestone_cell"]
    product = draws["p_milestone"].sel(milestone_cell=cells).prod("milestone_cell")
    assert np.allclose(product.values.ravel(), p)


def test_exact_draws_of_many_cells_at_once_follow_each_cells_posterior():
    """Cells drawn together: a one-run cell's ``log P`` is the sum of its factors' draws, a
    factor of shape ``beta = 0`` is 1, and a cell of two runs draws each run half the time,
    so its mean is the runs' mean (closed form, within 4 standard errors)."""
    from bayes_eval.results.exact_draws import _cell_draws

    nan = np.nan
    alpha = np.array(
        [
            [[2.0, 5.0], [nan, nan]],  # one run: Beta(2, 3) x Beta(5, 1)
            [[2.0, 5.0], [1.0, nan]],  # two runs: that product, or Beta(1, 4)
            [[3.0, 4.0], [nan, nan]],  # Beta(3, 2) x a point mass at 1
        ]
    )
    beta = np.array([[[3.0, 1.0], [nan, nan]], [[3.0, 1.0], [4.0, nan]], [[2.0, 0.0], [nan, nan]]])
    n_draws = 40_000
    factors, task = _cell_draws(alpha, beta, n_draws, np.random.default_rng(5))
    assert factors.shape == (n_draws, 3, 2, 2) and task.shape == (n_draws, 3)
    np.testing.assert_array_equal(task[:, 0], factors[:, 0, 0, 0] + factors[:, 0, 0, 1])
    np.testing.assert_array_equal(factors[:, 2, 0, 1], 0.0)
    assert np.isnan(factors[:, 0, 1]).all()
    p = np.exp(task)
    means = [2 / 5 * 5 / 6, 0.5 * (2 / 5 * 5 / 6) + 0.5 * (1 / 5), 3 / 5]
    for cell, mean in enumerate(means):
        assert abs(p[:, cell].mean() - mean) < 4 * p[:, cell].std() / np.sqrt(n_draws)
    # the two-run cell: the draws equal to a lone Beta(1, 4) draw are about half
    lone = np.isclose(task[:, 1], factors[:, 1, 1, 0])
    assert abs(lone.mean() - 0.5) < 4 * np.sqrt(0.25 / n_draws)
