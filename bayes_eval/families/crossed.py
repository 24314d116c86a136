"""The crossed families: agents x tasks on one logit scale (``bayes_eval.crossed``), the
crossed model itself and the one linking milestones to end-to-end runs."""

from __future__ import annotations

from bayes_eval.families.base import AgentLevel

__all__ = ["CrossedFamily"]

CROSSED_TITLE = "Crossed agents x tasks"
CROSSED_TEXT = (
    "Every agent has an ability and every task a difficulty on one logit scale, and each "
    "pair's rate departs from their difference by a logit-normal amount whose scale the "
    "data set; pairs never run are predicted."
)
CROSSED_MCMC_TEXT = "It is fitted by MCMC, whose diagnostics must pass before a bound is trusted."
ABILITY_LABEL = "ability θ (log-odds; ratio: odds ratio)"


class CrossedFamily:
    """Crossed models, fitted by MCMC with their agents together (``Family``); ``name``
    is ``crossed`` or ``linked``."""

    fits_agents_apart = False

    def __init__(self, name: str):
        self.name = name

    def fit(self, evidence, by_pair, spec, options):
        from bayes_eval.crossed.model import design_of
        from bayes_eval.crossed.sampling import fit_crossed

        design = design_of(by_pair, spec, evidence, options.side, options.predict)
        return fit_crossed(evidence, design, spec, options)

    def prior_only(self, evidence, by_pair, spec, options):
        from bayes_eval.crossed.model import design_of
        from bayes_eval.crossed.prior import prior_crossed

        design = design_of(by_pair, spec, evidence, options.side, options.predict)
        return prior_crossed(evidence, design, spec, seed=options.seed)

    def read_back(self, posterior, by_pair, path):
        from bayes_eval.crossed.model import design_of_fit
        from bayes_eval.crossed.sampling import derivation_of_fit

        design = design_of_fit(
            by_pair, posterior.spec, posterior.evidence, posterior.group("covariates")
        )
        posterior.attach(derivation_of_fit(design, posterior.spec, posterior.seed))

    def agent_level(self, spec):
        return AgentLevel("ability", ABILITY_LABEL, log_odds=True)

    def variable_roles(self, spec):
        from bayes_eval.crossed.prior import ROLES

        return dict(ROLES)

    def report_paragraphs(self, model):
        return [(CROSSED_TITLE, " ".join((CROSSED_TEXT, model.text, CROSSED_MCMC_TEXT)))]

    def clustered_spec(self, spec):
        return "crossed"
