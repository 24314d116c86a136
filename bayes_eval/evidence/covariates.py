"""Covariates of the crossed model: what explains agents' abilities and tasks' difficulties.

A spec names them in ``[covariates]``: ``agent`` and ``task`` list numeric terms, each a
column or a log of one (``log2(human_minutes)``, ``log(x)``, ``log10(x)``);
``task_group`` names a column that groups tasks (a task family), and ``length`` the task
term that measures a task's length, for time horizons. A column's values come from a
side table (``--agents agents.csv`` with an ``agent`` column, ``--tasks tasks.csv`` with a
``task`` column) or, failing that, from the evidence's kept columns (``--keep-columns``),
where every row of one agent (task) must carry the same value. Values are decimal numbers
or ISO dates (``2024-06-20``), which become decimal years. In the model every term is
standardised (its mean over the fitted agents or tasks subtracted, divided by its sd), so
one weakly informative prior on the coefficients fits every term; the centre and scale are
kept to map results back.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval.errors import InputError

__all__ = [
    "Covariates",
    "Term",
    "decimal_year",
    "parse_term",
    "parse_values",
    "predicted_agents",
    "read_covariates",
    "read_side_table",
]

# name -> (forward, inverse, doublings per unit of the transformed value)
TRANSFORMS = {
    "log2": (np.log2, np.exp2, 1.0),
    "log": (np.log, np.exp, 1 / np.log(2)),
    "log10": (np.log10, lambda x: np.power(10.0, x), np.log2(10)),
}
TERM = re.compile(r"^(?:(log2|log10|log)\((.+)\)|([^()]+))$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Term:
    """A covariate: a column, optionally through a log (``transform``)."""

    text: str
    column: str
    transform: str | None = None

    def forward(self, values: np.ndarray) -> np.ndarray:
        """The term's value from the column's."""
        return values if self.transform is None else TRANSFORMS[self.transform][0](values)

    def inverse(self, values: np.ndarray) -> np.ndarray:
        """The column's value from the term's."""
        return values if self.transform is None else TRANSFORMS[self.transform][1](values)

    @property
    def doublings(self) -> float | None:
        """Doublings of the column per unit of the term (a log), or None (no log)."""
        return None if self.transform is None else TRANSFORMS[self.transform][2]


def parse_term(text: str, where: str) -> Term:
    """A term from its spec text, ``column`` or ``log2(column)`` (also ``log``, ``log10``).

    Raises
    ------
    InputError
        Any other form.
    """
    found = TERM.fullmatch(text.strip()) if isinstance(text, str) else None
    if not found or not (found.group(2) or found.group(3) or "").strip():
        raise InputError(
            f"{where}: '{text}' is not a covariate term: give a column name or "
            "log2(column), log(column), log10(column)"
        )
    if found.group(3):
        return Term(text.strip(), found.group(3).strip())
    return Term(text.strip(), found.group(2).strip(), found.group(1))


@dataclass(frozen=True)
class Covariates:
    """The covariate values of the fitted agents and tasks, standardised.

    Attributes
    ----------
    agent_terms, task_terms : tuple of Term
    agent_raw : numpy.ndarray
        ``(agents, agent terms)``, the terms' values (dates as decimal years).
    task_raw : numpy.ndarray
        ``(tasks, task terms)``.
    agent_centre, agent_scale, task_centre, task_scale : numpy.ndarray
        Per term: what standardising subtracts and divides by.
    agent_dates : tuple of bool
        Which agent terms are dates (in decimal years).
    groups : list of str
        The task groups (empty without ``task_group``).
    task_group : numpy.ndarray
        Each task's group index (empty without ``task_group``).
    group_column : str or None
    length : Term or None
        The task term that measures length (horizons).
    sources : dict
        Column name -> where its values came from (a side table or the evidence).
    """

    agent_terms: tuple
    task_terms: tuple
    agent_raw: np.ndarray
    task_raw: np.ndarray
    agent_centre: np.ndarray
    agent_scale: np.ndarray
    task_centre: np.ndarray
    task_scale: np.ndarray
    agent_dates: tuple
    groups: list
    task_group: np.ndarray
    group_column: str | None
    length: Term | None
    sources: dict

    @property
    def agent_matrix(self) -> np.ndarray:
        """The agents' standardised terms."""
        return self.standard_agents(self.agent_raw)

    @property
    def task_matrix(self) -> np.ndarray:
        """The tasks' standardised terms."""
        return (self.task_raw - self.task_centre) / self.task_scale

    def standard_agents(self, raw: np.ndarray) -> np.ndarray:
        """Standardise agent terms given on the raw scale (``(..., agent terms)``)."""
        return (raw - self.agent_centre) / self.agent_scale

    def describe(self) -> str:
        """One line for provenance: the terms and where their values came from."""
        parts = []
        for what, terms in (("agent", self.agent_terms), ("task", self.task_terms)):
            if terms:
                named = ", ".join(f"{t.text} ({self.sources[t.column]})" for t in terms)
                parts.append(f"{what} covariates {named}")
        if self.group_column:
            parts.append(
                f"task groups {self.group_column} ({self.sources[self.group_column]}, "
                f"{len(self.groups)} groups)"
            )
        return "; ".join(parts) or "no covariates"


