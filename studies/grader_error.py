"""Do the bounds hold when the grader errs? The exact end-to-end bound with the grader's
audit, the bound that takes the grader as perfect, Lee et al.'s corrected interval and,
where the audit is a random sample of the cell's runs, PPI++.

    python studies/grader_error.py [--cells 2000] [--positives 50] [--negatives 500]
        [--level 0.975] [--seed 0] [--csv FILE] [--specificity-prior 1,1]

Per setting (a band of true rates and a grader), ``--cells`` cells: each cell's true
rate is log-uniform in the band (not the uniform prior's family), its runs (300 in the
common bands, 10,000 in the rare ones) are graded by a grader of known sensitivity and
specificity, and its audit sends
``--positives`` true successes and ``--negatives`` true failures through the same
grader. Three one-sided bounds at ``--level`` per cell:

* ``audited``: ``bayes_eval.exact.graded.graded_rate``, the uniform prior's posterior
  with the grader's sensitivity and specificity (their priors, uniform unless
  ``--specificity-prior`` says otherwise, updated by the audit) integrated out;
* ``perfect``: the Beta bound of the graded count, as if the grader made no error;
* ``lee``: the upper end of Lee et al. (2025)'s two-sided interval at ``2 level - 1``,
  the Rogan-Gladen correction ``(p + sp - 1) / (se + sp - 1)`` with its plug-in
  variance from the test runs and the audit (smoothed as their paper and code do),
  clipped to [0, 1].

Two more settings (``RANDOM_AUDITS``) audit a random sample of each cell's own runs
instead, as prediction-powered inference assumes (its labelled runs drawn from the same
runs as its unlabelled ones); there the exact bound reads those runs' truth in place of
their grade and their confusion as the audit (what a ``run_id`` audit gives), Lee et al.'s
reads their confusion as its calibration, and ``ppi`` is the upper end of the PPI++
interval (``ppi_upper``; the same as ``ppi_py.ppi_mean_ci``).

Printed per setting and bound: the share of cells whose true rate lies above the bound
(at most ``1 - level`` for a bound that holds), among all cells and among those graded
without a success, and the median bound.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd
from scipy import stats

from bayes_eval.exact.graded import graded_rate

# The bounds compared, in the order printed (``ppi`` only where the audit is random).
BOUNDS = ("audited", "perfect", "lee", "ppi")
# The sensitivity's and the specificity's Beta priors before the audit (the default).
UNIFORM = ((1.0, 1.0), (1.0, 1.0))
# (name, log10 of the band of true rates, sensitivity, specificity, runs per cell: the
# rare bands get the runs a decision at 1e-3 needs)
SETTINGS = (
    ("common, misses a quarter", (-2.5, -0.5), 0.75, 0.999, 300),
    ("common, poor judge", (-2.0, -0.3), 0.6, 0.98, 300),
    ("rare, false alarms 1e-3", (-4.0, -2.0), 0.85, 0.999, 10_000),
    ("rare, false alarms 1e-4", (-4.0, -2.0), 0.85, 0.9999, 10_000),
)
# (name, band, sensitivity, specificity, runs per cell, of them audited at random)
RANDOM_AUDITS = (
    ("random audit, common", (-2.0, -0.5), 0.75, 0.99, 1000, 100),
    ("random audit, rare", (-3.5, -2.0), 0.85, 0.999, 10_000, 500),
)


def lee_interval(graded, runs, detected, positives, cleared, negatives, level):
    """Lee et al.'s (1 - alpha) interval, alpha = 2 (1 - level): the bias-corrected
    estimate, shifted and widened by its plug-in standard error from the test runs and
    the audit, each proportion smoothed (Agresti-Coull for the runs, add-one for the
    audit), clipped to [0, 1]; counts as numbers or as arrays of them."""
    z = stats.norm.ppf(level)
    p = (graded + z**2 / 2) / (runs + z**2)
    q0 = (cleared + 1) / (negatives + 2)  # specificity
    q1 = (detected + 1) / (positives + 2)  # sensitivity
    n, m0, m1 = runs + z**2, negatives + 2, positives + 2
    theta = (p + q0 - 1) / (q0 + q1 - 1)
    shift = 2 * z**2 * (-(1 - theta) * q0 * (1 - q0) / m0 + theta * q1 * (1 - q1) / m1)
    variance = p * (1 - p) / n + (1 - theta) ** 2 * q0 * (1 - q0) / m0
    variance += theta**2 * q1 * (1 - q1) / m1
    half = z * np.sqrt(variance) / (q0 + q1 - 1)
    return np.clip(theta + shift - half, 0.0, 1.0), np.clip(theta + shift + half, 0.0, 1.0)


def ppi_upper(labels, labelled, agreed, graded_labelled, graded, unlabelled, level):
    """The upper end of the PPI++ interval for a mean (Angelopoulos, Duchi and Zrnic 2023,
    as ``ppi_py.ppi_mean_ci`` makes it, from binary labels as counts): ``labelled`` runs
    with ``labels`` true successes, ``graded_labelled`` of them graded successes,
    ``agreed`` both; ``unlabelled`` runs with ``graded`` graded successes. The power
    tuning ``lambda = cov(Y, Yhat) / ((1 + n / N) var(Yhat))``, clipped to [0, 1] (0 where
    every verdict agrees: the classical interval); the estimate ``lambda mean(Yhat_u) +
    mean(Y - lambda Yhat)`` with its plug-in standard error, clipped to [0, 1]."""
    n, big_n = labelled, unlabelled
    total = graded_labelled + graded
    spread = total * (1 - total / (n + big_n)) / (n + big_n - 1)  # var(Yhat), ddof 1
    covariance = agreed / n - labels * graded_labelled / n**2
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(spread > 0, covariance / ((1 + n / big_n) * spread), 0.0)
    lam = np.clip(lam, 0.0, 1.0)
    mean_u = graded / big_n
    rectified = (labels - lam * graded_labelled) / n
    square = (agreed * (1 - lam) ** 2 + (labels - agreed) + lam**2 * (graded_labelled - agreed)) / n
    variance = lam**2 * mean_u * (1 - mean_u) / big_n + (square - rectified**2) / n
    estimate = lam * mean_u + rectified
    return np.clip(estimate + stats.norm.ppf(level) * np.sqrt(variance), 0.0, 1.0)


def random_audit_rows(name, band, grader, cells, runs, level, rng) -> pd.DataFrame:
    """One setting whose audit is a random ``audited`` of each cell's own ``runs``, scored
    again by the truth (``grader``: sensitivity, specificity, audited): what PPI assumes.
    Four bounds: ``audited``, the exact model with those runs' truth in place of their
    grade and their confusion as the audit (as a ``run_id`` audit gives it; uniform
    priors); ``perfect``, the graded count of every run; ``lee``, Lee et al.'s with the
    audited runs as its calibration; ``ppi``, PPI++ (``ppi_upper``)."""
    se, sp, audited = grader
    truth = 10 ** rng.uniform(*band, cells)
    true_in = rng.binomial(audited, truth)  # the audited runs' true successes
    true_out = rng.binomial(runs - audited, truth)
    detected, alarms = rng.binomial(true_in, se), rng.binomial(audited - true_in, 1 - sp)
    graded_out = rng.binomial(true_out, se) + rng.binomial(runs - audited - true_out, 1 - sp)
    graded = graded_out + detected + alarms
    cleared = audited - true_in - alarms
    ours = [
        graded_rate(
            k, runs - audited, (1 + t, 1 + audited - t), (1 + d, 1 + t - d), (1 + c, 1 + f - c)
        ).quantile(level)
        for k, t, d, c, f in zip(
            graded_out, true_in, detected, cleared, audited - true_in, strict=True
        )
    ]
    lee = lee_interval(graded, runs, detected, true_in, cleared, audited - true_in, level)[1]
    ppi = ppi_upper(
        true_in, audited, detected, detected + alarms, graded_out, runs - audited, level
    )
    return cells_of(name, truth, graded, runs, level, audited=ours, lee=lee, ppi=ppi).assign(
        audited_true=true_in
    )


def cells_of(name, truth, graded, runs, level, **bounds) -> pd.DataFrame:
    """A setting's cells: the truth, the graded count of ``runs``, the bound that takes the
    grader as perfect (the uniform prior's Beta of the graded count) and ``bounds``."""
    perfect = stats.beta.ppf(level, 1 + graded, 1 + runs - graded)
    return pd.DataFrame(dict(setting=name, truth=truth, graded=graded, perfect=perfect, **bounds))


def setting_rows(name, band, grader, cells, runs, level, rng, priors=UNIFORM) -> pd.DataFrame:
    """One setting's cells: the truth, the graded count and the three bounds; ``grader``
    is its sensitivity, specificity and the true successes and failures audited;
    ``priors`` the Betas of the sensitivity and the specificity before the audit."""
    se, sp, positives, negatives = grader
    (s1, s2), (c1, c2) = priors
    truth = 10 ** rng.uniform(*band, cells)
    true_successes = rng.binomial(runs, truth)
    graded = rng.binomial(true_successes, se) + rng.binomial(runs - true_successes, 1 - sp)
    detected = rng.binomial(positives, se, cells)
    cleared = rng.binomial(negatives, sp, cells)
    audited = [
        graded_rate(
            k, runs, (1, 1), (s1 + d, s2 + positives - d), (c1 + c, c2 + negatives - c)
        ).quantile(level)
        for k, d, c in zip(graded, detected, cleared, strict=True)
    ]
    lee = lee_interval(graded, runs, detected, positives, cleared, negatives, level)[1]
    return cells_of(name, truth, graded, runs, level, audited=audited, lee=lee)


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Per setting and bound: misses among all cells, among cells graded without a
    success, and among cells whose random audit found no true success (``audit_zero``;
    NaN where the audit is not the cell's own runs), and the median bound."""
    out = []
    for name, rows in table.groupby("setting", sort=False):
        none = rows[rows["graded"] == 0]
        unseen = rows[rows["audited_true"] == 0]
        for bound in [b for b in BOUNDS if rows[b].notna().any()]:
            out.append(
                dict(
                    setting=name,
                    bound=bound,
                    cells=len(rows),
                    missed=(rows["truth"] > rows[bound]).mean(),
                    graded_zero=len(none),
                    missed_zero=(none["truth"] > none[bound]).mean() if len(none) else math.nan,
                    audit_zero=len(unseen),
                    missed_audit_zero=(unseen["truth"] > unseen[bound]).mean()
                    if len(unseen)
                    else math.nan,
                    median_bound=rows[bound].median(),
                )
            )
    return pd.DataFrame(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--positives", type=int, default=50)
    parser.add_argument("--negatives", type=int, default=500)
    parser.add_argument("--level", type=float, default=0.975)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="write every cell's bounds here")
    parser.add_argument(
        "--specificity-prior", default="1,1", help="A,B of the specificity's Beta prior"
    )
    args = parser.parse_args(argv)
    priors = (UNIFORM[0], tuple(float(x) for x in args.specificity_prior.split(",")))
    rng = np.random.default_rng(args.seed)
    tables = [
        setting_rows(
            name,
            band,
            (se, sp, args.positives, args.negatives),
            args.cells,
            runs,
            args.level,
            rng,
            priors,
        )
        for name, band, se, sp, runs in SETTINGS
    ]
    tables += [
        random_audit_rows(name, band, (se, sp, audited), args.cells, runs, args.level, rng)
        for name, band, se, sp, runs, audited in RANDOM_AUDITS
    ]
    table = pd.concat(tables, ignore_index=True)
    table["audited_true"] = table["audited_true"].astype("Int64")  # <NA>: a separate audit
    if args.csv:
        table.to_csv(args.csv, index=False)
    print(summarise(table).to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
