"""Locate the shipped specs (``models/``) and datasets (``data/``), installed or in a
checkout, and count the cores this process may use."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# Where an installed wheel keeps the checkout's ``models`` (the specs) and ``data``.
INSTALLED = {"models": "shipped_specs", "data": "shipped_data"}


def shipped_dir(kind: str) -> Path:
    """The folder of shipped ``models`` (specs) or ``data``.

    An installed wheel carries them inside the package (``bayes_eval/shipped_specs``,
    ``bayes_eval/shipped_data``); a checkout (or an editable install) has them beside it.
    """
    inside = PACKAGE / INSTALLED[kind]
    return inside if inside.is_dir() else PACKAGE.parent / kind


def example_evidence() -> Path:
    """Path of the shipped example evidence table."""
    return shipped_dir("data") / "example_evidence.csv"


def shipped_datasets() -> dict[str, Path]:
    """Names and paths of the shipped CSV datasets."""
    return {p.stem: p for p in sorted(shipped_dir("data").glob("*.csv"))}


def cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):  # not on macOS
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
