"""bayes_eval: how likely is an AI agent to succeed at a task, with a credible upper bound.

Quick use::

    import bayes_eval
    posterior = bayes_eval.fit("evidence.csv", "phuong2024")
    posterior.summary(threshold=0.01)
"""

from bayes_eval.checks.agents import AgentComparison, compare_agents
from bayes_eval.checks.calibration import calibrate
from bayes_eval.checks.comparison import Comparison, compare
from bayes_eval.checks.holdout import compare_holdout
from bayes_eval.checks.prior import PriorCheck, prior_check
from bayes_eval.checks.sensitivity import Sensitivity, prior_sensitivity
from bayes_eval.errors import InputError
from bayes_eval.evidence.inspect_logs import read_inspect
from bayes_eval.evidence.runs import read_runs
from bayes_eval.evidence.table import Evidence, load_evidence
from bayes_eval.fit import fit, fit_per_agent
from bayes_eval.pipeline import read_evidence, report, run
from bayes_eval.plan import expected_trials as plan_expected_trials
from bayes_eval.plan import milestone_trials as plan_milestones
from bayes_eval.plan import next_run as plan_next_run
from bayes_eval.plan import zero_success_trials as plan_zero_success
from bayes_eval.prior_family import Member, prior_family
from bayes_eval.resources import shipped_datasets
from bayes_eval.results.posterior import Posterior, load_posterior
from bayes_eval.settings import SamplerSettings
from bayes_eval.specs import Spec, load_spec, shipped_specs

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
    "read_runs",
    "report",
    "run",
    "shipped_datasets",
    "shipped_specs",
]
