"""Evidence: read, validate and hold a tidy table of evaluation results.

One row per observation: counts (``successes``/``trials``) or one row per trial
(``success``, aggregated on load). Every rule is checked on load; the first broken
one raises ``InputError`` naming the file, the row (1-based, as a spreadsheet shows
it, header = row 1), the column and the rule.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayes_eval.constants import (
    AGENT,
    BEST_OF_N,
    DEFAULT_AGENT,
    END_TO_END,
    EXPERT_COMPLETION,
    GOLDEN,
    INT64_MAX,
    MILESTONE,
    MILESTONE_METHOD,
    RUN,
    STEP,
    SUMMARY_COLUMNS,
    TASK,
)
from bayes_eval.csv_text import csv_text
from bayes_eval.errors import InputError
from bayes_eval.evidence.source_row import SourceRow
from bayes_eval.files import check_readable, read_text
from bayes_eval.messages import note

if TYPE_CHECKING:
    import xarray as xr

    from bayes_eval.evidence.audit import Audit

__all__ = [
    "Evidence",
    "first_line",
    "load_evidence",
    "read_table",
    "sniff_delimiter",
    "validate_frame",
]

# The run of a row that names none.
DEFAULT_RUN = "1"
# The evidence methods (the `method` column) and the gradings of end-to-end rows.
METHODS = (END_TO_END, MILESTONE_METHOD, EXPERT_COMPLETION, BEST_OF_N, GOLDEN)
GRADINGS = ("final", "ordered")

COLUMNS = (
    "task",
    "agent",
    "method",
    "step",
    "run",
    "milestone",
    "successes",
    "trials",
    "success",
    "chosen_index",
    "logprob",
    "grading",
    "cluster",
    "grader",
)
COUNTED = (END_TO_END, MILESTONE_METHOD, EXPERT_COMPLETION)
# Which optional columns each method may (or must) fill.
NEEDS_STEP = (MILESTONE_METHOD, EXPERT_COMPLETION, BEST_OF_N, GOLDEN)
TAKES_RUN = (EXPERT_COMPLETION, BEST_OF_N, GOLDEN)
TAKES_MILESTONE = (BEST_OF_N, GOLDEN)
TAKES_CLUSTER = (END_TO_END, MILESTONE_METHOD)
# The normalised table: one row per observation after aggregating per-trial rows.
TABLE_COLUMNS = (
    "agent",
    "task",
    "method",
    "milestone",
    "run",
    "step",
    "successes",
    "trials",
    "chosen_index",
    "logprob",
    "grading",
    "row",
    "n_rows",
)
KEY = ("agent", "task", "method", "milestone", "run", "step")
# Counts per cluster of correlated runs (``Evidence.clusters``).
CLUSTER_COLUMNS = ("agent", "task", "method", "step", "cluster", "successes", "trials", "row")


# What a path to a file may be given as.
PathLike = str | os.PathLike
# What the readers and ``fit`` take as a table.
TableSource = PathLike | pd.DataFrame


@dataclass(frozen=True)
class Evidence:
    """A validated evidence table.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per observation with ``TABLE_COLUMNS``; ``row`` is the first source
        row (spreadsheet numbering) and ``n_rows`` how many source rows it aggregates.
        Absent integers are -1, absent strings empty, an absent ``logprob`` NaN. The
        columns in ``kept`` follow, as text.
    source : str
        Where the table came from (a path or ``"DataFrame"``).
    kept : tuple of str
        Columns outside the evidence format that the user asked to keep
        (``keep_columns``): the summary carries them per (agent, task).
    clusters : pandas.DataFrame or None
        Where runs come in clusters that share a seed, a sample or a day (the ``cluster``
        column): the counts per cluster, ``CLUSTER_COLUMNS``, for the models that treat
        runs of a cluster as correlated. ``table`` holds the cells' totals either way.
    audit : bayes_eval.evidence.audit.Audit or None
        Where a grader that errs scored the runs: its audit (``fit(..., audit=...)``),
        which the rows' ``grader`` column (kept as text) names.
    """

    table: pd.DataFrame
    source: str
    kept: tuple[str, ...] = ()
    clusters: pd.DataFrame | None = None
    audit: Audit | None = None

    @cached_property
    def hash(self) -> str:
        """SHA-256 of the normalised observations (not of the file's bytes)."""
        canonical = self.table.drop(columns=["row", "n_rows"]).sort_values(list(KEY))
        text = csv_text(canonical)
        if self.clusters is not None:
            order = ["agent", "task", "method", "step", "cluster"]
            text += csv_text(self.clusters.drop(columns="row").sort_values(order))
        if self.audit is not None:
            text += csv_text(self.audit.table)
        return hashlib.sha256(text.encode()).hexdigest()

    def methods(self) -> set[str]:
        """The evidence methods present."""
        return set(self.table["method"])

    def pairs(self) -> list[tuple[str, str]]:
        """Every (agent, task) with any evidence, in first-seen order."""
        names = self.table[["agent", "task"]].drop_duplicates()
        agents, tasks = (names[c].to_numpy(dtype=object) for c in ("agent", "task"))
        return list(zip(agents, tasks, strict=True))

    def rows(self, method: str) -> pd.DataFrame:
        """The normalised rows of one method."""
        return self.table[self.table["method"] == method]

    def counts(self, method: str) -> xr.Dataset:
        """Successes and trials of a counted method as an ``xarray.Dataset``.

        Dims: ``(agent, task)`` for end-to-end, ``(agent, task, milestone)`` for
        milestones, ``(agent, task, run, step)`` for expert completion. Cells without
        evidence hold 0 successes of 0 trials (no information).
        """
        import xarray as xr

        dims = {
            END_TO_END: (AGENT, TASK),
            MILESTONE_METHOD: (AGENT, TASK, MILESTONE),
            EXPERT_COMPLETION: (AGENT, TASK, RUN, STEP),
        }[method]
        rows = self.rows(method)
        columns = {AGENT: "agent", TASK: "task", MILESTONE: "step", RUN: "run", STEP: "step"}
        index = pd.MultiIndex.from_frame(rows[[columns[d] for d in dims]], names=list(dims))
        frame = pd.DataFrame(
            {"successes": rows["successes"].to_numpy(), "trials": rows["trials"].to_numpy()},
            index=index,
        )
        data = xr.Dataset.from_dataframe(frame).fillna(0).astype(np.int64)
        return data


def load_evidence(
    source: TableSource | Evidence,
    *,
    name: str | None = None,
    keep_columns: bool = False,
    sum_duplicates: bool = False,
) -> Evidence:
    """Read and validate evidence from a CSV, TSV or Parquet path, or a DataFrame.

    Parameters
    ----------
    source : str, pathlib.Path or pandas.DataFrame
        The tidy table (its columns: docs/evidence.md). A text table is comma-separated;
        a ``.tsv`` or ``.tab`` file tab-separated; a header with no comma but tabs or
        semicolons is read with that delimiter (and a note says so:
        ``bayes_eval.messages``).
    name : str, optional
        How to name the source in messages (defaults to the path or ``"DataFrame"``).
    keep_columns : bool
        Keep columns outside the evidence format (for example ``notes``) and carry them
        into the summary; without it they are ignored, with a note. A column whose name
        is close to a known one is refused either way, as a likely typo.
    sum_duplicates : bool
        Add up count rows of the same cell (batches run on different days); without
        it a repeated cell is an error.
    Returns
    -------
    Evidence

    Raises
    ------
    InputError
        On the first broken rule, naming file, row, column and rule.
    """
    if isinstance(source, Evidence):
        return source
    if isinstance(source, pd.DataFrame):
        label = name or "DataFrame"
        frame, from_file = source, False
    else:
        label = name or str(source)
        path = Path(source)
        frame = read_table(path, label)
        from_file = path.suffix.lower() not in (".parquet", ".pq")
    extra = _check_header(label, [str(c) for c in frame.columns])
    if extra and not keep_columns:
        note(
            f"{label}: ignored column{'s' * (len(extra) > 1)} {', '.join(extra)} (not part "
            "of the evidence format; --keep-columns carries them into the summary)"
        )
        frame = frame.drop(columns=extra)
        extra = []
    if "grader" in frame.columns:  # which grader scored each row: kept, as text
        _check_graders(frame, label, from_file)
        extra = [*extra, "grader"]
    return validate_frame(
        frame, label, from_file=from_file, kept=tuple(extra), sum_duplicates=sum_duplicates
    )


def _check_graders(frame: pd.DataFrame, label: str, from_file: bool) -> None:
    """Refuse a cell (agent, task, method, step) whose rows name different graders, a
    blank one (a trusted grader) included: its counts would be added up as one grader's."""
    text = frame.astype(object).where(frame.notna(), "").astype(str)
    text = text.apply(lambda column: column.str.strip())
    cell = [c for c in ("agent", "task", "method", "step") if c in text]
    first = text.groupby(cell, sort=False)["grader"].transform("first")
    differs = np.flatnonzero((text["grader"] != first).to_numpy())
    if differs.size:
        at = differs[0]
        row = frame.index[at] if from_file else at + 2
        raise InputError(
            f"{label}: row {row}, column grader: '{text['grader'].iloc[at]}' differs from "
            f"'{first.iloc[at]}' on another row of the same cell (agent, task, method, "
            "step); give each grader's runs as a task of their own"
        )


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------


def read_table(path: Path, label: str, check_header=None) -> pd.DataFrame:
    """The rows of a CSV, TSV or Parquet table as text (Parquet: as typed), indexed by
    their spreadsheet row number; ``check_header(label, columns)`` vets the header
    (default: the evidence format's)."""
    check_header = _check_header if check_header is None else check_header
    check_readable(path, label)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            return pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises many types for a non-Parquet file
            raise InputError(f"{label}: not a readable Parquet table ({first_line(exc)})") from exc
    text = read_text(path, label)
    if "\x00" in text:
        raise InputError(f"{label}: not a text table (binary content)")
    delimiter = sniff_delimiter(text, suffix, label)
    plain = _read_plain(text, delimiter, label, check_header)
    if plain is not None:
        return plain
    # Rows are numbered as a spreadsheet numbers them: one per record, blank ones
    # included, so a line break inside quotes does not shift the rows after it.
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    header = None
    body = []
    row = 0
    try:
        for row, cells in enumerate(reader, start=1):
            if not any(cell.strip() for cell in cells):
                continue
            if header is None:
                header = [c.strip() for c in cells]
                check_header(label, header)
            elif len(cells) != len(header):
                raise InputError(
                    f"{label}: row {row}: has {len(cells)} fields, the header has {len(header)}"
                )
            else:
                body.append((row, cells))
    except csv.Error as exc:
        raise InputError(f"{label}: row {row + 1}: not valid CSV ({exc})") from exc
    if header is None:
        raise InputError(f"{label}: empty file, no header and no rows")
    frame = pd.DataFrame([cells for _, cells in body], columns=header, dtype=object)
    frame.index = [n for n, _ in body]
    return frame


def _read_plain(text: str, delimiter: str, label: str, check_header) -> pd.DataFrame | None:
    """``read_table``'s frame of a plainly written table (no quotes, no carriage return,
    no blank line, every line as many fields as the header), read by pandas' C parser;
    None for any other table, which the csv module then reads row by row."""
    body = text.rstrip("\n")
    blank = re.compile(rf"^(?:[^\S\n]|{re.escape(delimiter)})*$", re.MULTILINE)
    if '"' in text or "\r" in text or blank.search(body):
        return None
    header = [c.strip() for c in body.split("\n", 1)[0].split(delimiter)]
    options = dict(sep=delimiter, header=None, dtype=object, keep_default_na=False)
    try:
        frame = pd.read_csv(io.StringIO(body), engine="c", index_col=False, **options)
    except (pd.errors.ParserError, ValueError):
        return None
    short = body.count(delimiter) != (len(header) - 1) * len(frame)  # a line of fewer fields
    if short or len(frame) < 2 or frame.shape[1] != len(header):
        return None
    check_header(label, header)
    frame = frame.iloc[1:].set_axis(header, axis=1)
    return frame.set_axis(pd.Index(np.arange(2, len(frame) + 2)))


DELIMITERS = {"\t": "tab", ";": "semicolon"}


def sniff_delimiter(text: str, suffix: str, label: str) -> str:
    """Tab for ``.tsv`` and ``.tab`` files; otherwise a comma, unless the header has no
    comma and only one of tab and semicolon, which is then the delimiter (with a note)."""
    if suffix in (".tsv", ".tab"):
        return "\t"
    header = next((line for line in text.splitlines() if line.strip()), "")
    found = [d for d in DELIMITERS if d in header]
    if "," in header or len(found) != 1:
        return ","
    note(f"{label}: read as {DELIMITERS[found[0]]}-separated (the header has no comma)")
    return found[0]


def first_line(exc: Exception) -> str:
    """The first line of an exception's message (its type's name where it has none)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _check_header(label: str, header: list[str]) -> list[str]:
    """The columns outside the evidence format, in order. A column named twice, one whose
    name is close to a known column (a likely typo), one named as a summary column, or a
    missing required column is an error."""
    seen, extra = set(), []
    for column in header:
        if column in seen:
            raise InputError(f"{label}: row 1, column {column}: column appears twice")
        seen.add(column)
        if column in COLUMNS:
            continue
        close = difflib.get_close_matches(column, COLUMNS, n=1)
        if close or not column:
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InputError(
                f"{label}: row 1, column {column}: unknown column{hint}; "
                f"known columns: {', '.join(COLUMNS)}"
            )
        if column in SUMMARY_COLUMNS or column in TABLE_COLUMNS:
            raise InputError(
                f"{label}: row 1, column {column}: not an evidence column, and the name of "
                "a column the package writes; rename it"
            )
        extra.append(column)
    for required in ("task", "method"):
        if required not in seen:
            raise InputError(f"{label}: row 1: required column '{required}' is missing")
    return extra


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


def validate_frame(
    frame, label: str, *, from_file: bool, kept=(), sum_duplicates=False
) -> Evidence:
    """Check every row; ``from_file`` rows are indexed by their CSV line number.

    Rows are parsed once per distinct combination of their values (agents, tasks and kept
    columns apart, which are read once per distinct value) and added up per cell as
    columns. Wherever that meets anything to refuse, the rows are read one by one, which
    names the first broken rule's row and column.
    """
    if frame.shape[0] == 0:
        raise InputError(f"{label}: the table has no rows")
    if not from_file:  # a DataFrame or Parquet table: spreadsheet row = position + 2
        frame = frame.set_axis(range(2, frame.shape[0] + 2))
    has_clusters = "cluster" in frame.columns
    parsed = _parse_columns(frame, label, has_clusters, kept)
    added = None if parsed is None else _add_up(parsed, kept, sum_duplicates)
    if added is None:
        records = frame.to_dict("records")
        parsed = []
        for index, values in zip(frame.index, records, strict=True):
            row = SourceRow(label, f"row {index}", values)
            text = {c: row.text(c) or "" for c in kept}
            parsed.append(_parse_row(row, index, has_clusters) | text)
        cells = _aggregate(parsed, label, (*KEY, "cluster"), kept, sum_duplicates)
        table = pd.DataFrame(_aggregate(cells, label, KEY, kept, sum_duplicates=True))
        clusters = pd.DataFrame(cells) if any(cell["cluster"] for cell in cells) else None
    else:
        table, clusters = added
    if clusters is not None:
        clusters = clusters[list(CLUSTER_COLUMNS)]
        clusters = clusters[clusters["cluster"] != ""].reset_index(drop=True)
    table = table[[*TABLE_COLUMNS, *kept]].reset_index(drop=True)
    _check_steps(table, label)
    return Evidence(table=table, source=label, kept=tuple(kept), clusters=clusters)


def _parse_columns(frame, label, has_clusters, kept) -> pd.DataFrame | None:
    """Every row as ``_parse_row`` parses it (kept columns as text), each distinct
    combination of values parsed once; None wherever a value breaks a rule or a column
    could hold values that compare equal but read differently (1, 1.0 and True; 0.0 and
    -0.0)."""
    if not all(_plain(frame[column]) for column in frame.columns):
        return None
    named = [c for c in ("agent", "task", *kept) if c in frame.columns]
    rest = [c for c in frame.columns if c not in named]
    codes, firsts = _groups(frame, rest)
    combos = []
    for position in firsts:
        index = frame.index[position]
        row = SourceRow(label, f"row {index}", frame.iloc[position].to_dict())
        try:
            combos.append(_parse_row(row, index, has_clusters))
        except InputError:
            return None
    parsed = pd.DataFrame(combos).take(codes).reset_index(drop=True)
    parsed["row"] = frame.index.to_numpy(dtype=np.int64)
    parsed["agent"] = DEFAULT_AGENT
    for column in named:
        found, values = pd.factorize(frame[column], use_na_sentinel=False)
        texts = [SourceRow(label, "", {column: value}).text(column) for value in values]
        if column == "task" and None in texts:
            return None
        empty = DEFAULT_AGENT if column == "agent" else ""
        parsed[column] = np.array([text or empty for text in texts], dtype=object)[found]
    return parsed


def _plain(column: pd.Series) -> bool:
    """Whether the column's values are all text (or missing), or all of one numeric type
    with no negative zero."""
    if column.dtype.kind in "iub":
        return True
    if column.dtype.kind == "f":
        return not ((column == 0) & np.signbit(column)).any()
    return pd.api.types.infer_dtype(column, skipna=True) in ("string", "empty")


def _add_up(parsed: pd.DataFrame, kept, sum_duplicates) -> tuple | None:
    """``_aggregate``'s two passes as columns: the cells (counts added up per ``KEY``) and
    the per-cluster records (None where no row names a cluster); None wherever
    ``_aggregate`` would refuse a row (its message then comes from it) or a sum could pass
    the largest count."""
    if parsed["trials"].max() > INT64_MAX // len(parsed):
        return None
    by_cluster, cluster_firsts = _groups(parsed, [*KEY, "cluster"])
    by_key, key_firsts = _groups(parsed, list(KEY))
    per_trial = parsed["per_trial"].to_numpy()
    per_trial = per_trial & per_trial[cluster_firsts[by_cluster]]
    counted = parsed["method"].isin(COUNTED).to_numpy()
    grading = parsed["grading"].to_numpy()
    repeated = _repeated(by_cluster, cluster_firsts)
    refused = repeated & ~per_trial & ~(counted & sum_duplicates)
    refused |= _repeated(by_key, key_firsts) & ~counted
    refused |= grading != grading[key_firsts[by_key]]
    if refused.any() or (kept and repeated.any()):
        return None
    clustered = (parsed["cluster"] != "").any()
    clusters = _sums(parsed, by_cluster, cluster_firsts) if clustered else None
    return _sums(parsed, by_key, key_firsts), clusters


def _groups(frame: pd.DataFrame, key: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group of ``key`` (numbered in first-seen order, missing values one
    value) and each group's first row."""
    groups = frame.groupby(key, sort=False, dropna=False).ngroup().to_numpy()
    return groups, np.unique(groups, return_index=True)[1]


def _repeated(groups: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """Which rows are not their group's first."""
    repeated = np.ones(len(groups), dtype=bool)
    repeated[firsts] = False
    return repeated


def _sums(parsed: pd.DataFrame, groups: np.ndarray, firsts: np.ndarray) -> pd.DataFrame:
    """The first row of each group with the group's successes, trials and rows."""
    out = parsed.iloc[firsts].reset_index(drop=True)
    sums = parsed[["successes", "trials"]].groupby(groups).sum()
    out["successes"] = sums["successes"].to_numpy()
    out["trials"] = sums["trials"].to_numpy()
    out["n_rows"] = np.bincount(groups)
    return out


def _parse_row(row: SourceRow, number: int, has_clusters: bool) -> dict:
    task = row.text("task")
    if task is None:
        row.fail("task", "task is empty")
    method = row.text("method")
    if method is None:
        row.fail("method", "method is empty")
    if method not in METHODS:
        close = difflib.get_close_matches(method, METHODS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        row.fail("method", f"unknown method '{method}'{hint}; known: {', '.join(METHODS)}")
    out = {
        "agent": row.text("agent") or DEFAULT_AGENT,
        "task": task,
        "method": method,
        "milestone": -1,
        "run": "",
        "step": -1,
        "successes": -1,
        "trials": -1,
        "chosen_index": -1,
        "logprob": np.nan,
        "grading": "",
        "row": int(number),
        "per_trial": False,
        "cluster": "",
    }
    if method in NEEDS_STEP:
        step = row.integer("step", 1)
        if step is None:
            row.fail("step", f"method {method} needs a step (1-based)")
        out["step"] = step
    else:
        row.absent("step", method)
    if method in TAKES_MILESTONE:
        milestone = row.integer("milestone", 1)
        out["milestone"] = -1 if milestone is None else milestone
    else:
        row.absent("milestone", method)
    if method in TAKES_RUN:
        out["run"] = row.text("run") or DEFAULT_RUN
    if method in COUNTED:
        _parse_counts(row, method, out)
    else:
        for column in ("success", "successes", "trials"):
            row.absent(column, method)
    if method == BEST_OF_N:
        index = row.integer("chosen_index", 1)
        if index is None:
            row.fail("chosen_index", f"method {method} needs chosen_index (1-based)")
        out["chosen_index"] = index
    else:
        row.absent("chosen_index", method)
    if method == GOLDEN:
        logprob = row.real("logprob")
        if logprob is None:
            row.fail("logprob", f"method {method} needs logprob (natural log, <= 0)")
        if logprob > 0:
            row.fail("logprob", f"logprob ({logprob:g}) must be <= 0")
        out["logprob"] = logprob
    else:
        row.absent("logprob", method)
    if method == END_TO_END:
        grading = row.text("grading") or "final"
        if grading not in GRADINGS:
            row.fail("grading", f"'{grading}' is not one of {', '.join(GRADINGS)}")
        out["grading"] = grading
    else:
        row.absent("grading", method)
    if method in TAKES_CLUSTER and has_clusters:
        out["cluster"] = row.text("cluster")
        if out["cluster"] is None:
            row.fail("cluster", "cluster is empty (a table with clusters names every run's)")
    else:
        row.absent("cluster", method)
    return out


def _parse_counts(row: SourceRow, method: str, out: dict) -> None:
    success = row.boolean("success")
    has_counts = row.raw("successes") is not None or row.raw("trials") is not None
    if success is not None and has_counts:
        row.fail("success", "gives both success and successes/trials; use one form per row")
    if success is not None:
        out.update(successes=success, trials=1, per_trial=True)
        if method in (END_TO_END, MILESTONE_METHOD):
            out["run"] = ""  # a per-trial row's run names the trial; trials are pooled
        return
    if method in (END_TO_END, MILESTONE_METHOD):
        row.absent("run", method)
    successes = row.integer("successes", 0)
    trials = row.integer("trials", 1)
    if successes is None:
        row.fail("successes", f"method {method} needs successes and trials (or success)")
    if trials is None:
        row.fail("trials", f"method {method} needs successes and trials (or success)")
    if successes > trials:
        row.fail("successes", f"successes ({successes}) exceeds trials ({trials})")
    out.update(successes=successes, trials=trials)


def _aggregate(parsed: list[dict], label: str, key, kept=(), sum_duplicates=False) -> list[dict]:
    """One record per value of ``key``: per-trial rows are counted; count rows of the same
    cell are added up with ``sum_duplicates`` and refused without it. A kept column holds
    the distinct values of its rows, joined by "; "."""
    groups: dict[tuple, dict] = {}
    for record in parsed:
        value = tuple(record[k] for k in key)
        first = groups.get(value)
        if first is None:
            groups[value] = {"n_rows": 1, **record}
            continue
        counted = record["method"] in COUNTED
        if not (record["per_trial"] and first["per_trial"]) and not (counted and sum_duplicates):
            hint = "; --sum-duplicates adds up batches of the same cell" if counted else ""
            raise InputError(
                f"{label}: row {record['row']}: duplicates row {first['row']} "
                f"(same agent, task, method, milestone, run and step){hint}"
            )
        if record["grading"] != first["grading"]:
            raise InputError(
                f"{label}: row {record['row']}, column grading: '{record['grading']}' differs "
                f"from row {first['row']} ('{first['grading']}') for the same task"
            )
        first["successes"] += record["successes"]
        first["trials"] += record["trials"]
        first["n_rows"] += record.get("n_rows", 1)  # a cluster's record counts its rows
        for column in kept:
            first[column] = join_distinct([first[column], record[column]])
    return list(groups.values())


def join_distinct(texts) -> str:
    """The distinct non-empty values of ``texts`` (each may itself be values joined by
    "; "), in the order first seen, joined by "; ": how a kept column merges rows."""
    seen: list[str] = []
    for text in texts:
        seen += [v for v in str(text).split("; ") if v and v not in seen]
    return "; ".join(seen)


def _check_steps(table: pd.DataFrame, label: str) -> None:
    stepped = table[table["step"] >= 1]
    for (agent, task, method, milestone, run), group in stepped.groupby(
        ["agent", "task", "method", "milestone", "run"], sort=False
    ):
        steps = sorted(set(group["step"]))
        expected = list(range(1, len(steps) + 1))
        if steps == expected:
            continue
        missing = sorted(set(range(1, max(steps) + 1)) - set(steps))
        row = int(group.loc[group["step"] == max(steps), "row"].iloc[0])
        where = f"agent '{agent}', task '{task}', {method}"
        if run:
            where += f", run '{run}'"
        if milestone >= 1:
            where += f", milestone {milestone}"
        raise InputError(
            f"{label}: row {row}, column step: steps of {where} skip {missing[0]} "
            f"(have {', '.join(map(str, steps))})"
        )
