"""The crossed model (``time_horizon`` spec) on METR's runs, against held-out cells and
against METR's per-agent logistic fits.

Data: METR's "Measuring AI Ability to Complete Long Tasks" runs (``--runs``, the compacted
``metr_runs.csv``: agent, task, task_family, run_id, success, score, human_minutes) and
the agents' release dates (``--dates``: agent, release_date). The human baseliners are
left out: they are not an agent with a release date. Three parts:

(a) **Held-out cells.** 20% of the (agent, task) cells, drawn with ``--seed`` (apart from
    any split elsewhere in the project), are held out; the model is fitted to the rest.
    For each held-out cell, the predictive distribution of its successes in its runs is
    the mixture over posterior draws of ``Binomial(n, P)``, ``P`` the pair's predicted rate.
    Reported: the coverage of the central 50/80/90/95% predictive intervals, and the log
    score against two baselines, the per-task pooled rate (``Beta(1 + K, 1 + N - K)``
    of the task's other cells, Beta-Binomial predictive) and METR's per-agent logistic
    regression on ``log2(human_minutes)`` (maximum likelihood on the training runs,
    Binomial predictive, probabilities clipped to [1e-12, 1 - 1e-12]).
(b) **The latest agent left out.** Every run of the latest agent by release date is
    dropped; the model predicts its horizon from its release date alone
    (``--predict-agent``), beside its horizon from the full fit.
(c) **Horizons against the per-agent fits.** The full fit's 50% horizons beside the
    per-agent maximum-likelihood logistic fits, run-weighted (as fitted to runs) and
    task-weighted (each task's runs weighted to sum to one). Where the crossed horizon
    and the run-weighted fit differ by more than a factor of 2, the reason is named.

Run::

    python studies/crossed_metr.py --runs PATH/metr_runs.csv --dates PATH/metr_release_dates.csv \\
        --out studies/results

(about three minutes on 2 cores: three fits).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from bayes_eval import fit, read_runs
from bayes_eval.crossed.horizon import horizons
from bayes_eval.evidence.table import load_evidence
from bayes_eval.messages import showing_progress

LEVELS = (0.5, 0.8, 0.9, 0.95)
RICH = 20  # a data-rich agent has at least this many successes and this many failures


def metr_evidence(runs: Path, keep=None, drop_agent=None):
    """METR's runs without the human baseliners (and ``drop_agent``), as evidence; with
    ``keep``, only the (agent, task) cells it lists."""
    evidence = read_runs(runs, "metr")
    table = evidence.table
    mask = table["agent"] != "human"
    if drop_agent is not None:
        mask &= table["agent"] != drop_agent
    if keep is not None:
        mask &= pd.MultiIndex.from_frame(table[["agent", "task"]]).isin(keep)
    columns = ["agent", "task", "method", "successes", "trials", *evidence.kept]
    return load_evidence(table.loc[mask, columns].reset_index(drop=True), keep_columns=True)


def held_out(runs: Path, dates: Path, seed: int) -> dict:
    """Part (a): coverage and log scores on held-out cells."""
    cells = metr_evidence(runs).table
    rng = np.random.default_rng(seed)
    held = rng.random(len(cells)) < 0.2
    train, test = cells[~held], cells[held]
    keep = list(zip(train["agent"], train["task"], strict=True))
    posterior = fit(metr_evidence(runs, keep=keep), "time_horizon", agents=dates)
    draws = posterior.draws
    p_task = draws["p_task"].values.reshape(-1, draws.sizes["agent"], draws.sizes["task"])
    agents, tasks = list(draws["agent"].values), list(draws["task"].values)
    logistic = _logistic_fits(_runs_table(runs), keep)
    rows = []
    for cell in test.itertuples():
        k, n = int(cell.successes), int(cell.trials)
        counts = np.arange(n + 1)
        if cell.task in tasks:
            # the pair was never run in training: its draws are predictions
            p = p_task[:, agents.index(cell.agent), tasks.index(cell.task)]
            pmf = stats.binom.pmf(counts[:, None], n, p).mean(axis=1)
        else:  # a task no training cell has: its difficulty is a new task's
            pmf = np.full(n + 1, np.nan)
        cdf = np.cumsum(pmf)
        row = {"agent": cell.agent, "task": cell.task, "successes": k, "trials": n}
        for level in LEVELS:
            low = int(np.searchsorted(cdf, (1 - level) / 2 - 1e-12))
            high = int(np.searchsorted(cdf, (1 + level) / 2 - 1e-12))
            row[f"covered_{level:g}"] = low <= k <= high
        row["log_score_crossed"] = float(np.log(pmf[k]))
        others = train[train["task"] == cell.task]
        pooled_k, pooled_n = int(others["successes"].sum()), int(others["trials"].sum())
        row["log_score_pooled"] = float(
            stats.betabinom.logpmf(k, n, 1 + pooled_k, 1 + pooled_n - pooled_k)
        )
        slope, intercept = logistic[cell.agent]
        p = special.expit(intercept + slope * np.log2(float(cell.human_minutes)))
        row["log_score_logistic"] = float(stats.binom.logpmf(k, n, np.clip(p, 1e-12, 1 - 1e-12)))
        rows.append(row)
    table = pd.DataFrame(rows)
    return {
        "posterior": posterior,
        "cells": table,
        "held_out": int(held.sum()),
        "train": len(train),
    }


def _runs_table(runs: Path) -> pd.DataFrame:
    table = pd.read_csv(runs)
    return table[table["agent"] != "human"]


def _logistic_fits(runs: pd.DataFrame, keep=None, weighted=False) -> dict:
    """Per agent, METR's logistic regression of success on log2(human_minutes) by maximum
    likelihood: ``(slope, intercept)``; ``weighted`` gives every task weight one."""
    if keep is not None:
        runs = runs[pd.MultiIndex.from_frame(runs[["agent", "task"]]).isin(keep)]
    out = {}
    for agent, mine in runs.groupby("agent"):
        x = np.log2(mine["human_minutes"].to_numpy())
        y = mine["success"].to_numpy()
        weight = 1 / mine.groupby("task")["task"].transform("size").to_numpy() if weighted else 1

        def loss(w, x=x, y=y, weight=weight):
            eta = w[0] + w[1] * x
            return -np.sum(weight * (y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta)))

        intercept, slope = optimize.minimize(loss, [0.0, -0.5], method="BFGS").x
        out[agent] = (slope, intercept)
    return out


def leave_latest_out(runs: Path, dates: Path, full) -> pd.DataFrame:
    """Part (b): the latest agent's horizon predicted from its release date alone."""
    release = pd.read_csv(dates)
    latest = release.sort_values("release_date").iloc[-1]
    name = str(latest["agent"])
    posterior = fit(
        metr_evidence(runs, drop_agent=name),
        "time_horizon",
        agents=dates,
        predict=[f"{name},release_date={latest['release_date']}"],
    )
    predicted = horizons(posterior).agents.set_index("agent").loc[name]
    observed = full.set_index("agent").loc[name]
    return pd.DataFrame(
        [
            {"fit": "its runs left out, predicted from its release date", **_h50(predicted)},
            {"fit": "its runs included", **_h50(observed)},
        ]
    ).assign(agent=name, diagnostics_ok=posterior.diagnostics.ok)


