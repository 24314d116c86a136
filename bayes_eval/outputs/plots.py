"""Figures written with ``--out``: estimates, predictive checks, calibration and studies.

The forest and density plots are ArviZ's (``arviz_plots``, matplotlib backend), drawn
from the summary's own numbers; the others, which ArviZ does not draw, are plain
matplotlib. Matplotlib (headless ``Agg``) and ArviZ's plots are imported only here.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayes_eval.results.predictive import FLAG_HIGH, FLAG_LOW

LOG10_P = "log10 P"
DENSITY_PANELS = 12  # the most posterior densities one figure draws
# The most rows a forest plot draws: matplotlib measures every label, so 2,000 rows took
# a minute (20,000 more than ten) and no one reads them; summary.csv has them all.
FOREST_ROWS = 60
PIT_ENVELOPE = 0.99  # ArviZ marks the PIT ECDF's points outside this probability

__all__ = [
    "nearest_rows",
    "attempts_plot",
    "calibration_plot",
    "density_draws",
    "density_plot",
    "forest_plot",
    "horizon_plot",
    "paths_plot",
    "ppc_plot",
    "prior_plot",
    "variance_plot",
]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path, dpi: int = 120) -> Path:
    """``fig`` as a PNG of at most 256 colours (Pillow's median cut): a plot's flat
    colours and their anti-aliased edges survive, at a quarter of the full-colour size.
    zlib's default level, not Pillow's ``optimize``: on METR's report that made the
    figures 3 to 10% smaller at ten times the time (0.25 s of the report's figures)."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    if fig.get_layout_engine() is None:
        fig.tight_layout()
    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    image = Image.open(drawn).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path)
    return path


def _estimates(summary: pd.DataFrame, column: str) -> xr.Dataset:
    """``log10`` of a summary column as ArviZ statistics over an ``estimate`` dim."""
    labels = [f"{r.agent} / {r.task}" for r in summary.itertuples()]
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.log10(np.maximum(summary[column].to_numpy(dtype=float), 1e-300))
    return xr.Dataset({LOG10_P: ("estimate", values)}, coords={"estimate": labels})


def _bounds(summary: pd.DataFrame) -> xr.Dataset:
    """The one-sided lower and upper bounds as an ArviZ credible interval (``ci_bound``)."""
    lower, upper = _estimates(summary, "lower"), _estimates(summary, "upper")
    return xr.concat([lower, upper], dim="ci_bound").assign_coords(ci_bound=["lower", "upper"])


def axis_limits(values) -> tuple[float, float] | None:
    """The edges of a ``log10 P`` axis on which some value is 0 exactly (a lower bound
    where a task may never be solved), which would stretch the axis to 1e-300: the
    positive values' span and 5% beside it; None where no value is 0 (NaN ignored)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    positive = values[values > 0]
    if not (values == 0).any() or not positive.size:
        return None
    low, high = np.log10(positive.min()), np.log10(positive.max())
    margin = 0.05 * max(high - low, 0.5)
    return float(low - margin), float(high + margin)


ZERO_BOUND = "a lower bound of 0 (a task perhaps never solved) runs off the left edge"


def forest_plot(summary: pd.DataFrame, path: Path, threshold: float | None = None) -> Path:
    """Each (agent, task) on a log10 probability axis: median, one-sided bounds, threshold.

    ArviZ's forest plot (``arviz_plots.plot_forest``) drawn from the summary's own
    numbers (exact quantiles, not read off draws). Point values (best-of-N, golden) are
    hollow diamonds without bounds; pairs without an estimate keep their label only. Of
    more than ``FOREST_ROWS`` rows, those nearest the threshold on each side, per agent
    (``nearest_rows``), are drawn, or without a threshold those with the highest upper
    bounds (point values: their value), in the summary's order; the title says which.
    """
    from arviz_plots import add_lines, plot_forest

    _pyplot()
    rows = summary.reset_index(drop=True)
    subset = ""
    if len(rows) > FOREST_ROWS and threshold is not None:
        rows = nearest_rows(rows, threshold, FOREST_ROWS)
        subset = f"{len(rows)} of {len(summary):,} pairs: {NEAREST}\n"
    elif len(rows) > FOREST_ROWS:
        subset = f"the {FOREST_ROWS} of {len(rows):,} rows with the highest upper bounds\n"
        rows = highest_rows(rows, FOREST_ROWS)
    level = rows["level"].iloc[0] if len(rows) else 0.975
    median = _estimates(rows, "median")
    layout = xr.DataTree.from_dict({"posterior": median.expand_dims(chain=[0], draw=[0])})
    pc = plot_forest(
        layout,
        combined=True,
        labels=["estimate"],
        stats={"twig": _bounds(rows), "point_estimate": median},
        visuals={"trunk": False},
        backend="matplotlib",
        figure_kwargs={"figsize": (10, 0.35 * len(rows) + 1.6), "width_ratios": [1.4, 1.6]},
    )
    ax = pc.get_target(LOG10_P, {"column": "forest"})
    y = pc.get_aes_as_dataset("y")[LOG10_P]
    points = rows[rows["upper"].isna() & rows["mean"].notna()]
    if len(points):
        means = _estimates(points, "mean")
        at = y.sel(estimate=means["estimate"]).values
        ax.plot(means[LOG10_P].values, at, "D", mfc="none", color="C1")
    if threshold is not None:
        pc.coords = {"column": "forest"}
        add_lines(pc, values=[math.log10(threshold)])
        pc.coords = None
    ax.set_xlabel(f"{LOG10_P} (success probability)")
    legend = "" if threshold is None else f", dashed: threshold {threshold:g}"
    shown = rows[["lower", "median", "upper", "mean"]].to_numpy(dtype=float).ravel()
    limits = axis_limits([*shown, *([] if threshold is None else [threshold])])
    if limits is not None:
        ax.set_xlim(*limits)
        legend += f"\n{ZERO_BOUND}"
    ax.set_title(
        f"{subset}line: one-sided {level:g} lower to upper bound, dot: posterior median\n"
        f"hollow diamond: point value (no posterior){legend}",
        fontsize=9,
    )
    return _save(pc.viz["figure"].item(), path)


NEAREST = "per agent, those whose bounds lie nearest the threshold on each side"


def nearest_rows(summary: pd.DataFrame, threshold: float, count: int) -> pd.DataFrame:
    """At most ``count`` rows of ``summary``, those that decide the question ``P <
    threshold`` most narrowly: per agent, the rows whose upper bounds (a point value: its
    value) lie nearest ``threshold`` in log10, as many above it as below it (``count``
    shared among the agents, at least one each side); of more than ``count``, the nearest
    of all. Rows without an estimate are left out. Agents in the summary's order, each
    agent's rows by bound, highest first; numbered anew."""
    rows = summary.reset_index(drop=True)
    bound = rows["upper"].fillna(rows["mean"]).to_numpy(dtype=float)
    with np.errstate(divide="ignore"):
        distance = np.abs(np.log10(bound) - math.log10(threshold))
    frame = pd.DataFrame(
        {"agent": rows["agent"], "above": bound >= threshold, "distance": distance}
    )[np.isfinite(bound)]
    per_side = max(1, count // (2 * max(frame["agent"].nunique(), 1)))
    frame = frame.sort_values("distance", kind="stable")
    chosen = frame[frame.groupby(["agent", "above"], sort=False).cumcount() < per_side]
    chosen = chosen.head(count)
    order = {agent: n for n, agent in enumerate(dict.fromkeys(rows["agent"]))}
    picked = rows.loc[chosen.index].assign(
        _agent=lambda t: t["agent"].map(order), _bound=bound[chosen.index]
    )
    picked = picked.sort_values(["_agent", "_bound"], ascending=[True, False], kind="stable")
    return picked.drop(columns=["_agent", "_bound"]).reset_index(drop=True)


def highest_rows(summary: pd.DataFrame, count: int) -> pd.DataFrame:
    """The ``count`` rows of ``summary`` with the highest upper bounds (a point value: its
    value; no estimate: last), in the summary's order, numbered anew."""
    rows = summary.reset_index(drop=True)
    highest = rows["upper"].fillna(rows["mean"]).nlargest(count, keep="first")
    return rows.loc[np.sort(highest.index)].reset_index(drop=True)


def ppc_plot(checks: pd.DataFrame, path: Path) -> Path:
    """The posterior predictive check of every observed cell at once: ArviZ's PIT ECDF
    (``arviz_plots.plot_ecdf_pit``: the ECDF's distance from the uniform's, its
    uniformity test's p-value, the points that depart most marked) of the cells'
    randomised PIT values (``checks``, from ``predictive_checks``), and how many cells
    the mid-p check flags.

    One line, however many cells: a line well above 0 on the left says the model
    predicts the counts too high, below 0 on the right too low; below then above 0 (PIT
    values bunched in the middle), that it is less sure of them than the data need (a
    check of a cell against its own runs partly always is); above then below, that it is
    too sure. ``ppc.csv`` has each cell's values.
    """
    from arviz_plots import plot_ecdf_pit

    _pyplot()
    pit = xr.Dataset({"PIT": ("cell", checks["pit"].to_numpy(dtype=float))})
    pc = plot_ecdf_pit(
        xr.DataTree.from_dict({"ecdf_pit": pit}),
        group="ecdf_pit",
        sample_dims=["cell"],
        envelope_prob=PIT_ENVELOPE,
        backend="matplotlib",
        visuals={"title": False, "remove_axis": False},
        figure_kwargs={"figsize": (7, 3.8)},
    )
    ax = pc.get_target("PIT", {})
    ax.set_xlabel("PIT of the observed count: P(k_rep < k) + U P(k_rep = k)")
    ax.set_ylabel("ECDF minus uniform")
    flagged = int(checks["flagged"].astype(bool).sum())
    ax.set_title(
        f"{len(checks):,} observed cells: the PIT's ECDF near 0 where the model predicts "
        f"the counts as often as they occur\n(p: ArviZ's uniformity test); {flagged} "
        f"cells flagged by their mid-p value (< {FLAG_LOW:g} or > {FLAG_HIGH:g})",
        fontsize=9,
    )
    return _save(pc.viz["figure"].item(), path)


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
    return _save(fig, path)


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
    return _save(fig, path)


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
    return _save(fig, path)


def _density_rows(summary: pd.DataFrame, threshold: float) -> tuple[pd.DataFrame, str]:
    """The rows ``density_plot`` draws and what its title says of them."""
    rows = summary[summary["upper"].notna()].reset_index(drop=True)
    if len(rows) <= DENSITY_PANELS:
        return rows, ""
    shown = f"\n{DENSITY_PANELS} of {len(rows):,} estimates: {NEAREST}"
    return nearest_rows(rows, threshold, DENSITY_PANELS), shown


def density_draws(p_task: xr.DataArray, summary: pd.DataFrame, threshold: float) -> xr.DataArray:
    """The draws of ``P`` (``p_task``, over agent and task) that ``density_plot`` reads:
    its agents' and tasks' alone."""
    rows, _ = _density_rows(summary, threshold)
    agents, tasks = list(dict.fromkeys(rows["agent"])), list(dict.fromkeys(rows["task"]))
    return p_task.sel(agent=agents, task=tasks)


def density_plot(draws: xr.DataArray, summary: pd.DataFrame, path: Path, threshold: float) -> Path:
    """Posterior density of ``log10 P`` per (agent, task), bounds and threshold marked.

    ArviZ's ``plot_dist`` of the draws of ``P`` (``draws``, over agent and task: the
    fit's ``p_task``, or its ``density_draws``), with the summary's one-sided bounds and
    median (exact quantiles for exact models) as its interval and point. Cells without a
    posterior (point values, no estimate) are left out; of more than ``DENSITY_PANELS``
    cells, those nearest the threshold (``nearest_rows``) are drawn, and the title says so.
    """
    from arviz_plots import add_lines, plot_dist

    plt = _pyplot()
    rows, shown = _density_rows(summary, threshold)
    if rows.empty:  # point values only: nothing for ArviZ to draw
        fig, ax = plt.subplots(figsize=(6, 1.2))
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            "no posterior densities: every estimate is a point value or absent",
            ha="center",
            va="center",
        )
        return _save(fig, path, dpi=110)
    estimates = _estimates(rows, "median")
    cells = [draws.sel(agent=r.agent, task=r.task).values for r in rows.itertuples()]
    with np.errstate(divide="ignore"):
        values = np.log10(np.stack(cells, axis=-1))
    values = np.where(np.isfinite(values), values, np.nan)  # draws that underflowed to 0
    data = xr.Dataset({LOG10_P: (("chain", "draw", "estimate"), values)}, coords=estimates.coords)
    n_cols = min(3, max(len(rows), 1))
    n_rows = max(1, math.ceil(len(rows) / n_cols))
    pc = plot_dist(
        xr.DataTree.from_dict({"posterior": data}),
        kind="kde",
        stats={"credible_interval": _bounds(rows), "point_estimate": estimates},
        visuals={"point_estimate_text": False},
        labeller=_CellLabeller(),
        col_wrap=n_cols,
        backend="matplotlib",
        figure_kwargs={"figsize": (3.8 * n_cols, 2.4 * n_rows)},
    )
    add_lines(pc, values=[math.log10(threshold)])
    limits = [
        axis_limits([*cell.ravel(), row.lower, row.median, row.upper, threshold])
        for row, cell in zip(rows.itertuples(), cells, strict=True)
    ]
    for label, edges in zip(estimates["estimate"].values, limits, strict=True):
        if edges is not None:
            pc.get_target(LOG10_P, {"estimate": label}).set_xlim(*edges)
    if any(edges is not None for edges in limits):
        shown += f"; {ZERO_BOUND}"
    level = rows["level"].iloc[0] if len(rows) else 0.975
    figure = pc.viz["figure"].item()
    figure.suptitle(
        f"{LOG10_P}: line from the one-sided {level:g} lower to upper bound, dot: median, "
        f"dashed: threshold {threshold:g}{shown}",
        fontsize=9,
    )
    for ax in figure.axes:
        ax.title.set_fontsize(8)
    return _save(figure, path, dpi=110)


class _CellLabeller:
    """Titles an ArviZ facet by its (agent / task) label alone."""

    def make_label_vert(self, var_name, sel, isel):  # noqa: D102 - ArviZ's labeller interface
        return str(sel.get("estimate", var_name)).replace(" / ", "\n", 1)

    make_label_flat = make_label_vert


def horizon_plot(result, path: Path) -> Path:
    """Each agent's 50% time horizon with its interval (log scale), against its release
    date where agents are dated, with the task lengths fitted shaded and any forecasts."""
    plt = _pyplot()
    table = result.agents
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    dated = result.date_column is not None
    x = table[result.date_column].to_numpy() if dated else np.arange(len(table))
    floor = 1e-6 * result.lengths[0]  # a horizon of 0 minutes cannot sit on a log axis
    middle = np.maximum(table["h50"].to_numpy(), floor)
    low = np.maximum(table["h50_lower"].to_numpy(), floor)
    high = np.maximum(table["h50_upper"].to_numpy(), floor)
    for predicted, marker in ((False, "o"), (True, "D")):
        mine = table["predicted"].to_numpy() == predicted
        if mine.any():
            ax.errorbar(
                x[mine],
                middle[mine],
                yerr=[middle[mine] - low[mine], high[mine] - middle[mine]],
                fmt=marker,
                capsize=3,
                color="tab:red" if predicted else "tab:blue",
                label="new agent (predicted)" if predicted else "agent",
            )
    for xi, yi, name in zip(x, middle, table["agent"], strict=True):
        ax.annotate(name, (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.axhspan(*result.lengths, color="0.9", zorder=0, label="task lengths fitted")
    if len(result.forecasts):
        from bayes_eval.evidence.covariates import decimal_year

        trend = result.forecasts[result.forecasts["what"] == "trend"]
        years = [decimal_year(d, "forecast") for d in trend["date"]]
        ax.errorbar(
            years,
            trend["h50"],
            yerr=[trend["h50"] - trend["h50_lower"], trend["h50_upper"] - trend["h50"]],
            fmt="s",
            capsize=3,
            color="tab:green",
            label="trend forecast",
        )
    ax.set_yscale("log")
    ax.set_ylabel(f"50% time horizon ({result.unit})")
    if dated:
        ax.set_xlabel(result.date_column)
    else:
        ax.set_xticks([])
    ax.set_title(f"time horizons, medians and {result.interval:.0%} intervals")
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path)


def attempts_plot(curves: pd.DataFrame, path: Path, threshold: float | None = None) -> Path:
    """pass@k (left) and the chance that all k attempts fail, 1 - pass@k (right, where a
    power law is a straight line), against k on log-log axes: one colour per agent, its
    mean solid and its one-sided bound dotted (pass@k's upper bound; on the right, the
    lower bound of all failing), for the observed tasks (upper row) and, where the model
    has one, a new task (lower row; ``bayes_eval.results.population``); the threshold
    dashed. Four panels however many agents."""
    plt = _pyplot()
    agents = list(dict.fromkeys(curves["agent"]))
    populations = [p for p in ("observed tasks", "new task") if (curves["population"] == p).any()]
    fig, axes = plt.subplots(
        len(populations),
        2,
        figsize=(10, 3.6 * len(populations) + 0.25 * math.ceil(len(agents) / 4)),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    colours = plt.get_cmap("tab10" if len(agents) <= 10 else "tab20")
    floor = 1e-12  # 0 cannot sit on a log axis
    for row, population in enumerate(populations):
        top, bottom = axes[row]
        for n, agent in enumerate(agents):
            curve = curves[(curves["agent"] == agent) & (curves["population"] == population)]
            if not len(curve):
                continue
            k = curve["attempts"].to_numpy(dtype=float)
            mean, high = (curve[c].to_numpy(float) for c in ("pass_at_mean", "pass_at_upper"))
            # a line style per twenty agents, where colours run out
            style = ("-", "--", "-.")[min(n // 20, 2)]
            colour = colours(n % colours.N)
            for ax, m, bound in ((top, mean, high), (bottom, 1 - mean, 1 - high)):
                ax.plot(k, np.where(m >= floor, m, np.nan), style, color=colour, label=agent)
                ax.plot(k, np.where(bound >= floor, bound, np.nan), ":", color=colour)
        if threshold is not None:
            top.axhline(threshold, color="0.3", linestyle="--", linewidth=1)
            bottom.axhline(1 - threshold, color="0.3", linestyle="--", linewidth=1)
        top.set_ylabel(f"pass@k, {population}")
        bottom.set_ylabel(f"1 - pass@k (all k fail), {population}")
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="major", color="0.9")
    for ax in axes[-1]:
        ax.set_xlabel("attempts k")
    axes[0, 0].set_title("pass@k: solid the mean, dotted the upper bound", fontsize=9)
    axes[0, 1].set_title("all k attempts fail: dotted the lower bound", fontsize=9)
    fig.legend(
        *axes[0, 0].get_legend_handles_labels(),
        loc="outside lower center",
        ncols=min(len(agents), 4),
        fontsize=7,
    )
    return _save(fig, path)


def prior_plot(tree: xr.DataTree, path: Path) -> Path:
    """The prior predictive interval of every observed cell's rate, the observed rate over
    it: ArviZ's ``plot_ppc_interval`` of a prior check's tree (``prior_check``)."""
    from arviz_plots import plot_ppc_interval

    _pyplot()
    trials = tree["constant_data"]["trials"]
    rates = xr.DataTree.from_dict(
        {
            group: (tree[group]["successes"] / trials).to_dataset(name="rate")
            for group in ("prior_predictive", "observed_data")
        }
    )
    cells = rates["observed_data"].sizes["cell"]
    pc = plot_ppc_interval(
        rates,
        group="prior_predictive",
        ci_kind="eti",
        ci_probs=(0.5, 0.95),
        backend="matplotlib",
        figure_kwargs={"figsize": (min(16, 4 + 0.25 * cells), 4.5)},
    )
    ax = pc.get_target("rate", {})
    observed = rates["observed_data"]["rate"].values
    ax.plot(np.arange(cells), observed, "o", color="black", ms=5, zorder=3)
    ax.set_xlabel("observed cell (index, in the order of the check's table)")
    ax.set_ylabel("success rate k / n")
    ax.set_title(
        f"model {tree.attrs['spec_name']} before any data: observed rate (black) on its "
        "prior predictive 50% and 95% intervals",
        fontsize=9,
    )
    return _save(pc.viz["figure"].item(), path)
