"""Evidence: valid tables load into labelled arrays; every malformed one is a located error."""

import numpy as np
import pandas as pd
import pytest

from bayes_eval import InputError, load_evidence
from bayes_eval.messages import collected

HEADER = (
    "agent,task,method,step,run,milestone,successes,trials,success,chosen_index,logprob,grading"
)
GOOD = [
    "a,t1,end_to_end,,,,3,10,,,,final",
    "a,t1,milestone,1,,,5,10,,,,",
    "a,t1,milestone,2,,,4,10,,,,",
    "a,t2,expert_completion,1,r1,,2,5,,,,",
    "a,t2,expert_best_of_n,1,r1,,,,,3,,",
    "a,t2,golden_solution,1,r1,,,,,,-1.5,",
]


def write(tmp_path, lines, header=HEADER, name="e.csv"):
    path = tmp_path / name
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_valid_table_and_labelled_arrays(tmp_path):
    evidence = load_evidence(write(tmp_path, GOOD))
    assert len(evidence.table) == 6
    e2e = evidence.counts("end_to_end")
    assert e2e["successes"].dims == ("agent", "task")
    milestones = evidence.counts("milestone")
    assert milestones["trials"].sel(agent="a", task="t1").values.tolist() == [10, 10]
    steps = evidence.counts("expert_completion")
    assert steps["successes"].dims == ("agent", "task", "run", "step")


def test_per_trial_rows_are_aggregated(tmp_path):
    lines = [f"a,t1,end_to_end,,,,,,{s},,," for s in (1, 0, 0, "true", "false")]
    evidence = load_evidence(write(tmp_path, lines))
    row = evidence.table.iloc[0]
    assert (row["successes"], row["trials"], row["n_rows"], row["row"]) == (2, 5, 5, 2)


def test_dataframe_and_parquet_sources(tmp_path):
    frame = pd.DataFrame({"task": ["t"], "method": ["end_to_end"], "successes": [1], "trials": [4]})
    assert load_evidence(frame).table["trials"].tolist() == [4]
    frame.to_parquet(tmp_path / "e.parquet")
    assert load_evidence(tmp_path / "e.parquet").table["agent"].tolist() == ["agent"]
    bad = frame.assign(successes=[9])
    with pytest.raises(InputError, match=r"row 2, column successes: successes \(9\) exceeds"):
        load_evidence(bad)


def test_counts_are_exact_integers(tmp_path):
    """2^53 + 1 is not a float: it is read as written, and a float beyond 2^53 (which may
    already have been rounded) is refused with its place."""
    big = 2**53 + 1
    evidence = load_evidence(write(tmp_path, [f"a,t,end_to_end,,,,{big},{big},,,,"]))
    assert evidence.table["trials"].tolist() == [big]
    assert evidence.table["successes"].tolist() == [big]
    frame = pd.DataFrame({"task": ["t"], "method": ["end_to_end"], "successes": [1]})
    assert load_evidence(frame.assign(trials=[big])).table["trials"].tolist() == [big]
    assert load_evidence(frame.assign(trials=[4.0])).table["trials"].tolist() == [4]
    with pytest.raises(InputError, match=r"row 2, column trials: '9007199254740994.0' is not"):
        load_evidence(frame.assign(trials=[float(2**53 + 2)]))


def test_a_table_written_by_pandas_with_blank_steps_is_read(tmp_path):
    """pandas writes an integer column holding blanks as floats (``step`` is blank on every
    end-to-end row): ``1.0`` is the whole number 1, read exactly however long, and the
    table reads as the one written with plain digits."""
    frame = pd.DataFrame(
        {
            "task": ["t", "t", "t"],
            "method": ["milestone", "milestone", "end_to_end"],
            "step": [1, 2, None],
            "successes": [3, 2, 1],
            "trials": [4, 4, 4],
        }
    )
    assert frame["step"].dtype.kind == "f"
    frame.to_csv(tmp_path / "pandas.csv", index=False)
    assert "1.0," in (tmp_path / "pandas.csv").read_text()
    digits = (tmp_path / "pandas.csv").read_text().replace(".0,", ",")
    (tmp_path / "digits.csv").write_text(digits)
    read = load_evidence(tmp_path / "pandas.csv").table
    pd.testing.assert_frame_equal(read, load_evidence(tmp_path / "digits.csv").table)
    assert read["step"].tolist() == [1, 2, -1]
    big = f"{2**63 - 1}.000"
    evidence = load_evidence(write(tmp_path, [f"a,t,end_to_end,,,,7.00,{big},,,,"]))
    assert evidence.table[["successes", "trials"]].values.tolist() == [[7, 2**63 - 1]]


