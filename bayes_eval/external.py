"""Loaders for public run-level evaluation results, as end-to-end evidence.

Each returns one row per run (``agent``, ``task``, ``method`` = ``end_to_end``,
``success`` 0/1) in file order, ready for ``load_evidence`` (which aggregates the runs
of a cell) or for splitting runs into evidence and held-out ground truth.

* ``metr``: METR's "Measuring AI Ability to Complete Long Tasks" runs, compacted to CSV
  with columns ``agent, task, task_family, run_id, success, score, human_minutes``.
* ``taubench``: tau-bench trajectories summarised as ``task_id, trial, reward`` (reward
  0/1), one agent per file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval.constants import END_TO_END
from bayes_eval.errors import InputError

__all__ = ["RUN_FORMATS", "load_runs"]

# format -> (agent column or None, task column, success column)
RUN_FORMATS = {
    "metr": ("agent", "task", "success"),
    "taubench": (None, "task_id", "reward"),
}


def load_runs(path, run_format: str, *, agent: str | None = None) -> pd.DataFrame:
    """Read a run-level results file into per-run end-to-end evidence rows.

    Parameters
    ----------
    path : str or pathlib.Path
    run_format : {"metr", "taubench"}
    agent : str, optional
        Agent name for formats without an agent column (default: the file's stem).

    Raises
    ------
    InputError
        Naming the file, row and column of a missing column, an empty value or a
        success that is not 0 or 1.
    """
    if run_format not in RUN_FORMATS:
        raise InputError(f"unknown run format '{run_format}'; known: {', '.join(RUN_FORMATS)}")
    agent_column, task_column, success_column = RUN_FORMATS[run_format]
    path = Path(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the table ({exc})") from None
    needed = [c for c in (agent_column, task_column, success_column) if c is not None]
    for column in needed:
        if column not in frame.columns:
            raise InputError(f"{path}: missing column {column} ({run_format} format)")
        empty = np.flatnonzero(frame[column].str.strip() == "")
        if empty.size:
            raise InputError(f"{path}: row {empty[0] + 2}, column {column}: empty value")
    success = pd.to_numeric(frame[success_column], errors="coerce")
    bad = np.flatnonzero(~success.isin([0, 1]))
    if bad.size:
        value = frame[success_column].iloc[bad[0]]
        raise InputError(
            f"{path}: row {bad[0] + 2}, column {success_column}: '{value}' is not 0 or 1"
        )
    return pd.DataFrame(
        {
            "agent": frame[agent_column] if agent_column else (agent or path.stem),
            "task": frame[task_column],
            "method": END_TO_END,
            "success": success.astype(int),
        }
    )
