"""The summary table: one row per (agent, task), columns as in ``constants.SUMMARY_COLUMNS``.

``upper`` is the one-sided credible bound at ``level`` (``P(P <= upper) = level``),
``lower`` the matching one-sided lower bound, ``prob_above`` is ``P(P > threshold)``.
Point values (expert best-of-N, golden solution) fill ``mean`` only. A pair without
an estimate keeps its row, empty, with the reason in ``provenance``. ``observed`` is
false for a pair the crossed model predicts without having seen it run.

A pooled or crossed bound borrows from other cells; where the pair has end-to-end counts
in the fit, the summary says how much (``bound_context``):

* ``own_runs``: the pair's end-to-end runs in the fit, ``n`` (empty where none);
* ``own_successes``: their successes, ``k`` (as graded, where a grader scored them);
* ``own_upper``, ``own_lower``: the exact bounds of the pair's own runs under the
  reference prior (``REFERENCE_PRIOR``, uniform), ``Beta(1 + k, 1 + n - k)``;
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

With a threshold, ``basis`` says what carries the row's verdict there (``_basis``):
``own`` where the pair's own runs decide it alike (every estimate of an exact model,
which borrows nothing), ``pooled`` where the verdict needs what the model borrows from
other pairs, ``extrapolated`` where the bound below the threshold lies below its floor,
``prediction`` for a pair the crossed model predicts without having seen it run.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import optimize, special

from bayes_eval.constants import (
    AGENT,
    BASIS_EXTRAPOLATED,
    BASIS_OWN,
    BASIS_POOLED,
    BASIS_PREDICTION,
    SUMMARY_COLUMNS,
    TASK,
)
from bayes_eval.evidence.table import join_distinct
from bayes_eval.exact.factors import x_cdf, x_ppf
from bayes_eval.exact.products import beta_product, clopper_pearson_upper, summarise_products
from bayes_eval.inference.chain_stats import quantile_mcse
from bayes_eval.registry import model_of
from bayes_eval.specs import check_level, check_probability

__all__ = ["THRESHOLD_COLUMNS", "format_number", "summarise"]

# The columns a threshold sets (empty without one); every other column is the same.
THRESHOLD_COLUMNS = ("prob_above", "basis")

# The reference prior of a cell's own-data bound (own_upper, floor_upper): the uniform
# Beta(1, 1) of the exact end_to_end model.
REFERENCE_PRIOR = (1.0, 1.0)

LN10 = math.log(10)
# The most draws an MCMC fit's summary copies at once (32 MB, a block of pairs): a
# 5,046-pair crossed fit's draws of its pairs are 161 MB, and the copies its quantiles
# and median made of all of them at once were 400 MB of its peak.
SUMMARY_VALUES = 2**22


def summarise(posterior, level: float, threshold: float | None = None) -> pd.DataFrame:
    """Summary of a ``Posterior`` at ``level``, with ``P(P > threshold)`` if given.

    Column by column across cells: an exact fit's quantiles come from its Beta factors,
    all cells at once (``_exact_columns``); an MCMC fit's from each cell's draws."""
    level = check_level(level, "level")
    tau = None if threshold is None else check_probability(threshold, "threshold")
    values = {name: posterior.values(name) for name in ("method", "reason", "cp_trials")}
    at = np.nonzero(values["method"] != "")
    conjugate = posterior.group("conjugate")
    # a crossed fit predicts pairs never run; every other model estimates pairs run
    observed = posterior.values("observed")[at] if "observed" in conjugate else True
    reason = values["reason"][at]
    estimated = reason == ""
    table = pd.DataFrame({name: np.full(reason.size, np.nan) for name in SUMMARY_COLUMNS})
    table["agent"] = posterior.values(AGENT)[at[0]]
    table["task"] = posterior.values(TASK)[at[1]]
    table["method"] = values["method"][at]
    table["level"] = level
    table["diagnostics_ok"] = pd.array(np.where(estimated, True, None), dtype="boolean")
    table["observed"] = np.broadcast_to(observed, reason.shape).astype(bool)
    table["extrapolated"] = pd.array([pd.NA] * reason.size, dtype="boolean")
    provenance = posterior.values("provenance")[at].astype(object)
    provenance[~estimated] += "; no estimate: " + reason[~estimated].astype(object)
    table["provenance"] = provenance
    if posterior.is_mcmc:
        _mcmc_rows(posterior, table, at, np.flatnonzero(estimated), level, tau)
        if "grader" in conjugate:
            _graded_own(posterior, table, at, level)
    else:
        _exact_columns(posterior, table, at, estimated, level, tau)
    trials = values["cp_trials"][at]
    runs = np.flatnonzero(trials > 0)
    successes = posterior.values("cp_successes")[at]
    table.loc[runs, "cp_upper"] = clopper_pearson_upper(successes[runs], trials[runs], level)
    table["own_runs"] = pd.Series(trials).where(trials > 0).astype("Int64")
    table["own_successes"] = pd.Series(successes).where(trials > 0).astype("Int64")
    if tau is not None:
        table["basis"] = _basis(table, tau, posterior.spec.exact)
    return _with_kept(table, posterior.evidence)


def _side(lower, upper, tau: float) -> np.ndarray:
    """``below`` (upper bound under ``tau``), ``above`` (lower bound over it) or
    ``undecided``, per row (a missing bound decides nothing)."""
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    return np.where(upper < tau, "below", np.where(lower > tau, "above", "undecided"))


def _basis(table: pd.DataFrame, tau: float, exact: bool) -> np.ndarray:
    """What carries each row's verdict at ``tau`` (the module docstring): empty for a
    pair without an estimate."""
    estimated = (table["upper"].notna() | table["mean"].notna()).to_numpy()
    basis = np.full(len(table), np.nan, dtype=object)
    if exact:
        basis[estimated] = BASIS_OWN
    else:
        model = _side(table["lower"], table["upper"], tau)
        own = _side(table["own_lower"], table["own_upper"], tau)
        alike = table["own_upper"].notna().to_numpy() & (own == model)
        basis[estimated] = np.where(alike, BASIS_OWN, BASIS_POOLED)[estimated]
        extrapolated = table["extrapolated"].fillna(False).to_numpy(dtype=bool)
        basis[estimated & extrapolated & (model == "below")] = BASIS_EXTRAPOLATED
    basis[estimated & ~table["observed"].to_numpy(dtype=bool)] = BASIS_PREDICTION
    return basis


def _exact_columns(posterior, table, at, estimated, level, tau) -> None:
    """An exact fit's columns, in place: point values' means, and each posterior's
    moments and quantiles, a cell of one Beta factor (or a point mass) all at once, any
    other product through ``summarise_products``."""
    probs = np.array([1.0 - level, 0.5, level])
    x_points = np.array([] if tau is None else [-math.log(tau)])
    point_log = posterior.values("point_log")[at]
    point = estimated & ~np.isnan(point_log)
    table.loc[point, "mean"] = np.exp(point_log[point])
    table.loc[point, "provenance"] += "; point value, no posterior"
    cells = np.flatnonzero(estimated & ~point)
    alpha = posterior.values("alpha")[at][cells]  # (cell, run, factor), NaN-padded
    beta = posterior.values("beta")[at][cells]
    present = ~np.isnan(alpha)
    proper = present & (beta > 0)  # b = 0: a point mass at 1, out of the product
    graded = posterior.graded_positions[at][cells]  # a mixture over the true count
    simple = (present.any(axis=2).sum(axis=1) == 1) & (proper.sum(axis=(1, 2)) <= 1) & ~graded
    # a point mass at 1 unless said otherwise below
    x_quantiles = np.zeros((cells.size, probs.size))
    x_cdfs = np.broadcast_to(x_points >= 0, (cells.size, x_points.size)).astype(float)
    mean, sd, error = np.ones(cells.size), np.zeros(cells.size), np.zeros(cells.size)
    engine = np.full(cells.size, "point", dtype=object)
    one = simple & proper.any(axis=(1, 2))  # one Beta(a, b) factor
    a, b = alpha[proper & one[:, None, None]], beta[proper & one[:, None, None]]
    if np.any(~(a > 0)):
        raise ValueError(f"invalid Beta factors a={a[~(a > 0)]}")
    x_quantiles[one] = x_ppf(a[:, None], b[:, None], probs)
    x_cdfs[one] = x_cdf(a[:, None], b[:, None], x_points)
    # Beta(a, b)'s moments as BetaProduct.moments computes them
    mean[one] = np.exp(-np.log1p(b / a))
    sd[one] = mean[one] * np.sqrt(np.expm1(np.log1p(b / (a * (a + b + 1)))))
    engine[one] = "beta"
    rest = np.flatnonzero(~simple)
    products = [
        posterior.product_at(at[0][cells[n]], at[1][cells[n]])
        if graded[n]
        else beta_product(alpha[n], beta[n])
        for n in rest
    ]
    solved = summarise_products(products, probs, x_points)
    for n, product, summary in zip(rest, products, solved, strict=True):
        x_quantiles[n], x_cdfs[n] = summary.x_quantiles, summary.x_cdf
        mean[n], sd[n] = product.moments()
        engine[n], error[n] = summary.engine, summary.error
    x_upper, x_median, x_lower = x_quantiles.T
    rows = table.index[cells]
    table.loc[rows, "mean"] = mean
    table.loc[rows, "sd"] = sd
    table.loc[rows, "median"] = np.exp(-x_median)
    table.loc[rows, "lower"] = np.exp(-x_lower)
    table.loc[rows, "upper"] = np.exp(-x_upper)
    table.loc[rows, "log10_upper"] = -x_upper / LN10
    if tau is not None:
        table.loc[rows, "prob_above"] = x_cdfs[:, 0]
    methods = pd.DataFrame({"engine": engine, "error": error})
    cells = methods.groupby(["engine", "error"], sort=False, dropna=False).ngroup().to_numpy()
    firsts = np.unique(cells, return_index=True)[1]  # the words once per distinct method
    how = [_quantile_engine(*key) for key in methods.iloc[firsts].itertuples(index=False)]
    table.loc[rows, "provenance"] += np.array(how, dtype=object)[cells]


def _quantile_engine(engine: str, error: float) -> str:
    """The provenance's words on how a cell's quantiles were computed."""
    how = {
        "point": "exact",
        "beta": "exact",
        "mixture": "exact, over the grader's error",
        "saddlepoint": f"error <= {error:.0e} in P and 1 - P, validated against mpmath",
        "grid": f"error ~ {error:.0e} in P and 1 - P, from refining the grid",
        "graded grid": f"error ~ {error:.0e} in P and 1 - P, from refining the grid; the "
        "grader's error integrated out by quadrature exact for its runs",
    }[engine]
    return f"; quantiles: {engine} ({how})"


def _mcmc_rows(posterior, table, at, estimated, level, tau) -> None:
    """An MCMC fit's columns, in place, from its draws (a block of cells at once, at most
    ``SUMMARY_VALUES`` draws, each cell from its own draws as a contiguous row), with each
    bound's context (``bound_context``)."""
    if not estimated.size:
        return
    i, j = at[0][estimated], at[1][estimated]
    p_task = posterior.draws["p_task"].values
    count = p_task.shape[0] * p_task.shape[1]
    names = ("mean", "median", "sd", "lower", "upper", "prob_above", "upper_mcse")
    columns = {name: np.empty(estimated.size) for name in names}
    block = max(1, SUMMARY_VALUES // count)
    for start in range(0, estimated.size, block):  # a copy of a block of pairs' draws at once
        at_block = slice(start, start + block)
        flat = np.ascontiguousarray(p_task[:, :, i[at_block], j[at_block]].reshape(count, -1).T)
        lower, upper = np.quantile(flat, [1.0 - level, level], axis=1)
        found = {
            "mean": flat.mean(axis=1),
            "median": np.median(flat, axis=1),
            "sd": flat.std(ddof=1, axis=1),
            "lower": lower,
            "upper": upper,
            "prob_above": np.nan if tau is None else (flat > tau).mean(axis=1),
            "upper_mcse": quantile_mcse(flat.reshape(len(flat), *p_task.shape[:2]), level),
        }
        for name, values in found.items():
            columns[name][at_block] = values
    upper = columns["upper"]
    columns["log10_upper"] = [math.log10(u) if u > 0 else -math.inf for u in upper]
    pairs = zip(
        table["agent"].to_numpy()[estimated], table["task"].to_numpy()[estimated], strict=True
    )
    failed = posterior.diagnostics.failed_for(pairs)
    ok = np.array([not text for text in failed], dtype=bool)
    columns["diagnostics_ok"] = ok
    note = f"; quantiles from {count} MCMC draws"
    rows = table.index[estimated]
    for name, values in columns.items():
        table.loc[rows, name] = values
    trials = np.maximum(posterior.values("cp_trials")[i, j], 0)
    successes = np.maximum(posterior.values("cp_successes")[i, j], 0)
    shared = model_of(posterior.spec).floor_shared
    floors = _floor_runs(shared, posterior.values("cp_trials"))
    floors = None if floors is None else floors[i, j]
    provenance = table.loc[rows, "provenance"].to_numpy()
    for n, row in enumerate(rows):
        values = {name: table.at[row, name] for name in ("upper", "mean")}
        floor = None if floors is None else floors[n]
        context = bound_context(values["upper"], successes[n], trials[n], floor, level)
        for name, value in context.items():
            table.at[row, name] = value
        values.update(context)
        text = note + ("" if ok[n] else f"; UNRELIABLE: diagnostics failed for {failed[n]}")
        provenance[n] = provenance[n] + text + _context_note(values, shared, floor)
    table.loc[rows, "provenance"] = provenance


def _graded_own(posterior, table, at, level) -> None:
    """The own runs' bounds of the pairs an audited grader scored, in place: those of
    their graded counts under the reference prior with the grader's error integrated out
    (``bayes_eval.exact.graded``; the runs the audit scored again by their truth, as
    ``own_audited`` holds them), as the exact model gives them; ``worth_runs`` empty
    (runs of their own would be graded too, and their worth is not a count of perfect
    ones)."""
    from bayes_eval.exact.graded import audited_rate

    grader = posterior.values("grader")[at]
    shapes = posterior.values("grader_shapes")[at]
    k, n = posterior.values("cp_successes")[at], posterior.values("cp_trials")[at]
    own = posterior.values("own_audited")[at]  # runs audited again: their truth, not grade
    # an end-to-end count's grader (a graded product's factors have Betas of their own)
    for row in np.flatnonzero((grader != "") & (n > 0) & ~np.isnan(shapes[..., 0])):
        rate = audited_rate(k[row], n[row], REFERENCE_PRIOR, shapes[row], own[row])
        table.loc[table.index[row], ["own_lower", "own_upper", "worth_runs"]] = (
            rate.quantile(1.0 - level),
            rate.quantile(level),
            math.nan,
        )


def own_upper(k: int, n: float, level: float) -> float:
    """The exact ``level`` bound of ``k`` successes in ``n`` runs under the reference prior
    (at ``1 - level``, the matching lower bound)."""
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
    """``own_lower``, ``own_upper``, ``worth_runs``, ``floor_upper`` and ``extrapolated`` of
    a pooled or crossed bound (the module docstring); the first three NaN for a pair
    without runs, the last two empty without ``floor_runs`` (a fit that reads
    milestones)."""
    floor = math.nan if floor_runs is None else own_upper(0, floor_runs, level)
    return {
        "own_lower": own_upper(k, n, 1.0 - level) if n > 0 else math.nan,
        "own_upper": own_upper(k, n, level) if n > 0 else math.nan,
        "worth_runs": worth_runs(upper, k, level) if n > 0 else math.nan,
        "floor_upper": floor,
        "extrapolated": pd.NA if floor_runs is None else bool(upper < floor),
    }


def _floor_runs(shared: tuple, trials: np.ndarray) -> np.ndarray | None:
    """Per (agent, task): the end-to-end runs that inform it, those sharing its agent
    (and, where ``shared`` names the task too, as in a crossed model, those sharing its
    task), from the fit's counts. None where ``shared`` is empty (a model that reads
    milestones: their runs inform its bounds too, and no count of end-to-end runs says
    what they could show): the registry entry's ``floor_shared``."""
    if not shared:
        return None
    runs = np.maximum(trials, 0)
    by_agent = runs.sum(axis=1, keepdims=True)
    if TASK not in shared:
        return np.broadcast_to(by_agent, runs.shape)
    return by_agent + runs.sum(axis=0, keepdims=True) - runs


def _context_note(row: dict, shared: tuple, floor_runs: int | None) -> str:
    """The provenance's words on a bound below its floor, or below its own mean."""
    note = ""
    if row["extrapolated"] is True:
        shared, rests = (
            ("agent or task", "additivity across agents and tasks")
            if TASK in shared
            else ("agent", "the agent's tasks being alike")
        )
        note += (
            f"; EXTRAPOLATED: the bound {format_number(row['upper'])} lies below "
            f"{format_number(row['floor_upper'])}, what 0 successes in all {floor_runs:,} "
            f"runs sharing its {shared} could show; it rests on the model's {rests}"
        )
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


def format_number(value) -> str:
    """A probability or count for people: 4 significant digits, ``-`` if absent."""
    if value is None or pd.isna(value):
        return "-"
    return f"{value:.4g}"
