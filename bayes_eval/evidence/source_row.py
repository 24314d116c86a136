"""One source row of a table, read by the evidence format's rules: typed accessors
(text, whole number, decimal number, boolean) that raise an ``InputError`` naming the
file, row, column and rule."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from bayes_eval.constants import INT64_MAX, REAL_TEXT
from bayes_eval.errors import InputError

__all__ = ["SourceRow", "as_real"]

FLOAT_EXACT = 2**53  # the largest float below which every whole number is exact
# A count in a text table: digits, optionally a decimal point and zeros (pandas writes an
# integer column holding blanks as floats, "1.0"); no sign, exponent or underscore.
COUNT_TEXT = re.compile(r"[0-9]+(\.0+)?", re.ASCII)
COUNT_RULE = (
    "is not a count: write digits 0-9, optionally followed by a decimal point and zeros "
    "(1.0); no sign, exponent or underscore"
)


class SourceRow:
    """One source row with typed accessors that raise located errors."""

    def __init__(self, label: str, where: str, values: dict):
        self.label = label
        self.where = where
        self.values = values

    def fail(self, column: str | None, rule: str):
        """Raise the located error; where ``column`` is not in the table at all, say so."""
        place = f"{self.where}, column {column}" if column else self.where
        if column and self.values and column not in self.values:
            rule += f" (the table has no {column} column)"
        raise InputError(f"{self.label}: {place}: {rule}")

    def raw(self, column: str):
        value = self.values.get(column)
        if value is None:
            return None
        if isinstance(value, float) and math.isnan(value):
            return None
        if value is pd.NA or value is pd.NaT:
            return None
        if isinstance(value, str):
            value = value.strip()
            return value or None
        return value

    def text(self, column: str) -> str | None:
        value = self.raw(column)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value)

    def integer(self, column: str, minimum: int) -> int | None:
        """An exact whole number: in a text table ASCII digits, optionally followed by a
        decimal point and zeros (``COUNT_TEXT``); in a typed one an integer, or a float
        that holds a whole number exactly (at most 2^53)."""
        value = self.raw(column)
        if value is None:
            return None
        number = _as_integer(value)
        if number is None:
            self.fail(column, f"'{value}' {COUNT_RULE}")
        if number < minimum:
            self.fail(column, f"{column} ({value}) must be at least {minimum}")
        if number > INT64_MAX:
            self.fail(column, f"{column} ({value}) exceeds the largest count, {INT64_MAX}")
        return number

    def real(self, column: str) -> float | None:
        value = self.raw(column)
        if value is None:
            return None
        number = as_real(value)
        if number is None:
            self.fail(column, f"'{value}' is not a decimal number")
        if not math.isfinite(number):
            self.fail(column, f"{value} is not a finite number")
        return number

    def boolean(self, column: str) -> int | None:
        value = self.raw(column)
        if value is None:
            return None
        if isinstance(value, bool | np.bool_):
            return int(value)
        text = str(value).strip().lower()
        if text in ("1", "1.0", "true"):
            return 1
        if text in ("0", "0.0", "false"):
            return 0
        self.fail(column, f"'{value}' is not 0/1 or true/false")
        return None

    def absent(self, column: str, method: str) -> None:
        if self.raw(column) is not None:
            self.fail(column, f"does not apply to method {method} (leave it empty)")


def _as_integer(value) -> int | None:
    """``value`` as an exact int, or None (see ``SourceRow.integer``)."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        exact = math.isfinite(value) and value.is_integer() and abs(value) <= FLOAT_EXACT
        return int(value) if exact else None
    text = str(value).strip()
    return int(text.partition(".")[0]) if COUNT_TEXT.fullmatch(text) else None


def as_real(value) -> float | None:
    """A cell's value as a float: a number, or text written as a decimal number; else
    ``None`` (booleans included)."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    text = str(value).strip()
    return float(text) if REAL_TEXT.fullmatch(text) else None
