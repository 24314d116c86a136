"""``time_horizon_2pl`` (a discrimination per task, the recorded length measured with
error) beside ``time_horizon`` and METR's published method, on METR's runs.

Data: METR's public runs (``--runs``, the compacted ``metr_runs.csv``) without the human
baseliners, and the agents' release dates (``--dates``). Both models are fitted to every
run; ``bayes_eval.compare`` ranks them by leave-one-pair-out predictive density (PSIS,
the pairs whose Pareto k exceeds 0.7 refitted exactly, up to ten per fit, unless
``--no-refit``); every agent's 50% and 80% horizons (posterior medians) are set beside
METR's method's (``bayes_eval.crossed.metr_method``, its default settings), with the
ratio of the two horizons, and each model's doubling time and its scales.

Run::

    python studies/horizon_2pl_metr.py --runs PATH/metr_runs.csv \\
        --dates PATH/metr_release_dates.csv

(two fits, about 2.5 minutes on 2 cores, and up to twenty refits for the comparison,
about 25 minutes; ``--no-refit``: 3 minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import compare, fit, read_runs
from bayes_eval.crossed.horizon import horizons
from bayes_eval.crossed.metr_method import cells_of_fit, metr_horizons
from bayes_eval.evidence.table import load_evidence

MODELS = ("time_horizon", "time_horizon_2pl")
SCALES = (
    "difficulty_scale",
    "group_scale",
    "cell_scale",
    "discrimination_scale",
    "length_error_scale",
)


def run(runs: Path, dates: Path, refit: bool = True) -> dict:
    """Both fits, their comparison, every agent's horizons by each method, and the
    models' doubling times and scales."""
    read = read_runs(runs, "metr")
    table = read.table[read.table["agent"] != "human"]
    columns = ["agent", "task", "method", "successes", "trials", *read.kept]
    evidence = load_evidence(table[columns].reset_index(drop=True), keep_columns=True)
    fits = {name: fit(evidence, name, agents=dates) for name in MODELS}
    comparison = compare(fits, refit=refit)
    cells, release, _ = cells_of_fit(fits["time_horizon"])
    metr = metr_horizons(cells, release).agents.set_index("agent")
    rows, models = [], {}
    by_model = {name: horizons(posterior) for name, posterior in fits.items()}
    for agent in metr.index:
        row = {"agent": agent, "successes": int(metr.at[agent, "successes"])}
        for name, table in (
            ("metr", metr),
            *((n, r.agents.set_index("agent")) for n, r in by_model.items()),
        ):
            row[f"{name}_h50"], row[f"{name}_h80"] = table.at[agent, "h50"], table.at[agent, "h80"]
            row[f"{name}_ratio"] = row[f"{name}_h50"] / row[f"{name}_h80"]
        rows.append(row)
    for name, posterior in fits.items():
        draws = posterior.draws
        trend = by_model[name].trend.iloc[0]
        models[name] = {
            "diagnostics_ok": posterior.diagnostics.ok,
            "doubling": (trend["median"], trend["lower"], trend["upper"]),
            **{s: np.quantile(draws[s].values, [0.5, 0.025, 0.975]) for s in SCALES if s in draws},
        }
    return {"comparison": comparison, "agents": pd.DataFrame(rows), "models": models}


def _markdown(table: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    for row in table.itertuples(index=False):
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, type=Path)
    parser.add_argument("--dates", required=True, type=Path)
    parser.add_argument("--no-refit", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = run(args.runs, args.dates, refit=not args.no_refit)
    comparison = results["comparison"]
    print(_markdown(comparison.table.rename_axis("model").reset_index()))
    print(f"\n{comparison.sentence}\n")
    print(_markdown(results["agents"]))
    for name, figures in results["models"].items():
        parts = [
            f"{key} {value[0]:.3g} ({value[1]:.3g} to {value[2]:.3g})"
            for key, value in figures.items()
            if key != "diagnostics_ok"
        ]
        print(f"\n{name} (diagnostics passed: {figures['diagnostics_ok']}): " + "; ".join(parts))
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
