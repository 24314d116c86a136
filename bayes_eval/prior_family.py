"""The family of priors a bound is defended against: the spec's own and its neighbours.

A member is the spec with some priors replaced:

* ``uniform``: every Beta prior (a rate or a mean) Beta(1, 1);
* ``jeffreys``: every Beta prior Beta(1/2, 1/2), Jeffreys' prior for a binomial rate;
* ``sceptical ROLE``, for each prior the spec has: that prior holding twice as hard to
  its centre, sceptical of what the data say. A Beta's pseudo-counts doubled (its mean
  kept, its strength ``alpha + beta`` twice); a LogNormal concentration's median raised,
  and a LogNormal scale's lowered, by a factor ``exp(sigma)`` (the units pooled harder);
  a Normal's sigma halved;
* ``permissive ROLE``: the opposite move, the data let further: a Beta's pseudo-counts
  halved, a concentration's median lowered and a scale's raised by ``exp(sigma)``, a
  Normal's sigma doubled.

Priors reached twice make one member with both names (``jeffreys = permissive
end_to_end`` where the spec's prior is uniform); a move that changes nothing (uniform
where the spec's prior is uniform, the moves of Haldane's Beta(0, 0), which has no
pseudo-counts to scale) is left out. The
family is small on purpose: each member is a prior a reviewer could propose, one change
at a time, and a verdict that holds under all of them does not rest on the spec's choice.
"""

from __future__ import annotations

import dataclasses

from bayes_eval.specs import Prior, Spec

__all__ = [
    "JEFFREYS",
    "OWN",
    "PERMISSIVE",
    "SCEPTICAL",
    "UNIFORM",
    "Member",
    "beta_family",
    "prior_family",
]

OWN, UNIFORM, JEFFREYS, SCEPTICAL, PERMISSIVE = (
    "spec",
    "uniform",
    "jeffreys",
    "sceptical",
    "permissive",
)
REFERENCE_BETAS = {UNIFORM: (1.0, 1.0), JEFFREYS: (0.5, 0.5)}
# How far a member moves its prior: pseudo-counts times 2, or a median times exp(sigma).
STRENGTH_FACTOR = 2.0


@dataclasses.dataclass(frozen=True)
class Member:
    """One prior of the family.

    Attributes
    ----------
    name : str
        ``spec``, ``uniform``, ``jeffreys``, ``sceptical ROLE`` or ``permissive ROLE``.
    spec : Spec
        The spec with this member's priors (and its text written anew).
    changed : dict of str to Prior
        The priors it replaced, by role (empty for the spec's own).
    """

    name: str
    spec: Spec
    changed: dict

    def label(self) -> str:
        """What the member changed, e.g. ``end_to_end Beta(0.5, 0.5)``."""
        if not self.changed:
            return "the spec's priors"
        return "; ".join(f"{role} {prior.label()}" for role, prior in self.changed.items())


def prior_family(spec: Spec) -> list[Member]:
    """The spec's own priors and their neighbours (the module docstring), without repeats."""
    candidates = [(OWN, {})]
    betas = [role for role, prior in spec.priors.items() if prior.dist == "Beta"]
    for name, (a, b) in REFERENCE_BETAS.items():
        reference = {role: _moved(spec.priors[role], "Beta", alpha=a, beta=b) for role in betas}
        candidates.append((name, reference))
    for role, prior in spec.priors.items():
        for direction in (SCEPTICAL, PERMISSIVE):
            candidates.append((f"{direction} {role}", {role: _neighbour(prior, role, direction)}))
    names, seen = [], []
    for name, changed in candidates:
        changed = {r: p for r, p in changed.items() if p.params != spec.priors[r].params}
        if name != OWN and not changed:
            continue
        if changed in seen:  # the same priors reached twice: one member, both names
            names[seen.index(changed)] += f" = {name}"
            continue
        names.append(name)
        seen.append(changed)
    return [
        Member(name, dataclasses.replace(spec, priors={**spec.priors, **changed}, text=""), changed)
        for name, changed in zip(names, seen, strict=True)
    ]


def beta_family(alpha: float, beta: float) -> dict[str, tuple[float, float]]:
    """The family of one Beta prior as ``{member: (alpha, beta)}``: the prior itself
    (``given``), uniform, Jeffreys, sceptical and permissive, repeats merged by name."""
    prior = Prior("Beta", {"alpha": float(alpha), "beta": float(beta)}, "")
    spec = Spec("beta", "end_to_end", "none", "", {"end_to_end": prior})
    return {
        member.name.replace(" end_to_end", "").replace(OWN, "given"): (
            member.spec.priors["end_to_end"].alpha,
            member.spec.priors["end_to_end"].beta,
        )
        for member in prior_family(spec)
    }


def _neighbour(prior: Prior, role: str, direction: str) -> Prior:
    """The sceptical or permissive move of one prior (the module docstring)."""
    harder = direction == SCEPTICAL
    if prior.dist == "Beta":
        factor = STRENGTH_FACTOR if harder else 1.0 / STRENGTH_FACTOR
        return _moved(prior, "Beta", alpha=prior.alpha * factor, beta=prior.beta * factor)
    mu, sigma = prior.params["mu"], prior.params["sigma"]
    if prior.dist == "Normal":
        factor = 1.0 / STRENGTH_FACTOR if harder else STRENGTH_FACTOR
        return _moved(prior, "Normal", mu=mu, sigma=sigma * factor)
    pools_harder = sigma if role.endswith("concentration") else -sigma
    return _moved(
        prior, "LogNormal", mu=mu + (pools_harder if harder else -pools_harder), sigma=sigma
    )


def _moved(prior: Prior, dist: str, **params) -> Prior:
    params = {name: float(value) for name, value in params.items()}
    return Prior(dist, params, f"prior-sensitivity member (the spec's: {prior.label()})")
