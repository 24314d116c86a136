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
from bayes_eval.fit import fit

__all__ = ["ASSUMPTION_ALPHA", "COLUMNS", "PATH_MODELS", "milestone_assumption"]

ASSUMPTION_ALPHA = 0.01  # below this the milestone assumption is reported as contradicted
# Kinds of model that describe success by paths the milestones do not (the check's subject).
PATH_MODELS = ("joint",)


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
    exact milestone spec, fitted to the milestone rows alone); ``expected`` the
    end-to-end successes those rates predict on average. ``fitted`` is the ``Posterior``
    the check is reported with: under a model in ``PATH_MODELS`` the rows carry its
    ``bypass`` (posterior mean) and the message describes the paths; ``doubtful`` is
    ``contradicted`` under any other model and always false under those.
    """
    accounted = fitted is not None and fitted.spec.kind in PATH_MODELS
    table = evidence.table
    e2e = table[table["method"] == END_TO_END].set_index(["agent", "task"])
    milestones = table[table["method"] == MILESTONE_METHOD]
    both = sorted(set(zip(milestones["agent"], milestones["task"], strict=True)) & set(e2e.index))
    if not both:
        return pd.DataFrame(columns=COLUMNS)
    keep = [pair in set(both) for pair in zip(milestones["agent"], milestones["task"], strict=True)]
    frame = milestones[keep].drop(columns=["row", "n_rows"])
    posterior = fit(_as_input(frame), model, seed=seed)
    summary = posterior.summary().set_index(["agent", "task"])
    post = posterior.draws["p_task"]
    # the pooled joint model's bypass; crossed_joint links P to the milestones instead
    paths = None
    if accounted:
        name = "bypass_task" if "bypass_task" in fitted.draws else "p_task"
        paths = fitted.draws[name].mean(("chain", "draw"))
    rows = []
    for agent, task in both:
        k, n = int(e2e.loc[(agent, task), "successes"]), int(e2e.loc[(agent, task), "trials"])
        draws = post.sel({AGENT: agent, TASK: task}).values.ravel()
        if np.all(np.isnan(draws)):
            value = float("nan")  # no milestone posterior (e.g. a zero under Haldane)
        else:
            value = float(stats.binom.sf(k - 1, n, np.clip(draws, 0, 1)).mean())
        bad = bool(value < ASSUMPTION_ALPHA)
        mean = summary.loc[(agent, task), "mean"]
        row = dict(
            agent=agent,
            task=task,
            successes=k,
            trials=n,
            milestone_mean=mean,
            milestone_upper=summary.loc[(agent, task), "upper"],
            expected=n * mean,
            p_value=value,
            contradicted=bad,
            bypass=np.nan,
            doubtful=bad and not accounted,
        )
        if accounted:
            value = float(paths.sel({AGENT: agent, TASK: task}))
            if paths.name == "bypass_task":
                row["bypass"] = value
            row["message"] = _path_message(row, fitted.spec.name, value)
        else:
            row["message"] = _message(row)
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


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