def read_side_table(table, key: str) -> pd.DataFrame:
    """A side table of covariates (``--agents``, ``--tasks``), a path (CSV, TSV, Parquet)
    or a DataFrame: one row per ``key`` value, indexed by ``key``, with each value's
    spreadsheet row kept in ``attrs["rows"]`` and its source in ``attrs["source"]``.

    Raises
    ------
    InputError
        An unreadable table, no ``key`` column, an empty key or a key given twice.
    """
    from bayes_eval.evidence.table import read_table

    def check_header(label, header):
        if key not in header:
            raise InputError(f"{label}: row 1: no column '{key}' (the {key} each row describes)")
        for column in header:
            if list(header).count(column) > 1:
                raise InputError(f"{label}: row 1, column {column}: column appears twice")

    if isinstance(table, pd.DataFrame):
        label = f"{key}s table"
        table = table.set_axis(range(2, len(table) + 2))  # spreadsheet rows
    else:
        label = str(table)
        table = read_table(Path(table), label, check_header=check_header)
    check_header(label, list(table.columns))  # a DataFrame or Parquet table: not vetted yet
    if table.empty:
        raise InputError(f"{label}: the table has no rows")
    rows = {}
    for row, name in zip(table.index, table[key], strict=True):
        name = "" if pd.isna(name) else str(name).strip()
        if not name:
            raise InputError(f"{label}: row {row}, column {key}: empty {key} name")
        if name in rows:
            raise InputError(f"{label}: row {row}, column {key}: '{name}' repeats row {rows[name]}")
        rows[name] = row
    out = table.assign(**{key: list(rows)}).set_index(key)
    out.attrs = {"rows": rows, "source": label}
    return out


