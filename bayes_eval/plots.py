"""Figures written with ``--out``: estimates, predictive checks, calibration and studies.

Matplotlib (headless ``Agg``) is imported only here.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "calibration_plot",
    "density_plot",
    "forest_plot",
    "paths_plot",
    "ppc_plot",
    "variance_plot",
]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path, dpi: int = 120) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def forest_plot(summary: pd.DataFrame, path: Path, threshold: float | None = None) -> Path:
    """Each (agent, task) on a log10 probability axis: median, one-sided bounds, upper marked.

    Point values (best-of-N, golden) are drawn as hollow diamonds, without bounds; pairs
    without an estimate are listed with their label only.
    """
    plt = _pyplot()
    rows = summary.reset_index(drop=True)
    height = 0.35 * len(rows) + 1.5
    fig, ax = plt.subplots(figsize=(8, height))
    y = np.arange(len(rows))[::-1]
    level = rows["level"].iloc[0] if len(rows) else 0.975
    for yi, row in zip(y, rows.itertuples(), strict=True):
        if np.isfinite(row.upper):
            ax.plot([max(row.lower, 1e-300), row.upper], [yi, yi], color="0.4", lw=1.5)
            ax.plot(row.median, yi, "o", color="C0")
            ax.plot(row.upper, yi, "|", color="C3", ms=14, mew=2.5)
        elif np.isfinite(row.mean):
            ax.plot(row.mean, yi, "D", mfc="none", color="C1")
    if threshold is not None:
        ax.axvline(threshold, color="C3", ls="--", lw=1, label=f"threshold {threshold:g}")
    ax.set_xscale("log")
    ax.set_yticks(y, [f"{r.agent} / {r.task}" for r in rows.itertuples()])
    ax.set_xlabel("P(success), log scale")
    ax.set_title(
        f"line: one-sided {level:g} lower to upper bound, red tick: upper bound\n"
        "dot: posterior median, hollow diamond: point value (no posterior)",
        fontsize=9,
    )
    finite = pd.concat([rows["lower"], rows["upper"], rows["mean"]]).replace(0, np.nan).dropna()
    if len(finite):
        ax.set_xlim(10 ** math.floor(np.log10(finite.min())), 1.0)
    if threshold is not None:
        ax.legend(loc="lower left")
    return _save(plt, fig, path)


def ppc_plot(checks: pd.DataFrame, path: Path) -> Path:
    """Observed against replicated rate per cell (flagged cells in red), and the p-values."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5))
    ok = ~checks["flagged"].astype(bool)
    left.plot([0, 1], [0, 1], color="0.7", lw=1)
    left.scatter(
        checks.loc[ok, "replicated_rate"], checks.loc[ok, "observed_rate"], s=18, label="consistent"
    )
    left.scatter(
        checks.loc[~ok, "replicated_rate"],
        checks.loc[~ok, "observed_rate"],
        s=30,
        color="C3",
        label="flagged (p < 0.025 or > 0.975)",
    )
    left.set_xlabel("posterior predictive mean rate")
    left.set_ylabel("observed rate k / n")
    left.legend(loc="upper left")
    right.hist(checks["p_value"], bins=np.linspace(0, 1, 21), color="C0", edgecolor="white")
    for edge in (0.025, 0.975):
        right.axvline(edge, color="C3", ls="--", lw=1)
    right.set_xlabel("Bayesian p-value per cell (mid-p)")
    right.set_ylabel("cells")
    return _save(plt, fig, path)


