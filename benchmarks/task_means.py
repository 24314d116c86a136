"""Centred against non-centred task means of the ``hierarchical`` model, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/task_means.py [--tasks 40] [--milestones 3] [--trials 100] [--seed 0]

Two simulated designs, each fitted with both forms of the same Beta prior on the task
means, and with the form ``fit`` chooses from the design (``choose_form``); nutpie,
4 chains x 2000 draws after 1000 tuning steps, the spec's target_accept:

* ``alike``: milestone rates of a task drawn around its mean (``Beta(30 mu, 30 (1 - mu))``,
  ``mu ~ Beta(4.8, 3.2)``, as in ``pooled_engines.py``), so the data pin each task's mean;
* ``unlike``: milestone rates independent and uniform, so they say little about it.

For each it prints the smallest bulk ESS over the sampled parameters, its ESS per second
of sampling, the largest R-hat, the lowest E-BFMI, divergences and gradient evaluations
per draw: the measurements behind ``fit_pooled``'s choice of form, and its refit in the
other form when a fit fails.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import pooled_engines  # beside this script

warnings.simplefilter("ignore")

DRAWS, TUNE, CHAINS = 2000, 1000, 4


def simulate(design: str, tasks: int, milestones: int, trials: int, seed: int) -> pd.DataFrame:
    """``alike``: the design of ``pooled_engines.py`` at rates around 0.6; ``unlike``:
    independent uniform milestone rates."""
    if design == "alike":
        return pooled_engines.simulate(tasks, milestones, seed, trials, mean=0.6)
    rng = np.random.default_rng(seed)
    rates = rng.uniform(size=(tasks, milestones))
    return pd.DataFrame(
        [
            dict(task=f"t{t:03d}", method="milestone", step=m + 1, successes=k, trials=trials)
            for t in range(tasks)
            for m, k in enumerate(rng.binomial(trials, rates[t]))
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--milestones", type=int, default=3)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import nutpie

    import bayes_eval
    from bayes_eval.counts.layout import Form, build_layout, choose_form
    from bayes_eval.fit import usable_rows
    from bayes_eval.inference.diagnostics import diagnose
    from bayes_eval.inference.engines import compile_nutpie
    from bayes_eval.pooled.models import hierarchy_model

    spec = bayes_eval.load_spec("hierarchical")
    print(
        f"## {args.tasks} tasks x {args.milestones} milestones x {args.trials} trials, "
        f"{CHAINS} chains x {DRAWS} draws ({TUNE} tune), nutpie"
    )
    print(
        f"{'design':8s} {'task means':12s} {'sample s':>8s} {'min ESS':>8s} {'ESS/s':>7s} "
        f"{'max R-hat':>9s} {'min E-BFMI':>10s} {'diverg.':>7s} {'grad/draw':>9s}"
    )
    for design in ("alike", "unlike"):
        frame = simulate(design, args.tasks, args.milestones, args.trials, args.seed)
        layout = build_layout(usable_rows(frame, spec), spec)
        chosen = choose_form(layout, spec)
        forms = {
            "centred": Form(np.ones_like(chosen.pairs), chosen.cells),
            "non-centred": Form(np.zeros_like(chosen.pairs), chosen.cells),
            f"chosen: {chosen.describe().removeprefix('task means ')}": chosen,
        }
        for name, form in forms.items():
            compiled = compile_nutpie(hierarchy_model(layout, spec, form))
            start = time.perf_counter()
            trace = nutpie.sample(
                compiled,
                draws=DRAWS,
                tune=TUNE,
                chains=CHAINS,
                seed=args.seed,
                progress_bar=False,
                target_accept=spec.sampler.target_accept,
            )
            seconds = time.perf_counter() - start
            result = diagnose(trace)
            ess = result.table["ess_bulk"].min()
            print(
                f"{design:8s} {name:12s} {seconds:8.1f} "
                f"{ess:8.0f} {ess / seconds:7.0f} {result.table['r_hat'].max():9.3f} "
                f"{min(result.ebfmi):10.2f} {result.divergences:7d} "
                f"{float(trace['sample_stats']['n_steps'].mean()):9.1f}"
            )


if __name__ == "__main__":
    main()
