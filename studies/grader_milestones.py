"""Do the milestone bounds hold when the grader errs? The exact milestone product's bound
with the grader's audit (``bayes_eval.exact.graded_product``) beside the bound that takes
the grader as perfect.

    python studies/grader_milestones.py [--cells 400] [--positives 50] [--negatives 300]
        [--level 0.975] [--seed 0] [--csv FILE]

Per setting, ``--cells`` pairs: each milestone's true rate is log-uniform in its band (not
the uniform prior's family), its runs are graded by one grader of known sensitivity and
specificity, which scored every milestone of the pair, and a fresh audit per pair sends
``--positives`` true successes and ``--negatives`` true failures through it. The truth is
the product of the milestones' rates. Two one-sided bounds at ``--level`` per pair:

* ``audited``: the uniform prior's posterior of the product with the grader's sensitivity
  and specificity (uniform priors updated by the audit) integrated out, the milestones
  sharing them;
* ``perfect``: the product of ``Beta(1 + k, 1 + n - k)``, as if the grader made no error.

Printed per setting and bound: the share of pairs whose true product lies above the bound
(at most ``1 - level`` for a bound that holds), among all pairs, among those with a
milestone graded without a success, and among the weakest tenth (the smallest true
products); and the median bound.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from bayes_eval.exact.graded_product import GradedFactor, GradedProduct
from bayes_eval.exact.products import beta_product, summarise_products

BOUNDS = ("audited", "perfect")
PRIOR = (1.0, 1.0)
# (name, log10 bands of the milestones' true rates, runs a milestone (low, high),
# sensitivity, specificity)
SETTINGS = (
    ("three milestones, 10 runs, misses a quarter", ((-1.3, -0.05),) * 3, (10, 10), 0.75, 0.99),
    ("sparse: 1 to 3 runs a milestone", ((-1.3, -0.05),) * 3, (1, 3), 0.75, 0.99),
    (
        "a hard last milestone, 20 runs",
        ((-0.5, -0.05), (-0.5, -0.05), (-2.3, -1.0)),
        (20, 20),
        0.85,
        0.995,
    ),
)


def pair_row(bands, runs_range, se, sp, audit, level, rng) -> dict:
    """One simulated pair: its truth, its graded counts' bounds, and what they rest on."""
    rates = np.array([10 ** rng.uniform(*band) for band in bands])
    runs = rng.integers(runs_range[0], runs_range[1] + 1, size=rates.size)
    true = rng.binomial(runs, rates)
    graded = rng.binomial(true, se) + rng.binomial(runs - true, 1 - sp)
    positives, negatives = audit
    detected = rng.binomial(positives, se)
    cleared = rng.binomial(negatives, sp)
    shapes = (1 + detected, 1 + positives - detected, 1 + cleared, 1 + negatives - cleared)
    factors = tuple(
        GradedFactor(PRIOR, int(k), int(n), 0) for k, n in zip(graded, runs, strict=True)
    )
    audited = GradedProduct((factors,), (shapes,)).summary(np.array([1 - level]), np.zeros(0))
    plain = beta_product(1.0 + graded[None, :], 1.0 + (runs - graded)[None, :])
    perfect = summarise_products([plain], np.array([1 - level]))[0]
    return {
        "truth": float(np.prod(rates)),
        "zero": bool((graded == 0).any()),
        "audited": float(np.exp(-audited.x_quantiles[0])),
        "perfect": float(np.exp(-perfect.x_quantiles[0])),
    }


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Per setting and bound: misses among all pairs, zero-success pairs and the weakest
    tenth, with their counts, and the median bound."""
    rows = []
    for name, pairs in table.groupby("setting", sort=False):
        weakest = pairs["truth"] <= pairs["truth"].quantile(0.1)
        for bound in BOUNDS:
            missed = pairs["truth"] > pairs[bound]
            rows.append(
                {
                    "setting": name,
                    "bound": bound,
                    "missed %": 100 * missed.mean(),
                    "zero-success pairs": int(pairs["zero"].sum()),
                    "missed among them %": 100 * missed[pairs["zero"]].mean(),
                    "missed, weakest tenth %": 100 * missed[weakest].mean(),
                    "median bound": pairs[bound].median(),
                }
            )
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=400)
    parser.add_argument("--positives", type=int, default=50)
    parser.add_argument("--negatives", type=int, default=300)
    parser.add_argument("--level", type=float, default=0.975)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="write every pair's bounds here")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    audit = (args.positives, args.negatives)
    rows = [
        {"setting": name, **pair_row(bands, runs, se, sp, audit, args.level, rng)}
        for name, bands, runs, se, sp in SETTINGS
        for _ in range(args.cells)
    ]
    table = pd.DataFrame(rows)
    if args.csv:
        table.to_csv(args.csv, index=False)
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        print(summarise(table).to_string(index=False))


if __name__ == "__main__":
    main()
