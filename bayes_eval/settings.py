"""The sampler's settings and a fit's options: frozen objects, checked once, when made.

A spec's ``[sampler]`` table becomes a ``SamplerSettings``; a fit's overrides (a mapping
from Python, the flags on the command line) make a new one from it with
``SamplerSettings.updated``. Everything below the front door (the pooled and crossed
fits, the retry loop, the engines) reads settings already known good; a fit's level,
seed, sampler, side tables and predictions travel together as one ``FitOptions``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from bayes_eval.constants import MCMC_ENGINES, SAMPLER_LIMITS
from bayes_eval.errors import InputError

__all__ = [
    "EXACT_ENGINE",
    "SEED_STREAMS",
    "FitOptions",
    "SamplerInput",
    "SamplerSettings",
    "check_seed",
    "stream_rng",
    "stream_seed",
]

# The engine of conjugate models: exact posteriors, no MCMC.
EXACT_ENGINE = "exact"
# PyMC's names (``pymc.sample``) for the settings they mean here.
PYMC_NAMES = {"nuts_sampler": "engine"}


@dataclass(frozen=True)
class SamplerSettings:
    """How a fit samples, checked when made.

    Attributes
    ----------
    engine : str
        ``exact`` for conjugate models; else one of ``nutpie``, ``pymc``, ``numpyro`` or
        ``auto`` (``bayes_eval.inference.engines.choose_engine``).
    draws : int
        Draws per chain after the warm-up (MCMC), or from an exact posterior.
    tune : int
        Warm-up draws per chain (MCMC).
    chains : int
        Chains (MCMC).
    target_accept : float
        NUTS's target acceptance rate, strictly between 0 and 1.
    thin : int
        Every how many of a chain's draws one is kept (MCMC; the last of each ``thin``):
        where successive draws are correlated, the kept ones lose little of their
        effective size and every later step reads a ``thin``-th of the numbers.

    Raises
    ------
    InputError
        An unknown engine, a number that is not whole or lies outside its range
        (``constants.SAMPLER_LIMITS``), or a target_accept outside (0, 1); the message
        names the setting.
    """

    engine: str = MCMC_ENGINES[0]
    draws: int = 2000
    tune: int = 1000
    chains: int = 4
    target_accept: float = 0.9
    thin: int = 1

    def __post_init__(self) -> None:
        engines = (EXACT_ENGINE, *MCMC_ENGINES)
        if self.engine not in engines:
            raise InputError(f"engine: '{self.engine}' is not one of {', '.join(engines)}")
        for name in ("draws", "tune", "chains", "thin"):
            object.__setattr__(self, name, _whole(getattr(self, name), name))
        if self.thin > 1 and self.engine == EXACT_ENGINE:
            raise InputError("thin: exact draws are independent; thin applies to MCMC only")
        if self.thin > self.draws:
            raise InputError(f"thin: {self.thin} is more than the {self.draws} draws")
        target = self.target_accept
        if isinstance(target, bool) or not isinstance(target, numbers.Real):
            raise InputError(f"target_accept: {target!r} is not a number")
        if not 0 < target < 1:  # nan too
            raise InputError(f"target_accept: {target:g} must lie strictly between 0 and 1")
        object.__setattr__(self, "target_accept", float(target))

    @property
    def kept(self) -> slice:
        """The draws of a chain that are kept: the last of every ``thin``."""
        return slice(self.thin - 1, None, self.thin)

    @classmethod
    def from_table(cls, table: Mapping, where: str, defaults: Mapping = ()) -> SamplerSettings:
        """Settings from a mapping of some of them (a spec's ``[sampler]``), the rest
        from ``defaults`` or the class's; errors start with ``where``."""
        try:
            return cls(**{**dict(defaults), **_known(table)})
        except InputError as exc:
            raise InputError(f"{where} {exc}") from None

    def updated(self, overrides: SamplerInput) -> SamplerSettings:
        """These settings with ``overrides`` in place: a mapping of some of them (by
        these names or PyMC's, ``nuts_sampler`` for ``engine``), or settings to use
        whole; None keeps these."""
        if overrides is None:
            return self
        if isinstance(overrides, SamplerSettings):
            return overrides
        if not isinstance(overrides, Mapping):
            raise InputError(
                f"sampler: {overrides!r} is not a mapping of settings or a SamplerSettings"
            )
        return replace(self, **_known(overrides))


# What a fit's ``sampler`` argument may be: overrides by name, or settings used whole.
SamplerInput = Mapping[str, object] | SamplerSettings | None


@dataclass(frozen=True)
class FitOptions:
    """What a fit is asked besides its evidence and spec, checked and with the spec's
    defaults in place (``bayes_eval.fit``): the one-sided ``level`` and ``seed``, the
    ``sampler`` settings, the crossed models' covariate side tables (``side``:
    ``{"agent": table, "task": table}``) and the new agents they predict (``predict``:
    ``name,column=value,...`` texts)."""

    level: float
    seed: int
    sampler: SamplerSettings | None = None
    side: Mapping = field(default_factory=dict)
    predict: tuple = ()


# A fit's random numbers, each stream seeded with the fit's seed plus its offset: the
# rates an MCMC fit draws back from its kept draws, the posterior predictive replicates,
# the prior's draws and its predictive replicates, the draws the predictive checks and a
# horizon forecast average over, and the PIT's uniforms. (An exact fit's posterior draws
# take the seed itself; SBC's simulations theirs, ``inference.sweep.replicate_rng``.)
SEED_STREAMS = {
    "rates": 1,
    "replicates": 2,
    "prior": 3,
    "checks": 3,
    "forecast": 3,
    "prior replicates": 4,
    "pit": 5,
}


def stream_rng(seed: int, stream: str):
    """The generator of the stream ``stream`` of a fit of seed ``seed`` (``SEED_STREAMS``)."""
    import numpy as np

    return np.random.default_rng(stream_seed(seed, stream))


def stream_seed(seed: int, stream: str) -> int:
    """The seed of the stream ``stream`` of a fit of seed ``seed`` (``SEED_STREAMS``)."""
    return seed + SEED_STREAMS[stream]


def check_seed(value, name: str = "seed") -> int:
    """A seed numpy and nutpie take: a whole number in ``SAMPLER_LIMITS["seed"]``;
    errors name it ``name``."""
    return _whole(value, name, "seed")


def _known(table: Mapping) -> dict:
    """``table`` by these names (PyMC's read as theirs), refused where it names a setting
    that does not exist or one setting twice."""
    allowed = [f.name for f in fields(SamplerSettings)]
    out, given_as = {}, {}
    for key, value in table.items():
        name = PYMC_NAMES.get(key, key)
        if name not in allowed:
            names = ", ".join([*allowed, *PYMC_NAMES])
            raise InputError(f"sampler: unknown setting '{key}'; allowed: {names}")
        if name in out:
            raise InputError(f"sampler: {name} is given twice (as {given_as[name]} and {key})")
        out[name], given_as[name] = value, key
    return out


def _whole(value, name: str, limits: str | None = None) -> int:
    low, high = SAMPLER_LIMITS[limits or name]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name}: {value!r} is not a whole number")
    if not low <= value <= high:
        raise InputError(f"{name}: {value} must lie between {low} and {high}")
    return int(value)  # numpy's integers too
