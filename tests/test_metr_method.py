"""METR's published horizon method (``bayes_eval.crossed.metr_method``) against independent
computations: scikit-learn's logistic regression on one row per run with METR's run
weights (as METR's code fits it), a run-level implementation of METR's hierarchical
bootstrap, and, where ``../shared/data`` holds METR's public runs, the horizons and
doubling time of those runs."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayes_eval.crossed.metr_method import logistic_fit, metr_horizons, task_weights
from bayes_eval.errors import InputError

sklearn = pytest.importorskip("sklearn", reason="scikit-learn (the test extra)")
from sklearn.linear_model import LogisticRegression  # noqa: E402

RUNS = Path(__file__).resolve().parents[2] / "shared" / "data" / "metr_runs.csv"
DATES = RUNS.with_name("metr_release_dates.csv")


def _simulated(seed=3, agents=3, families=8) -> pd.DataFrame:
    """Runs of agents on task families: success logistic in log2 minutes, a family effect
    and 2 to 9 runs per (agent, task), as ragged as METR's."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in range(families):
        effect = rng.normal(0, 0.7)
        for t in range(rng.integers(1, 5)):
            minutes = 2 ** rng.uniform(0, 9)
            for a in range(agents):
                logit = 2.0 + 1.5 * a - 0.6 * np.log2(minutes) + effect
                for _ in range(rng.integers(2, 10)):
                    success = rng.random() < 1 / (1 + np.exp(-logit))
                    rows.append((f"a{a}", f"f{f}/t{t}", f"f{f}", minutes, int(success)))
    return pd.DataFrame(rows, columns=["agent", "task", "family", "minutes", "success"])


def _cells(runs: pd.DataFrame) -> pd.DataFrame:
    return (
        runs.groupby(["agent", "task"], sort=False)
        .agg(
            family=("family", "first"),
            minutes=("minutes", "first"),
            successes=("success", "sum"),
            trials=("success", "size"),
        )
        .reset_index()
    )


def _run_weights(runs: pd.DataFrame, weighting: str) -> np.ndarray:
    """METR's per-run weights (its compute_task_weights): 1 / runs of the task, times 1 /
    sqrt(tasks of the family) for invsqrt, normalised to 1 per agent."""
    per_task = runs.groupby(["agent", "task"])["success"].transform("size")
    weight = 1 / per_task
    if weighting == "invsqrt":
        tasks = runs.drop_duplicates(["agent", "task"])
        size = tasks.groupby(["agent", "family"])["task"].size().rename("size")
        weight = weight / np.sqrt(runs.join(size, on=["agent", "family"])["size"])
    return (weight / weight.groupby(runs["agent"]).transform("sum")).to_numpy()


def _sklearn_horizons(runs, weighting, regularization) -> dict:
    """Per agent ``(a, b)`` of scikit-learn's fit to one row per run, as METR fits it."""
    weights = _run_weights(runs, weighting)
    out = {}
    for agent, mine in runs.groupby("agent"):
        if mine["success"].sum() == 0:
            continue
        strength = 1 / regularization if regularization else np.inf  # C = inf: no penalty
        model = LogisticRegression(C=strength, tol=1e-12, max_iter=100_000)
        x = np.log2(mine[["minutes"]].to_numpy())
        model.fit(x, mine["success"], sample_weight=weights[mine.index])
        out[agent] = (model.intercept_[0], model.coef_[0, 0])
    return out


@pytest.mark.parametrize("weighting", ["invsqrt", "equal"])
@pytest.mark.parametrize("regularization", [0.1, 0.01])
def test_the_fit_is_scikit_learns_on_one_row_per_run(weighting, regularization):
    """The counts' fit equals scikit-learn's on METR's run rows and weights, to 1e-6."""
    runs = _simulated()
    cells = _cells(runs)
    weights = task_weights(cells, weighting)
    expected = _sklearn_horizons(runs, weighting, regularization)
    for agent, (a, b) in expected.items():
        rows = (cells["agent"] == agent).to_numpy()
        mine = cells[rows]
        y = mine["successes"] / mine["trials"]
        got = logistic_fit(np.log2(mine["minutes"]), y, weights[rows], regularization)
        assert got == pytest.approx((a, b), rel=1e-6, abs=1e-8)


def test_horizons_are_the_fitted_line_at_50_and_80_percent():
    """``h_q = 2^((logit(q) - a) / b)``: success at the horizon is ``q``, by hand."""
    result = metr_horizons(_cells(_simulated()), bootstrap=0)
    for row in result.agents.itertuples():
        for q, h in ((0.5, row.h50), (0.8, row.h80)):
            assert 1 / (1 + np.exp(-(row.intercept + row.slope * np.log2(h)))) == pytest.approx(q)
    assert result.agents["h50_lower"].isna().all()  # no bootstrap, no interval


def _run_level_bootstrap(runs, weights, regularization, replicates, rng) -> np.ndarray:
    """METR's bootstrap on run rows (its wrangle/bootstrap.py): families with replacement,
    the tasks of each drawn family with replacement, then each (task, agent)'s runs with
    replacement (a task drawn twice: its runs pooled and drawn twice as many times);
    weights kept. The 50% horizon of agent a1 per replicate (the other agents' rows do not
    change it)."""
    tasks_of = {f: runs.loc[runs["family"] == f, "task"].unique() for f in runs["family"].unique()}
    mine = runs[runs["agent"] == "a1"]
    rows_of = {t: np.flatnonzero((mine["task"] == t).to_numpy()) for t in mine["task"].unique()}
    x, y = np.log2(mine["minutes"].to_numpy()), mine["success"].to_numpy()
    w = weights[mine.index]
    families = list(tasks_of)
    out = []
    for _ in range(replicates):
        drawn = {}
        for f in rng.choice(len(families), size=len(families)):
            tasks = tasks_of[families[f]]
            for task in rng.choice(tasks, size=len(tasks)):
                drawn[task] = drawn.get(task, 0) + 1
        picked = []
        for task, times in drawn.items():
            pool = np.tile(rows_of.get(task, np.array([], dtype=int)), times)
            picked.append(pool[rng.integers(0, len(pool), size=len(pool))] if len(pool) else pool)
        rows = np.concatenate(picked)
        if len(np.unique(y[rows])) < 2:
            out.append(np.nan)
            continue
        a, b = logistic_fit(x[rows], y[rows], w[rows], regularization)
        out.append(2 ** (-a / b))
    return np.array(out)


