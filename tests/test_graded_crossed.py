"""A grader that errs in the crossed model: the graded count's likelihood with the
departure integrated out against adaptive quadrature, and a real fit (NUTS) on a sparse
table of graded and trusted pairs whose judge misses a quarter of the successes."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval.crossed.likelihood import log_marginal, log_marginal_graded

# Two agents, six tasks: one-run cells, zero-success rows, and pairs a trusted check
# scored (blank ``grader``) beside those the judge scored; the judge detects 30 of 40
# audited successes (a quarter missed) and raises 2 false alarms in 200 failures.
TABLE = pd.DataFrame(
    {
        "agent": ["a"] * 6 + ["b"] * 6,
        "task": [f"t{i}" for i in range(6)] * 2,
        "method": "end_to_end",
        "successes": [6, 2, 0, 1, 0, 1, 3, 0, 0, 0, 0, 1],
        "trials": [30, 30, 30, 1, 20, 3, 30, 30, 30, 1, 20, 3],
        "grader": ["judge", "judge", "judge", "judge", "", ""] * 2,
    }
)
AUDIT = pd.DataFrame(
    {"grader": "judge", "truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [30, 10, 198, 2]}
)


def marginal_by_quadrature(eta, scale, k, n, se, sp, trusted=(0, 0)):
    """``log int Bin(k | n, se P + (1 - sp)(1 - P)) Bin(t | m, P) phi(e) de``, ``P =
    expit(eta + s e)`` and ``(m, t)`` the ``trusted`` runs, by scipy's adaptive quadrature
    on pieces of [-12, 12]."""
    m, t = trusted
    # the binomial and normal densities written out (scipy.stats' per-call overhead, at
    # every node of 48 adaptive pieces, took seconds per cell)
    log_choose = special.gammaln([n + 1, m + 1]) - special.gammaln([k + 1, t + 1])
    constant = np.sum(log_choose - special.gammaln([n - k + 1, m - t + 1])) - np.log(2 * np.pi) / 2

    def integrand(e):
        p = special.expit(eta + scale * e)
        q = se * p + (1 - sp) * (1 - p)
        log = special.xlogy(k, q) + special.xlog1py(n - k, -q)
        log += special.xlogy(t, p) + special.xlog1py(m - t, -p)
        return np.exp(constant + log - e * e / 2)

    edges = np.linspace(-12, 12, 49)
    pieces = (
        integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-13, limit=200)[0]
        for a, b in zip(edges[:-1], edges[1:], strict=True)
    )
    return np.log(sum(pieces))


@pytest.mark.parametrize(
    ("eta", "scale", "k", "n", "se", "sp"),
    [
        (-3.0, 1.0, 3, 400, 0.85, 0.992),  # false alarms explain part of the graded count
        (-6.0, 2.0, 0, 2000, 0.9, 0.999),  # none graded in many runs
        (0.5, 0.3, 150, 200, 0.7, 0.95),  # common successes, a narrow departure
        (-2.0, 3.0, 12, 200, 0.6, 0.97),  # a wide departure, a poor judge
        (-8.0, 5.0, 40, 200, 0.99, 0.9),  # false alarms alone could make the count
    ],
)
def test_the_graded_likelihood_is_the_integral_over_the_departure(eta, scale, k, n, se, sp):
    """The log-likelihood of a graded count, its departure integrated out on the grid
    that holds every true count's term, matches adaptive quadrature to 1e-10."""
    grading = SimpleNamespace(
        graded=np.array([k]), runs=np.array([n]), grader=np.array([0]), trusted=np.zeros((1, 3))
    )
    got = log_marginal_graded(
        np.array([[eta]]), np.array([[scale]]), grading, np.array([[se]]), np.array([[sp]])
    )[0, 0]
    assert got == pytest.approx(marginal_by_quadrature(eta, scale, k, n, se, sp), abs=1e-10)


def test_the_graded_likelihood_carries_the_runs_audited_again():
    """A pair of 40 runs, 10 of them scored again (3 true successes): the graded count
    of the other 30 through the judge and the 10 runs' truth share one departure; the
    integral matches adaptive quadrature to 1e-10."""
    grading = SimpleNamespace(
        graded=np.array([4]),
        runs=np.array([30]),
        grader=np.array([0]),
        trusted=np.array([[10, 3, 2]]),
    )
    got = log_marginal_graded(
        np.array([[-1.5]]), np.array([[1.2]]), grading, np.array([[0.8]]), np.array([[0.97]])
    )[0, 0]
    expected = marginal_by_quadrature(-1.5, 1.2, 4, 30, 0.8, 0.97, trusted=(10, 3))
    assert got == pytest.approx(expected, abs=1e-10)


