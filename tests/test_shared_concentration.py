"""``end_to_end_shared``: the agents' concentrations drawn around one they share, and a
sparse share of tasks never solved. Its prior draws against the stated hierarchy, the
spread learnt from every agent's tasks on a simulated U-shaped table (known truth), one
run per task fitted at the defaults, and what the report says of its spread and its
tasks never solved."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayes_eval
from bayes_eval.specs import load_spec

MODEL = "end_to_end_shared"
KAPPA = 0.6  # U-shaped: Beta(mu 0.6, (1 - mu) 0.6) for every agent
MEANS = (0.15, 0.3, 0.45, 0.6, 0.75)


def table(runs: int, seed: int, tasks: int = 24) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for a, mu in enumerate(MEANS):
        rates = rng.beta(mu * KAPPA, (1 - mu) * KAPPA, tasks)
        for t, p in enumerate(rates):
            k = int(rng.binomial(runs, p))
            rows.append(
                dict(agent=f"a{a}", task=f"t{t}", method="end_to_end", successes=k, trials=runs)
            )
    # an agent that never succeeds: no success in any run of its 8 tasks
    rows += [
        dict(agent="zero", task=f"t{t}", method="end_to_end", successes=0, trials=runs)
        for t in range(8)
    ]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def two_runs():
    evidence = table(runs=2, seed=5)
    return bayes_eval.fit(evidence, MODEL), bayes_eval.fit(evidence, "end_to_end_pooled")


def test_the_prior_group_draws_the_hierarchy(two_runs):
    shared, _ = two_runs
    prior = shared.tree["prior"].to_dataset()
    spec = load_spec(MODEL)
    roles = {"kappa_population": "concentration", "kappa_scale": "concentration_scale"}
    for name, role in roles.items():
        params = spec.priors[role].params
        values = np.log(prior[name].values.ravel())
        assert stats.kstest(values, stats.norm(params["mu"], params["sigma"]).cdf).pvalue > 0.01
    for name, role in (("never_share_if_any", "never_solvable"), ("all_solvable", "all_solvable")):
        values, params = prior[name].values.ravel(), spec.priors[role].params
        assert stats.kstest(values, stats.beta(params["alpha"], params["beta"]).cdf).pvalue > 0.01
    chance = prior["all_solvable"].values.ravel()
    # each agent has tasks it never solves with chance 1 - all_solvable, their share then
    # never_share_if_any
    some = prior["any_never_solved"]
    np.testing.assert_array_equal(prior["never_share"], prior["never_share_if_any"] * some)
    expected = 1.0 - chance.mean()
    assert abs(float(some.mean()) - expected) < 4 * np.sqrt(expected * (1 - expected) / some.size)
    z = (np.log(prior["kappa"]) - np.log(prior["kappa_population"])) / prior["kappa_scale"]
    assert stats.kstest(z.values.ravel(), stats.norm().cdf).pvalue > 0.01


def test_the_spread_is_learnt_from_every_agent(two_runs):
    shared, pooled = two_runs
    assert shared.diagnostics.ok and pooled.diagnostics.ok
    low, high = shared.draws["kappa_population"].quantile([0.025, 0.975]).values
    assert low < KAPPA < high
    # each agent's concentration is known better than from its own tasks alone
    for agent in [f"a{a}" for a in range(len(MEANS))] + ["zero"]:

        def width(posterior, agent=agent):
            q = np.log(posterior.draws["kappa"].sel(agent=agent).quantile([0.05, 0.95]).values)
            return q[1] - q[0]

        assert width(shared) < width(pooled), agent


def test_an_agent_never_successful_gets_a_small_pass_at_k(two_runs):
    shared, pooled = two_runs
    zero = {
        name: posterior.attempts([6]).query("agent == 'zero'")
        for name, posterior in (("shared", shared), ("pooled", pooled))
    }
    # the U-shaped spread learnt from the other agents says a task never solved in 2 runs
    # is mostly one never solved in 6 more
    assert (zero["shared"]["pass_at_mean"] < zero["pooled"]["pass_at_mean"]).all()
    assert (zero["shared"]["pass_at_mean"] < 0.1).all()
    assert (zero["shared"]["pass_at_upper"] > zero["shared"]["pass_at_mean"]).all()


def test_whether_an_agent_has_tasks_never_solved_is_drawn_from_its_conditional(two_runs):
    """Per draw, P(the agent has tasks it never solves) = (1 - c) L_share / (c L_beta + (1
    - c) L_share), each L the product over its tasks of scipy's Beta-Binomial (with the
    share: pi 1[k = 0] + (1 - pi) BB(k)); the draws' share of 1s against its mean."""
    shared, _ = two_runs
    evidence = table(runs=2, seed=5)
    draws = shared.draws
    for agent in ("a1", "zero"):
        rows = evidence[evidence["agent"] == agent]
        mu, kappa, share = (
            draws[name].sel(agent=agent).values.ravel()[:, None]
            for name in ("mu", "kappa", "never_share_if_any")
        )
        c = draws["all_solvable"].values.ravel()
        k, n = rows["successes"].to_numpy(), rows["trials"].to_numpy()
        pmf = stats.betabinom.pmf(k, n, mu * kappa, (1 - mu) * kappa)
        log_beta = np.log(pmf).sum(axis=1)
        log_share = np.log(share * (k == 0) + (1 - share) * pmf).sum(axis=1)
        some = np.log1p(-c) + log_share
        expected = np.exp(some - np.logaddexp(some, np.log(c) + log_beta)).mean()
        drawn = draws["any_never_solved"].sel(agent=agent).values.ravel()
        assert set(np.unique(drawn)) <= {0.0, 1.0}
        assert abs(drawn.mean() - expected) < 4 * np.sqrt(expected * (1 - expected) / drawn.size)
        np.testing.assert_array_equal(
            draws["never_share"].sel(agent=agent).values.ravel(), share.ravel() * drawn
        )