@pytest.mark.parametrize(
    "cell, shown",
    [("0\n0", "0\\n0"), ("0\r0", "0\\n0"), ("1\t2", "1\\t2"), ("1\u200b", "1\\u200b")],
)
def test_a_cell_that_breaks_lines_is_quoted_on_one_line(tmp_path, cell, shown):
    """A quoted CSV cell may hold a newline, a carriage return (which pandas reads as a
    newline), a tab or a zero-width space: the error quoting it stays one line, with the
    character written as its escape (a Hypothesis case: the message for step '0\r0' ran
    over two lines)."""
    path = tmp_path / "e.csv"
    path.write_text(f'task,method,step,successes,trials\nt,milestone,"{cell}",1,2\n')
    with pytest.raises(InputError) as error:
        load_evidence(path)
    assert str(error.value) == (
        f"{path}: row 2, column step: '{shown}' is not a count: write digits 0-9, optionally "
        "followed by a decimal point and zeros (1.0); no sign, exponent or underscore"
    )


# (lines, expected fragment of the one-line message)
BAD_ROWS = [
    (
        ["a,t,end_to_end,,,,12,10,,,,"],
        "row 2, column successes: successes (12) exceeds trials (10)",
    ),
    (["a,t,end_to_end,,,,-1,10,,,,"], "row 2, column successes: '-1' is not a count: write"),
    (["a,t,end_to_end,,,,1.5,10,,,,"], "row 2, column successes: '1.5' is not a count"),
    (["a,t,end_to_end,,,,5.01,10,,,,"], "row 2, column successes: '5.01' is not a count"),
    (["a,t,end_to_end,,,,5.,10,,,,"], "row 2, column successes: '5.' is not a count"),
    (["a,t,end_to_end,,,,.0,10,,,,"], "row 2, column successes: '.0' is not a count"),
    (["a,t,end_to_end,,,,+3,10,,,,"], "row 2, column successes: '+3' is not a count"),
    (["a,t,end_to_end,,,,1_0,20,,,,"], "row 2, column successes: '1_0' is not a count"),
    (["a,t,end_to_end,,,,\uff11,2,,,,"], "row 2, column successes: '\uff11' is not a count"),
    (["a,t,end_to_end,,,,1,1e3,,,,"], "row 2, column trials: '1e3' is not a count"),
    (
        ["a,t,end_to_end,,,,1,9223372036854775808,,,,"],
        "row 2, column trials: trials (9223372036854775808) exceeds the largest count",
    ),
    (["a,t,golden_solution,1,,,,,,,-1_0,"], "row 2, column logprob: '-1_0' is not a decimal"),
    (["a,t,end_to_end,,,,x,10,,,,"], "row 2, column successes: 'x' is not a count"),
    (["a,t,end_to_end,,,,nan,10,,,,"], "row 2, column successes: 'nan' is not a count"),
    (["a,t,end_to_end,,,,1,0,,,,"], "row 2, column trials: trials (0) must be at least 1"),
    (["a,t,end_to_end,,,,1,,,,,"], "row 2, column trials: method end_to_end needs successes"),
    (["a,t,end_to_end,,,,,,,,,"], "row 2, column successes: method end_to_end needs successes"),
    (["a,t,end_to_end,,,,1,2,1,,,"], "row 2, column success: gives both success and"),
    (["a,t,end_to_end,,,,,,2,,,"], "row 2, column success: '2' is not 0/1 or true/false"),
    (["a,t,end_to_end,,,,,,yes,,,"], "row 2, column success: 'yes' is not 0/1"),
    (["a,t,teleport,,,,1,2,,,,"], "row 2, column method: unknown method 'teleport'"),
    (["a,t,milstone,1,,,1,2,,,,"], "(did you mean 'milestone'?)"),
    (["a,t,,,,,1,2,,,,"], "row 2, column method: method is empty"),
    (["a,,end_to_end,,,,1,2,,,,"], "row 2, column task: task is empty"),
    (["a,t,milestone,,,,1,2,,,,"], "row 2, column step: method milestone needs a step"),
    (["a,t,milestone,0,,,1,2,,,,"], "row 2, column step: step (0) must be at least 1"),
    (["a,t,milestone,1.5,,,1,2,,,,"], "row 2, column step: '1.5' is not a count"),
    (["a,t,end_to_end,1,,,1,2,,,,"], "row 2, column step: does not apply to method end_to_end"),
    (["a,t,end_to_end,,,,1,2,,,,weekly"], "row 2, column grading: 'weekly' is not one of"),
    (["a,t,milestone,1,,,1,2,,,,final"], "row 2, column grading: does not apply to method"),
    (["a,t,expert_best_of_n,1,,,,,,0,,"], "row 2, column chosen_index: chosen_index (0) must be"),
    (["a,t,expert_best_of_n,1,,,,,,,,"], "row 2, column chosen_index: method expert_best_of_n"),
    (["a,t,expert_best_of_n,1,,,3,4,,2,,"], "row 2, column successes: does not apply"),
    (["a,t,golden_solution,1,,,,,,,0.5,"], "row 2, column logprob: logprob (0.5) must be <= 0"),
    (["a,t,golden_solution,1,,,,,,,inf,"], "row 2, column logprob: 'inf' is not a decimal"),
    (["a,t,golden_solution,1,,,,,,,,"], "row 2, column logprob: method golden_solution needs"),
    (["a,t,end_to_end,,,,1,2,,,-1,"], "row 2, column logprob: does not apply"),
    (["a,t,milestone,1,,2,1,2,,,,"], "row 2, column milestone: does not apply"),
    (["a,t,expert_best_of_n,1,,0,,,,1,,"], "row 2, column milestone: milestone (0) must be"),
    (["a,t,end_to_end,,r,,1,2,,,,"], "row 2, column run: does not apply to method end_to_end"),
    (["a,t,end_to_end,,,,1,2,,,,", "a,t,end_to_end,,,,2,3,,,,"], "row 3: duplicates row 2"),
    (["a,t,end_to_end,,,,1,2,,,,", "a,t,end_to_end,,,,,,1,,,"], "row 3: duplicates row 2"),
    (
        ["a,t,end_to_end,,,,,,1,,,final", "a,t,end_to_end,,,,,,1,,,ordered"],
        "row 3, column grading: 'ordered' differs from row 2",
    ),
    (
        ["a,t,milestone,1,,,1,2,,,,", "a,t,milestone,2,,,1,2,,,,", "a,t,milestone,4,,,1,2,,,,"],
        "row 4, column step: steps of agent 'a', task 't', milestone skip 3 (have 1, 2, 4)",
    ),
    (
        ["a,t,expert_completion,2,r,,1,2,,,,"],
        "column step: steps of agent 'a', task 't', expert_completion, run 'r' skip 1",
    ),
    (["a,t,end_to_end,,,,1,2,,,"], "row 2: has 11 fields, the header has 12"),
]


