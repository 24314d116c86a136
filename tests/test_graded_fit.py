"""`fit --audit`: a grader's audit carried into an exact end-to-end fit, from the command
line and the Python API, checked against integrals over ``p``, ``se`` and ``sp`` computed
here (``tests/test_grader.py``'s references), against scipy, and for bad input."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, special, stats
from test_grader import LEVEL, reference_cdf, reference_density

import bayes_eval
from bayes_eval.cli.main import main
from bayes_eval.errors import InputError
from bayes_eval.results.predictive import exact_log_predictive
from bayes_eval.specs import shipped_specs

# The two cells, each scored by its own judge: 3 of 400 graded successes by a
# judge that detected 34 of 40 audited successes and raised 2 false alarms in 260 audited
# failures; 0 of 2,000 by one that detected 45 of 50 and raised none in 500.
EVIDENCE = (
    "agent,task,method,successes,trials,grader\n"
    "a,t1,end_to_end,3,400,judge-1\n"
    "a,t2,end_to_end,0,2000,judge-2\n"
)
AUDIT = (
    "grader,truth,graded,runs\n"
    "judge-1,1,1,34\njudge-1,1,0,6\njudge-1,0,0,258\njudge-1,0,1,2\n"
    "judge-2,1,1,45\njudge-2,1,0,5\njudge-2,0,0,500\n"
)
# (graded, runs, prior, Beta of se, Beta of sp) of each cell: uniform priors + audit
CASES = {
    "t1": (3, 400, (1, 1), (35, 7), (259, 3)),
    "t2": (0, 2000, (1, 1), (46, 6), (501, 1)),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graded")
    (folder / "evidence.csv").write_text(EVIDENCE)
    (folder / "audit.csv").write_text(AUDIT)
    return folder


@pytest.fixture(scope="module")
def posterior(files):
    return bayes_eval.fit(files / "evidence.csv", "end_to_end", audit=files / "audit.csv")


def run(capsys, *args):
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def reference_bound(case):
    """The 97.5% quantile of the independent integral (``reference_cdf``), by root finding."""
    return optimize.brentq(lambda x: reference_cdf(x, *case) - LEVEL, 1e-6, 0.2, xtol=1e-12)


def test_the_command_line_bounds_are_the_integral_over_p_se_and_sp(files, capsys):
    """The issue's cases: each bound within 1% of the independent integral (it is within
    1e-9 of it, ``test_grader``); false alarms lower t1's bound below the Beta's that
    takes the judge as perfect, and t2's possible misses raise its bound."""
    status, out, _ = run(
        capsys, "fit", files / "evidence.csv", "--model", "end_to_end",
        "--audit", files / "audit.csv", "--format", "csv",
    )  # fmt: skip
    assert status == 0
    summary = pd.read_csv(pd.io.common.StringIO(out)).set_index("task")
    for task, case in CASES.items():
        upper = summary.loc[task, "upper"]
        assert upper == pytest.approx(reference_bound(case), rel=1e-6)
        k, n = case[:2]
        perfect = stats.beta.ppf(LEVEL, 1 + k, 1 + n - k)
        assert (upper < perfect) if task == "t1" else (upper > perfect)
    assert summary.loc["t1", "upper"] == pytest.approx(0.0205, abs=5e-5)
    assert summary.loc["t2", "upper"] == pytest.approx(0.00210, abs=5e-6)
    provenance = summary.loc["t1", "provenance"]
    assert "graded by judge-1: sensitivity 0.83 (0.71-0.93)" in provenance
    assert "specificity 0.989 (0.973-0.998) from 300 audited runs" in provenance
    assert "grader" in summary.columns and summary.loc["t2", "grader"] == "judge-2"


def test_the_mean_sd_and_probability_above_are_the_integrals(posterior):
    """Moments and ``P(P > tau)`` of each cell against quadrature of the reference
    density."""
    summary = posterior.summary(threshold=0.01).set_index("task")
    for task, case in CASES.items():
        density = reference_density(*case)
        mass = integrate.quad(density, 0, 1, epsabs=0, epsrel=1e-12, limit=500)[0]

        def moment(power, density=density, mass=mass):
            value = integrate.quad(
                lambda p: p**power * density(p), 0, 1, epsabs=0, epsrel=1e-12, limit=500
            )[0]
            return value / mass

        mean = moment(1)
        assert summary.loc[task, "mean"] == pytest.approx(mean, rel=1e-8)
        assert summary.loc[task, "sd"] == pytest.approx(np.sqrt(moment(2) - mean**2), rel=1e-6)
        above = 1.0 - reference_cdf(0.01, *case)
        assert summary.loc[task, "prob_above"] == pytest.approx(above, rel=1e-6, abs=1e-12)


