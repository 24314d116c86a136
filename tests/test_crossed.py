"""The crossed model (agents x tasks): recovery of a simulated design of known truth, SBC,
predictions for pairs never run and for new agents, horizons, and the covariates' input
contract. The designs are sparse and ragged (one to four runs per pair, a quarter of the
pairs never run, an agent with no success)."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval import InputError, load_evidence
from bayes_eval.checks.sbc import sbc
from bayes_eval.crossed.horizon import horizons, success_offset
from bayes_eval.messages import collected
from bayes_eval.specs import load_spec

SMALL = {"draws": 500, "tune": 500, "chains": 4}
SPEC = """
schema_version = 1
name = "crossed_test"
kind = "end_to_end"
pooling = "crossed"

[covariates]
agent = ["release"]
task = ["log2(minutes)"]
length = "log2(minutes)"
"""


def _spec(tmp_path, covariates=True, body=""):
    """The shipped crossed spec's priors under a test spec's covariates."""
    shipped = load_spec("crossed").text
    priors = shipped[shipped.index("[priors.") : shipped.index("[sampler]")]
    head = SPEC if covariates else SPEC[: SPEC.index("[covariates]")]
    coefficient = (
        '[priors.coefficient]\ndist = "Normal"\nmu = 0.0\nsigma = 2.5\nreason = "test"\n'
        if covariates
        else ""
    )
    path = tmp_path / "crossed_test.toml"
    path.write_text(head + body + "\n" + priors + coefficient)
    return path


def _design(seed=0, agents=8, tasks=24, missing=0.25, zero_agent=True):
    """Simulated runs of known truth: ability rises with release year, difficulty with
    log2 minutes; returns the evidence table and the truth."""
    rng = np.random.default_rng(seed)
    release = 2025.0 - np.arange(agents)[::-1]  # 1 January of successive years
    minutes = np.exp2(rng.uniform(0, 8, tasks))
    x_date = (release - release.mean()) / release.std()
    x_len = (np.log2(minutes) - np.log2(minutes).mean()) / np.log2(minutes).std()
    truth = {"ability_mean": -0.5, "agent_coefficient": 1.5, "task_coefficient": 1.2}
    ability = -0.5 + 1.5 * x_date + 0.5 * rng.standard_normal(agents)
    difficulty = 1.2 * x_len + 0.8 * rng.standard_normal(tasks)
    if zero_agent:
        ability[0] = -6.0  # an agent that never succeeds
    kappa = 8.0
    rows = []
    for a in range(agents):
        for t in range(tasks):
            if rng.random() < missing:
                continue
            mean = special.expit(ability[a] - difficulty[t])
            p = rng.beta(mean * kappa, (1 - mean) * kappa)
            n = int(rng.integers(1, 5))
            k = 0 if a == 0 and zero_agent else int(rng.binomial(n, p))
            date = f"{int(release[a])}-01-01"
            rows.append((f"a{a}", f"t{t}", "end_to_end", k, n, date, minutes[t]))
    table = pd.DataFrame(
        rows, columns=["agent", "task", "method", "successes", "trials", "release", "minutes"]
    )
    truth.update(ability=ability, difficulty=difficulty, minutes=minutes, release=release)
    return table, truth


@pytest.fixture(scope="module")
def recovered(tmp_path_factory):
    table, truth = _design()
    evidence = load_evidence(table, keep_columns=True)
    spec = _spec(tmp_path_factory.mktemp("spec"))
    posterior = bayes_eval.fit(evidence, str(spec), seed=3, predict=["new,release=2026-01-01"])
    return posterior, table, truth


@pytest.fixture(scope="module")
def recovered_checks(recovered):
    """``check_fit`` of the recovered fit, made once for the reports of it."""
    from bayes_eval.checks.fitted import check_fit

    return check_fit(recovered[0])


def test_the_crossed_fit_recovers_a_design_of_known_truth(recovered):
    posterior, table, truth = recovered
    assert posterior.diagnostics.ok, posterior.diagnostics.messages
    draws = posterior.draws
    # the coefficients (per sd of the covariate) lie within their 95% intervals
    for name in ("agent_coefficient", "task_coefficient"):
        low, high = np.quantile(draws[name].values.ravel(), [0.025, 0.975])
        assert low < truth[name] < high, (name, low, high)
    # Abilities and difficulties are identified up to a common shift: compare them
    # relative to the mean ability of the agents with successes (a0's ability, -6 in
    # truth, is known only to be low, and would move the shift).
    ability = draws["ability"].sel(agent=[f"a{i}" for i in range(8)]).values.reshape(-1, 8)
    tasks = [f"t{j}" for j in range(24)]
    difficulty = draws["difficulty"].sel(task=tasks).values.reshape(-1, 24)
    shift = ability[:, 1:].mean(axis=1, keepdims=True)
    true_shift = truth["ability"][1:].mean()
    lows, highs = np.quantile(ability - shift, [0.025, 0.975], axis=0)
    centred = truth["ability"] - true_shift
    assert np.mean((lows < centred) & (centred < highs)) >= 7 / 8
    lows, highs = np.quantile(difficulty - shift, [0.025, 0.975], axis=0)
    centred = truth["difficulty"] - true_shift
    assert np.mean((lows < centred) & (centred < highs)) >= 0.8


def test_every_pair_is_predicted_and_pairs_never_run_are_marked(recovered):
    posterior, table, _ = recovered
    summary = posterior.summary()
    assert len(summary) == 9 * 24  # 8 agents and a new one, every task
    ran = set(zip(table["agent"], table["task"], strict=True))
    observed = {(a, t) for a, t, o in summary[["agent", "task", "observed"]].values if o}
    assert observed == ran
    assert summary["upper"].notna().all() and (summary["upper"] <= 1).all()
    unseen = summary[~summary["observed"]]
    assert unseen["provenance"].str.contains("PREDICTION").all()
    new = summary[summary["agent"] == "new"]
    assert new["provenance"].str.contains("release 2026").all()


def test_every_bound_names_its_floor_and_an_extrapolated_one_says_so(recovered):
    """Per pair: the floor is the 0-success bound of every run sharing its agent or task
    (counted here from the table), ``extrapolated`` is the bound below it, and the
    provenance says so in words; no bound lies below its own mean without a word."""
    posterior, table, _ = recovered
    summary = posterior.summary()
    runs = table.pivot_table(index="agent", columns="task", values="trials", aggfunc="sum")
    runs = runs.fillna(0)
    for row in summary.itertuples():
        cell = runs.at[row.agent, row.task] if row.agent in runs.index else 0
        by_agent = runs.loc[row.agent].sum() if row.agent in runs.index else 0
        shared = by_agent + runs[row.task].sum() - cell
        assert row.floor_upper == pytest.approx(1 - 0.025 ** (1 / (shared + 1)), rel=1e-9)
        assert row.extrapolated == (row.upper < row.floor_upper)
        assert ("EXTRAPOLATED" in row.provenance) == row.extrapolated
        if row.upper < row.mean:
            assert "the upper bound lies below the mean" in row.provenance
    weak = summary[summary["agent"] == "a0"]  # no success in any run: the weakest agent
    assert (weak["upper"] > 1e-7).all()  # a logit-normal departure, never a spike at zero


@pytest.mark.slow  # a report of the crossed fit
def test_the_report_names_the_crossed_models_assumption_and_its_measured_coverage(
    recovered, recovered_checks
):
    """The methods section describes the crossed structure (not the pooled models' text)
    with its additivity and extrapolated bounds; the milestone caveat is for milestone
    runs only."""
    from bayes_eval.constants import END_TO_END, MILESTONE_METHOD
    from bayes_eval.outputs.report import build_report
    from bayes_eval.registry import MODELS

    markdown = build_report(recovered[0], 0.01, checks=recovered_checks).markdown
    assert "**Crossed agents x tasks.**" in markdown and "Partial pooling" not in markdown
    assert MODELS[END_TO_END, "crossed"].text in markdown
    assert "marked extrapolated and decides no verdict unless asked" in markdown
    assert MODELS[MILESTONE_METHOD, "crossed"].text not in markdown


@pytest.mark.slow  # a report of the crossed fit
def test_a_new_agents_forecast_says_how_the_models_forecasts_held(
    recovered, recovered_checks, tmp_path
):
    """Beside a new agent's predictions the report says how the model's forecasts held in
    a backtest (``report --backtest``; the sentence itself: tests/test_backtest.py);
    without one, how to make it."""
    from bayes_eval.checks.backtest import BACKTEST_COLUMNS, read_backtest
    from bayes_eval.outputs.report import build_report

    row = (2023.0, "crossed_test", 3, 4, 50, -80.0, 0.6, 0.9, 1.0, 1.0, "True")
    pd.DataFrame([row], columns=list(BACKTEST_COLUMNS)).to_csv(tmp_path / "backtest.csv")
    tested = read_backtest(tmp_path)
    text = build_report(recovered[0], 0.01, checks=recovered_checks, backtest=tested).markdown
    assert "crossed_test fitted to the agents" in text[text.index("## Predictions for new") :]
    plain = build_report(recovered[0], 0.01, checks=recovered_checks).markdown
    assert "report --backtest DIR" in plain[plain.index("## Predictions for new") :]


def test_agents_compared_count_the_tasks_both_agents_ran(recovered):
    """The report's "tasks compared" of two agents is the tasks both were run on, counted
    from the summary's ``observed``, not every task the crossed model predicts; the agents
    come most capable first (the mean over the design's tasks of each pair's posterior
    mean, the pairs never run predicted), each against the one above."""
    from bayes_eval.checks.agents import capability_order
    from bayes_eval.outputs.defence import agent_sections

    posterior = recovered[0]
    order = capability_order(posterior, posterior.summary())
    success = posterior.summary().groupby("agent")["mean"].mean()
    ran = success[success.index.isin(posterior.evidence.table["agent"])]  # not "new"
    assert order == list(ran.sort_values(ascending=False).index)
    summary = posterior.summary().set_index(["agent", "task"])
    assert not summary["observed"].all()  # the design leaves pairs unrun
    sections = agent_sections(posterior, 0.975, order)
    table = next(payload for kind, payload in sections if kind == "table")
    assert (
        list(table["B against A"])
        == [f"{b} against {a}" for b, a in zip(order, order[1:], strict=False)][: len(table)]
    )
    for row in table.itertuples():
        b, a = row[1].split(" against ")
        ran = summary.loc[a, "observed"] & summary.loc[b, "observed"]
        assert row[-1] == int(ran.sum()), row
    tasks = len(posterior.coords["task"])
    assert (table["tasks compared"] < tasks).any()  # predictions left out somewhere


def test_a_pair_never_run_departs_from_its_additive_mean_as_a_fresh_normal(recovered):
    """Given each draw's ability, difficulty and scales, a pair never run is
    ``logistic(theta - b + s e)`` with ``e`` a fresh standard normal and ``s`` the usual
    pairs' ``cell_scale``, or with the share ``surprise_share`` a surprising pair's
    ``cell_scale (1 + surprise_width)``: the draws' ``e / cell_scale`` through that
    mixture's CDF pass a Kolmogorov-Smirnov test against the uniform, and they are
    independent of the draw's own additive mean."""
    posterior, _, _ = recovered
    draws = posterior.draws
    summary = posterior.summary()
    agent, task = summary.loc[~summary["observed"], ["agent", "task"]].iloc[0]
    eta = (
        draws["ability"].sel(agent=agent).values - draws["difficulty"].sel(task=task).values
    ).ravel()
    p = draws["p_task"].sel(agent=agent, task=task).values.ravel()
    e = (special.logit(p) - eta) / draws["cell_scale"].values.ravel()
    share = draws["surprise_share"].values.ravel()
    wide = 1 + draws["surprise_width"].values.ravel()
    u = (1 - share) * stats.norm.cdf(e) + share * stats.norm.cdf(e / wide)
    assert stats.kstest(u, "uniform").pvalue > 0.001
    assert stats.kstest(e, "norm").pvalue < 0.001  # not one normal: the surprising share
    assert abs(stats.pearsonr(e, eta).statistic) < 4 / math.sqrt(e.size)


def test_horizons_cover_the_truth_and_stay_finite_without_successes(recovered):
    posterior, _, truth = recovered
    result = horizons(posterior)
    table = result.agents.set_index("agent")
    # the true 50% horizon of agent a: log2 minutes where ability = task_coefficient x
    logs = np.log2(truth["minutes"])
    true_h50 = np.exp2(logs.mean() + logs.std() * truth["ability"] / truth["task_coefficient"])
    inside = [
        table.loc[f"a{i}", "h50_lower"] < true_h50[i] < table.loc[f"a{i}", "h50_upper"]
        for i in range(1, 8)
    ]
    assert np.mean(inside) >= 6 / 7
    zero = table.loc["a0"]
    assert zero["successes"] == 0
    assert 0 < zero["h50_lower"] < zero["h50_upper"] < np.inf
    assert zero["h50_upper"] / zero["h50_lower"] > 100  # honest: wide
    assert result.trend is not None
    low, high = result.trend.iloc[0][["lower", "upper"]]
    # true doubling time: 12 s_d beta / (s beta_d) months
    s_d, s = truth["release"].std(), logs.std()
    months = 12 * s_d * truth["task_coefficient"] / (s * truth["agent_coefficient"])
    assert low < months < high


def test_success_offset_against_quadrature():
    assert success_offset(0.5, np.array([0.0, 1.0, 3.0])) == pytest.approx(0, abs=1e-9)
    assert success_offset(0.8, np.array([0.0]))[0] == pytest.approx(special.logit(0.8))
    for sigma in (0.5, 2.0, 4.0):  # the quadrature's stated accuracy: 1e-9 to sigma 4
        c = success_offset(0.8, np.array([sigma]))[0]
        mean, _ = integrate.quad(
            lambda u, c=c, s=sigma: special.expit(c - u) * stats.norm.pdf(u, 0, s),
            -80,
            80,
            epsabs=1e-13,
            limit=200,
        )
        assert mean == pytest.approx(0.8, abs=1e-8)


def test_a_horizon_quantile_among_unbounded_draws_is_unbounded():
    from bayes_eval.crossed.horizon import _quantiles

    draws = np.r_[np.arange(10.0), np.full(3, np.inf)]  # 13 draws, 3 of them unbounded
    # positions 0.3, 6 and 11.7 (of 0..12): the last between two infinite draws
    assert list(_quantiles(draws, (0.025, 0.5, 0.975))) == pytest.approx([0.3, 6.0, np.inf])


def test_sbc_of_the_crossed_model(tmp_path):
    table, _ = _design(seed=5, agents=4, tasks=8, missing=0.3, zero_agent=False)
    evidence = load_evidence(table, keep_columns=True)
    result = sbc(evidence, str(_spec(tmp_path)), simulations=96, draws=99, bins=4, seed=2)
    assert result.passed(), result.p_values.sort_values().head()


@pytest.mark.slow  # a crossed_milestones fit of its own; the model keeps its SBC
def test_milestone_runs_never_run_pairs_take_the_tasks_milestones():
    rng = np.random.default_rng(4)
    rows = []
    for a in range(3):
        for t in range(6):
            if (a, t) in ((0, 1), (2, 4)):
                continue  # never run
            for step in range(1, 2 + t % 3):
                n = int(rng.integers(1, 4))
                rows.append((f"a{a}", f"t{t}", "milestone", step, int(rng.binomial(n, 0.6)), n))
    table = pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])
    posterior = bayes_eval.fit(table, "crossed_milestones", sampler=SMALL, seed=1)
    assert posterior.diagnostics.ok, posterior.diagnostics.messages
    draws = posterior.draws
    summary = posterior.summary().set_index(["agent", "task"])
    assert not summary.loc[("a0", "t1"), "observed"]
    # milestone runs inform every bound: no end-to-end floor describes them
    assert summary["floor_upper"].isna().all() and summary["extrapolated"].isna().all()
    cells = ["a0 / t1 / milestone 1", "a0 / t1 / milestone 2"]  # the task's two
    assert "a0 / t1 / milestone 3" not in draws["milestone_cell"]
    milestones = draws["p_milestone"].sel(milestone_cell=cells).transpose(..., "milestone_cell")
    with np.errstate(divide="ignore"):  # a rate drawn below 1e-308 is 0: its product too
        product = np.exp(np.log(milestones.values).sum(axis=-1))
    assert np.allclose(product, draws["p_task"].sel(agent="a0", task="t1").values)
    from bayes_eval.checks.fitted import check_fit
    from bayes_eval.constants import END_TO_END, MILESTONE_METHOD
    from bayes_eval.outputs.report import build_report
    from bayes_eval.registry import MODELS

    # its bounds carry no extrapolated mark: the end-to-end models' text is not said
    markdown = build_report(posterior, 0.01, checks=check_fit(posterior)).markdown
    assert MODELS[MILESTONE_METHOD, "crossed"].text in markdown
    assert MODELS[END_TO_END, "crossed"].text not in markdown


