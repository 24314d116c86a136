"""The MCMC engines of the pooled models, and the choice between them.

- ``nutpie`` (the default): NUTS in Rust, the model's log density in C, chains in parallel
  threads.
- ``pymc``: PyMC's own NUTS, the fallback.
- ``numpyro``: NUTS on JAX through PyMC's JAX samplers, the chains vectorized on one
  device (a GPU where JAX finds one). Needs the extra ``bayes_eval[jax]``
  (``bayes_eval[jax-cuda]`` for NVIDIA GPUs). JAX's compilations persist in the user's
  cache folder, so a model compiled once starts quickly in the next process.
- ``auto``: numpyro where JAX finds a GPU and the table has at least ``AUTO_JAX_CELLS``
  count cells, nutpie otherwise (on CPU nutpie was faster at every size measured,
  ``benchmarks/scale.py``); the choice and its reason go to the log and the provenance.

PyMC, nutpie and JAX are imported only here, and only when a model is sampled.

nutpie's model is compiled once per model structure on a machine and kept in the user's
cache folder (``nutpie_model``, ``native``): its log density and expand function are
written as C from the model's graphs and compiled by the system's C compiler in about a
second; a later process, or a fit of a table of the same structure (new counts; for most
models, other sizes), loads them in a fraction of a second. Where they cannot be built so
(no C compiler), nutpie's own compile runs instead (numba, 20 to 80 s in every process),
and the progress says why.

Same seed, same bytes: the C compiler makes the same machine code of the same source, and
every process runs the library it loads from the cache. nutpie's own compile runs with
PyTensor's disk cache of kernels off (``fresh_compile``): with PyTensor's fast-math
flags, a kernel loaded from that cache is not inlined as a freshly compiled one is, and a
seeded fit's draws differed in the 8th digit between the first process to compile a model
and every later one. The ``pymc`` and ``numpyro`` engines compile anew in every process
(``numpyro``: JAX keeps its own cache).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from bayes_eval.errors import InputError
from bayes_eval.inference import interrupts
from bayes_eval.inference.nutpie_model import CachedModel, NotNative
from bayes_eval.messages import progress, progress_shown

__all__ = [
    "Engine",
    "choose_engine",
    "compile_model",
    "compile_nutpie",
    "fresh_compile",
    "jax_cache_dir",
    "nutpie_compiled",
    "sample",
]

# Compiled nutpie models kept per process (a study refits one design many times).
COMPILE_CACHE_SIZE = 4

# Engine auto: numpyro on a GPU from this many count cells; below, JAX's compile time
# outweighs the GPU (on 2 CPU cores nutpie fits 1,000 cells in 48 s and 5,000 in 149 s
# in a new process, compile included, 4 x 500 draws: benchmarks/scale.py, 2026-11-29;
# PyMC's numpyro on an H100 took 43 s at 5,000).
AUTO_JAX_CELLS = 5_000

JAX_INSTALL = "pip install 'bayes_eval[jax]' (NVIDIA GPUs: 'bayes_eval[jax-cuda]')"

# What a user waits for at the first fit of a model structure on a machine
# (benchmarks/compile_cache.py), and where nutpie compiles the model itself.
COMPILE_NOTICE = "about a second; once per model structure on this machine"
NUMBA_NOTICE = "numba: 20 to 80 s on 2 cores, in every process"

# What the samplers write into a trace's attributes that changes from run to run.
CLOCK_ATTRS = ("created_at", "sampling_time")

# nutpie models compiled in this process, by model structure (the counts are data), so
# that studies refitting one design to new counts compile once.
_COMPILED: dict = {}


@dataclass(frozen=True)
class Engine:
    """The engine a fit runs on.

    Attributes
    ----------
    name : {"nutpie", "pymc", "numpyro"}
    device : str
        Where it runs: ``cpu``, or JAX's device (``gpu: NVIDIA H100 80GB HBM3``).
    reason : str
        Why ``auto`` chose it; empty where the engine was asked for by name.
    """

    name: str
    device: str
    reason: str = ""

    def describe(self) -> str:
        """``numpyro (gpu: ...)``, with ``auto``'s reason where it chose."""
        text = f"{self.name} ({self.device})"
        return text + (f" [auto: {self.reason}]" if self.reason else "")


