"""The milestone-assumption check: end-to-end runs against the milestones' posterior."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayes_eval
from bayes_eval.checks.assumption import milestone_assumption


def simulate(rng, bypass: float, n_tasks=30):
    rows = []
    for t in range(n_tasks):
        rates = rng.uniform(0.3, 0.7, 3)
        q = float(np.prod(rates))
        p_task = q + (1 - q) * bypass
        for step, p in enumerate(rates, start=1):
            rows.append(
                dict(
                    task=f"t{t}",
                    method="milestone",
                    step=step,
                    successes=rng.binomial(100, p),
                    trials=100,
                )
            )
        rows.append(
            dict(task=f"t{t}", method="end_to_end", successes=rng.binomial(100, p_task), trials=100)
        )
    return bayes_eval.load_evidence(pd.DataFrame(rows))


def test_milestone_assumption_detects_bypass_paths_and_spares_honest_milestones():
    rng = np.random.default_rng(9)
    honest = milestone_assumption(simulate(rng, bypass=0.0))
    assert honest["contradicted"].mean() <= 0.1  # alpha = 0.01 per task, plus model noise
    bypassed = milestone_assumption(simulate(rng, bypass=0.3))
    assert bypassed["contradicted"].mean() >= 0.8
    assert bypassed["message"].str.contains("paths the milestones do not describe").any()


def beta_binomial_tail(k, n, a, b):
    """``P(Y >= k)``, ``Y ~ BetaBinomial(n, a, b)``, as scipy's probabilities added up."""
    return stats.betabinom.pmf(np.arange(k, n + 1), n, a, b).sum()


def test_the_p_value_is_the_exact_predictive_tail_of_the_milestone_product():
    """Under the uniform prior, milestones 3/5 give ``Beta(4, 3)``; 3/5 then 6/8 give
    ``Beta(4, 3) * Beta(7, 3)``, which is ``Beta(4, 6)``: each p-value is a beta-binomial
    tail. A pair of 2,100 end-to-end trials is past the exact chain's limit and is answered
    from 4,000 draws, within five of their standard errors."""
    rows = [
        dict(task="one", method="milestone", step=1, successes=3, trials=5),
        dict(task="one", method="end_to_end", successes=2, trials=10),
        dict(task="two", method="milestone", step=1, successes=3, trials=5),
        dict(task="two", method="milestone", step=2, successes=6, trials=8),
        dict(task="two", method="end_to_end", successes=9, trials=12),
        dict(task="wide", method="milestone", step=1, successes=0, trials=40),
        dict(task="wide", method="end_to_end", successes=60, trials=2100),
    ]
    table = milestone_assumption(bayes_eval.load_evidence(pd.DataFrame(rows))).set_index("task")
    assert table.loc["one", "p_value"] == pytest.approx(beta_binomial_tail(2, 10, 4, 3), rel=1e-12)
    assert table.loc["two", "p_value"] == pytest.approx(beta_binomial_tail(9, 12, 4, 6), rel=1e-12)
    exact = beta_binomial_tail(60, 2100, 1, 41)
    error = np.sqrt(exact * (1 - exact) / 4000)
    assert abs(table.loc["wide", "p_value"] - exact) < 5 * error
