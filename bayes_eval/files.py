"""Reading the user's files: regular files only, UTF-8 with or without a byte-order mark,
and every failure one located line (``InputError``)."""

from __future__ import annotations

import stat
from pathlib import Path

from bayes_eval.errors import InputError

__all__ = ["check_readable", "read_text"]


def check_readable(path: Path, label: str, kind: str = "table") -> Path:
    """``path`` if it is a regular file this process may open; else InputError. A FIFO or
    a device would block or never end, so it is refused before it is opened."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{label}: is a folder, not a {kind}")
    if not stat.S_ISREG(mode):
        raise InputError(f"{label}: is not a regular file (a pipe or device?), not a {kind}")
    return path


def read_text(path: Path, label: str, kind: str = "table") -> str:
    """The text of a UTF-8 file (a leading byte-order mark dropped)."""
    check_readable(path, label, kind)
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not a text {kind} (not UTF-8: byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot read ({exc.strerror})") from None
