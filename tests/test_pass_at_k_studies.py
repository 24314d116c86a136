"""The pass@k studies' own arithmetic: the held-out split, the empirical-Bayes baseline,
the prior variants, and the population truth they are judged against."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_eval.specs import load_spec


def test_the_split_keeps_the_first_runs_as_evidence(tmp_path, load_study):
    study = load_study("pass_at_k")
    runs = pd.DataFrame(
        dict(
            agent=["a"] * 8 + ["a"] * 3 + ["human"] * 8,
            task=["t"] * 8 + ["u"] * 3 + ["t"] * 8,
            success=[1, 0, 0, 0, 0, 0, 0, 0] + [1, 1, 1] + [1] * 8,
        )
    )
    runs.to_csv(tmp_path / "runs.csv", index=False)
    cells, k = study.split(tmp_path / "runs.csv", 8, 2)
    assert k == 6
    assert cells.to_dict("records") == [
        dict(agent="a", task="t", successes=1, trials=2, any=False, all=False)
    ]


def test_the_empirical_bayes_shapes_are_recovered(load_study):
    study = load_study("pass_at_k")
    rng = np.random.default_rng(0)
    rates = rng.beta(0.4, 0.7, size=4000)
    cells = pd.DataFrame(
        dict(agent="a", task=np.arange(4000), successes=rng.binomial(6, rates), trials=6)
    )
    at, every, _ = study.eb_beta_binomial(cells, 1, rng)
    # the first task's posterior Beta(a + s, b + n - s): back out a + b + n from its mean
    s = cells["successes"].to_numpy()
    zero, six = at[s == 0][0], at[s == 6][0]  # a / (a + b + 6) and (a + 6) / (a + b + 6)
    total = 6 / (six - zero)
    a, b = zero * total, total - 6 - zero * total
    assert a == pytest.approx(0.4, rel=0.1) and b == pytest.approx(0.7, rel=0.1)
    np.testing.assert_allclose(at, every)  # k = 1: both are the mean


def test_a_prior_variant_replaces_only_the_named_parameters(load_study):
    study = load_study("pass_at_k")
    spec = study.with_priors("end_to_end_pooled@concentration=0,1.5@mean=0.5,0.5")
    shipped = load_spec("end_to_end_pooled")
    assert spec.priors["concentration"].params == {"mu": 0.0, "sigma": 1.5}
    assert spec.priors["mean"].params == {"alpha": 0.5, "beta": 0.5}
    assert spec.priors["cluster_concentration"] == shipped.priors["cluster_concentration"]


def test_the_zero_inflated_truth_matches_simulation(load_study):
    study = load_study("population_coverage")
    rng = np.random.default_rng(1)
    pop = dict(a=0.6, b=1.2, pi=0.3)
    rates = rng.beta(pop["a"], pop["b"], size=400_000)
    rates[rng.uniform(size=rates.size) < pop["pi"]] = 0.0
    for k in (1, 50, 10_000):
        new = study.truth(pop, rates, k)["new task"]
        simulated = np.mean(-np.expm1(k * np.log1p(-rates)))
        assert new == pytest.approx(simulated, abs=4e-3)
