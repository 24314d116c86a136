"""The audit of a grader: runs whose trusted verdict is known beside the grader's.

An audit table has a row per audited run, or per group of alike runs with ``runs``:

* ``truth``: 0/1 (or true/false), the trusted verdict (a human, an expert, a stricter
  check);
* ``graded``: 0/1, the grader's verdict of the same run;
* ``grader``: the grader's name; optional where the audit has one grader;
* ``runs``: how many runs the row stands for (blank or absent: 1);
* ``agent``, ``task``, ``method``, ``step``: optional; a row with them audits only those
  runs, one without them every run the grader scored;
* ``run_id``: optional; a row with one is a run of the evidence itself (of its ``task``,
  and ``agent``), which the trusted verdict scored again: its truth takes the place of the
  grader's verdict there (``OwnRuns``), and it informs the grader's rates too.

It is read with the evidence's rules: a bad cell, a missing column, a grader with no
audited runs is one line naming the file, row, column and rule. A grader whose audit has
no true success, or no true failure, is allowed: its sensitivity (or specificity) is then
its prior alone, which a note says.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bayes_eval.errors import InputError
from bayes_eval.evidence.source_row import SourceRow
from bayes_eval.evidence.table import METHODS, Evidence, read_table
from bayes_eval.messages import note

__all__ = ["AUDIT_COLUMNS", "Audit", "GraderCounts", "OwnRuns", "load_audit", "with_audit"]

# The audit's columns: its verdicts, then what scopes a row (blank: every run).
AUDIT_COLUMNS = ("grader", "truth", "graded", "runs", "run_id")
AUDIT_SCOPE = ("agent", "task", "method", "step")
# The grader of an audit without a ``grader`` column.
DEFAULT_GRADER = "grader"


@dataclass(frozen=True)
class GraderCounts:
    """A grader's audited runs: true successes it ``detected`` and ``missed``, true
    failures it ``cleared`` and raised ``false_alarms`` on."""

    detected: int
    missed: int
    cleared: int
    false_alarms: int

    @property
    def total(self) -> int:
        """The audited runs."""
        return self.detected + self.missed + self.cleared + self.false_alarms

    def sensitivity_shapes(self, prior=(1.0, 1.0)) -> tuple[float, float]:
        """The Beta of the sensitivity ``P(graded 1 | truth 1)`` after the audit."""
        return prior[0] + self.detected, prior[1] + self.missed

    def specificity_shapes(self, prior=(1.0, 1.0)) -> tuple[float, float]:
        """The Beta of the specificity ``P(graded 0 | truth 0)`` after the audit."""
        return prior[0] + self.cleared, prior[1] + self.false_alarms


@dataclass(frozen=True)
class OwnRuns:
    """A pair's own runs in the audit (rows with a ``run_id``): how many, how many were
    true successes, and how many the grader called successes."""

    runs: int = 0
    true_successes: int = 0
    graded_successes: int = 0


@dataclass(frozen=True)
class Audit:
    """An audit table, validated (``load_audit``).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per audit row, indexed by its row in the file: ``grader``, ``truth``,
        ``graded``, ``runs`` and the scope columns (``""`` or NaN: every run).
    source : str
    """

    table: pd.DataFrame
    source: str

    @property
    def graders(self) -> list[str]:
        return list(dict.fromkeys(self.table["grader"]))

    @property
    def audited_runs(self) -> pd.Series:
        """Per audit row, whether it is a run of the evidence scored again (``run_id``)."""
        if "run_id" not in self.table:
            return pd.Series(False, index=self.table.index)
        return self.table["run_id"] != ""

    def own_runs(self, grader: str, agent: str, task: str) -> OwnRuns:
        """The runs of ``agent`` on ``task`` that ``grader`` scored and the audit scored
        again (its rows with a ``run_id``; a blank agent is the evidence's only one)."""
        if "run_id" not in self.table:
            return OwnRuns()
        rows = self.table[(self.table["grader"] == grader) & (self.table["run_id"] != "")]
        rows = rows[(rows["task"] == task) & rows["agent"].isin(["", agent])]
        runs = rows["runs"]
        return OwnRuns(
            int(runs.sum()),
            int(runs[rows["truth"] == 1].sum()),
            int(runs[rows["graded"] == 1].sum()),
        )

    def counts(self, grader: str, **scope) -> GraderCounts:
        """The audited runs of ``grader`` that apply to ``scope`` (``applying``)."""
        rows = self.applying(grader, **scope)
        runs = rows["runs"]
        truth, graded = rows["truth"] == 1, rows["graded"] == 1
        return GraderCounts(
            detected=int(runs[truth & graded].sum()),
            missed=int(runs[truth & ~graded].sum()),
            cleared=int(runs[~truth & ~graded].sum()),
            false_alarms=int(runs[~truth & graded].sum()),
        )

    def applying(self, grader: str, **scope) -> pd.DataFrame:
        """The audit rows of ``grader`` that apply to ``scope`` (``agent=...``,
        ``task=...``, ``method=...``, ``step=...``): those whose scope columns are blank or
        equal to it, and every run of the evidence audited (``run_id``), whose agent and
        task say which run it is, not where it applies. Counts scored by one grader share
        its sensitivity and specificity where the same rows apply to them."""
        rows = self.table[self.table["grader"] == grader]
        own = self.audited_runs[rows.index]
        for column, value in scope.items():
            if column not in AUDIT_SCOPE:
                raise ValueError(f"audit scope: unknown column {column!r}")
            if column in rows and value is not None:
                blank = rows[column].isna() | (rows[column] == "") | own  # a run: no scope
                rows = rows[blank | (rows[column] == str(value))]
        return rows


def load_audit(source, label: str | None = None) -> Audit:
    """The audit in ``source`` (a CSV, TSV or Parquet path, or a DataFrame), validated.

    Raises
    ------
    InputError
        One line naming the file, row, column and rule.
    """
    if isinstance(source, pd.DataFrame):
        label = label or "audit table"
        table = source.set_axis(range(2, len(source) + 2))  # numbered as a spreadsheet
    else:
        label = label or str(source)
        table = read_table(Path(source), label, check_header=_check_header)
        if Path(source).suffix.lower() in (".parquet", ".pq"):
            table.index = range(2, len(table) + 2)
    header = [str(c) for c in table.columns]
    _check_header(label, header)
    if table.empty:
        raise InputError(f"{label}: the audit has no rows")
    rows = []
    for number, values in zip(table.index, table.to_dict("records"), strict=True):
        rows.append(_audit_row(SourceRow(label, f"row {number}", values), header))
    audit = Audit(pd.DataFrame(rows, index=table.index), label)
    if "run_id" in audit.table:
        named = audit.table[audit.table["run_id"] != ""]
        twice = named[named.duplicated(["grader", "run_id"])]
        if len(twice):
            raise InputError(
                f"{label}: row {twice.index[0]}, column run_id: run "
                f"'{twice['run_id'].iloc[0]}' is audited twice for its grader"
            )
    for grader in audit.graders:
        counts = audit.counts(grader)
        for kind, audited, measure in (
            ("success", counts.detected + counts.missed, "sensitivity"),
            ("failure", counts.cleared + counts.false_alarms, "specificity"),
        ):
            if not audited:
                note(
                    f"{label}: grader '{grader}' has no audited run whose truth is a "
                    f"{kind}: its {measure} is its prior alone"
                )
    return audit


def with_audit(evidence: Evidence, audit) -> Evidence:
    """``evidence`` with the audit of the grader that scored it (``audit``: a path, a
    DataFrame or an ``Audit``), checked against it: a grader named in the ``grader``
    column with no audit, and a table without that column beside an audit of several
    graders, are each refused in one line.
    A blank ``grader`` names a row a trusted grader scored (taken as perfect); without the
    column, the audit's one grader scored every row, and the column says so."""
    from dataclasses import replace

    audit = audit if isinstance(audit, Audit) else load_audit(audit)
    table = evidence.table
    if "grader" in table:  # one grader a cell (``load_evidence`` refuses two)
        unaudited = table[(table["grader"] != "") & ~table["grader"].isin(audit.graders)]
        if len(unaudited):
            row = unaudited.iloc[0]
            raise InputError(
                f"{evidence.source}: row {row['row']}, column grader: grader "
                f"'{row['grader']}' has no audit in {audit.source} (graders audited: "
                f"{', '.join(audit.graders)})"
            )
    elif len(audit.graders) > 1:
        raise InputError(
            f"{evidence.source}: the audit {audit.source} has graders "
            f"{', '.join(audit.graders)}, and the table no grader column to say which "
            "scored each row"
        )
    else:  # the audit's one grader scored every row
        table = table.assign(grader=audit.graders[0])
        return replace(evidence, table=table, kept=(*evidence.kept, "grader"), audit=audit)
    return replace(evidence, audit=audit)


def _check_header(label: str, header: list[str]) -> None:
    known = (*AUDIT_COLUMNS, *AUDIT_SCOPE)
    for column in header:
        if header.count(column) > 1:
            raise InputError(f"{label}: row 1, column {column}: column appears twice")
        if column not in known:
            close = difflib.get_close_matches(column, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InputError(
                f"{label}: row 1, column {column}: unknown column{hint}; an audit has "
                f"{', '.join(known)}"
            )
    for column in ("truth", "graded"):
        if column not in header:
            raise InputError(
                f"{label}: row 1: no column '{column}' (an audit gives each run's trusted "
                "verdict, truth, beside the grader's, graded)"
            )


def _audit_row(row: SourceRow, header: list[str]) -> dict:
    """One audit row's values, each checked."""
    out = {}
    for column in ("truth", "graded"):
        out[column] = row.boolean(column)
        if out[column] is None:
            row.fail(column, f"{column} is empty (0 or 1)")
    runs = row.integer("runs", 1) if "runs" in header else None
    out["runs"] = 1 if runs is None else runs  # blank: one run
    if "grader" in header:
        out["grader"] = row.text("grader")
        if out["grader"] is None:
            row.fail("grader", "grader is empty (the grader's name)")
    else:
        out["grader"] = DEFAULT_GRADER
    for column in ("agent", "task"):
        if column in header:
            out[column] = row.text(column) or ""
    if "method" in header:
        out["method"] = row.text("method") or ""
        if out["method"] and out["method"] not in METHODS:
            row.fail("method", f"unknown method '{out['method']}' ({', '.join(METHODS)})")
    if "step" in header:
        step = row.integer("step", 1)
        out["step"] = "" if step is None else str(step)
    if "run_id" in header:
        out["run_id"] = row.text("run_id") or ""
        if out["run_id"] and not out.get("task"):
            row.fail("task", "a row with a run_id names the task it is a run of")
        if out["run_id"] and out["runs"] != 1:
            row.fail("runs", "a row with a run_id is one run (runs 1)")
        out.setdefault("agent", "")
    return out
