"""A grader that errs: its audit read as evidence is, and the exact posterior of the true
rate under its sensitivity and specificity, checked against an independent integral over
``p``, ``se`` and ``sp`` and against simulation with a known grader."""

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

from bayes_eval.errors import InputError
from bayes_eval.evidence.audit import load_audit
from bayes_eval.exact.graded import graded_rate
from bayes_eval.messages import collected

LEVEL = 0.975


def reference_density(k, n, prior, se, sp, nodes=200):
    """The unnormalised posterior density of ``p`` after ``k`` of ``n`` graded, by direct
    integration of ``Beta(p) Beta(se) Beta(sp) q^k (1 - q)^(n - k)`` over ``se`` and
    ``sp``: Gauss-Jacobi with their Beta weights, 200 nodes each. Independent of the
    latent-count mixture the package sums."""

    def rule(shape):
        x, w = special.roots_jacobi(nodes, shape[1] - 1, shape[0] - 1)
        return (1 + x) / 2, w / w.sum()

    e, we = rule(se)
    s, ws = rule(sp)
    e, s, weight = e[:, None], s[None, :], np.outer(we, ws)

    def density(p):
        q = e * p + (1 - s) * (1 - p)
        likelihood = np.exp(k * np.log(q) + (n - k) * np.log1p(-q))
        return stats.beta.pdf(p, *prior) * np.sum(weight * likelihood)

    return density


def reference_cdf(x, *case):
    """``P(p <= x)`` by scipy's adaptive quadrature of ``reference_density`` in ``p``, to
    1e-12 relative."""
    density = reference_density(*case)
    below = integrate.quad(density, 0, x, epsabs=0, epsrel=1e-12, limit=500)[0]
    above = integrate.quad(density, x, 1, epsabs=0, epsrel=1e-12, limit=500)[0]
    return below / (below + above)


# (graded successes, runs, prior of p, Beta of se, Beta of sp): an audit of 34/40
# successes detected and 2 false alarms in 260 failures; 45/50 and 0/500 (the issue's
# cases, uniform priors updated by the audit); a poor grader on a common success.
CASES = [
    (3, 400, (1, 1), (1 + 34, 1 + 6), (1 + 258, 1 + 2)),
    (0, 2000, (1, 1), (1 + 45, 1 + 5), (1 + 500, 1)),
    (40, 300, (1, 1), (5, 2), (30, 3)),
]


@pytest.mark.parametrize("case", CASES)
def test_the_bound_is_the_integral_over_p_se_and_sp(case):
    """At the mixture's 97.5% bound the independent integral's CDF is 0.975 to 1e-9."""
    rate = graded_rate(*case)
    bound = rate.quantile(LEVEL)
    assert reference_cdf(bound, *case) == pytest.approx(LEVEL, abs=1e-9)
    assert rate.cdf(bound) == pytest.approx(LEVEL, abs=1e-12)


def test_false_alarms_lower_a_bound_and_misses_raise_one():
    """3 of 400 graded with 2 false alarms in 260 audited failures: some of the 3 are
    false alarms, and the bound falls below the Beta's that takes them as true; 0 of
    2,000 with 5 misses in 50 audited successes: a success could have gone unseen, and
    the bound rises above the Beta's."""
    for (k, n, prior, se, sp), moves in zip(CASES[:2], ("down", "up"), strict=True):
        perfect = stats.beta.ppf(LEVEL, prior[0] + k, prior[1] + n - k)
        audited = graded_rate(k, n, prior, se, sp).quantile(LEVEL)
        assert (audited < perfect) if moves == "down" else (audited > perfect)


def test_a_perfect_grader_leaves_the_beta():
    rate = graded_rate(3, 400, (1, 1), (1e9, 1), (1e9, 1))
    assert rate.quantile(LEVEL) == pytest.approx(stats.beta.ppf(LEVEL, 4, 398), rel=1e-6)
    assert rate.mean == pytest.approx(4 / 402, rel=1e-6)  # Beta(1 + 3, 1 + 397)


