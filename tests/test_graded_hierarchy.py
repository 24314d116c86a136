"""A grader that errs in the pooled milestone and expert-step models (``hierarchical``,
``ecr_pooled``): the graph's graded cells against their numpy marginal at random points,
the rates drawn back against their exact conditional, a graded cell's pointwise
log-likelihood against adaptive quadrature, real fits (NUTS) on sparse tables of graded
and trusted cells, and simulation-based calibration with the audit as fixed data."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval.counts.grading import graded_log_marginal
from bayes_eval.counts.layout import choose_form, layout_of
from bayes_eval.evidence.audit import with_audit
from bayes_eval.fit import usable_rows
from bayes_eval.pooled.models import hierarchy_model
from bayes_eval.pooled.rates import pooled_rates
from bayes_eval.specs import load_spec

# Three agents, four tasks, two milestones a task: ten-run cells beside one- and
# three-run ones, zero-success milestones, a pair never run, and a task whose milestones
# a trusted check scored (blank ``grader``) beside those the judge scored.
CELLS = [
    # agent, task, milestone, successes, trials
    ("a", "t0", 1, 4, 10),
    ("a", "t0", 2, 1, 10),
    ("a", "t1", 1, 2, 10),
    ("a", "t1", 2, 0, 10),
    ("a", "t2", 1, 1, 1),
    ("a", "t2", 2, 0, 1),
    ("a", "t3", 1, 5, 10),
    ("a", "t3", 2, 2, 10),
    ("b", "t0", 1, 6, 10),
    ("b", "t0", 2, 3, 10),
    ("b", "t1", 1, 3, 10),
    ("b", "t1", 2, 1, 10),
    ("b", "t2", 1, 0, 3),
    ("b", "t2", 2, 0, 3),
    ("b", "t3", 1, 7, 10),
    ("b", "t3", 2, 4, 10),
    ("c", "t0", 1, 1, 10),
    ("c", "t0", 2, 0, 10),
    ("c", "t1", 1, 0, 10),
    ("c", "t1", 2, 0, 10),
    ("c", "t3", 1, 2, 10),
    ("c", "t3", 2, 1, 10),
]
TABLE = pd.DataFrame(CELLS, columns=["agent", "task", "step", "successes", "trials"])
TABLE.insert(2, "method", "milestone")
TABLE["grader"] = np.where(TABLE["task"] == "t3", "", "judge")
# The judge detects 30 of 40 audited successes (a quarter missed) and raises 2 false
# alarms in 500 failures.
AUDIT = pd.DataFrame(
    {"grader": "judge", "truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [30, 10, 498, 2]}
)
# Two agents, three tasks, one or two expert runs of two or three steps: one-trial
# steps, zero-success steps, and runs a trusted check scored beside the judge's.
STEPS = pd.DataFrame(
    [
        # agent, task, run, step, successes, trials, grader
        ("a", "t0", "r1", 1, 8, 10, "judge"),
        ("a", "t0", "r1", 2, 5, 10, "judge"),
        ("a", "t0", "r2", 1, 1, 1, "judge"),
        ("a", "t0", "r2", 2, 0, 1, "judge"),
        ("a", "t1", "r1", 1, 3, 10, "judge"),
        ("a", "t1", "r1", 2, 0, 10, "judge"),
        ("a", "t1", "r1", 3, 0, 10, "judge"),
        ("a", "t2", "r1", 1, 6, 10, ""),
        ("a", "t2", "r1", 2, 4, 10, ""),
        ("b", "t0", "r1", 1, 9, 10, ""),
        ("b", "t0", "r1", 2, 7, 10, ""),
        ("b", "t1", "r1", 1, 6, 10, "judge"),
        ("b", "t1", "r1", 2, 2, 10, "judge"),
        ("b", "t1", "r2", 1, 4, 5, "judge"),
        ("b", "t1", "r2", 2, 1, 5, "judge"),
        ("b", "t2", "r1", 1, 2, 10, "judge"),
        ("b", "t2", "r1", 2, 0, 10, "judge"),
    ],
    columns=["agent", "task", "run", "step", "successes", "trials", "grader"],
)
STEPS.insert(2, "method", "expert_completion")


def graded_layout(table, model):
    spec = load_spec(model)
    evidence = with_audit(bayes_eval.load_evidence(table), AUDIT)
    return layout_of(evidence, usable_rows(evidence, spec), spec), spec


@pytest.mark.parametrize(("table", "model"), [(TABLE, "hierarchical"), (STEPS, "ecr_pooled")])
def test_the_graph_sums_graded_cells_through_the_grader(table, model):
    """At 20 random points the model's cell potential is the sum of each graded cell's
    marginal ``log P(k | a, b, se, sp)`` (``graded_log_marginal``, which
    ``test_graded_pooled`` checks against quadrature) and each trusted cell's
    Beta-Binomial without its binomial coefficient, ``a = mu_task kappa``, to 1e-9."""
    layout, spec = graded_layout(table, model)
    graded = layout.grading.pairs
    trusted = np.setdiff1d(np.arange(layout.k.size), graded)
    assert graded.size and trusted.size
    built = hierarchy_model(layout, spec, choose_form(layout, spec))
    names = ["k_cell", "mu_task", "kappa", "sensitivity", "specificity"]
    outputs = built.replace_rvs_by_values([built[name] for name in names])
    function = built.compile_fn(outputs, inputs=built.value_vars, point_fn=True)
    start = built.initial_point()
    rng = np.random.default_rng(4)
    for _ in range(20):
        point = {name: value + rng.normal(0, 1, np.shape(value)) for name, value in start.items()}
        potential, mu_task, kappa, se, sp = function(point)
        mean = mu_task[layout.cell_pair]
        conc = kappa[layout.pair_agent[layout.cell_pair]]
        a, b = mean * conc, (1 - mean) * conc
        k, n = layout.k[trusted], layout.n[trusted]
        own = stats.betabinom.logpmf(k, n, a[trusted], b[trusted])
        own -= special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
        through = graded_log_marginal(layout.grading, a[graded], b[graded], se, sp)
        assert float(potential) == pytest.approx(own.sum() + through.sum(), rel=1e-9)


def marginal_by_quadrature(k, n, a, b, se, sp):
    """``P(k | a, b, se, sp) = E f(p)``, ``f(p) = Bin(k | n, se p + (1 - sp)(1 - p))``,
    ``p ~ Beta(a, b)``: the line through ``f(0)`` and ``f(1)`` in closed form (its mean
    is ``a / (a + b)``), the rest, which vanishes at both ends, by adaptive quadrature;
    so a shape near 0 (a task mean near 0 puts ``a`` at 1e-10), whose density is all
    but a point mass, costs the quadrature nothing."""

    def f(p):
        return stats.binom.pmf(k, n, se * p + (1 - sp) * (1 - p))

    def rest(p):
        return (f(p) - f(0.0) * (1 - p) - f(1.0) * p) * stats.beta.pdf(p, a, b)

    mean = a / (a + b)
    line = f(0.0) * (1 - mean) + f(1.0) * mean
    return line + integrate.quad(rest, 0, 1, epsabs=1e-15, epsrel=1e-11, limit=400)[0]


def conditional_cdf(k, n, a, b, se, sp):
    """The CDF of ``Beta(p | a, b) Bin(k | n, se p + (1 - sp)(1 - p))``, normalised: each
    step of a fine grid by quadrature, read between its nodes."""

    def density(x):
        return stats.binom.pmf(k, n, se * x + (1 - sp) * (1 - x)) * stats.beta.pdf(x, a, b)

    grid = np.concatenate([[0.0], np.geomspace(1e-7, 1.0, 600)])
    steps = [integrate.quad(density, x0, x1, epsabs=0, epsrel=1e-10)[0] for x0, x1 in
             zip(grid[:-1], grid[1:], strict=True)]  # fmt: skip
    cumulative = np.concatenate([[0.0], np.cumsum(steps)])
    return lambda x: np.interp(x, grid, cumulative / cumulative[-1])


def test_rates_drawn_back_follow_their_exact_conditional():
    """Given fixed task means, concentrations and the judge's rates, a graded milestone's
    rate drawn back follows ``Beta(p | a, b) Bin(k | n, q(p))`` and a trusted one's
    ``Beta(a + k, b + n - k)`` (Kolmogorov-Smirnov); ``p_graded_milestone`` is ``se p + (1
    - sp)(1 - p)`` at the graded cells and NaN at the trusted ones; a pair's ``P`` is the
    product of its milestones' rates."""
    layout, spec = graded_layout(TABLE, "hierarchical")
    draws, se, sp = 20_000, 0.75, 0.98
    mu_task = np.linspace(0.2, 0.6, len(layout.pairs))
    kappa = np.linspace(3.0, 8.0, len(layout.agents))
    by_agent = ("chain", "draw", "agent")
    post = xr.Dataset(
        {
            "mu_task": (("chain", "draw", "pair"), np.tile(mu_task, (1, draws, 1))),
            "kappa": (by_agent, np.tile(kappa, (1, draws, 1))),
            "mu_agent": (by_agent, np.full((1, draws, kappa.size), 0.4)),  # the pairs never run
            "kappa_agent": (by_agent, np.full((1, draws, kappa.size), 5.0)),
            "sensitivity": (("chain", "draw", "grader"), np.full((1, draws, 1), se)),
            "specificity": (("chain", "draw", "grader"), np.full((1, draws, 1), sp)),
        }
    )
    rates = pooled_rates(post, layout, spec, np.random.default_rng(0))
    p, q = rates["p_milestone"][1], rates["p_graded_milestone"][1]
    agents, tasks = layout.agents, layout.tasks
    for cell in range(layout.k.size):
        agent, task = layout.pairs[layout.cell_pair[cell]]
        at = (0, slice(None), agents.index(agent), tasks.index(task), layout.cell_factor[cell] - 1)
        a = mu_task[layout.cell_pair[cell]] * kappa[agents.index(agent)]
        b = kappa[agents.index(agent)] - a
        k, n = layout.k[cell], layout.n[cell]
        if cell in layout.grading.pairs:
            if cell % 4:  # every fourth graded cell's law: the quadrature is slow
                continue
            cdf = conditional_cdf(k, n, a, b, se, sp)
            assert np.allclose(q[at], se * p[at] + (1 - sp) * (1 - p[at]), rtol=1e-12)
        else:
            cdf = stats.beta(a + k, b + n - k).cdf
            assert np.isnan(q[at]).all()
        assert stats.kstest(p[at], cdf).pvalue > 1e-3, (agent, task, cell)
    for agent, task in layout.pairs:
        at = (0, slice(None), agents.index(agent), tasks.index(task))
        product = np.nanprod(p[at], axis=-1)
        assert np.allclose(rates["p_task"][1][at], product, rtol=1e-9)


