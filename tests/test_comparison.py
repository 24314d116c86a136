"""Comparing fits by leave-one-cell-out predictive density (``checks.comparison``)."""

import io

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval.checks.comparison import compare

SMALL = {"draws": 300, "tune": 300, "chains": 2}


def _pooled_truth(seed=3, agents=3, tasks=30):
    """One trial per cell, rates drawn from one Beta(2, 18) population: the pooled model's
    own family, where sharing strength across tasks must predict a held-out cell better
    than a uniform prior per cell."""
    rng = np.random.default_rng(seed)
    rows = [
        (f"agent{a}", f"task{t:02d}", int(rng.random() < rng.beta(2, 18)), 1)
        for a in range(agents)
        for t in range(tasks)
    ]
    return pd.DataFrame(rows, columns=["agent", "task", "successes", "trials"]).assign(
        method="end_to_end"
    )


def test_pooling_predicts_held_out_cells_of_a_shared_population_better():
    table = _pooled_truth()
    exact = bayes_eval.fit(table, "end_to_end")
    pooled = bayes_eval.fit(table, "end_to_end_pooled", sampler=SMALL, seed=2)
    result = compare({"end_to_end": exact, "end_to_end_pooled": pooled})
    table_ = result.table
    assert list(table_.index) == ["end_to_end_pooled", "end_to_end"]
    # one trial under a uniform prior: each held-out outcome has probability 1/2, exactly
    assert table_.at["end_to_end", "elpd"] == pytest.approx(90 * np.log(0.5), rel=1e-12)
    assert table_.at["end_to_end", "loo"] == "exact" and table_.at["end_to_end", "high_k"] == 0
    assert table_.at["end_to_end_pooled", "loo"] == "PSIS"
    assert (table_["cells"] == 90).all()
    diff, dse = table_.at["end_to_end", "elpd_diff"], table_.at["end_to_end", "dse"]
    assert diff < -2 * dse  # clearly worse, not noise
    assert table_["weight"].sum() == pytest.approx(1.0)
    assert result.sentence.startswith(
        "end_to_end_pooled predicts held-out cells best (90 cells shared); end_to_end "
        "predicts worse by"
    )
    assert list(result.pointwise.columns[:2]) == [
        "elpd_loo end_to_end",
        "elpd_loo end_to_end_pooled",
    ]
    assert "pareto_k end_to_end_pooled" in result.pointwise


@pytest.mark.slow
def test_a_cell_psis_cannot_estimate_is_refitted_exactly():
    """Eight tasks at 0 of 12 and one at 12 of 12: leaving the outlier out moves the
    pooled posterior too far for PSIS (Pareto k above 0.7), so ``compare`` refits
    without its trials. Its ``elpd_loo`` agrees with the same quantity computed here
    independently: the model fitted to the other eight rows alone, and the outlier scored
    as a new task, ``log mean_d BetaBinomial(12 | 12, mu_d kappa_d, (1 - mu_d) kappa_d)``,
    within the Monte Carlo error of two fits of 8,000 and 10,000 draws (about 0.06, seen
    over seeds)."""
    from scipy import special, stats

    rows = [("a", f"t{t}", 0, 12) for t in range(8)] + [("a", "t8", 12, 12)]
    table = pd.DataFrame(rows, columns=["agent", "task", "successes", "trials"])
    table = table.assign(method="end_to_end")
    sampler = {"draws": 4000, "tune": 1000, "chains": 2}
    pooled = bayes_eval.fit(table, "end_to_end_pooled", sampler=sampler, seed=1)
    result = compare({"pooled": pooled, "exact": bayes_eval.fit(table, "end_to_end")})
    assert result.table.at["pooled", "refits"] == 1 and result.table.at["pooled", "high_k"] == 0
    outlier = "a / t8 / end_to_end"
    assert result.pointwise.at[outlier, "refit pooled"]
    assert result.pointwise.at[outlier, "pareto_k pooled"] > 0.7
    rest = bayes_eval.fit(
        table[table.task != "t8"], "end_to_end_pooled", sampler={**sampler, "draws": 5000}, seed=7
    )
    mu, kappa = (rest.draws[name].values.ravel() for name in ("mu", "kappa"))
    log_p = stats.betabinom.logpmf(12, 12, mu * kappa, (1 - mu) * kappa)
    independent = special.logsumexp(log_p) - np.log(log_p.size)
    assert result.pointwise.at[outlier, "elpd_loo pooled"] == pytest.approx(independent, abs=0.25)


