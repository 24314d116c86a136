"""What a pooled fit's compile costs in a new process, with and without a compile cache
kept on disk: the options the package could compile with, measured in one run.

Run from the repository root (needs the package installed; ``numpyro`` and ``nutpie-jax``
need the extra ``bayes_eval[jax]``):

    python benchmarks/compile_cache.py [--models hierarchical end_to_end_pooled joint]
        [--options package anew pytensor-cache numpyro nutpie-jax]

Each fit runs in a fresh Python process, as a user's ``bayes-eval fit`` does, on the
shipped pooled example with the package's default sampler settings. For each option the
first process starts from an empty cache folder (cold), a second process finds the first
one's cache (warm), and a third fits a table of other sizes with it (resized: the
example with every task run again under a new name, twice the tasks, pairs and cells).
The options:

- ``package``: the package's way. nutpie with the model's two functions written as C from
  its graphs and compiled by the C compiler once, kept in the package's disk cache
  (``bayes_eval.inference.native``): the cold process compiles and loads them, the warm
  one loads them. The same bytes in both.
- ``anew``: nutpie's own ``compile_pymc_model`` (numba), every kernel compiled anew in
  every process (``engines.compile_nutpie``; the package's way until 2026-11-29, and its
  fallback where there is no C compiler): no cache.
- ``pytensor-cache``: as ``anew``, with PyTensor's kernels loaded from its disk cache.
  Not the package's way: a kernel loaded from that cache is not inlined as a fresh one is,
  so the first process draws other bytes than the later ones (docs/outputs.md).
- ``numpyro``: the package's ``numpyro`` engine (PyMC's JAX NUTS), with JAX's persistent
  compilation cache.
- ``nutpie-jax``: nutpie's sampler on a JAX log-density, with JAX's persistent cache.

Printed per model, option and process: the seconds to import the package's stack, to
compile (every compile of the fit; under ``package`` building the graphs and loading
included), to sample (every fit of the diagnostics gate's refits), the whole fit, the
fit beyond sampling, run / cold, and what the package's disk cache said (``hit``,
``miss``). The targets: ``hierarchical`` cold at most 10 s and
warm at most 3 s beyond sampling, ``joint`` cold at most 20 s (the fit's seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

OPTIONS = ("package", "anew", "pytensor-cache", "numpyro", "nutpie-jax")
TARGETS = {("hierarchical", "cold"): "fit <= 10", ("hierarchical", "warm"): "beyond <= 3"}
TARGETS[("joint", "cold")] = "fit <= 20"


def child(model: str, option: str, table: str) -> None:
    """Fit ``model`` with ``option`` in this process on ``table`` (``example`` or
    ``resized``); print one JSON line of seconds and the disk cache's answer."""
    import contextlib
    import logging
    import warnings

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    import nutpie
    import pymc  # noqa: F401

    import bayes_eval
    from bayes_eval.inference import engines
    from bayes_eval.resources import shipped_datasets

    imported = time.perf_counter()
    engine = "numpyro" if option == "numpyro" else "nutpie"
    if option == "pytensor-cache":
        engines.fresh_compile = contextlib.nullcontext
    if option in ("anew", "pytensor-cache"):

        class Anew:
            @staticmethod
            def compile(model, notice):
                return engines.compile_nutpie(model)

        engines.CachedModel = Anew
    if option == "nutpie-jax":
        engines._configure_jax()

        class Jax:
            @staticmethod
            def compile(model, notice):
                compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
                # the model was built on this table's counts: nothing to put in place (JAX's
                # graph keeps no data variable a count is not read through)
                object.__setattr__(compiled, "with_data", lambda **data: compiled)
                return compiled

        engines.CachedModel = Jax
    compiled, sampled, cache = [], [], []
    original = engines.nutpie_compiled

    def timed(key, build):
        begun = time.perf_counter()
        model = original(key, build)
        compiled.append(time.perf_counter() - begun)
        return model

    engines.nutpie_compiled = timed

    class Sampled(logging.Handler):
        def emit(self, record):
            found = re.match(r"sampling: done in ([\d.]+) s", record.getMessage())
            if found:
                sampled.append(float(found.group(1)))
            said = re.match(
                r"compile: log density and deterministics: cache (hit|miss)", record.getMessage()
            )
            if said:
                cache.append(said.group(1))

    logger = logging.getLogger("bayes_eval")
    logger.addHandler(Sampled())
    logger.setLevel(logging.INFO)
    data = shipped_datasets()["example_pooled"]
    if table == "resized":
        import pandas as pd

        data = pd.read_csv(data)
        data = pd.concat([data, data.assign(task=data["task"] + "_again")], ignore_index=True)
    fit_start = time.perf_counter()
    bayes_eval.fit(data, model, sampler={"engine": engine})
    fit = time.perf_counter() - fit_start
    figures = dict(imports=imported - start, fit=fit, sample=sum(sampled))
    figures["cache"] = "/".join(cache) or "-"
    figures["compile"] = sum(compiled) if option != "numpyro" else None
    print(json.dumps(figures))


def measure(model: str, option: str, cache: str, table: str) -> dict:
    """One child process's seconds on ``table``, with every compile cache under ``cache``."""
    env = dict(
        os.environ,
        XDG_CACHE_HOME=cache,
        PYTENSOR_FLAGS=f"base_compiledir={cache}/pytensor",
        NUMBA_CACHE_DIR=f"{cache}/numba",
    )
    command = [sys.executable, __file__, "--child", model, option, table]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="+", default=["hierarchical", "end_to_end_pooled", "joint"]
    )
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=OPTIONS)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    def seconds(value):
        return "-" if value is None else f"{value:.1f}"

    print(
        f"{'model':<18} {'option':<15} {'run':<7} {'import s':>8} {'compile s':>9} "
        f"{'sample s':>8} {'fit s':>6} {'beyond s':>8} {'run/cold':>8} {'cache':>8}  target"
    )
    for model in args.models:
        for option in args.options:
            with tempfile.TemporaryDirectory() as cache:
                runs = {
                    run: measure(model, option, cache, table)
                    for run, table in (
                        ("cold", "example"),
                        ("warm", "example"),
                        ("resized", "resized"),
                    )
                }
            for run, figures in runs.items():
                ratio = figures["fit"] / runs["cold"]["fit"]
                beyond = figures["fit"] - figures["sample"]
                target = TARGETS.get((model, run), "") if option == "package" else ""
                if target:
                    limit = float(target.split()[-1])
                    value = figures["fit"] if target.startswith("fit") else beyond
                    target += f" s: {'holds' if value <= limit else 'missed'}"
                print(
                    f"{model:<18} {option:<15} {run:<7} {seconds(figures['imports']):>8} "
                    f"{seconds(figures['compile']):>9} {seconds(figures['sample']):>8} "
                    f"{seconds(figures['fit']):>6} {seconds(beyond):>8} {ratio:>8.2f} "
                    f"{figures['cache']:>8}  {target}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
