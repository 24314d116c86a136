"""pass@k across an agent's tasks (``Posterior.population``): a new task's closed forms
and quadrature against scipy, the observed tasks' average against the Beta closed forms,
the power law's exponent, and the least k that crosses a threshold."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special

import bayes_eval
from bayes_eval.exact.attempts import log_beta_ratio, mean_at_least_one
from bayes_eval.results.population import (
    NEW_TASK,
    OBSERVED,
    POPULATION_COLUMNS,
    NewTask,
    _least_k,
    crossing,
    power_law,
)

EXAMPLE = str(Path(__file__).resolve().parents[1] / "data" / "example_evidence.csv")


def _table(rates, runs, seed) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for agent, agent_rates in rates.items():
        for t, p in enumerate(agent_rates):
            k = int(rng.binomial(runs, p))
            rows.append(
                dict(agent=agent, task=f"t{t}", method="end_to_end", successes=k, trials=runs)
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def pooled():
    rng = np.random.default_rng(11)
    rates = {"strong": rng.beta(2.0, 1.0, 12), "weak": rng.beta(0.3, 3.0, 12)}
    return bayes_eval.fit(_table(rates, 4, 12), "end_to_end_pooled")


def test_a_new_task_is_the_agents_beta(pooled):
    table = pooled.population([1, 100, 10**6])
    assert list(table.columns) == list(POPULATION_COLUMNS)
    new = table[table["population"] == NEW_TASK].set_index(["agent", "attempts"])
    for agent in ("strong", "weak"):
        mu = pooled.draws["mu"].sel(agent=agent).values.ravel()
        kappa = pooled.draws["kappa"].sel(agent=agent).values.ravel()
        # E[P] of a new task is the agent's mean, draw by draw
        assert new.loc[(agent, 1), "pass_at_mean"] == pytest.approx(mu.mean(), rel=1e-12)
        # a few draws against direct integration of the Beta density
        for n in (0, 1234, 7999):
            a, b = mu[n] * kappa[n], (1 - mu[n]) * kappa[n]

            def density(p, a=a, b=b):
                return np.exp((a - 1) * np.log(p) + (b - 1) * np.log1p(-p) - special.betaln(a, b))

            fails = integrate.quad(lambda p: (1 - p) ** 100 * density(p), 0, 1, limit=200)[0]
            assert mean_at_least_one(a, b, 100) == pytest.approx(1 - fails, rel=1e-7)
    strong, weak = (new.loc[(a, 100), "pass_at_mean"] for a in ("strong", "weak"))
    assert weak < strong
    assert (new["pass_at_lower"] <= new["pass_at_upper"]).all()


def test_the_observed_average_matches_the_beta_closed_forms():
    rates = {"a": [0.02, 0.3, 0.7, 0.0, 0.9]}
    evidence = _table(rates, 6, 5)
    posterior = bayes_eval.fit(evidence, "end_to_end")
    table = posterior.population([1, 20, 5000])
    assert set(table["population"]) == {OBSERVED}  # an exact fit has no task population
    k, n = evidence["successes"].to_numpy(), evidence["trials"].to_numpy()
    draws = posterior.draws["p_task"].sel(agent="a").values.reshape(-1, len(k))
    for row in table.itertuples():
        exact = np.mean(mean_at_least_one(1 + k, 1 + n - k, row.attempts))
        per_draw = 1 - (1 - draws) ** row.attempts
        error = per_draw.mean(axis=1).std(ddof=1) / math.sqrt(draws.shape[0])
        assert abs(row.pass_at_mean - exact) <= 4 * error + 1e-12


def test_point_values_are_left_out_of_the_average_and_counted():
    posterior = bayes_eval.fit(EXAMPLE, "phuong_chain")
    table = posterior.population([10]).set_index("agent")
    assert "1 task(s) without one" in table.loc["agent-a", "provenance"]
    assert "mean over 3 task(s)" in table.loc["agent-b", "provenance"]


def test_the_exponent_is_the_betas_first_shape(pooled):
    law = power_law(pooled).set_index("agent")
    mu = pooled.draws["mu"].values.reshape(-1, 2)
    kappa = pooled.draws["kappa"].values.reshape(-1, 2)
    a, b = mu[:50] * kappa[:50], (1 - mu[:50]) * kappa[:50]
    # the share never solved falls as k^(-alpha): its log-log slope between 1e8 and 1e9
    slope = (log_beta_ratio(a, b, 10**9) - log_beta_ratio(a, b, 10**8)) / math.log(10)
    np.testing.assert_allclose(-slope, a, rtol=1e-3)
    assert law.loc["weak", "alpha_lower"] < law.loc["weak", "alpha_mean"]
    assert power_law(bayes_eval.fit(EXAMPLE, "end_to_end")) is None


@pytest.mark.parametrize("centre", [-22.0, -5.0, 0.0, 3.0])
@pytest.mark.parametrize("scale", [0.05, 1.0, 3.0, 8.0, 20.0])
@pytest.mark.parametrize("k", [1, 10**3, 10**6, 10**9])
def test_the_crossed_new_task_quadrature_matches_scipy(centre, scale, k):
    def rate(z, power):
        log_p = -np.logaddexp(0.0, -(centre + scale * z))
        log_q = -np.logaddexp(0.0, centre + scale * z)
        value = -np.expm1(k * log_q) if power == "at" else np.exp(k * log_p)
        return value * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    task = NewTask(np.array(centre), np.array(scale))
    at, every = task.at_least_one(k), task.every(k)
    for value, power in ((at, "at"), (every, "all")):
        exact = integrate.quad(rate, -40, 40, args=(power,), points=[0.0], limit=400, epsabs=0)[0]
        assert float(value) == pytest.approx(exact, rel=1e-6, abs=1e-40)


def test_the_least_k_matches_its_closed_form():
    p = np.array([1e-8, 1e-4, 0.3, 0.999999])
    for tau in (0.01, 0.5, 0.99):
        found = _least_k(lambda k: -np.expm1(k * np.log1p(-p)), tau)
        expected = np.ceil(math.log1p(-tau) / np.log1p(-p))
        expected = np.where(expected <= 10**9, np.maximum(expected, 1), np.inf)
        np.testing.assert_array_equal(found, expected)


def test_crossing_gives_a_lower_bound_below_the_median(pooled):
    crossed = crossing(pooled, 0.5).set_index("agent")
    assert (crossed["k_lower"] <= crossed["k_median"]).all()
    assert crossed.loc["weak", "k_median"] > crossed.loc["strong", "k_median"]


def test_the_reports_deployment_section(pooled, tmp_path):
    from bayes_eval.outputs.deployment import deployment_sections
    from bayes_eval.outputs.drawing import Figures

    with Figures(processes=0) as figures:
        sections = deployment_sections(pooled, 0.5, 0.975, figures)
        assert figures.drawn()["deployment.png"].startswith(b"\x89PNG")
    assert sections[0] == ("h2", "At deployment scale")
    lists = [payload for kind, payload in sections if kind == "list"]
    crossing_items, exponents = lists
    assert all("(median); with probability 0.975 not before" in item for item in crossing_items)
    assert exponents[0].startswith("strong: alpha ")
    report = bayes_eval.report(EXAMPLE, threshold=0.05, out=tmp_path)
    assert "## At deployment scale" in report.markdown
    assert "deployment.png" in report.figures and (tmp_path / "deployment.png").exists()
    assert "When a new task's pass@k" not in report.markdown  # an exact fit has no new task


def test_a_run_folder_keeps_the_population(tmp_path):
    done = bayes_eval.run(EXAMPLE, out=tmp_path / "run", attempts="1,10")
    written = pd.read_csv(tmp_path / "run" / "population.csv")
    assert "population.csv" in done.written
    assert written["population"].eq(OBSERVED).all() and len(written) == 2 * 2
    np.testing.assert_allclose(written["pass_at_mean"], done.population["pass_at_mean"])


def test_the_report_tabulates_the_attempts_asked_for(tmp_path, capsys):
    from bayes_eval.cli.main import main

    report = bayes_eval.report(EXAMPLE, threshold=0.05, attempts="3,1e4")
    section = report.markdown.split("## At deployment scale")[1]
    assert "| k = 3 | k = 10,000 |" in section and "k = 100 |" not in section
    assert "| agent-b | credential_harvest | 10,000 |" in section  # the table per pair
    code = main(
        [
            "report",
            EXAMPLE,
            "--threshold",
            "0.05",
            "--attempts",
            "0.5",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2
    assert "error: --attempts: '0.5' is not a whole number" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