def _quantile_error(values: np.ndarray, p: float) -> float:
    """The Monte Carlo standard error of the ``p`` quantile of ``values``: ``sqrt(p (1 -
    p) / n) / density``, the density read off the sample's quantiles at ``p +- 0.05``."""
    values = values[np.isfinite(values)]
    low, high = np.quantile(values, [p - 0.05, p + 0.05])
    return (high - low) / 0.1 * np.sqrt(p * (1 - p) / len(values))


def test_the_bootstrap_on_counts_is_metrs_on_runs():
    """The counts' bootstrap (binomial draws of a drawn task's runs) against METR's
    resampling of run rows, 400 replicates each: the 10% and 90% quantiles of agent a1's
    log2 50% horizon agree within four Monte Carlo standard errors of their difference."""
    runs = _simulated(seed=5, families=20)
    weights = _run_weights(runs, "invsqrt")
    brute = np.log2(_run_level_bootstrap(runs, weights, 0.1, 400, np.random.default_rng(1)))
    result = metr_horizons(_cells(runs), bootstrap=400, seed=2, interval=0.8)
    row = result.agents.set_index("agent").loc["a1"]
    expected = np.nanquantile(brute, [0.1, 0.9])
    assert 0.3 < expected[1] - expected[0]  # a bootstrap that varies, as a test of it needs
    for p, got in ((0.1, row["h50_lower"]), (0.9, row["h50_upper"])):
        error = np.sqrt(2) * _quantile_error(brute, p)  # the two samples' errors alike
        assert abs(np.log2(got) - np.nanquantile(brute, p)) < 4 * error


def test_an_agent_without_success_has_no_horizon_and_no_place_in_the_trend():
    runs = _simulated()
    runs.loc[runs["agent"] == "a0", "success"] = 0
    dates = pd.Series({"a0": 2022.0, "a1": 2023.0, "a2": 2024.0})
    result = metr_horizons(_cells(runs), dates, bootstrap=50)
    row = result.agents.set_index("agent").loc["a0"]
    assert np.isnan(row["h50"]) and np.isnan(row["h50_lower"])
    assert result.trend.iloc[0]["agents"] == 2
    assert any("a0: no success" in note for note in result.notes)
    # the trend: the line through the two agents' log2 horizons, by hand
    rows = result.agents.set_index("agent").loc[["a1", "a2"]]
    slope = np.log2(rows["h50"]).diff().iloc[-1] / 1.0
    assert result.trend.iloc[0]["doubling_months"] == pytest.approx(12 / slope)


def test_bad_settings_are_refused():
    cells = _cells(_simulated())
    with pytest.raises(InputError, match="weighting: 'runs' is not one of invsqrt, equal"):
        metr_horizons(cells, weighting="runs")
    with pytest.raises(InputError, match="regularization: -1 is not a number >= 0"):
        metr_horizons(cells, regularization=-1)
    with pytest.raises(InputError, match="cells: no column family"):
        metr_horizons(cells.drop(columns="family"))


@pytest.mark.skipif(not RUNS.exists(), reason="METR's public runs (../shared/data) absent")
@pytest.mark.parametrize(
    ("regularization", "since", "months"),
    [(0.1, None, 1.52), (0.0, None, 3.18), (0.0, 2023.0, 5.06)],
)
def test_metrs_runs_against_scikit_learn(regularization, since, months):
    """On METR's public runs (humans left out): every agent's 50% horizon is scikit-
    learn's on METR's run rows and weights (to 1e-4), and the doubling time is the line
    through those horizons; with METR's regularisation it is 1.5 months on these runs,
    without it 3.2 (5.1 on the agents of 2023 on)."""
    runs = pd.read_csv(RUNS)
    runs = runs[runs["agent"] != "human"].rename(columns={"task_family": "family"})
    runs = runs.rename(columns={"human_minutes": "minutes"}).reset_index(drop=True)
    dates = pd.read_csv(DATES, parse_dates=["release_date"]).set_index("agent")["release_date"]
    years = dates.dt.year + (dates.dt.day_of_year - 1) / 365.25
    result = metr_horizons(
        _cells(runs), years, regularization=regularization, bootstrap=0, since=since
    )
    expected = _sklearn_horizons(runs, "invsqrt", regularization)
    table = result.agents.set_index("agent")
    for agent, (a, b) in expected.items():
        assert table.loc[agent, "h50"] == pytest.approx(2 ** (-a / b), rel=1e-4)
    used = [a for a in expected if since is None or years[a] >= since]
    h50 = np.array([2 ** (-expected[a][0] / expected[a][1]) for a in used])
    slope = np.polyfit(years[used].to_numpy(), np.log2(h50), 1)[0]
    trend = result.trend.iloc[0]
    assert trend["doubling_months"] == pytest.approx(12 / slope, rel=1e-4)
    assert trend["doubling_months"] == pytest.approx(months, abs=0.01)
