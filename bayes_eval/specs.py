"""Model specs: TOML files holding a model's numbers, never its structure."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import numbers
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bayes_eval.constants import (
    ALL_SOLVABLE,
    DEFAULT_LEVEL,
    LENGTH_ERROR,
    MCMC_ENGINES,
    NEVER_SOLVABLE,
    SURPRISE_SHARE,
    SURPRISE_WIDTH,
)
from bayes_eval.errors import InputError
from bayes_eval.files import read_text
from bayes_eval.registry import MODELS, NEW_AGENTS
from bayes_eval.resources import shipped_dir
from bayes_eval.settings import EXACT_ENGINE, SamplerSettings, check_seed

__all__ = [
    "Prior",
    "Spec",
    "check_level",
    "check_probability",
    "load_spec",
    "shipped_specs",
    "spec_from_toml",
    "spec_text",
]

# Draws kept from exact posteriors, for plots and predictive checks, and the seed of a
# fit that neither the spec nor the user seeds.
DEFAULT_EXACT_DRAWS = 4000
DEFAULT_SEED = 20240901

SCHEMA_VERSION = 1
TOP_KEYS = (
    "schema_version",
    "name",
    "kind",
    "pooling",
    "description",
    "priors",
    "sampler",
    "report",
    "covariates",
    "grader",
)
SAMPLER_KEYS = ("engine", "draws", "tune", "chains", "target_accept", "thin", "seed")
REPORT_KEYS = ("level",)
COVARIATE_KEYS = ("agent", "task", "task_group", "length")
# The priors of a grader's sensitivity and specificity (``[grader]``), before its audit.
GRADER_ROLES = ("sensitivity", "specificity")
DEFAULT_GRADER_PRIOR = {
    "dist": "Beta",
    "alpha": 1.0,
    "beta": 1.0,
    "reason": "uniform: the grader's audit alone says how well it grades",
}
# Means take Beta priors, concentrations and scales LogNormal ones; the crossed model's
# intercept and coefficients (logit scale) Normal ones.
DISTRIBUTIONS = {"Beta": ("alpha", "beta"), "LogNormal": ("mu", "sigma"), "Normal": ("mu", "sigma")}
NORMAL_ROLES = ("ability_mean", "coefficient", "milestone_mean", "link")


@dataclass(frozen=True)
class Prior:
    """A prior by distribution name and parameters.

    ``Beta(alpha, beta)`` for rates and means (``alpha = beta = 0``, Haldane's improper
    prior, only in exact models); ``LogNormal(mu, sigma)`` for concentrations and scales;
    ``Normal(mu, sigma)`` for the crossed model's intercept and coefficients.
    """

    dist: str
    params: dict
    reason: str

    @property
    def alpha(self) -> float:
        """Beta's first shape."""
        return self.params["alpha"]

    @property
    def beta(self) -> float:
        """Beta's second shape."""
        return self.params["beta"]

    def label(self) -> str:
        """Short text for provenance, e.g. ``Beta(0.5, 0.5)``."""
        values = ", ".join(f"{self.params[k]:g}" for k in DISTRIBUTIONS[self.dist])
        return f"{self.dist}({values})"

    def distribution(self):
        """The prior as a frozen scipy distribution (Beta, LogNormal or Normal)."""
        from scipy import stats

        if self.dist == "Beta":
            return stats.beta(self.alpha, self.beta)
        if self.dist == "LogNormal":
            return stats.lognorm(s=self.params["sigma"], scale=math.exp(self.params["mu"]))
        return stats.norm(self.params["mu"], self.params["sigma"])


@dataclass(frozen=True)
class Spec:
    """A validated model spec.

    Attributes
    ----------
    name, kind, pooling, description : str
    priors : dict of str to Prior
        By role: ``end_to_end``, ``milestone`` or ``step``.
    sampler : SamplerSettings
        How the model samples (``engine``, ``draws``, ...; ``bayes_eval.settings``).
    level : float
        Default one-sided credible level of the reported bounds.
    source : str
        The file the spec came from.
    text : str
        The TOML text, kept verbatim for provenance.
    covariates : dict
        A crossed model's ``[covariates]``: ``agent`` and ``task`` as tuples of
        ``bayes_eval.evidence.covariates.Term``, ``task_group`` and ``length`` as text.
    grader : dict of str to Prior
        ``[grader]``: the Beta priors of a grader's ``sensitivity`` and ``specificity``
        before its audit (``fit(..., audit=...)``); uniform unless the spec says.
    """

    name: str
    kind: str
    pooling: str
    description: str
    priors: dict[str, Prior]
    sampler: SamplerSettings = field(default_factory=SamplerSettings)
    level: float = DEFAULT_LEVEL
    source: str = ""
    text: str = ""
    covariates: dict = field(default_factory=dict)
    seed: int = DEFAULT_SEED
    grader: dict[str, Prior] = field(default_factory=lambda: _grader_priors("", {}))

    @property
    def draws(self) -> int:
        """Posterior draws kept per chain (one in ``thin`` of those sampled)."""
        return self.sampler.draws // self.sampler.thin

    @property
    def exact(self) -> bool:
        """True for conjugate models (no MCMC)."""
        return MODELS[self.kind, self.pooling].exact


