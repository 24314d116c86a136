"""What the package tells its user while it works, through ``logging``.

- **Notes** on the input (rows a model leaves out and why, how a file was read) are
  warning-level records on ``logging.getLogger("bayes_eval")``. With no logging set up,
  Python prints them on stderr, so nothing left out disappears silently; silence them
  with ``logging.getLogger("bayes_eval").setLevel(logging.ERROR)``.
- **Progress** (compiling, sampling, fits of a sweep done) is info-level records on
  ``bayes_eval.progress``, unseen unless a handler takes info records; the samplers'
  own bars then show too, on a terminal.

``collected()`` gathers the notes of a block instead of passing them on: the command line
prints them once a command has succeeded, and a sweep names the agent of each.
``showing_progress(stream)`` shows the progress of a block on ``stream``.
"""

from __future__ import annotations

import contextlib
import logging
import sys

from bayes_eval.errors import escape_controls

__all__ = [
    "LOGGER",
    "PROGRESS",
    "collected",
    "duration_text",
    "note",
    "progress",
    "progress_shown",
    "showing_progress",
]

LOGGER = logging.getLogger("bayes_eval")
PROGRESS = logging.getLogger("bayes_eval.progress")


def note(text: str) -> None:
    """Tell the user something about their input."""
    LOGGER.warning(text)


def progress(text: str) -> None:
    """Say how a long computation is getting on."""
    PROGRESS.info(text)


def duration_text(seconds: float) -> str:
    """``seconds`` for a progress line: ``42 s``, ``3.5 min``, ``2.1 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def progress_shown() -> bool:
    """Whether progress reaches a handler and stderr is a terminal: the samplers' and
    dask's own progress bars draw on stderr then."""
    return PROGRESS.isEnabledFor(logging.INFO) and _handled(PROGRESS) and sys.stderr.isatty()


def _handled(logger: logging.Logger) -> bool:
    """Whether an info record on ``logger`` reaches a handler that takes it."""
    while logger is not None:
        if any(handler.level <= logging.INFO for handler in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


class _Collector(logging.Handler):
    """Appends each note to the innermost ``collected()`` list."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lists: list[list[str]] = []
        self.propagate = True

    def emit(self, record) -> None:
        self.lists[-1].append(record.getMessage())


_COLLECTOR = _Collector()


@contextlib.contextmanager
def collected():
    """Gather the notes made in the block into the list it yields, instead of passing
    them on; nested blocks each gather their own."""
    notes: list[str] = []
    if not _COLLECTOR.lists:
        _COLLECTOR.propagate = LOGGER.propagate
        LOGGER.addHandler(_COLLECTOR)
        LOGGER.propagate = False
    _COLLECTOR.lists.append(notes)
    try:
        yield notes
    finally:
        _COLLECTOR.lists.pop()
        if not _COLLECTOR.lists:
            LOGGER.removeHandler(_COLLECTOR)
            LOGGER.propagate = _COLLECTOR.propagate


class _Escaping(logging.Formatter):
    """A record's text with every character that would act on a terminal escaped (a name
    from the user's table may hold ESC or BEL)."""

    def format(self, record) -> str:
        return escape_controls(super().format(record), keep="\n")


@contextlib.contextmanager
def showing_progress(stream=None):
    """Write the progress lines of the block on ``stream`` (default: stderr), one per
    line."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setLevel(logging.INFO)
    handler.setFormatter(_Escaping())
    level = PROGRESS.level
    PROGRESS.addHandler(handler)
    PROGRESS.setLevel(logging.INFO)
    try:
        yield
    finally:
        PROGRESS.removeHandler(handler)
        PROGRESS.setLevel(level)
