"""Large run files read with pyarrow: CSV and Parquet streamed in batches, validated per
distinct value and counted per cell as they come.

A run file of a million rows holds few distinct agents, tasks, steps and outcomes. Each
batch is read as dictionary-encoded columns (multi-threaded), each distinct value is
parsed once by the same rules as the row-by-row reader (``SourceRow``), and the batch's runs
are added up per (agent, task, step, cluster) cell; the duplicate-run check keeps one
64-bit hash per run. The cells then go through the evidence validator like any count
table.

This path is an accelerator, never a second set of rules: wherever a file is not plainly
well formed (a value that breaks a rule, a blank line or a line break inside quotes that
would shift the row numbers, a duplicate run, a column type it does not know), it returns
None and the caller reads the file row by row, which names the file, row, column and
rule exactly as before.
"""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval.constants import END_TO_END, MILESTONE_METHOD
from bayes_eval.errors import InputError
from bayes_eval.evidence.source_row import SourceRow, as_real
from bayes_eval.evidence.table import Evidence, join_distinct
from bayes_eval.files import check_readable
from bayes_eval.messages import collected, note

__all__ = ["kept_text", "read_counts"]

BATCH_BYTES = 1 << 20  # CSV block size: a batch of about 30k short rows
INVALID = object()  # a distinct value that breaks a rule


def read_counts(path: Path, label: str, fields, cluster, agent, agent_optional, check):
    """The file's runs as validated ``Evidence`` (counts per cell), or None where the
    row-by-row reader must decide.

    Parameters
    ----------
    path : pathlib.Path
    label : str
        The file as messages name it.
    fields : readers.runs.Fields
    cluster : str or None
    agent : str
        The agent of rows whose format has no agent field, or whose agent is empty.
    agent_optional : bool
        Whether an empty agent takes ``agent`` (else it is an error).
    check : callable
        ``check(label, header)`` vets the header as the row-by-row reader does.

    The header's notes (ignored columns, delimiter) are made only where the file is read
    here: else the row-by-row reader makes them.
    """
    check_readable(path, label)
    with _system_memory_pool():
        return _read_counts(path, label, fields, cluster, agent, agent_optional, check)


@contextlib.contextmanager
def _system_memory_pool():
    """Arrow's allocations from the system allocator while reading, which gives freed
    batches back (Arrow's default pool keeps them: a higher peak)."""
    import pyarrow as pa

    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


def _read_counts(path, label, fields, cluster, agent, agent_optional, check):
    with collected() as found:  # the header's notes, passed on only where read here
        if path.suffix.lower() in (".parquet", ".pq"):
            batches = _parquet_batches(path, label, check)
        else:
            batches = _csv_batches(path, label, check, fields.run)
    if batches is None:
        return None
    columns = _columns(fields, cluster)
    parsers = {
        name: _parser(label, column, role, agent_optional)
        for name, (column, role) in columns.items()
    }
    cell = ["agent", "task", "step", "cluster"]
    totals, values, hashes = None, {}, []
    start = 2  # the first run's row, numbered as a spreadsheet numbers it
    try:
        for batch in batches:
            frame = _parse(batch, columns, parsers, agent, start)
            if frame is None:
                return None
            start += batch.num_rows
            ran = frame[frame["run"].notna()]
            if len(ran):
                key = ran[["agent", "task", "step", "run"]]
                hashes.append(pd.util.hash_pandas_object(key, index=False).to_numpy())
            part = frame.groupby(cell, sort=False, dropna=False).agg(
                successes=("success", "sum"), trials=("success", "size"), row=("row", "min")
            )
            # folded batch by batch: memory grows with the cells, not the runs
            totals = part if totals is None else _fold(pd.concat([totals, part]), cell)
            for name in fields.kept:
                if name in frame:
                    seen = [values[name]] if name in values else []
                    both = pd.concat([*seen, frame[[*cell, "row", name]]])
                    values[name] = both.drop_duplicates([*cell, name])
    except (OSError, ValueError, TypeError):  # pyarrow's errors on a malformed file
        return None
    if totals is None:
        return None
    runs = np.sort(np.concatenate(hashes)) if hashes else np.zeros(0, np.uint64)
    if np.any(runs[1:] == runs[:-1]):  # a run twice (or a hash collision): row by row
        return None
    evidence = _evidence(_cells(totals, values, cell), label, cluster)
    if evidence is not None:
        for text in found:
            note(text)
    return evidence


