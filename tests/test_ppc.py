"""Posterior predictive checks and the milestone-assumption check."""

import numpy as np
import pandas as pd
from scipy import stats

import bayes_eval
from bayes_eval.ppc import milestone_assumption, predictive_checks


def test_mid_p_value_matches_the_beta_binomial_predictive():
    # end_to_end (uniform prior): k_rep ~ BetaBinomial(n, 1 + k, 1 + n - k) exactly
    frame = pd.DataFrame(
        dict(task=["a", "b"], method="end_to_end", successes=[2, 9], trials=[20, 10])
    )
    posterior = bayes_eval.fit(frame, "end_to_end")
    checks = predictive_checks(posterior).set_index("task")
    for task, k, n in (("a", 2, 20), ("b", 9, 10)):
        truth = stats.betabinom(n, 1 + k, 1 + n - k)
        expected = truth.sf(k) + 0.5 * truth.pmf(k)
        draws = posterior.posterior["p_task"].sel(task=task).values.ravel()
        per_draw = stats.binom.sf(k, n, draws) + 0.5 * stats.binom.pmf(k, n, draws)
        standard_error = per_draw.std() / np.sqrt(draws.size)
        assert abs(checks.loc[task, "p_value"] - expected) < 4 * standard_error
    assert not checks["flagged"].any()


def test_posterior_predictive_group_replicates_every_cell(tmp_path):
    posterior = bayes_eval.fit(bayes_eval.resources.example_evidence())
    replicated = posterior.posterior_predictive["k_rep"]
    checks = predictive_checks(posterior)
    assert replicated.sizes["cell"] == len(checks) > 0
    trials = checks["trials"].to_numpy()
    assert (replicated.values <= trials).all() and (replicated.values >= 0).all()
    loaded = bayes_eval.load_posterior(posterior.to_netcdf(tmp_path / "p.nc"))
    assert loaded.posterior_predictive["k_rep"].equals(replicated)


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
