"""Run-level files (per-run tables, METR's CSV and JSON Lines, tau-bench): counted by
hand, the same evidence from every route, and bad values located."""

import json
from pathlib import Path

import pandas as pd
import pytest

from bayes_eval import InputError, load_evidence, read_runs
from bayes_eval.cli.main import main
from bayes_eval.evidence.runs import run_rows
from bayes_eval.messages import collected

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

METR = """agent,task,task_family,run_id,success,score,human_minutes
A,t1/main,t1,r1,1,0.9,10
A,t1/main,t1,r2,0,0.1,10.0
A,t2/main,t2,r3,0,0.0,30
B,t1/main,t1,r4,1,1.0,10
"""
# The same four runs with the fields METR's all_runs.jsonl names them by.
METR_JSONL = [
    {"run_id": "r1", "task_id": "t1/main", "alias": "A", "score_binarized": 1, "score": 0.9,
     "human_minutes": 10.0, "task_family": "t1", "model": "a"},
    {"run_id": "r2", "task_id": "t1/main", "alias": "A", "score_binarized": 0, "score": 0.1,
     "human_minutes": 10, "task_family": "t1", "model": "a"},
    {"run_id": "r3", "task_id": "t2/main", "alias": "A", "score_binarized": 0, "score": 0.0,
     "human_minutes": 30, "task_family": "t2", "model": "a"},
    {"run_id": "r4", "task_id": "t1/main", "alias": "B", "score_binarized": 1, "score": 1.0,
     "human_minutes": 10, "task_family": "t1", "model": "b"},
]  # fmt: skip


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def _counts(evidence):
    table = evidence.table.set_index(["agent", "task", "method", "step"])
    return {key: (int(r.successes), int(r.trials)) for key, r in table.iterrows()}


def test_metr_runs_are_counted_per_cell(tmp_path):
    (tmp_path / "runs.csv").write_text(METR)
    evidence = read_runs(tmp_path / "runs.csv", "metr")
    assert _counts(evidence) == {
        ("A", "t1/main", "end_to_end", -1): (1, 2),
        ("A", "t2/main", "end_to_end", -1): (0, 1),
        ("B", "t1/main", "end_to_end", -1): (1, 1),
    }
    # human minutes ride along per task, written alike whether the file said 10 or 10.0
    assert set(evidence.table["human_minutes"]) == {"10.0", "30.0"}


def test_metr_jsonl_gives_the_same_evidence_as_the_compacted_csv(tmp_path):
    (tmp_path / "runs.csv").write_text(METR)
    jsonl = _jsonl(tmp_path / "all_runs.jsonl", METR_JSONL)
    assert read_runs(jsonl, "metr-jsonl").hash == read_runs(tmp_path / "runs.csv", "metr").hash


def test_per_run_table_with_milestone_steps_and_run_ids(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text(
        "agent,task,step,run,success,notes\n"
        "A,t1,,r1,1,x\nA,t1,,r2,0,\nA,t1,1,m1,1,\nA,t1,1,m2,1,\nA,t1,2,m3,0,\n,t2,,r9,true,\n"
    )
    with collected() as notes:
        evidence = read_runs(path)
    assert _counts(evidence) == {
        ("A", "t1", "end_to_end", -1): (1, 2),
        ("A", "t1", "milestone", 1): (2, 2),
        ("A", "t1", "milestone", 2): (0, 1),
        ("agent", "t2", "end_to_end", -1): (1, 1),
    }
    assert notes == [f"{path}: ignored column notes (not part of the runs format)"]


def test_per_run_parquet_numbers_rows_as_a_spreadsheet(tmp_path):
    frame = pd.DataFrame({"task": ["a", "b", "c"], "success": [1, 0, 2]})
    frame.to_parquet(tmp_path / "runs.parquet")
    with pytest.raises(InputError, match=r"row 4, column success: '2' is not 0/1"):
        read_runs(tmp_path / "runs.parquet")


def test_taubench_takes_the_agent_name(tmp_path):
    (tmp_path / "tau.csv").write_text("task_id,trial,reward\n0,0,1.0\n0,1,0.0\n1,0,0\n")
    runs = run_rows(tmp_path / "tau.csv", "taubench", agent="gpt-4o")
    assert list(runs["agent"].unique()) == ["gpt-4o"]
    assert list(runs["success"]) == [1, 0, 0]
    assert _counts(read_runs(tmp_path / "tau.csv", "taubench"))[("tau", "0", "end_to_end", -1)] == (
        1,
        2,
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (METR.replace(",success,", ",outcome,"), "row 1: required column (metr) 'success' is"),
        (METR.replace("r2,0,", "r2,0.5,"), "row 3, column success: '0.5' is not 0/1"),
        (METR.replace("B,t1", ",t1"), "row 5, column agent: agent is empty"),
        (METR.replace("r3", "r1").replace("A,t2/main", "A,t1/main"), "row 4, column run_id: "),
        (METR.replace("r2,0,0.1", "r2,,0.1"), "row 3, column success: success is empty"),
    ],
)
def test_bad_run_files_are_located(tmp_path, text, message):
    (tmp_path / "runs.csv").write_text(text)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_runs(tmp_path / "runs.csv", "metr")


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"alias": "A", "task_id": "t", "score_binarized": 1, "run_id": "r"', ""], "line 1: not"),
        (['{"alias": "A", "task_id": "t", "run_id": "r"}'], "line 1, field score_binarized: miss"),
        (["", '{"alias": "A", "task_id": "t", "score_binarized": 3, "run_id": "r"}'], "line 2, co"),
        (["[1, 2]"], "line 1: not a JSON object"),
    ],
)
def test_bad_metr_jsonl_is_located_by_line(tmp_path, lines, message):
    (tmp_path / "all_runs.jsonl").write_text("\n".join(lines))
    with pytest.raises(InputError, match=message):
        read_runs(tmp_path / "all_runs.jsonl", "metr-jsonl")