def _h50(row) -> dict:
    return {"h50": row["h50"], "h50_lower": row["h50_lower"], "h50_upper": row["h50_upper"]}


def against_logistic(runs: Path, result) -> pd.DataFrame:
    """Part (c): the crossed 50% horizons beside the per-agent logistic fits, with the
    reason for every difference beyond a factor of 2."""
    table = _runs_table(runs)
    by_runs, by_tasks = _logistic_fits(table), _logistic_fits(table, weighted=True)
    shortest, longest = result.lengths
    rows = []
    for row in result.agents.itertuples():
        slope, intercept = by_runs[row.agent]
        slope_t, intercept_t = by_tasks[row.agent]
        mle = np.exp2(-intercept / slope) if slope < 0 else np.inf
        mle_tasks = np.exp2(-intercept_t / slope_t) if slope_t < 0 else np.inf
        ratio = row.h50 / mle
        failures = row.runs - row.successes
        rich = row.successes >= RICH and failures >= RICH
        inside = row.h50_lower <= mle <= row.h50_upper
        reason = ""
        if not 0.5 <= ratio <= 2:
            if not rich:
                reason = (
                    f"{row.successes} successes in {row.runs} runs: the logistic fit has "
                    "no finite maximum or rests on a handful of successes"
                )
            elif not shortest <= mle <= longest:
                reason = "the logistic horizon lies outside the task lengths: extrapolation"
            elif 0.5 <= row.h50 / mle_tasks <= 2:
                reason = (
                    "run weighting: the logistic fit weights each task by its runs; "
                    f"task-weighted it gives {mle_tasks:.3g}"
                )
            else:
                reason = (
                    "neither weighting: the crossed model separates task effects from "
                    "length (and shrinks abilities towards the date trend); the logistic "
                    "fit does not"
                )
            interval = f"{row.h50_lower:.3g} to {row.h50_upper:.3g}"
            reason += f"; the logistic value lies {'inside' if inside else 'OUTSIDE'} the "
            reason += f"crossed 95% interval ({interval})"
        rows.append(
            {
                "agent": row.agent,
                "successes": row.successes,
                "runs": row.runs,
                "data_rich": rich,
                "crossed_h50": row.h50,
                "crossed_lower": row.h50_lower,
                "crossed_upper": row.h50_upper,
                "logistic_h50": mle,
                "logistic_slope": slope,
                "logistic_h50_task_weighted": mle_tasks,
                "ratio": ratio,
                "logistic_inside_interval": inside,
                "reason": reason,
            }
        )
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True, help="metr_runs.csv")
    parser.add_argument("--dates", required=True, help="metr_release_dates.csv")
    parser.add_argument("--seed", type=int, default=16, help="seed of the held-out split")
    parser.add_argument("--out", help="folder for the tables")
    args = parser.parse_args(argv)
    runs, dates = Path(args.runs), Path(args.dates)
    start = time.perf_counter()
    pd.set_option("display.width", 200)
    with showing_progress(sys.stderr):
        results = run(runs, dates, args.seed)
    print(report(results))
    print(f"\n({time.perf_counter() - start:.0f} s)")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        results["held_out"]["cells"].to_csv(out / "crossed_metr_held_out.csv", index=False)
        results["full_horizons"].agents.to_csv(out / "crossed_metr_horizons.csv", index=False)
        results["latest"].to_csv(out / "crossed_metr_latest.csv", index=False)
        results["comparison"].to_csv(out / "crossed_metr_logistic.csv", index=False)
    return 0


