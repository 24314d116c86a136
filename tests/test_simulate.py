"""Simulation studies: the variance ratio against closed forms and exact enumeration; paths."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from bayes_eval.checks.simulate import end_to_end_rates, paths_study, variance_study
from bayes_eval.cli.main import main


def test_published_variance_ratio_from_the_command(capsys):
    # Two milestones at 1/20, 100 trials each, against 100 end-to-end trials at 1/400.
    args = ["simulate", "variance", "--milestones", "2", "--end-to-end-rate", "0.0025"]
    args += ["--trials", "100", "--replications", "2000000", "--format", "json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    # By hand: R (1 - R) / n over (p (1 - p) / n + p^2)^2 - p^4 with p = 1/20, n = 100
    # is 2.49375e-5 / 2.600625e-6 = 9.589 (the paper rounds it to 9.5).
    assert result["variance_ratio_exact"] == pytest.approx(2.49375e-5 / 2.600625e-6, rel=1e-12)
    # Relative Monte Carlo error of each variance is below 0.5% at 2e6 replications.
    assert result["variance_ratio"] == pytest.approx(result["variance_ratio_exact"], rel=0.02)


def test_closed_form_variance_by_enumeration():
    """(p(1-p)/n + p^2)^M - p^(2M) against the exact distribution of the product, M = 2."""
    n, p = 12, 0.3
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, p)
    values = np.outer(k / n, k / n).ravel()
    weights = np.outer(pmf, pmf).ravel()
    mean = (weights * values).sum()
    exact = (weights * values**2).sum() - mean**2
    result = variance_study(2, p * p, n, replications=200_000, seed=1)
    assert result["milestone_variance_exact"] == pytest.approx(exact, rel=1e-12)
    assert result["end_to_end_variance_exact"] == pytest.approx(p * p * (1 - p * p) / n)
    assert result["milestone_variance"] == pytest.approx(exact, rel=0.03)
    assert result["milestone_mean"] == pytest.approx(p * p, rel=0.01)


def test_more_milestones_cut_the_variance_further():
    ratios = [
        variance_study(m, 0.01, 50, replications=10)["variance_ratio_exact"] for m in (1, 2, 4)
    ]
    assert ratios[0] == pytest.approx(1.0)
    assert ratios[0] < ratios[1] < ratios[2]


def test_sweep_writes_table_and_plot(capsys, tmp_path):
    args = ["simulate", "variance", "--milestones", "1", "2", "4", "--trials", "20", "100"]
    args += ["--replications", "1000", "--out", str(tmp_path / "v"), "--format", "json"]
    assert main(args) == 0
    records = json.loads(capsys.readouterr().out)
    assert [(r["trials"], r["milestones"]) for r in records] == [
        (n, m) for n in (20, 100) for m in (1, 2, 4)
    ]
    assert (tmp_path / "v" / "variance.png").stat().st_size > 0


def test_violations_reduce_to_the_product_at_strength_zero():
    rates = np.array([[0.5, 0.2], [0.9, 0.1]])
    for violation in ("bypass", "skip", "order"):
        assert end_to_end_rates(rates, violation, 0.0) == pytest.approx([0.1, 0.09])
        assert np.all(end_to_end_rates(rates, violation, 0.3) > [0.1, 0.09])
    # Hand-worked at strength 0.5: bypass 0.1 + 0.9 * 0.5; skip 0.75 * 0.6; order
    # 0.5 * 1.25 * 0.2 * 1.4.
    assert end_to_end_rates(rates[:1], "bypass", 0.5)[0] == pytest.approx(0.55)
    assert end_to_end_rates(rates[:1], "skip", 0.5)[0] == pytest.approx(0.45)
    assert end_to_end_rates(rates[:1], "order", 0.5)[0] == pytest.approx(0.175)


def test_paths_command_json(capsys, tmp_path):
    args = ["simulate", "paths", "--models", "mats2024", "--violation", "skip"]
    args += ["--strengths", "0", "0.5", "--tasks", "30", "--format", "json"]
    args += ["--out", str(tmp_path / "p")]
    assert main(args) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["strength"] for r in records] == [0.0, 0.5]
    assert records[1]["failure_rate"] > records[0]["failure_rate"]
    assert (tmp_path / "p" / "paths.png").stat().st_size > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["simulate", "variance", "--milestones", "0"], "--milestones: 0 must be >= 1"),
        (["simulate", "variance", "--end-to-end-rate", "2"], "--end-to-end-rate: 2 must lie"),
        (["simulate", "paths", "--strengths", "1.5"], "--strengths: 1.5 must lie in [0, 1]"),
        (["simulate", "paths", "--models", "end_to_end"], "end_to_end fits end_to_end evidence"),
        (["simulate", "paths", "--violation", "sideways"], "invalid choice: 'sideways'"),
        (["simulate"], "the following arguments are required"),
    ],
)
def test_bad_simulate_arguments(capsys, args, message):
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1


@pytest.mark.slow
def test_joint_keeps_its_bounds_where_the_milestone_method_fails():
    results = paths_study(strengths=(0.2,), tasks=30, seed=2)
    failure = results.set_index(["model", "subset"])["failure_rate"]
    assert failure[("mats2024", "all")] > 0.5
    assert failure[("joint", "milestones only")] <= 0.1  # the 9 in 10
    assert math.isfinite(results["mean_log_score"].min())
