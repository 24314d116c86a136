"""Backtests of forecasts of later agents (``bayes_eval.checks.backtest``): the cut-offs,
METR's extrapolated forecast worked by hand, and the command line on a crossed model."""

import io

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from bayes_eval.checks.backtest import BACKTEST_COLUMNS, backtest, backtest_sentence, read_backtest
from bayes_eval.cli.main import main
from bayes_eval.crossed.metr_method import metr_horizons
from bayes_eval.errors import InputError
from bayes_eval.evidence.table import load_evidence


def _design(seed=0, agents=6, families=6):
    """Agents a year apart whose ability rises with the date, tasks of 1 to 256 minutes in
    families, 2 to 4 runs per pair, a few pairs never run: the evidence (task lengths and
    families as kept columns) and the agents' table."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in range(families):
        for t in range(3):
            minutes = float(2 ** rng.uniform(0, 8))
            difficulty = 0.7 * np.log2(minutes) + rng.normal(0, 0.5)
            for a in range(agents):
                if rng.random() < 0.1:
                    continue
                n = int(rng.integers(2, 5))
                k = int(rng.binomial(n, special.expit(1.2 * a - 1.5 - 0.5 * difficulty + 2)))
                rows.append((f"a{a}", f"f{f}/t{t}", "end_to_end", k, n, minutes, f"f{f}"))
    columns = ["agent", "task", "method", "successes", "trials", "human_minutes", "task_family"]
    evidence = load_evidence(pd.DataFrame(rows, columns=columns), keep_columns=True)
    agents = pd.DataFrame(
        {
            "agent": [f"a{a}" for a in range(agents)],
            "release_date": [2019 + a for a in range(agents)],
        }
    )
    return evidence, agents


def _cells(evidence):
    table = evidence.table.rename(columns={"human_minutes": "minutes", "task_family": "family"})
    table = table.assign(minutes=pd.to_numeric(table["minutes"]))
    return table[["agent", "task", "family", "minutes", "successes", "trials"]]


def test_cut_offs_leave_enough_later_agents_and_two_earlier_successes():
    evidence, agents = _design()
    result = backtest(evidence, agents, models=(), min_later=3, bootstrap=0)
    assert result.table["cutoff"].tolist() == [2021.0, 2022.0]  # 2 and 3 earlier, 4 and 3 later
    assert result.table["earlier_agents"].tolist() == [2, 3]
    assert result.table["later_agents"].tolist() == [4, 3]
    with pytest.raises(InputError, match="no cut-off leaves 6 later agents"):
        backtest(evidence, agents, models=(), min_later=6, bootstrap=0)


def test_metrs_forecast_is_the_trend_and_the_mean_slope_by_hand():
    """Without a bootstrap, METR's forecast of a later pair is ``Binomial(n, p)``, ``p =
    logistic(b (x - log2 h50(date)))``, ``b`` the earlier agents' mean slope, ``h50(date)``
    their trend line: the log score is the sum of those log pmfs, and a pair is covered at
    a level where its count lies in the central interval of that Binomial."""
    evidence, agents = _design()
    result = backtest(evidence, agents, models=(), min_later=3, bootstrap=0)
    cells = _cells(evidence)
    earlier = cells[cells["agent"].isin(["a0", "a1", "a2"])]
    fits = metr_horizons(earlier, bootstrap=0).agents.set_index("agent")
    fits = fits[fits["successes"] > 0]
    dates = {"a0": 2019.0, "a1": 2020.0, "a2": 2021.0}
    line = np.polyfit([dates[a] for a in fits.index], np.log2(fits["h50"]), 1)
    slope = fits["slope"].mean()
    later = cells[cells["agent"].isin(["a3", "a4", "a5"]) & cells["task"].isin(earlier["task"])]
    year = later["agent"].str[1:].astype(int) + 2019
    p = special.expit(slope * (np.log2(later["minutes"]) - np.polyval(line, year)))
    p = np.clip(p, 1e-12, 1 - 1e-12)
    expected = stats.binom.logpmf(later["successes"], later["trials"], p).sum()
    row = result.table.iloc[1]
    assert row["method"] == "metr" and row["pairs"] == len(later)
    assert row["log_score"] == pytest.approx(expected, rel=1e-9)
    n = later["trials"]  # the central 80% interval: the 10% and 90% quantiles
    low, high = stats.binom.ppf(0.1, n, p), stats.binom.ppf(0.9, n, p)
    covered = (low <= later["successes"]) & (later["successes"] <= high)
    assert row["covered_80"] == pytest.approx(covered.mean())


def test_bad_input_is_one_located_line(tmp_path, capsys):
    evidence, agents = _design()
    with pytest.raises(InputError, match="agents: no release_date for a5"):
        backtest(evidence, agents.iloc[:5], models=(), bootstrap=0)
    with pytest.raises(InputError, match="no column 'released' \\(--by\\)"):
        backtest(evidence, agents, by="released", models=(), bootstrap=0)
    mixed = agents.astype({"release_date": object})
    mixed.loc[2, "release_date"] = "soon"
    with pytest.raises(
        InputError, match="row 4, column release_date: 'soon' is not a decimal number or an ISO"
    ):
        backtest(evidence, mixed, models=(), bootstrap=0)
    plain = load_evidence(evidence.table[["agent", "task", "method", "successes", "trials"]])
    with pytest.raises(InputError, match="no column human_minutes"):
        backtest(plain, agents, models=(), bootstrap=0)


@pytest.mark.slow
def test_the_command_scores_a_crossed_model_beside_metrs_method(tmp_path, capsys):
    """``bayes-eval backtest`` with ``time_horizon`` (real fits, one per cut-off): a row
    per cut-off and method, the model's forecasts from its fit to the earlier agents,
    whose diagnostics are reported; the pairs' file written."""
    evidence, agents = _design()
    columns = ["agent", "task", "method", "successes", "trials", "human_minutes", "task_family"]
    evidence.table[columns].to_csv(tmp_path / "runs.csv", index=False)
    agents.to_csv(tmp_path / "agents.csv", index=False)
    args = ["backtest", str(tmp_path / "runs.csv"), "--agents", str(tmp_path / "agents.csv")]
    args += ["--keep-columns", "--bootstrap", "50", "--format", "csv", "--out", str(tmp_path / "b")]
    assert main(args) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert table["method"].tolist() == ["metr", "time_horizon"] * 2
    model = table[table["method"] == "time_horizon"]
    assert model["diagnostics_ok"].all()
    assert (model["pairs"] == table[table["method"] == "metr"]["pairs"].to_numpy()).all()
    pairs = pd.read_csv(tmp_path / "b" / "backtest_pairs.csv")
    assert len(pairs) == table["pairs"].sum()