# What names a model: a shipped spec's name, a spec file, or a Spec.
ModelSource = str | os.PathLike | Spec


def shipped_specs() -> dict[str, Path]:
    """Names and paths of the specs shipped with the package."""
    return {p.stem: p for p in sorted(shipped_dir("models").glob("*.toml"))}


def load_spec(spec: ModelSource) -> Spec:
    """Load a spec by shipped name (``"phuong2024"``) or by path to a TOML file.

    Raises
    ------
    InputError
        Unknown name, unreadable file, unknown key (with the intended key suggested),
        wrong type or out-of-range value.
    """
    if isinstance(spec, Spec):
        return spec
    text_name = str(spec)
    path = Path(text_name)
    shipped = shipped_specs()
    if text_name in shipped and not path.exists():
        path = shipped[text_name]
    elif not path.exists():
        close = difflib.get_close_matches(text_name, list(shipped), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise InputError(
            f"{text_name}: no such model{hint}; shipped: {', '.join(shipped)}, or give a .toml path"
        )
    return spec_from_toml(read_text(path, str(path), "spec file"), str(path))


def spec_from_toml(text: str, source: str) -> Spec:
    """Parse and validate a spec's TOML text; ``source`` names it in messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not valid TOML ({exc})") from exc
    return _validate(data, source, text)


def spec_text(spec: Spec) -> str:
    """The TOML text of ``spec`` as it stands: its own text where that text gives this
    very spec (comments and layout kept), else the spec written out anew, so that a spec
    changed in Python (``dataclasses.replace(spec, priors=...)``) is saved as itself."""
    if spec.text:
        try:
            parsed = spec_from_toml(spec.text, spec.source)
        except InputError:
            parsed = None
        if parsed is not None and dataclasses.replace(parsed, text=spec.text) == spec:
            return spec.text
    return _toml(spec)


def _toml(spec: Spec) -> str:
    """``spec`` as TOML text, which ``spec_from_toml`` reads back to an equal spec."""
    lines = [f"schema_version = {SCHEMA_VERSION}"]
    for key in ("name", "kind", "pooling", "description"):
        lines.append(f"{key} = {_toml_value(getattr(spec, key))}")
    for role, prior in spec.priors.items():
        lines += ["", f"[priors.{role}]", f"dist = {_toml_value(prior.dist)}"]
        lines += [
            f"{name} = {_toml_value(prior.params[name])}" for name in DISTRIBUTIONS[prior.dist]
        ]
        lines.append(f"reason = {_toml_value(prior.reason)}")
    sampler = {key: getattr(spec.sampler, key) for key in SAMPLER_KEYS if key != "seed"}
    if spec.sampler.thin == 1:  # written only where a spec thins
        del sampler["thin"]
    if spec.exact:
        sampler = {"engine": spec.sampler.engine, "draws": spec.sampler.draws}
    lines += ["", "[sampler]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in sampler.items()]
    lines += [f"seed = {spec.seed}", "", "[report]", f"level = {_toml_value(spec.level)}"]
    for role, prior in spec.grader.items():
        if prior != _grader_priors("", {})[role]:
            lines += ["", f"[grader.{role}]", f"dist = {_toml_value(prior.dist)}"]
            lines += [f"{name} = {_toml_value(prior.params[name])}" for name in ("alpha", "beta")]
            lines.append(f"reason = {_toml_value(prior.reason)}")
    if spec.covariates:
        lines += ["", "[covariates]"]
        for key, value in spec.covariates.items():
            text = [term.text for term in value] if key in ("agent", "task") else value
            lines.append(f"{key} = {_toml_value(text)}")
    return "\n".join(lines) + "\n"


def _toml_value(value) -> str:
    """A TOML value: a JSON string is a TOML basic string, a float keeps its point."""
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):  # numpy's floats too, written as plain floats
        return repr(float(value))
    return json.dumps(value, ensure_ascii=False)


def check_probability(value, what: str) -> float:
    """Validate a level, threshold or acceptance rate: a number strictly between 0 and 1."""
    number = _number(value, what)
    if not 0.0 < number < 1.0:
        raise InputError(f"{what}: {value} must lie strictly between 0 and 1")
    return number


def check_level(value, what: str) -> float:
    """Validate the level of a one-sided upper bound: a number with 0.5 < level < 1 (below
    0.5 the "upper bound" lies under the median, and a verdict on it would be reversed)."""
    number = _number(value, what)
    if not 0.5 < number < 1.0:
        raise InputError(
            f"{what}: {value} must lie strictly between 0.5 and 1 (the one-sided credible "
            "level of an upper bound, for example 0.975)"
        )
    return number


def _number(value, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: '{value}' is not a number") from None


def _unknown_keys(where: str, table: dict, allowed) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InputError(f"{where}: unknown key '{key}'{hint}; allowed: {', '.join(allowed)}")


def _get(where: str, table: dict, key: str, kind, required: bool = True):
    if key not in table:
        if required:
            raise InputError(f"{where}: missing key '{key}'")
        return None
    value = table[key]
    if kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)  # numpy's integers too
    if kind is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InputError(f"{where}: '{key}' must be a {kind.__name__}, got {value!r}")
    if kind is float and not math.isfinite(value):
        raise InputError(f"{where}: '{key}' must be a finite number, got {value!r}")
    return value


def _validate(data: dict, source: str, text: str) -> Spec:
    _unknown_keys(source, data, TOP_KEYS)
    version = _get(source, data, "schema_version", int)
    if version != SCHEMA_VERSION:
        raise InputError(
            f"{source}: schema_version {version} is not supported (use {SCHEMA_VERSION})"
        )
    name = _get(source, data, "name", str)
    kind = _get(source, data, "kind", str)
    kinds = list(dict.fromkeys(kind for kind, _ in MODELS))
    if kind not in kinds:
        close = difflib.get_close_matches(kind, kinds, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise InputError(f"{source}: kind '{kind}' is unknown{hint}; known: {', '.join(kinds)}")
    poolings = [p for k, p in MODELS if k == kind]
    pooling = _get(source, data, "pooling", str, required=False) or poolings[0]
    if pooling not in poolings:
        raise InputError(
            f"{source}: pooling '{pooling}' is not available for kind {kind}; "
            f"available: {', '.join(poolings)}"
        )
    description = _get(source, data, "description", str, required=False) or ""
    priors_table = _get(source, data, "priors", dict)
    entry = MODELS[kind, pooling]
    needed, optional = entry.priors, entry.optional_priors
    _unknown_keys(f"{source} [priors]", priors_table, (*needed, *optional))
    covariates = _covariates(source, data, NEW_AGENTS in entry.predicts)
    if covariates.get("agent") or covariates.get("task"):
        needed = (*needed, "coefficient")
    if covariates.get("task_group"):
        needed = (*needed, "group_scale")
    priors = {}
    for role in (*needed, *(r for r in optional if r in priors_table)):
        if role not in priors_table:
            raise InputError(f"{source}: missing prior [priors.{role}] for {kind}/{pooling}")
        table = _get(f"{source} [priors]", priors_table, role, dict)
        priors[role] = _prior(f"{source} [priors.{role}]", table, role, exact=entry.exact)
    if LENGTH_ERROR in priors and not covariates.get("length"):
        raise InputError(
            f"{source}: [priors.{LENGTH_ERROR}] is the error of the recorded task length: "
            "it needs [covariates] length (one of the task terms)"
        )
    if (SURPRISE_SHARE in priors) != (SURPRISE_WIDTH in priors):
        given, missing = (
            (SURPRISE_SHARE, SURPRISE_WIDTH)
            if SURPRISE_SHARE in priors
            else (SURPRISE_WIDTH, SURPRISE_SHARE)
        )
        raise InputError(
            f"{source}: [priors.{given}] needs [priors.{missing}]: surprising pairs are a "
            "share of the pairs and the scale of their extra departure, both or neither"
        )
    if ALL_SOLVABLE in priors and NEVER_SOLVABLE not in priors:
        raise InputError(
            f"{source}: [priors.{ALL_SOLVABLE}] needs [priors.{NEVER_SOLVABLE}]: it is the "
            "chance that an agent has no task it never solves"
        )
    table = dict(_get(source, data, "sampler", dict, required=False) or {})
    _unknown_keys(f"{source} [sampler]", table, SAMPLER_KEYS)
    try:
        seed = check_seed(table.pop("seed", DEFAULT_SEED))
    except InputError as exc:
        raise InputError(f"{source} [sampler] {exc}") from None
    engines = (EXACT_ENGINE,) if entry.exact else MCMC_ENGINES
    engine = table.setdefault("engine", engines[0])
    if engine not in engines:
        raise InputError(
            f"{source} [sampler]: engine '{engine}' does not fit {kind}/{pooling}; "
            f"use one of: {', '.join(engines)}"
        )
    exact = {"draws": DEFAULT_EXACT_DRAWS} if entry.exact else {}
    sampler = SamplerSettings.from_table(table, f"{source} [sampler]", defaults=exact)
    report = _get(source, data, "report", dict, required=False) or {}
    _unknown_keys(f"{source} [report]", report, REPORT_KEYS)
    level = DEFAULT_LEVEL
    if "level" in report:
        level = check_level(
            _get(f"{source} [report]", report, "level", float), f"{source} [report] level"
        )
    grader = _grader_priors(source, _get(source, data, "grader", dict, required=False) or {})
    return Spec(
        name,
        kind,
        pooling,
        description,
        priors,
        sampler,
        level,
        source,
        text,
        covariates,
        seed,
        grader,
    )


def _grader_priors(source: str, table: dict) -> dict[str, Prior]:
    """``[grader]``'s priors of sensitivity and specificity, uniform where not given."""
    _unknown_keys(f"{source} [grader]", table, GRADER_ROLES)
    priors = {}
    for role in GRADER_ROLES:
        given = _get(f"{source} [grader]", table, role, dict, required=False)
        where = f"{source} [grader.{role}]"
        priors[role] = _prior(where, given or DEFAULT_GRADER_PRIOR, role, exact=False)
    return priors


def _covariates(source: str, data: dict, takes_covariates: bool) -> dict:
    """A crossed spec's ``[covariates]``, with its terms parsed (``crossed.covariates``);
    refused for a model that does not take them (``takes_covariates``)."""
    from bayes_eval.evidence.covariates import parse_term

    table = _get(source, data, "covariates", dict, required=False)
    if table is None:
        return {}
    where = f"{source} [covariates]"
    if not takes_covariates:
        raise InputError(f"{where}: covariates apply to crossed models only (pooling crossed)")
    _unknown_keys(where, table, COVARIATE_KEYS)
    out = {}
    for key in ("agent", "task"):
        terms = _get(where, table, key, list, required=False) or []
        parsed = tuple(parse_term(text, f"{where} {key}") for text in terms)
        names = [term.text for term in parsed]
        if len(set(names)) < len(names):
            raise InputError(f"{where}: {key} names a term twice")
        out[key] = parsed
    for key in ("task_group", "length"):
        value = _get(where, table, key, str, required=False)
        if value is not None:
            out[key] = value.strip()
    length = out.get("length")
    if length is not None and length not in [term.text for term in out["task"]]:
        raise InputError(
            f"{where}: length '{length}' must be one of the task terms "
            f"({', '.join(term.text for term in out['task']) or 'none given'})"
        )
    return out


def _prior(where: str, table: dict, role: str, exact: bool) -> Prior:
    dist = _get(where, table, "dist", str)
    wanted = "Beta"
    if role.endswith(("concentration", "scale", "width")):
        wanted = "LogNormal"
    elif role in NORMAL_ROLES:
        wanted = "Normal"
    if dist != wanted:
        raise InputError(f'{where}: dist must be "{wanted}" for {role}')
    names = DISTRIBUTIONS[dist]
    _unknown_keys(where, table, ("dist", *names, "reason"))
    params = {name: _get(where, table, name, float) for name in names}
    if dist == "Beta" and not (min(params.values()) >= 0 if exact else min(params.values()) > 0):
        rule = ">= 0 (0 is Haldane's prior)" if exact else "> 0 (MCMC needs a proper prior)"
        raise InputError(f"{where}: alpha and beta must be {rule}")
    if dist in ("LogNormal", "Normal") and not params["sigma"] > 0:
        raise InputError(f"{where}: sigma must be > 0")
    reason = _get(where, table, "reason", str).strip()
    if not reason:
        raise InputError(f"{where}: 'reason' must say why this prior was chosen")
    return Prior(dist, params, reason)
