"""Inspect AI metrics: a credible bound on a task's success rate where Inspect reports its
results (``inspect eval``'s summary, the log, ``inspect view``).

Inspect finds them by name through its ``inspect_ai`` entry point, as
``bayes_eval/upper_bound``, ``bayes_eval/posterior_mean`` and ``bayes_eval/pass_at_k``
(``inspect score LOG --metric bayes_eval/upper_bound``); a task names them in its
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

``pass_at_k`` reads each sample as a task of its own, its epochs that task's runs, under
the task population model (``end_to_end_pooled``: each sample's rate drawn from the
agent's ``Beta(mu kappa, (1 - mu) kappa)``, sampled by MCMC), and gives the chance that at
least one of ``k`` attempts succeeds, averaged over the task's samples (or at a new sample
of the same population, ``population="new"``).
"""

from __future__ import annotations

import logging
import math

import pandas as pd
from inspect_ai.scorer import Metric, SampleScore, metric

from bayes_eval.constants import END_TO_END
from bayes_eval.errors import InputError
from bayes_eval.evidence.inspect_logs import success_flag

__all__ = ["pass_at_k", "posterior_mean", "upper_bound"]

# pass_at_k's populations: the task's own samples, or a new sample drawn from theirs.
POPULATIONS = {"observed": "observed tasks", "new": "new task"}


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


@metric(scores="unreduced")
def pass_at_k(
    k: int = 10,
    level: float | None = None,
    population: str = "observed",
    prior: str = "end_to_end_pooled",
    success_threshold: float | None = None,
) -> Metric:
    """The chance that at least one of ``k`` attempts succeeds, under the task population
    model: each sample a task, its epochs its runs (every epoch a run, before any reducer).

    Parameters
    ----------
    k : int
        Attempts, at least 1.
    level : float, optional
        None: the posterior mean of pass@k; a level in (0, 1): its one-sided upper bound.
    population : {"observed", "new"}
        ``observed``: the mean over the task's samples of each one's pass@k (the
        benchmark's pass@k); ``new``: a new sample drawn from their population.
    prior : str
        An end-to-end spec (a shipped name or a TOML path); ``end_to_end_pooled`` (MCMC,
        seconds) by default. A spec without a population of tasks has no ``new`` sample.
    success_threshold : float, optional
        A numeric score at or above it is a success (numeric scorers need one).

    Where the sampler's diagnostics fail, the metric is NaN and a warning says why.
    """

    from bayes_eval.results.attempts import parse_attempts
    from bayes_eval.results.population import population_curves

    which = _choice(population, POPULATIONS, "population")  # refused where the task is made
    attempts = parse_attempts([k])

    def at_k(scores: list[SampleScore]) -> float:
        fit = _fit(_by_sample(scores, success_threshold), prior, 0.975 if level is None else level)
        if not fit.diagnostics.ok:
            logging.getLogger("bayes_eval").warning(
                "bayes_eval/pass_at_k: the fit's diagnostics failed (%s); the metric is NaN",
                "; ".join(fit.diagnostics.messages),
            )
            return math.nan
        curve = population_curves(fit, attempts)
        row = curve[curve["population"] == which]
        if row.empty:
            raise InputError(f"population: {prior} has no population of tasks to draw a new one")
        return float(row.iloc[0]["pass_at_mean" if level is None else "pass_at_upper"])

    return at_k


def _choice(value: str, choices: dict, name: str) -> str:
    if value not in choices:
        raise InputError(f"{name}: '{value}' is not one of {', '.join(choices)}")
    return choices[value]


def _by_sample(scores: list[SampleScore], threshold) -> pd.DataFrame:
    """The runs of every score, one row per sample: its successes and epochs."""
    if not scores:
        raise InputError("bayes_eval metrics: no scores (no sample was scored)")
    runs = pd.DataFrame(
        {
            "task": [str(s.sample_id) for s in scores],
            "successes": [
                success_flag(s.score.value, threshold, f"sample {s.sample_id}") for s in scores
            ],
        }
    )
    table = runs.groupby("task", sort=False)["successes"].agg(["sum", "size"]).reset_index()
    table.columns = ["task", "successes", "trials"]
    return table.assign(agent="agent", method=END_TO_END)


def _fit(table: pd.DataFrame, prior: str, level: float, *, exact: bool = False):
    """The fit of ``table`` under the end-to-end spec ``prior`` (an exact one if
    ``exact``)."""
    import bayes_eval
    from bayes_eval.messages import collected
    from bayes_eval.registry import model_of
    from bayes_eval.specs import load_spec

    spec = load_spec(prior)
    entry = model_of(spec)
    if entry.uses != (END_TO_END,) or (exact and not entry.exact):
        raise InputError(
            f"prior: {spec.name} is {spec.kind}/{spec.pooling}; this metric takes an "
            + (
                "exact end-to-end spec (kind end_to_end, pooling none)"
                if exact
                else "end-to-end spec"
            )
        )
    with collected():
        return bayes_eval.fit(table, spec, level=level)


def _summary(scores: list[SampleScore], level: float, prior: str, threshold) -> pd.Series:
    """The summary row of the exact end-to-end fit of every score as one run."""
    by_sample = _by_sample(scores, threshold)
    counts = {"successes": by_sample["successes"].sum(), "trials": by_sample["trials"].sum()}
    table = pd.DataFrame([{"agent": "agent", "task": "task", "method": END_TO_END, **counts}])
    return _fit(table, prior, level, exact=True).summary().iloc[0]