def test_sbc_of_the_crossed_milestone_model():
    """SBC on a sparse, ragged milestone design: 4 agents x 6 tasks with 1 to 3
    milestones, 1 to 3 trials per milestone, two pairs never run."""
    rng = np.random.default_rng(3)
    rows = [
        (f"a{a}", f"t{t}", "milestone", step, 0, int(rng.integers(1, 4)))
        for a in range(4)
        for t in range(6)
        if (a, t) not in ((0, 1), (3, 4))
        for step in range(1, 2 + t % 3)
    ]
    table = pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])
    result = sbc(table, "crossed_milestones", simulations=24, draws=99, bins=4, seed=2)
    assert result.passed(), result.p_values.sort_values().head()
    assert "cell_scale" in result.p_values.index


@pytest.mark.parametrize("model", ["crossed", "crossed_milestones"])
def test_one_run_per_cluster_is_the_unclustered_crossed_model(model):
    """With one run per cluster the clustered likelihood is the plain one: at random
    points of the parameters, the two models' log densities differ by the prior of
    kappa_cluster alone (LogNormal(2.3, 1.5), on its log scale), whatever kappa is; for
    milestone runs, with the pairs that may be blocked found from the clusters' counts.
    Exact, where comparing two MCMC fits hung on both passing the gate, which on this
    small design depends on the processor's floating point (one chain of the clustered
    fit diverged on an AMD EPYC, not on the Intel Xeon the test was written on)."""
    from bayes_eval.crossed.model import build_model, design_of
    from bayes_eval.fit import usable_rows

    table, _ = _design(seed=7, agents=4, tasks=16, zero_agent=False)
    runs = table.loc[table.index.repeat(table["trials"])].copy()
    runs["success"] = 0
    for _, group in runs.groupby(["agent", "task"]):
        runs.loc[group.index[: int(group["successes"].iloc[0])], "success"] = 1
    runs["cluster"] = np.arange(len(runs))
    runs = runs.drop(columns=["successes", "trials", "release", "minutes"])
    if model == "crossed_milestones":  # a pair's runs alternate between two milestones
        runs["method"], runs["step"] = (
            "milestone",
            runs.groupby(["agent", "task"]).cumcount() % 2 + 1,
        )
        assert (runs.groupby(["agent", "task"])["success"].sum() == 0).sum() > 3
    spec = load_spec(model)

    def model_of(frame):
        evidence = load_evidence(frame.reset_index(drop=True))
        with collected():
            design = design_of(usable_rows(evidence, spec), spec, evidence)
        return build_model(design, spec)

    plain, clustered = model_of(runs.drop(columns="cluster")), model_of(runs)
    _log_likelihoods_differ_by_the_binomial_coefficients(runs, spec)
    extra = {v.name for v in clustered.value_vars} - {v.name for v in plain.value_vars}
    assert extra == {"kappa_cluster_log__"}
    logp_plain, logp_clustered = plain.compile_logp(), clustered.compile_logp()
    rng = np.random.default_rng(0)
    start = plain.initial_point()
    for _ in range(5):
        point = {name: value + rng.normal(0, 0.5, np.shape(value)) for name, value in start.items()}
        for log_kappa in (-1.0, 2.0, 6.0):
            prior = stats.norm.logpdf(log_kappa, 2.3, 1.5)  # log kappa ~ Normal(2.3, 1.5)
            both = logp_clustered({**point, "kappa_cluster_log__": np.array(log_kappa)})
            assert both - prior == pytest.approx(logp_plain(point), rel=1e-9, abs=1e-9)


