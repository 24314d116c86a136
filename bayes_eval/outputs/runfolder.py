"""Run folders: each holds exactly one run, and appears whole or not at all.

A command's files are written into a hidden staging folder beside ``--out`` and swapped
into place only when all of them are written. ``--out`` may be a new folder, an empty
one, or an earlier bayes-eval run (recognised by its ``MANIFEST``), which is replaced
whole. Any other folder is refused, so a run never sits beside another dataset's files.
A command that adds to the run it reads (``report`` or ``calibrate`` into the run's own
folder) keeps that run's files beside its new ones. The swap is two renames with SIGINT
and SIGTERM held back (``interrupts.deferred``); an interrupt at any other moment removes
the staging folder and leaves the earlier run as it was.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
from pathlib import Path

from bayes_eval.errors import InputError
from bayes_eval.files import MANIFEST, digest
from bayes_eval.inference.interrupts import deferred

__all__ = ["MANIFEST", "check_out", "folder_names", "holds_fit", "write_run"]

STAGING_PREFIX = ".bayes-eval-"
# What run folders held before they had a manifest.
EARLIER_OUTPUTS = {
    "posterior.nc",
    "summary.csv",
    "ppc.csv",
    "milestone_check.csv",
    "forest.png",
    "ppc.png",
    "report.html",
    "report.md",
    "densities.png",
    "calibration.csv",
    "calibration.png",
}


def check_out(out: Path) -> Path:
    """``out`` if a run may be written there (before any work is done); else InputError."""
    try:
        return _check_out(out)
    except OSError as exc:  # a name too long, a folder that cannot be listed
        raise InputError(f"out: {out}: cannot use it ({exc.strerror})") from None


def _check_out(out: Path) -> Path:
    if out.parent.is_dir():
        limit = os.pathconf(out.parent, "PC_NAME_MAX")
        if len(os.fsencode(out.name)) > limit:
            raise InputError(
                f"out: the folder name is {len(os.fsencode(out.name))} bytes long, over the "
                f"limit of {limit} of the file system holding {out.parent}"
            )
    if out.exists() and not out.is_dir():
        raise InputError(f"out: {out} exists and is not a folder")
    if not out.parent.is_dir():
        raise InputError(f"out: parent folder {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        read_only = os.statvfs(out.parent).f_flag & os.ST_RDONLY
        why = "a read-only file system" if read_only else "permission denied"
        raise InputError(f"out: cannot write in {out.parent} ({why})")
    if out.is_dir() and not is_run(out):
        foreign = sorted(p.name for p in out.iterdir())
        if foreign:
            shown = ", ".join(foreign[:5]) + (
                f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
            )
            raise InputError(
                f"out: {out} holds files that bayes-eval did not write ({shown}); give a "
                "new or empty folder, or an earlier bayes-eval run to replace"
            )
    return out


def is_run(folder: Path) -> bool:
    """Whether ``folder`` holds a bayes-eval run: its manifest, or (written before runs
    had one) a ``posterior.nc`` among only the names bayes-eval writes."""
    if (folder / MANIFEST).is_file():
        return True
    names = {p.name for p in folder.iterdir()}
    return "posterior.nc" in names and names <= EARLIER_OUTPUTS


def holds_fit(path: Path) -> bool:
    """Whether ``path`` is a fit to read rather than evidence to fit: a ``posterior.nc``
    file (by its suffix), or a folder holding one."""
    return path.suffix == ".nc" or (path / "posterior.nc").is_file()


def write_run(out: Path, write, *, command: str, adds_to_run: bool = False) -> list[str]:
    """Run ``write(staging)``, then put the staging folder in place of ``out``.

    Parameters
    ----------
    out : Path
    write : callable
        Writes the command's files into the folder it is given.
    command : str
        What wrote them, for the manifest (``"fit"``, ``"report"``, ...).
    adds_to_run : bool
        Keep the files of the run already in ``out`` that ``write`` does not replace.

    Returns
    -------
    list of str
        The names of the files now in ``out``.
    """
    check_out(out)
    try:
        staging = _new_folder(out.parent)
    except OSError as exc:
        raise InputError(f"out: cannot write in {out.parent} ({exc.strerror})") from None
    try:
        names = _stage(staging, out, write, command, adds_to_run)
    finally:
        with deferred():
            shutil.rmtree(staging, ignore_errors=True)
    return sorted([*names, MANIFEST])


def _stage(staging: Path, out: Path, write, command: str, adds_to_run: bool) -> list[str]:
    """``write_run``'s work in ``staging``, then the swap; an error writing a file or
    putting the run in place is one located line (``InputError``), the earlier run at
    ``out`` left as it was."""
    try:
        write(staging)
        commands = [command]
        if adds_to_run and is_run(out):
            manifest = out / MANIFEST  # absent from a run written before manifests
            earlier = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {}
            commands = [*earlier.get("commands", []), command]
            for item in out.iterdir():
                if item.name != MANIFEST and not (staging / item.name).exists():
                    shutil.copy2(item, staging / item.name)
        names = sorted(p.name for p in staging.iterdir())
        hashes = {name: digest(staging / name) for name in names if (staging / name).is_file()}
        manifest = {"written_by": "bayes-eval", "commands": commands, "files": names}
        manifest["sha256"] = hashes
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        what = Path(exc.filename).name if exc.filename else "the run"
        raise InputError(f"out: cannot write {what} to {out} ({exc.strerror or exc})") from None
    try:
        _swap(staging, out)
    except OSError as exc:
        hint = "; a mount point cannot be replaced: give a folder inside it"
        hint = hint if exc.errno == errno.EBUSY else ""
        raise InputError(
            f"out: cannot put the run in place at {out} ({exc.strerror or exc}){hint}"
        ) from None
    return names


def _new_folder(parent: Path) -> Path:
    """A new hidden folder in ``parent``, with the permissions the umask gives any folder
    (``tempfile.mkdtemp`` would make it private, and the run folder with it)."""
    while True:
        folder = parent / f"{STAGING_PREFIX}{secrets.token_hex(4)}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue


def _swap(staging: Path, out: Path) -> None:
    """Put ``staging`` where ``out`` is; an earlier run there is removed whole."""
    with deferred():
        if out.is_dir() and any(out.iterdir()):
            old = _new_folder(out.parent)
            try:
                os.replace(out, old)  # onto an empty folder: atomic on POSIX
            except OSError:
                old.rmdir()
                raise
            try:
                os.replace(staging, out)
            except OSError:
                os.replace(old, out)  # the earlier run back in its place
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out)  # a new name, or onto an empty folder


# fit --by agent: characters of an agent's name kept in its run folder's name.
FOLDER_NAME_MAX = 64


def folder_names(agents: list[str]) -> list[str]:
    """A folder name per agent: its name in letters, digits, ``.``, ``_`` and ``-``
    (others become ``_``), made unique with its position where two would clash."""
    names, taken = [], set()
    for i, agent in enumerate(agents):
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", agent).strip("._")[:FOLDER_NAME_MAX] or "agent"
        if name.lower() in taken:
            name = f"{name}_{i + 1}"
        taken.add(name.lower())
        names.append(name)
    return names
