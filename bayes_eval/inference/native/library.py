"""C callbacks built once per machine: compiled by the system's C compiler, kept in the
cache folder, loaded with ctypes.

nutpie calls a pooled model's log density and its expand function as C functions
(``bayes_eval.inference.nutpie_model``), whose source ``writer`` writes from the model's
graphs. ``library``
compiles a source into a shared library with the C compiler (``$CC``, else ``cc``, ``gcc``
or ``clang``), keeps it in ``$XDG_CACHE_HOME/bayes_eval/c`` (``~/.cache/bayes_eval/c``)
under a key of the source, the compiler and its flags, and loads it from there. The folder
is safe to delete (what is missing is compiled again) and holds at most ``CACHE_LIMIT``
bytes; where it cannot be written, each process compiles into a folder of its own.

Same seed, same bytes: the compiler turns the same source into the same machine code, and
every process, the one that compiled it included, runs the library it loads. The code is
compiled without fast-math and without fusing a multiplication and an addition into one
rounding (``-ffp-contract=off``): its arithmetic is IEEE's, in the order written.

Beside the libraries, a small record per model structure (``read_structure``,
``remember_structure``; keyed by ``nutpie_model.structure_key``) names them, so that a later
fit loads them without writing its graphs' C again.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = [
    "CACHE_LIMIT",
    "FLAGS",
    "NoCompiler",
    "cache_dir",
    "compiler",
    "evict",
    "libraries",
    "library_key",
    "load",
    "read_structure",
    "remember_structure",
]

# The most the cache folder holds, in bytes: past it, what was used least recently goes
# (the libraries of the shipped pooled example's hierarchical model take 90 KB).
CACHE_LIMIT = 256 * 1024**2

# How every library is compiled (see the module's docstring).
FLAGS = ("-O2", "-fPIC", "-shared", "-ffp-contract=off")
SUFFIX = ".so"


class NoCompiler(Exception):
    """No C compiler is available, or it failed on a source."""


def cache_dir() -> Path:
    """The folder of compiled libraries: ``$XDG_CACHE_HOME/bayes_eval/c``
    (``~/.cache/bayes_eval/c`` by default). Safe to delete: what is missing is compiled
    again."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "bayes_eval" / "c"


@functools.cache
def compiler() -> tuple[tuple[str, ...], str]:
    """The C compiler's command (``$CC``, else the first of ``cc``, ``gcc``, ``clang`` on
    the path) and its identity (the first line of ``--version``).

    Raises
    ------
    NoCompiler
        None is found, or it does not run.
    """
    given = os.environ.get("CC")
    if given:
        command = tuple(shlex.split(given))
    else:
        found = next(filter(None, map(shutil.which, ("cc", "gcc", "clang"))), None)
        if found is None:
            raise NoCompiler("no C compiler on the path (cc, gcc or clang; or set CC)")
        command = (found,)
    try:
        done = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise NoCompiler(f"the C compiler {' '.join(command)} does not run ({exc})") from None
    return command, (done.stdout.splitlines() or [""])[0].strip()


def library_key(source: str) -> str:
    """The cache key of ``source`` compiled: a hash of it, the compiler and the flags."""
    command, identity = compiler()
    text = "\n".join([source, " ".join(command), identity, " ".join(FLAGS)])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def libraries(sources: list[str], on_compile=None) -> tuple[list[ctypes.CDLL], int]:
    """Each of ``sources`` compiled and loaded: from the cache where it is there, else
    compiled (all missing ones at once, one compiler process each) and cached first;
    and how many were compiled. ``on_compile(count)`` is called before a compile starts.

    Raises
    ------
    NoCompiler
        No C compiler, or one that fails on a source (the message gives its first lines).
    """
    keys = [library_key(source) for source in sources]
    folder = cache_dir()
    if not _writable(folder):
        folder = Path(tempfile.mkdtemp(prefix="bayes-eval-c-"))
    paths = [folder / f"{key}{SUFFIX}" for key in keys]
    missing = {
        path: source for path, source in zip(paths, sources, strict=True) if not path.is_file()
    }
    if missing:
        if on_compile is not None:
            on_compile(len(missing))
        _compile(missing)
        evict(CACHE_LIMIT)
    for path in paths:
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: the last to be evicted
    loaded = [ctypes.CDLL(str(path)) for path in paths]
    if folder != cache_dir():
        shutil.rmtree(folder, ignore_errors=True)  # loaded: the files are no longer needed
    return loaded, len(missing)


def load(keys: list[str]) -> list[ctypes.CDLL] | None:
    """The cached libraries of ``keys``, loaded; ``None`` where any is missing or cannot
    be loaded."""
    paths = [cache_dir() / f"{key}{SUFFIX}" for key in keys]
    try:
        for path in paths:
            os.utime(path)  # used now: the last to be evicted
        return [ctypes.CDLL(str(path)) for path in paths]
    except OSError:
        return None


def _compile(sources: dict[Path, str]) -> None:
    """Compile each source into its path (written whole or not at all), the compiler
    processes running side by side."""
    command, _ = compiler()
    running = []
    with tempfile.TemporaryDirectory(prefix="bayes-eval-cc-") as work:
        try:
            for i, (path, source) in enumerate(sources.items()):
                c_file = Path(work) / f"graph{i}.c"
                c_file.write_text(source)
                built = path.with_name(f"{path.name}.tmp.{os.getpid()}")
                arguments = [*command, *FLAGS, "-o", str(built), str(c_file), "-lm"]
                process = subprocess.Popen(
                    arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
                running.append((process, built, path))
            failed = None
            for process, built, path in running:
                _, errors = process.communicate()
                if process.returncode == 0 and failed is None:
                    os.replace(built, path)
                elif failed is None:
                    lines = " | ".join(errors.strip().splitlines()[:3])
                    failed = f"the C compiler failed ({lines})"
        except OSError as exc:
            failed = f"the C compiler did not run ({exc})"
        finally:
            for process, built, _ in running:
                if process.poll() is None:
                    process.kill()
                    process.wait()
                built.unlink(missing_ok=True)
    if failed:
        raise NoCompiler(failed)


def read_structure(key: str) -> dict | None:
    """The record ``remember_structure`` kept under ``key``; ``None`` where there is none
    or it cannot be read. Reading it marks it used (``evict``)."""
    path = cache_dir() / f"{key}.structure.json"
    try:
        record = json.loads(path.read_text())
        os.utime(path)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def remember_structure(key: str, record: dict) -> None:
    """Keep ``record`` (JSON) under ``key`` in the cache folder, written whole or not at
    all; nothing where the folder cannot be written."""
    path = cache_dir() / f"{key}.structure.json"
    temporary = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        temporary.write_text(json.dumps(record))
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def evict(limit: int) -> None:
    """Remove the files used least recently (by their times, which a load renews) from
    ``cache_dir()`` until it holds at most ``limit`` bytes."""
    files = []
    for path in cache_dir().iterdir():
        if ".tmp." in path.name:  # a file another process is writing
            continue
        with contextlib.suppress(FileNotFoundError):  # another process removed it
            stat = path.stat()
            files.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= size


def _writable(folder: Path) -> bool:
    """Whether ``folder`` exists or can be made, and can be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)
