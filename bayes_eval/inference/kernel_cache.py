"""Compiled log densities kept on disk, so that a model compiled once loads in a fraction of
a second in every later process.

A pooled model's log density (with its gradient) and its expand function (the draws'
deterministics) are PyTensor graphs, which nutpie calls through C functions
(``nutpie_model``). This module compiles each C function once, with the graph inside it,
keeps its machine code in ``$XDG_CACHE_HOME/bayes_eval/numba``
(``~/.cache/bayes_eval/numba`` by default) under a key of the graph (PyTensor's own hash
of its operations, types and constants), of the C function's source and of the
compiler's versions, and from then on loads it. numba's index adds the Python version and
the processor, so a cache folder shared between machines loads only what each machine
compiled. The folder is safe to delete; where it cannot be written, every process
compiles anew. The cache is numba's own (``numba.core.caching``), located and named here.
Beside the compiled functions, a small record per model structure (``read_structure``,
``remember_structure``; keyed by ``nutpie_model.structure_key``) names them, so that a
later fit finds them without compiling its graphs first.

Same seed, same bytes: code loaded from numba's cache is not the machine code of the same
function compiled in the running process (the hierarchical model's gradient differed by
up to 2.7e-12, and a seeded fit's draws from the first step). So a missing function is
compiled and saved by a forked process, and every process, the first included, runs the
copy loaded from the cache. (Compiled in the process itself, the process's own symbols
would shadow the loaded ones.) Every kernel of the graph is compiled anew inside the C
function (PyTensor's own kernel cache stays off): the saved code does not depend on what
other models compiled before.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from bayes_eval.messages import progress

__all__ = [
    "CACHE_LIMIT",
    "all_cached",
    "cache_dir",
    "cached_callbacks",
    "evict",
    "graph_key",
    "read_structure",
    "remember_structure",
]

# The most the cache folder holds, in bytes: past it, the models used least recently go
# (a model of the shipped pooled example takes 1.6 MB).
CACHE_LIMIT = 2 * 1024**3


def cache_dir() -> Path:
    """The folder of compiled functions: ``$XDG_CACHE_HOME/bayes_eval/numba``
    (``~/.cache/bayes_eval/numba`` by default). Safe to delete: what is missing is
    compiled again."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "bayes_eval" / "numba"


def cached_callbacks(functions, notice: str) -> list:
    """Each of ``functions`` compiled by numba as a C callback (``numba.core.ccallback.
    CFunc``: its ``address`` is the C function's) and loaded from the disk cache (those
    missing compiled and saved first, together). The progress lines say, for each, whether
    it was in the cache (``hit``), was compiled and saved by this call (``miss``), cannot
    be cached and is compiled anew in every process (``not cacheable``), or could not be
    read from the cache and was compiled here (``damaged``).

    Parameters
    ----------
    functions : sequence of (py_func, signature, key, what)
        ``py_func``'s globals may name numba functions (a PyTensor graph's), compiled
        inside it; ``key`` identifies the compiled code (``graph_key``; ``None``: not
        cacheable); ``what`` names it for the progress lines (``log density``).
    notice : str
        What a compile costs, said before one starts.
    """
    start = time.perf_counter()
    if not _writable():
        progress(f"compile: the cache folder {cache_dir()} cannot be written: compiling here")
        functions = [(py_func, signature, None, what) for py_func, signature, _, what in functions]
    loaders = [_callback(py_func, signature, key) for py_func, signature, key, _ in functions]
    states = []
    for (_, _, key, _), loader in zip(functions, loaders, strict=True):
        states.append("not cacheable" if key is None else "hit" if _in_cache(loader) else "miss")
    missing = [
        _callback(py_func, signature, key)
        for (py_func, signature, key, _), state in zip(functions, states, strict=True)
        if state == "miss"
    ]
    if missing:
        names = [what for (*_, what), one in zip(functions, states, strict=True) if one == "miss"]
        progress(f"compile: {' and '.join(names)}: cache miss, compiling (numba; {notice}) ...")
        _compile_apart(missing)
        evict(CACHE_LIMIT)
    for i, (py_func, signature, _, _) in enumerate(functions):
        loader, state = loaders[i], states[i]
        if state == "miss" and not _in_cache(loader):
            state = "not cacheable"  # numba saves no function holding a constant over 1 MB
        if state == "not cacheable":  # compiled anew in every process
            loader = _callback(py_func, signature, None)
        loader.compile()
        if state != "not cacheable" and not loader.cache_hits:
            state = "damaged"  # numba compiled it here instead, and saved it again
        if state == "hit":  # used now: the last to be evicted
            with contextlib.suppress(OSError):
                os.utime(loader._cache._cache_file._index_path)
        loaders[i], states[i] = loader, state
    seconds = time.perf_counter() - start
    said = {
        "hit": f"cache hit, loaded in {seconds:.1f} s",
        "miss": f"compiled and cached in {seconds:.1f} s ({cache_dir()})",
        "not cacheable": f"compiled in {seconds:.1f} s (not cacheable)",
        "damaged": f"the cache's copy could not be loaded; compiled in {seconds:.1f} s",
    }
    for state, text in said.items():
        names = [what for (*_, what), one in zip(functions, states, strict=True) if one == state]
        if names:
            progress(f"compile: {' and '.join(names)}: {text}")
    return loaders


