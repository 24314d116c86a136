"""The milestone-assumption check: do a task's end-to-end runs fit its milestones?

The milestone method assumes the agent succeeds only by passing every milestone in
order. For a task with milestone and end-to-end data, this check fits the milestones
alone (an exact milestone model) and asks how probable at least the observed end-to-end
successes are when ``P`` is the product of the milestone rates: a tiny value says the
agent succeeds by paths the milestones do not describe, and milestone-based bounds
underestimate it. It refits, so it sits above ``bayes_eval.fit``.

A model that itself describes success by other paths (``joint``, through its bypass
probability; ``crossed_joint``, which links the end-to-end rate to the milestones without
multiplying them) already answers the check: under it, each row is evidence about the paths
(how many end-to-end successes the milestones alone predict, and the bypass the fit
found), never a warning, and marks nothing doubtful. What marks such an estimate doubtful
is the fit's own posterior predictive check of the end-to-end counts
(``report.verdicts``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from bayes_eval.constants import AGENT, END_TO_END, MILESTONE_METHOD, TASK
from bayes_eval.exact.products import log_beta_draws
from bayes_eval.exact.thinning import THINNING_MAX_STATES, product_binomial_sf
from bayes_eval.fit import fit
from bayes_eval.registry import model_of

__all__ = ["ASSUMPTION_ALPHA", "COLUMNS", "PATH_MODELS", "milestone_assumption"]

ASSUMPTION_ALPHA = 0.01  # below this the milestone assumption is reported as contradicted
# Kinds of model that describe success by paths the milestones do not (the check's subject).
PATH_MODELS = ("joint",)
# Draws of the milestone product for a pair beyond THINNING_MAX_STATES (thousands of trials).
MONTE_CARLO_DRAWS = 4000


# The columns of the check's table, one row per task with both kinds of evidence.
COLUMNS = [
    "agent",
    "task",
    "successes",
    "trials",
    "milestone_mean",
    "milestone_upper",
    "expected",
    "p_value",
    "contradicted",
    "bypass",
    "doubtful",
    "message",
]


def milestone_assumption(
    evidence, model: str = "mats2024", seed: int = 0, fitted=None
) -> pd.DataFrame:
    """Per task with milestone and end-to-end data: are the end-to-end successes plausible?

    ``p_value`` is the posterior predictive probability of at least the observed
    end-to-end successes when ``P`` is the product of the milestone rates (``model``, an
    exact milestone spec, fitted to the milestone rows alone), computed exactly
    (``bayes_eval.exact.thinning``; from draws only past ``THINNING_MAX_STATES`` trials);
    ``expected`` the end-to-end successes those rates predict on average. ``fitted`` is
    the ``Posterior`` the check is reported with: under a model of paths (its registry
    entry's ``paths``) the
    rows carry its ``bypass`` (posterior mean) and the message describes the paths;
    ``doubtful`` is ``contradicted`` under any other model and always false under those.
    """
    accounted = fitted is not None and model_of(fitted.spec).paths
    table = evidence.table
    milestones = table[table["method"] == MILESTONE_METHOD]
    keys = ["agent", "task"]
    e2e = table.loc[table["method"] == END_TO_END, [*keys, "successes", "trials"]]
    pairs = e2e.merge(milestones[keys].drop_duplicates(), on=keys).sort_values(keys)
    if pairs.empty:
        return pd.DataFrame(columns=COLUMNS)
    frame = milestones.merge(pairs[keys], on=keys).drop(columns=["row", "n_rows"])
    posterior = fit(_as_input(frame), model, seed=seed)
    summary = posterior.summary().set_index(keys)
    at = pd.MultiIndex.from_frame(pairs[keys])
    k, n = (pairs[name].to_numpy(dtype=np.int64) for name in ("successes", "trials"))
    mean = summary["mean"].reindex(at).to_numpy(dtype=float)
    value = _p_values(posterior, pairs, k, n, seed)
    value[np.isnan(mean)] = np.nan  # no milestone posterior (e.g. a zero under Haldane)
    out = pd.DataFrame(
        {
            "agent": pairs["agent"].to_numpy(),
            "task": pairs["task"].to_numpy(),
            "successes": k,
            "trials": n,
            "milestone_mean": mean,
            "milestone_upper": summary["upper"].reindex(at).to_numpy(dtype=float),
            "expected": n * mean,
            "p_value": value,
            "contradicted": value < ASSUMPTION_ALPHA,
            "bypass": np.nan,
        }
    )
    out["doubtful"] = out["contradicted"] & (not accounted)
    if accounted:  # the pooled joint model's bypass; crossed_joint links P to the milestones
        name = "bypass_task" if "bypass_task" in fitted.draws else "p_task"
        means = fitted.draws[name].mean(("chain", "draw")).transpose(AGENT, TASK)
        paths = means.values[tuple(means.indexes[d].get_indexer(pairs[d]) for d in keys)]
        if name == "bypass_task":
            out["bypass"] = paths
        rows = zip(out.to_dict("records"), paths, strict=True)
        out["message"] = [_path_message(row, fitted.spec.name, value) for row, value in rows]
    else:
        out["message"] = [_message(row) for row in out.to_dict("records")]
    return out[COLUMNS]


def _p_values(posterior, pairs, k, n, seed) -> np.ndarray:
    """``P(Y >= k)`` for ``Y ~ Binomial(n, P)``, ``P`` each pair's milestone posterior (one
    product of Betas), exactly (``product_binomial_sf``); a pair whose chain would be too
    long (``THINNING_MAX_STATES``) from ``MONTE_CARLO_DRAWS`` draws of its product."""
    cells = tuple(
        pd.Index(posterior.values(dim)).get_indexer(pairs[column])
        for dim, column in ((AGENT, "agent"), (TASK, "task"))
    )
    alpha, beta = posterior.values("alpha")[cells], posterior.values("beta")[cells]
    if alpha.shape[1] != 1:
        raise ValueError("the milestone check needs a milestone model of one product per task")
    alpha, beta = alpha[:, 0], beta[:, 0]
    value = product_binomial_sf(k, n, alpha, beta)
    long = np.flatnonzero((k > 0) & (n - k + 1 > THINNING_MAX_STATES))
    rng = np.random.default_rng(seed)
    for cell in long:
        present = ~np.isnan(alpha[cell])
        a, b = alpha[cell, present], beta[cell, present]
        if np.all(a > 0) and np.all(b >= 0):
            log_p = log_beta_draws(a, b, (MONTE_CARLO_DRAWS,), rng).sum(axis=1)
            value[cell] = stats.binom.sf(k[cell] - 1, n[cell], np.exp(log_p)).mean()
    return value


def _message(row) -> str:
    agent, task, k, n, value = (row[c] for c in ("agent", "task", "successes", "trials", "p_value"))
    if np.isnan(value):
        return f"{task} ({agent}): no milestone posterior to check against"
    if k == 0:  # the check asks whether there are too many successes: none cannot be
        return f"{task} ({agent}): 0/{n} end-to-end successes; not informative (it cannot fail)"
    if not row["contradicted"]:
        return (
            f"{task} ({agent}): {k}/{n} end-to-end successes are consistent with the "
            f"milestones (p = {value:.3g})"
        )
    return (
        f"WARNING {task} ({agent}): {k}/{n} end-to-end successes are very unlikely if the "
        f"agent must pass the milestones in order (p = {value:.2g}). It succeeds by paths "
        "the milestones do not describe, so milestone-based estimates and bounds "
        "underestimate it; use end-to-end data or the joint model."
    )


def _path_message(row, model: str, paths: float) -> str:
    """The check as evidence about paths, under a model that accounts for them: with its
    bypass (``joint``), or with its end-to-end rate, which it links to the milestones
    without multiplying them (``crossed_joint``): ``paths``, the posterior mean of either."""
    counts = f"{row['successes']}/{row['trials']}"
    head = f"{row['task']} ({row['agent']}): {counts} end-to-end successes"
    if np.isnan(row["bypass"]):
        said = f"{model}, which does not multiply milestone rates, puts P ≈ {paths:.2g}"
    else:
        said = f"{model} bypass ≈ {paths:.2g}"
    if np.isnan(row["p_value"]):
        return f"{head}; no milestone posterior to compare with; {said}"
    alone = f"the milestones alone predict about {row['expected']:.2g} (p = {row['p_value']:.2g})"
    if row["contradicted"] and not np.isnan(row["bypass"]):
        return (
            f"{head}; {alone}; the {model} model attributes the difference to other paths, "
            f"bypass ≈ {paths:.2g}"
        )
    return f"{head}; {alone}; {said}"


def _as_input(frame: pd.DataFrame) -> pd.DataFrame:
    """Normalised rows back to the evidence input format (absent values empty)."""
    out = frame.replace({-1: None, "": None})
    return out.drop(columns=[c for c in ("logprob",) if out[c].isna().all()])