def read_covariates(spec_covariates: dict, evidence, agents, tasks, side=None) -> Covariates:
    """The covariates a spec names, for the fitted ``agents`` and ``tasks``.

    Parameters
    ----------
    spec_covariates : dict
        The spec's ``[covariates]`` (validated: ``agent``, ``task``, ``task_group``,
        ``length``).
    evidence : Evidence
    agents, tasks : list of str
    side : dict, optional
        ``{"agent": table, "task": table}`` from ``read_side_table``.

    Raises
    ------
    InputError
        A named column found nowhere, a value that differs between rows of one agent
        (task), a value that is not a number or date, a log of a value <= 0, or a term
        that takes one value only.
    """
    side = side or {}
    agent_terms = tuple(spec_covariates.get("agent", ()))
    task_terms = tuple(spec_covariates.get("task", ()))
    sources: dict = {}
    agent_raw, dates = _terms(agent_terms, "agent", agents, evidence, side, sources)
    task_raw, _ = _terms(task_terms, "task", tasks, evidence, side, sources)
    groups, task_group = [], np.zeros(0, dtype=np.int64)
    group_column = spec_covariates.get("task_group")
    if group_column:
        values = _column(group_column, "task", tasks, evidence, side, sources)
        groups = list(dict.fromkeys(v for v, _ in values))
        task_group = np.array([groups.index(v) for v, _ in values], dtype=np.int64)
    agent_centre, agent_scale = _standardise(agent_raw, agent_terms, "agent", len(agents))
    task_centre, task_scale = _standardise(task_raw, task_terms, "task", len(tasks))
    length = spec_covariates.get("length")
    return Covariates(
        agent_terms=agent_terms,
        task_terms=task_terms,
        agent_raw=agent_raw,
        task_raw=task_raw,
        agent_centre=agent_centre,
        agent_scale=agent_scale,
        task_centre=task_centre,
        task_scale=task_scale,
        agent_dates=dates,
        groups=groups,
        task_group=task_group,
        group_column=group_column,
        length=next((t for t in task_terms if t.text == length), None),
        sources=sources,
    )


def predicted_agents(texts, covariates: Covariates) -> tuple[list[str], np.ndarray]:
    """New agents described only by covariates (``--predict-agent``): each text is
    ``name,column=value,...`` giving every agent covariate column.

    Returns
    -------
    names : list of str
    raw : numpy.ndarray
        ``(new agents, agent terms)`` on the terms' scale.

    Raises
    ------
    InputError
        No name, a malformed pair, a column the spec does not name or one it lacks, a
        value that is not a number or date, or a name given twice.
    """
    names, rows = [], []
    columns = list(dict.fromkeys(t.column for t in covariates.agent_terms))
    for text in texts:
        where = f"predict {text}"
        name, *pairs = [part.strip() for part in text.split(",")]
        if not name or "=" in name:
            raise InputError(f"{where}: start with the agent's name (name,column=value,...)")
        if name in names:
            raise InputError(f"{where}: agent '{name}' is predicted twice")
        values = {}
        for pair in pairs:
            column, sep, value = pair.partition("=")
            column = column.strip()
            if not sep or not column or not value.strip():
                raise InputError(f"{where}: '{pair}' is not column=value")
            if column not in columns:
                known = ", ".join(columns) or "none (the spec names no agent covariates)"
                raise InputError(
                    f"{where}: '{column}' is not an agent covariate; the spec's: {known}"
                )
            values[column] = value.strip()
        if not columns:
            raise InputError(
                f"{where}: the spec names no agent covariates, so a new agent has nothing "
                "to be predicted from; add [covariates] agent = [...] to a copy of the spec"
            )
        missing = [c for c in columns if c not in values]
        if missing:
            raise InputError(f"{where}: give {', '.join(f'{c}=...' for c in missing)}")
        parsed = {c: parse_values(where, c, [(values[c], where)]) for c in columns}
        rows.append([_apply(t, parsed[t.column][0][0], where)[0] for t in covariates.agent_terms])
        names.append(name)
    return names, np.array(rows, dtype=float).reshape(len(names), len(covariates.agent_terms))


def _terms(terms, key, names, evidence, side, sources) -> tuple[np.ndarray, tuple]:
    """The values of ``terms`` for ``names`` (``(names, terms)``) and which are dates."""
    out = np.zeros((len(names), len(terms)))
    dates = []
    for index, term in enumerate(terms):
        values = _column(term.column, key, names, evidence, side, sources)
        numbers, is_date = parse_values(sources[term.column], term.column, values)
        out[:, index] = [
            _apply(term, number, f"{sources[term.column]}: {where}")[0]
            for number, (_, where) in zip(numbers, values, strict=True)
        ]
        dates.append(is_date)
    return out, tuple(dates)


