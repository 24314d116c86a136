"""Inspect AI metrics: a credible bound on a task's success rate where Inspect reports its
results (``inspect eval``'s summary, the log, ``inspect view``).

Inspect finds them by name through its ``inspect_ai`` entry point, as
``bayes_eval/upper_bound`` and ``bayes_eval/posterior_mean``; a task names them in its
``metrics``::

    from bayes_eval.inspect import upper_bound
    Task(dataset=..., solver=..., scorer=match(), metrics=[accuracy(), upper_bound()])

Each metric sees every epoch of every sample as one run: it is declared
``@metric(scores="unreduced")``, so Inspect hands it one score per sample per epoch,
before any epoch reducer, and never a mean over epochs from which the runs could not be
counted again. A score is a success or a failure as ``bayes-eval fit`` reads a log
(``C``/``I``/``N``, booleans, a number at or above ``success_threshold``). The runs of
all the task's samples are pooled as trials of one rate, and the exact end-to-end model
(a spec of kind ``end_to_end``, pooling ``none``: ``end_to_end`` by default, the uniform
prior) gives its posterior: ``Beta(alpha + k, beta + n - k)`` for ``k`` successes of
``n`` runs.
"""

from __future__ import annotations

import pandas as pd
from inspect_ai.scorer import Metric, SampleScore, metric

from bayes_eval.constants import END_TO_END
from bayes_eval.errors import InputError
from bayes_eval.evidence.inspect_logs import success_flag

__all__ = ["posterior_mean", "upper_bound"]


@metric(scores="unreduced")
def upper_bound(
    level: float = 0.975, prior: str = "end_to_end", success_threshold: float | None = None
) -> Metric:
    """The one-sided ``level`` credible upper bound of the task's success rate.

    Parameters
    ----------
    level : float
        Credible level of the bound, in (0, 1).
    prior : str
        An exact end-to-end spec (a shipped name or a TOML path) whose prior the bound
        rests on.
    success_threshold : float, optional
        A numeric score at or above it is a success (numeric scorers need one).
    """

    def upper(scores: list[SampleScore]) -> float:
        return float(_summary(scores, level, prior, success_threshold)["upper"])

    return upper


@metric(scores="unreduced")
def posterior_mean(prior: str = "end_to_end", success_threshold: float | None = None) -> Metric:
    """The posterior mean of the task's success rate (``upper_bound``'s arguments)."""

    def mean(scores: list[SampleScore]) -> float:
        return float(_summary(scores, 0.975, prior, success_threshold)["mean"])

    return mean


def _summary(scores: list[SampleScore], level: float, prior: str, threshold) -> pd.Series:
    """The summary row of the exact end-to-end fit of every score as one run."""
    import bayes_eval
    from bayes_eval.messages import collected
    from bayes_eval.registry import model_of
    from bayes_eval.specs import load_spec

    spec = load_spec(prior)
    entry = model_of(spec)
    if not entry.exact or entry.uses != (END_TO_END,):
        raise InputError(
            f"prior: {spec.name} is {spec.kind}/{spec.pooling}; the Inspect metrics take an "
            "exact end-to-end spec (kind end_to_end, pooling none)"
        )
    if not scores:
        raise InputError("bayes_eval metrics: no scores (no sample was scored)")
    flags = [success_flag(s.score.value, threshold, f"sample {s.sample_id}") for s in scores]
    row = {"agent": "agent", "task": "task", "method": "end_to_end"}
    table = pd.DataFrame([{**row, "successes": sum(flags), "trials": len(flags)}])
    with collected():
        fit = bayes_eval.fit(table, spec, level=level)
    return fit.summary().iloc[0]