def run(runs: Path, dates: Path, seed: int) -> dict:
    """All three parts; returns their tables and the fits' diagnostics."""
    part_a = held_out(runs, dates, seed)
    full = fit(metr_evidence(runs), "time_horizon", agents=dates)
    result = horizons(full, forecast=["2025-06-01"])
    return {
        "held_out": part_a,
        "full": full,
        "full_horizons": result,
        "latest": leave_latest_out(runs, dates, result.agents),
        "comparison": against_logistic(runs, result),
    }


def summary(results) -> dict:
    """The figures docs/crossed.md quotes."""
    cells = results["held_out"]["cells"]
    return {
        **{f"coverage_{level:g}": float(cells[f"covered_{level:g}"].mean()) for level in LEVELS},
        **{
            name: float(cells[f"log_score_{name}"].sum())
            for name in ("crossed", "pooled", "logistic")
        },
        "held_out_cells": len(cells),
        "diagnostics_ok": bool(
            results["held_out"]["posterior"].diagnostics.ok and results["full"].diagnostics.ok
        ),
    }


def report(results) -> str:
    figures = summary(results)
    lines = [
        f"(a) {figures['held_out_cells']} held-out cells "
        f"(fitted to {results['held_out']['train']}):",
        "    coverage of central predictive intervals: "
        + ", ".join(f"{level:.0%} -> {figures[f'coverage_{level:g}']:.3f}" for level in LEVELS),
        f"    log score: crossed {figures['crossed']:.1f}, per-task pooled "
        f"{figures['pooled']:.1f}, per-agent logistic {figures['logistic']:.1f}",
        f"    diagnostics passed (both fits): {figures['diagnostics_ok']}",
        "",
        "(b) the latest agent left out:",
        results["latest"].to_string(index=False, float_format=lambda x: f"{x:.3g}"),
        "",
        "(c) 50% horizons (minutes), crossed against per-agent logistic fits:",
        results["comparison"]
        .drop(columns=["crossed_lower", "crossed_upper"])
        .to_string(index=False, float_format=lambda x: f"{x:.3g}"),
    ]
    trend = results["full_horizons"].trend
    if trend is not None:
        row = trend.iloc[0]
        lines += [
            "",
            f"trend: doubling time {row['median']:.3g} months ({row['lower']:.3g} to "
            f"{row['upper']:.3g}, 95%)",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
