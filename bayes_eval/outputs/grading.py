"""The report's section on the grader: how much of each bound is the grader's error.

Where an audited grader scored a pair's runs (``bayes_eval.exact.graded``), its bound (in
an MCMC fit, its own runs' bound) is set beside the bound the same runs would give were
the grader perfect, and beside the grader's floor (``false_alarm_floor``): the bound no
number of runs takes below while their graded successes could all be false alarms.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from bayes_eval.constants import END_TO_END, EXPERT_COMPLETION, MILESTONE_METHOD
from bayes_eval.registry import model_of
from bayes_eval.results.summary import REFERENCE_PRIOR, format_number

__all__ = ["grader_sections", "grader_table"]

GRADER_TEXT = (
    "The grader that scored these runs errs: it misses some true successes (its "
    "sensitivity) and calls some failures successes (one minus its specificity), both "
    "measured on its audit and integrated out of every bound. Beside each bound: the bound "
    "the same runs would give were the grader perfect, and the grader's floor, the bound "
    "that runs whose graded successes all fit its false-alarm rate keep however many there "
    "are; below the floor only a larger audit, not more runs, lowers a bound."
)


def grader_table(posterior, table: pd.DataFrame, level: float) -> pd.DataFrame:
    """Per pair an audited grader scored: its grader and graded counts, its upper bound,
    the bound with the grader taken as perfect, their difference, and the grader's floor
    (of an end-to-end count), the pairs whose bounds the grader moves most first (empty
    where no grader errs). In an MCMC fit (pooled, crossed) the bounds compared are a
    pair's own runs' (uniform prior, ``own_upper``; a product's uniform per factor,
    ``_exact_products``), the model's bound beside them. An exact fit's graded product
    (milestones, expert steps) is set beside the same fit without the audit."""
    from bayes_eval.exact.graded import false_alarm_floor

    if "grader" not in table:
        return pd.DataFrame()
    pooled = posterior.is_mcmc
    products = table["method"].isin((MILESTONE_METHOD, EXPERT_COMPLETION))
    counts = table["method"].isin((END_TO_END, "joint"))  # joint: of its end-to-end runs
    graded = (table["grader"].fillna("") != "") & (products | counts)
    if not graded.any():
        return pd.DataFrame()
    products = graded & products
    perfect_products, own_products = {}, {}
    if products.any():
        perfect_products = _exact_products(posterior, level, audited=False)
        own_products = _exact_products(posterior, level, audited=True) if pooled else {}
    own = posterior.spec.priors.get("end_to_end")  # an exact fit's prior
    # an end-to-end count's prior (a product model has none, and no end-to-end count)
    prior = REFERENCE_PRIOR if pooled or own is None else (own.alpha, own.beta)
    label = f"{'own runs: ' if pooled else ''}upper ({level:g})"
    agent_at = {a: i for i, a in enumerate(posterior.coords["agent"])}
    task_at = {t: j for j, t in enumerate(posterior.coords["task"])}
    floors: dict[tuple, float] = {}
    rows = []
    for row in table[graded.to_numpy()].itertuples():
        i, j = agent_at[row.agent], task_at[row.task]
        if row.method in (MILESTONE_METHOD, EXPERT_COMPLETION):  # no one count, no floor
            perfect = perfect_products[(row.agent, row.task)]
            bound = own_products[(row.agent, row.task)] if pooled else row.upper
            model = {f"{posterior.spec.name} upper": row.upper} if pooled else {}
            rows.append(
                {
                    "agent": row.agent,
                    "task": row.task,
                    "grader": row.grader,
                    "graded": _product_counts(posterior, i, j),
                    **model,
                    label: bound,
                    "grader taken as perfect": perfect,
                    "the grader's share": bound - perfect,
                    "grader's floor": math.nan,
                }
            )
            continue
        k = int(posterior.values("cp_successes")[i, j])
        n = int(posterior.values("cp_trials")[i, j])
        shapes = tuple(posterior.values("grader_shapes")[i, j].tolist())
        if shapes not in floors:
            floors[shapes] = false_alarm_floor(prior, shapes[:2], shapes[2:], level)
        bound = row.own_upper if pooled else row.upper
        perfect = stats.beta.ppf(level, prior[0] + k, prior[1] + n - k)
        model = {f"{posterior.spec.name} upper": row.upper} if pooled else {}
        rows.append(
            {
                "agent": row.agent,
                "task": row.task,
                "grader": row.grader,
                "graded": f"{k}/{n}",
                **model,
                label: bound,
                "grader taken as perfect": perfect,
                "the grader's share": bound - perfect,
                "grader's floor": floors[shapes],
            }
        )
    out = pd.DataFrame(rows)
    moved = out["the grader's share"].abs().sort_values(ascending=False, kind="stable")
    out = out.loc[moved.index].reset_index(drop=True)
    numbers = out.columns[4:]
    out[numbers] = out[numbers].map(format_number)
    return out


# Pairs the report's section shows at most: those the grader moves most.
GRADER_ROWS_SHOWN = 30


# The exact models of a product's own runs in an MCMC fit's grader section, and the
# uniform prior they take per factor (ecr2024's published Beta(1/50, 1/50) replaced).
OWN_PRODUCT_MODELS = {MILESTONE_METHOD: "mats2024", EXPERT_COMPLETION: "ecr2024"}
OWN_PRODUCT_PRIOR = {MILESTONE_METHOD: "milestone", EXPERT_COMPLETION: "step"}


def _exact_products(posterior, level: float, audited: bool) -> dict:
    """``{(agent, task): upper}``: each pair's bound in an exact fit of the same evidence,
    with its audit where ``audited``, else the grader taken as perfect: an exact fit's own
    model, or for an MCMC fit the pairs' own runs under the exact product of their kind,
    a uniform prior per factor."""
    from dataclasses import replace

    from bayes_eval.fit import fit
    from bayes_eval.messages import collected
    from bayes_eval.specs import Prior, load_spec

    spec = posterior.spec
    if posterior.is_mcmc:
        (method,) = model_of(spec).graded  # a product model's: milestones or expert steps
        spec = load_spec(OWN_PRODUCT_MODELS[method])
        role = OWN_PRODUCT_PRIOR[method]
        uniform = Prior("Beta", {"alpha": 1.0, "beta": 1.0}, "own runs: uniform")
        spec = replace(spec, priors={**spec.priors, role: uniform})
    evidence = posterior.evidence if audited else replace(posterior.evidence, audit=None)
    with collected():  # the fit's own notes were said when it was made
        plain = fit(evidence, spec, level=level, seed=posterior.seed)
    summary = plain.summary(level=level)
    pairs = zip(summary["agent"], summary["task"], strict=True)
    return dict(zip(pairs, summary["upper"], strict=True))


def _product_counts(posterior, i: int, j: int) -> str:
    """A graded product's counts, ``k/n`` per factor (runs separated by ``;``)."""
    fields = posterior.values("graded_factors")[i, j]  # (run, factor, field)
    runs = []
    for run in fields:
        present = run[~np.isnan(run[:, 0])]
        if present.size:
            runs.append(", ".join(f"{int(k)}/{int(n)}" for k, n in present[:, :2]))
    return "; ".join(runs)


