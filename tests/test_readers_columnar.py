"""Large run files through pyarrow (``readers.columnar``): the same evidence, notes and
located errors as the row-by-row reader, on random tables (Hypothesis), ragged files and a
large one."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayes_eval import InputError, read_runs
from bayes_eval.evidence import columnar
from bayes_eval.messages import collected


def _row_by_row(monkeypatch):
    """The reference: ``read_runs`` with the columnar path switched off."""
    monkeypatch.setattr(columnar, "read_counts", lambda *args: None)


def _outcome(path, run_format, cluster):
    """(evidence table, clusters, notes) or the error's text."""
    try:
        with collected() as notes:
            evidence = read_runs(path, run_format, cluster=cluster)
    except InputError as exc:
        return str(exc)
    return evidence.table, evidence.clusters, notes, evidence.hash


def _same(fast, slow):
    assert type(fast) is type(slow)
    if isinstance(slow, str):
        assert fast == slow
        return
    pd.testing.assert_frame_equal(fast[0], slow[0])
    if slow[1] is None:
        assert fast[1] is None
    else:
        pd.testing.assert_frame_equal(fast[1], slow[1])
    assert fast[2:] == slow[2:]


def _both(path, monkeypatch, run_format="runs", cluster=None):
    fast = _outcome(path, run_format, cluster)
    with monkeypatch.context() as patch:
        _row_by_row(patch)
        slow = _outcome(path, run_format, cluster)
    _same(fast, slow)
    return fast


# Values as users write them: padded, in other cases, now and then empty or wrong.
SUCCESS = st.sampled_from(["0", "1", "true", "FALSE", " 1", "1.0", "", "yes", "2"])
STEP = st.sampled_from(["", "", "1", "2", "3", " 2 ", "0", "1.5", "x"])
NAMES = st.sampled_from(["a", "b", " a", "", "agent-c"])
TASKS = st.sampled_from(["t1", "t2", "t3", "t1 ", "", "task/4"])
RUNS = st.sampled_from(["", "r1", "r2", "r3", "r4", "r5", "r6", " r7", "r8"])


@st.composite
def run_tables(draw):
    rows = draw(st.integers(1, 12))
    table = pd.DataFrame(
        {
            "agent": draw(st.lists(NAMES, min_size=rows, max_size=rows)),
            "task": draw(st.lists(TASKS, min_size=rows, max_size=rows)),
            "step": draw(st.lists(STEP, min_size=rows, max_size=rows)),
            "success": draw(st.lists(SUCCESS, min_size=rows, max_size=rows)),
            "run": draw(st.lists(RUNS, min_size=rows, max_size=rows)),
            "cluster": draw(
                st.lists(st.sampled_from(["s1", "s2", ""]), min_size=rows, max_size=rows)
            ),
        }
    )
    dropped = draw(st.sets(st.sampled_from(["agent", "step", "run"])))
    return table.drop(columns=sorted(dropped))


CASES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@CASES
@given(table=run_tables(), clustered=st.booleans(), parquet=st.booleans())
def test_random_tables_read_the_same_as_row_by_row(tmp_path_factory, table, clustered, parquet):
    monkeypatch = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("runs") / ("runs.parquet" if parquet else "runs.csv")
    if parquet:
        table.to_parquet(path)
    else:
        table.to_csv(path, index=False)
    cluster = "cluster" if clustered else None
    _both(path, monkeypatch, cluster=cluster)


def test_metr_runs_keep_their_task_fields_in_the_order_seen(tmp_path, monkeypatch):
    path = tmp_path / "metr.csv"
    path.write_text(
        "agent,task,task_family,run_id,success,score,human_minutes\n"
        "A,t1,f1,r1,1,0.9,10\nA,t1,f1,r2,0,0.1,10.0\nA,t1,f2,r5,0,0.1,8\n"
        "A,t2,f2,r3,0,0.0,30\nB,t1,f1,r4,1,1.0,10\n"
    )
    table = _both(path, monkeypatch, run_format="metr")[0]
    first = table[(table["agent"] == "A") & (table["task"] == "t1")].iloc[0]
    assert (first["successes"], first["trials"], first["n_rows"]) == (1, 3, 3)
    assert first["human_minutes"] == "10.0; 8.0"
    assert first["task_family"] == "f1; f2"


@pytest.mark.parametrize(
    "text",
    [
        "task,success\nt1,1\n\nt1,0\n",  # a blank line: the rows after it shift
        'task,success\n"t\n1",1\nt1,0\n',  # a line break inside quotes
        "task,success\nt1,1\nt1,0,3\n",  # a row longer than the header
        "task,success\nt1,1\nt2,maybe\n",
        "task,success,run\nt1,1,r1\nt1,0,r1\n",  # the same run twice
        "task,success,step\nt1,1,1\nt1,0,3\n",  # steps with a gap
        "task,success\n",  # no runs
        "task;success\nt1;1\nt2;0\n",  # semicolons: a note says so
        "\ufefftask,success\r\nt1,1\r\nt2,0",  # a byte-order mark, CRLF, no final newline
    ],
)
def test_ragged_files_read_or_fail_as_row_by_row(tmp_path, monkeypatch, text):
    path = tmp_path / "runs.csv"
    path.write_bytes(text.encode())
    _both(path, monkeypatch)


def test_a_large_file_counts_as_row_by_row_and_names_a_bad_row(tmp_path, monkeypatch):
    """50,000 runs: every cell's counts by hand (numpy) and as the row-by-row reader has
    them; then one bad value near the end, named at its row."""
    rng = np.random.default_rng(17)
    n = 50_000
    agent, task, step = rng.integers(0, 3, n), rng.integers(0, 40, n), rng.integers(0, 4, n)
    success = rng.integers(0, 2, n)
    table = pd.DataFrame(
        {
            "agent": [f"a{i}" for i in agent],
            "task": [f"t{i:02d}" for i in task],
            "step": np.where(step == 0, "", step.astype(str)),
            "success": success,
            "run": [f"r{i}" for i in range(n)],
        }
    )
    path = tmp_path / "runs.csv"
    table.to_csv(path, index=False)
    evidence = _both(path, monkeypatch)[0]
    key = pd.DataFrame({"agent": agent, "task": task, "step": np.where(step == 0, -1, step)})
    expected = key.assign(s=success).groupby(["agent", "task", "step"])["s"].agg(["sum", "size"])
    got = evidence.assign(
        agent=evidence["agent"].str[1:].astype(int), task=evidence["task"].str[1:].astype(int)
    ).set_index(["agent", "task", "step"])[["successes", "trials"]]
    got = got.sort_index()
    assert np.array_equal(got.to_numpy(), expected.sort_index().to_numpy())
    table["success"] = table["success"].astype(str)
    table.loc[n - 10, "success"] = "2"
    table.to_csv(path, index=False)
    with pytest.raises(InputError, match=rf"row {n - 10 + 2}, column success: '2' is not 0/1"):
        read_runs(path, "runs")
