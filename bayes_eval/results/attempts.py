"""Risk over k attempts, per (agent, task): pass@k, the chance of at least one success in
``k`` independent attempts, ``1 - (1 - P)^k``, and pass^k, the chance that all ``k``
succeed, ``P^k``, for each ``k`` asked.

One row per (agent, task, k), columns ``ATTEMPTS_COLUMNS``. Both are increasing in ``P``,
so their one-sided bounds are ``P``'s bounds mapped through: ``pass_at_upper`` is
``1 - (1 - upper)^k`` for the summary's ``upper`` at ``level``, and ``pass_all_lower`` is
``lower^k`` (the bound a claim of reliability rests on); ``pass_at_prob_above`` is
``P(pass@k > threshold) = P(P > 1 - (1 - threshold)^(1/k))``.

* An exact Beta posterior has closed-form means (``bayes_eval.exact.attempts``), and
  quantiles from its exact solver, worked on ``X = -log P`` so that ``P`` near 0 and
  near 1 keep their digits.
* A milestone product or an expert-completion mixture has exact quantiles the same way
  and an exact ``E[P^k]`` (a product of Beta moments, averaged over runs);
  ``E[1 - (1 - P)^k]`` has no closed form and is the mean over ``MC_DRAWS`` exact draws,
  with its Monte Carlo standard error in the provenance.
* A pooled or crossed fit maps each MCMC draw.
* A point value (expert best-of-N, golden solution) has no distribution, so no pass@k:
  its row stays empty and says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import special

from bayes_eval.errors import InputError
from bayes_eval.exact.attempts import (
    all_of,
    at_least_one,
    log_beta_ratio,
    mean_all_of,
    mean_at_least_one,
)
from bayes_eval.exact.products import BetaProduct, log_beta_draws, summarise_products
from bayes_eval.specs import check_level, check_probability

__all__ = ["ATTEMPTS_COLUMNS", "MAX_ATTEMPTS", "parse_attempts", "summarise_attempts"]

# The largest k asked for: the closed forms are checked against mpmath up to it.
MAX_ATTEMPTS = 10**9
# Exact draws behind the mean of pass@k of a milestone product or expert mixture.
MC_DRAWS = 2**16
# Stream of the random generator of those draws, apart from the fit's own streams.
MC_STREAM = 42

ATTEMPTS_COLUMNS = (
    "agent",
    "task",
    "method",
    "attempts",
    "level",
    "pass_at_mean",
    "pass_at_lower",
    "pass_at_upper",
    "pass_at_prob_above",
    "pass_all_mean",
    "pass_all_lower",
    "pass_all_upper",
    "observed",
    "diagnostics_ok",
    "provenance",
)

_WHOLE = re.compile(r"(\d+)(?:e(\d+))?")


def parse_attempts(values: Sequence[int] | str) -> tuple[int, ...]:
    """The distinct numbers of attempts in ``values`` (ints, or text such as
    ``"10,1000"`` or ``"1e6"``), sorted; each a whole number from 1 to ``MAX_ATTEMPTS``."""
    items = values.split(",") if isinstance(values, str) else list(values)
    ks = []
    for item in items:
        text = str(item).strip().lower()
        match = _WHOLE.fullmatch(text)
        if isinstance(item, bool) or match is None:
            raise InputError(
                f"attempts: {item!r} is not a whole number of attempts (digits, or 1e6)"
            )
        k = int(match[1]) * 10 ** int(match[2] or 0)
        if not 1 <= k <= MAX_ATTEMPTS:
            raise InputError(f"attempts: {item!r} is outside 1 to {MAX_ATTEMPTS:,}")
        ks.append(k)
    if not ks:
        raise InputError("attempts: give at least one number of attempts")
    return tuple(sorted(set(ks)))


def summarise_attempts(
    posterior,
    attempts: Sequence[int] | str,
    level: float | None = None,
    threshold: float | None = None,
) -> pd.DataFrame:
    """pass@k and pass^k of every (agent, task) of a ``Posterior``, for each ``k`` in
    ``attempts`` (the module docstring); ``level`` defaults to the fit's."""
    ks = parse_attempts(attempts)
    level = check_level(posterior.level if level is None else level, "level")
    tau = None if threshold is None else check_probability(threshold, "threshold")
    cells = posterior.cells()
    methods, reasons = posterior.values("method"), posterior.values("reason")
    observed = (
        posterior.values("observed")
        if "observed" in posterior.group("conjugate")
        else np.ones(methods.shape, dtype=bool)
    )
    if posterior.is_mcmc:
        columns = [_from_draws(posterior, i, j, ks, level, tau) for _, _, i, j in cells]
    else:
        columns = _exact(posterior, cells, ks, level, tau)
    cells_ok = (
        posterior.diagnostics.cells_ok([(agent, task) for agent, task, _, _ in cells])
        if posterior.is_mcmc
        else np.ones(len(cells), dtype=bool)
    )
    rows = []
    for (agent, task, i, j), cell, passed in zip(cells, columns, cells_ok, strict=True):
        ok = pd.NA if cell is None else bool(passed)
        for n, k in enumerate(ks):
            out = dict.fromkeys(ATTEMPTS_COLUMNS, np.nan)
            out.update(
                agent=agent,
                task=task,
                method=methods[i, j],
                attempts=k,
                level=level,
                observed=bool(observed[i, j]),
                diagnostics_ok=ok,
            )
            if cell is None:
                out["provenance"] = (
                    f"no estimate of P ({reasons[i, j]}), so no pass@k or pass^k"
                    if reasons[i, j]
                    else "a point value of P, no posterior: no pass@k or pass^k"
                )
            else:
                out.update({name: values[n] for name, values in cell.items()})
                if ok is False:
                    out["provenance"] += (
                        "; UNRELIABLE: diagnostics failed (bayes-eval check RUN_DIR)"
                    )
            rows.append(out)
    table = pd.DataFrame(rows, columns=list(ATTEMPTS_COLUMNS))
    table["diagnostics_ok"] = table["diagnostics_ok"].astype("boolean")
    return table


