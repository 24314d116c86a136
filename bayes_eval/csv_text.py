"""Tables written as CSV: the bytes of pandas' ``to_csv(index=False)``, each distinct
field formatted once.

pandas formats every value of a table on its own and passes every field through Python's
csv writer: a summary of 200,000 cells (2 million floats, 4 million fields) took 4.5 s.
Where many cells share their counts it holds a few hundred distinct numbers, so here each
column's distinct values are formatted and quoted once (by the same numpy formatting and
the same csv writer) and the rows are joined.
"""

from __future__ import annotations

import csv
import io
import os

import numpy as np
import pandas as pd

__all__ = ["csv_text", "write_csv"]

# A field with none of these is written as it is (csv's minimal quoting).
SPECIAL = frozenset(',"\r\n')

# Below this many rows a table is written by pandas as it is: nothing to gain.
DISTINCT_FROM_ROWS = 10_000


def csv_text(frame: pd.DataFrame) -> str:
    """``frame.to_csv(index=False)``: the same text, faster for long tables of two or more
    columns of floats, integers, booleans or text (otherwise pandas writes the table)."""
    if len(frame) < DISTINCT_FROM_ROWS or frame.shape[1] < 2:
        return frame.to_csv(index=False)
    fields = [_fields(column) for _, column in frame.items()]
    if any(f is None for f in fields):
        return frame.to_csv(index=False)
    header = frame.iloc[:0].to_csv(index=False)
    end = os.linesep  # pandas' line ending
    return header + "".join(f"{','.join(row)}{end}" for row in zip(*fields, strict=True))


def write_csv(frame: pd.DataFrame, path) -> None:
    """``frame.to_csv(path, index=False)``: the same bytes (UTF-8, pandas' line ending)."""
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write(csv_text(frame))


def _fields(column: pd.Series) -> np.ndarray | None:
    """Each row's field of ``column`` as pandas writes it, quoting included; None where
    the column is of a kind pandas formats in its own way (dates, categories, ...)."""
    dtype = column.dtype
    if dtype == np.float64:
        values = column.to_numpy()
        # by bit pattern, so that -0.0 keeps its sign
        distinct, inverse = np.unique(values.view(np.int64), return_inverse=True)
        numbers = distinct.view(np.float64)
        # as pandas writes a float column: numpy's text of each value, NaN as ""
        text = numbers.astype(str).astype(object)
        text[np.isnan(numbers)] = ""
        return text[inverse]
    types = pd.api.types
    whole = types.is_bool_dtype(dtype) or types.is_integer_dtype(dtype)  # nullable too
    if not (whole or types.is_string_dtype(dtype)):
        return None
    codes, distinct = pd.factorize(column)
    if not whole and not all(isinstance(v, str) for v in distinct):
        return None
    # a missing value (code -1) is written as ""
    return np.array([*(_quoted(str(v)) for v in distinct), ""], dtype=object)[codes]


def _quoted(field: str) -> str:
    """``field`` as pandas' csv writer puts it in a row of several fields."""
    if not SPECIAL.intersection(field):
        return field
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([field, ""])
    return out.getvalue()[: -len(",\n")]
