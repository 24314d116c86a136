"""What ``compare`` costs beyond the fits it needs, on the shipped pooled example, in one
run.

Run from the repository root (needs the package installed):

    python benchmarks/compare_cost.py [--models mats2024 hierarchical] [--repeats 3]

For each model it times the fit (``bayes_eval.fit`` at the spec's settings, the first
fit of its structure in the process compiling it) and the reading of its tree (the
predictive groups and the ``log_likelihood`` group, made when the tree is first read);
then ``bayes_eval.compare`` of the fits (exact leave-one-out for the exact models, PSIS
for the pooled ones). It prints each, and the ratio of ``compare`` (trees and ranking)
to the fits: what choosing among fits costs once they are made. The fastest of REPEATS
runs of each step is kept.
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

warnings.simplefilter("ignore")
logging.getLogger("bayes_eval").setLevel(logging.ERROR)  # the example's rows left out


def timed(step):
    start = time.perf_counter()
    result = step()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mats2024", "hierarchical"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import bayes_eval

    table = bayes_eval.shipped_datasets()["example_pooled"]
    fit_s, tree_s, compare_s = {}, {}, []
    for _ in range(args.repeats):
        fits = {}
        for model in args.models:
            fits[model], seconds = timed(lambda model=model: bayes_eval.fit(table, model))
            fit_s[model] = min(fit_s.get(model, seconds), seconds)
            _, seconds = timed(lambda posterior=fits[model]: posterior.tree)
            tree_s[model] = min(tree_s.get(model, seconds), seconds)
        result, seconds = timed(lambda fits=fits: bayes_eval.compare(fits))
        compare_s.append(seconds)
    fits_total = sum(fit_s.values())
    extra = sum(tree_s.values()) + min(compare_s)
    print(f"{'model':<16} {'fit (s)':>8} {'tree (s)':>9}")
    for model in args.models:
        print(f"{model:<16} {fit_s[model]:>8.2f} {tree_s[model]:>9.2f}")
    print(f"compare of the fits: {min(compare_s):.2f} s")
    print(f"(trees + compare) / fits: {extra / fits_total:.3f}")
    print(result.sentence)


if __name__ == "__main__":
    main()
