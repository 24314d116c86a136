"""The pooled family: partially pooled PyMC models (``bayes_eval.pooled``)."""

from __future__ import annotations

from bayes_eval.families.base import AgentLevel

__all__ = ["PooledFamily"]

# The report's paragraph on every pooled model.
POOLED_TEXT = (
    "Partial pooling",
    "Pooled models share strength across an agent's tasks (and a task's milestones) through "
    "a hierarchy; they assume the tasks are exchangeable. They are fitted by MCMC, whose "
    "diagnostics (R-hat, effective sample size, divergences, E-BFMI) must pass before a "
    "bound is trusted.",
)
# The agent-level quantity of each kind of pooled model: its agents' mean rate
# (``end_to_end``), else the mean of its agents' task means.
AGENT_LEVEL = {"end_to_end": "mu"}
DEFAULT_AGENT_LEVEL = "mu_agent"


class PooledFamily:
    """Partially pooled models, fitted by MCMC (``Family``)."""

    name = "pooled"
    fits_agents_apart = True

    def fit(self, evidence, by_pair, spec, options):
        from bayes_eval.pooled.sampling import fit_pooled

        return fit_pooled(evidence, by_pair, spec, options)

    def prior_only(self, evidence, by_pair, spec, options):
        from bayes_eval.pooled.sampling import prior_pooled

        return prior_pooled(evidence, by_pair, spec, seed=options.seed)

    def read_back(self, posterior, by_pair, path):
        from bayes_eval.pooled.sampling import derivation_of_fit

        posterior.attach(
            derivation_of_fit(posterior.evidence, by_pair, posterior.spec, posterior.seed)
        )

    def agent_level(self, spec):
        name = AGENT_LEVEL.get(spec.kind, DEFAULT_AGENT_LEVEL)
        return AgentLevel(name, name)

    def variable_roles(self, spec):
        from bayes_eval.pooled.prior import variable_roles

        return variable_roles(spec)

    def report_paragraphs(self, model):
        own = [(model.title, model.text)] if model.title else []
        return [*own, POOLED_TEXT]

    def clustered_spec(self, spec):
        return "end_to_end_pooled" if spec.kind == "end_to_end" else "hierarchical"
