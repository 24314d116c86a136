"""Exact path against PyMC's NUTS on the same data, measured as ratios in one run.

Run from the repository root (needs the package installed):

    python benchmarks/exact_vs_nuts.py [--tasks 100] [--milestones 5] [--seed 0]

1. Non-pooled milestone model (uniform Beta(1, 1) priors, the mats2024 spec) on
   TASKS x MILESTONES simulated counts (100 trials each): wall time of the exact fit
   + summary against building, compiling and sampling the same model with NUTS
   (nutpie, 4 chains x 1000 draws), and the error of each 97.5% bound against an
   independent reference (2,000,000 direct Monte Carlo draws per task; a second
   reference with another seed measures the reference's own noise).
2. ``bayes-eval fit`` on 1,000 tasks x 5 milestones against
   ``python -c "import pandas, scipy.stats"``, each the best of three runs, and a check
   that the exact CLI run never imports PyMC.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import bayes_eval

LEVEL = 0.975
TRIALS = 100


def simulate(n_tasks: int, n_milestones: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.2, 0.95, size=(n_tasks, n_milestones))
    rows = [
        dict(
            task=f"t{t:04d}",
            method="milestone",
            step=m + 1,
            successes=int(rng.binomial(TRIALS, rates[t, m])),
            trials=TRIALS,
        )
        for t in range(n_tasks)
        for m in range(n_milestones)
    ]
    return pd.DataFrame(rows)


def reference_bounds(counts: np.ndarray, seed: int, n_draws: int = 2_000_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for k in counts:
        log_p = np.zeros(n_draws)
        for kj in k:
            log_p += np.log(rng.beta(kj + 1, TRIALS - kj + 1, n_draws))
        out.append(np.exp(np.quantile(log_p, LEVEL)))
    return np.array(out)


def nuts_bounds(counts: np.ndarray, seed: int) -> tuple[np.ndarray, float, float, int]:
    import nutpie
    import pymc as pm

    from bayes_eval.inference.engines import compile_nutpie

    start = time.perf_counter()
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0, shape=counts.shape)
        pm.Binomial("k", n=TRIALS, p=p, observed=counts)
        pm.Deterministic("p_task", pm.math.exp(pm.math.log(p).sum(axis=1)))
    compiled = compile_nutpie(model)
    compile_time = time.perf_counter() - start
    start = time.perf_counter()
    trace = nutpie.sample(compiled, draws=1000, tune=1000, chains=4, seed=seed, progress_bar=False)
    sample_time = time.perf_counter() - start
    draws = trace["posterior"]["p_task"].values.reshape(-1, counts.shape[0])
    divergences = int(trace["sample_stats"]["diverging"].values.sum())
    return np.quantile(draws, LEVEL, axis=0), compile_time, sample_time, divergences


def best_of_three(command: list[str], env: dict) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--milestones", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    evidence = simulate(args.tasks, args.milestones, args.seed)
    counts = evidence["successes"].to_numpy().reshape(args.tasks, args.milestones)
    start = time.perf_counter()
    summary = bayes_eval.fit(evidence, "mats2024").summary()
    exact_time = time.perf_counter() - start
    exact = summary["upper"].to_numpy()
    print(f"reference: {args.tasks} tasks x 2,000,000 Monte Carlo draws ...", file=sys.stderr)
    reference = reference_bounds(counts, args.seed + 1)
    noise = np.abs(reference_bounds(counts, args.seed + 3) / reference - 1)
    print("NUTS (nutpie) ...", file=sys.stderr)
    nuts, compile_time, sample_time, divergences = nuts_bounds(counts, args.seed + 2)
    nuts_time = compile_time + sample_time
    exact_err = np.abs(exact / reference - 1)
    nuts_err = np.abs(nuts / reference - 1)
    print(f"## {args.tasks} tasks x {args.milestones} milestones, 97.5% upper bounds")
    print(f"exact fit + summary    {exact_time:8.3f} s")
    print(
        f"NUTS compile + sample  {nuts_time:8.3f} s  (compile {compile_time:.1f} s, "
        f"sample {sample_time:.1f} s, {divergences} divergences)"
    )
    print(f"speed ratio NUTS / exact: {nuts_time / exact_time:.0f}x")
    print(
        f"relative error of the bound vs reference: exact median {np.median(exact_err):.2e}"
        f" max {exact_err.max():.2e}; NUTS median {np.median(nuts_err):.2e}"
        f" max {nuts_err.max():.2e}"
    )
    print(
        f"reference noise (two independent references): median {np.median(noise):.2e}"
        f" max {noise.max():.2e}"
    )

    with tempfile.TemporaryDirectory() as folder:
        big = Path(folder) / "big.csv"
        simulate(1000, 5, args.seed).to_csv(big, index=False)
        env = dict(os.environ)
        check = (
            "import sys; from bayes_eval.cli.main import main; "
            f"main(['fit', {str(big)!r}, '--format', 'csv']); "
            "sys.stdout.flush(); print('pymc imported' if 'pymc' in sys.modules "
            "else 'pymc not imported', file=sys.stderr)"
        )
        result = subprocess.run(
            [sys.executable, "-c", check], capture_output=True, text=True, env=env, check=True
        )
        cli = best_of_three(["bayes-eval", "fit", str(big), "--format", "csv"], env)
        imports = best_of_three([sys.executable, "-c", "import pandas, scipy.stats"], env)
    print("\n## bayes-eval fit on 1,000 tasks x 5 milestones (phuong_chain)")
    print(f"bayes-eval fit                       {cli:6.2f} s")
    print(f"python -c 'import pandas, scipy.stats' {imports:6.2f} s")
    imported = result.stderr.strip().splitlines()[-1]
    print(f"ratio: {cli / imports:.2f} (must stay below 3); {imported}")


if __name__ == "__main__":
    main()