def _column(column, key, names, evidence, side, sources) -> list[tuple[str, str]]:
    """``(value, where it was read)`` of ``column`` for each of ``names``, from the side
    table of ``key`` when it has the column, else from the evidence's kept columns."""
    table = side.get(key)
    if table is not None and column in table.columns:
        sources[column] = table.attrs["source"]
        out = []
        for name in names:
            if name not in table.index:
                raise InputError(
                    f"{table.attrs['source']}: no row for {key} '{name}' (column {column}): "
                    f"every {key} the model fits needs its covariates"
                )
            value = table.at[name, column]
            row = table.attrs["rows"][name]
            out.append(("" if pd.isna(value) else str(value).strip(), f"row {row}"))
        return _present(out, table.attrs["source"], column)
    if column not in evidence.kept:
        raise InputError(
            f"{evidence.source}: column {column}: the spec names it as a covariate of each {key}, "
            f"and neither the evidence (read with `keep_columns`) nor a `{key}s` table has it"
        )
    sources[column] = evidence.source
    rows = evidence.table
    out = []
    for name in names:
        mine = rows[rows[key] == name]
        seen = {}
        for value, row in zip(mine[column], mine["row"], strict=True):
            for part in str(value).split("; "):
                if part:
                    seen.setdefault(part, row)
        if len(seen) > 1:
            (first, row_1), (second, row_2) = list(seen.items())[:2]
            raise InputError(
                f"{evidence.source}: row {row_2}, column {column}: '{second}' differs from "
                f"'{first}' (row {row_1}) for {key} '{name}': a covariate is constant per {key}"
            )
        value, row = next(iter(seen.items()), ("", int(mine["row"].iloc[0])))
        out.append((value, f"row {row}"))
    return _present(out, evidence.source, column)


def _present(values, source, column):
    for value, where in values:
        if not value:
            raise InputError(f"{source}: {where}, column {column}: empty covariate value")
    return values


def parse_values(
    source: str, column: str, values: list[tuple[str, str]]
) -> tuple[list[float], bool]:
    """Numbers of ``(text, where)`` values: all decimal numbers or, where any value is an
    ISO date, all dates (as decimal years)."""
    from bayes_eval.evidence.source_row import as_real

    is_date = any(DATE.fullmatch(text) for text, _ in values)
    numbers = []
    for text, where in values:
        place = f"{source}: {where}, column {column}"
        if is_date and not DATE.fullmatch(text):
            raise InputError(
                f"{place}: '{text}' is not an ISO date (YYYY-MM-DD), as other values of the "
                "column are"
            )
        if is_date:
            numbers.append(decimal_year(text, place))
            continue
        number = as_real(text)
        if number is None or not np.isfinite(number):
            raise InputError(f"{place}: '{text}' is not a decimal number or an ISO date")
        numbers.append(number)
    return numbers, is_date


def decimal_year(text: str, where: str) -> float:
    """An ISO date as a decimal year (2024-07-02 is 2024.5); a located error names
    ``where`` otherwise."""
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise InputError(f"{where}: '{text}' is not a valid date") from None
    start = dt.date(day.year, 1, 1)
    length = (dt.date(day.year + 1, 1, 1) - start).days
    return day.year + (day - start).days / length


def _apply(term: Term, number: float, where: str) -> tuple[float]:
    if term.transform is not None and not number > 0:
        raise InputError(
            f"{where}, column {term.column}: {number:g} has no {term.transform} "
            f"({term.text} needs values > 0)"
        )
    return (float(term.forward(np.float64(number))),)


def _standardise(raw: np.ndarray, terms, key: str, count: int):
    centre = raw.mean(axis=0) if count else np.zeros(len(terms))
    scale = raw.std(axis=0) if count else np.ones(len(terms))
    for term, value in zip(terms, scale, strict=True):
        if not value > 0:
            raise InputError(
                f"covariate {term.text}: takes one value across the {count} fitted {key}s, "
                "so it cannot explain how they differ; drop it from the spec"
            )
    return centre, scale
