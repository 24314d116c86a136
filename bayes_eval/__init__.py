"""bayes_eval: how likely is an AI agent to succeed at a task, with a credible upper bound.

Quick use::

    import bayes_eval
    posterior = bayes_eval.fit("evidence.csv", "phuong2024")
    posterior.summary(threshold=0.01)

The names below load on first use (``import bayes_eval`` imports no numerical library),
so the command line starts at once and a script pays only for what it calls.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayes_eval.checks.agents import AgentComparison, compare_agents
    from bayes_eval.checks.calibration import calibrate
    from bayes_eval.checks.comparison import Comparison, compare
    from bayes_eval.checks.holdout import compare_holdout
    from bayes_eval.checks.prior import PriorCheck, prior_check
    from bayes_eval.checks.sensitivity import Sensitivity, prior_sensitivity
    from bayes_eval.errors import InputError
    from bayes_eval.evidence.inspect_logs import read_inspect, read_paired_inspect
    from bayes_eval.evidence.runs import read_runs
    from bayes_eval.evidence.table import Evidence, load_evidence
    from bayes_eval.fit import fit, fit_per_agent, load_posterior
    from bayes_eval.pipeline import read_evidence, report, run
    from bayes_eval.plan import expected_trials as plan_expected_trials
    from bayes_eval.plan import milestone_trials as plan_milestones
    from bayes_eval.plan import next_run as plan_next_run
    from bayes_eval.plan import zero_success_trials as plan_zero_success
    from bayes_eval.prior_family import Member, prior_family
    from bayes_eval.resources import shipped_datasets
    from bayes_eval.results.posterior import Posterior
    from bayes_eval.settings import SamplerSettings
    from bayes_eval.specs import Spec, load_spec, shipped_specs

# Each public name: the module it lives in, and its name there.
_WHERE = {
    "AgentComparison": ("bayes_eval.checks.agents", "AgentComparison"),
    "calibrate": ("bayes_eval.checks.calibration", "calibrate"),
    "compare": ("bayes_eval.checks.comparison", "compare"),
    "compare_agents": ("bayes_eval.checks.agents", "compare_agents"),
    "compare_holdout": ("bayes_eval.checks.holdout", "compare_holdout"),
    "Comparison": ("bayes_eval.checks.comparison", "Comparison"),
    "Evidence": ("bayes_eval.evidence.table", "Evidence"),
    "fit": ("bayes_eval.fit", "fit"),
    "fit_per_agent": ("bayes_eval.fit", "fit_per_agent"),
    "InputError": ("bayes_eval.errors", "InputError"),
    "load_evidence": ("bayes_eval.evidence.table", "load_evidence"),
    "load_posterior": ("bayes_eval.fit", "load_posterior"),
    "load_spec": ("bayes_eval.specs", "load_spec"),
    "Member": ("bayes_eval.prior_family", "Member"),
    "plan_expected_trials": ("bayes_eval.plan", "expected_trials"),
    "plan_milestones": ("bayes_eval.plan", "milestone_trials"),
    "plan_next_run": ("bayes_eval.plan", "next_run"),
    "plan_zero_success": ("bayes_eval.plan", "zero_success_trials"),
    "Posterior": ("bayes_eval.results.posterior", "Posterior"),
    "prior_check": ("bayes_eval.checks.prior", "prior_check"),
    "prior_family": ("bayes_eval.prior_family", "prior_family"),
    "prior_sensitivity": ("bayes_eval.checks.sensitivity", "prior_sensitivity"),
    "PriorCheck": ("bayes_eval.checks.prior", "PriorCheck"),
    "read_evidence": ("bayes_eval.pipeline", "read_evidence"),
    "read_inspect": ("bayes_eval.evidence.inspect_logs", "read_inspect"),
    "read_paired_inspect": ("bayes_eval.evidence.inspect_logs", "read_paired_inspect"),
    "read_runs": ("bayes_eval.evidence.runs", "read_runs"),
    "report": ("bayes_eval.pipeline", "report"),
    "run": ("bayes_eval.pipeline", "run"),
    "SamplerSettings": ("bayes_eval.settings", "SamplerSettings"),
    "Sensitivity": ("bayes_eval.checks.sensitivity", "Sensitivity"),
    "shipped_datasets": ("bayes_eval.resources", "shipped_datasets"),
    "shipped_specs": ("bayes_eval.specs", "shipped_specs"),
    "Spec": ("bayes_eval.specs", "Spec"),
}

__all__ = [
    "AgentComparison",
    "Comparison",
    "Evidence",
    "InputError",
    "Member",
    "Posterior",
    "PriorCheck",
    "SamplerSettings",
    "Sensitivity",
    "Spec",
    "calibrate",
    "compare",
    "compare_agents",
    "compare_holdout",
    "fit",
    "fit_per_agent",
    "load_evidence",
    "load_posterior",
    "load_spec",
    "plan_expected_trials",
    "plan_milestones",
    "plan_next_run",
    "plan_zero_success",
    "prior_check",
    "prior_family",
    "prior_sensitivity",
    "read_evidence",
    "read_inspect",
    "read_paired_inspect",
    "read_runs",
    "report",
    "run",
    "shipped_datasets",
    "shipped_specs",
]


def __getattr__(name: str):
    """A public name, imported from its module the first time it is read; a module of the
    package (``bayes_eval.resources``), imported."""
    if name in _WHERE:
        module, attribute = _WHERE[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'bayes_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


class _Package(types.ModuleType):
    """The package, whose ``fit`` and ``prior_family`` stay the functions when the modules
    of the same names load (the import system binds a submodule to its name on the
    package: ``bayes_eval.fit`` would become a module, not callable)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _WHERE and isinstance(value, types.ModuleType):
            value = getattr(value, _WHERE[name][1])
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