def _tau_rate(tau: float, k: int) -> float:
    """The rate ``p`` at which pass@k equals ``tau``: ``1 - (1 - tau)^(1/k)``."""
    return -math.expm1(math.log1p(-tau) / k)


def _from_draws(posterior, i, j, ks, level, tau) -> dict | None:
    """Columns of one MCMC cell: each draw of ``P`` mapped through."""
    flat = posterior.draws["p_task"].values[:, :, i, j].ravel()
    if np.isnan(flat).all():
        return None
    lower, upper = np.quantile(flat, [1.0 - level, level])
    ks_col = np.array(ks, dtype=float)[:, None]
    note = f"; pass@k and pass^k of each of {flat.size} MCMC draws of P"
    columns = _mapped(lower, upper, np.array(ks, dtype=float))
    columns["pass_at_mean"] = at_least_one(flat, ks_col).mean(axis=1)
    columns["pass_all_mean"] = all_of(flat, ks_col).mean(axis=1)
    columns["pass_at_prob_above"] = (
        np.full(len(ks), np.nan)
        if tau is None
        else np.array([np.mean(flat > _tau_rate(tau, k)) for k in ks])
    )
    columns["provenance"] = [_provenance(posterior, i, j) + note] * len(ks)
    return columns


def _provenance(posterior, i, j) -> str:
    return str(posterior.values("provenance")[i, j])


def _mapped(lower, upper, ks) -> dict:
    """The bounds of pass@k and pass^k from ``P``'s bounds (rates)."""
    return {
        "pass_at_lower": at_least_one(lower, ks),
        "pass_at_upper": at_least_one(upper, ks),
        "pass_all_lower": all_of(lower, ks),
        "pass_all_upper": all_of(upper, ks),
    }


def _exact(posterior, cells, ks, level, tau) -> list[dict | None]:
    """Columns of every exact cell: bounds from the exact quantiles of ``X = -log P``,
    means in closed form (and by exact draws for pass@k of a product or mixture)."""
    probs = np.array([1.0 - level, level])  # X's quantiles: P's upper, then its lower
    x_taus = np.array([] if tau is None else [-math.log(_tau_rate(tau, k)) for k in ks])
    products = [posterior.product_at(i, j) for _, _, i, j in cells]
    present = [n for n, product in enumerate(products) if product is not None]
    solved = summarise_products([products[n] for n in present], probs, x_taus)
    out: list[dict | None] = [None] * len(cells)
    kf = np.array(ks, dtype=float)
    for n, summary in zip(present, solved, strict=True):
        _, _, i, j = cells[n]
        x_upper, x_lower = summary.x_quantiles  # X's low quantile is P's upper bound
        columns = {
            "pass_at_lower": -np.expm1(kf * _log_fail(x_lower)),
            "pass_at_upper": -np.expm1(kf * _log_fail(x_upper)),
            "pass_all_lower": np.exp(-kf * x_lower),
            "pass_all_upper": np.exp(-kf * x_upper),
            # P(pass@k > tau) = P(P > p_tau) = P(X < -log p_tau)
            "pass_at_prob_above": np.full(len(ks), np.nan) if tau is None else summary.x_cdf,
        }
        means, how = _exact_means(products[n], kf, (posterior.seed, MC_STREAM, i, j))
        columns.update(means)
        columns["provenance"] = [_provenance(posterior, i, j) + how] * len(ks)
        out[n] = columns
    return out


