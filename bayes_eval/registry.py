"""The models the package knows, one entry each.

An entry (``Model``) holds what is true of a model wherever the package needs it: the
evidence it reads, the priors it takes, whether it models clustered runs, its builder,
what it predicts, and the words the report uses for it. Every other module (the spec
reader, ``fit``, the families, the pooled and crossed models, SBC, the report, the command
line) reads this table instead of branching on a model's kind.

A model is named as a spec names it, by its ``kind`` and ``pooling``, and names its
family (``bayes_eval.families``): ``exact`` (conjugate; pooling ``none``), ``pooled`` (a
partially pooled PyMC model), ``crossed`` (agents x tasks) or ``linked`` (agents x tasks,
milestones linked to end-to-end runs). A builder is a callable or a ``"module:name"``
reference, imported only when the model is fitted, so an exact fit never imports PyMC:

* exact: ``builder(agent, task, rows_by_method, spec)`` returns an
  ``bayes_eval.exact.builders.Estimate`` for one (agent, task);
* pooled: ``builder(layout, spec, form)`` returns the PyMC model
  (``clustered_builder`` the one for clustered runs);
* crossed: ``builder(design, spec)`` returns the PyMC model (the design carries its
  form); the builder's module also gives the model's other functions (``Model.part``).

Adding a model is one entry here (``register``) and one builder; ``docs/models.md``
("Adding a model") shows how.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from bayes_eval.constants import (
    AGENT,
    ALL_SOLVABLE,
    BEST_OF_N,
    CONCENTRATION_SCALE,
    DISCRIMINATION_SCALE,
    END_TO_END,
    EXPERT_COMPLETION,
    GOLDEN,
    LENGTH_ERROR,
    MILESTONE_METHOD,
    NEVER_SOLVABLE,
    SURPRISE_SHARE,
    SURPRISE_WIDTH,
    TASK,
)

__all__ = [
    "CROSSED",
    "EXACT",
    "LINKED",
    "LINKED_PRIORS",
    "MODELS",
    "NEW_AGENTS",
    "POOLED",
    "UNRUN_PAIRS",
    "Model",
    "model_of",
    "register",
    "resolve",
]

EXACT, POOLED, CROSSED, LINKED = "exact", "pooled", "crossed", "linked"
# What a model can predict besides the pairs it was given runs of.
UNRUN_PAIRS, NEW_AGENTS = "pairs never run", "new agents described by covariates"

Builder = Callable | str


@dataclass(frozen=True)
class Model:
    """One model, as a spec names it (``kind``, ``pooling``).

    Attributes
    ----------
    kind, pooling : str
    family : str
        ``EXACT``, ``POOLED``, ``CROSSED`` or ``LINKED`` (``bayes_eval.families``).
    uses : tuple of str
        The evidence methods it reads; rows of other methods are left out with a note.
    priors : tuple of str
        The prior roles a spec of it must give.
    builder : callable or str
        Its builder (see the module's docstring), or ``"module:name"``.
    optional_priors : tuple of str
        Roles it takes where the evidence needs them (clustered runs, covariates), or
        where a spec asks for them (``never_solvable``: tasks an agent never solves).
    requires : tuple of str
        Evidence a task must have besides any row it reads (``joint``: milestones).
    clustered : bool
        Whether it models runs that come in clusters; every other model refuses them.
    clustered_builder : callable or str, optional
        A pooled model's builder for clustered runs.
    table_builder : callable or str, optional
        An exact model's builder of every pair at once, where the per-pair one would take
        minutes on a large table: ``table_builder(pair_rows, spec)`` returns the
        ``bayes_eval.exact.builders.Estimates`` of every pair of ``pair_rows``
        (``bayes_eval.evidence.pairs.PairRows``), the same as ``builder``'s, stacked.
    predicts : tuple of str
        What it predicts besides the pairs it was given runs of (``UNRUN_PAIRS``,
        ``NEW_AGENTS``).
    title, text : str
        The report's heading and paragraph on the model: what it assumes, and how it
        fails. Empty where the evidence's own paragraph says it all (the published
        methods).
    differs : str
        Why its bound differs from the milestone method's, for the report's comparison.
    graded : tuple of str
        The evidence methods whose runs it reads through an audited grader's error (its
        sensitivity and specificity); a judge on rows of another method it reads is
        refused, and a model with none refuses an audit.
    audited_runs : bool
        Whether it takes audits of its own runs (``run_id``): their truth in place of
        their grade.
    paths : bool
        Whether it describes success by paths the milestones miss (a bypass), the subject
        of the milestone assumption's check.
    rungs : bool
        Whether it rests each task on one method's rows (Phuong et al.'s chain): its
        end-to-end predictions hold where that rung is end to end.
    population : str
        The law of a new task's rate for an agent, where the model gives one: ``beta``
        (``Beta(mu kappa, (1 - mu) kappa)``, its ``mu`` and ``kappa`` per agent), ``logit``
        (normal on the logit scale around the agent's ``ability``, its spread from the
        difficulty and departure scales); empty otherwise.
    floor_shared : tuple of str
        The parts of the design (``agent``, ``task``) whose end-to-end runs set a pair's
        floor, the bound 0 successes in all of them could show (a bound below it is
        extrapolated); empty for a model whose milestone runs inform its bounds too.
    refuses_sparse_shared : bool
        Whether it is refused on tables where agents share tasks of one run per cell
        (``bayes_eval.advice.sparse_shared``), where its parameters are not identified.
    """

    kind: str
    pooling: str
    family: str
    uses: tuple[str, ...]
    priors: tuple[str, ...]
    builder: Builder
    optional_priors: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    clustered: bool = False
    clustered_builder: Builder | None = None
    table_builder: Builder | None = None
    predicts: tuple[str, ...] = ()
    title: str = ""
    text: str = ""
    differs: str = ""
    graded: tuple[str, ...] = ()
    audited_runs: bool = False
    paths: bool = False
    rungs: bool = False
    population: str = ""
    floor_shared: tuple[str, ...] = ()
    refuses_sparse_shared: bool = False

    @property
    def cell_method(self) -> str:
        """The evidence method of the rates a pooled or crossed model has per cell
        (``milestone``, ``expert_completion``: a milestone, or a run's step, of a pair);
        empty where its rates are the pairs' end-to-end ones."""
        return next((m for m in (MILESTONE_METHOD, EXPERT_COMPLETION) if m in self.uses), "")

    @property
    def exact(self) -> bool:
        """Whether its posteriors are exact (conjugate: no MCMC)."""
        return self.family == EXACT

    def build(self, clustered: bool = False) -> Callable:
        """The builder, imported (the clustered one with ``clustered``)."""
        return resolve(self.clustered_builder if clustered else self.builder)

    def build_table(self) -> Callable:
        """The builder of every pair at once (``table_builder``), imported."""
        return resolve(self.table_builder)

    def part(self, name: str):
        """``name`` from the module of a crossed model's builder: its ``draw_rates``,
        ``simulate``, ``log_likelihood``, ``form_text`` (the provenance's
        words for its other sampled parts), and ``LATENT`` and ``LATENT_DIMS``, what a fit
        drops once its rates are drawn."""
        builder = self.builder
        module = builder.__module__ if callable(builder) else builder.partition(":")[0]
        return getattr(importlib.import_module(module), name)


def resolve(builder: Builder) -> Callable:
    """A builder given as ``"module:name"``, imported; a callable as it is."""
    if callable(builder):
        return builder
    module, _, name = builder.partition(":")
    return getattr(importlib.import_module(module), name)


MODELS: dict[tuple[str, str], Model] = {}


def register(model: Model) -> Model:
    """Add ``model`` to the table; a second model of the same kind and pooling is refused."""
    key = (model.kind, model.pooling)
    if key in MODELS:
        raise ValueError(f"a model {model.kind}/{model.pooling} is registered already")
    MODELS[key] = model
    return model


def model_of(spec) -> Model:
    """The entry of a spec's model (``spec.kind``, ``spec.pooling``)."""
    return MODELS[spec.kind, spec.pooling]


HIERARCHY = ("task_mean", "task_concentration")
CROSSED_PRIORS = ("ability_mean", "ability_scale", "difficulty_scale")
# crossed_joint's milestone side: each a scalar sampled under the prior role of its name.
LINKED_PRIORS = (
    "milestone_mean",
    "milestone_ability_scale",
    "milestone_difficulty_scale",
    "step_scale",
    "pair_scale",
    "milestone_cell_scale",
    "link",
)
COVARIATE_PRIORS = ("coefficient", "group_scale", "cluster_concentration")
# Why a bound differs from the milestone method's, by the evidence a model reads.
POOLED_MILESTONES = "pooling draws each milestone rate towards the task's and agent's others"
READS_END_TO_END = "it reads end-to-end runs, which count every path to success"
READS_STEPS = "it reads expert-guided steps, which follow the expert's path"

register(
    Model(
        "end_to_end",
        "none",
        EXACT,
        graded=(END_TO_END,),
        audited_runs=True,
        uses=(END_TO_END,),
        priors=("end_to_end",),
        builder="bayes_eval.exact.builders:end_to_end",
        table_builder="bayes_eval.exact.builders:end_to_end_table",
        differs=READS_END_TO_END,
    )
)
register(
    Model(
        "milestone",
        "none",
        EXACT,
        graded=(MILESTONE_METHOD,),
        uses=(MILESTONE_METHOD,),
        priors=("milestone",),
        builder="bayes_eval.exact.builders:milestones",
        table_builder="bayes_eval.exact.builders:milestones_table",
        differs=POOLED_MILESTONES,
    )
)
register(
    Model(
        "expert_completion",
        "none",
        EXACT,
        graded=(EXPERT_COMPLETION,),
        uses=(EXPERT_COMPLETION,),
        priors=("step",),
        builder="bayes_eval.exact.builders:expert_completion",
        differs=READS_STEPS,
    )
)
register(
    Model(
        "phuong_chain",
        "none",
        EXACT,
        graded=(END_TO_END, MILESTONE_METHOD, EXPERT_COMPLETION, BEST_OF_N, GOLDEN),
        rungs=True,
        uses=(END_TO_END, MILESTONE_METHOD, EXPERT_COMPLETION, BEST_OF_N, GOLDEN),
        priors=("end_to_end", "milestone", "step"),
        builder="bayes_eval.exact.builders:chain",
        differs="the chain rests each task on its best evidence (the method column)",
    )
)
register(
    Model(
        "end_to_end",
        "tasks",
        POOLED,
        graded=(END_TO_END,),
        audited_runs=True,
        population="beta",
        floor_shared=(AGENT,),
        uses=(END_TO_END,),
        priors=("mean", "concentration"),
        optional_priors=(
            "cluster_concentration",
            NEVER_SOLVABLE,
            ALL_SOLVABLE,
            CONCENTRATION_SCALE,
        ),
        clustered=True,
        builder="bayes_eval.pooled.models:end_to_end_model",
        clustered_builder="bayes_eval.pooled.models:clustered_end_to_end_model",
        predicts=(UNRUN_PAIRS,),
        differs=READS_END_TO_END,
    )
)
register(
    Model(
        "milestone",
        "partial",
        POOLED,
        graded=(MILESTONE_METHOD,),
        uses=(MILESTONE_METHOD,),
        priors=(*HIERARCHY, "milestone_concentration"),
        optional_priors=("cluster_concentration",),
        clustered=True,
        builder="bayes_eval.pooled.models:hierarchy_model",
        clustered_builder="bayes_eval.pooled.models:clustered_hierarchy_model",
        predicts=(UNRUN_PAIRS,),
        differs=POOLED_MILESTONES,
    )
)
register(
    Model(
        "expert_completion",
        "steps",
        POOLED,
        graded=(EXPERT_COMPLETION,),
        uses=(EXPERT_COMPLETION,),
        priors=(*HIERARCHY, "step_concentration"),
        builder="bayes_eval.pooled.models:hierarchy_model",
        differs=READS_STEPS,
    )
)
register(
    Model(
        "joint",
        "partial",
        POOLED,
        graded=(END_TO_END,),
        paths=True,
        refuses_sparse_shared=True,
        uses=(END_TO_END, MILESTONE_METHOD),
        requires=(MILESTONE_METHOD,),
        priors=(*HIERARCHY, "milestone_concentration", "bypass_mean", "bypass_concentration"),
        builder="bayes_eval.pooled.models:joint_model",
        predicts=(UNRUN_PAIRS,),
        title="Joint milestone and end-to-end model",
        text=(
            "Milestones and end-to-end runs in one model, with a bypass probability per task "
            "(success by paths the milestones miss) pooled across tasks, so tasks with "
            "milestones only inherit the bypass seen elsewhere. It assumes bypass rates are "
            "alike across an agent's tasks."
        ),
        differs=(
            "it also counts success by paths the milestones miss (the bypass), learnt from "
            "end-to-end runs and pooled across the agent's tasks"
        ),
    )
)
register(
    Model(
        "end_to_end",
        "crossed",
        CROSSED,
        graded=(END_TO_END,),
        audited_runs=True,
        population="logit",
        floor_shared=(AGENT, TASK),
        uses=(END_TO_END,),
        priors=(*CROSSED_PRIORS, "cell_scale"),
        optional_priors=(
            *COVARIATE_PRIORS,
            DISCRIMINATION_SCALE,
            LENGTH_ERROR,
            SURPRISE_SHARE,
            SURPRISE_WIDTH,
        ),
        clustered=True,
        builder="bayes_eval.crossed.model:build_model",
        predicts=(UNRUN_PAIRS, NEW_AGENTS),
        text=(
            "It assumes that additivity: a bound below what 0 successes in all the runs "
            "sharing the pair's agent or task could show rests on it, is marked extrapolated "
            "and decides no verdict unless asked. A learned share of the pairs may surprise "
            "(depart with a wider scale), so that a pair whose own runs contradict the "
            "additive prediction keeps a bound near what they allow. On simulated tables of "
            "other families (Beta rates; a third of the pairs never solvable) the true rate "
            "lay above its 97.5% bound in 2.1% to 3.0% of the pairs without an end-to-end "
            "success (two tables per family); where 3% of the pairs were 3 log-odds more "
            "capable than predicted, in 14% of those surprising pairs that showed a success "
            "(32% with one departure scale; 15% under the true law with every ability "
            "known) and in half of those that showed none, which no run tells from their "
            "neighbours (docs/coverage.md)."
        ),
        differs=READS_END_TO_END,
    )
)
register(
    Model(
        "milestone",
        "crossed",
        CROSSED,
        graded=(MILESTONE_METHOD,),
        uses=(MILESTONE_METHOD,),
        priors=(*CROSSED_PRIORS, "cell_scale", "blocked_share"),
        optional_priors=COVARIATE_PRIORS,
        clustered=True,
        builder="bayes_eval.crossed.model:build_model",
        predicts=(UNRUN_PAIRS, NEW_AGENTS),
        text=(
            "Each milestone's rate departs on its own, and a pair whose every milestone run "
            "failed may be blocked: its milestone runs then say nothing of its rate, which is "
            "the additive prediction. Its bounds rest on milestone runs and carry no "
            "extrapolated mark. On simulated tables whose milestones move together "
            "(logit-normal or Beta rates, or a third of the pairs never solvable) the true "
            "rate lay above its 97.5% bound in 0.2% to 2.1% of the pairs without an "
            "end-to-end success, pooled over "
            "three tables per family (up to 2.7% on one), but in 6% to 11% of the pairs with a "
            "success, and 12% to 18% of those whose rate is above 0.5: its milestones vary "
            "independently where the simulated ones move together, so each milestone's own "
            "bound held but the product's upper tail was too thin. Read its bound on a rate "
            "that is not small beside hierarchical's (docs/coverage.md)."
        ),
        differs=POOLED_MILESTONES,
    )
)
register(
    Model(
        "joint",
        "crossed",
        LINKED,
        paths=True,
        uses=(END_TO_END, MILESTONE_METHOD),
        priors=(*CROSSED_PRIORS, "cell_scale", *LINKED_PRIORS),
        optional_priors=("coefficient", "group_scale"),
        builder="bayes_eval.crossed.linked:build_model",
        predicts=(UNRUN_PAIRS, NEW_AGENTS),
        title="Agents x tasks, milestones linked to end-to-end runs",
        text=(
            "Each pair's guided (milestone) runs measure its milestone competence, and its "
            "end-to-end rate rises with that competence by a slope the data set (link); the "
            "rest of the end-to-end rate, the bypass, has the crossed model's agent x task "
            "structure. It does not multiply milestone rates. It assumes that a pair's "
            "competence on the subtasks carries into its end-to-end runs with one slope "
            "shared by every agent and task."
        ),
        differs=(
            "it reads end-to-end runs, which count every path to success, and links them to "
            "the milestones by a learned slope instead of their product"
        ),
    )
)
