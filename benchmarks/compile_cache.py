"""What compiling every model anew costs: nutpie's compile of each pooled model from
scratch against a compile that loads its kernels from PyTensor's disk cache, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/compile_cache.py [--models end_to_end_pooled hierarchical joint crossed]
        [--repeats 3]

``bayes_eval`` compiles every model anew (``engines.fresh_compile``), so that a fit's
bytes do not depend on which process compiled a kernel first (docs/outputs.md, "Same
seed, same bytes"). For each model, built for the shipped pooled example exactly as
``bayes_eval.fit`` builds it, this times REPEATS compiles each way, alternating: anew
(the package's way), and from the cache (warmed by one compile first). It prints the
fastest of each and their ratio (anew / cached): the seconds a fit pays for bit-identity
on its first compile in a process. Later fits of the same structure in the process reuse
the compiled model either way.
"""

from __future__ import annotations

import argparse
import time
import warnings

warnings.simplefilter("ignore")


def built_model(model: str, table):
    """The PyMC model ``bayes_eval.fit`` samples for ``model`` on ``table``."""
    import bayes_eval
    from bayes_eval.inference import engines

    engines._COMPILED.clear()
    built = []
    compile_nutpie = engines.compile_nutpie

    def keep(pymc_model):
        built.append(pymc_model)
        return compile_nutpie(pymc_model)

    engines.compile_nutpie = keep
    try:
        bayes_eval.fit(table, model, sampler={"draws": 20, "tune": 20, "chains": 1})
    finally:
        engines.compile_nutpie = compile_nutpie
    return built[-1]


def seconds(compile_model, pymc_model) -> float:
    start = time.perf_counter()
    compile_model(pymc_model)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="+", default=["end_to_end_pooled", "hierarchical", "joint", "crossed"]
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import nutpie

    from bayes_eval.inference.engines import compile_nutpie
    from bayes_eval.resources import shipped_datasets

    table = shipped_datasets()["example_pooled"]
    print(f"{'model':<20} {'anew (s)':>9} {'cached (s)':>11} {'ratio':>7}")
    for model in args.models:
        pymc_model = built_model(model, table)
        nutpie.compile_pymc_model(pymc_model)  # warms PyTensor's disk cache
        times = {"anew": [], "cached": []}
        for _ in range(args.repeats):
            times["anew"].append(seconds(compile_nutpie, pymc_model))
            times["cached"].append(seconds(nutpie.compile_pymc_model, pymc_model))
        anew, cached = min(times["anew"]), min(times["cached"])
        print(f"{model:<20} {anew:>9.2f} {cached:>11.2f} {anew / cached:>7.2f}")


if __name__ == "__main__":
    main()
