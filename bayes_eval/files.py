"""Reading the user's files: regular files only, UTF-8 with or without a byte-order mark,
and every failure one located line (``InputError``); and run folders checked whole
against their manifest before they are read (``check_whole``)."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

from bayes_eval.errors import InputError

__all__ = ["MANIFEST", "check_readable", "check_whole", "digest", "read_text"]

# A run folder's manifest: the commands that wrote it and its files, each with its SHA-256.
MANIFEST = "bayes-eval-run.json"


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


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    with open(path, "rb") as opened:
        return hashlib.file_digest(opened, "sha256").hexdigest()


def check_whole(folder: Path) -> None:
    """Refuse a run folder whose files are not those its manifest lists, byte for byte (an
    InputError naming the file); nothing to check in a folder without a manifest, or with
    one written before manifests held hashes."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return
    try:
        hashes = json.loads(read_text(manifest, str(manifest), "manifest")).get("sha256", {})
        names = sorted(hashes.items())
    except (ValueError, AttributeError):
        raise InputError(f"{manifest}: damaged (not the JSON bayes-eval writes)") from None
    for name, expected in names:
        path = folder / name
        if not path.is_file():
            raise InputError(
                f"{path}: missing from the run folder, whose manifest lists it: the folder was "
                "edited or damaged after it was written; fit again"
            )
        try:
            found = digest(path)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from None
        if found != expected:
            raise InputError(
                f"{path}: changed since bayes-eval wrote it (its SHA-256 is not the one in "
                f"{MANIFEST}): the run folder was edited or damaged; fit again"
            )