def test_cluster_column_keeps_counts_per_cluster(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("task,success,seed\nt,1,s1\nt,1,s1\nt,0,s2\nu,0,s1\n")
    evidence = read_runs(path, cluster="seed")
    assert _counts(evidence)[("agent", "t", "end_to_end", -1)] == (2, 3)  # the totals
    clusters = evidence.clusters.set_index(["task", "cluster"])
    assert tuple(clusters.loc[("t", "s1"), ["successes", "trials"]]) == (2, 2)
    assert tuple(clusters.loc[("t", "s2"), ["successes", "trials"]]) == (0, 1)
    assert tuple(clusters.loc[("u", "s1"), ["successes", "trials"]]) == (0, 1)
    path.write_text("task,success,seed\nt,1,s1\nt,1,\n")
    with pytest.raises(InputError, match="row 3, column seed: cluster is empty"):
        read_runs(path, cluster="seed")
    with pytest.raises(InputError, match="row 1: the --cluster column 'day' is missing"):
        read_runs(path, cluster="day")


def test_cli_reads_runs_and_metr_jsonl(tmp_path, capsys):
    (tmp_path / "runs.csv").write_text("agent,task,success\nA,t,1\nA,t,0\nA,u,0\n")
    assert main(["fit", str(tmp_path / "runs.csv"), "--runs", "--model", "end_to_end",
                 "--format", "csv"]) == 0  # fmt: skip
    summary = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    assert list(summary["task"]) == ["t", "u"]
    # Beta(1, 1) prior, 1 of 2: the posterior mean 2/4
    assert summary.loc[0, "mean"] == pytest.approx(0.5)
    jsonl = _jsonl(tmp_path / "all_runs.jsonl", METR_JSONL)
    for args in (["--format", "metr-jsonl"], [], ["--from", "metr-jsonl", "--format", "json"]):
        assert main(["fit", str(jsonl), "--model", "end_to_end", *args]) == 0
        assert "t1/main" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--runs", "--scorer", "x"], "--scorer: applies to Inspect logs, not to runs input"),
        (["--runs", "--sum-duplicates"], "--sum-duplicates: applies to an evidence table"),
        (["--cluster", "seed"], "--cluster: applies to run files and Inspect logs"),
        (["--from", "runs", "--format", "metr"], "--format metr and --from runs: give the"),
    ],
)
def test_cli_reading_options_out_of_place_are_one_line(tmp_path, capsys, args, message):
    (tmp_path / "runs.csv").write_text("agent,task,success\nA,t,1\n")
    assert main(["fit", str(tmp_path / "runs.csv"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data folder absent")
def test_real_metr_runs_load_whole():
    evidence = read_runs(SHARED / "metr_runs.csv", "metr")
    assert evidence.table["trials"].sum() == 7063 == evidence.table["n_rows"].sum()
    assert evidence.table["agent"].nunique() == 11
    raw = pd.read_csv(SHARED / "metr_runs.csv")
    by_hand = raw.groupby(["agent", "task"])["success"].agg(["sum", "count"])
    table = evidence.table.set_index(["agent", "task"])[["successes", "trials"]]
    assert (table.loc[by_hand.index].to_numpy() == by_hand.to_numpy()).all()


def test_load_evidence_takes_the_counted_runs(tmp_path):
    (tmp_path / "runs.csv").write_text(METR)
    evidence = read_runs(tmp_path / "runs.csv", "metr")
    assert load_evidence(evidence) is evidence
