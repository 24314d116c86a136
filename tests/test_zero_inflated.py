"""``end_to_end_zero_inflated``: a share of an agent's tasks never solved. Its likelihood
and draw-back against scipy's Beta-Binomial, a new task's pass@k, and the share recovered
from a simulated table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import bayes_eval
from bayes_eval.errors import InputError

MODEL = "end_to_end_zero_inflated"
SHARES = {"a0": 0.5, "a1": 0.0}


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(21)
    rows = []
    for agent, share in SHARES.items():
        rates = rng.beta(0.7, 0.7, 40)
        rates[rng.uniform(size=40) < share] = 0.0
        for t, p in enumerate(rates):
            k = int(rng.binomial(6, p))
            rows.append(dict(agent=agent, task=f"t{t}", method="end_to_end", successes=k, trials=6))
    evidence = pd.DataFrame(rows)
    return evidence, bayes_eval.fit(evidence, MODEL)


def _hyper(posterior, agent):
    draws = posterior.draws
    mu, kappa, share = (
        draws[name].sel(agent=agent).values.ravel() for name in ("mu", "kappa", "never_share")
    )
    return mu * kappa, (1 - mu) * kappa, share


def test_the_share_never_solved_is_found(fitted):
    _, posterior = fitted
    assert posterior.diagnostics.ok
    share = posterior.draws["never_share"]
    low, high = share.quantile([0.025, 0.975], ("chain", "draw")).values
    # a0 never solves about half its tasks, a1 solves every task sometimes
    assert low[0] <= SHARES["a0"] <= high[0]
    assert high[1] < 0.35
    assert share.sel(agent="a0").median() > share.sel(agent="a1").median()


def test_the_log_likelihood_is_the_mixture(fitted):
    evidence, posterior = fitted
    values = posterior.tree["log_likelihood"]["successes"]
    a, b, share = _hyper(posterior, "a0")
    for row in evidence[evidence["agent"] == "a0"].head(12).itertuples():
        pmf = stats.betabinom.pmf(row.successes, row.trials, a[:50], b[:50])
        expected = np.log((1 - share[:50]) * pmf + share[:50] * (row.successes == 0))
        cell = values.sel(cell=f"a0 / {row.task} / end_to_end").values.ravel()[:50]
        np.testing.assert_allclose(cell, expected, rtol=1e-9)


def test_a_task_without_success_is_never_solved_as_often_as_its_posterior_says(fitted):
    evidence, posterior = fitted
    a, b, share = _hyper(posterior, "a0")
    zero = evidence[(evidence["agent"] == "a0") & (evidence["successes"] == 0)]
    p = posterior.draws["p_task"].sel(agent="a0", task=list(zero["task"])).values
    observed = (p.reshape(-1, len(zero)) == 0).mean()
    none = stats.betabinom.pmf(0, 6, a, b)
    expected = np.mean(share / (share + (1 - share) * none))
    assert abs(observed - expected) < 4 * math.sqrt(expected * (1 - expected) / p[..., 0].size)
    solved = evidence[(evidence["agent"] == "a0") & (evidence["successes"] > 0)]
    assert (posterior.draws["p_task"].sel(agent="a0", task=list(solved["task"])) > 0).all()


def test_a_new_task_may_never_be_solved(fitted):
    _, posterior = fitted
    new = posterior.population([1, 10**6]).query("population == 'new task'")
    new = new.set_index(["agent", "attempts"])
    a, b, share = _hyper(posterior, "a0")
    assert new.loc[("a0", 1), "pass_at_mean"] == pytest.approx(np.mean((1 - share) * a / (a + b)))
    # pass@k tends to the share solvable, not to 1: per draw, (1 - share) times the
    # chance that a Beta(a, b) task is solved within k, 1 - B(a, b + k) / B(a, b)
    k = 10**6
    solved_within = -np.expm1(special.betaln(a, b + k) - special.betaln(a, b))
    by_hand = (1 - share) * solved_within
    assert new.loc[("a0", k), "pass_at_mean"] == pytest.approx(np.mean(by_hand), rel=1e-6)
    assert new.loc[("a0", k), "pass_at_upper"] <= np.quantile(1 - share, 0.975)
    assert "never solved" in new.loc[("a0", 1), "provenance"]


def test_clustered_runs_are_refused(tmp_path):
    runs = pd.DataFrame(
        dict(agent="a", task=["t", "t", "u", "u"], success=[0, 1, 0, 0], seed=[1, 1, 2, 2])
    )
    runs.to_csv(tmp_path / "runs.csv", index=False)
    evidence = bayes_eval.read_evidence(tmp_path / "runs.csv", input_format="runs", cluster="seed")
    with pytest.raises(
        InputError, match="never_solvable: tasks never solved are not modelled with clustered runs"
    ):
        bayes_eval.fit(evidence, MODEL)


def test_the_report_warns_that_large_k_bounds_rest_on_the_zeros(fitted):
    from bayes_eval.outputs.deployment import deployment_sections
    from bayes_eval.outputs.drawing import Figures

    _, posterior = fitted
    with Figures(processes=0) as figures:
        sections = deployment_sections(posterior, 0.5, 0.975, figures)
    texts = [payload for kind, payload in sections if kind == "p"]
    assert any(text.startswith("**Tasks never solved.**") for text in texts)
    assert "not conservative" in posterior.population([10])["provenance"].iloc[-1]
