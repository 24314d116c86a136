"""Evidence tables validated as columns (``validate_frame`` parses each distinct
combination of values once and adds cells up as columns): the same evidence, and the same
located errors, as reading the rows one by one, on random tables (Hypothesis)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayes_eval import InputError, load_evidence
from bayes_eval.evidence import table as evidence_table

AGENTS = st.sampled_from(["a", "b", " a", "", "agent-c"])
TASKS = st.sampled_from(["t1", "t2", "t3", "t1 "])
COUNTS = st.sampled_from([("0", "3"), ("1", "3"), ("3", "3"), ("0", "1"), ("7", "10")])
SUCCESS = st.sampled_from(["0", "1", "true", " 1", "1.0"])
WRONG = st.sampled_from(["", "x", "-1", "2.5", "0", "4", "-0.0", "end-to-end", "late"])


@st.composite
def _row(draw) -> dict:
    """One row that follows the rules of the method it draws."""
    method = draw(
        st.sampled_from(
            ["end_to_end", "milestone", "expert_completion", "expert_best_of_n", "golden_solution"]
        )
    )
    row = {"agent": draw(AGENTS), "task": draw(TASKS), "method": method}
    if method != "end_to_end":
        row["step"] = draw(st.sampled_from(["1", "1", "2", " 1"]))
    if method in ("expert_completion", "expert_best_of_n", "golden_solution"):
        row["run"] = draw(st.sampled_from(["", "r1", "r2"]))
    if method in ("expert_best_of_n", "golden_solution"):
        row["milestone"] = draw(st.sampled_from(["", "1"]))
    if method == "expert_best_of_n":
        row["chosen_index"] = draw(st.sampled_from(["1", "2"]))
    if method == "golden_solution":
        row["logprob"] = draw(st.sampled_from(["-1.5", "0", "-0.0", "-2e-3"]))
    if method in ("end_to_end", "milestone", "expert_completion"):
        if draw(st.booleans()):
            row["success"] = draw(SUCCESS)
        else:
            row["successes"], row["trials"] = draw(COUNTS)
    if method == "end_to_end":
        row["grading"] = draw(st.sampled_from(["", "", "final", "ordered"]))
    if method in ("end_to_end", "milestone"):
        row["cluster"] = draw(st.sampled_from(["c1", "c2"]))
    return row


@st.composite
def evidence_tables(draw) -> pd.DataFrame:
    """Mostly well-formed tables of every method (repeated cells, per-trial and count rows,
    clusters, a kept column), now and then with a cell broken or a column dropped."""
    rows = draw(st.lists(_row(), min_size=1, max_size=14))
    table = pd.DataFrame(rows).fillna("")
    table["notes"] = draw(
        st.lists(st.sampled_from(["", "x", "y"]), min_size=len(rows), max_size=len(rows))
    )
    if draw(st.integers(0, 3)) == 0:
        row, column = (
            draw(st.integers(0, len(rows) - 1)),
            draw(st.sampled_from(list(table.columns))),
        )
        table.loc[row, column] = draw(WRONG)
    dropped = draw(st.sets(st.sampled_from(["agent", "cluster", "notes"])))
    return table.drop(columns=sorted(dropped & set(table.columns)))


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """The table as a user's DataFrame might hold it: numeric columns as numbers (NaN
    where empty) wherever every value is one."""
    typed = table.copy()
    for column in typed.columns:
        numbers = pd.to_numeric(typed[column].str.strip().replace("", np.nan), errors="coerce")
        if numbers.notna().sum() == (typed[column].str.strip() != "").sum():
            typed[column] = numbers
    return typed


def _outcome(source, **options):
    """(table, clusters, hash) or the error's text."""
    try:
        evidence = load_evidence(source, **options)
    except InputError as exc:
        return str(exc)
    return evidence.table, evidence.clusters, evidence.hash


def _same(fast, slow):
    assert type(fast) is type(slow)
    if isinstance(slow, str):
        assert fast == slow
        return
    pd.testing.assert_frame_equal(fast[0], slow[0], check_exact=True)
    if slow[1] is None:
        assert fast[1] is None
    else:
        pd.testing.assert_frame_equal(fast[1], slow[1], check_exact=True)
    assert fast[2] == slow[2]


CASES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@CASES
@given(
    table=evidence_tables(),
    form=st.sampled_from(["csv", "text", "typed"]),
    sum_duplicates=st.booleans(),
    keep_columns=st.booleans(),
)
def test_random_tables_validate_as_columns_as_row_by_row(
    tmp_path_factory, table, form, sum_duplicates, keep_columns
):
    if form == "csv":
        source = tmp_path_factory.mktemp("evidence") / "evidence.csv"
        table.to_csv(source, index=False)
    else:
        source = _typed(table) if form == "typed" else table
    options = dict(sum_duplicates=sum_duplicates, keep_columns=keep_columns)
    fast = _outcome(source, **options)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evidence_table, "_parse_columns", lambda *args: None)
        slow = _outcome(source, **options)
    _same(fast, slow)


def test_a_large_table_is_parsed_once_per_combination_and_names_a_bad_row(monkeypatch):
    """20,000 end-to-end cells take a handful of row parses; one bad value among them is
    named by its row, as the row-by-row reader names it."""
    rng = np.random.default_rng(0)
    cells = 20_000
    trials = rng.integers(1, 6, cells)
    table = pd.DataFrame(
        {
            "agent": [f"a{i % 7}" for i in range(cells)],
            "task": [f"t{i}" for i in range(cells)],
            "method": "end_to_end",
            "successes": rng.integers(0, trials + 1),
            "trials": trials,
        }
    )
    parses = []
    parse_row = evidence_table._parse_row
    monkeypatch.setattr(
        evidence_table, "_parse_row", lambda *args: parses.append(1) or parse_row(*args)
    )
    evidence = load_evidence(table)
    assert len(parses) == len(set(zip(table["successes"], table["trials"], strict=True)))
    assert evidence.table["successes"].tolist() == table["successes"].tolist()
    assert evidence.table["row"].tolist() == list(range(2, cells + 2))
    table.loc[12_345, "successes"] = 9
    with pytest.raises(InputError, match=r"row 12347, column successes: successes \(9\) exceeds"):
        load_evidence(table)
