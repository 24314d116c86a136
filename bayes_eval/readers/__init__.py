"""Readers of evaluation results where they already live: per-run tables, METR's run
files, tau-bench trajectories and Inspect AI logs. Each returns the validated
``Evidence`` that ``fit`` takes."""

from bayes_eval.readers.inspect_logs import read_inspect
from bayes_eval.readers.runs import RUN_FORMATS, read_runs, run_rows

__all__ = ["RUN_FORMATS", "read_inspect", "read_runs", "run_rows"]