def _log_fail(x):
    """``log(1 - P)`` at ``X = -log P``, precise for ``P`` near 0 and near 1."""
    with np.errstate(divide="ignore"):  # X = 0, P = 1: log 0 = -inf
        return np.log(-np.expm1(-x))


def _exact_means(product, kf, seed) -> tuple[dict, str]:
    """``E[pass@k]`` and ``E[pass^k]`` of an exact posterior, with how they were found."""
    if not isinstance(product, BetaProduct):  # a graded product (exact.graded_product)
        pass_all = np.array([product.power_mean(k) for k in kf])
        log_p = product.log_draws(MC_DRAWS, np.random.default_rng(seed))["log_p"]
        return _mean_pass_at(product, kf, pass_all, log_p)
    factors = product.factors
    if len(factors) == 1 and factors[0][0].size == 0:  # P = 1
        ones = np.ones(kf.shape)
        return {"pass_at_mean": ones, "pass_all_mean": ones}, "; P = 1 exactly: so are both"
    if len(factors) == 1 and factors[0][0].size == 1:
        a, b = factors[0][0][0], factors[0][1][0]
        means = {
            "pass_at_mean": mean_at_least_one(a, b, kf),
            "pass_all_mean": mean_all_of(a, b, kf),
        }
        return means, "; pass@k and pass^k exact (Beta closed forms)"
    if product.weights is not None and all(a.size == 1 for a, _ in factors):
        # a graded posterior, sum_t w_t Beta(a_t, b_t): E[(1 - P)^k] and E[P^k] summed
        a, b = (np.array([f[n][0] for f in factors])[:, None] for n in (0, 1))
        log_w = np.log(product.shares)[:, None]
        means = {
            "pass_at_mean": -np.expm1(special.logsumexp(log_w + log_beta_ratio(a, b, kf), axis=0)),
            "pass_all_mean": np.exp(special.logsumexp(log_w + log_beta_ratio(b, a, kf), axis=0)),
        }
        return means, "; pass@k and pass^k exact (Beta closed forms, over the grader's error)"
    # E[P^k] = mean over runs of prod_m B(a_m + k, b_m) / B(a_m, b_m)
    log_all = np.array([[log_beta_ratio(b, a, k).sum() for k in kf] for a, b in factors])
    pass_all = np.exp(log_all).mean(axis=0)
    log_p = _product_log_draws(factors, np.random.default_rng(seed))
    return _mean_pass_at(product, kf, pass_all, log_p)


def _mean_pass_at(product, kf, pass_all, log_p) -> tuple[dict, str]:
    """``E[pass@k]`` from exact draws of ``log P``, with ``P`` and ``P^k`` (their means
    ``product.moments()`` and ``pass_all``, exact) as control variates."""
    p = np.exp(log_p)
    mean_p = product.moments()[0]
    with np.errstate(divide="ignore"):  # P = 1: log(1 - P) = -inf
        log_fail = np.log(-np.expm1(log_p))
    pass_at, errors = np.empty(kf.shape), np.empty(kf.shape)
    for n, k in enumerate(kf):
        hits = -np.expm1(k * log_fail)  # pass@k of each draw
        # control variates with known means: P and P^k
        controls = np.column_stack([p - mean_p, np.exp(k * log_p) - pass_all[n]])
        centred = controls - controls.mean(axis=0)
        coef = np.linalg.lstsq(centred, hits - hits.mean(), rcond=None)[0]
        adjusted = hits - controls @ coef
        pass_at[n] = min(max(adjusted.mean(), 0.0), 1.0)
        errors[n] = adjusted.std(ddof=1) / math.sqrt(adjusted.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        worst = float(np.max(np.where(pass_at > 0, errors / pass_at, 0.0), initial=0.0))
    how = (
        f"; pass^k mean exact (Beta moments); pass@k mean from {log_p.size:,} exact draws "
        f"with P and P^k as control variates, Monte Carlo error <= {worst:.2g} relative "
        "(1 s.e.); bounds exact"
    )
    return {"pass_at_mean": pass_at, "pass_all_mean": pass_all}, how


def _product_log_draws(factors, rng) -> np.ndarray:
    """``MC_DRAWS`` exact draws of ``log P``, an equal share from each run's product."""
    per_run = -(-MC_DRAWS // len(factors))
    draws = [
        log_beta_draws(a, b, (per_run,), rng).sum(axis=1) if a.size else np.zeros(per_run)
        for a, b in factors
    ]
    return np.concatenate(draws)