def _columns(fields, cluster) -> dict:
    """The output field, its column in the file and how it is parsed."""
    out = {"task": (fields.task, "task"), "success": (fields.success, "success")}
    for name, role in (("agent", "agent"), ("step", "step"), ("run", "run")):
        column = getattr(fields, name)
        if column is not None:
            out[name] = (column, role)
    if cluster is not None:
        out["cluster"] = (cluster, "cluster")
    for name in fields.kept:
        out[name] = (name, "kept")
    return out


def _csv_batches(path, label, check, run):
    """The file's batches as dictionary-encoded text columns, after the header's checks;
    None where row numbers would not be line numbers or the text is not plain."""
    import pyarrow as pa
    from pyarrow import csv as pacsv

    from bayes_eval.evidence.table import sniff_delimiter

    try:
        with path.open("rb") as file:
            first = file.readline().removeprefix(b"\xef\xbb\xbf")
            lines, last, binary = first.count(b"\n"), first[-1:], b"\x00" in first
            while chunk := file.read(1 << 24):
                lines += chunk.count(b"\n")
                binary = binary or b"\x00" in chunk
                last = chunk[-1:]
    except OSError:
        return None
    lines += last != b"\n"  # lines, the header's included
    if binary or not first.strip() or lines < 2:
        return None
    try:
        header_text = first.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return None
    delimiter = sniff_delimiter(header_text, path.suffix.lower(), label)
    header = [c.strip() for c in next(csv.reader([header_text], delimiter=delimiter))]
    check(label, header)
    text = pa.dictionary(pa.int32(), pa.string())
    try:  # the first block is parsed on opening
        reader = pacsv.open_csv(
            pa.OSFile(str(path)),
            read_options=pacsv.ReadOptions(
                column_names=header, skip_rows=1, block_size=BATCH_BYTES, use_threads=True
            ),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                # run ids are one per run: plain text; the rest repeat: dictionaries
                column_types={c: pa.string() if c == run else text for c in header},
                strings_can_be_null=False,
            ),
        )
    except (OSError, ValueError):  # pyarrow's errors on a malformed file
        return None
    return _counted(reader, lines - 1)


def _counted(batches, expected):
    """The batches, then None as the last item where their rows are not ``expected``
    (a blank line was skipped: the row numbers would shift)."""
    seen = 0
    for batch in batches:
        seen += batch.num_rows
        yield batch
    if seen != expected:
        yield None


def _parquet_batches(path, label, check):
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path, buffer_size=BATCH_BYTES, pre_buffer=False)
    except Exception:  # pyarrow raises many types for a non-Parquet file
        return None
    header = [str(name) for name in file.schema_arrow.names]
    check(label, header)
    return file.iter_batches(batch_size=1 << 15)


