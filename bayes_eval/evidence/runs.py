"""Run-level result files: one row per run, aggregated to counts on load.

Formats (``RUN_FORMATS``), each a table of runs whose fields sit in named columns:

* ``runs``: the package's own per-run table, ``agent`` (optional), ``task``, ``success``
  (0/1 or true/false), an optional ``step`` (the milestone a milestone run covers; a
  row without one is an end-to-end run) and an optional ``run`` id. CSV, TSV or Parquet.
* ``metr``: METR's "Measuring AI Ability to Complete Long Tasks" runs compacted to CSV,
  ``agent, task, task_family, run_id, success, score, human_minutes``.
* ``metr-jsonl``: METR's published ``all_runs.jsonl``, one JSON object per line: model
  ``alias``, ``task_id``, ``score_binarized``, ``human_minutes``, ``run_id``.
* ``taubench``: tau-bench trajectories summarised as ``task_id, trial, reward`` (reward
  0/1), one agent per file.

A run id seen twice for the same agent, task and step is an error: the same run read
twice would count as two trials. Runs that share a seed, a sample or a day can be marked
with ``cluster``, the name of a column, so that the cluster-aware models treat them as
correlated. Every broken rule is one ``InputError`` naming the file, the row (the line
of a JSONL file), the column (field) and the rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bayes_eval.constants import DEFAULT_AGENT, END_TO_END, MILESTONE_METHOD
from bayes_eval.errors import InputError
from bayes_eval.evidence import columnar
from bayes_eval.evidence.source_row import SourceRow
from bayes_eval.evidence.table import Evidence, PathLike, read_table, validate_frame
from bayes_eval.files import read_text
from bayes_eval.messages import note

__all__ = ["RUN_FORMATS", "read_runs", "run_rows"]


@dataclass(frozen=True)
class Fields:
    """Where a run's fields sit in one format; ``None``: the format has no such field."""

    agent: str | None
    task: str
    success: str
    run: str | None
    step: str | None = None
    kept: tuple[str, ...] = ()  # per-task fields carried into the summary


RUN_FORMATS = {
    "runs": Fields("agent", "task", "success", "run", "step"),
    "metr": Fields("agent", "task", "success", "run_id", kept=("human_minutes", "task_family")),
    "metr-jsonl": Fields(
        "alias", "task_id", "score_binarized", "run_id", kept=("human_minutes", "task_family")
    ),
    "taubench": Fields(None, "task_id", "reward", "trial"),
}
OPTIONAL = {"runs": ("agent", "run", "step")}  # fields a format's file may leave out


def read_runs(
    path: PathLike,
    run_format: str = "runs",
    *,
    cluster: str | None = None,
    agent: str | None = None,
) -> Evidence:
    """Read a run-level results file as validated evidence.

    Parameters
    ----------
    path : str or pathlib.Path
        The file: CSV, TSV or Parquet; JSON Lines for ``metr-jsonl``.
    run_format : {"runs", "metr", "metr-jsonl", "taubench"}
    cluster : str, optional
        A column (field) naming each run's cluster of correlated runs (a seed, a sample,
        a day); the ``end_to_end_pooled`` and ``hierarchical`` models then treat the
        runs of a cluster as over-dispersed.
    agent : str, optional
        Agent name for a format without an agent field (default: the file's stem).

    Returns
    -------
    Evidence
        Counts per (agent, task) (and step), the same object ``fit`` takes.

    Raises
    ------
    InputError
        On the first broken rule, naming file, row, column and rule.
    """
    if run_format in RUN_FORMATS and run_format != "metr-jsonl":
        fields = RUN_FORMATS[run_format]
        evidence = columnar.read_counts(
            Path(path),
            str(path),
            fields,
            cluster,
            _default_agent(Path(path), fields, agent),
            run_format in OPTIONAL,
            lambda label, header: _check_columns(label, header, run_format, cluster),
        )
        if evidence is not None:
            return evidence
    rows = run_rows(path, run_format, cluster=cluster, agent=agent)
    kept = tuple(c for c in RUN_FORMATS[run_format].kept if c in rows.columns)
    frame = rows.drop(columns="run")
    if cluster is None:
        frame = frame.drop(columns="cluster")
    return validate_frame(frame, str(path), from_file=True, kept=kept)