def test_draws_follow_the_mixture_and_the_rate_graded(posterior):
    """``p_task``'s draws of a graded cell follow its exact CDF (Kolmogorov-Smirnov), and
    ``p_graded``, the chance a run is graded a success, has the mean the joint posterior
    gives by quadrature: ``E[q] = E[se p + (1 - sp)(1 - p)]``, each term integrated over
    ``se`` and ``sp`` on the Gauss-Jacobi nodes of the reference."""
    draws = posterior.draws
    i = posterior.coords["agent"].index("a")
    for task, case in CASES.items():
        j = posterior.coords["task"].index(task)
        p = draws["p_task"].values[:, :, i, j].ravel()
        graded = posterior.graded_at(i, j)
        assert stats.kstest(p, np.vectorize(graded.cdf)).pvalue > 1e-3
        q = draws["p_graded"].values[:, :, i, j].ravel()
        assert q.mean() == pytest.approx(_mean_q(*case), rel=5 * q.std() / q.mean() / 60)
    assert "description" in draws["p_graded"].attrs


def _mean_q(k, n, prior, se, sp, nodes=200):
    """``E[q | data]`` by quadrature: the joint density of ``p, se, sp`` is the prior times
    ``q^k (1 - q)^(n - k)``, integrated on Gauss-Jacobi nodes in ``se``, ``sp`` and
    Gauss-Legendre in ``p`` (split where the density has its mass)."""

    def rule(shape):
        x, w = special.roots_jacobi(nodes, shape[1] - 1, shape[0] - 1)
        return (1 + x) / 2, w / w.sum()

    e, we = rule(se)
    s, ws = rule(sp)
    x, wx = special.roots_legendre(400)
    edges = np.array([0.0, 0.002, 0.01, 0.05, 1.0])
    total = weighted = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        p = lo + (hi - lo) * (x + 1) / 2
        wp = wx * (hi - lo) / 2 * stats.beta.pdf(p, *prior)
        q = e[:, None, None] * p + (1 - s[None, :, None]) * (1 - p)
        like = np.exp(k * np.log(q) + (n - k) * np.log1p(-q))
        weight = we[:, None, None] * ws[None, :, None] * wp[None, None, :] * like
        total += weight.sum()
        weighted += (weight * q).sum()
    return weighted / total


def test_the_left_out_cell_predictive_is_the_graded_count_marginal(posterior):
    """``elpd_loo`` of a graded cell is ``log P(k | n)``: the binomial coefficient times the
    reference density's mass, by quadrature."""
    loo = exact_log_predictive(posterior)["elpd_loo"]
    for task, case in CASES.items():
        k, n = case[:2]
        density = reference_density(*case)
        mass = integrate.quad(density, 0, 1, epsabs=0, epsrel=1e-12, limit=500)[0]
        expected = np.log(mass) + np.log(special.comb(n, k, exact=True))
        assert float(loo.sel(task=task).item()) == pytest.approx(expected, rel=1e-6)


def test_pass_at_k_of_a_graded_cell_is_the_integral(posterior):
    """pass@k and pass^k means at k = 10 against quadrature of the reference density."""
    attempts = posterior.attempts([10]).set_index("task")
    for task, case in CASES.items():
        density = reference_density(*case)
        mass = integrate.quad(density, 0, 1, epsabs=0, epsrel=1e-12, limit=500)[0]

        def mean_of(f, density=density, mass=mass):
            value = integrate.quad(
                lambda p: f(p) * density(p), 0, 1, epsabs=0, epsrel=1e-12, limit=500
            )[0]
            return value / mass

        at_least = mean_of(lambda p: -np.expm1(10 * np.log1p(-p)))
        assert attempts.loc[task, "pass_at_mean"] == pytest.approx(at_least, rel=1e-6)
        assert attempts.loc[task, "pass_all_mean"] == pytest.approx(
            mean_of(lambda p: p**10), rel=1e-5
        )


