"""The crossed model on METR's runs (``studies/crossed_metr.py``): the issue's criteria,
under ``slow`` (three fits, about three minutes) and only where ``../shared/data`` is."""

from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parents[2] / "shared" / "data"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "metr_runs.csv").is_file(), reason="needs ../shared/data"),
]


def test_the_crossed_model_on_metr_runs(load_study):
    study = load_study("crossed_metr")
    results = study.run(DATA / "metr_runs.csv", DATA / "metr_release_dates.csv", seed=16)
    figures = study.summary(results)
    assert figures["diagnostics_ok"]
    assert figures["coverage_0.9"] >= 0.85
    assert figures["crossed"] > figures["pooled"]
    # no meaningless point: every horizon finite, its interval wide where successes are few
    agents = results["full_horizons"].agents
    assert np.isfinite(agents[["h50_lower", "h50", "h50_upper"]].to_numpy()).all()
    few = agents[agents["successes"] <= 3]
    assert len(few) and ((few["h50_upper"] / few["h50_lower"]) > 100).all()
    # data-rich agents within a factor of 2 of the logistic fit, or the difference named
    rich = results["comparison"][results["comparison"]["data_rich"]]
    outside = rich[(rich["ratio"] < 0.5) | (rich["ratio"] > 2)]
    assert (outside["reason"] != "").all()
    latest = results["latest"]
    left_out = latest.iloc[0]
    assert left_out["h50_lower"] < latest.iloc[1]["h50"] < left_out["h50_upper"]
