"""``csv_text`` writes exactly what pandas' ``to_csv(index=False)`` writes.

Long tables (where the distinct fields are formatted once) are drawn as a few distinct
values per column repeated over 10,000 rows, as a summary's columns are: every kind of
column a summary holds, with the values pandas and csv treat specially (NaN, -0.0,
infinities, missing values, text with commas, quotes and line breaks).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from bayes_eval.csv_text import DISTINCT_FROM_ROWS, csv_text, write_csv

ROWS = DISTINCT_FROM_ROWS

floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 0.1, 1 / 3, 1e16, -2.5]),
)
texts = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", " ", "a,b", 'say "hi"', "two\nlines", "cr\r", "é ∞", "nan"]),
)

COLUMNS = {
    "float64": (floats, lambda v: np.array(v, dtype=np.float64)),
    "int64": (st.integers(-(2**63), 2**63 - 1), lambda v: np.array(v, dtype=np.int64)),
    "bool": (st.booleans(), lambda v: np.array(v, dtype=bool)),
    "boolean": (st.one_of(st.booleans(), st.none()), lambda v: pd.array(v, dtype="boolean")),
    "Int64": (st.one_of(st.integers(-1000, 1000), st.none()), lambda v: pd.array(v, "Int64")),
    "object text": (st.one_of(texts, st.none()), lambda v: np.array(v, dtype=object)),
    "str": (st.one_of(texts, st.none()), lambda v: pd.array(v, dtype="str")),
    "category": (texts, lambda v: pd.Categorical(v)),
    "mixed object": (st.one_of(texts, floats), lambda v: np.array(v, dtype=object)),
}


@st.composite
def long_tables(draw) -> pd.DataFrame:
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=6))
    names = draw(
        st.lists(
            st.sampled_from(["a", "b", "c,d", 'q"', "a"]), min_size=len(kinds), max_size=len(kinds)
        )
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns = []
    for kind in kinds:
        values, make = COLUMNS[kind]
        palette = draw(st.lists(values, min_size=1, max_size=5))
        columns.append(make([palette[i] for i in rng.integers(len(palette), size=ROWS)]))
    frame = pd.DataFrame(dict(enumerate(columns)))
    frame.columns = names
    return frame


@settings(max_examples=60, deadline=None)
@given(long_tables())
def test_a_long_table_is_written_as_pandas_writes_it(frame):
    assert csv_text(frame) == frame.to_csv(index=False)


def test_the_file_is_the_bytes_pandas_writes(tmp_path):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "task": [f"task {i % 7}, part" for i in range(ROWS)],
            "upper": rng.beta(1, 20, ROWS).round(3),
            "ok": pd.array(rng.integers(2, size=ROWS).astype(bool), dtype="boolean"),
        }
    )
    write_csv(frame, tmp_path / "ours.csv")
    frame.to_csv(tmp_path / "pandas.csv", index=False)
    assert (tmp_path / "ours.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()


def test_a_short_table_is_pandas_own_text():
    frame = pd.DataFrame({"a": [0.1, float("nan")], "b": ["x", None]})
    assert csv_text(frame) == "a,b\n0.1,x\n,\n"
