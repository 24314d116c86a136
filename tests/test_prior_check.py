"""The prior predictive check (``bayes_eval.prior_check``, ``bayes-eval check --prior``):
each cell's count beside its prior interval, and each pair's prior probability of a rate
below the thresholds, checked against closed forms and an independent simulation."""

import io

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayes_eval
from bayes_eval.cli.main import main


def _milestones(steps=(3, 1), trials=10):
    rows = []
    for t, width in enumerate(steps):
        for step in range(1, width + 1):
            rows.append(("a", f"t{t}", "milestone", step, step % 2 * 3, trials))
    columns = ["agent", "task", "method", "step", "successes", "trials"]
    return pd.DataFrame(rows, columns=columns)


def test_an_exact_prior_is_a_product_of_uniforms_in_closed_form():
    """Under ``mats2024``'s uniform milestone priors a task of m milestones has prior
    ``P`` the product of m uniforms: ``-log P ~ Gamma(m)``, mean ``2^-m``; and a cell of
    n trials has a uniform prior predictive on 0..n (Beta-Binomial(1, 1))."""
    check = bayes_eval.prior_check(_milestones(), "mats2024", thresholds=(1e-2, 1e-3), seed=1)
    pairs = check.pairs.set_index("task")
    for task, m in (("t0", 3), ("t1", 1)):
        assert pairs.loc[task, "prior_mean"] == pytest.approx(2.0**-m, rel=1e-9)
        for t in (1e-2, 1e-3):
            expected = stats.gamma(m).sf(-np.log(t))
            assert pairs.loc[task, f"below_{t:g}"] == pytest.approx(expected, rel=1e-6)
    assert (pairs["source"] == "exact").all()
    cells = check.cells
    assert (cells["lower"] == 0).all() and (cells["upper"] == 10).all()
    # mid-p position of k among n + 1 equally likely counts: (k + 1/2) / (n + 1)
    expected = (cells["successes"] + 0.5) / 11
    draws = (
        check.tree["prior_predictive"].sizes["draw"] * check.tree["prior_predictive"].sizes["chain"]
    )
    assert np.allclose(cells["position"], expected, atol=4 * 0.5 / np.sqrt(draws))


def test_a_pooled_prior_matches_an_independent_simulation_of_its_spec():
    """``end_to_end_pooled``: per agent ``mu ~ Beta(1, 1)``, ``kappa ~ LogNormal(2.3,
    1.5)``, then ``P ~ Beta(mu kappa, (1 - mu) kappa)``; the check's share of prior draws
    below 0.01 agrees with 400,000 draws simulated here, within 4 of its standard errors."""
    table = pd.DataFrame(
        {"agent": "a", "task": ["t0", "t1"], "method": "end_to_end", "successes": 0, "trials": 5}
    )
    check = bayes_eval.prior_check(table, "end_to_end_pooled", thresholds=(1e-2,), seed=2)
    rng = np.random.default_rng(0)
    mu = rng.beta(1.0, 1.0, 400_000)
    kappa = rng.lognormal(2.3, 1.5, 400_000)
    p = rng.beta(np.maximum(mu * kappa, 1e-300), np.maximum((1 - mu) * kappa, 1e-300))
    truth = (p < 1e-2).mean()
    draws = int(check.pairs["source"].iloc[0].split()[0])
    se = np.sqrt(truth * (1 - truth) / draws)
    assert np.allclose(check.pairs["below_0.01"], truth, atol=4 * se)
    assert set(check.tree.children) == {
        "prior",
        "prior_predictive",
        "observed_data",
        "constant_data",
    }
    assert "posterior" not in check.tree  # nothing was sampled


def test_the_command_prints_the_check_and_writes_its_plot(tmp_path, capsys):
    table = tmp_path / "milestones.csv"
    _milestones().to_csv(table, index=False)
    plot = tmp_path / "prior.png"
    status = main(["check", "--prior", str(table), "--model", "mats2024", "--plot", str(plot)])
    out, _ = capsys.readouterr()
    assert status == 0 and plot.stat().st_size > 0
    assert "model mats2024, before any data" in out and "below_1e-05" in out
    status = main(["check", "--prior", str(table), "--model", "mats2024", "--format", "csv"])
    out, _ = capsys.readouterr()
    pairs = pd.read_csv(io.StringIO(out))
    assert list(pairs["task"]) == ["t0", "t1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prior", "{table}"], "--model: name the model whose priors to check"),
        (["--prior", "{table}", "--model", "mats2024", "--threshold", "0"], "--threshold:"),
        (["--prior", "{table}", "--model", "mats2024", "--level", "0.3"], "--level: 0.3"),
        (["--prior", "{table}", "--model", "mats2024", "--plot", "x.pdf"], "must end in .png"),
        (["{table}", "--model", "mats2024"], "--model: applies with --prior only"),
    ],
)
def test_bad_prior_check_arguments_are_one_line(tmp_path, capsys, args, message):
    table = tmp_path / "milestones.csv"
    _milestones().to_csv(table, index=False)
    status = main(["check", *(a.format(table=table) for a in args)])
    _, err = capsys.readouterr()
    assert status == 2
    assert message in err and len(err.strip().splitlines()) == 1, err