@pytest.fixture(scope="module")
def fits():
    """The milestone table fitted by ``hierarchical`` with the judge's audit, and without
    (the judge taken as perfect), with half the spec's draws and tuning steps."""
    sampler = {"draws": 1000, "tune": 500}  # 4,000 draws: the tail ESS the gate asks
    audited = bayes_eval.fit(TABLE, "hierarchical", audit=AUDIT, sampler=sampler)
    perfect = bayes_eval.fit(TABLE.drop(columns="grader"), "hierarchical", sampler=sampler)
    return audited, perfect


def test_a_judge_that_misses_a_quarter_raises_the_milestone_bounds(fits):
    """With the audit the fit passes its diagnostics, the judge's sensitivity sits where
    the audit puts it (30 of 40: 0.75 within its 99% interval), and every pair the judge
    scored with a milestone graded without a success gets a higher bound than with the
    judge taken as perfect (each milestone's rate then a quarter low: the median by a
    factor above 1.5, 1.9 at the spec's seed); the provenance names the milestones the
    judge scored, and not the trusted check's."""
    audited, perfect = fits
    assert audited.diagnostics.ok, audited.diagnostics.messages
    se = audited.draws["sensitivity"].values.ravel()
    assert np.quantile(se, 0.005) < 0.75 < np.quantile(se, 0.995)
    upper = audited.summary().set_index(["agent", "task"])
    alone = perfect.summary().set_index(["agent", "task"])
    zero = TABLE[(TABLE["grader"] == "judge") & (TABLE["successes"] == 0)]
    pairs = sorted(set(zip(zero["agent"], zero["task"], strict=True)))
    ratio = upper.loc[pairs, "upper"] / alone.loc[pairs, "upper"]
    assert (ratio > 1).all() and np.median(ratio) > 1.5, ratio
    assert "m1, m2 graded by judge: sensitivity 0.74" in upper.loc[("a", "t1"), "provenance"]
    assert "graded by" not in upper.loc[("a", "t3"), "provenance"]