@pytest.mark.slow  # a report of the shared fit, about a minute
def test_the_report_gives_each_agents_chance_of_tasks_never_solved(two_runs):
    from bayes_eval.outputs.deployment import deployment_sections
    from bayes_eval.outputs.drawing import Figures

    shared, _ = two_runs
    with Figures(processes=0) as figures:
        sections = deployment_sections(shared, 0.5, 0.975, figures)
    text = next(t for kind, t in sections if str(t).startswith("**Tasks never solved.**"))
    for agent in ("a0", "zero"):
        chance = float(shared.draws["any_never_solved"].sel(agent=agent).mean())
        assert f"{agent} {chance:.2f}" in text


def test_an_agent_that_solves_every_task_sometimes_is_told_from_one_that_does_not():
    """Known truth: one agent's tasks are all solvable (rates Beta(1.5, 1.5)), the other
    never solves half of its; 10 runs per task."""
    rng = np.random.default_rng(31)
    rows = []
    for agent, never in (("every", 0.0), ("half", 0.5)):
        rates = rng.beta(1.5, 1.5, 30)
        rates[rng.uniform(size=30) < never] = 0.0
        rows += [
            dict(agent=agent, task=f"t{t}", method="end_to_end", successes=k, trials=10)
            for t, k in enumerate(rng.binomial(10, rates))
        ]
    posterior = bayes_eval.fit(pd.DataFrame(rows), MODEL)
    assert posterior.diagnostics.ok, posterior.diagnostics.messages
    # the posterior favours the truth for each agent (a Beta with a small first shape also
    # explains many tasks without a success, so neither is certain from 10 runs a task)
    some = posterior.draws["any_never_solved"].mean(("chain", "draw"))
    assert some.sel(agent="half") > 0.5 > some.sel(agent="every")
    low, high = posterior.draws["never_share"].sel(agent="half").quantile([0.025, 0.975]).values
    assert low < 0.5 < high


def test_the_plan_weighs_tasks_perhaps_never_solved(two_runs):
    from bayes_eval.allocation import HYPER_DRAWS, allocate

    shared, _ = two_runs
    plan = allocate(shared, 10, 20, agent="zero")
    assert plan["runs"].sum() == 20
    # every task of the agent is 0 of 2: its pass@10 as the fit's own task draws give it
    # (drawn back with the share never solved), within the Monte Carlo error of the
    # plan's HYPER_DRAWS population draws (each averages a part of pass@k, whose sd is
    # at most pass@k's own)
    draws = shared.attempts([10]).query("agent == 'zero'")
    error = plan["pass_at_sd"].to_numpy() / np.sqrt(HYPER_DRAWS)
    gap = np.abs(plan["pass_at_mean"].to_numpy() - draws["pass_at_mean"].to_numpy())
    assert (gap < 4 * error).all()


def spread_warning(posterior) -> str | None:
    """The report's paragraph saying the spread of task rates is the prior's, if any
    (``deployment_sections`` adds it as it is: the one-run test checks)."""
    from bayes_eval.outputs.deployment import _spread_of_the_prior

    return _spread_of_the_prior(posterior)


# about 2 minutes at the default sampler; the model keeps its small real-MCMC check
# (tests/test_sbc.py)
@pytest.mark.slow
def test_one_run_per_task_passes_its_diagnostics_at_the_defaults():
    posterior = bayes_eval.fit(table(runs=1, seed=6), MODEL)
    assert posterior.diagnostics.ok, posterior.diagnostics.messages
    new = posterior.population([10]).query("population == 'new task'")
    assert len(new) == len(MEANS) + 1 and new["pass_at_mean"].between(0, 1).all()
    from bayes_eval.outputs.deployment import deployment_sections
    from bayes_eval.outputs.drawing import Figures

    with Figures(processes=0) as figures:
        sections = deployment_sections(posterior, 0.5, 0.975, figures)
    assert ("p", spread_warning(posterior)) in sections
    assert "For every agent, each task ran once at most" in spread_warning(posterior)


# two fits of its own; the model keeps its small real-MCMC check (tests/test_sbc.py)
@pytest.mark.slow
def test_the_report_names_the_agents_whose_spread_is_the_priors(two_runs):
    shared, _ = two_runs
    assert spread_warning(shared) is None
    # the priors its bounds at large k rest on are named, without the caution that a
    # uniform share without the chance of none earns (docs/attempts.md measures both)
    provenance = shared.population([10])["provenance"].iloc[-1]
    assert "the bounds rest on the prior of that share, Beta(1, 1)" in provenance
    assert "the chance that an agent has no such task at all, Beta(1, 1)" in provenance
    assert "not conservative" not in provenance
    once = table(runs=1, seed=7).query("agent in ['a0', 'a1']")
    twice = table(runs=3, seed=8).query("agent in ['a2']")
    mixed, small = pd.concat([once, twice]), {"draws": 300, "tune": 300, "chains": 2}
    pooled = bayes_eval.fit(mixed, "end_to_end_pooled", sampler=small)
    text = spread_warning(pooled)
    assert "For agents a0, a1, each task ran once at most" in text
    assert "end_to_end_shared learns the spread" in text
    # shared across agents, a2's runs tell the spread for all three
    assert spread_warning(bayes_eval.fit(mixed, MODEL, sampler=small)) is None