def grader_sections(posterior, table: pd.DataFrame, level: float) -> list:
    """The report's section (``(kind, payload)`` pairs), empty where no grader errs; of
    many graded pairs, the ``GRADER_ROWS_SHOWN`` whose bounds the grader moves most."""
    graded = grader_table(posterior, table, level)
    if not len(graded):
        return []
    text = GRADER_TEXT
    if (graded["grader's floor"] == "-").any():
        text += (
            " A graded product (milestones, expert steps: its counts a factor at a time) is "
            "set beside the same exact product without the audit; its floor is its "
            "factors' and is not shown."
        )
    if posterior.is_mcmc:
        text += (
            " In this fit each bound also pools the pair's runs with the rest of the table; "
            "the bounds set side by side are the pair's own runs' (uniform prior; a "
            "product's uniform per factor), those that carry a verdict resting on its own "
            "runs, the model's bound before them."
        )
    if len(graded) > GRADER_ROWS_SHOWN:
        text += (
            f" Here the {GRADER_ROWS_SHOWN} of {len(graded)} graded pairs whose bounds the "
            "grader moves most; each pair's provenance names its grader and its audit."
        )
        graded = graded.head(GRADER_ROWS_SHOWN)
    return [("h2", "How much of each bound is the grader"), ("p", text), ("table", graded)]