def test_the_fits_groups_read_the_graded_cells(fits):
    """``p_graded_milestone`` in the posterior and the prior at the judge's cells alone;
    at one of the fit's draws, each graded cell's log-likelihood is the integral over its
    rate of the binomial through the judge (``marginal_by_quadrature``, to 1e-9) and a
    trusted cell's its Beta-Binomial; the predictive checks read every cell, and ArviZ's
    LOO the log-likelihood."""
    import arviz_stats as azs

    from bayes_eval.results.factors import by_cell
    from bayes_eval.results.predictive import predictive_checks

    audited, _ = fits
    tree = audited.tree
    judged = TABLE[TABLE["grader"] == "judge"]
    labels = sorted(f"{r.agent} / {r.task} / milestone {r.step}" for r in judged.itertuples())
    assert sorted(by_cell(audited.draws, "p_graded_milestone")) == labels
    assert sorted(by_cell(tree["prior"].to_dataset(), "p_graded_milestone")) == labels
    values = tree["log_likelihood"]["successes"].isel(chain=1, draw=123)
    at = audited.draws.isel(chain=1, draw=123)
    se, sp = float(at["sensitivity"][0]), float(at["specificity"][0])
    for row in TABLE.itertuples():
        kappa = float(at["kappa"].sel(agent=row.agent))
        mean = float(at["mu_task"].sel(agent=row.agent, task=row.task))
        a, b = mean * kappa, (1 - mean) * kappa
        got = float(values.sel(cell=f"{row.agent} / {row.task} / milestone {row.step}"))
        if row.grader:
            expected = np.log(marginal_by_quadrature(row.successes, row.trials, a, b, se, sp))
        else:
            expected = stats.betabinom.logpmf(row.successes, row.trials, a, b)
        assert got == pytest.approx(expected, abs=1e-9)
    checks = predictive_checks(audited)
    assert len(checks) == len(TABLE) and checks["p_value"].between(0, 1).all()
    assert np.isfinite(azs.loo(tree).elpd)


