"""Run-level loaders (METR, tau-bench): rows kept one per run, bad values located."""

from pathlib import Path

import pytest

from bayes_eval import InputError, load_evidence
from bayes_eval.external import load_runs

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

METR = """agent,task,task_family,run_id,success,score,human_minutes
A,t1/main,t1,r1,1,0.9,10
A,t1/main,t1,r2,0,0.1,10
A,t2/main,t2,r3,0,0.0,30
B,t1/main,t1,r4,1,1.0,10
"""


def test_metr_runs_become_end_to_end_evidence(tmp_path):
    (tmp_path / "runs.csv").write_text(METR)
    runs = load_runs(tmp_path / "runs.csv", "metr")
    assert len(runs) == 4 and set(runs["method"]) == {"end_to_end"}
    table = load_evidence(runs).table.set_index(["agent", "task"])
    assert tuple(table.loc[("A", "t1/main"), ["successes", "trials"]]) == (1, 2)
    assert tuple(table.loc[("B", "t1/main"), ["successes", "trials"]]) == (1, 1)


def test_taubench_takes_the_agent_name(tmp_path):
    (tmp_path / "tau.csv").write_text("task_id,trial,reward\n0,0,1.0\n0,1,0.0\n1,0,0\n")
    runs = load_runs(tmp_path / "tau.csv", "taubench", agent="gpt-4o")
    assert list(runs["agent"].unique()) == ["gpt-4o"]
    assert list(runs["success"]) == [1, 0, 0]


@pytest.mark.parametrize(
    "text, message",
    [
        (METR.replace(",success,", ",outcome,"), "missing column success (metr format)"),
        (METR.replace("r2,0,", "r2,0.5,"), "row 3, column success: '0.5' is not 0 or 1"),
        (METR.replace("B,t1", ",t1"), "row 5, column agent: empty value"),
    ],
)
def test_bad_run_files_are_located(tmp_path, text, message):
    (tmp_path / "runs.csv").write_text(text)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_runs(tmp_path / "runs.csv", "metr")


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data folder absent")
def test_real_metr_runs_load_whole():
    runs = load_runs(SHARED / "metr_runs.csv", "metr")
    assert len(runs) == 7063 and runs["agent"].nunique() == 11
    assert load_evidence(runs).table["n_rows"].sum() == 7063  # nothing dropped