def test_no_refit_leaves_a_cell_psis_cannot_estimate_to_high_k(tmp_path, capsys):
    """The outlier of the refit test above, from run folders, with ``--no-refit``: no fit
    is made, the cell is counted in ``high_k``; ``--no-refit`` with ``--holdout`` is
    refused."""
    from bayes_eval.cli.main import main

    rows = [("a", f"t{t}", 0, 12) for t in range(8)] + [("a", "t8", 12, 12)]
    table = pd.DataFrame(rows, columns=["agent", "task", "successes", "trials"])
    table = table.assign(method="end_to_end")
    sampler = {"draws": 2000, "tune": 1000, "chains": 2}
    bayes_eval.run(table, "end_to_end_pooled", sampler=sampler, seed=1, out=tmp_path / "pooled")
    bayes_eval.run(table, "end_to_end", out=tmp_path / "exact")
    runs = [str(tmp_path / "pooled"), str(tmp_path / "exact")]
    assert main(["compare", *runs, "--no-refit", "--format", "csv"]) == 0
    ranked = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("model")
    assert ranked.at["pooled", "refits"] == 0 and ranked.at["pooled", "high_k"] == 1
    csv = tmp_path / "table.csv"
    table.to_csv(csv, index=False)
    args = ["compare", str(csv), "--holdout", "end_to_end", "--no-refit"]
    assert main([*args, "--models", "end_to_end", "end_to_end_pooled"]) == 2
    assert "--no-refit: applies to the leave-one-out comparison" in capsys.readouterr().err


def test_fits_of_different_evidence_share_no_cell_and_are_refused():
    example = bayes_eval.shipped_datasets()["example_evidence"]
    fits = {"a": bayes_eval.fit(example, "mats2024"), "b": bayes_eval.fit(example, "end_to_end")}
    with pytest.raises(bayes_eval.InputError, match=r"^fits: model \w \(\w+\) shares no"):
        compare(fits)
    with pytest.raises(bayes_eval.InputError, match="^fits: give two fits or more"):
        compare({"a": fits["a"]})


def test_an_improper_prior_leaves_out_the_cells_it_cannot_predict():
    """Haldane's prior predicts no unseen cell: phuong2024 shares none with a proper one."""
    table = pd.DataFrame(
        dict(task="t", method="milestone", step=[1, 2], successes=[1, 2], trials=[3, 4])
    )
    fits = {
        "haldane": bayes_eval.fit(table, "phuong2024"),
        "uniform": bayes_eval.fit(table, "mats2024"),
    }
    with pytest.raises(
        bayes_eval.InputError,
        match=r"model haldane \(phuong2024\) shares no.*"
        r"an improper prior predicts no cell it has not seen \(haldane on 2\)",
    ):
        compare(fits)


def test_the_command_ranks_run_folders_and_the_true_prior_wins(tmp_path, capsys):
    """Two exact fits of the same cells, written as run folders: the prior the rates were
    drawn from, Beta(2, 18), predicts held-out cells better than a uniform one; the
    command reads the folders and says so."""
    from bayes_eval.cli.main import main
    from bayes_eval.resources import shipped_dir

    shipped = (shipped_dir("models") / "end_to_end.toml").read_text()
    truth = tmp_path / "truth.toml"
    truth.write_text(
        shipped.replace('name = "end_to_end"', 'name = "true_prior"')
        .replace("alpha = 1.0", "alpha = 2.0")
        .replace("beta = 1.0", "beta = 18.0")
    )
    table = _pooled_truth()
    for name, model in (("uniform", "end_to_end"), ("true_prior", str(truth))):
        bayes_eval.run(table, model, out=tmp_path / name)
    args = ["compare", str(tmp_path / "uniform"), str(tmp_path / "true_prior")]
    assert main([*args, "--format", "csv"]) == 0
    ranked = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert ranked["model"].tolist() == ["true_prior", "uniform"]
    k = table["successes"].to_numpy()
    # held-out one-trial cells: P(1) = a / (a + b) under Beta(a, b), exactly
    expected = np.sum(np.where(k == 1, np.log(2 / 20), np.log(18 / 20)))
    assert ranked.loc[0, "elpd"] == pytest.approx(expected, rel=1e-12)
    assert main(args) == 0
    assert "true_prior predicts held-out cells best (90 cells shared)" in capsys.readouterr().out
    csv = tmp_path / "table.csv"
    table.to_csv(csv, index=False)  # the same fits, made by the command
    assert main(["compare", str(csv), "--models", "end_to_end", str(truth), "--format", "csv"]) == 0
    again = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert again["model"].tolist() == ["true_prior", "end_to_end"]
    assert again["elpd"].tolist() == pytest.approx(ranked["elpd"].tolist(), rel=1e-12)
    assert main([*args, "--models", "end_to_end"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "compare run folders alone" in err
