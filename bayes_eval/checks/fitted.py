"""The checks of a fit, run together once it is sampled: the posterior predictive checks,
the milestone-assumption check, and the milestone method fitted to the same evidence (for
the report's comparison).

Nothing that runs after sampling may lose the fit: a check that raises is reported in
``FitChecks.failed``, with its reason, and leaves an empty table; the fit stands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from bayes_eval.checks.assumption import COLUMNS as ASSUMPTION_COLUMNS
from bayes_eval.checks.assumption import milestone_assumption
from bayes_eval.errors import InputError
from bayes_eval.fit import fit
from bayes_eval.messages import collected
from bayes_eval.results.predictive import COLUMNS as PREDICTIVE_COLUMNS
from bayes_eval.results.predictive import predictive_checks

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
    failed : list of str
        One line per check that raised: what, why, and that the fit is kept.
    """

    predictive: pd.DataFrame
    assumption: pd.DataFrame
    milestone_method: object = None
    failed: list[str] = field(default_factory=list)


def check_fit(posterior, keep_going: bool = True) -> FitChecks:
    """Run every check of ``posterior``: a check that raises is reported in ``failed``, or,
    without ``keep_going``, raised as it is."""
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
    return FitChecks(
        pd.DataFrame(columns=PREDICTIVE_COLUMNS) if predictive is None else predictive,
        pd.DataFrame(columns=ASSUMPTION_COLUMNS) if assumption is None else assumption,
        milestone_method,
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
    if spec.kind == "milestone" and spec.exact:
        return None
    try:
        with collected():  # the fit's own notes said what its rows are
            return fit(posterior.evidence, MILESTONE_METHOD_SPEC, level=posterior.level)
    except InputError:  # no task with milestone runs
        return None