def all_cached(functions) -> bool:
    """Whether every one of ``functions`` (as ``cached_callbacks`` takes them) is in the
    cache for this processor."""
    if not _writable():
        return False
    return all(
        key is not None and _in_cache(_callback(py_func, signature, key))
        for py_func, signature, key, _ in functions
    )


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
    """Remove the models used least recently (by their index files' times, which a load
    renews) from ``cache_dir()`` until it holds at most ``limit`` bytes."""
    entries: dict[str, list[Path]] = {}
    for path in cache_dir().iterdir():
        if ".tmp." not in path.name:  # not a file another process is writing
            entries.setdefault(path.name.split("-py", 1)[0], []).append(path)
    sizes, used = {}, {}
    for key, paths in entries.items():
        try:
            stats = [path.stat() for path in paths]
        except FileNotFoundError:  # another process removed it
            continue
        sizes[key] = sum(stat.st_size for stat in stats)
        used[key] = max(stat.st_mtime for stat in stats)
    total = sum(sizes.values())
    for key in sorted(used, key=used.get):
        if total <= limit:
            break
        for path in entries[key]:
            path.unlink(missing_ok=True)
        total -= sizes[key]


def _writable() -> bool:
    """Whether ``cache_dir()`` exists or can be made, and can be written."""
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(cache_dir(), os.W_OK)


def _compile_apart(callbacks) -> None:
    """Compile ``callbacks`` and save them to the cache in a forked process: code that this
    process compiled itself would shadow what it loads (numba links loaded code to the
    process's own definitions of the same symbols), so that the first process would run
    other machine code than every later one. Without ``fork`` (Windows) they are compiled
    here, and the first process runs its own compile."""
    if not hasattr(os, "fork"):
        for callback in callbacks:
            callback.compile()
        return
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # a threaded parent
        child = os.fork()
    if child == 0:  # pragma: no cover (the child's exit status is checked below)
        status = 1
        try:
            for callback in callbacks:
                callback.compile()
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"numba failed to compile {len(callbacks)} callbacks (exit {status})")


def _in_cache(callback) -> bool:
    """Whether numba's index in the cache lists ``callback`` for this processor."""
    cache = callback._cache
    codegen = callback._targetdescr.target_context.codegen()
    return cache._index_key(callback._sig, codegen) in cache._cache_file._load_index()


def _callback(py_func, signature, key):
    """A new, uncompiled numba C callback of ``py_func``, caching under ``key`` (none
    where ``key`` is ``None``)."""
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    callback = CFunc(py_func, sigutils.normalize_signature(signature), locals={}, options={})
    if key is not None:
        callback._cache = _cache_class()(py_func, key)
    return callback


def graph_key(function, source: str) -> str | None:
    """The cache key of C code calling ``function``'s graph from ``source``: PyTensor's
    hash of the graph (its operations, types and constants), ``source`` and the versions
    of the compiler stack; ``None`` where PyTensor cannot hash the graph."""
    import llvmlite
    import numba
    import numpy
    import pytensor
    from pytensor.link.numba.dispatch.basic import numba_funcify_and_cache_key

    with pytensor.config.change_flags(numba__cache=True):
        _, key = numba_funcify_and_cache_key(function.maker.fgraph)
    if key is None:
        return None
    versions = (numba.__version__, llvmlite.__version__, pytensor.__version__, numpy.__version__)
    text = "|".join((key, source, str(pytensor.config.numba__fastmath), *versions))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@functools.cache
def _cache_class():
    """numba's function cache, located in ``cache_dir()`` and named by the key alone
    (numba would name it after the generated module, a new temporary file each time);
    made on first use, so that importing this module imports no numba."""
    from numba.core.caching import (
        CompileResultCacheImpl,
        FunctionCache,
        IndexDataCacheFile,
        _CacheLocator,
    )

    class Locator(_CacheLocator):
        def __init__(self, key):
            self._key = key

        def ensure_cache_path(self):
            cache_dir().mkdir(parents=True, exist_ok=True)

        def get_cache_path(self):
            return str(cache_dir())

        def get_source_stamp(self):
            return 0

        def get_disambiguator(self):
            return self._key

        @classmethod
        def from_function(cls, py_func, py_file):
            return None

    class Impl(CompileResultCacheImpl):
        def __init__(self, py_func, key):  # noqa: D107 (numba's interface)
            self._lineno = py_func.__code__.co_firstlineno
            self._locator = Locator(key)
            self._locator.ensure_cache_path()
            version = f"py{sys.version_info[0]}{sys.version_info[1]}{sys.abiflags}"
            self._filename_base = f"{key}-{version}"

    class Cache(FunctionCache):
        def __init__(self, py_func, key):  # noqa: D107 (numba's interface)
            self._name = repr(py_func)
            self._py_func = py_func
            self._impl = Impl(py_func, key)
            self._cache_path = self._impl.locator.get_cache_path()
            self._cache_file = IndexDataCacheFile(
                cache_path=self._cache_path,
                filename_base=self._impl.filename_base,
                source_stamp=0,
            )
            self.enable()

    return Cache
