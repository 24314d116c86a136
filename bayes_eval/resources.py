"""Locate the shipped specs (``models/``) and datasets (``data/``), installed or in a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_dir(kind: str) -> Path:
    """The folder of shipped ``models`` or ``data``.

    Installed wheels carry them as the packages ``bayes_eval.models`` and
    ``bayes_eval.data``; a plain checkout has them beside the package.
    """
    try:
        folder = Path(str(resources.files(f"bayes_eval.{kind}")))
        if folder.is_dir():
            return folder
    except ModuleNotFoundError:
        pass
    return Path(__file__).resolve().parent.parent / kind


def example_evidence() -> Path:
    """Path of the shipped example evidence table."""
    return shipped_dir("data") / "example_evidence.csv"