def _log_likelihoods_differ_by_the_binomial_coefficients(runs, spec):
    """At random draws, the clustered fit's log-likelihood of each unit (a pair's
    end-to-end runs, or a pair's milestone runs with its blocked mixture) is the plain
    fit's less the log binomial coefficients of its cells' totals: with one run per
    cluster, the clusters' counts are the runs themselves."""
    import xarray as xr

    from bayes_eval.crossed.likelihood import log_likelihood
    from bayes_eval.crossed.model import design_of
    from bayes_eval.fit import usable_rows

    def design(frame):
        evidence = load_evidence(frame.reset_index(drop=True))
        with collected():
            return design_of(usable_rows(evidence, spec), spec, evidence)

    plain, clustered = design(runs.drop(columns="cluster")), design(runs)
    rng = np.random.default_rng(1)
    agents, tasks = len(plain.layout.agents), len(plain.layout.tasks)
    draws = xr.Dataset(
        {
            "ability": (("chain", "draw", "agent"), rng.normal(0, 1.5, (2, 3, agents))),
            "difficulty": (("chain", "draw", "task"), rng.normal(0, 1.5, (2, 3, tasks))),
            "cell_scale": (("chain", "draw"), rng.lognormal(0, 0.7, (2, 3))),
            "kappa_cluster": (("chain", "draw"), rng.lognormal(1, 2, (2, 3))),
            "blocked_share": (("chain", "draw"), rng.uniform(0.05, 0.9, (2, 3))),
        }
    )
    (got,), (expected,) = (
        log_likelihood(draws, d, spec).data_vars.values() for d in (clustered, plain)
    )
    layout = plain.layout
    k, n = (layout.e2e_k, layout.e2e_n) if spec.kind == "end_to_end" else (layout.k, layout.n)
    choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    if spec.kind != "end_to_end":  # whole pairs
        choose = np.bincount(layout.cell_pair, choose, len(layout.pairs))
    np.testing.assert_allclose(got.values, expected.values - choose, rtol=1e-10)


