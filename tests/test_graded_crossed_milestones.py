"""A grader that errs in the crossed milestone model: the graph's blocked mixture through
the grader against its formula at random points, the pointwise log-likelihood against
adaptive quadrature, a real fit (NUTS) on a sparse table of graded and trusted milestone
cells, and simulation-based calibration with the audit as fixed data."""

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats
from test_graded_crossed import marginal_by_quadrature

import bayes_eval
from bayes_eval.errors import InputError

# Four agents, five tasks, two or three milestones a task: one-run cells, zero-success
# milestones, two pairs never run, and a task whose milestones a trusted check scored
# (blank ``grader``) beside those the judge scored.
CELLS = [
    # agent, task, milestone, successes, trials
    ("a", "t0", 1, 1, 1),
    ("a", "t0", 2, 0, 1),
    ("a", "t1", 1, 6, 20),
    ("a", "t1", 2, 2, 20),
    ("a", "t1", 3, 0, 20),
    ("a", "t2", 1, 3, 5),
    ("a", "t2", 2, 1, 5),
    ("a", "t4", 1, 0, 5),
    ("a", "t4", 2, 0, 5),
    ("b", "t0", 1, 12, 20),
    ("b", "t0", 2, 9, 20),
    ("b", "t1", 1, 9, 20),
    ("b", "t1", 2, 5, 20),
    ("b", "t1", 3, 2, 20),
    ("b", "t3", 1, 0, 1),
    ("b", "t3", 2, 0, 1),
    ("b", "t4", 1, 3, 5),
    ("b", "t4", 2, 1, 5),
    ("c", "t0", 1, 4, 5),
    ("c", "t0", 2, 3, 5),
    ("c", "t2", 1, 14, 20),
    ("c", "t2", 2, 8, 20),
    ("c", "t3", 1, 1, 5),
    ("c", "t3", 2, 0, 5),
    ("c", "t4", 1, 1, 1),
    ("c", "t4", 2, 1, 1),
    ("d", "t1", 1, 0, 5),
    ("d", "t1", 2, 0, 5),
    ("d", "t1", 3, 0, 5),
    ("d", "t2", 1, 2, 20),
    ("d", "t2", 2, 0, 20),
    ("d", "t3", 1, 1, 20),
    ("d", "t3", 2, 1, 20),
]
TABLE = pd.DataFrame(CELLS, columns=["agent", "task", "step", "successes", "trials"])
TABLE.insert(2, "method", "milestone")
TABLE["grader"] = np.where(TABLE["task"] == "t4", "", "judge")
# The judge detects 30 of 40 audited successes (a quarter missed) and raises 4 false
# alarms in 200 failures.
AUDIT = pd.DataFrame(
    {"grader": "judge", "truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [30, 10, 196, 4]}
)


def blocked_mixture(k, n, p, graded, se, sp, share):
    """``log((1 - share) prod_m Bin(k_m | n_m, r_m) + share prod_m B_m)`` of one pair's
    milestone counts given its rates ``p``: ``r_m = se p + (1 - sp)(1 - p)`` where the
    judge scored the cell, ``p`` where a trusted check did; were the pair blocked, ``B_m =
    Bin(k_m | n_m, 1 - sp)`` at a graded cell and ``[k_m = 0]`` at a trusted one."""
    rate = np.where(graded, se * p + (1 - sp) * (1 - p), p)
    described = np.prod(stats.binom.pmf(k, n, rate))
    blocked = np.prod(np.where(graded, stats.binom.pmf(k, n, 1 - sp), k == 0))
    with np.errstate(divide="ignore"):  # log 0: a pair that cannot be blocked
        return np.log((1 - share) * described + share * blocked)


def test_the_graph_is_the_blocked_mixture_through_the_grader():
    """The model's likelihood term at five random points of its parameters is the sum
    over pairs of ``blocked_mixture`` (binomial coefficients aside, which the graph
    drops): a pair whose trusted cells failed may be blocked whatever its graded counts."""
    from bayes_eval.crossed.model import build_model, design_of
    from bayes_eval.evidence.audit import with_audit
    from bayes_eval.specs import load_spec

    evidence = with_audit(bayes_eval.load_evidence(TABLE), AUDIT)
    spec = load_spec("crossed_milestones")
    by_pair = {
        pair: {"milestone": rows} for pair, rows in evidence.table.groupby(["agent", "task"])
    }
    design = design_of(by_pair, spec, evidence)
    layout = design.layout
    model = build_model(design, spec)
    names = ("ability", "difficulty", "cell_scale", "cell_z", "sensitivity", "specificity")
    names += ("blocked_share", "k_binomial")
    expressions = model.replace_rvs_by_values([model[name] for name in names])
    values = model.compile_fn(
        expressions, inputs=model.value_vars, point_fn=True, on_unused_input="ignore"
    )
    rng = np.random.default_rng(4)
    start = model.initial_point()
    graded = np.isin(np.arange(layout.k.size), layout.grading.pairs)
    coefficient = np.sum(special.gammaln(layout.n + 1) - special.gammaln(layout.k + 1))
    coefficient -= np.sum(special.gammaln(layout.n - layout.k + 1))
    for _ in range(5):
        point = {name: v + rng.normal(0, 0.7, np.shape(v)) for name, v in start.items()}
        ability, difficulty, scale, z, se, sp, share, term = values(point)
        eta = ability[layout.pair_agent] - difficulty[design.pair_task]
        p = special.expit(eta[layout.cell_pair] + scale * z)
        expected = sum(
            blocked_mixture(
                layout.k[mine], layout.n[mine], p[mine], graded[mine], se[0], sp[0], share
            )
            for mine in (layout.cell_pair == pair for pair in range(len(layout.pairs)))
        )
        assert float(term) == pytest.approx(expected - coefficient, rel=1e-10, abs=1e-9)


@pytest.fixture(scope="module")
def fits():
    """The table fitted with the judge's audit, and with every grader taken as perfect."""
    audited = bayes_eval.fit(TABLE, "crossed_milestones", audit=AUDIT)
    perfect = bayes_eval.fit(TABLE.drop(columns="grader"), "crossed_milestones")
    return audited, perfect


def test_a_judge_that_misses_a_quarter_raises_the_milestone_bounds(fits):
    """With the audit the fit passes its diagnostics, the judge's sensitivity sits where
    the audit puts it (30 of 40: 0.75 within its 99% interval), and every pair the judge
    scored gets a higher bound than with the judge taken as perfect (each milestone's
    rate then a quarter low, and a pair whose graded successes may be false alarms may be
    blocked), the median by a factor above 1.5 (2.9 at the spec's seed); the provenance
    names the milestones the judge scored."""
    audited, perfect = fits
    assert audited.diagnostics.ok, audited.diagnostics.messages
    se = audited.draws["sensitivity"].values.ravel()
    assert np.quantile(se, 0.005) < 0.75 < np.quantile(se, 0.995)
    upper = audited.summary().set_index(["agent", "task"])
    alone = perfect.summary().set_index(["agent", "task"])
    judged = [pair for pair, rows in TABLE.groupby(["agent", "task"]) if rows.grader.iat[0]]
    ratio = upper.loc[judged, "upper"] / alone.loc[judged, "upper"]
    assert (ratio > 1).all() and np.median(ratio) > 1.5, ratio
    assert "m1, m2, m3 graded by judge: sensitivity 0.74" in upper.loc[("a", "t1"), "provenance"]
    assert "graded by" not in upper.loc[("a", "t4"), "provenance"]


def test_the_graded_chance_is_se_p_plus_false_alarms_or_false_alarms_alone(fits):
    """``p_graded_milestone`` at each cell the judge scored, and at no other: in every draw
    ``se p + (1 - sp)(1 - p)`` of the cell's own rate, or ``1 - sp`` where the draw has
    the pair blocked (every run failed, the graded successes false alarms): b / t3's two
    graded failures in one run are blocked in some draws, b / t0's 21 graded successes
    (a false alarm each would take ``(1 - sp)^21``) in none; the predictive checks read
    it for the graded cells."""
    from bayes_eval.results.factors import by_cell
    from bayes_eval.results.predictive import predictive_checks

    audited, _ = fits
    post = audited.draws
    chances, rates = by_cell(post, "p_graded_milestone"), by_cell(post, "p_milestone")
    judged = TABLE[TABLE["grader"] == "judge"]
    labels = [f"{r.agent} / {r.task} / milestone {r.step}" for r in judged.itertuples()]
    assert sorted(chances) == sorted(labels)
    se, sp = (post[name].values[..., 0] for name in ("sensitivity", "specificity"))
    blocked = {}
    for label in labels:
        q, p = chances[label], rates[label]
        through = np.isclose(q, se * p + (1 - sp) * (1 - p), rtol=1e-12)
        blocked[label] = np.isclose(q, 1 - sp, rtol=1e-12) & ~through
        assert (through | blocked[label]).all()
    assert 0.0 < blocked["b / t3 / milestone 1"].mean() < 0.5
    assert not blocked["b / t0 / milestone 1"].any()
    checks = predictive_checks(audited)
    assert len(checks) == len(TABLE) and checks["p_value"].between(0, 1).all()


def test_the_pointwise_likelihood_is_the_integral_of_the_mixture(fits):
    """At one of the fit's draws, each pair's log-likelihood is ``log((1 - share)
    prod_m L_m + share B)``, ``L_m`` each cell's binomial (through the judge where it
    scored) integrated over the cell's departure by adaptive quadrature, ``B`` the
    blocked pair's false alarms (``blocked_mixture``), to 1e-9."""
    audited, _ = fits
    post, values = audited.draws, audited.tree["log_likelihood"]["runs"]
    agents, tasks = list(post["agent"].values), list(post["task"].values)
    rng = np.random.default_rng(2)
    for chain, draw in zip(rng.integers(0, 4, 1), rng.integers(0, 1000, 1), strict=True):
        at = post.isel(chain=chain, draw=draw)
        se, sp = float(at["sensitivity"][0]), float(at["specificity"][0])
        share, scale = float(at["blocked_share"]), float(at["cell_scale"])
        for (agent, task), rows in TABLE.groupby(["agent", "task"]):
            eta = float(at["ability"][agents.index(agent)] - at["difficulty"][tasks.index(task)])
            judged = bool(rows["grader"].iat[0])
            k, n = rows["successes"].to_numpy(), rows["trials"].to_numpy()
            cells = [
                marginal_by_quadrature(eta, scale, ki, ni, *((se, sp) if judged else (1, 1)))
                for ki, ni in zip(k, n, strict=True)
            ]
            blocked = blocked_mixture(k, n, np.zeros(k.size), judged, se, sp, 1.0)
            expected = np.logaddexp(np.log1p(-share) + sum(cells), np.log(share) + blocked)
            got = float(values.sel(pair=f"{agent} / {task}").isel(chain=chain, draw=draw))
            assert got == pytest.approx(expected, abs=1e-9)


def test_the_fit_keeps_each_cells_grader_as_an_exact_product_does(fits):
    """The conjugate group lays the graded cells out as an exact fit's ``graded_factors``
    (count, runs, grader numbered within the pair, the judge's Betas after its audit);
    ArviZ's LOO reads the pairs' log-likelihood; the report's grader section sets each
    graded pair's own runs' exact product through the judge (``mats2024``: uniform per
    milestone) beside the same product taken as perfect, the model's bound before them."""
    import arviz_stats as azs

    from bayes_eval.outputs.grading import grader_table

    audited, _ = fits
    factors = audited.tree["conjugate"]["graded_factors"].sel(agent="a", task="t1").values[0]
    assert factors[:, :3].tolist() == [[6, 20, 0], [2, 20, 0], [0, 20, 0]]
    assert factors[0, 3:].tolist() == [1 + 30, 1 + 10, 1 + 196, 1 + 4]
    assert audited.values("grader")[0, 4] == ""  # a / t4: the trusted check's
    assert np.isfinite(azs.loo(audited.tree).elpd)
    shown = grader_table(audited, audited.summary(), 0.975).set_index(["agent", "task"])
    graded = audited.summary().set_index(["agent", "task"])
    graded = graded[graded["grader"] != ""]
    assert sorted(shown.index) == sorted(graded.index)
    own = bayes_eval.fit(TABLE, "mats2024", audit=AUDIT).summary().set_index(["agent", "task"])
    alone = bayes_eval.fit(TABLE, "mats2024").summary().set_index(["agent", "task"])
    for pair, row in shown.iterrows():
        assert float(row["crossed_milestones upper"]) == pytest.approx(
            graded.loc[pair, "upper"], rel=1e-3
        )
        assert float(row["own runs: upper (0.975)"]) == pytest.approx(
            own.loc[pair, "upper"], rel=1e-3
        )
        assert float(row["grader taken as perfect"]) == pytest.approx(
            alone.loc[pair, "upper"], rel=1e-3
        )
    assert shown.loc[("a", "t1"), "graded"] == "6/20, 2/20, 0/20"


def test_audits_the_crossed_milestone_model_cannot_carry_are_refused():
    """An audited run of the evidence (``run_id``) and an audit scoped to a milestone are
    each refused in one line naming the models that carry them."""
    own = AUDIT.assign(agent="", task="", run_id="")
    own.loc[len(own)] = ("judge", 1, 1, 1, "a", "t0", "r1")
    with pytest.raises(InputError, match="run_id .* not yet by crossed_milestones"):
        bayes_eval.fit(TABLE, "crossed_milestones", audit=own)
    scoped = AUDIT.assign(step=["1", "1", "", ""])
    with pytest.raises(InputError, match="column step: model crossed_milestones gives each"):
        bayes_eval.fit(TABLE, "crossed_milestones", audit=scoped)


def test_sbc_of_the_graded_crossed_milestone_model():
    """Simulation-based calibration with the judge's audit as fixed data, on the sparse
    design above: each simulation draws the judge's rates from their Betas after the
    audit, every other parameter from its prior (a blocked pair's graded successes false
    alarms alone), and the graded counts through the judge. Every rank, the judge's rates
    and the pairs' true rates among them, is uniform."""
    from bayes_eval.checks.sbc import sbc
    from bayes_eval.evidence.audit import with_audit

    evidence = with_audit(bayes_eval.load_evidence(TABLE), AUDIT)
    result = sbc(evidence, "crossed_milestones", simulations=48, draws=99, bins=4, seed=3)
    assert result.passed(), result.p_values.sort_values().head()
    names = {"sensitivity[0]", "specificity[0]", "blocked_share", "p_task[1]"}
    assert names <= set(result.p_values.index)