@pytest.mark.parametrize(("lines", "message"), BAD_ROWS)
def test_malformed_rows(tmp_path, lines, message):
    path = write(tmp_path, lines)
    with pytest.raises(InputError) as info:
        load_evidence(path)
    text = str(info.value)
    assert text.startswith(str(path) + ": ")
    assert message in text
    assert "\n" not in text


BAD_FILES = [
    ("", "empty file"),
    (HEADER + "\n", "the table has no rows"),
    (
        "task,method,sucesses,trials\nt,end_to_end,1,2\n",
        "unknown column (did you mean 'successes'?)",
    ),
    ("task,method,trials,trials\nt,end_to_end,1,2\n", "column trials: column appears twice"),
    (
        "agent,task,method,successes\na,t,end_to_end,1\n",
        "row 2, column trials: method end_to_end needs successes and trials (or success) "
        "(the table has no trials column)",
    ),
    ("agent,task,successes,trials\na,t,1,2\n", "required column 'method' is missing"),
    ("method,successes,trials\nend_to_end,1,2\n", "required column 'task' is missing"),
    ('task,method\n"t,end_to_end\n', "row"),
]


@pytest.mark.parametrize(("content", "message"), BAD_FILES)
def test_malformed_files(tmp_path, content, message):
    path = tmp_path / "e.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=None) as info:
        load_evidence(path)
    assert message in str(info.value)


def test_not_a_table(tmp_path):
    binary = tmp_path / "e.csv"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(InputError, match="not a text table"):
        load_evidence(binary)
    fake = tmp_path / "e.parquet"
    fake.write_text("task,method\n")
    with pytest.raises(InputError, match="not a readable Parquet table"):
        load_evidence(fake)
    with pytest.raises(InputError, match="no such file"):
        load_evidence(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="is a folder"):
        load_evidence(tmp_path)