def test_the_departure_integral_of_clustered_runs_matches_adaptive_quadrature():
    """``log_marginal_clusters``: the log probability of a rate's clusters' counts, each
    cluster ``BetaBinomial(n_c, p phi, (1 - p) phi)`` (scipy's), ``p = expit(eta + s e)``,
    the departure ``e ~ N(0, 1)`` integrated out by scipy's adaptive quadrature."""
    from bayes_eval.counts.clusters import cluster_terms
    from bayes_eval.crossed.likelihood import log_marginal_clusters

    clusters = [[(0, 1)], [(2, 5), (0, 3), (4, 4)], [(0, 6), (0, 2)], [(7, 7), (1, 1), (3, 9)]]
    rate = np.concatenate([[r] * len(c) for r, c in enumerate(clusters)])
    k, n = (np.array([x[i] for c in clusters for x in c]) for i in (0, 1))
    terms = cluster_terms(rate, k, n, len(clusters))
    eta = np.array([[-3.0, 0.5, 1.0, -0.5], [2.0, -1.5, -4.0, 3.0]])  # (draws, rates)
    scale = np.array([[0.3], [2.5]])
    phi = np.array([[0.5], [40.0]])
    got = log_marginal_clusters(eta, scale, np.log(phi), terms)
    for d in range(2):
        for r, counts in enumerate(clusters):

            def integrand(e, d=d, counts=counts, r=r):
                p = special.expit(eta[d, r] + scale[d, 0] * e)
                a, b = p * phi[d, 0], (1 - p) * phi[d, 0]
                like = np.prod([stats.betabinom.pmf(kc, nc, a, b) for kc, nc in counts])
                return like * stats.norm.pdf(e)

            value = integrate.quad(integrand, -12, 12, epsabs=0, epsrel=1e-11, limit=400)[0]
            assert got[d, r] == pytest.approx(np.log(value), rel=1e-8)


