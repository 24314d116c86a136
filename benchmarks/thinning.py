"""What keeping one draw in two costs a fit: the effective sample size of every sampled
scalar, and the Monte Carlo error of every pair's bound, from all the draws and from the
kept half.

    python benchmarks/thinning.py RUN_DIR

Reads a fit that kept every draw (for example ``bayes-eval fit metr_runs.csv --from metr
--model crossed --thin 1 --out RUN_DIR``) and prints, for each sampled scalar, its bulk
and tail ESS over all the draws and over the last of every two (what ``thin = 2`` keeps),
and over every pair: the least ESS of its rate ``p_task`` both ways and the ratio of
its bound's Monte Carlo standard error (the summary's ``upper_mcse``), kept half to all.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from arviz_base import rcParams

from bayes_eval import load_posterior
from bayes_eval.inference.chain_stats import convergence, quantile_mcse
from bayes_eval.inference.diagnostics import sampled_variables

KEPT = slice(1, None, 2)  # the last of every two draws, as thin = 2 keeps them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a fit's run folder, written with --thin 1")
    run = parser.parse_args().run
    posterior = load_posterior(f"{run}/posterior.nc")
    draws, level, prob = posterior.draws, posterior.level, rcParams["stats.ci_prob"]
    print(f"{run}: {draws.sizes['chain']} chains x {draws.sizes['draw']} draws")
    print(f"{'quantity':<20} {'bulk ESS all':>13} {'kept':>8} {'tail ESS all':>13} {'kept':>8}")
    for name in sampled_variables(draws):
        values = draws[name].transpose("chain", "draw", ...).values
        if values.ndim != 2:
            continue
        every, kept = (convergence(values[None, :, at], prob) for at in (slice(None), KEPT))
        print(
            f"{name:<20} {every[1][0]:>13.0f} {kept[1][0]:>8.0f} {every[2][0]:>13.0f} "
            f"{kept[2][0]:>8.0f}"
        )
    rates = draws["p_task"].stack(pair=("agent", "task")).transpose("pair", "chain", "draw")
    values = rates.values[~np.isnan(rates.values).any(axis=(1, 2))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        every, kept = (convergence(values[..., at], prob) for at in (slice(None), KEPT))
        ratio = quantile_mcse(values[..., KEPT], level) / quantile_mcse(values, level)
    print(
        f"{len(values)} pairs' rates: least bulk ESS {every[1].min():.0f} of all the draws, "
        f"{kept[1].min():.0f} of the kept half; the bound's Monte Carlo standard error, kept "
        f"half over all: median {np.nanmedian(ratio):.2f}, quartiles "
        f"{np.nanquantile(ratio, 0.25):.2f} to {np.nanquantile(ratio, 0.75):.2f}"
    )


if __name__ == "__main__":
    main()
