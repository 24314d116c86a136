"""The checks of a fit, run together once it is sampled: the posterior predictive checks,
the milestone-assumption check, and the milestone method fitted to the same evidence (for
the report's comparison).

Nothing that runs after sampling may lose the fit: a check that raises is reported in
``FitChecks.failed``, with its reason, and leaves an empty table; the fit stands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from bayes_eval.checks.assumption import COLUMNS as ASSUMPTION_COLUMNS
from bayes_eval.checks.assumption import milestone_assumption
from bayes_eval.checks.comparison import compare
from bayes_eval.errors import InputError
from bayes_eval.fit import fit
from bayes_eval.messages import collected
from bayes_eval.registry import model_of
from bayes_eval.results.predictive import COLUMNS as PREDICTIVE_COLUMNS
from bayes_eval.results.predictive import predictive_checks
from bayes_eval.specs import load_spec

__all__ = ["MILESTONE_METHOD_SPEC", "FitChecks", "check_fit", "guarded"]

# The milestone method the report sets beside a model: Phuong et al.'s product of
# milestone rates, with the uniform prior of Højmark et al.'s table.
MILESTONE_METHOD_SPEC = "mats2024"


@dataclass
class FitChecks:
    """What the checks of one fit found.

    Attributes
    ----------
    predictive : DataFrame
        ``bayes_eval.results.predictive.predictive_checks``, one row per observed cell.
    assumption : DataFrame
        ``bayes_eval.checks.assumption.milestone_assumption``, one row per task with
        milestone and end-to-end runs.
    milestone_method : Posterior or None
        The milestone method fitted to the same evidence; None where the fit is the
        milestone method, or no task has milestone runs.
    comparison : Comparison, str or None
        The fit ranked beside the milestone method and the other models asked for, by
        leave-one-cell-out ELPD (``compare``, Pareto k above 0.7 counted, not refitted),
        those that share no cell with the fit named in its ``unscored``; why not, where
        none does; None where there is nothing to compare.
    failed : list of str
        One line per check that raised: what, why, and that the fit is kept.
    """

    predictive: pd.DataFrame
    assumption: pd.DataFrame
    milestone_method: object = None
    comparison: object = None
    failed: list[str] = field(default_factory=list)


def check_fit(posterior, keep_going: bool = True, others: Sequence = ()) -> FitChecks:
    """Run every check of ``posterior``: a check that raises is reported in ``failed``, or,
    without ``keep_going``, raised as it is. ``others`` (spec names or paths) are fitted
    to the same evidence and compared with it and the milestone method."""
    failed: list[str] = []

    def checked(what, function, *args, **kwargs):
        if not keep_going:
            return function(*args, **kwargs)
        return guarded(what, failed, function, *args, **kwargs)

    predictive = checked("posterior predictive checks", predictive_checks, posterior)
    assumption = checked(
        "milestone-assumption check", milestone_assumption, posterior.evidence, fitted=posterior
    )
    milestone_method = checked(
        "the milestone method beside the model", _milestone_method, posterior
    )
    comparison = checked(
        "the comparison of the models", _comparison, posterior, milestone_method, others
    )
    return FitChecks(
        pd.DataFrame(columns=PREDICTIVE_COLUMNS) if predictive is None else predictive,
        pd.DataFrame(columns=ASSUMPTION_COLUMNS) if assumption is None else assumption,
        milestone_method,
        comparison,
        failed,
    )


def guarded(what: str, failed: list, function, *args, **kwargs):
    """``function(*args, **kwargs)``, or None where it raises, with a line in ``failed``
    naming ``what`` failed and why, and that the fit is kept."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # a failed check is reported; the fit stands
        failed.append(f"{what} FAILED ({type(exc).__name__}: {exc}); the fit is kept")
        return None


def _milestone_method(posterior):
    """The milestone method on the fit's evidence, or None (see ``FitChecks``)."""
    spec = posterior.spec
    if model_of(spec) is model_of(load_spec(MILESTONE_METHOD_SPEC)):  # the method's model
        return None
    try:
        with collected():  # the fit's own notes said what its rows are
            return fit(posterior.evidence, MILESTONE_METHOD_SPEC, level=posterior.level)
    except InputError:  # no task with milestone runs
        return None


def _comparison(posterior, milestone_method, others):
    """``compare`` of the fit, the milestone method and ``others`` fitted to the same
    evidence; the reason as a string where they share no cell (see ``FitChecks``)."""
    if (milestone_method is not None or others) and not posterior.has_group("log_likelihood"):
        return (  # nothing to rank it by, so no other model is fitted
            f"{posterior.spec.name} has no pointwise log-likelihood (a run folder written "
            "before fits had one)"
        )
    fits = {posterior.spec.name: posterior}
    if milestone_method is not None:
        fits[milestone_method.spec.name] = milestone_method
    for model in others:
        with collected():  # the same evidence: its notes are the fit's
            other = fit(posterior.evidence, model, level=posterior.level)
        name = other.spec.name if other.spec.name not in fits else str(model)
        fits[name] = other
    if len(fits) < 2:
        return None
    own, apart, paired = posterior.spec.name, {}, {}
    for name in list(fits)[1:]:  # those that share no cell with the fit are set apart
        try:
            paired[name] = compare({own: posterior, name: fits[name]}, refit=False)
        except InputError as exc:
            apart[name] = _why_apart(str(exc), name, own)
    kept = {name: fits[name] for name in fits if name not in apart}
    if len(kept) < 2:
        return "; ".join(apart.values())
    # of one other fit, the comparison made to test it is the comparison
    comparison = paired.popitem()[1] if len(paired) == 1 else compare(kept, refit=False)
    return dataclasses.replace(comparison, unscored={**comparison.unscored, **apart})


def _why_apart(error: str, name: str, own: str) -> str:
    """Why ``compare`` could not rank ``name`` beside the fit ``own``, in the report's words."""
    if "no pointwise log-likelihood" in error:
        return f"{name} has no pointwise log-likelihood"
    return (
        f"{name} explains no observed count that {own} explains (it reads other "
        "evidence, or an improper prior predicts no count it has not seen)"
    )