# --------------------------------------------------------------------- input contract


def _evidence(**columns):
    table = pd.DataFrame(
        {
            "agent": ["a", "a", "b", "b"],
            "task": ["t1", "t2", "t1", "t2"],
            "method": "end_to_end",
            "successes": [1, 0, 2, 1],
            "trials": [2, 2, 2, 2],
            **columns,
        }
    )
    return load_evidence(table, keep_columns=True)


@pytest.mark.parametrize(
    ("columns", "side", "message"),
    [
        (
            {"minutes": [1, 2, 1, 2]},
            {},
            "column release: the spec names it as a covariate of each agent",
        ),
        (
            {
                "release": ["2024-01-01", "2024-02-01", "2023-01-01", "2023-01-01"],
                "minutes": [1, 2, 1, 2],
            },
            {},
            "row 3, column release: '2024-02-01' differs from '2024-01-01' (row 2) for agent 'a'",
        ),
        (
            {"release": ["2024-01-01", "2024-01-01", "soon", "soon"], "minutes": [1, 2, 1, 2]},
            {},
            "row 4, column release: 'soon' is not an ISO date (YYYY-MM-DD)",
        ),
        (
            {"release": [1, 1, 2, 2], "minutes": [1, 0, 1, 0]},
            {},
            "row 3, column minutes: 0 has no log2",
        ),
        (
            {"release": [1, 1, 1, 1], "minutes": [1, 2, 1, 2]},
            {},
            "covariate release: takes one value across the 2 fitted agents",
        ),
        (
            {"minutes": [1, 2, 1, 2]},
            {"agents": pd.DataFrame({"agent": ["a", "a"], "release": [1, 2]})},
            "agents table: row 3, column agent: 'a' repeats row 2",
        ),
        (
            {"minutes": [1, 2, 1, 2]},
            {"agents": pd.DataFrame({"agent": ["a"], "release": [1]})},
            "agents table: no row for agent 'b' (column release)",
        ),
        (
            {"release": [1, 1, 2, 2], "minutes": [1, 2, 1, 2]},
            {"predict": ["c,speed=3"]},
            "predict c,speed=3: 'speed' is not an agent covariate",
        ),
        (
            {"release": [1, 1, 2, 2], "minutes": [1, 2, 1, 2]},
            {"predict": ["a,release=3"]},
            "'a' is an agent of the evidence",
        ),
        (
            {"release": [1, 1, 2, 2], "minutes": [1, 2, 1, 2]},
            {"predict": ["c"]},
            "predict c: give release=...",
        ),
    ],
)
def test_bad_covariates_are_one_located_error(tmp_path, columns, side, message):
    with pytest.raises(InputError, match=None) as raised:
        bayes_eval.fit(_evidence(**columns), str(_spec(tmp_path)), sampler=SMALL, **side)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[covariates]\ntask = ["sqrt(minutes)"]\n', "is not a covariate term"),
        ('[covariates]\ntask = ["minutes"]\nlength = "log2(minutes)"\n', "length 'log2(minutes)'"),
        ('[covariates]\ntasks = ["minutes"]\n', "unknown key 'tasks' (did you mean 'task'?)"),
    ],
)
def test_bad_covariate_specs_are_refused(tmp_path, body, message):
    with pytest.raises(InputError) as raised:
        load_spec(str(_spec(tmp_path, covariates=False, body=body)))
    assert message in str(raised.value)


