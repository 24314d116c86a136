"""The linked crossed model (``crossed_joint``): milestone and end-to-end runs of agents x
tasks, the end-to-end rate linked to the pair's milestone competence. Sparse, ragged
designs: one trial per cell, pairs never run, pairs with guided runs alone, an agent
without an end-to-end success."""

import math

import arviz_stats
import numpy as np
import pandas as pd
import pytest
from scipy import special

import bayes_eval
from bayes_eval import InputError
from bayes_eval.checks.sbc import sbc
from bayes_eval.messages import collected

SMALL = {"draws": 300, "tune": 300, "chains": 2}


def _sparse_table(seed=0):
    """4 agents x 6 tasks, 2 to 4 subtasks, one trial per cell; (a0, t1) and (a3, t4) never
    run; (a1, t2) and (a2, t5) run on milestones alone; a3 never succeeds end to end."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(4):
        for t in range(6):
            if (a, t) in ((0, 1), (3, 4)):
                continue
            for step in range(1, 2 + (t % 3) + 1):
                rows.append((f"a{a}", f"t{t}", "milestone", step, int(rng.random() < 0.5), 1))
            if (a, t) not in ((1, 2), (2, 5)):
                success = 0 if a == 3 else int(rng.random() < 0.3)
                rows.append((f"a{a}", f"t{t}", "end_to_end", np.nan, success, 1))
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])


@pytest.mark.slow  # about 2 minutes; crossed_joint keeps its SBC on a sparse design
def test_every_pair_gets_draws_and_a_pair_never_run_is_its_population():
    """Every (agent, task) of the design has end-to-end draws in [0, 1]; a pair never run
    is marked so. Its rate is ``expit(m + sqrt(link^2 pair_scale^2 + cell_scale^2) z)``
    per posterior draw, ``m = theta_a - b_t + link (phi_a - c_t)``: its mean over the draws
    matches that logistic-normal integral (Gauss-Hermite, per draw) within 4 Monte Carlo
    standard errors."""
    table = _sparse_table()
    with collected():
        posterior = bayes_eval.fit(table, "crossed_joint", seed=3, sampler=SMALL)
    draws = posterior.draws
    p = draws["p_task"]
    assert p.sizes["agent"] == 4 and p.sizes["task"] == 6
    assert np.isfinite(p.values).all() and (p.values >= 0).all() and (p.values <= 1).all()
    summary = posterior.summary().set_index(["agent", "task"])
    assert not summary.loc[("a0", "t1"), "observed"] and not summary.loc[("a3", "t4"), "observed"]
    assert summary.loc[("a1", "t2"), "observed"]  # run on milestones: predicted from them
    link, pair, cell = (draws[n].values.ravel() for n in ("link", "pair_scale", "cell_scale"))
    m = (
        draws["ability"].sel(agent="a0").values.ravel()
        - draws["difficulty"].sel(task="t1").values.ravel()
        + link
        * (
            draws["milestone_ability"].sel(agent="a0").values.ravel()
            - draws["milestone_difficulty"].sel(task="t1").values.ravel()
        )
    )
    x, w = np.polynomial.hermite_e.hermegauss(60)
    spread = np.sqrt(link**2 * pair**2 + cell**2)
    expected = (special.expit(m[:, None] + spread[:, None] * x) @ w / w.sum()).mean()
    got = p.sel(agent="a0", task="t1").values.ravel()
    assert abs(got.mean() - expected) < 4 * got.std() / np.sqrt(got.size)
    # its pointwise log-likelihood is of whole pairs, read by ArviZ as it is, and equal to
    # the integral over the pair's competence and departures (scipy's quadrature)
    runs = posterior.tree["log_likelihood"]["runs"]
    assert runs.dims == ("chain", "draw", "pair") and runs.sizes["pair"] == 22
    assert np.isfinite(runs.values).all()
    assert arviz_stats.loo(posterior.tree, pointwise=True).elpd_i.size == 22
    for agent, task in (("a0", "t0"), ("a1", "t2"), ("a3", "t5")):
        pair = (runs["agent"] == agent) & (runs["task"] == task)
        for chain, draw in ((0, 0), (1, 123)):
            got = float(runs.isel(chain=chain, draw=draw).where(pair, drop=True).item())
            one = draws.isel(chain=chain, draw=draw)
            assert got == pytest.approx(_pair_by_quadrature(table, one, agent, task), abs=1e-7)
    # crossed_milestones scores a pair's milestone runs alone: other data, refused by name
    with collected():
        guided = bayes_eval.fit(
            table[table["method"] == "milestone"], "crossed_milestones", seed=3, sampler=SMALL
        )
    refused = (
        r"^fits: linked \(crossed_joint\) scores each pair's milestone and end-to-end runs "
        r"and guided \(crossed_milestones\) its milestone runs, so their log scores are of "
        "different data"
    )
    with pytest.raises(InputError, match=refused):
        bayes_eval.compare({"linked": posterior, "guided": guided})


def _pair_by_quadrature(table, draw, agent, task) -> float:
    """A pair's log-likelihood at one posterior draw, from the model's formulas and
    scipy's quadrature over ``u`` and ``e`` (the pair's cells are of one trial)."""
    from scipy import integrate

    def value(name, **at):
        return float(draw[name].sel(**at).item()) if at else float(draw[name].item())

    rows = table[(table["agent"] == agent) & (table["task"] == task)]
    base = value("milestone_ability", agent=agent) - value("milestone_difficulty", task=task)
    milestones = rows[rows["method"] == "milestone"]
    cells = [
        value("milestone_mean")
        + base
        - value("step_scale") * value("step_z", step=f"{task} / {int(step)}")
        for step in milestones["step"]
    ]
    end = rows[rows["method"] == "end_to_end"]
    eta = value("ability", agent=agent) - value("difficulty", task=task) + value("link") * base
    scale, link, spread = value("pair_scale"), value("link"), value("cell_scale")

    passed = milestones["successes"].tolist()
    solved = end["successes"].iloc[0] if len(end) else None

    def density(e, u):
        out = math.exp(-(u * u + e * e) / 2) / (2 * math.pi)
        for x, k in zip(cells, passed, strict=True):
            p = 1 / (1 + math.exp(-(x + scale * u)))
            out *= p if k == 1 else 1 - p
        if solved is not None:
            q = 1 / (1 + math.exp(-(eta + link * scale * u + spread * e)))
            out *= q if solved == 1 else 1 - q
        return out

    total, _ = integrate.dblquad(density, -12, 12, -12, 12, epsabs=0, epsrel=1e-10)
    return float(np.log(total))


def _quadrature(cells, ks, ns, eta, big_k, big_n, scales):
    """``log L`` of one pair by scipy's adaptive quadrature: ``u`` outside, each
    departure (of a cell of several trials, and of the end-to-end runs) inside."""
    from scipy import integrate

    pair, link, spread, own = scales

    def binomial(k, n, x):
        p = 1 / (1 + math.exp(-x))
        return math.comb(n, k) * p**k * (1 - p) ** (n - k)

    def inner(x, s, k, n):
        if s == 0:
            return binomial(k, n, x)
        return integrate.quad(
            lambda e: binomial(k, n, x + s * e) * math.exp(-e * e / 2) / math.sqrt(2 * math.pi),
            -12, 12, epsabs=0, epsrel=1e-10, limit=200,
        )[0]  # fmt: skip

    def density(u):
        out = math.exp(-u * u / 2) / math.sqrt(2 * math.pi)
        for x, k, n in zip(cells, ks, ns, strict=True):
            out *= inner(x + pair * u, own if n > 1 else 0.0, k, n)
        if big_n:
            out *= inner(eta + link * pair * u, spread, big_k, big_n)
        return out

    grid = np.linspace(-10, 10, 81)
    values = [density(u) for u in grid]
    top, peak = max(values), grid[np.argmax(values)]
    total = integrate.quad(
        lambda u: density(u) / top, -10, 10, epsabs=0, epsrel=1e-10, limit=400, points=[peak]
    )[0]
    return np.log(total) + np.log(top)


@pytest.mark.parametrize(
    "cells, ks, ns, eta, big_k, big_n, scales",
    [
        ([-1.4, -2.9, 1.6, 3.3], [0, 0, 0, 0], [1, 1, 3, 1], -0.5, 1, 1, (1.1, -0.13, 5.6, 1.0)),
        (
            [-0.3, -0.6, -0.5, -4.2],
            [2, 15, 4, 1],
            [3, 50, 50, 1],
            -1.4,
            0,
            1,
            (1.2, -0.1, 1.6, 0.3),
        ),
        ([0.8, 1.2], [38, 43], [50, 50], 0.4, 26, 40, (0.6, 1.5, 0.5, 0.3)),
        ([2.9, -2.5, -5.7, 1.9, -3.0], [1, 1, 1, 0, 1], [1] * 5, -3.0, 1, 4, (0.5, 1.9, 1.7, 0.4)),
        ([0.5, -1.0, 0.0], [1, 0, 0], [1, 1, 1], 0.0, 0, 0, (2.5, 1.0, 1.0, 1.0)),
        ([0.5], [1], [1], 0.0, 0, 1, (4.0, 1.0, 1.0, 1.0)),
        ([], [], [], -0.9, 0, 1, (0.6, -0.7, 2.9, 0.6)),
    ],
)
def test_a_pairs_likelihood_is_its_integral(cells, ks, ns, eta, big_k, big_n, scales):
    """The pointwise log-likelihood of one pair against scipy's adaptive quadrature, on
    one-trial cells and cells of 50 trials with their own departures, a sharp end-to-end
    departure (``cell_scale`` 5.6), sharp one-trial cells (``pair_scale`` 2.5 and 4),
    40 end-to-end runs, a pair never run end to end and one with end-to-end runs alone:
    within 1e-7, the accuracy ``NODES`` buys where ``pair_scale`` is 4 (5e-8)."""
    from types import SimpleNamespace

    from bayes_eval.crossed.linked_likelihood import pair_log_likelihood

    layout = SimpleNamespace(
        pairs=[("a", "t")], cell_pair=np.zeros(len(cells), dtype=int),
        k=np.array(ks, float), n=np.array(ns, float),
        e2e_k=np.array([big_k], float), e2e_n=np.array([big_n], float),
    )  # fmt: skip
    names = ("pair_scale", "link", "cell_scale", "milestone_cell_scale")
    got = pair_log_likelihood(
        np.array([cells], float).reshape(1, -1),
        np.array([[eta]]),
        {name: np.array([[value]]) for name, value in zip(names, scales, strict=True)},
        layout,
    )[0, 0]
    assert got == pytest.approx(_quadrature(cells, ks, ns, eta, big_k, big_n, scales), abs=1e-7)


def test_pairs_of_the_same_end_to_end_counts_read_one_table_that_agrees_with_the_rule():
    """300 pairs of one end-to-end trial each (the table's path) score as each scored
    alone (the rule's path, a table being larger than one pair's values), within 1e-7;
    the draws differ in every scale."""
    from types import SimpleNamespace

    from bayes_eval.crossed.linked_likelihood import pair_log_likelihood

    rng = np.random.default_rng(4)
    pairs, draws = 300, 40
    layout = SimpleNamespace(
        pairs=[("a", str(i)) for i in range(pairs)], cell_pair=np.repeat(np.arange(pairs), 3),
        k=rng.integers(0, 2, 3 * pairs).astype(float), n=np.ones(3 * pairs),
        e2e_k=rng.integers(0, 2, pairs).astype(float), e2e_n=np.ones(pairs),
    )  # fmt: skip
    cell, eta = rng.normal(0, 2, (draws, 3 * pairs)), rng.normal(-2, 2, (draws, pairs))
    scales = {
        name: rng.lognormal(0, 0.5, (draws, 1))
        for name in ("pair_scale", "link", "cell_scale", "milestone_cell_scale")
    }
    together = pair_log_likelihood(cell, eta, scales, layout)
    for i in rng.choice(pairs, 12, replace=False):
        alone = SimpleNamespace(
            pairs=[layout.pairs[i]], cell_pair=np.zeros(3, dtype=int),
            k=layout.k[3 * i : 3 * i + 3], n=np.ones(3),
            e2e_k=layout.e2e_k[i : i + 1], e2e_n=np.ones(1),
        )  # fmt: skip
        one = pair_log_likelihood(cell[:, 3 * i : 3 * i + 3], eta[:, i : i + 1], scales, alone)
        np.testing.assert_allclose(together[:, i], one[:, 0], rtol=0, atol=1e-7)


def test_a_table_without_either_kind_of_run_is_refused_naming_the_model_to_use():
    table = _sparse_table()
    with pytest.raises(InputError, match="no milestone rows.*; use crossed$"):
        bayes_eval.fit(table[table["method"] == "end_to_end"], "crossed_joint", sampler=SMALL)
    with pytest.raises(InputError, match="no end_to_end rows.*; use crossed_milestones$"):
        bayes_eval.fit(table[table["method"] == "milestone"], "crossed_joint", sampler=SMALL)


def test_sbc_of_the_linked_model_on_a_sparse_design():
    """SBC on the sparse, ragged design of one trial per cell: every scalar of both sides,
    the slope ``link`` among them, and the end-to-end rate of every pair."""
    result = sbc(_sparse_table(1), "crossed_joint", simulations=24, draws=99, bins=4, seed=2)
    assert result.passed(), result.p_values.sort_values().head()
    assert {"link", "pair_scale", "milestone_mean", "cell_scale"} <= set(result.p_values.index)


def _guided_and_unguided(agents=3, tasks=4, trials=1):
    """Every agent on every task: 3 subtasks and one unguided run, ``trials`` each."""
    rng = np.random.default_rng(5)
    rows = []
    for a in range(agents):
        for t in range(tasks):
            for step in (1, 2, 3):
                k = int(rng.binomial(trials, 0.5))
                rows.append((f"a{a}", f"t{t}", "milestone", step, k, trials))
            rows.append(
                (f"a{a}", f"t{t}", "end_to_end", np.nan, int(rng.binomial(trials, 0.2)), trials)
            )
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])


def test_the_shape_of_agentic_benchmarks_is_recognised_and_nothing_else():
    from bayes_eval import load_evidence
    from bayes_eval.advice import sparse_shared

    def shape(table):
        return sparse_shared(load_evidence(table).table)

    assert shape(_guided_and_unguided()) == (
        "3 agents sharing 4 tasks, milestone and end-to-end runs of one trial per cell"
    )
    assert shape(_guided_and_unguided(trials=40)) is None  # many trials per cell
    assert shape(_guided_and_unguided(agents=1)) is None  # no task shared
    table = _guided_and_unguided()
    assert shape(table[table["method"] == "milestone"]) is None  # no unguided runs


def test_joint_refuses_that_shape_before_sampling_and_names_the_model_to_use():
    import sys

    pymc_before = "pymc" in sys.modules
    with pytest.raises(InputError, match=r"^model joint: .*over-predicts.* use crossed_joint"):
        bayes_eval.fit(_guided_and_unguided(), "joint")
    assert ("pymc" in sys.modules) == pymc_before  # refused before any model was built


def test_a_fit_of_another_model_to_that_shape_says_which_predicted_better():
    """The advice carries the measured figures of ``MEASURED`` for the model fitted, and
    the command that compares the two on the user's table; a table of another shape, or a
    model not measured, gets none."""
    from bayes_eval.advice import BUILT_FOR, MEASURED

    assert "mats2024" in MEASURED
    with collected() as said:
        bayes_eval.fit(_guided_and_unguided(), "mats2024")
    lines = [line for line in said if line.startswith("advice:")]
    mine, better = MEASURED["mats2024"][0], MEASURED[BUILT_FOR][0]
    assert len(lines) == 1
    assert f"{BUILT_FOR} predicted held-out unguided outcomes better than mats2024" in lines[0]
    assert f"mean log score {better:.1f} against {mine:.1f}" in lines[0]
    assert lines[0].endswith("--models mats2024 crossed_joint --holdout end_to_end")
    with collected() as said:
        bayes_eval.fit(_guided_and_unguided(trials=40), "mats2024")
        bayes_eval.fit(_guided_and_unguided(), "phuong2024")
    assert not [line for line in said if line.startswith("advice:")]


def test_the_simulator_is_calibrated_to_the_benchmark_it_stands_for(load_study):
    """The capture-the-flag benchmark the study stands for: 24 of 320 unguided runs
    succeed (7.5%), 17 of those 24 (71%) in pairs whose guided run failed a subtask, and
    the milestone models expect 3.7% to 4.2% of the pairs to pass every subtask. Over 40
    simulated tables the means lie within a third of those figures; every table has one
    milestone row per subtask (3 to 8) and one end-to-end row per pair, one trial each."""
    study = load_study("capture_the_flag")
    rng = np.random.default_rng(0)
    tables = [study.simulate_table(rng) for _ in range(40)]
    figures = pd.DataFrame([study.describe(*table) for table in tables]).mean()
    assert 0.075 / 1.33 < figures["unguided"] < 0.075 * 1.33
    assert 0.71 / 1.33 < figures["failed_subtask"] < 0.71 * 1.33
    assert 0.04 / 1.5 < figures["guided_every"] < 0.04 * 1.5
    evidence, truth = tables[0]
    assert (evidence["trials"] == 1).all() and len(truth) == 320
    subtasks = evidence[evidence["method"] == "milestone"].groupby(["agent", "task"]).size()
    assert subtasks.between(3, 8).all() and len(subtasks) == 320
    assert (evidence["method"] == "end_to_end").sum() == 320


def test_the_split_hides_half_of_each_tasks_unguided_runs_and_nothing_else(load_study):
    study = load_study("capture_the_flag")
    evidence, _ = study.simulate_table(np.random.default_rng(1), 5, 6)
    shown, hidden = study.held_out_split(evidence, np.random.default_rng(2))
    assert len(shown) == len(evidence) - len(hidden)
    assert pd.Series([task for _, task in hidden]).value_counts().eq(2).all()  # 5 // 2
    kept = shown[shown["method"] == "end_to_end"]
    assert not set(zip(kept["agent"], kept["task"], strict=True)) & set(hidden)
    assert (shown["method"] == "milestone").sum() == (evidence["method"] == "milestone").sum()


@pytest.mark.slow
def test_on_a_simulated_capture_the_flag_table_it_predicts_better_than_crossed(load_study):
    """Table 0 of the study (8 agents x 40 tasks, half of each task's unguided outcomes
    held out): crossed_joint's held-out log score beats crossed's, its diagnostics pass at
    the defaults, and its 95% intervals cover at least 93% of the held-out true rates."""
    study = load_study("capture_the_flag")
    rows = study.run_table(0, 0, ["crossed", "crossed_joint"], 8, 40)
    summary = study.summarise(rows)
    assert summary.at["crossed_joint", "log_score"] > summary.at["crossed", "log_score"]
    assert summary.at["crossed_joint", "diagnostics_passed"] == 1.0
    assert summary.at["crossed_joint", "within_95"] >= 0.93


@pytest.mark.slow
def test_on_the_shipped_pooled_example_it_agrees_with_joint_where_pairs_have_many_runs():
    """The shipped pooled example's 10 pairs with 40 unguided runs (and 50 trials per
    milestone): each model's mean lies within the other's central 95% interval; where a
    pair has no unguided run, their intervals overlap. Both pass their diagnostics
    (``crossed_joint`` with its two agents' milestone abilities centred, and, at the
    defaults' seed, after one refit at a higher target_accept)."""
    with collected():
        joint = bayes_eval.fit("data/example_pooled.csv", "joint")
        linked = bayes_eval.fit("data/example_pooled.csv", "crossed_joint")
    assert joint.diagnostics.ok and linked.diagnostics.ok
    assert "milestone abilities zero-sum centred" in linked.summary()["provenance"].iloc[0]
    table = pd.read_csv("data/example_pooled.csv")
    unguided = table[table["method"] == "end_to_end"]
    run = set(zip(unguided["agent"], unguided["task"], strict=True))
    assert len(run) == 10
    for agent, task in joint.summary()[["agent", "task"]].itertuples(index=False):
        draws = [
            fit.draws["p_task"].sel(agent=agent, task=task).values.ravel()
            for fit in (joint, linked)
        ]
        (low_a, high_a), (low_b, high_b) = (np.quantile(d, [0.025, 0.975]) for d in draws)
        if (agent, task) in run:
            assert low_a <= draws[1].mean() <= high_a and low_b <= draws[0].mean() <= high_b
        else:
            assert low_a <= high_b and low_b <= high_a


@pytest.mark.parametrize("model", ["crossed", "crossed_joint"])
def test_the_prior_is_drawn_through_the_models_own_graph(model):
    """The prior group of a crossed fit is drawn forward through the model PyMC samples (no
    numpy copy of its priors): on the sparse design, every scalar follows its spec prior
    (Kolmogorov-Smirnov against scipy's distribution, the spec's draws), each difficulty is
    its scale times a zero-sum normal, and every pair's end-to-end rate is a probability."""
    from scipy import stats

    from bayes_eval.crossed.prior import ROLES
    from bayes_eval.fit import prior_only
    from bayes_eval.specs import load_spec

    spec = load_spec(model)
    with collected():
        prior = prior_only(_sparse_table(), spec).prior_groups()["prior"]
    scalars = [name for name in ROLES if name in prior and prior[name].ndim == 2]
    assert {"ability_mean", "ability_scale", "difficulty_scale", "cell_scale"} <= set(scalars)
    if model == "crossed_joint":
        assert {"link", "pair_scale", "milestone_mean", "step_scale"} <= set(scalars)
    for name in scalars:
        values = prior[name].values.ravel()
        assert values.size >= 1_000
        p = stats.kstest(values, spec.priors[ROLES[name]].distribution().cdf).pvalue
        assert p > 1e-3, (name, p)
    z = prior["difficulty_z"].values
    assert np.abs(z.sum(axis=-1)).max() < 1e-9
    np.testing.assert_allclose(
        prior["difficulty"].values, prior["difficulty_scale"].values[..., None] * z, rtol=1e-12
    )
    p_task = prior["p_task"].values
    assert ((p_task >= 0) & (p_task <= 1)).all()


def test_the_most_capable_agent_is_the_one_that_succeeds_end_to_end():
    """ "Most capable first" follows end-to-end success, never the bypass ability of the
    joint model. On three easy and three hard tasks, ``guided`` passes most milestone runs
    (5 and 3 of 5) and half its end-to-end runs (6 and 2 of 8); ``bypasser`` passes few
    (2 and 0 of 5), yet 3 in 8 of its end-to-end runs (5 and 1 of 8): the end-to-end rate
    rises with the milestones within each agent (the link), and ``bypasser`` does better
    than its milestones say, so its bypass ability is the higher. The report's order puts
    ``guided`` first, as its end-to-end successes do, and says so."""
    from bayes_eval.checks.agents import capability_order
    from bayes_eval.outputs.defence import agent_sections

    rows = []
    for t in range(6):
        easy = t < 3
        for agent, milestone, unguided in (
            ("bypasser", (2, 0), (5, 1)),
            ("guided", (5, 3), (6, 2)),
        ):
            k = milestone[0] if easy else milestone[1]
            rows += [(agent, f"t{t}", "milestone", m, k, 5) for m in (1, 2, 3)]
            rows.append((agent, f"t{t}", "end_to_end", np.nan, unguided[0 if easy else 1], 8))
    table = pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])
    with collected():
        posterior = bayes_eval.fit(table, "crossed_joint", seed=1, sampler=SMALL)
    ability = posterior.draws["ability"].mean(("chain", "draw")).to_series()
    assert ability["bypasser"] > ability["guided"]  # the bypass: the joint model's one part
    successes = posterior.draws["p_task"].mean(("chain", "draw", "task")).to_series()
    assert successes["guided"] > successes["bypasser"]
    order = capability_order(posterior, posterior.summary())
    assert order == ["guided", "bypasser"]
    sections = agent_sections(posterior, 0.975, order)
    text = next(payload for kind, payload in sections if kind == "p")
    assert "by their end-to-end success on the table's tasks" in text
    table = next(payload for kind, payload in sections if kind == "table")
    assert table["across tasks"].iloc[0] == "mean P over 6 tasks"
