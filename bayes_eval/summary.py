"""The summary table: one row per (agent, task), columns as in ``constants.SUMMARY_COLUMNS``.

``upper`` is the one-sided credible bound at ``level`` (``P(P <= upper) = level``),
``lower`` the matching one-sided lower bound, ``prob_above`` is ``P(P > threshold)``.
Point values (expert best-of-N, golden solution) fill ``mean`` only. A pair without
an estimate keeps its row, empty, with the reason in ``provenance``. ``observed`` is
false for a pair the crossed model predicts without having seen it run.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from bayes_eval.conjugate import clopper_pearson_upper, summarise_products
from bayes_eval.constants import SUMMARY_COLUMNS
from bayes_eval.evidence import join_distinct
from bayes_eval.specs import check_level, check_probability

__all__ = ["format_number", "summarise"]

LN10 = math.log(10)


def summarise(posterior, level: float, threshold: float | None = None) -> pd.DataFrame:
    """Summary of an exact ``Posterior`` at ``level``, with ``P(P > threshold)`` if given."""
    level = check_level(level, "level")
    tau = None if threshold is None else check_probability(threshold, "threshold")
    probs = np.array([1.0 - level, 0.5, level])
    x_points = np.array([] if tau is None else [-math.log(tau)])
    names = ("method", "provenance", "reason", "point_log", "cp_successes", "cp_trials")
    data = {name: posterior.values(name) for name in names}
    cells = posterior.cells()
    products = [posterior.product_at(i, j) for _, _, i, j in cells]
    exact = [n for n, product in enumerate(products) if product is not None]
    solved = summarise_products([products[n] for n in exact], probs, x_points)
    solved = dict(zip(exact, solved, strict=True))
    mcse = _quantile_mcse(posterior, level) if posterior.is_mcmc else None
    # a crossed fit predicts pairs never run; every other model estimates pairs run
    observed = (
        posterior.values("observed")
        if "observed" in posterior.group("conjugate")
        else np.ones(data["method"].shape, dtype=bool)
    )
    rows = []
    for n, (agent, task, i, j) in enumerate(cells):
        row = dict.fromkeys(SUMMARY_COLUMNS, np.nan)
        row.update(
            agent=agent,
            task=task,
            method=data["method"][i, j],
            level=level,
            provenance=data["provenance"][i, j],
            diagnostics_ok=True,
            observed=bool(observed[i, j]),
        )
        if data["reason"][i, j]:
            row["provenance"] += f"; no estimate: {data['reason'][i, j]}"
            row["diagnostics_ok"] = pd.NA
        elif posterior.is_mcmc:
            row.update(_mcmc_columns(posterior, agent, task, i, j, level, tau, mcse))
            row["provenance"] = data["provenance"][i, j] + row["provenance"]
        elif n in solved:
            columns = _posterior_columns(products[n], solved[n], tau)
            columns["provenance"] = row["provenance"] + columns.pop("quantiles")
            row.update(columns)
        else:
            row["mean"] = math.exp(data["point_log"][i, j])
            row["provenance"] += "; point value, no posterior"
        if data["cp_trials"][i, j] > 0:
            k, trials = data["cp_successes"][i, j], data["cp_trials"][i, j]
            row["cp_upper"] = float(clopper_pearson_upper(k, trials, level))
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    table["diagnostics_ok"] = table["diagnostics_ok"].astype("boolean")
    table["observed"] = table["observed"].astype(bool)
    return _with_kept(table, posterior.evidence)


def _with_kept(table: pd.DataFrame, evidence) -> pd.DataFrame:
    """The summary with each column the user kept (``keep_columns``): per (agent, task),
    the distinct values of its evidence rows, joined by "; "."""
    for column in evidence.kept:
        merged = evidence.table.groupby(["agent", "task"], sort=False)[column].agg(join_distinct)
        keys = zip(table["agent"], table["task"], strict=True)
        table[column] = [merged.get(key, "") for key in keys]
    return table


def _quantile_mcse(posterior, level: float) -> np.ndarray:
    """ArviZ's Monte Carlo standard error of each cell's ``level`` quantile of ``p_task``."""
    import arviz_stats

    draws = posterior.draws["p_task"].fillna(0.0)  # absent cells: not reported
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return arviz_stats.mcse(draws, method="quantile", prob=level).values


def _mcmc_columns(posterior, agent, task, i, j, level, tau, mcse) -> dict:
    """Summaries of one cell's ``p_task`` draws, with the MCSE of the upper bound."""
    draws = posterior.draws["p_task"].values[:, :, i, j]
    flat = draws.ravel()
    upper = float(np.quantile(flat, level))
    ok = posterior.diagnostics.cell_ok(f"p_task[{agent}, {task}]")
    note = f"; quantiles from {flat.size} MCMC draws"
    if not ok:
        note += "; UNRELIABLE: diagnostics failed (bayes-eval check RUN_DIR)"
    return {
        "mean": float(flat.mean()),
        "median": float(np.median(flat)),
        "sd": float(flat.std(ddof=1)),
        "lower": float(np.quantile(flat, 1.0 - level)),
        "upper": upper,
        "log10_upper": math.log10(upper) if upper > 0 else -math.inf,
        "prob_above": np.nan if tau is None else float(np.mean(flat > tau)),
        "upper_mcse": float(mcse[i, j]),
        "diagnostics_ok": ok,
        "provenance": note,
    }


def _posterior_columns(product, solved, tau) -> dict:
    mean, sd = product.moments()
    x_upper, x_median, x_lower = solved.x_quantiles
    how = {
        "point": "exact",
        "beta": "exact",
        "saddlepoint": f"error <= {solved.error:.0e} in P and 1 - P, validated against mpmath",
        "grid": f"error ~ {solved.error:.0e} in P and 1 - P, from refining the grid",
    }[solved.engine]
    engine = f"; quantiles: {solved.engine} ({how})"
    return {
        "mean": mean,
        "median": math.exp(-x_median),
        "sd": sd,
        "lower": math.exp(-x_lower),
        "upper": math.exp(-x_upper),
        "log10_upper": -x_upper / LN10,
        "prob_above": np.nan if tau is None else float(solved.x_cdf[0]),
        "provenance": None,
        "quantiles": engine,
    }


def format_number(value) -> str:
    """A probability or count for people: 4 significant digits, ``-`` if absent."""
    if value is None or pd.isna(value):
        return "-"
    return f"{value:.4g}"