def choose_engine(requested: str, cells: int) -> Engine:
    """The engine to run for ``requested`` (one of ``MCMC_ENGINES``) on a table of ``cells``.

    Raises
    ------
    InputError
        ``numpyro`` asked for by name where JAX or numpyro is not installed.
    """
    if requested in ("nutpie", "pymc"):
        return Engine(requested, "cpu")
    if requested == "numpyro":
        _require_jax()
        return Engine("numpyro", _jax_device())
    if not _jax_installed():
        return Engine("nutpie", "cpu", f"the jax extra is not installed ({JAX_INSTALL})")
    device = _jax_device()
    if device == "cpu":
        return Engine("nutpie", "cpu", "no GPU, and on CPU nutpie samples faster at every size")
    if cells < AUTO_JAX_CELLS:
        return Engine(
            "nutpie",
            "cpu",
            f"{cells:,} cells < {AUTO_JAX_CELLS:,}: JAX's compile time outweighs the GPU",
        )
    return Engine("numpyro", device, f"a GPU and {cells:,} cells >= {AUTO_JAX_CELLS:,}")


def _jax_installed() -> bool:
    return all(importlib.util.find_spec(name) for name in ("jax", "numpyro"))


def _require_jax() -> None:
    if not _jax_installed():
        raise InputError(f"engine numpyro needs JAX and numpyro: {JAX_INSTALL}")


def _jax_device() -> str:
    """``cpu``, or the kind of JAX's first accelerator (``gpu: NVIDIA H100 ...``)."""
    import jax

    backend = jax.default_backend()
    if backend == "cpu":
        return "cpu"
    return f"{backend}: {jax.devices()[0].device_kind}"