def calibration_plot(calibration, path: Path) -> Path:
    """PIT histogram (uniform when calibrated) and nominal against observed coverage."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5))
    counts = calibration.pit_histogram()
    edges = np.linspace(0, 1, len(counts) + 1)
    left.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="C0", edgecolor="white")
    expected = counts.sum() / len(counts)
    left.axhline(expected, color="C3", ls="--", lw=1, label="uniform (calibrated)")
    left.set_xlabel("randomised PIT of the ground-truth count")
    left.set_ylabel("cells")
    left.set_title(f"KS p-value {calibration.pit_p_value():.3g}", fontsize=9)
    left.legend(loc="upper center")
    coverage = calibration.coverage()
    right.plot([0, 1], [0, 1], color="0.7", lw=1)
    right.errorbar(
        coverage["nominal"],
        coverage["rate"],
        yerr=[coverage["rate"] - coverage["rate_lower"], coverage["rate_upper"] - coverage["rate"]],
        fmt="o",
        color="C0",
        capsize=3,
    )
    right.set_xlabel("nominal coverage of the central predictive interval")
    right.set_ylabel("observed coverage (95% interval)")
    right.set_xlim(0, 1)
    right.set_ylim(0, 1.02)
    fig.suptitle(f"model {calibration.model}: {len(calibration.calibrated)} cells", fontsize=10)
    return _save(plt, fig, path)


def variance_plot(results: pd.DataFrame, path: Path) -> Path:
    """Variance ratio (end-to-end over milestones) against the number of milestones."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for trials, rows in results.groupby("trials"):
        rows = rows.sort_values("milestones")
        ax.plot(rows["milestones"], rows["variance_ratio"], "o-", label=f"{trials} trials/stage")
    ax.axhline(1, color="0.6", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("milestones")
    ax.set_ylabel("variance ratio, end-to-end / milestones")
    rate = results["end_to_end_rate"].iloc[0]
    ax.set_title(f"end-to-end rate {rate:g}, equal trials per stage", fontsize=9)
    ax.legend()
    return _save(plt, fig, path)


def paths_plot(results: pd.DataFrame, path: Path) -> Path:
    """Share of upper bounds below the true rate against the strength of the violation."""
    plt = _pyplot()
    level = results["level"].iloc[0]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for (model, subset), rows in results.groupby(["model", "subset"], sort=False):
        ax.plot(rows["strength"], rows["failure_rate"], "o-", label=f"{model} ({subset})")
    ax.axhline(1 - level, color="C3", ls="--", lw=1, label=f"nominal {1 - level:g}")
    ax.set_xlabel(f"strength of the violation ({results['violation'].iloc[0]})")
    ax.set_ylabel(f"share of {level:g} upper bounds below the truth")
    ax.set_ylim(-0.02, 1.02)
    ax.legend()
    return _save(plt, fig, path)


def density_plot(posterior, summary: pd.DataFrame, path: Path, threshold: float) -> Path:
    """Posterior density of ``log10 P`` per (agent, task), upper bound and threshold marked.

    Cells without a posterior (point values, no estimate) are left out.
    """
    plt = _pyplot()
    draws = posterior.posterior["p_task"]
    rows = [r for r in summary.itertuples() if np.isfinite(r.upper)]
    n_cols = min(3, max(len(rows), 1))
    n_rows = max(1, math.ceil(len(rows) / n_cols))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.6 * n_cols, 2.4 * n_rows), squeeze=False)
    for ax, row in zip(axes.ravel(), rows, strict=False):
        values = draws.sel(agent=row.agent, task=row.task).values.ravel()
        values = np.log10(values[np.isfinite(values) & (values > 0)])
        ax.hist(values, bins=50, density=True, color="C0", alpha=0.8)
        ax.axvline(np.log10(row.upper), color="C3", lw=2, label="upper bound")
        ax.axvline(np.log10(threshold), color="k", ls="--", lw=1, label="threshold")
        ax.set_title(f"{row.agent} / {row.task}", fontsize=8)
        ax.set_xlabel("log10 P", fontsize=8)
        ax.set_yticks([])
    for ax in axes.ravel()[len(rows) :]:
        ax.axis("off")
    if rows:
        axes.ravel()[0].legend(fontsize=7)
    return _save(plt, fig, path, dpi=110)