def test_expert_steps_keep_their_judge_at_their_run_and_step():
    """``ecr_pooled`` on a sparse table of expert runs (one-trial steps, zero-success
    steps, runs a trusted check scored), before and after sampling (the model's term is
    checked above, its sampling through ``hierarchical``'s, the same model over cells):
    the provenance names each run's steps the judge scored, the conjugate group keeps each
    step's grader at its run and step as an exact product does, and ``p_graded_step`` sits
    at the judge's steps alone, in the prior and drawn back, ``se p + (1 - sp)(1 - p)``."""
    from bayes_eval.fit import prior_only
    from bayes_eval.results.factors import by_cell

    evidence = with_audit(bayes_eval.load_evidence(STEPS), AUDIT)
    prior = prior_only(evidence, "ecr_pooled")
    agents, tasks = list(prior.coords["agent"]), list(prior.coords["task"])
    provenance = prior.values("provenance")
    assert (
        "run r1 step 1, run r1 step 2, run r2 step 1, run r2 step 2 graded by judge"
        in (provenance[agents.index("a"), tasks.index("t0")])
    )
    assert "graded by" not in provenance[agents.index("b"), tasks.index("t0")]
    factors = prior.values("graded_factors")[agents.index("b"), tasks.index("t1")]
    assert factors[1, :2, :3].tolist() == [[4, 5, 0], [1, 5, 0]]  # run r2: two steps of three
    assert np.isnan(factors[1, 2]).all()
    assert factors[0, 0, 3:].tolist() == [1 + 30, 1 + 10, 1 + 498, 1 + 2]
    judged = STEPS[STEPS["grader"] == "judge"]
    runs = {("a", "t0"): ["r1", "r2"], ("b", "t1"): ["r1", "r2"]}
    labels = sorted(
        f"{r.agent} / {r.task} / run {runs.get((r.agent, r.task), ['r1']).index(r.run) + 1}, "
        f"step {r.step}"
        for r in judged.itertuples()
    )
    assert sorted(by_cell(prior.prior_groups()["prior"], "p_graded_step")) == labels
    layout, spec = graded_layout(STEPS, "ecr_pooled")
    draws, se, sp = 400, 0.75, 0.98
    post = xr.Dataset(
        {
            "mu_task": (("chain", "draw", "pair"), np.full((1, draws, len(layout.pairs)), 0.6)),
            "kappa": (("chain", "draw", "agent"), np.full((1, draws, 2), 4.0)),
            "sensitivity": (("chain", "draw", "grader"), np.full((1, draws, 1), se)),
            "specificity": (("chain", "draw", "grader"), np.full((1, draws, 1), sp)),
        }
    )
    rates = pooled_rates(post, layout, spec, np.random.default_rng(1))
    p, q = rates["p_step"][1], rates["p_graded_step"][1]
    for cell in range(layout.k.size):
        agent, task = layout.pairs[layout.cell_pair[cell]]
        at = (0, slice(None), agents.index(agent), tasks.index(task))
        at += (layout.cell_run[cell], layout.cell_factor[cell] - 1)
        if cell in layout.grading.pairs:
            assert np.allclose(q[at], se * p[at] + (1 - sp) * (1 - p[at]), rtol=1e-12)
        else:
            assert np.isnan(q[at]).all() and not np.isnan(p[at]).any()
    assert np.isnan(q).sum() == q.size - draws * layout.grading.pairs.size


