"""The forms evidence comes in, and which one a set of paths shows."""

from __future__ import annotations

from pathlib import Path

from bayes_eval.errors import InputError

__all__ = ["INPUT_FORMATS", "INSPECT_OPTIONS", "detect_format"]

# How evidence is read: the tidy table, a run-level format, or Inspect logs.
INPUT_FORMATS = ("evidence", "runs", "metr", "metr-jsonl", "taubench", "inspect")
# The options that apply to Inspect logs alone (``bayes_eval.read_inspect``).
INSPECT_OPTIONS = (
    "scorer",
    "success_threshold",
    "milestones",
    "agent_from",
    "task_from",
    "audit_scorer",
)


def detect_format(paths, given: str | None = None) -> str:
    """``given``, or the format the paths show: Inspect logs for folders and
    ``.eval``/``.json`` files, METR's JSON Lines for ``.jsonl``, else an evidence table."""
    if given is not None:
        if given not in INPUT_FORMATS:
            raise InputError(f"input_format: '{given}' is not one of {', '.join(INPUT_FORMATS)}")
        return given
    paths = [paths] if isinstance(paths, str | Path) else paths
    suffixes = {Path(p).suffix.lower() for p in paths}
    if any(Path(p).is_dir() for p in paths) or suffixes <= {".eval", ".json"}:
        return "inspect"
    if suffixes == {".jsonl"}:
        return "metr-jsonl"
    return "evidence"
