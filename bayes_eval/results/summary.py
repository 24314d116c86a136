"""The summary table: one row per (agent, task), columns as in ``constants.SUMMARY_COLUMNS``.

``upper`` is the one-sided credible bound at ``level`` (``P(P <= upper) = level``),
``lower`` the matching one-sided lower bound, ``prob_above`` is ``P(P > threshold)``.
Point values (expert best-of-N, golden solution) fill ``mean`` only. A pair without
an estimate keeps its row, empty, with the reason in ``provenance``. ``observed`` is
false for a pair the crossed model predicts without having seen it run.

A pooled or crossed bound borrows from other cells; where the pair has end-to-end counts
in the fit, the summary says how much (``bound_context``):

* ``own_upper``: the exact bound of the pair's own runs under the reference prior
  (``REFERENCE_PRIOR``, uniform), ``Beta(1 + k, 1 + n - k)``;
* ``worth_runs``: how many runs of the pair, with its ``k`` successes, would bring its own
  bound down to ``upper`` (``n`` or fewer where ``upper`` is not below ``own_upper``);
* ``floor_upper``: the exact bound from 0 successes in every run that informs the pair:
  the runs sharing its agent (pooled models, which pool an agent's tasks) or its agent or
  its task (crossed models);
* ``extrapolated``: ``upper`` lies below ``floor_upper``. No run of the table could show
  such a bound; it rests on the model's structure (additivity across agents and tasks, or
  the agent's tasks being alike), and the provenance says so.

The last two are empty for a model that reads milestones: its bounds rest on milestone
runs too, which no count of end-to-end runs describes.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from scipy import optimize, special

from bayes_eval.constants import SUMMARY_COLUMNS
from bayes_eval.evidence.table import join_distinct
from bayes_eval.exact.products import clopper_pearson_upper, summarise_products
from bayes_eval.specs import check_level, check_probability

__all__ = ["format_number", "summarise"]

# The reference prior of a cell's own-data bound (own_upper, floor_upper): the uniform
# Beta(1, 1) of the exact end_to_end model.
REFERENCE_PRIOR = (1.0, 1.0)

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
    floors = _floor_runs(posterior, data["cp_trials"]) if posterior.is_mcmc else None
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
        if posterior.is_mcmc and pd.notna(row["upper"]):
            k, trials = max(data["cp_successes"][i, j], 0), max(data["cp_trials"][i, j], 0)
            floor = None if floors is None else floors[i, j]
            row.update(bound_context(row["upper"], k, trials, floor, level))
            row["provenance"] += _context_note(row, posterior.spec.pooling, floor)
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    table["diagnostics_ok"] = table["diagnostics_ok"].astype("boolean")
    table["observed"] = table["observed"].astype(bool)
    table["extrapolated"] = table["extrapolated"].astype("boolean")
    return _with_kept(table, posterior.evidence)


def own_upper(k: int, n: float, level: float) -> float:
    """The exact ``level`` bound of ``k`` successes in ``n`` runs under the reference prior."""
    a, b = REFERENCE_PRIOR
    return float(special.betaincinv(a + k, b + n - k, level))


def worth_runs(upper: float, k: int, level: float) -> float:
    """The runs ``N`` (real-valued) with ``k`` successes whose own bound is ``upper``:
    ``own_upper(k, N) = upper``; NaN where no ``N >= k`` gives it. With no success and the
    uniform reference prior, ``1 - (1 - level)^(1 / (N + 1)) = upper`` gives ``N`` in
    closed form (to 1e300 runs and beyond); otherwise it is solved on ``log N``."""
    if not 0 < upper < 1 or own_upper(k, k, level) < upper:
        return math.nan
    if k == 0 and REFERENCE_PRIOR[0] == 1.0:
        return math.log1p(-level) / math.log1p(-upper) + 1.0 - sum(REFERENCE_PRIOR)

    def gap(log_runs):
        return math.log(own_upper(k, k + math.exp(log_runs), level)) - math.log(upper)

    high = 1.0
    while gap(high) > 0:  # the bound falls as 1 / N: doubling log N brackets it
        high *= 2
    return k + math.exp(optimize.brentq(gap, -40.0, high, xtol=1e-12, rtol=1e-10))


def bound_context(upper: float, k: int, n: int, floor_runs: int | None, level: float) -> dict:
    """``own_upper``, ``worth_runs``, ``floor_upper`` and ``extrapolated`` of a pooled or
    crossed bound (the module docstring); the first two NaN for a pair without runs, the
    last two empty without ``floor_runs`` (a fit that reads milestones)."""
    floor = math.nan if floor_runs is None else own_upper(0, floor_runs, level)
    return {
        "own_upper": own_upper(k, n, level) if n > 0 else math.nan,
        "worth_runs": worth_runs(upper, k, level) if n > 0 else math.nan,
        "floor_upper": floor,
        "extrapolated": pd.NA if floor_runs is None else bool(upper < floor),
    }


def _floor_runs(posterior, trials: np.ndarray) -> np.ndarray | None:
    """Per (agent, task): the end-to-end runs that inform it, those sharing its agent
    (and, in a crossed model, those sharing its task), from the fit's counts. None for a
    model that reads milestones: their runs inform its bounds too, and no count of
    end-to-end runs says what they could show."""
    if posterior.spec.kind != "end_to_end":
        return None
    runs = np.maximum(trials, 0)
    by_agent = runs.sum(axis=1, keepdims=True)
    if posterior.spec.pooling != "crossed":
        return np.broadcast_to(by_agent, runs.shape)
    return by_agent + runs.sum(axis=0, keepdims=True) - runs


def _context_note(row: dict, pooling: str, floor_runs: int | None) -> str:
    """The provenance's words on a bound below its floor, or below its own mean."""
    note = ""
    if row["extrapolated"] is True:
        shared, rests = (
            ("agent or task", "additivity across agents and tasks")
            if pooling == "crossed"
            else ("agent", "the agent's tasks being alike")
        )
        note += (
            f"; EXTRAPOLATED: the bound {format_number(row['upper'])} lies below "
            f"{format_number(row['floor_upper'])}, what 0 successes in all {floor_runs:,} "
            f"runs sharing its {shared} could show; it rests on the model's {rests}"
        )
    if row["upper"] < row["own_upper"]:  # NaN for a pair without runs: False
        note += f"; worth {format_number(row['worth_runs'])} runs of its own"
    if row["upper"] < row["mean"]:
        note += (
            f"; the upper bound lies below the mean ({format_number(row['upper'])} < "
            f"{format_number(row['mean'])}): the posterior is so right-skewed that its "
            "mean comes from the rare draws beyond the bound"
        )
    return note


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
