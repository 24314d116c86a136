"""A grader that errs in the pooled end-to-end model: the graded count's marginal against
quadrature, the model's graph against its numpy form at random points, the rates drawn
back against their exact conditional, and a real fit (NUTS) on a table whose grader is
known."""

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval.counts.grading import draw_graded, graded_log_marginal, grading_of
from bayes_eval.counts.layout import choose_form, layout_of
from bayes_eval.evidence.audit import with_audit
from bayes_eval.fit import check_graded, usable_rows
from bayes_eval.pooled.models import end_to_end_model
from bayes_eval.specs import load_spec

# One agent, eight tasks: graded successes of the runs, an audit of a judge that detects
# 30 of 40 audited successes (a quarter missed) and raises 2 false alarms in 200 failures.
TABLE = pd.DataFrame(
    {
        "agent": "a",
        "task": [f"t{i}" for i in range(8)],
        "method": "end_to_end",
        "successes": [3, 0, 5, 1, 0, 2, 8, 0],
        "trials": [40, 40, 40, 40, 20, 40, 40, 10],
    }
)
AUDIT = pd.DataFrame({"truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [30, 10, 198, 2]})
# Ten of t0's 40 runs scored again (``run_id``): its 3 graded successes (two true, one a
# false alarm) and 7 graded failures (one a missed success): 3 true successes in 10, and
# none of its other 30 runs graded a success.
OWN = pd.DataFrame(
    {
        "truth": [1, 1, 0, 1] + [0] * 6,
        "graded": [1, 1, 1] + [0] * 7,
        "runs": 1,
        "task": "t0",
        "run_id": [f"r{n}" for n in range(10)],
    }
)
AUDITED = pd.concat([AUDIT, OWN], ignore_index=True)


def graded_layout(table=TABLE, audit=AUDIT):
    spec = load_spec("end_to_end_pooled")
    evidence = with_audit(bayes_eval.load_evidence(table), audit)
    return layout_of(evidence, usable_rows(evidence, spec), spec), spec


def marginal_by_quadrature(k, n, a, b, se, sp, own=(0, 0)):
    """``P(k | a, b, se, sp) = int Bin(k | n, se p + (1 - sp)(1 - p)) Beta(p | a, b) dp``,
    times ``Bin(u | m, p)`` in the integrand where ``own`` is ``(m, u)``: ``u`` true
    successes in ``m`` runs the audit scored again."""

    def integrand(p):
        q = se * p + (1 - sp) * (1 - p)
        return (
            stats.binom.pmf(k, n, q) * stats.binom.pmf(own[1], own[0], p) * stats.beta.pdf(p, a, b)
        )

    return integrate.quad(integrand, 0, 1, epsabs=0, epsrel=1e-11, limit=400, points=[k / n])[0]


def conditional_cdf(density, nodes=2000):
    """The CDF of ``density`` (unnormalised, on ``[0, 1]``) on a fine grid, each step's
    mass by quadrature, read between its nodes."""
    grid = np.concatenate([[0.0], np.geomspace(1e-7, 1.0, nodes)])
    steps = [integrate.quad(density, x0, x1, epsabs=0, epsrel=1e-10)[0] for x0, x1 in
             zip(grid[:-1], grid[1:], strict=True)]  # fmt: skip
    cumulative = np.concatenate([[0.0], np.cumsum(steps)])
    cumulative /= cumulative[-1]
    return lambda x: np.interp(x, grid, cumulative)


@pytest.mark.parametrize(
    ("k", "n", "a", "b", "se", "sp"),
    [(3, 40, 0.8, 9.0, 0.75, 0.99), (0, 40, 0.3, 12.0, 0.9, 0.995), (12, 20, 2.0, 3.0, 0.6, 0.8)],
)
def test_the_graded_marginal_is_the_integral_over_p(k, n, a, b, se, sp):
    table = pd.DataFrame({"task": ["t"], "method": ["end_to_end"], "successes": [k], "trials": [n]})
    layout, _ = graded_layout(table)
    value = graded_log_marginal(layout.grading, [a], [b], [se], [sp])
    assert value[0] == pytest.approx(np.log(marginal_by_quadrature(k, n, a, b, se, sp)), rel=1e-9)
    # a probability over k: the terms for every graded count sum to one
    total = 0.0
    for count in range(n + 1):
        one, _ = graded_layout(table.assign(successes=[count]))
        total += np.exp(graded_log_marginal(one.grading, [a], [b], [se], [sp])[0])
    assert total == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("audit", [AUDIT, AUDITED], ids=["audit", "own runs audited"])
def test_the_models_graph_is_its_numpy_form_at_random_points(audit):
    """The model's potential at 20 random points equals the sum over pairs of the numpy
    marginal (``graded_log_marginal``), to 1e-9 relative; with t0's runs the audit scored
    again too (their truth in place of their grade)."""
    layout, spec = graded_layout(audit=audit)
    model = end_to_end_model(layout, spec, choose_form(layout, spec))
    (expression,) = model.replace_rvs_by_values([model["k_end_to_end"]])
    potential = model.compile_fn(expression, inputs=model.value_vars, point_fn=True)
    rng = np.random.default_rng(3)
    for _ in range(20):
        point = {
            "mu_logit": rng.normal(-2, 1, 1),
            "kappa_log__": rng.normal(2, 1, 1),
            "sensitivity_logodds__": rng.normal(1, 1, 1),
            "specificity_logodds__": rng.normal(4, 1, 1),
        }
        mu, kappa = special.expit(point["mu_logit"]), np.exp(point["kappa_log__"])
        se = special.expit(point["sensitivity_logodds__"])
        sp = special.expit(point["specificity_logodds__"])
        a, b = np.repeat(mu * kappa, 8), np.repeat((1 - mu) * kappa, 8)
        expected = graded_log_marginal(layout.grading, a, b, se, sp).sum()
        assert float(potential(point)) == pytest.approx(expected, rel=1e-9)


def test_rates_drawn_back_follow_their_exact_conditional():
    """Given fixed ``a, b, se, sp``, the rates drawn back for a graded pair follow
    ``Beta(p | a, b) Bin(k | n, q(p))``, normalised by quadrature (Kolmogorov-Smirnov)."""
    layout, _ = graded_layout()
    a, b, se, sp = 0.8, 9.0, 0.75, 0.99
    draws = 20_000
    p, q = draw_graded(
        layout.grading,
        np.full((draws, 8), a),
        np.full((draws, 8), b),
        np.full((draws, 1), se),
        np.full((draws, 1), sp),
        np.random.default_rng(0),
    )
    assert np.allclose(q, se * p + (1 - sp) * (1 - p))
    for pair in (0, 1):  # 3 of 40 graded, and none of 40
        k, n = layout.e2e_k[pair], layout.e2e_n[pair]

        def density(x, k=k, n=n):
            return stats.binom.pmf(k, n, se * x + (1 - sp) * (1 - x)) * stats.beta.pdf(x, a, b)

        assert stats.kstest(p[:, pair], conditional_cdf(density)).pvalue > 1e-3


def test_runs_the_audit_scored_again_put_their_truth_in_place_of_their_grade():
    """t0's ten runs scored again (``OWN``): its graded count is that of its other 30
    runs (none), its ten runs' 3 true successes multiply the marginal by ``Bin(3 | 10,
    p)`` (against quadrature, 1e-9), and its rate drawn back follows ``Beta(p | a, b) Bin(3
    | 10, p) Bin(0 | 30, q(p))`` (Kolmogorov-Smirnov); the audit's counts hold the ten
    runs' grades (detected 32 of 43, false alarms 3 of 207)."""
    layout, _ = graded_layout(audit=AUDITED)
    grading = layout.grading
    g = list(grading.pairs).index(0)
    assert list(grading.trusted[g]) == [10, 3, 3]
    assert (grading.runs[g], grading.graded[g]) == (30, 0)
    assert [list(c) for c in grading.audit_counts()] == [[32], [43], [204], [207]]
    a, b, se, sp = 0.8, 9.0, 0.75, 0.99
    value = graded_log_marginal(grading, np.full(8, a), np.full(8, b), [se], [sp])[g]
    expected = marginal_by_quadrature(0, 30, a, b, se, sp, own=(10, 3))
    assert value == pytest.approx(np.log(expected), rel=1e-9)
    draws = 20_000
    p, _ = draw_graded(
        grading,
        np.full((draws, 8), a),
        np.full((draws, 8), b),
        np.full((draws, 1), se),
        np.full((draws, 1), sp),
        np.random.default_rng(1),
    )

    def density(x):
        q = se * x + (1 - sp) * (1 - x)
        return stats.binom.pmf(0, 30, q) * stats.binom.pmf(3, 10, x) * stats.beta.pdf(x, a, b)

    assert stats.kstest(p[:, g], conditional_cdf(density, nodes=400)).pvalue > 1e-3


def test_scoped_audit_rows_and_audited_cells_are_refused():
    spec = load_spec("end_to_end_pooled")
    evidence = with_audit(bayes_eval.load_evidence(TABLE), AUDIT.assign(task=["t1", "", "", ""]))
    with pytest.raises(bayes_eval.InputError, match="row 2, column task: model end_to_end_pooled"):
        grading_of(evidence, [("a", "t0")], np.array([3]), np.array([40]), spec)
    with pytest.raises(bayes_eval.InputError, match="model end_to_end_zero_inflated"):
        bayes_eval.fit(TABLE, "end_to_end_zero_inflated", audit=AUDIT)
    evidence = with_audit(bayes_eval.load_evidence(TABLE), AUDITED)
    with pytest.raises(bayes_eval.InputError, match="end_to_end_pooled and crossed, not yet by"):
        check_graded(evidence, load_spec("hierarchical"))


def test_sbc_of_the_graded_pooled_model():
    """Simulation-based calibration with the judge's audit as fixed data: each
    simulation draws the judge's rates from their Betas after the audit, the agents'
    parameters from their priors, and the graded counts through the judge, on a sparse
    design (two agents of six tasks, 1 to 30 runs, a third of the pairs scored by a
    trusted check); each fit's model is the design's, compiled once, given the terms of
    the sum over true counts for its own graded counts as data. Every rank, the judge's
    rates and the pairs' true rates among them, is uniform."""
    from bayes_eval.checks.sbc import sbc

    rng = np.random.default_rng(5)
    rows = [
        (f"a{a}", f"t{t}", "end_to_end", 0, int(rng.integers(1, 31)), "" if t % 3 == 0 else "judge")
        for a in range(2)
        for t in range(6)
    ]
    columns = ["agent", "task", "method", "successes", "trials", "grader"]
    table = bayes_eval.load_evidence(pd.DataFrame(rows, columns=columns))
    evidence = with_audit(table, AUDIT.assign(grader="judge"))
    result = sbc(evidence, "end_to_end_pooled", simulations=32, draws=99, bins=4, seed=3)
    assert result.passed(), result.p_values.sort_values().head()
    assert {"sensitivity[0]", "specificity[0]", "mu[0]", "p_task[1]"} <= set(result.p_values.index)


def test_the_graph_does_not_depend_on_the_graded_counts():
    """The model built for other graded counts has the design's structure key (every
    operation, its connections, the data's types and the constants' values: the same C),
    so that SBC compiles the design's model once and gives each simulation's terms of the
    sum over true counts as data."""
    from bayes_eval.counts.layout import choose_form
    from bayes_eval.families.simulation import with_graded_counts
    from bayes_eval.inference.nutpie_model import _graphs, structure_key
    from bayes_eval.pooled.models import end_to_end_model

    layout, spec = graded_layout()
    form = choose_form(layout, spec)

    def key(layout):
        model = end_to_end_model(layout, spec, form)
        return structure_key(model, *_graphs(model))

    design = key(layout)
    rng = np.random.default_rng(4)
    for _ in range(3):
        k = rng.binomial(layout.e2e_n, rng.uniform(size=layout.e2e_n.size))
        simulated = with_graded_counts(layout, {"k_obs": k, "k_obs_failures": layout.e2e_n - k})
        assert not np.array_equal(simulated.grading.graded, layout.grading.graded)
        assert key(simulated) == design


@pytest.fixture(scope="module")
def fits():
    """The table fitted with the judge's audit (t0's ten runs scored again among it), and
    without (the judge taken as perfect)."""
    return bayes_eval.fit(TABLE, "end_to_end_pooled", audit=AUDITED), bayes_eval.fit(
        TABLE, "end_to_end_pooled"
    )


def test_a_judge_that_misses_a_quarter_raises_the_zero_success_bounds(fits):
    """With the audit, the sensitivity's posterior sits where the audit puts it (32 of
    43, within its 99% interval of the truth 0.75), the fit passes its diagnostics, and
    each zero-success cell's bound rises above the one that takes the judge as perfect:
    a quarter of its successes could have gone unseen."""
    audited, perfect = fits
    assert audited.diagnostics.ok, audited.diagnostics.messages
    se = audited.draws["sensitivity"].values.ravel()
    assert np.quantile(se, 0.005) < 0.75 < np.quantile(se, 0.995)
    upper = audited.summary().set_index("task")["upper"]
    alone = perfect.summary().set_index("task")["upper"]
    for task in ("t1", "t4", "t7"):
        assert upper[task] > alone[task]
    provenance = audited.summary().set_index("task").loc["t1", "provenance"]
    # Beta(1 + 32, 1 + 11): mean 0.733, central 95% 0.597 to 0.850 (scipy)
    assert "graded by grader: sensitivity 0.73 (0.60-0.85)" in provenance


def test_the_audited_fits_groups_read_the_graded_counts(fits):
    """``p_graded`` in the posterior and the prior, the log-likelihood of every graded
    count finite, and a predictive check of each."""
    audited, _ = fits
    tree = audited.tree
    assert "p_graded" in tree["posterior"] and "p_graded" in tree["prior"]
    assert np.isfinite(tree["log_likelihood"]["successes"].values).all()
    checks = bayes_eval.results.predictive.predictive_checks(audited)
    assert sorted(checks["task"]) == sorted(TABLE["task"])
    assert (checks["replicated_rate"] > 0).all()


def test_a_graded_pairs_own_runs_carry_their_grader(fits):
    """What carries a pooled verdict: a graded pair's own runs' bound is the exact model's
    (uniform prior, the judge's audit), the integral over ``p``, ``se`` and ``sp`` that
    ``tests/test_grader.py`` checks, t0's with its ten runs audited again (named in its
    provenance); the grader is kept in the fit's ``conjugate`` group."""
    audited, _ = fits
    summary = audited.summary().set_index("task")
    own = "10 of its runs audited (3 true successes, 3 graded)"
    assert own in summary.loc["t0", "provenance"]
    assert own not in summary.loc["t1", "provenance"]
    exact = bayes_eval.fit(TABLE, "end_to_end", audit=AUDITED).summary().set_index("task")
    for task in TABLE["task"]:
        assert summary.loc[task, "own_upper"] == pytest.approx(exact.loc[task, "upper"], rel=1e-9)
        assert summary.loc[task, "own_lower"] == pytest.approx(exact.loc[task, "lower"], rel=1e-9)
    assert summary["worth_runs"].isna().all()
    assert set(audited.values("grader").ravel()) == {"grader"}


def test_a_sparse_table_of_graded_and_trusted_pairs_fits():
    """One-run cells, zero-success rows and pairs a trusted grader scored (blank
    ``grader``) beside the judge's: the fit passes its diagnostics, the trusted pairs'
    log-likelihood is their Beta-Binomial (the graded pairs' through the grader), and the
    graded pairs' own bounds carry the judge."""
    table = pd.DataFrame(
        {
            "agent": "a",
            "task": [f"t{i}" for i in range(6)],
            "method": "end_to_end",
            "successes": [0, 0, 1, 0, 0, 2],
            "trials": [1, 1, 1, 3, 20, 2],
            "grader": ["grader", "", "grader", "", "grader", ""],
        }
    )
    fit = bayes_eval.fit(table, "end_to_end_pooled", audit=AUDIT)
    assert fit.diagnostics.ok, fit.diagnostics.messages
    post = fit.draws
    values = fit.tree["log_likelihood"]["successes"].values
    mu, kappa = post["mu"].values[..., 0], post["kappa"].values[..., 0]
    for cell in (1, 3, 5):  # trusted: BetaBinomial(k | n, mu kappa, (1 - mu) kappa)
        k, n = table["successes"][cell], table["trials"][cell]
        expected = stats.betabinom.logpmf(k, n, mu * kappa, (1 - mu) * kappa)
        assert np.allclose(values[..., cell], expected, rtol=1e-9)
    summary = fit.summary().set_index("task")
    exact = bayes_eval.fit(table, "end_to_end", audit=AUDIT).summary().set_index("task")
    for task in ("t0", "t2", "t4"):
        assert summary.loc[task, "own_upper"] == pytest.approx(exact.loc[task, "upper"], rel=1e-9)


def test_the_graders_rates_start_where_the_audit_puts_them():
    """``(p, se, sp)`` and ``(1 - p, 1 - sp, 1 - se)`` give the same graded counts; chains
    that start at se = sp = 1/2 took the mirror on METR's runs. The model's initial point
    is the audit's posterior means: sensitivity 31/42, specificity 199/202."""
    layout, spec = graded_layout()
    model = end_to_end_model(layout, spec, choose_form(layout, spec))
    start = model.initial_point()
    assert special.expit(start["sensitivity_logodds__"]) == pytest.approx([31 / 42])
    assert special.expit(start["specificity_logodds__"]) == pytest.approx([199 / 202])