def test_mean_sd_and_draws_are_the_mixtures():
    """Mean and sd against the independent integral's moments, and 20,000 draws against
    the mixture's CDF (Kolmogorov-Smirnov)."""
    case = CASES[2]
    rate = graded_rate(*case)
    density = reference_density(*case)
    moments = [
        integrate.quad(lambda p, m=m: p**m * density(p), 0, 1, epsabs=0, epsrel=1e-12, limit=500)[0]
        for m in (0, 1, 2)
    ]
    mean = moments[1] / moments[0]
    assert rate.mean == pytest.approx(mean, rel=1e-9)
    assert rate.sd == pytest.approx(np.sqrt(moments[2] / moments[0] - mean**2), rel=1e-7)
    draws = rate.joint_draws(20_000, np.random.default_rng(5))["p"]
    assert stats.kstest(draws, np.vectorize(rate.cdf)).pvalue > 0.01


def test_bounds_hold_with_a_known_grader_where_a_perfect_one_fails(load_study):
    """1,000 cells of the grader study (``studies/grader_error.py``): true rates
    log-uniform from 10^-2.5 to 10^-0.5 (not the Beta prior's family), 300 runs each,
    graded by a judge that misses a quarter of the successes and raises a false alarm on
    0.1% of failures; each cell's audit sends 40 true successes and 400 true failures
    through the same judge. The audited 97.5% bounds miss the true rate in at most 3.5%
    of the cells, the cells graded without a success on their own too; the bounds that
    take the judge as perfect miss in more than 10%: the successes it missed."""
    study = load_study("grader_error")
    rng = np.random.default_rng(11)
    judge = (0.75, 0.999, 40, 400)
    cells = study.setting_rows("t", (-2.5, -0.5), judge, 1000, 300, LEVEL, rng)
    missed, naive = cells["truth"] > cells["audited"], cells["truth"] > cells["perfect"]
    none_graded = cells["graded"] == 0
    assert none_graded.sum() > 25
    assert missed.mean() <= 0.035 and missed[none_graded].mean() <= 0.035
    assert naive.mean() > 0.10


# --------------------------------------------------------------------- the audit table


def write(tmp_path, text: str):
    path = tmp_path / "audit.csv"
    path.write_text(text)
    return path


def test_an_audit_counts_each_graders_runs_in_its_scope(tmp_path):
    """Per-run rows and aggregated ones count alike; a row with a task audits that task's
    runs only."""
    path = write(
        tmp_path,
        "grader,truth,graded,runs,task\n"
        "judge,1,1,34,\njudge,1,0,6,\njudge,0,0,258,\njudge,0,1,2,\n"
        "judge,0,1,5,hard\nchecker,1,1,1,\nchecker,0,0,1,\n",
    )
    audit = load_audit(path)
    assert audit.graders == ["judge", "checker"]
    everywhere = audit.counts("judge", task="easy")
    assert (everywhere.detected, everywhere.missed, everywhere.cleared) == (34, 6, 258)
    assert everywhere.false_alarms == 2
    assert audit.counts("judge", task="hard").false_alarms == 7
    assert everywhere.sensitivity_shapes() == (35, 7)
    assert everywhere.specificity_shapes() == (259, 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grader,truth,graded\nj,2,1\n", "row 2, column truth: '2' is not 0/1 or true/false"),
        ("grader,truth\nj,1\n", "row 1: no column 'graded'"),
        ("grader,truth,graded,run\nj,1,1,3\n", "row 1, column run: unknown column (did you"),
        ("grader,truth,graded\n,1,1\n", "row 2, column grader: grader is empty"),
        ("grader,truth,graded,runs\nj,1,1,0\n", "row 2, column runs: runs (0) must be at least"),
        ("grader,truth,graded\nj,,1\n", "row 2, column truth: truth is empty"),
        ("grader,truth,graded,method\nj,1,1,milestones\n", "unknown method 'milestones'"),
        ("grader,truth,graded\n", "the audit has no rows"),
    ],
)
def test_a_malformed_audit_is_one_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as found:
        load_audit(path)
    assert str(found.value).startswith(f"{path}: ") and message in str(found.value)
    assert "\n" not in str(found.value)