@pytest.fixture(scope="module")
def fits():
    """The table fitted with the judge's audit, and with every grader taken as perfect."""
    audited = bayes_eval.fit(TABLE, "crossed", audit=AUDIT)
    perfect = bayes_eval.fit(TABLE.drop(columns="grader"), "crossed")
    return audited, perfect


def test_a_judge_that_misses_a_quarter_raises_the_zero_success_bounds(fits):
    """With the audit the fit passes its diagnostics, the judge's sensitivity sits where
    the audit puts it (30 of 40: the truth 0.75 within its 99% interval), and every
    zero-success pair the judge scored gets a higher bound than the one that takes the
    judge as perfect; its provenance names the judge and its audit."""
    audited, perfect = fits
    assert audited.diagnostics.ok, audited.diagnostics.messages
    se = audited.draws["sensitivity"].values.ravel()
    assert np.quantile(se, 0.005) < 0.75 < np.quantile(se, 0.995)
    upper = audited.summary().set_index(["agent", "task"])
    alone = perfect.summary().set_index(["agent", "task"])["upper"]
    for pair in (("a", "t2"), ("b", "t1"), ("b", "t2")):
        assert upper.loc[pair, "upper"] > alone[pair]
    assert "graded by judge: sensitivity 0.74 (0.60-0.86)" in upper.loc[("a", "t2"), "provenance"]
    assert "graded by" not in upper.loc[("a", "t4"), "provenance"]


def test_the_log_likelihood_reads_each_pair_through_its_grader(fits):
    """At the fit's own draws (every 20th: the integrals are the subject, not the draws),
    the graded pairs' log-likelihood is the graded integral and the trusted pairs' the
    plain one, each with the pair's sampled additive logit, and each the mixture of the
    usual departure and a surprising pair's wider one."""
    audited, _ = fits
    post = audited.draws.isel(draw=slice(None, None, 20))
    values = audited.log_likelihood_at(post)["successes"].values
    eta = post["ability"].values[..., :, None] - post["difficulty"].values[..., None, :]
    scale = post["cell_scale"].values[..., None]
    share = post["surprise_share"].values[..., None]
    wide = scale * (1 + post["surprise_width"].values[..., None])

    def mixed(integral):  # log((1 - share) L(scale) + share L(wide))
        return np.logaddexp(np.log1p(-share) + integral(scale), np.log(share) + integral(wide))

    k, n = TABLE["successes"].to_numpy(), TABLE["trials"].to_numpy()
    graded = np.flatnonzero(TABLE["grader"] == "judge")
    trusted = np.flatnonzero(TABLE["grader"] == "")
    agent, task = np.repeat([0, 1], 6), np.tile(np.arange(6), 2)
    at = eta[..., agent[trusted], task[trusted]]
    plain = mixed(lambda s: log_marginal(at, s, k[trusted], n[trusted]))
    assert np.allclose(values[..., trusted], plain, rtol=1e-12)
    grading = SimpleNamespace(
        graded=k[graded],
        runs=n[graded],
        grader=np.zeros(graded.size, int),
        trusted=np.zeros((graded.size, 3)),
    )
    rates = [post[name].values for name in ("sensitivity", "specificity")]
    at = eta[..., agent[graded], task[graded]]
    through = mixed(lambda s: log_marginal_graded(at, s, grading, *rates))
    assert np.allclose(values[..., graded], through, rtol=1e-12)
    assert np.isfinite(values).all()
    assert values.shape[-1] == audited.group("observed_data")["successes"].size


def test_the_audited_fits_groups_carry_the_grader(fits):
    """``p_graded`` where the judge scored (``se P + (1 - sp)(1 - P)`` of the same draw)
    and nowhere else, in the posterior and the prior; the grader's rates in the log
    prior, for ``psense``; the graded pairs' own bounds are the exact model's."""
    audited, _ = fits
    post, tree = audited.draws, audited.tree
    q = post["p_graded"].values
    se, sp = (post[name].values[..., 0] for name in ("sensitivity", "specificity"))
    p = post["p_task"].values
    assert np.allclose(q[..., 0, 2], se * p[..., 0, 2] + (1 - sp) * (1 - p[..., 0, 2]))
    assert np.isnan(q[..., :, 4:]).all() and not np.isnan(q[..., :, :4]).any()
    assert "p_graded" in tree["prior"] and "sensitivity" in tree["log_prior"]
    summary = audited.summary().set_index(["agent", "task"])
    exact = bayes_eval.fit(TABLE, "end_to_end", audit=AUDIT).summary().set_index(["agent", "task"])
    for pair in (("a", "t0"), ("b", "t2")):
        assert summary.loc[pair, "own_upper"] == pytest.approx(exact.loc[pair, "upper"], rel=1e-9)