def test_a_model_that_cannot_predict_a_new_agent_is_refused():
    evidence, agents = _design()
    for model in ("crossed", "end_to_end"):
        with pytest.raises(InputError, match=f"models: {model} cannot predict a later agent"):
            backtest(evidence, agents, models=(model,), bootstrap=0)


def test_the_reports_sentence_reads_the_backtests_table(tmp_path):
    """How a model's forecasts held, from the table ``backtest --out`` writes: each
    interval's coverage from its least to its most across cut-offs, the summed log score
    beside METR's method's, and the fits that failed their diagnostics."""
    rows = [
        (2023.0, "metr", 3, 4, 50, -120.0, 0.3, 0.5, 0.7, 4.0, ""),
        (2023.0, "time_horizon", 3, 4, 50, -80.0, 0.6, 0.9, 1.0, 1.0, "True"),
        (2024.0, "metr", 4, 3, 40, -90.5, 0.4, 0.6, 0.8, 3.0, ""),
        (2024.0, "time_horizon", 4, 3, 40, -60.3, 0.7, 0.9, 0.95, 1.5, "False"),
    ]
    pd.DataFrame(rows, columns=list(BACKTEST_COLUMNS)).to_csv(tmp_path / "backtest.csv")
    text = backtest_sentence(read_backtest(tmp_path), "time_horizon")
    assert text == (
        f"How such forecasts have held: in the backtest ({tmp_path / 'backtest.csv'}), "
        "time_horizon fitted to the agents released before each of 2 cut-off(s) and scored "
        "on the later agents' runs covered 50% intervals 60% to 70%, 80% intervals 90%, 95% "
        "intervals 95% to 100% of the held-out pairs' counts (log score -140.3; METR's "
        "method extrapolated: -210.5, 50% intervals 30% to 40%, 80% intervals 50% to 60%, "
        "95% intervals 70% to 80%); 1 of its fits failed their diagnostics."
    )
    assert "holds no row of crossed" in backtest_sentence(read_backtest(tmp_path), "crossed")
    (tmp_path / "other.csv").write_text("cutoff,method\n2023,metr\n")
    with pytest.raises(InputError, match="other.csv: row 1: no column earlier_agents"):
        read_backtest(tmp_path / "other.csv")


def test_a_task_length_that_is_not_a_number_is_located():
    evidence, agents = _design()
    table = evidence.table[["agent", "task", "method", "successes", "trials", "task_family"]]
    table = table.assign(human_minutes=["ten", *evidence.table["human_minutes"].iloc[1:]])
    broken = load_evidence(table, keep_columns=True)
    with pytest.raises(InputError, match="row 2, column human_minutes: 'ten' is not a positive"):
        backtest(broken, agents, models=(), bootstrap=0)


@pytest.mark.slow
def test_a_spec_given_by_path_is_labelled_by_its_name(tmp_path):
    """The rows of a model given as a spec file carry the spec's own name, the name
    ``report --backtest`` looks for."""
    import bayes_eval

    path = tmp_path / "mine.toml"
    path.write_text(bayes_eval.shipped_specs()["time_horizon"].read_text())
    evidence, agents = _design()
    result = backtest(evidence, agents, models=(str(path),), min_later=4, bootstrap=0)
    assert set(result.table["method"]) == {"metr", "time_horizon"}