def test_hash_ignores_row_order(tmp_path):
    one = load_evidence(write(tmp_path, GOOD, name="a.csv"))
    two = load_evidence(write(tmp_path, GOOD[::-1], name="b.csv"))
    assert one.hash == two.hash
    changed = load_evidence(write(tmp_path, [GOOD[0].replace("3,10", "4,10")], name="c.csv"))
    assert changed.hash != one.hash
    assert np.all(one.table.columns == two.table.columns)


@pytest.mark.parametrize(
    ("name", "delimiter", "note"),
    [("e.tsv", "\t", None), ("e.csv", "\t", "tab-separated"), ("e.csv", ";", "semicolon")],
)
def test_tab_and_semicolon_tables_read_as_the_comma_table(tmp_path, name, delimiter, note):
    """A .tsv file is tab-separated; a .csv whose header has no comma but one of tab and
    semicolon is read with it, and a note says so."""
    comma = load_evidence(write(tmp_path, GOOD, name="comma.csv"))
    lines = [line.replace(",", delimiter) for line in GOOD]
    with collected() as notes:
        other = load_evidence(
            write(tmp_path, lines, header=HEADER.replace(",", delimiter), name=name)
        )
    assert other.hash == comma.hash
    assert (notes == []) if note is None else (len(notes) == 1 and note in notes[0])


def test_a_semicolon_table_with_commas_in_its_header_is_refused_by_name(tmp_path):
    path = write(tmp_path, ["t;end_to_end;1;2"], header="task;method;successes,trials")
    with pytest.raises(InputError, match="unknown column"):
        load_evidence(path)


def test_columns_outside_the_format_are_noted_or_kept(tmp_path):
    """A notes column is ignored with a note, or kept (distinct values per cell, joined);
    a column named close to a known one stays a typo error."""
    header = HEADER + ",notes,owner"
    lines = [
        "a,t1,end_to_end,,,,,,1,,,,day 1,ann",
        "a,t1,end_to_end,,,,,,0,,,,day 2,ann",
        "a,t2,end_to_end,,,,3,10,,,,,,bob",
    ]
    with collected() as notes:
        plain = load_evidence(write(tmp_path, lines, header=header))
    assert plain.kept == () and "notes" not in plain.table
    assert notes == [
        f"{tmp_path / 'e.csv'}: ignored columns notes, owner (not part of the "
        "evidence format; --keep-columns carries them into the summary)"
    ]
    kept = load_evidence(write(tmp_path, lines, header=header), keep_columns=True)
    assert kept.kept == ("notes", "owner")
    cells = kept.table.set_index("task")
    assert cells.loc["t1", "notes"] == "day 1; day 2" and cells.loc["t1", "owner"] == "ann"
    assert cells.loc["t2", "notes"] == "" and cells.loc["t1", "trials"] == 2
    with pytest.raises(InputError, match="did you mean 'agent'"):
        load_evidence(
            write(tmp_path, ["t,end_to_end,1,2,x"], header="task,method,successes,trials,agnet")
        )
    with pytest.raises(InputError, match="column upper: not an evidence column"):
        load_evidence(
            write(tmp_path, ["t,end_to_end,1,2,x"], header="task,method,successes,trials,upper")
        )


def test_batches_of_the_same_cell_are_summed_on_request(tmp_path):
    lines = ["a,t,end_to_end,,,,1,20,,,,", "a,t,end_to_end,,,,,,1,,,", "a,t,end_to_end,,,,2,30,,,,"]
    path = write(tmp_path, lines)
    with pytest.raises(InputError, match="row 3: duplicates row 2 .*--sum-duplicates adds up"):
        load_evidence(path)
    summed = load_evidence(path, sum_duplicates=True).table.iloc[0]
    assert (summed["successes"], summed["trials"], summed["n_rows"], summed["row"]) == (4, 51, 3, 2)
    # a point value cannot be summed
    best = ["a,t2,expert_best_of_n,1,r1,,,,,3,,", "a,t2,expert_best_of_n,1,r1,,,,,2,,"]
    with pytest.raises(InputError) as info:
        load_evidence(write(tmp_path, best, name="b.csv"), sum_duplicates=True)
    assert "duplicates row 2" in str(info.value) and "--sum-duplicates" not in str(info.value)