def test_sbc_of_the_graded_hierarchical_model():
    """Simulation-based calibration with the judge's audit (the milestone table's) as
    fixed data, on a sparse design (two agents of three tasks, two milestones each, 1 to
    10 runs, one task a trusted check scored): each simulation draws the judge's rates
    from their Betas after the audit, every other parameter from its prior, and the
    graded counts through the judge; each fit's model is the design's, compiled once,
    given the terms of the sum over true counts for its own graded counts as data.
    Every rank, the judge's rates and the pairs' true rates among them, is uniform."""
    from bayes_eval.checks.sbc import sbc

    rng = np.random.default_rng(6)
    rows = [
        (f"a{a}", f"t{t}", "milestone", m, 0, int(rng.integers(1, 11)), "" if t == 2 else "judge")
        for a in range(2)
        for t in range(3)
        for m in (1, 2)
    ]
    columns = ["agent", "task", "method", "step", "successes", "trials", "grader"]
    evidence = with_audit(bayes_eval.load_evidence(pd.DataFrame(rows, columns=columns)), AUDIT)
    result = sbc(evidence, "hierarchical", simulations=32, draws=99, bins=4, seed=3)
    assert result.passed(), result.p_values.sort_values().head()
    names = {"sensitivity[0]", "specificity[0]", "mu_agent[0]", "p_task[1]"}
    assert names <= set(result.p_values.index)
