"""What a pooled fit's compile costs in a new process, with and without a compile cache
kept on disk: the options the package could compile with, measured in one run.

Run from the repository root (needs the package installed; ``numpyro`` and ``nutpie-jax``
need the extra ``bayes_eval[jax]``):

    python benchmarks/compile_cache.py [--models hierarchical end_to_end_pooled]
        [--options anew pytensor-cache numpyro nutpie-jax]

Each fit runs in a fresh Python process, as a user's ``bayes-eval fit`` does, on the
shipped pooled example with the package's default sampler settings. For each option the
first process starts from an empty cache folder (cold) and a second process finds the
first one's cache (warm). The options:

- ``anew``: the package's way. nutpie with numba, every kernel compiled anew in every
  process (``engines.fresh_compile``): the same bytes in every process, and no cache.
- ``pytensor-cache``: nutpie with numba, PyTensor's kernels loaded from its disk cache.
  Not the package's way: a kernel loaded from that cache is not inlined as a fresh one is,
  so the first process draws other bytes than the later ones (docs/outputs.md).
- ``numpyro``: the package's ``numpyro`` engine (PyMC's JAX NUTS), with JAX's persistent
  compilation cache.
- ``nutpie-jax``: nutpie's sampler on a JAX log-density, with JAX's persistent cache.

Printed per model and option: the seconds to import the package's stack, the compile
(where nutpie reports it apart from sampling), the whole fit, and warm / cold.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

OPTIONS = ("anew", "pytensor-cache", "numpyro", "nutpie-jax")


def child(model: str, option: str) -> None:
    """Fit ``model`` with ``option`` in this process; print one JSON line of seconds."""
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
    if option == "nutpie-jax":
        engines._configure_jax()

        def compile_jax(model):
            compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
            # the model was built on this table's counts: nothing to put in place (JAX's
            # graph keeps no data variable a count is not read through)
            object.__setattr__(compiled, "with_data", lambda **data: compiled)
            return compiled

        engines.compile_nutpie = compile_jax
    compiled = []

    class Compiled(logging.Handler):
        def emit(self, record):
            text = record.getMessage()
            if text.startswith("compiled in "):
                compiled.append(float(text.split()[2]))

    logger = logging.getLogger("bayes_eval")
    logger.addHandler(Compiled())
    logger.setLevel(logging.INFO)
    fit_start = time.perf_counter()
    bayes_eval.fit(shipped_datasets()["example_pooled"], model, sampler={"engine": engine})
    print(
        json.dumps(
            {
                "import": imported - start,
                "compile": sum(compiled) if compiled else None,
                "fit": time.perf_counter() - fit_start,
            }
        )
    )


def measure(model: str, option: str, cache: str) -> dict:
    """One child process's seconds, with every compile cache under ``cache``."""
    env = dict(
        os.environ,
        XDG_CACHE_HOME=cache,
        PYTENSOR_FLAGS=f"base_compiledir={cache}/pytensor",
        NUMBA_CACHE_DIR=f"{cache}/numba",
    )
    command = [sys.executable, __file__, "--child", model, option]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["hierarchical", "end_to_end_pooled"])
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=OPTIONS)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    def seconds(value):
        return "-" if value is None else f"{value:.1f}"

    print(
        f"{'model':<18} {'option':<15} {'run':<5} {'import s':>8} {'compile s':>9} "
        f"{'fit s':>6} {'warm/cold':>9}"
    )
    for model in args.models:
        for option in args.options:
            with tempfile.TemporaryDirectory() as cache:
                runs = {run: measure(model, option, cache) for run in ("cold", "warm")}
            for run, figures in runs.items():
                ratio = figures["fit"] / runs["cold"]["fit"]
                print(
                    f"{model:<18} {option:<15} {run:<5} {seconds(figures['import']):>8} "
                    f"{seconds(figures['compile']):>9} {seconds(figures['fit']):>6} "
                    f"{ratio:>9.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