def run_rows(path, run_format: str, *, cluster: str | None = None, agent=None) -> pd.DataFrame:
    """One evidence row per run (``agent``, ``task``, ``method``, ``step``, ``success``,
    ``run``, ``cluster`` and the format's kept fields), indexed by its source row (the
    line of a JSONL file), in file order. Parameters and errors as ``read_runs``."""
    if run_format not in RUN_FORMATS:
        raise InputError(f"unknown run format '{run_format}'; known: {', '.join(RUN_FORMATS)}")
    fields = RUN_FORMATS[run_format]
    path, label = Path(path), str(path)
    if run_format == "metr-jsonl":
        records, unit = _json_lines(path, label), "line"
        for number, record in records:
            for name in _needed(run_format, cluster):
                if name not in record:
                    raise InputError(f"{label}: line {number}, field {name}: missing")
    else:
        table = read_table(path, label, check_header=lambda *_: None)
        if path.suffix.lower() in (".parquet", ".pq"):  # numbered as a spreadsheet would
            table.index = range(2, table.shape[0] + 2)
        header = [str(c) for c in table.columns]
        _check_columns(label, header, run_format, cluster)
        records, unit = list(zip(table.index, table.to_dict("records"), strict=True)), "row"
    if not records:
        raise InputError(f"{label}: the file has no runs")
    default_agent = _default_agent(path, fields, agent)
    out, seen = [], {}
    for number, values in records:
        row = SourceRow(label, f"{unit} {number}", values)
        parsed = _run(row, fields, default_agent, cluster, run_format in OPTIONAL)
        if parsed["run"] is not None:
            key = (parsed["agent"], parsed["task"], parsed["step"], parsed["run"])
            if key in seen:
                row.fail(
                    fields.run,
                    f"run '{parsed['run']}' of agent '{parsed['agent']}', task "
                    f"'{parsed['task']}' appears again ({unit} {seen[key]}): the same run "
                    "would count twice",
                )
            seen[key] = number
        out.append(parsed | {k: columnar.kept_text(row, k) for k in fields.kept if k in values})
    return pd.DataFrame(out, index=[number for number, _ in records])


def _default_agent(path: Path, fields: Fields, agent) -> str:
    """The agent of runs without one: ``agent`` if given, else the file's stem for a
    format without an agent field, else the package's default."""
    return agent or (path.stem if fields.agent is None else DEFAULT_AGENT)


def _needed(run_format: str, cluster: str | None) -> list[str]:
    fields = RUN_FORMATS[run_format]
    names = [fields.agent, fields.task, fields.success, fields.run, fields.step]
    optional = OPTIONAL.get(run_format, ())
    needed = [n for n in names if n is not None and n not in optional]
    return needed + ([cluster] if cluster is not None else [])


def _check_columns(label, header, run_format, cluster) -> None:
    """A column named twice or a missing field is an error; columns outside the ``runs``
    format are ignored, with a note."""
    seen = set()
    for column in header:
        if column in seen:
            raise InputError(f"{label}: row 1, column {column}: column appears twice")
        seen.add(column)
    for name in _needed(run_format, cluster):
        if name not in seen:
            what = "the --cluster column" if name == cluster else f"required column ({run_format})"
            raise InputError(f"{label}: row 1: {what} '{name}' is missing")
    if run_format == "runs":
        fields = RUN_FORMATS["runs"]
        known = {fields.agent, fields.task, fields.success, fields.run, fields.step, cluster}
        extra = [c for c in header if c not in known]
        if extra:
            note(
                f"{label}: ignored column{'s' * (len(extra) > 1)} {', '.join(extra)} (not "
                "part of the runs format)"
            )


def _run(row: SourceRow, fields: Fields, default_agent: str, cluster, agent_optional) -> dict:
    """One run's evidence row, each field checked where it sits. An empty agent is the
    default agent where the format's agent column is optional, else an error."""
    task = row.text(fields.task)
    if task is None:
        row.fail(fields.task, "task is empty")
    success = row.boolean(fields.success)
    if success is None:
        row.fail(fields.success, "success is empty (a run needs its outcome, 0 or 1)")
    step = row.integer(fields.step, 1) if fields.step is not None else None
    run = row.text(fields.run) if fields.run is not None else None
    group = ""
    if cluster is not None:
        group = row.text(cluster)
        if group is None:
            row.fail(cluster, "cluster is empty (--cluster names every run's cluster)")
    agent = row.text(fields.agent) if fields.agent is not None else None
    if agent is None and fields.agent is not None and not agent_optional:
        row.fail(fields.agent, "agent is empty")
    return {
        "agent": agent or default_agent,
        "task": task,
        "method": END_TO_END if step is None else MILESTONE_METHOD,
        "step": "" if step is None else step,
        "success": success,
        "run": run,
        "cluster": group,
    }


def _json_lines(path: Path, label: str) -> list[tuple[int, dict]]:
    """The objects of a JSON Lines file with their line numbers; blank lines skipped."""
    out = []
    for number, line in enumerate(read_text(path, label, "JSON Lines file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{label}: line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(f"{label}: line {number}: not a JSON object (one run per line)")
        out.append((number, record))
    return out