def test_the_reports_grader_section_compares_each_pairs_own_runs(fits):
    """In an MCMC fit the report's grader section sets, per pair the judge scored, its own
    runs' bound through the judge (``own_upper``) beside the Beta bound of the same graded
    count under the uniform prior (scipy) and the judge's floor under that prior, the
    model's bound before them; the trusted pairs are not in it."""
    from bayes_eval.exact.graded import false_alarm_floor
    from bayes_eval.outputs.grading import grader_sections

    audited, _ = fits
    summary = audited.summary()
    (_, title), (_, text), (_, shown) = grader_sections(audited, summary, 0.975)
    assert title == "How much of each bound is the grader" and "own runs" in text
    judged = TABLE[TABLE["grader"] == "judge"]
    assert sorted(zip(shown["agent"], shown["task"], strict=True)) == sorted(
        zip(judged["agent"], judged["task"], strict=True)
    )
    rows = summary.set_index(["agent", "task"])
    shapes = audited.values("grader_shapes")[0, 0]
    floor = false_alarm_floor((1.0, 1.0), shapes[:2], shapes[2:], 0.975)
    for line in shown.itertuples(index=False):
        k, n = (int(x) for x in line.graded.split("/"))
        own, perfect, share, at_floor = (float(x) for x in line[5:9])
        assert own == pytest.approx(rows.loc[(line.agent, line.task), "own_upper"], rel=1e-3)
        assert perfect == pytest.approx(stats.beta.ppf(0.975, 1 + k, 1 + n - k), rel=1e-3)
        assert share == pytest.approx(own - perfect, abs=1e-3 * own)
        assert at_floor == pytest.approx(floor, rel=1e-3)
        assert float(line[4]) == pytest.approx(rows.loc[(line.agent, line.task), "upper"], rel=1e-3)


def test_sbc_of_the_graded_crossed_model():
    """Simulation-based calibration with the judge's audit as fixed data: each
    simulation draws the judge's rates from their Betas after the audit (what the fit
    conditions on), every other parameter from its prior, and the graded counts through
    the judge, on a sparse design (4 agents x 6 tasks, 1 to 30 runs, two pairs never run,
    a third of the pairs scored by a trusted check). Every rank, the judge's rates and
    the pairs' true rates among them, is uniform."""
    from bayes_eval.checks.sbc import sbc
    from bayes_eval.evidence.audit import with_audit

    rng = np.random.default_rng(6)
    rows = [
        (f"a{a}", f"t{t}", "end_to_end", 0, int(rng.integers(1, 31)), "" if t % 3 == 0 else "judge")
        for a in range(4)
        for t in range(6)
        if (a, t) not in ((0, 2), (3, 5))
    ]
    columns = ["agent", "task", "method", "successes", "trials", "grader"]
    evidence = with_audit(bayes_eval.load_evidence(pd.DataFrame(rows, columns=columns)), AUDIT)
    result = sbc(evidence, "crossed", simulations=48, draws=99, bins=4, seed=3)
    assert result.passed(), result.p_values.sort_values().head()
    assert {"sensitivity[0]", "specificity[0]", "p_task[1]"} <= set(result.p_values.index)


def test_a_pairs_runs_audited_again_carry_their_truth():
    """Ten of a/t0's 30 runs scored again (``run_id``): 2 graded successes, both true, and
    8 graded failures, one a missed success. The crossed fit passes its diagnostics, its
    provenance says so, and the pair's own runs' bound is the exact model's (the other
    20 runs through the judge, the uniform prior updated by the 10 runs' truth)."""
    truth, graded = [1, 1, 1] + [0] * 7, [1, 1, 0] + [0] * 7
    own = pd.DataFrame(
        {
            "grader": "judge",
            "truth": truth,
            "graded": graded,
            "runs": 1,
            "agent": "a",
            "task": "t0",
            "run_id": [f"r{i}" for i in range(10)],
        }
    )
    audit = pd.concat([AUDIT, own], ignore_index=True)
    fit = bayes_eval.fit(TABLE, "crossed", audit=audit)
    assert fit.diagnostics.ok, fit.diagnostics.messages
    summary = fit.summary().set_index(["agent", "task"])
    text = "10 of its runs audited (3 true successes, 2 graded)"
    assert text in summary.loc[("a", "t0"), "provenance"]
    assert text not in summary.loc[("b", "t0"), "provenance"]
    exact = bayes_eval.fit(TABLE, "end_to_end", audit=audit).summary().set_index(["agent", "task"])
    for pair in (("a", "t0"), ("a", "t1")):
        assert summary.loc[pair, "own_upper"] == pytest.approx(exact.loc[pair, "upper"], rel=1e-9)
    scored = fit.log_likelihood_at(fit.draws.isel(draw=slice(None, None, 20)))
    assert np.isfinite(scored["successes"].values).all()