def test_an_audit_without_true_successes_is_allowed_with_a_note():
    with collected() as notes:
        audit = load_audit(pd.DataFrame({"truth": [0, 0], "graded": [0, 1]}))
    assert audit.graders == ["grader"]
    assert audit.counts("grader").sensitivity_shapes() == (1, 1)  # the prior alone
    assert notes == [
        "audit table: grader 'grader' has no audited run whose truth is a success: its "
        "sensitivity is its prior alone"
    ]


def test_lee_et_al_interval_covers_where_its_normal_approximation_holds(load_study):
    """The study's anchor, Lee et al.'s corrected interval, written from their paper: at
    their README's example (40% judged correct of 1,000, specificity 0.7 and sensitivity
    0.9 from 200 audited items each) its 95% interval holds the true rate in 95% of 4,000
    simulated evaluations, within three standard errors. Its ends are not alike: the
    upper end alone misses in 1.7% of them, the lower in 3.2%."""
    study = load_study("grader_error")
    rng = np.random.default_rng(3)
    q0, q1, n, m = 0.7, 0.9, 1000, 200
    theta = (0.4 + q0 - 1) / (q0 + q1 - 1)  # the true rate that gives 40% judged correct
    trials = 4000
    true_successes = rng.binomial(n, theta, trials)
    graded = rng.binomial(true_successes, q1) + rng.binomial(n - true_successes, 1 - q0)
    detected, cleared = rng.binomial(m, q1, trials), rng.binomial(m, q0, trials)
    lower, upper = study.lee_interval(graded, n, detected, m, cleared, m, LEVEL)
    held = ((lower <= theta) & (theta <= upper)).mean()
    assert abs(held - 0.95) < 3 * np.sqrt(0.05 * 0.95 / trials)
    assert (theta > upper).mean() < 1 - LEVEL < (theta < lower).mean()


def test_ppi_upper_is_the_papers_interval_worked_by_hand(load_study):
    """The study's PPI++ anchor from counts: four labelled runs (truth 1, 1, 0, 0; graded
    1, 1, 0, 1) and four unlabelled (graded 1, 0, 0, 0). By hand: ``cov(Y, Yhat)`` = 1/8,
    ``var(Yhat)`` over all eight = 2/7, ``lambda`` = (1/8) / (2 x 2/7) = 7/32, the estimate
    ``lambda / 4 + (2 - 3 lambda) / 4`` = 25/64, its variance ``lambda^2 (3/16) / 4`` plus
    ``(E[(Y - lambda Yhat)^2] - 43^2 / 128^2) / 4`` with ``E`` = (2 (25/32)^2 +
    (7/32)^2) / 4; its 97.5% end. Where ``ppi_py`` is installed, its ``ppi_mean_ci`` on
    the same runs gives the same end (it is not a test extra: its wheel installs a
    top-level ``tests`` package, which hides this project's own)."""
    study = load_study("grader_error")
    lam = 7 / 32
    square = (2 * (25 / 32) ** 2 + lam**2) / 4
    variance = lam**2 * (3 / 16) / 4 + (square - (43 / 128) ** 2) / 4
    expected = 25 / 64 + stats.norm.ppf(LEVEL) * np.sqrt(variance)
    assert study.ppi_upper(2, 4, 2, 3, 1, 4, LEVEL) == pytest.approx(expected, rel=1e-12)
    ppi_py = pytest.importorskip("ppi_py")
    labels, grades = np.array([1.0, 1, 0, 0]), np.array([1.0, 1, 0, 1])
    _, upper = ppi_py.ppi_mean_ci(labels, grades, np.array([1.0, 0, 0, 0]), alpha=2 * (1 - LEVEL))
    assert float(np.squeeze(upper)) == pytest.approx(expected, rel=1e-12)