def test_covariates_given_to_another_model_are_refused():
    """From Python the error names the parameter; the command line names its flag."""
    with pytest.raises(InputError, match="^agents: covariates and predictions apply to crossed"):
        bayes_eval.fit(_evidence(), "end_to_end", agents=pd.DataFrame({"agent": ["a"]}))


def test_a_side_table_file_gives_dates_as_decimal_years(tmp_path):
    from bayes_eval.evidence.covariates import read_covariates, read_side_table

    path = tmp_path / "agents.csv"
    path.write_text("agent,release\na,2024-07-02\nb,2023-01-01\n")
    side = {"agent": read_side_table(path, "agent")}
    spec = load_spec(str(_spec(tmp_path)))
    covariates = read_covariates(
        spec.covariates, _evidence(minutes=[1, 2, 1, 2]), ["a", "b"], ["t1", "t2"], side
    )
    # 2024 is a leap year: 2 July is day 183 of 366
    assert covariates.agent_raw[:, 0] == pytest.approx([2024 + 183 / 366, 2023.0])
    assert covariates.agent_dates == (True,)
    assert covariates.sources["release"] == str(path)


def test_the_horizon_command_writes_its_files_and_refuses_other_fits(recovered, tmp_path, capsys):
    from bayes_eval.cli.main import main

    posterior, _, _ = recovered
    run = tmp_path / "run"
    run.mkdir()
    posterior.to_netcdf(run / "posterior.nc")
    assert (
        main(["horizon", str(run), "--forecast", "2026-06-01", "--out", str(tmp_path / "h")]) == 0
    )
    out = capsys.readouterr().out
    assert "doubles every" in out and "forecast 2026-06-01, new agent" in out
    written = pd.read_csv(tmp_path / "h" / "horizons.csv")
    assert list(written["agent"])[:8] == [f"a{i}" for i in range(8)]
    assert (tmp_path / "h" / "horizons.png").stat().st_size > 0
    other = tmp_path / "other"
    other.mkdir()
    bayes_eval.fit(_evidence(), "end_to_end").to_netcdf(other / "posterior.nc")
    assert main(["horizon", str(other)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: horizon: model end_to_end is end_to_end/none")
    assert "\n" not in error
    assert main(["horizon", str(run), "--forecast", "next year"]) == 2
    assert "--forecast next year" in capsys.readouterr().err


def test_horizon_method_metr_reads_the_fits_runs(recovered, tmp_path, capsys):
    """``horizon RUN --method metr`` reads the fit's runs, task lengths and release dates
    back (each task a family of its own: the fit has no groups) and gives METR's horizons
    of the table the fit was given; an agent without a success has none."""
    import io

    from bayes_eval.cli.main import main
    from bayes_eval.crossed.metr_method import metr_horizons

    posterior, table, truth = recovered
    run = tmp_path / "run"
    run.mkdir()
    posterior.to_netcdf(run / "posterior.nc")
    args = ["horizon", str(run), "--method", "metr", "--bootstrap", "0", "--format", "csv"]
    assert main([*args, "--out", str(tmp_path / "m")]) == 0
    got = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("agent")
    cells = table.assign(family=table["task"]).drop(columns=["method", "release"])
    dates = pd.Series(truth["release"], index=[f"a{i}" for i in range(len(truth["release"]))])
    expected = metr_horizons(cells, dates, bootstrap=0).agents.set_index("agent")
    assert got.index.tolist() == expected.index.tolist()
    assert np.allclose(got["date"], truth["release"])
    assert np.allclose(got["h50"], expected["h50"], rtol=1e-9, equal_nan=True)
    assert np.isnan(got.loc["a0", "h50"]) and got.loc["a0", "successes"] == 0
    assert (tmp_path / "m" / "metr_horizons.csv").exists()
    assert main(["horizon", str(run), "--method", "metr", "--forecast", "2026-01-01"]) == 2
    assert "--forecast: forecasts are the fit's" in capsys.readouterr().err


# a crossed fit and its refit; the refit's choice of forms is checked without sampling (below)
@pytest.mark.slow
def test_a_failed_fit_is_refitted_with_the_difficulties_in_the_other_form():
    """Starved of draws, every attempt fails: the refit with twice the draws keeps the
    difficulties' form, the next flips it; each from its own seed, all named."""
    table, _ = _design(seed=3, agents=3, tasks=6, missing=0.0, zero_agent=False)
    starved = {"draws": 20, "tune": 20, "chains": 2}
    posterior = bayes_eval.fit(table, "crossed", sampler=starved, seed=11)
    assert not posterior.diagnostics.ok
    provenance = posterior.summary()["provenance"].iloc[0]
    forms = re.findall(r"attempt (\d) nutpie [^:]*?difficulties zero-sum ([a-z-]+)", provenance)
    assert [attempt for attempt, _ in forms] == ["1", "2", "3"]
    assert forms[0][1] == forms[1][1] != forms[2][1]
    assert ", seed 12:" in provenance and ", seed 13:" in provenance


def _failed(variables, divergences=0, ebfmi=(1.0, 1.0)):
    """Diagnostics in which ``variables`` failed their checks and ``cell_scale`` passed."""
    from bayes_eval.inference.diagnostics import Diagnostics

    names = [*variables, "cell_scale"]
    table = pd.DataFrame(
        {
            "variable": names,
            "r_hat": [1.03] * len(variables) + [1.0],
            "ess_bulk": [300.0] * len(variables) + [4000.0],
            "ess_tail": [300.0] * len(variables) + [4000.0],
            "ok": [False] * len(variables) + [True],
        }
    )
    return Diagnostics(False, ("failed",), table, divergences, ebfmi)


def test_a_refit_makes_centred_difficulties_non_centred_first_where_they_alone_failed():
    """Where every failed quantity is a centred difficulty's, the difficulties go
    non-centred first and the same form comes next; otherwise (the abilities failed, both
    parts did, the sampler diverged, the difficulties were not centred) the same form
    comes first and then the other one, all non-centred."""
    from bayes_eval.crossed.model import CrossedForm

    form = CrossedForm(np.array([True, True, False]), True)
    failed = _failed(["difficulty_scale", "difficulty_offset[t1]", "p_task[a, t]"])
    first, second = form.refits(failed)
    assert first.abilities.tolist() == [True, True, False] and not first.difficulties
    assert second is form
    for other, diagnostics in (
        (form, _failed(["ability_mean", "ability[a]"])),
        (form, _failed(["ability_mean", "difficulty_scale"])),
        (form, _failed(["cell_scale_other"])),
        (form, _failed(["difficulty_scale"], divergences=3)),
        (form, _failed(["difficulty_scale"], ebfmi=(0.1, 0.9))),
        (CrossedForm(np.array([True, False]), False), _failed(["difficulty_scale"])),
    ):
        same, flipped = other.refits(diagnostics)
        assert same is other
        assert not flipped.abilities.any() and not flipped.difficulties


def test_a_pair_is_drawn_blocked_with_its_posterior_probability():
    """Blocked with probability s / (s + (1 - s) L) where every milestone run of the pair
    failed (L: its runs' likelihood at the drawn rates), never where one succeeded; runs
    in clusters of one run each give the same draws."""
    from types import SimpleNamespace

    from bayes_eval.counts.clusters import cluster_terms
    from bayes_eval.crossed.model import _blocked_draws

    k, n = np.array([0, 0, 1]), np.array([3, 2, 4])
    cell_pair = np.array([0, 0, 1])
    layout = SimpleNamespace(
        k=k, n=n, cell_pair=cell_pair, pairs=[("a", "t"), ("a", "u")], grading=None
    )
    draws = 200_000
    share = np.full((1, draws), 0.3)
    logit = np.broadcast_to(np.array([-1.0, 0.5, 0.0]), (1, draws, 3))
    post = {"blocked_share": SimpleNamespace(values=share)}
    plain = SimpleNamespace(**vars(layout), clusters=None)
    blocked = _blocked_draws(post, logit, plain, np.random.default_rng(0))
    p = special.expit(np.array([-1.0, 0.5]))
    likelihood = (1 - p[0]) ** 3 * (1 - p[1]) ** 2
    expected = 0.3 / (0.3 + 0.7 * likelihood)
    observed = blocked[..., 0].mean()
    assert abs(observed - expected) < 4 * np.sqrt(expected * (1 - expected) / draws)
    assert not blocked[..., 1].any()

    runs = np.repeat(np.arange(3), n)
    successes = np.array([0, 0, 0, 0, 0, 1, 0, 0, 0])
    clustered = SimpleNamespace(
        **vars(layout), clusters=cluster_terms(runs, successes, np.ones(9, dtype=int), 3)
    )
    post["kappa_cluster"] = SimpleNamespace(values=np.full((1, draws), 5.0))
    again = _blocked_draws(post, logit, clustered, np.random.default_rng(0))
    assert (again == blocked).all()


def test_a_pair_whose_successes_a_grader_scored_may_be_blocked():
    """The second pair's one success, graded by a judge (sensitivity 0.8, specificity
    0.9), may be a false alarm: the pair is blocked with probability ``s B / (s B + (1 -
    s) L)``, ``B = 0.1 * 0.9^3`` its graded count's chance were every run a failure and
    ``L`` its chance through the judge at the drawn rate; the first pair, a trusted cell
    that failed beside a graded one, by the same rule (``B = 0.9^2``)."""
    from types import SimpleNamespace

    from bayes_eval.crossed.model import _blocked_draws

    k, n = np.array([0, 0, 1]), np.array([3, 2, 4])
    grading = SimpleNamespace(pairs=np.array([1, 2]), grader=np.array([0, 0]))
    layout = SimpleNamespace(
        k=k, n=n, cell_pair=np.array([0, 0, 1]), pairs=[0, 1], grading=grading, clusters=None
    )
    draws = 200_000
    full = np.full((1, draws, 1), 1.0)
    post = {
        "blocked_share": SimpleNamespace(values=np.full((1, draws), 0.3)),
        "sensitivity": SimpleNamespace(values=0.8 * full),
        "specificity": SimpleNamespace(values=0.9 * full),
    }
    logit = np.broadcast_to(np.array([-1.0, 0.5, 0.0]), (1, draws, 3))
    blocked = _blocked_draws(post, logit, layout, np.random.default_rng(1))
    p = special.expit(np.array([-1.0, 0.5, 0.0]))
    q = 0.8 * p + 0.1 * (1 - p)
    first = (1 - p[0]) ** 3 * (1 - q[1]) ** 2  # a trusted failure, a graded one
    second = q[2] * (1 - q[2]) ** 3
    alarms = (0.9**2, 0.1 * 0.9**3)  # each pair's graded counts as false alarms
    for pair, likelihood in enumerate((first, second)):
        expected = 0.3 * alarms[pair] / (0.3 * alarms[pair] + 0.7 * likelihood)
        observed = blocked[..., pair].mean()
        assert abs(observed - expected) < 4 * np.sqrt(expected * (1 - expected) / draws)