def jax_cache_dir() -> Path:
    """JAX's persistent compilation cache: ``$XDG_CACHE_HOME/bayes_eval/jax``
    (``~/.cache/bayes_eval/jax`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "bayes_eval" / "jax"


def _configure_jax() -> None:
    """Double precision (as nutpie), and compilations kept across processes."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", str(jax_cache_dir()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def sample(model, engine: Engine, settings, seed: int, key, unstored: tuple = ()):
    """Sample ``model`` with NUTS on ``engine``; the trace as a ``DataTree`` (posterior,
    sample_stats), without wall-clock attributes. On nutpie through the package's C
    (``nutpie_model``), the free variables named in ``unstored`` are sampled but not kept
    (the other routes keep them: the caller drops what it does not keep).

    Parameters
    ----------
    model : pymc.Model
    engine : Engine
    settings : SamplerSettings
        Its ``draws``, ``tune``, ``chains`` and ``target_accept`` (the engine is
        ``engine``).
    seed : int
    key : tuple
        The model's structure, for nutpie's compiled-model cache.
    """
    draws, tune, chains = settings.draws, settings.tune, settings.chains
    target = settings.target_accept
    bar = progress_shown()
    # a sampler that catches KeyboardInterrupt returns its draws so far, which would be
    # diagnosed and refitted; Interrupted stops the fit instead
    with warnings.catch_warnings(), interrupts.raising(), _pymc_quiet():
        warnings.simplefilter("ignore")
        compiled = None
        if engine.name == "nutpie":
            data = {v.name: v.get_value() for v in model.data_vars}
            compiled = nutpie_compiled(key, lambda: model, unstored).with_data(**data)
        progress(
            f"sampling: {engine.describe()}, {chains} chains x ({tune} tune + {draws} "
            f"draws), target_accept {target:g} ..."
        )
        start = time.perf_counter()
        if engine.name == "nutpie":
            import nutpie

            trace = _finished(
                nutpie.sample(
                    compiled,
                    draws=draws,
                    tune=tune,
                    chains=chains,
                    seed=seed,
                    # nutpie's terminal bar (indicatif) draws on stderr, and only on a terminal
                    progress_bar=bar,
                    target_accept=target,
                    save_warmup=False,  # no group reads the tuning draws
                    blocking=False,
                )
            )
        else:
            import pymc as pm

            jax = engine.name == "numpyro"
            if jax:
                _configure_jax()
            with fresh_compile():
                trace = pm.sample(
                    draws=draws,
                    tune=tune,
                    chains=chains,
                    random_seed=seed,
                    target_accept=target,
                    model=model,
                    progressbar=bar,
                    compute_convergence_checks=False,
                    # PyMC 6 would otherwise choose nutpie itself
                    nuts_sampler=engine.name,
                    **(
                        {"nuts_sampler_kwargs": {"chain_method": "vectorized"}}
                        if jax
                        else {"cores": 1}
                    ),
                )
    progress(f"sampling: done in {time.perf_counter() - start:.1f} s")
    return _without_clock(trace)


def _finished(sampler, poll: float = 0.05):
    """The trace of nutpie's background ``sampler`` once its chains end. Its own blocking
    wait holds a signal until they do; here the main thread sleeps in Python between
    looks, so an interrupt lands within ``poll`` seconds, and cancels the chains. (nutpie
    0.16 answers ``is_finished`` with a ``TimeoutError`` while the chains hold it.)"""
    try:
        while not _finished_now(sampler):
            time.sleep(poll)
    except BaseException:
        sampler.cancel()
        raise
    return sampler.wait()


def _finished_now(sampler) -> bool:
    try:
        return sampler.is_finished
    except TimeoutError:
        return False


def _without_clock(trace):
    """``trace`` without the samplers' wall-clock attributes (``CLOCK_ATTRS``), so that
    the same fit writes the same bytes, and with its text statistics (nutpie's
    ``divergence_message``, NaN where a draw did not diverge) as strings, empty where
    absent, as a file keeps them."""
    import numpy as np

    for node in trace.subtree:
        node.attrs = {k: v for k, v in node.attrs.items() if k not in CLOCK_ATTRS}
        for name, variable in node.dataset.data_vars.items():
            if variable.dtype == object:
                text = [v if isinstance(v, str) else "" for v in variable.values.ravel()]
                node[name] = variable.copy(data=np.array(text, dtype=str).reshape(variable.shape))
    return trace


@contextlib.contextmanager
def _pymc_quiet():
    """PyMC's own lines (\"NUTS[numpyro]: ...\", \"Sequential sampling ...\") held back:
    the log says what runs, and stderr stays for progress and errors."""
    logger = logging.getLogger("pymc")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def fresh_compile():
    """PyTensor's numba backend compiling every kernel anew, never from its disk cache,
    while a model compiles (see the module's docstring: the cache made a fit's bytes
    depend on which process compiled first)."""
    import pytensor

    with pytensor.config.change_flags(numba__cache=False):
        yield


def compile_nutpie(model):
    """``model`` compiled for nutpie, every kernel anew (``fresh_compile``)."""
    import nutpie

    with fresh_compile():
        return nutpie.compile_pymc_model(model)


def compile_model(model, unstored: tuple = ()):
    """``model`` compiled for nutpie: its callbacks in C (``nutpie_model``; the free
    variables in ``unstored`` not kept), or, where they cannot be built so, nutpie's own
    compile (``compile_nutpie``, which keeps them), saying why. Its ``with_data`` gives
    the model nutpie samples."""
    try:
        return CachedModel.compile(model, COMPILE_NOTICE, unstored)
    except NotNative as exc:
        progress(f"compile: {exc}; compiling with nutpie's own compiler ({NUMBA_NOTICE}) ...")
        return compile_nutpie(model)


def nutpie_compiled(key, build, unstored: tuple = ()):
    """The model compiled for nutpie for the structure ``key``: from this process's cache,
    else ``compile_model`` of ``build()`` (which loads it from the disk cache where it was
    compiled before), ``unstored`` not kept. Its data are the built model's:
    ``with_data`` puts others in place and gives the model nutpie samples."""
    key = (*key, tuple(unstored))
    if key in _COMPILED:
        progress("compile: cache hit, the model compiled earlier in this process")
        return _COMPILED[key]
    if len(_COMPILED) >= COMPILE_CACHE_SIZE:
        _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = compile_model(build(), unstored)
    return _COMPILED[key]
