"""Calibration of the end-to-end models on real runs with held-out ground truth.

    python studies/real_ground_truth.py [--repetitions 10] [--sizes 2 4] [--seed 0]
        [--data DIR] [--out studies/results]

For each dataset (METR's long-task runs; tau-bench airline, gpt-4o) and evidence size
``e``: every (agent, task) cell with at least ``e + MIN_TRUTH_RUNS`` runs has its runs
shuffled, the first ``e`` become evidence and the rest held-out ground truth. The
independent (``end_to_end``, uniform prior) and pooled (``end_to_end_pooled``) models
are fitted to the evidence and calibrated against the held-out runs
(``bayes_eval.checks.calibration``). Repeated with fresh splits. Prints one row per dataset,
size and model: how often the held-out rate lies above the 97.5% bound, the coverage of
the central 95% predictive interval, PIT uniformity and the diagnostics; writes the
table and a PIT histogram per row. ``DIR`` holds ``metr_runs.csv`` and
``taubench_gpt4o_airline.csv`` (public run-level results the project does not ship; see
docs/studies.md, Real ground truth). Skips (exit 0) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import fit
from bayes_eval.checks.calibration import calibrate, proportion
from bayes_eval.evidence.runs import run_rows

MIN_TRUTH_RUNS = 2
MODELS = ("end_to_end", "end_to_end_pooled")
DATASETS = {
    "metr": ("metr_runs.csv", "metr", None),
    "taubench": ("taubench_gpt4o_airline.csv", "taubench", "gpt-4o"),
}


def split(runs: pd.DataFrame, size: int, rng) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Evidence (``size`` runs per cell) and held-out truth (the rest), cells with enough runs."""
    counts = runs.groupby(["agent", "task"])["success"].transform("size")
    kept = runs[counts >= size + MIN_TRUTH_RUNS]
    order = rng.permutation(len(kept))
    shuffled = kept.iloc[order]
    position = shuffled.groupby(["agent", "task"]).cumcount()
    return shuffled[position < size], shuffled[position >= size]


def study(runs, name, sizes, repetitions, seed):
    rng = np.random.default_rng(seed)
    rows, pits = [], {}
    for size in sizes:
        for model in MODELS:
            results = []
            for rep in range(repetitions):
                evidence, truth = split(runs, size, rng)
                print(f"{name}: {size} runs, {model}, split {rep + 1}", file=sys.stderr)
                posterior = fit(evidence, model, seed=seed + rep)
                result = calibrate(posterior, truth, seed=seed + rep)
                ok = posterior.summary()["diagnostics_ok"]
                results.append((result, bool(ok.fillna(True).all())))
            cells = pd.concat([r.calibrated for r, _ in results])
            exceeded = int(cells["exceeded"].sum())
            covered = int(cells["covered_0.95"].sum())
            ks = [r.pit_p_value() for r, _ in results]
            pits[(name, size, model)] = cells["pit"].to_numpy()
            rows.append(
                dict(
                    dataset=name,
                    evidence_runs=size,
                    model=model,
                    cells=len(results[0][0].calibrated),
                    zero_success_share=float((cells["truth_successes"] == 0).mean()),
                    exceeded=exceeded,
                    expected_if_calibrated=float(cells["exceed_chance"].sum()),
                    calibrated=len(cells),
                    exceeded_rate=proportion(exceeded, len(cells))["rate"],
                    exceeded_upper95=proportion(exceeded, len(cells))["rate_upper"],
                    coverage_95=covered / len(cells),
                    pit_ks_median_p=float(np.median(ks)),
                    pit_ks_below_001=int(sum(p < 0.01 for p in ks)),
                    mean_log_score=float(cells["log_score"].mean()),
                    diagnostics_ok=sum(ok for _, ok in results),
                    repetitions=repetitions,
                )
            )
    return rows, pits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--seed", type=int, default=0)
    default_data = Path(__file__).resolve().parents[2] / "shared" / "data"
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    if not args.data.is_dir():
        print(f"skipped: no data folder at {args.data}")
        return 0
    rows, pits = [], {}
    for name, (filename, run_format, agent) in DATASETS.items():
        if not (args.data / filename).exists():
            print(f"skipped {name}: no {filename} in {args.data}")
            continue
        runs = run_rows(args.data / filename, run_format, agent=agent)
        runs = runs[["agent", "task", "method", "success"]].reset_index(drop=True)
        sizes = [s for s in args.sizes if s < runs.groupby(["agent", "task"]).size().max()]
        found, found_pits = study(runs, name, sizes, args.repetitions, args.seed)
        rows += found
        pits.update(found_pits)
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "real_ground_truth.csv", index=False)
    plot(pits, args.out / "real_ground_truth_pit.png")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print(f"\nwrote {args.out / 'real_ground_truth.csv'} and real_ground_truth_pit.png")
    return 0


def plot(pits, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(pits), figsize=(3 * len(pits), 3), squeeze=False)
    for ax, ((name, size, model), values) in zip(axes[0], pits.items(), strict=True):
        ax.hist(values, bins=np.linspace(0, 1, 11), color="C0", edgecolor="white")
        ax.axhline(len(values) / 10, color="C3", ls="--", lw=1)
        ax.set_title(f"{name}, {size} runs\n{model}", fontsize=8)
        ax.set_xlabel("PIT", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
