"""Coverage of the 97.5% upper bound when runs come in clusters, with and without modelling
them.

Known truth: one agent, ``--tasks`` tasks per replication, each task's success rate
``P_t ~ Beta(mu kappa, (1 - mu) kappa)``; each task is run in ``--clusters`` clusters of
``--runs`` runs (a shared seed, sample or day), each cluster with its own rate ``q ~
Beta(P phi, (1 - P) phi)``: the runs of a cluster are correlated with intra-cluster
correlation ``1 / (1 + phi)``. Three bounds per task:

* ``end_to_end`` (exact, Beta(1, 1) per task) and ``end_to_end_pooled`` fitted to the
  runs as independent trials (the cluster column dropped);
* ``end_to_end_pooled`` fitted with the cluster column (a Beta-Binomial per cluster).

Coverage is the share of tasks whose true ``P_t`` is at or below the bound; the nominal
is 0.975. Run::

    python studies/clustered.py --replications 100 --out studies/results

prints the table of docs/reading.md (How much clustered runs matter) and the coverage
by the size of the true ``P``, and writes every bound to ``clustered_bounds.csv`` in
``--out`` (``--summarise`` reprints the tables from it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import fit, load_evidence

SETTINGS = {  # intra-cluster correlation 1 / (1 + phi) -> phi (None: independent runs)
    "0": None,
    "0.2": 4.0,
    "0.5": 1.0,
}
MEAN, CONCENTRATION = 0.2, 5.0


def simulate(rng, tasks: int, clusters: int, runs: int, phi) -> tuple[pd.DataFrame, np.ndarray]:
    """Per-run rows (``task``, ``method``, ``success``, ``cluster``) and the true rates."""
    truth = rng.beta(MEAN * CONCENTRATION, (1 - MEAN) * CONCENTRATION, size=tasks)
    rows = []
    for t, p in enumerate(truth):
        for c in range(clusters):
            q = p if phi is None else rng.beta(max(p * phi, 1e-300), max((1 - p) * phi, 1e-300))
            for success in rng.random(runs) < q:
                rows.append((f"t{t}", "end_to_end", int(success), f"c{c}"))
    return pd.DataFrame(rows, columns=["task", "method", "success", "cluster"]), truth


def bounds(frame: pd.DataFrame, seed: int) -> dict:
    """The upper bound of every task under each model, and whether each fit passed."""
    naive = load_evidence(frame.drop(columns="cluster"))
    aware = load_evidence(frame)
    out = {}
    for label, evidence, model in (
        ("end_to_end, runs independent", naive, "end_to_end"),
        ("end_to_end_pooled, runs independent", naive, "end_to_end_pooled"),
        ("end_to_end_pooled, clusters modelled", aware, "end_to_end_pooled"),
    ):
        summary = fit(evidence, model, seed=seed).summary()
        out[label] = (summary["upper"].to_numpy(), bool(summary["diagnostics_ok"].all()))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5, help="runs per cluster")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--correlations", nargs="+", choices=list(SETTINGS), default=list(SETTINGS),
        help="intra-cluster correlations to simulate",
    )  # fmt: skip
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--summarise", type=Path, help="only summarise a clustered_bounds.csv written before"
    )
    args = parser.parse_args(argv)
    if args.summarise is not None:
        summarise(pd.read_csv(args.summarise, dtype={"correlation": str}))
        return 0
    rows = []
    for setting in args.correlations:
        phi = SETTINGS[setting]
        for r in range(args.replications):
            rng = np.random.default_rng([args.seed, r, 0 if phi is None else int(phi * 1000)])
            frame, truth = simulate(rng, args.tasks, args.clusters, args.runs, phi)
            start = time.perf_counter()
            for model, (upper, ok) in bounds(frame, seed=args.seed + r).items():
                for t, (p, bound) in enumerate(zip(truth, upper, strict=True)):
                    rows.append((setting, r, model, t, p, bound, p <= bound, ok))
            took = time.perf_counter() - start
            print(f"correlation {setting}: replication {r + 1} in {took:.0f} s", file=sys.stderr)
    columns = ["correlation", "replication", "model", "task", "truth", "upper", "covered", "passed"]
    cells = pd.DataFrame(rows, columns=columns)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        cells.to_csv(args.out / "clustered_bounds.csv", index=False)
    print(
        f"{args.replications} replications x {args.tasks} tasks, {args.clusters} clusters x "
        f"{args.runs} runs per task, P ~ Beta({MEAN * CONCENTRATION:g}, "
        f"{(1 - MEAN) * CONCENTRATION:g}); nominal coverage 0.975\n"
    )
    summarise(cells)
    return 0


def summarise(cells: pd.DataFrame) -> None:
    """Print the coverage per correlation and model, and by the true rate's size."""
    groups = cells.groupby(["correlation", "model"], sort=False)
    passed = groups.apply(lambda g: g.groupby("replication")["passed"].all().mean())
    table = groups.agg(
        coverage=("covered", "mean"), bounds=("covered", "size"), mean_upper=("upper", "mean")
    )
    table["coverage_se"] = np.sqrt(table["coverage"] * (1 - table["coverage"]) / table["bounds"])
    table["fits_passed"] = passed
    bands = pd.cut(cells["truth"], [0, 0.1, 0.2, 0.4, 1])
    by_truth = cells.groupby(["correlation", "model", bands], sort=False, observed=True)
    by_truth = by_truth["covered"].mean()
    with pd.option_context("display.width", 200, "display.max_columns", 10):
        print(table.reset_index().to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        print("\ncoverage by the true P:\n")
        print(
            by_truth.unstack("truth")
            .sort_index(axis=1)
            .to_string(float_format=lambda x: f"{x:.3f}")
        )


if __name__ == "__main__":
    sys.exit(main())
