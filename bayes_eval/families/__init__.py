"""One object per family of models: how a model of each is fitted, drawn from its prior
and read back, what its variables mean and what the report says of it.

A registry entry names its family (``bayes_eval.registry.Model.family``); ``family_of``
gives the object: ``exact`` (conjugate posteriors, ``exact``), ``pooled`` (partially
pooled PyMC models, ``pooled``), ``crossed`` and ``linked`` (agents x tasks, ``crossed``;
linked: milestones linked to end-to-end runs). Code above the families asks the object
instead of branching on a model's kind, pooling or family. Each family's PyMC and fitting
code is imported only when a model of it is fitted or read.
"""

from bayes_eval.families.base import Family
from bayes_eval.families.crossed import CrossedFamily
from bayes_eval.families.exact import ExactFamily
from bayes_eval.families.pooled import PooledFamily
from bayes_eval.registry import CROSSED, EXACT, LINKED, POOLED, model_of

__all__ = ["FAMILIES", "Family", "family_of"]

FAMILIES: dict[str, Family] = {
    EXACT: ExactFamily(),
    POOLED: PooledFamily(),
    CROSSED: CrossedFamily(CROSSED),
    LINKED: CrossedFamily(LINKED),
}


def family_of(spec) -> Family:
    """The family object of a spec's model (its registry entry names the family)."""
    return FAMILIES[model_of(spec).family]