def test_the_run_folder_keeps_the_audit_and_reads_back_the_same(files, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["fit", files / "evidence.csv", "--model", "end_to_end", "--out", out, "--quiet"]
    status, _, _ = run(capsys, *args, "--audit", files / "audit.csv")
    assert status == 0
    again = bayes_eval.load_posterior(out)
    assert again.evidence.audit.graders == ["judge-1", "judge-2"]
    assert "evidence_audit" in again.tree
    written = pd.read_csv(out / "summary.csv")
    columns = ["task", "mean", "sd", "lower", "median", "upper", "provenance"]
    read = again.summary().reset_index(drop=True)[columns]
    pd.testing.assert_frame_equal(read, written[columns], rtol=1e-12)
    ppc = pd.read_csv(out / "ppc.csv")
    assert sorted(ppc["task"]) == ["t1", "t2"]  # graded cells are checked too
    manifest = json.loads((out / "bayes-eval-run.json").read_text())
    assert "posterior.nc" in json.dumps(manifest)


def test_one_grader_and_no_grader_column_scores_every_row(tmp_path):
    """An audit of one grader, and a table without a ``grader`` column: that grader scored
    every row. A blank ``grader`` names a row a trusted grader scored."""
    (tmp_path / "audit.csv").write_text("truth,graded,runs\n1,1,34\n1,0,6\n0,0,258\n0,1,2\n")
    plain = pd.DataFrame(
        {"task": ["t1"], "method": ["end_to_end"], "successes": [3], "trials": [400]}
    )
    fit = bayes_eval.fit(plain, "end_to_end", audit=tmp_path / "audit.csv")
    assert fit.summary()["upper"].iloc[0] == pytest.approx(reference_bound(CASES["t1"]), rel=1e-6)
    trusted = plain.assign(grader=[""])
    fit = bayes_eval.fit(trusted, "end_to_end", audit=tmp_path / "audit.csv")
    assert fit.summary()["upper"].iloc[0] == pytest.approx(stats.beta.ppf(LEVEL, 4, 398))


def test_the_spec_sets_the_graders_priors(files, tmp_path):
    """``[grader.specificity]`` in the spec: its prior is added to the audit's counts."""
    spec = shipped_specs()["end_to_end"].read_text()
    spec += (
        '\n[grader.specificity]\ndist = "Beta"\nalpha = 1.0\nbeta = 0.1\n'
        'reason = "a judge that rarely raises a false alarm"\n'
    )
    (tmp_path / "spec.toml").write_text(spec)
    fit = bayes_eval.fit(files / "evidence.csv", tmp_path / "spec.toml", audit=files / "audit.csv")
    shapes = fit.values("grader_shapes")[0]
    assert shapes[1].tolist() == [46, 6, 501, 0.1]
    assert fit.spec.grader["specificity"].params == {"alpha": 1.0, "beta": 0.1}


@pytest.mark.parametrize(
    ("evidence", "audit", "message"),
    [
        (EVIDENCE.replace("judge-2", "judge-3"), AUDIT, "row 3, column grader: grader 'judge-3' "
         "has no audit in .*audit.csv \\(graders audited: judge-1, judge-2\\)"),
        (EVIDENCE.replace(",grader", "").replace(",judge-1", "").replace(",judge-2", ""), AUDIT,
         "the audit .*audit.csv has graders judge-1, judge-2, and the table no grader column"),
        (EVIDENCE, AUDIT.replace("judge-1,0,1,2", "judge-1,0,2,2"),
         "audit.csv: row 5, column graded: '2' is not 0/1 or true/false"),
        (EVIDENCE + "a,t1,end_to_end,1,10,judge-2\n", AUDIT,
         "row 4, column grader: 'judge-2' differs from 'judge-1' on another row of the same"),
        (EVIDENCE + "a,t1,end_to_end,1,10,\n", AUDIT,
         "row 4, column grader: '' differs from 'judge-1' on another row of the same cell"),
    ],
)  # fmt: skip
def test_bad_audits_are_one_line_and_nothing_is_written(tmp_path, capsys, evidence, audit, message):
    (tmp_path / "evidence.csv").write_text(evidence)
    (tmp_path / "audit.csv").write_text(audit)
    out = tmp_path / "run"
    args = ["fit", tmp_path / "evidence.csv", "--model", "end_to_end", "--out", out]
    status, stdout, err = run(capsys, *args, "--sum-duplicates", "--audit", tmp_path / "audit.csv")
    assert status == 2 and not stdout and not out.exists()
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


def test_a_model_that_does_not_carry_the_graders_error_refuses_the_audit(files):
    data = Path(__file__).resolve().parents[1] / "data"
    steps, audit = data / "example_graded_steps.csv", data / "example_audit.csv"
    with pytest.raises(InputError, match="model crossed_joint .* does not carry a grader's"):
        bayes_eval.fit(steps, "crossed_joint", audit=audit)
    # joint carries it on end-to-end runs only: the example's judge scored its milestones
    with pytest.raises(InputError, match="row 2, column grader: model joint carries a grader"):
        bayes_eval.fit(steps, "joint", audit=audit)


def test_phuongs_improper_milestone_prior_refuses_the_audit(files):
    """Under Haldane's prior a graded count has no proper posterior: with ``sp < 1`` its
    likelihood stays above 0 at ``p = 0``, where the prior's ``1 / p`` is not integrable."""
    with pytest.raises(InputError, match=r"the milestone prior .* is improper"):
        bayes_eval.fit(files / "evidence.csv", "phuong2024", audit=files / "audit.csv")


def test_the_floor_is_the_limit_of_many_runs_at_the_false_alarm_rate():
    """The grader's floor (20,000 runs graded at its mean false-alarm rate ``q0``) lies at
    most 5% above its limit in infinitely many runs, where ``q0 = se p + FA (1 - p)`` holds
    exactly: then ``p = (q0 - FA) / (se - FA)``, and ``(se, FA)`` have their audit's Betas
    times the Jacobian ``1 / (se - FA)`` on ``FA < q0 < se`` (uniform prior of ``p``);
    the limit's quantile from a million weighted draws."""
    from bayes_eval.exact.graded import false_alarm_floor

    sensitivity, specificity = (55, 7), (240, 2)
    floor = false_alarm_floor((1, 1), sensitivity, specificity, LEVEL)
    rng = np.random.default_rng(0)
    se = rng.beta(*sensitivity, 1_000_000)
    alarm = rng.beta(specificity[1], specificity[0], 1_000_000)
    q0 = specificity[1] / sum(specificity)
    inside = (alarm < q0) & (q0 < se)
    p = (q0 - alarm[inside]) / (se[inside] - alarm[inside])
    weight = 1.0 / (se[inside] - alarm[inside])
    order = np.argsort(p)
    cumulative = np.cumsum(weight[order]) / weight.sum()
    limit = p[order][np.searchsorted(cumulative, LEVEL)]
    assert limit <= floor <= 1.05 * limit


def test_the_report_sets_each_bound_beside_the_perfect_graders(files, tmp_path):
    """The report's grader section: each graded pair's bound, the Beta bound of the same
    count were the grader perfect (scipy), and the grader's floor."""
    done = bayes_eval.run(
        files / "evidence.csv",
        "end_to_end",
        audit=files / "audit.csv",
        out=tmp_path / "run",
        threshold=0.01,
    )
    assert not done.checks.failed
    report = (tmp_path / "run" / "report.md").read_text()
    section = report.split("## How much of each bound is the grader")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| a ")]
    assert [row[1] for row in rows] == ["t1", "t2"]
    for row, case in zip(rows, CASES.values(), strict=True):
        k, n = case[:2]
        assert float(row[5]) == pytest.approx(stats.beta.ppf(LEVEL, 1 + k, 1 + n - k), rel=1e-3)
        assert float(row[4]) == pytest.approx(reference_bound(case), rel=1e-3)
    assert "graded by judge-1 (its audited errors in the bound)" in report


def test_plan_weighs_graded_runs_against_audited_ones():
    """``plan`` on a graded task: with a grader audited so far that it is all but perfect
    (a million runs, none misgraded), more graded runs lower the bound as the same runs
    judged perfectly do (the plain fit's end-to-end route, within Monte Carlo error), and
    more audit changes nothing; with the issue's judge, both routes are ranked."""
    from bayes_eval.plan import next_run

    table = pd.DataFrame(
        {"task": ["t"], "method": ["end_to_end"], "successes": [1], "trials": [60]}
    )
    sure = pd.DataFrame({"truth": [1, 0], "graded": [1, 0], "runs": [10**6, 10**6]})
    graded = bayes_eval.fit(table, "end_to_end", audit=sure)
    plain = bayes_eval.fit(table, "end_to_end")
    routes = next_run(graded, "t", batches=[100], threshold=0.02).set_index("run")
    alone = next_run(plain, "t", batches=[100], threshold=0.02, simulations=4000)
    expected = alone.set_index("run").loc["end_to_end", "expected_upper"]
    # 400 simulated bounds, their sd 0.38 of their mean: 5% is 2.5 standard errors
    assert routes.loc["end_to_end (graded)", "expected_upper"] == pytest.approx(expected, rel=0.05)
    assert routes.loc["audit", "expected_reduction"] == pytest.approx(0.0, abs=1e-6)
    judge = pd.DataFrame({"truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [34, 6, 258, 2]})
    judged = bayes_eval.fit(table, "end_to_end", audit=judge)
    ranked = next_run(judged, "t", costs=[2.0], batches=[50])
    assert set(ranked["run"]) == {"end_to_end (graded)", "audit"}
    assert ranked.loc[ranked["run"] == "audit", "cost"].item() == 100.0


def test_audited_runs_of_the_evidence_put_their_truth_in_place_of_the_verdict():
    """Ten of the 400 runs scored again (``run_id``): the 3 graded successes (one a true
    success, two false alarms) and 7 graded failures (true failures). Their truth updates
    the prior, the other 390 runs (none graded a success) go through the grader, and the
    ten inform its rates too: the bound is the reference integral with prior Beta(2, 10),
    0 of 390 graded, the judge's audit plus these ten (sensitivity 35/41 + 1, false
    alarms 2 + 2 in 260 + 9)."""
    table = pd.DataFrame(
        {"task": ["t1"], "method": ["end_to_end"], "successes": [3], "trials": [400]}
    )
    own = pd.DataFrame(
        {
            "truth": [1, 0, 0] + [0] * 7,
            "graded": [1, 1, 1] + [0] * 7,
            "task": "t1",
            "run_id": [f"r{n}" for n in range(10)],
        }
    )
    judge = pd.DataFrame({"truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [34, 6, 258, 2]})
    audit = pd.concat([judge, own], ignore_index=True)
    fit = bayes_eval.fit(table, "end_to_end", audit=audit)
    upper = fit.summary()["upper"].iloc[0]
    case = (0, 390, (2, 10), (1 + 35, 1 + 6), (1 + 265, 1 + 4))
    assert upper == pytest.approx(reference_bound(case), rel=1e-6)
    assert "10 of its runs audited (1 true successes, 3 graded)" in fit.summary()["provenance"][0]
    checks = bayes_eval.results.predictive.predictive_checks(fit)
    assert (checks["successes"].item(), checks["trials"].item()) == (0, 390)
    twice = audit.assign(run_id=audit["run_id"].replace("r1", "r0"))
    with pytest.raises(InputError, match="run 'r0' is audited twice"):
        bayes_eval.fit(table, "end_to_end", audit=twice)
    more = audit.assign(graded=audit["graded"].where(audit["run_id"] != "r5", 1))
    with pytest.raises(InputError, match="not among its 400 runs of 3 graded successes"):
        bayes_eval.fit(table, "end_to_end", audit=more)


def test_the_grader_section_of_many_pairs_shows_those_it_moves_most():
    """Of 40 graded pairs the report's section shows 30, ordered by how far the grader
    moves each bound from the perfect grader's (computed here from scipy's Beta)."""
    from bayes_eval.outputs.grading import grader_sections

    table = pd.DataFrame(
        {
            "task": [f"t{i:02d}" for i in range(40)],
            "method": "end_to_end",
            "successes": [i % 7 for i in range(40)],
            "trials": 60,
        }
    )
    judge = pd.DataFrame({"truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [34, 6, 258, 2]})
    fit = bayes_eval.fit(table, "end_to_end", audit=judge)
    summary = fit.summary()
    (_, title), (_, text), (_, shown) = grader_sections(fit, summary, LEVEL)
    assert "the 30 of 40 graded pairs" in text and len(shown) == 30
    perfect = stats.beta.ppf(LEVEL, 1 + table["successes"], 61 - table["successes"])
    moved = (summary["upper"] - perfect).abs()
    expected = summary["task"][moved.sort_values(ascending=False, kind="stable").index]
    assert shown["task"].tolist() == expected.head(30).tolist()
