"""Calibration of posteriors and upper bounds against end-to-end ground truth.

For every (agent, task) cell with ground truth, ``k`` successes in ``n`` end-to-end runs:

* **Exceedance**, the published check (Højmark et al. 2024): does the ground truth's
  rate ``k / n`` lie above the one-sided upper bound? Ground truth is itself a finite
  sample, so this happens by chance even when the bound is right, far more often than
  ``1 - level`` when ``n`` is small (``k = n`` exceeds every bound below 1). The
  yardstick is the number expected if the model is calibrated: the sum over cells of
  ``P(K > n upper)`` under the posterior predictive.
* **Predictive calibration**, which accounts for that noise: the posterior predictive
  distribution of the ground-truth count, ``K ~ Binomial(n, P)`` with ``P`` from the
  posterior. Its probability of ``k`` gives the log score; the randomised PIT value
  ``u = F(k - 1) + V f(k)``, ``V ~ Uniform(0, 1)``, is uniform on (0, 1) when the model
  is calibrated (Czado, Gneiting and Held 2009); a central predictive interval at level
  ``c`` covers the truth when ``|u - 1/2| <= c / 2``.

``f`` is the Beta-Binomial pmf where the posterior is a single Beta (end-to-end models)
and otherwise the binomial pmf averaged over the posterior draws.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_eval.constants import AGENT, CALIBRATION_MAX_TRIALS, END_TO_END, TASK
from bayes_eval.errors import InputError
from bayes_eval.files import read_text

if TYPE_CHECKING:
    from bayes_eval.evidence.table import Evidence, TableSource
    from bayes_eval.results.posterior import Posterior

__all__ = ["Calibration", "calibrate", "published_calibration", "proportion"]

# The most predictive pmf values calibration holds at once (draws x counts).
CALIBRATION_CHUNK = 10_000_000

# Calibration: central predictive interval levels whose coverage is reported, bins of
# the PIT histogram, and the two-sided level of the interval around every observed rate.
CALIBRATION_LEVELS = (0.5, 0.8, 0.9, 0.95)
PIT_BINS = 10
INTERVAL_LEVEL = 0.95

PUBLISHED_COLUMNS = (
    "task",
    "milestone_mean",
    "milestone_q975",
    "expert_best_of_n",
    "expert_completion_ratio",
    "end_to_end",
    "end_grading_only",
)
PUBLISHED_METHODS = ("milestone_mean", "expert_best_of_n", "expert_completion_ratio")
PUBLISHED_TRUTHS = ("end_to_end", "end_grading_only")


@dataclass(frozen=True)
class Calibration:
    """Calibration of one posterior against ground truth.

    Attributes
    ----------
    cells : pandas.DataFrame
        One row per ground-truth cell: ``agent``, ``task``, ``truth_successes``,
        ``truth_trials``, ``truth_rate``, ``upper``, ``exceeded``, ``exceed_chance``
        (the probability of exceeding under the posterior predictive), ``pit``,
        ``log_score`` and ``covered_<level>`` per level; ``note`` says why a cell has
        no values (no posterior to calibrate).
    level : float
        Level of the one-sided upper bound.
    model : str
        Name of the spec that produced the posterior.
    """

    cells: pd.DataFrame
    level: float
    model: str

    @property
    def calibrated(self) -> pd.DataFrame:
        """The cells that have a posterior."""
        return self.cells[self.cells["pit"].notna()]

    def exceedance(self) -> dict:
        """Cells whose ground-truth rate lies above the upper bound, with a 95% interval."""
        cells = self.calibrated
        exceeded = int(cells["exceeded"].sum())
        return {
            "exceeded": exceeded,
            "cells": len(cells),
            "nominal": 1 - self.level,
            "expected_if_calibrated": float(cells["exceed_chance"].sum()),
            **proportion(exceeded, len(cells)),
        }

    def coverage(self) -> pd.DataFrame:
        """Nominal against observed coverage of the central predictive intervals."""
        cells = self.calibrated
        rows = []
        for level in CALIBRATION_LEVELS:
            covered = int(cells[f"covered_{level:g}"].sum())
            rows.append(dict(nominal=level, covered=covered, cells=len(cells)))
            rows[-1].update(proportion(covered, len(cells)))
        return pd.DataFrame(rows)

    def pit_p_value(self) -> float:
        """Kolmogorov-Smirnov p-value of the PIT values against Uniform(0, 1)."""
        pit = self.calibrated["pit"].to_numpy()
        return float(stats.kstest(pit, "uniform").pvalue) if pit.size else float("nan")

    def pit_histogram(self) -> np.ndarray:
        """Counts of the PIT values in ``PIT_BINS`` equal bins of (0, 1)."""
        edges = np.linspace(0, 1, PIT_BINS + 1)
        return np.histogram(self.calibrated["pit"], bins=edges)[0]

    def to_dict(self) -> dict:
        """Everything overall, for ``--format json``."""
        cells = self.calibrated
        return {
            "model": self.model,
            "level": self.level,
            "cells": len(self.cells),
            "calibrated_cells": len(cells),
            "exceedance": self.exceedance(),
            "coverage": self.coverage().to_dict("records"),
            "pit_ks_p_value": self.pit_p_value(),
            "pit_histogram": self.pit_histogram().tolist(),
            "mean_log_score": float(cells["log_score"].mean()) if len(cells) else None,
        }


def proportion(successes: int, trials: int) -> dict:
    """``rate`` and its two-sided Clopper-Pearson interval at ``INTERVAL_LEVEL``."""
    if trials == 0:
        return {"rate": None, "rate_lower": None, "rate_upper": None}
    interval = stats.binomtest(successes, trials).proportion_ci(INTERVAL_LEVEL, "exact")
    return {
        "rate": successes / trials,
        "rate_lower": float(interval.low),
        "rate_upper": float(interval.high),
    }


def calibrate(
    posterior: Posterior,
    truth: TableSource | Evidence,
    *,
    level: float | None = None,
    seed: int = 0,
) -> Calibration:
    """Calibrate ``posterior`` against end-to-end ground truth.

    Parameters
    ----------
    posterior : Posterior
    truth : path, DataFrame or Evidence
        End-to-end rows (the evidence format) for cells the posterior estimates.
    level : float, optional
        Level of the one-sided upper bound (default: the posterior's).
    seed : int
        Seed of the PIT randomisation.

    Raises
    ------
    InputError
        For a ground-truth row that is not end-to-end or names a cell the posterior does
        not estimate.
    """
    from bayes_eval.evidence.table import load_evidence

    truth = load_evidence(truth)
    level = posterior.level if level is None else level
    cells = {(a, t): (i, j) for a, t, i, j in posterior.cells()}
    table = truth.table
    for row in table.itertuples():
        where = f"{truth.source}: row {row.row}"
        if row.method != END_TO_END:
            raise InputError(
                f"{where}, column method: '{row.method}' is not end_to_end; ground truth is "
                "end-to-end runs"
            )
        if row.trials > CALIBRATION_MAX_TRIALS:
            raise InputError(
                f"{where}, column trials: {row.trials} ground-truth trials; calibration sums "
                f"the predictive over every count and takes at most {CALIBRATION_MAX_TRIALS:,}"
                " per row"
            )
        if (row.agent, row.task) not in cells:
            raise InputError(
                f"{where}, column task: task '{row.task}' (agent '{row.agent}') has no "
                f"estimate in the posterior ({posterior.spec.name})"
            )
    summary = posterior.summary(level=level).set_index([AGENT, TASK])
    k = table["successes"].to_numpy()
    n = table["trials"].to_numpy()
    pairs = list(zip(table["agent"], table["task"], strict=True))
    positions = [cells[pair] for pair in pairs]
    pmfs = _predictive(posterior, positions, n)
    upper = np.array([summary.loc[pair, "upper"] for pair in pairs])
    below, at, chance = (np.full(k.size, np.nan) for _ in range(3))
    for r, pmf in enumerate(pmfs):
        if pmf is not None:
            below[r], at[r] = pmf[: k[r]].sum(), pmf[k[r]]
            chance[r] = pmf[np.arange(n[r] + 1) > n[r] * upper[r]].sum()
    rng = np.random.default_rng(seed)
    pit = below + rng.uniform(size=k.size) * at
    frame = pd.DataFrame(
        {
            "agent": table["agent"].to_numpy(),
            "task": table["task"].to_numpy(),
            "truth_successes": k,
            "truth_trials": n,
            "truth_rate": k / n,
            "upper": upper,
            "exceeded": np.where(np.isnan(pit), pd.NA, k / n > upper),
            "exceed_chance": chance,
            "pit": pit,
            "log_score": np.log(at),
        }
    )
    for c in CALIBRATION_LEVELS:
        frame[f"covered_{c:g}"] = np.where(np.isnan(pit), pd.NA, np.abs(pit - 0.5) <= c / 2)
    reasons = [summary.loc[pair, "provenance"] for pair in pairs]
    frame["note"] = np.where(
        np.isnan(pit), [f"no posterior to calibrate: {r}" for r in reasons], ""
    )
    return Calibration(frame, level, posterior.spec.name)


def _predictive(posterior, positions, n):
    """The posterior predictive pmf of the ground-truth count, ``K = 0..n``, per truth
    row (None where the cell has no posterior: a point value or no estimate)."""
    pmfs = []
    draws = None
    for r, (i, j) in enumerate(positions):
        product = posterior.product_at(i, j)
        if product is not None and _single_factor(product):
            a, b = (float(x[0]) for x in product.factors[0])
            pmfs.append(stats.betabinom.pmf(np.arange(n[r] + 1), n[r], a, b))
            continue
        if product is None and not posterior.is_mcmc:
            pmfs.append(None)
            continue
        if draws is None:
            draws = posterior.draws["p_task"].values
        p = np.clip(draws[:, :, i, j].ravel(), 0.0, 1.0)
        chunks = np.array_split(p, max(1, p.size * (n[r] + 1) // CALIBRATION_CHUNK))
        pmfs.append(sum(_binomial_pmf(n[r], chunk).sum(axis=0) for chunk in chunks) / p.size)
    return pmfs


def _binomial_pmf(n: int, p: np.ndarray) -> np.ndarray:
    """``P(K = k | p)`` for ``k = 0..n``, per draw ``p``: shape ``(draws, n + 1)``.

    In log space with ``0 log 0 = 0``: scipy's binomial pmf overflows for draws that
    underflow towards 0, which MCMC fits of zero-success cells produce.
    """
    k = np.arange(n + 1)
    log_choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    p = p[:, None]
    return np.exp(log_choose + special.xlogy(k, p) + special.xlog1py(n - k, -p))


def _single_factor(product) -> bool:
    factors = getattr(product, "factors", ())  # a graded product (exact.graded_product): none
    return len(factors) == 1 and len(factors[0][0]) == 1


def published_calibration(path) -> dict:
    """Calibration findings of Højmark et al. (2024)'s appendix table.

    Returns, for each ground truth (``end_to_end``, ``end_grading_only``), how many tasks'
    rate lies above the milestone method's 97.5% quantile (``exceeded``, of ``tasks``,
    and which), and per method the Spearman rank correlation with each ground truth and
    the Pearson correlation of log10 values (rows with a zero estimate left out, counted
    in ``n``).
    """
    frame = _published_table(path)
    result = {}
    for truth in PUBLISHED_TRUTHS:
        above = frame[truth] > frame["milestone_q975"]
        result[truth] = {
            "exceeded": int(above.sum()),
            "tasks": len(frame),
            "exceeded_tasks": frame.loc[above, "task"].tolist(),
        }
    correlations = {}
    for method in PUBLISHED_METHODS:
        correlations[method] = {}
        for truth in PUBLISHED_TRUTHS:
            x, y = frame[method].to_numpy(), frame[truth].to_numpy()
            positive = (x > 0) & (y > 0)
            correlations[method][truth] = {
                "spearman": float(stats.spearmanr(x, y).statistic),
                "pearson_log10": float(
                    stats.pearsonr(np.log10(x[positive]), np.log10(y[positive])).statistic
                ),
                "n_log10": int(positive.sum()),
            }
    result["correlations"] = correlations
    return result


def _published_table(path) -> pd.DataFrame:
    text = read_text(Path(path), str(path))
    try:
        frame = pd.read_csv(io.StringIO(text))
    except ValueError as exc:  # pandas' parser and empty-data errors
        raise InputError(f"{path}: cannot read the table ({exc})") from None
    missing = [c for c in PUBLISHED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"{path}: missing column {missing[0]} (needs {', '.join(PUBLISHED_COLUMNS)})"
        )
    for column in PUBLISHED_COLUMNS[1:]:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = np.flatnonzero(~values.between(0, 1))
        if bad.size:
            raise InputError(
                f"{path}: row {bad[0] + 2}, column {column}: '{frame[column].iloc[bad[0]]}' "
                "is not a probability in [0, 1]"
            )
        frame[column] = values
    return frame