def _parse(batch, columns, parsers, agent, start):
    """One batch as a frame of parsed fields and its rows; None where a value breaks a
    rule (the row-by-row reader then names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if batch is None:
        return None
    out = {}
    for name, (column, _) in columns.items():
        if column not in batch.schema.names:  # an optional field (vetted with the header)
            continue
        array = batch.column(column)
        if name == "run" and pa.types.is_string(array.type):  # one per run: trimmed at once
            trimmed = pc.utf8_trim_whitespace(array).to_numpy(zero_copy_only=False)
            out[name] = np.where(trimmed == "", None, trimmed)
            continue
        if not pa.types.is_dictionary(array.type):
            known = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer)
            known += (pa.types.is_floating, pa.types.is_boolean)
            if not any(test(array.type) for test in known):
                return None
            array = array.dictionary_encode()
        values = [parsers[name](v) for v in array.dictionary.to_pylist()]
        codes = array.indices.fill_null(len(values)).to_numpy(zero_copy_only=False)
        if array.null_count:
            values.append(parsers[name](None))
        if any(v is INVALID for v in values):
            return None
        kind = np.int8 if name == "success" else object
        out[name] = np.asarray(values, dtype=kind)[codes]
    frame = pd.DataFrame(out)
    if "agent" not in frame:
        frame["agent"] = agent
    frame["agent"] = frame["agent"].fillna(agent)
    for name in ("step", "run"):
        if name not in frame:
            frame[name] = None
    if "cluster" not in frame:
        frame["cluster"] = ""
    frame["row"] = np.arange(start, start + batch.num_rows)
    return frame


def _parser(label, column, role, agent_optional):
    """Parse one distinct value of ``column`` by the row-by-row reader's rules; INVALID
    where it breaks one (an empty agent only where the format's agent is required)."""

    def parse(value):
        row = SourceRow(label, "", {column: value})
        try:
            if role == "success":
                parsed = row.boolean(column)
            elif role == "step":
                parsed = row.integer(column, 1)
            elif role == "kept":
                return kept_text(row, column)
            else:
                parsed = row.text(column)
        except InputError:
            return INVALID
        required = ("task", "success", "cluster") + (() if agent_optional else ("agent",))
        if parsed is None and role in required:
            return INVALID
        return parsed

    return parse


def _fold(counts: pd.DataFrame, cell: list) -> pd.DataFrame:
    """Counts of the same cell added up; the earliest row kept."""
    grouped = counts.groupby(level=cell, sort=False, dropna=False)
    return grouped.agg(successes=("successes", "sum"), trials=("trials", "sum"), row=("row", "min"))


def _cells(totals, values, cell) -> pd.DataFrame:
    """Counts per (agent, task, step, cluster) in order of their first run, with that
    run's row; a kept field holds the cell's distinct values in the order first seen
    (``values``: each field's distinct values per cell, with their first row)."""
    cells = totals.reset_index().sort_values("row", ignore_index=True)
    for name, found in values.items():
        ordered = found.sort_values("row")
        joined = ordered.groupby(cell, sort=False, dropna=False)[name].agg(join_distinct)
        cells = cells.merge(joined.reset_index(), on=cell, how="left")
    ended = cells["step"].isna()
    cells["method"] = np.where(ended, END_TO_END, MILESTONE_METHOD)
    cells["step"] = np.where(ended, -1, cells["step"].fillna(-1)).astype(np.int64)
    return cells


def _evidence(cells, label, cluster):
    """The evidence of the cells, as the validator builds it from the same runs: totals per
    (agent, task, method, step) in order of their first run, and counts per cluster where
    runs come in clusters; None where the steps of a task have a gap (the row-by-row
    reader names it)."""
    from bayes_eval.evidence.table import CLUSTER_COLUMNS, TABLE_COLUMNS

    kept = [c for c in cells.columns if c not in (*CLUSTER_COLUMNS, "method")]
    for column in ("successes", "trials", "row"):
        cells[column] = cells[column].astype(np.int64)
    key = ["agent", "task", "method", "step"]
    totals = {"successes": "sum", "trials": "sum", "row": "min"}
    table = cells.groupby(key, sort=False).agg({**totals, **dict.fromkeys(kept, join_distinct)})
    table = table.reset_index().assign(
        milestone=-1,
        run="",
        chosen_index=-1,
        logprob=np.nan,
        grading=np.where(table.index.get_level_values("method") == END_TO_END, "final", ""),
        n_rows=table["trials"].to_numpy(),
    )
    stepped = table[table["step"] >= 1].groupby(["agent", "task"], sort=False)["step"]
    if (stepped.max() != stepped.size()).any():
        return None
    clusters = None
    if cluster is not None:
        clusters = cells[list(CLUSTER_COLUMNS)].reset_index(drop=True)
    table = table[[*TABLE_COLUMNS, *kept]]
    return Evidence(table=table, source=label, kept=tuple(kept), clusters=clusters)


def kept_text(row: SourceRow, column: str) -> str:
    """A kept field as text, a number written the same whichever file it came from (a CSV's
    "8.0" and a JSON file's 8 are both "8.0")."""
    value = row.raw(column)
    if value is None:
        return ""
    number = as_real(value)
    return str(value).strip() if number is None else repr(number)
