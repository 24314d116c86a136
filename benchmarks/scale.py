"""nutpie against the JAX engine (numpyro) on growing tables and draws, in one run.

Run from the repository root (needs the package with its ``jax`` extra installed):

    python benchmarks/scale.py [--cells 1000 5000 20000 100000] [--draws 500 ...]
        [--engines nutpie numpyro] [--milestones 5] [--agents 2] [--tune 500]
        [--chains 4] [--seed 0] [--out FILE.csv]

Each design is a ``hierarchical`` (milestone / partial) table of AGENTS x TASKS x
MILESTONES count cells, TASKS chosen to give CELLS, 20 trials a cell, simulated from the
spec's own hierarchy (agent means 0.3 and 0.6). The same table is fitted through
``bayes_eval.fit`` with each engine (numpyro: vectorized chains, on the GPU where JAX
finds one), CHAINS x DRAWS after TUNE for each DRAWS given, the spec's target_accept, the
diagnostics gate and its refits as a user gets them. Every fit runs in a new process, as
``bayes-eval fit`` does, so each pays its compile (numpyro: JAX's persistent cache,
``~/.cache/bayes_eval/jax``, is kept between them) and its peak memory is its own.
Printed per fit: the device, wall time (compile, sampling and the exact redraw of the
rates, refits included), fits taken, the minimum bulk ESS over the task means
``mu_task`` and per second of wall time, divergences, whether the gate passed, the
process's peak memory, and each engine's ratio of ESS per second to the first engine's
on the same table and draws.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd

warnings.simplefilter("ignore")


def design(cells: int, agents: int, milestones: int, seed: int) -> pd.DataFrame:
    """An agents x tasks x milestones table of ``cells`` cells (rounded to whole tasks)."""
    rng = np.random.default_rng(seed)
    tasks = max(1, round(cells / (agents * milestones)))
    rows = []
    for a, mean in enumerate(np.linspace(0.3, 0.6, agents)):
        mu_task = rng.beta(mean * 8, (1 - mean) * 8, tasks)
        p = rng.beta(mu_task[:, None] * 30, (1 - mu_task[:, None]) * 30, (tasks, milestones))
        k = rng.binomial(20, p)
        for t in range(tasks):
            for m in range(milestones):
                rows.append((f"agent-{a}", f"t{t:05d}", m + 1, int(k[t, m])))
    table = pd.DataFrame(rows, columns=["agent", "task", "step", "successes"])
    return table.assign(method="milestone", trials=20)


def one_fit(table: pd.DataFrame, engine: str, sampler: dict, seed: int) -> dict:
    import arviz_stats

    import bayes_eval
    from bayes_eval.inference.retry import fit_attempts

    start = time.perf_counter()
    post = bayes_eval.fit(table, "hierarchical", seed=seed, sampler={**sampler, "engine": engine})
    wall = time.perf_counter() - start
    summary = post.summary()
    ess = float(np.nanmin(arviz_stats.ess(post.tree["posterior"]["mu_task"], method="bulk")))
    provenance = summary["provenance"].iloc[0]
    return {
        "engine": engine,
        "device": provenance.split(f"{engine} (", 1)[1].split(")", 1)[0],
        "wall_s": round(wall, 1),
        "fits": fit_attempts(provenance),
        "min_ess": round(ess),
        "ess_per_s": round(ess / wall, 1),
        "divergences": int(post.tree["sample_stats"]["diverging"].sum()),
        "gate": bool(summary["diagnostics_ok"].all()),
    }


# The options every fit's process is given as they were given here.
SHARED = ("agents", "milestones", "tune", "chains", "seed")


def child(cells: int, engine: str, sampler: dict, args) -> None:
    """One fit in this process; one JSON line of its figures and peak memory."""
    table = design(cells, args.agents, args.milestones, args.seed)
    figures = one_fit(table, engine, sampler, args.seed)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
    print(json.dumps({**figures, "cells": len(table), "peak_mb": round(peak)}))


def in_new_process(cells: int, engine: str, draws: int, args) -> dict:
    """``child``'s figures, from a new Python process."""
    command = [sys.executable, __file__, "--child", str(cells), engine, str(draws)]
    command += [f"--{name}={getattr(args, name)}" for name in SHARED]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, nargs="+", default=[1000, 5000, 20000, 100000])
    parser.add_argument("--draws", type=int, nargs="+", default=[500])
    parser.add_argument("--engines", nargs="+", default=["nutpie", "numpyro"])
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--milestones", type=int, default=5)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the table here (CSV)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        cells, engine, draws = args.child
        sampler = {"draws": int(draws), "tune": args.tune, "chains": args.chains}
        child(int(cells), engine, sampler, args)
        return
    rows = []
    for cells in args.cells:
        for draws in args.draws:
            fits = [in_new_process(cells, engine, draws, args) for engine in args.engines]
            for fit in fits:
                fit.update(draws=draws, ratio=round(fit["ess_per_s"] / fits[0]["ess_per_s"], 2))
                rows.append(fit)
                print(pd.DataFrame([fit]).to_string(index=False, header=len(rows) == 1), flush=True)
    result = pd.DataFrame(rows)
    print()
    print(result.to_string(index=False))
    if args.out:
        result.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
