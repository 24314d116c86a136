"""The diagnostics gate's R-hat and ESS, and the summary's bound MCSE, over whole arrays
against arviz_stats' element loop.

    python benchmarks/diagnostics_speed.py RUN_DIR [--elements N]

Reads a fit's ``posterior.nc`` (for example ``bayes-eval fit metr_runs.csv --from metr
--model crossed --out RUN_DIR``) and computes every checked quantity's R-hat, bulk and
tail ESS both ways in one run: ``bayes_eval.inference.chain_stats.convergence`` (whole
arrays, in blocks) and ``arviz_stats``' array functions (a Python loop over elements,
as the gate computed them before), and the Monte Carlo standard error of each one's 0.975
quantile (the summary's ``upper_mcse``) both ways. Prints the elements, each route's
seconds, the ratio and the largest relative difference. ``--elements`` repeats the fit's
elements (with fresh noise added) up to N, for a programme's size.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

# The quantile whose Monte Carlo standard error is timed: the shipped specs' bound.
UPPER = 0.975


def checked_values(run: Path) -> np.ndarray:
    """``(element, chain, draw)``: every scalar the gate checks, all-NaN ones left out."""
    from bayes_eval import load_posterior
    from bayes_eval.inference.diagnostics import sampled_variables

    posterior = load_posterior(run / "posterior.nc").tree["posterior"].to_dataset()
    names = [*sampled_variables(posterior), *(["p_task"] if "p_task" in posterior else [])]
    blocks = []
    for name in names:
        variable = posterior[name].transpose("chain", "draw", ...)
        flat = variable.values.reshape(*variable.shape[:2], -1)
        blocks.append(np.moveaxis(flat, -1, 0))
    values = np.concatenate(blocks)
    return values[~np.isnan(values).all(axis=(1, 2))]


def timed(compute):
    """``compute()``'s result and its seconds, its warnings silenced (arviz_stats warns of
    the constant elements)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = compute()
    return result, time.perf_counter() - start


def main() -> None:
    from arviz_base import rcParams
    from arviz_stats.base import array_stats

    from bayes_eval.inference.chain_stats import convergence, quantile_mcse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--elements", type=int)
    args = parser.parse_args()
    values = checked_values(args.run)
    if args.elements and args.elements > len(values):
        rng = np.random.default_rng(0)
        copies = -(-args.elements // len(values))
        values = np.concatenate(
            [values + (rng.normal(0, 1e-3, values.shape) if i else 0) for i in range(copies)]
        )[: args.elements]
    prob = rcParams["stats.ci_prob"]
    ours, whole = timed(lambda: convergence(values, prob))
    theirs, loop = timed(
        lambda: (
            array_stats.rhat(values),
            array_stats.ess(values, method="bulk"),
            array_stats.ess(values, method="tail", prob=prob),
        )
    )
    differences = [np.nanmax(np.abs(a - b) / np.abs(b)) for a, b in zip(ours, theirs, strict=True)]
    print(f"elements: {len(values):,} ({values.shape[1]} chains x {values.shape[2]} draws)")
    print(f"whole arrays (chain_stats): {whole:.1f} s")
    print(f"element loop (arviz_stats): {loop:.1f} s")
    print(f"ratio: {loop / whole:.1f}x; largest relative difference {max(differences):.1e}")
    ours, whole = timed(lambda: quantile_mcse(values, UPPER))
    theirs, loop = timed(lambda: array_stats.mcse(values, method="quantile", prob=UPPER))
    difference = np.nanmax(np.abs(ours - theirs) / np.abs(theirs))
    print(f"MCSE of the {UPPER} quantile: whole arrays {whole:.1f} s, element loop {loop:.1f} s")
    print(f"ratio: {loop / whole:.1f}x; largest relative difference {difference:.1e}")


if __name__ == "__main__":
    main()
