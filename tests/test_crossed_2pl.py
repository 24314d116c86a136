"""``time_horizon_2pl``: the crossed model with a discrimination per task and the recorded
task length measured with error. Recovery of a simulated 2PL design whose recorded lengths
carry an error (sparse: one to four runs per pair, a fifth of the pairs never run), SBC,
its log-likelihood against adaptive quadrature, and its horizons against simulated new
tasks."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval import InputError, load_evidence
from bayes_eval.checks.sbc import sbc
from bayes_eval.crossed.horizon import horizons, success_offset
from bayes_eval.specs import load_spec

ROOT_2PI = np.sqrt(2 * np.pi)  # the normal density, written out: quad calls it per node
TRUTH = {
    "slope": 0.6,  # log-odds of difficulty per doubling of the true length
    "difficulty_scale": 0.5,
    "discrimination_scale": 0.5,
    "length_error_scale": 1.0,  # doublings: the shipped prior's median
    "cell_scale": 0.4,
}


def _design(seed=0, agents=10, tasks=40, missing=0.2, runs=(1, 5)):
    """Runs of a 2PL truth: ability rises with the release year, difficulty with the true
    log2 length, each task with its own discrimination (geometric mean 1, the model's
    convention); the recorded minutes are the true ones times ``2 ** (error z)``. Returns
    the runs and the truth."""
    rng = np.random.default_rng(seed)
    release = 2025.0 - np.arange(agents)[::-1]
    true_log = rng.uniform(0, 9, tasks)
    recorded = true_log + TRUTH["length_error_scale"] * rng.standard_normal(tasks)
    ability = -0.5 + 0.5 * (release - release.mean()) + 0.4 * rng.standard_normal(agents)
    difficulty = TRUTH["slope"] * (true_log - 4.5)
    difficulty += TRUTH["difficulty_scale"] * rng.standard_normal(tasks)
    log_slope = TRUTH["discrimination_scale"] * rng.standard_normal(tasks)
    discrimination = np.exp(log_slope - log_slope.mean())
    rows = []
    for a in range(agents):
        for t in range(tasks):
            if rng.random() < missing:
                continue
            logit = discrimination[t] * (ability[a] - difficulty[t])
            p = special.expit(logit + TRUTH["cell_scale"] * rng.standard_normal())
            n = int(rng.integers(*runs))
            rows.append(
                (f"a{a}", f"t{t}", f"f{t % 6}", int(rng.binomial(n, p)), n, release[a], recorded[t])
            )
    table = pd.DataFrame(
        rows,
        columns=["agent", "task", "task_family", "successes", "trials", "year", "log2_minutes"],
    )
    table["human_minutes"] = np.exp2(table.pop("log2_minutes"))
    table["release_date"] = table.pop("year").map(lambda y: f"{int(y)}-01-01")
    truth = dict(TRUTH, ability=ability, discrimination=discrimination, true_log=true_log)
    return table.assign(method="end_to_end"), truth


@pytest.fixture(scope="module")
def recovered():
    table, truth = _design()
    evidence = load_evidence(table, keep_columns=True)
    sampler = {"draws": 500, "tune": 500}  # 4 chains: 2,000 draws
    return bayes_eval.fit(evidence, "time_horizon_2pl", seed=4, sampler=sampler), truth


def test_the_2pl_fit_recovers_its_discriminations_and_horizons(recovered):
    posterior, truth = recovered
    assert posterior.diagnostics.ok, posterior.diagnostics.messages
    draws = posterior.draws
    low, high = np.quantile(draws["discrimination_scale"].values, [0.025, 0.975])
    assert low < truth["discrimination_scale"] < high
    # each task's discrimination: its posterior median follows the truth
    tasks = [f"t{t}" for t in range(40)]
    fitted = np.log(draws["discrimination"].sel(task=tasks).median(("chain", "draw")).values)
    rho = stats.spearmanr(fitted, np.log(truth["discrimination"])).statistic
    assert rho > 0.4, rho
    # The horizons, read at a true length: the truth's own from the same success offsets
    # (checked against quadrature below). Difficulty at true log length x is slope (x -
    # 4.5) + u, u ~ N(0, difficulty_scale^2), so agent a's q horizon is 4.5 + (theta_a -
    # c_q) / slope doublings.
    table = horizons(posterior).agents.set_index("agent")
    for q in (0.5, 0.8):
        c = success_offset(
            q, TRUTH["difficulty_scale"], TRUTH["cell_scale"], TRUTH["discrimination_scale"]
        )
        true_h = np.exp2(4.5 + (truth["ability"] - c) / TRUTH["slope"])
        name = f"h{round(100 * q)}"
        inside = [
            table.loc[f"a{a}", f"{name}_lower"] < true_h[a] < table.loc[f"a{a}", f"{name}_upper"]
            for a in range(10)
        ]
        assert np.mean(inside) >= 0.8, (name, inside)


def test_the_log_likelihood_integrates_the_departure_under_each_tasks_discrimination(
    recovered,
):
    posterior, _ = recovered
    draws = posterior.draws
    one = draws.isel(chain=[1], draw=[17])  # the fit's own likelihood, at one draw
    values = posterior.log_likelihood_at(one)["successes"].isel(chain=0, draw=0)
    evidence = posterior.evidence.table
    for row in evidence.iloc[[0, 7, 40]].itertuples():
        at = {"chain": 1, "draw": 17}
        a = float(draws["discrimination"].isel(**at).sel(task=row.task))
        eta = a * float(
            draws["ability"].isel(**at).sel(agent=row.agent)
            - draws["difficulty"].isel(**at).sel(task=row.task)
        )
        s = float(draws["cell_scale"].isel(**at))
        k, n = row.successes, row.trials
        expected, _ = integrate.quad(
            lambda e, k=k, n=n, eta=eta, s=s: (
                stats.binom.pmf(k, n, special.expit(eta + s * e)) * stats.norm.pdf(e)
            ),
            -12,
            12,
            epsabs=1e-14,
            epsrel=1e-12,
        )
        cell = values.sel(cell=f"{row.agent} / {row.task} / end_to_end")
        assert float(cell) == pytest.approx(np.log(expected), rel=1e-9)


def test_the_80_percent_horizon_is_where_simulated_new_tasks_succeed_80_percent(recovered):
    """At a draw's 80% horizon, new tasks of that true length (their difficulty, their
    discrimination and the departure drawn from the draw's populations) succeed 80% of
    the time: a simulation against the quadrature the horizons solve by."""
    posterior, _ = recovered
    draws = posterior.draws.isel(chain=0, draw=11)
    rng = np.random.default_rng(0)
    scales = {name: float(draws[name]) for name in TRUTH if name in draws}
    spread = np.hypot(scales["difficulty_scale"], float(draws["group_scale"]))
    c = success_offset(0.8, spread, scales["cell_scale"], scales["discrimination_scale"])
    # d = theta - (the new task's expected difficulty) = c: the logit is a (c - u) + s e
    m = 2_000_000
    slope = np.exp(scales["discrimination_scale"] * rng.standard_normal(m))
    logit = slope * (c - spread * rng.standard_normal(m))
    success = special.expit(logit + scales["cell_scale"] * rng.standard_normal(m))
    assert success.mean() == pytest.approx(0.8, abs=4 * success.std() / np.sqrt(m))


def test_success_offset_of_a_2pl_task_against_two_dimensional_quadrature():
    for sigma, cell, spread in (
        (1.3, 0.8, 0.6),
        (2.5, 1.0, 0.3),
        (0.5, 0.2, 0.9),
        (3.3, 1.5, 0.35),
    ):
        c = success_offset(0.8, np.array([sigma]), cell, spread)[0]

        def at_slope(log_a, c=c, sigma=sigma, cell=cell, spread=spread):
            a = np.exp(log_a)
            width = np.hypot(a * sigma, cell)
            inner, _ = integrate.quad(
                lambda v: special.expit(a * c - width * v) * np.exp(-v * v / 2) / ROOT_2PI,
                -30,
                30,
                epsabs=1e-13,
                limit=200,
            )
            return inner * np.exp(-((log_a / spread) ** 2) / 2) / (ROOT_2PI * spread)

        mean, _ = integrate.quad(at_slope, -10 * spread, 10 * spread, epsabs=1e-12, limit=200)
        # the stated accuracy (horizon.py): 3e-8 on the first three, 2e-7 at METR's scales
        assert mean == pytest.approx(0.8, abs=1e-6)
    # a spread of 0 is the one-slope rule: one normal of scale hypot(sigma, cell)
    assert success_offset(0.8, 1.2, 0.9, 0.0) == pytest.approx(
        success_offset(0.8, np.hypot(1.2, 0.9))
    )


def test_sbc_of_the_2pl_model_with_length_error():
    table, _ = _design(seed=5, agents=4, tasks=8, missing=0.3)
    evidence = load_evidence(table, keep_columns=True)
    result = sbc(evidence, "time_horizon_2pl", simulations=64, draws=99, bins=4, seed=3)
    assert {"discrimination_scale", "length_error_scale"} <= set(result.p_values.index)
    assert result.passed(), result.p_values.sort_values().head()


def test_a_length_error_without_a_length_is_refused(tmp_path):
    text = load_spec("time_horizon_2pl").text.replace('length = "log2(human_minutes)"\n', "")
    path = tmp_path / "no_length.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=r"length_error_scale\] .* needs \[covariates\] length"):
        load_spec(str(path))


def test_a_refit_is_given_the_covariates_the_fit_was_given(recovered):
    """``compare``'s exact refit of a left-out pair re-reads the covariates from the fit's
    own group (side tables): read back, they are the fit's values, standardised alike,
    with the same task groups."""
    from bayes_eval.crossed.groups import side_tables_of_group
    from bayes_eval.evidence.covariates import read_covariates, read_side_table

    posterior, _ = recovered
    group, spec = posterior.group("covariates"), posterior.spec
    tables = side_tables_of_group(group, spec.covariates)
    plain = load_evidence(
        posterior.evidence.table[["agent", "task", "method", "successes", "trials"]]
    )
    side = {key: read_side_table(table, key) for key, table in tables.items()}
    agents, tasks = list(group["agent"].values), list(group["task"].values)
    again = read_covariates(spec.covariates, plain, agents, tasks, side)
    np.testing.assert_allclose(
        again.agent_matrix,
        (group["agent_value"] - group["agent_centre"]) / group["agent_scale"],
        atol=1e-12,
    )
    np.testing.assert_allclose(again.task_raw, group["task_value"].values, rtol=1e-12)
    assert again.groups == json.loads(group.attrs["groups"])
    assert list(again.task_group) == list(group["task_group"].values)
