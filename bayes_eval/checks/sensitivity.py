"""Prior sensitivity of every bound: each pair's bounds under the family of priors
(``bayes_eval.prior_family``), and whether its verdict at ``tau`` holds under all of them.

* Exact models refit every member, exactly: a member is another conjugate posterior.
* MCMC models (pooled and crossed) reweight the fit's draws by the ratio of the member's
  prior density to the spec's at the draws of the parameters that prior governs, with
  Pareto-smoothed importance sampling (``arviz_stats`` ``psislw``). Where the Pareto
  ``k`` of the weights exceeds ``KHAT_LIMIT`` the reweighted bounds cannot be trusted and
  the member is refitted (``refit``); without a way to refit, its bounds are left empty
  and the row says why. Each bound also carries its power-scaling diagnostic
  (``arviz_stats.psense`` of ``p_task``, Kallioinen et al. 2024): the rate at which the
  posterior moves as the spec's prior is raised to a power near 1; above
  ``PSENSE_LIMIT`` the prior is informative for that pair.

A pair is ``prior_sensitive`` at ``tau`` when its verdict (upper bound below ``tau``,
lower bound above it, or neither) differs between members; the summary names the members
that flip it and the end-to-end trials after which every member probably decides
(``plan.trials_to_decide``, the largest over the members).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayes_eval.families import family_of
from bayes_eval.messages import collected
from bayes_eval.plan import trials_to_decide
from bayes_eval.prior_family import OWN, Member, prior_family
from bayes_eval.results.summary import format_number
from bayes_eval.specs import Spec, check_level, check_probability

if TYPE_CHECKING:
    from bayes_eval.results.posterior import Posterior

__all__ = [
    "KHAT_LIMIT",
    "PSENSE_LIMIT",
    "Sensitivity",
    "prior_sensitivity",
    "PairDraws",
    "reweighted_bounds",
]

# Pareto k above which importance weights do not give trustworthy estimates (Vehtari et
# al. 2024, for the few thousand draws of a fit), and the power-scaling sensitivity above
# which a prior is called informative (Kallioinen et al. 2024).
KHAT_LIMIT = 0.7
PSENSE_LIMIT = 0.05
# How a member's bounds were found.
EXACT, FITTED, REWEIGHTED, REFITTED, UNTRUSTED = (
    "exact",
    "fitted",
    "reweighted",
    "refitted",
    "not trusted",
)
BOUND_COLUMNS = ("mean", "sd", "lower", "upper")
PAIR_COLUMNS = (
    "agent",
    "task",
    "upper",
    "upper_low",
    "upper_high",
    "low_member",
    "high_member",
    "psense",
    "untrusted",
)
FLIP_COLUMNS = ("prior_sensitive", "flipped_by", "robust_trials")


@dataclass(frozen=True)
class Sensitivity:
    """The bounds of a fit under the prior family.

    Attributes
    ----------
    bounds : pandas.DataFrame
        One row per (agent, task, member): ``member``, ``priors`` (what it changed),
        ``method`` (a fallback chain's rung can change with the prior),
        ``how`` (``exact``; ``fitted`` for an MCMC fit's own, ``reweighted``,
        ``refitted`` or ``not trusted``),
        ``pareto_k`` (reweighting), ``mean``, ``sd``, ``lower``, ``upper`` and, with a
        threshold, ``verdict`` (``below``, ``above`` or ``undecided``).
    pairs : pandas.DataFrame
        One row per (agent, task) with a bound: ``upper`` (the spec's), ``upper_low`` and
        ``upper_high`` (the range over the family), ``psense`` (MCMC fits), and with a
        threshold ``prior_sensitive``, ``flipped_by`` and ``robust_trials``.
    threshold, level : float
    """

    bounds: pd.DataFrame
    pairs: pd.DataFrame
    threshold: float | None
    level: float

    def note(self, agent: str, task: str) -> str:
        """The words on a prior-sensitive pair, for its provenance and its sentence
        (empty where its verdict holds under the family)."""
        return self._notes.get((agent, task), "")

    @functools.cached_property
    def _notes(self) -> dict:
        """``note`` of every prior-sensitive pair, by (agent, task)."""
        if self.threshold is None:
            return {}
        notes = {}
        for row in self.pairs[self.pairs["prior_sensitive"].astype(bool)].itertuples():
            more = (
                f"about {int(row.robust_trials):,} more end-to-end trials would decide it "
                "under every prior"
                if pd.notna(row.robust_trials)
                else "no number of end-to-end trials within the planner's reach settles it"
            )
            notes[(row.agent, row.task)] = (
                f"PRIOR-SENSITIVE at τ = {self.threshold:g}: {row.flipped_by}; {more}"
            )
        return notes

    def mark(self, summary: pd.DataFrame) -> pd.DataFrame:
        """``summary`` with the family's range of each bound (``prior_upper_low``,
        ``prior_upper_high``), its power-scaling diagnostic (``prior_psense``) and, with a
        threshold, ``prior_sensitive``, the provenance naming the prior that flips it."""
        pairs = self.pairs.set_index(["agent", "task"])
        keys = list(zip(summary["agent"], summary["task"], strict=True))
        out = summary.copy()
        for column, source in (
            ("prior_upper_low", "upper_low"),
            ("prior_upper_high", "upper_high"),
            ("prior_psense", "psense"),
        ):
            out[column] = [pairs[source].get(key, math.nan) for key in keys]
        if self.threshold is not None:
            flags = [pairs["prior_sensitive"].get(key, pd.NA) for key in keys]
            out["prior_sensitive"] = pd.array(flags, dtype="boolean")
            notes = [self.note(agent, task) for agent, task in keys]
            out["provenance"] = [
                text + (f"; {note}" if note else "")
                for text, note in zip(out["provenance"], notes, strict=True)
            ]
        return out


def prior_sensitivity(
    posterior: Posterior,
    threshold: float | None = None,
    *,
    level: float | None = None,
    refit: Callable[[Spec], object] | None = None,
) -> Sensitivity:
    """The bounds of ``posterior`` under each member of its spec's prior family.

    Parameters
    ----------
    posterior : bayes_eval.Posterior
    threshold : float, optional
        The ``tau`` of the verdicts; without it, bounds and ranges only.
    level : float, optional
        One-sided credible level; the fit's by default.
    refit : callable, optional
        MCMC fits: ``refit(spec)`` fits the member's spec to the same evidence (the
        same side tables and sampler) and returns its ``Posterior``; used where the
        reweighting's Pareto ``k`` exceeds ``KHAT_LIMIT``. Exact fits refit themselves.
    """
    level = posterior.level if level is None else check_level(level, "level")
    tau = None if threshold is None else check_probability(threshold, "threshold")
    own = posterior.summary(level=level, threshold=tau)
    members = prior_family(posterior.spec)
    frames = [_from_summary(own, members[0], FITTED if posterior.is_mcmc else EXACT)]
    if posterior.is_mcmc:  # read once: every member reweights the same draws
        roles, values = _variable_roles(posterior), PairDraws.of(_pair_draws(posterior, own))
    for member in members[1:]:
        if not posterior.is_mcmc:
            frames.append(_exact_member(posterior, member, level))
        elif not set(roles.values()).isdisjoint(member.changed):
            log_ratio = _log_ratio(posterior, member, roles)
            frames.append(_reweighted(own, member, values, log_ratio, level, refit))
        # else a prior this fit does not use (a cluster's, without clusters): skipped
    bounds = pd.concat(frames, ignore_index=True)
    bounds = bounds[bounds["upper"].notna() | (bounds["how"] == UNTRUSTED)]
    if tau is not None:
        bounds["verdict"] = _verdicts(bounds, tau)
    psense = _psense(posterior) if posterior.is_mcmc else None
    pairs = _pairs(bounds, psense, tau, level)
    return Sensitivity(bounds.reset_index(drop=True), pairs, tau, level)


def _from_summary(summary: pd.DataFrame, member: Member, how: str, k=math.nan) -> pd.DataFrame:
    table = summary[["agent", "task", "method", *BOUND_COLUMNS]].copy()
    table.insert(2, "member", member.name)
    table.insert(3, "priors", member.label())
    table.insert(4, "how", how)
    table.insert(5, "pareto_k", k)
    return table


def _exact_member(posterior, member: Member, level: float) -> pd.DataFrame:
    """A member of an exact fit: the same conjugate fit under the member's priors."""
    from bayes_eval.fit import fit

    with collected():  # the fit's own notes said what its rows are
        refitted = fit(posterior.evidence, member.spec, level=level, seed=posterior.seed)
    return _from_summary(refitted.summary(level=level), member, EXACT)


def _pair_draws(posterior, own: pd.DataFrame) -> np.ndarray:
    """The fit's draws of ``p_task`` (draws x pairs), the pairs in the order of ``own``."""
    draws = posterior.draws["p_task"]
    pairs = zip(own["agent"], own["task"], strict=True)
    at = [(_index(draws, "agent", a), _index(draws, "task", t)) for a, t in pairs]
    values = draws.values.reshape(-1, *draws.shape[2:])
    return np.stack([values[:, i, j] for i, j in at], axis=1)


def _reweighted(own, member: Member, values, log_ratio, level, refit) -> pd.DataFrame:
    """A member of an MCMC fit by importance reweighting of the pairs' draws ``values``
    by ``log_ratio``, refitted where the Pareto k of the weights says the reweighting
    cannot be trusted."""
    bounds, k = reweighted_bounds(values, log_ratio, level)
    if k > KHAT_LIMIT:
        if refit is None:
            table = _from_summary(own, member, UNTRUSTED, k)
            table[list(BOUND_COLUMNS)] = np.nan
            return table
        with collected():
            refitted = refit(member.spec)
        return _from_summary(refitted.summary(level=level), member, REFITTED, k)
    table = _from_summary(own, member, REWEIGHTED, k)
    for name in BOUND_COLUMNS:
        table[name] = np.where(own["upper"].notna(), bounds[name], np.nan)
    return table


@dataclass(frozen=True)
class PairDraws:
    """Each pair's draws as a contiguous row, those without a missing draw sorted once for
    every member's weighted quantiles (``reweighted_bounds``)."""

    rows: np.ndarray
    whole: np.ndarray
    order: np.ndarray
    ordered: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> PairDraws:
        """``values``: draws x pairs."""
        rows = np.ascontiguousarray(values.T)
        whole = ~np.isnan(rows).any(axis=1)
        order = np.argsort(rows[whole], axis=1)
        return cls(rows, whole, order, np.take_along_axis(rows[whole], order, axis=1))


def reweighted_bounds(values, log_ratio: np.ndarray, level: float):
    """Mean, sd and one-sided bounds of each column of ``values`` (draws x pairs, or their
    ``PairDraws``) under importance weights ``exp(log_ratio)`` (chain x draw, the draws in
    the same order), Pareto-smoothed; with the weights' Pareto k."""
    draws = values if isinstance(values, PairDraws) else PairDraws.of(values)
    if not log_ratio.any():
        weights, k = np.full(log_ratio.size, 1.0 / log_ratio.size), 0.0
    else:
        import arviz_stats  # noqa: F401 (adds the azstats accessor)
        import xarray as xr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # psislw reads a log-likelihood, as leave-one-out does, whose weights are
            # its negative: the ratio goes in negated
            log_weights, k = xr.DataArray(-log_ratio, dims=("chain", "draw")).azstats.psislw(
                dim=["chain", "draw"]
            )
        weights, k = np.exp(log_weights.values.ravel()), float(k)
    rows, whole = draws.rows, draws.whole
    out = {name: np.full(len(rows), math.nan) for name in BOUND_COLUMNS}
    if whole.any():  # every draw present: all such pairs at once
        x, w = rows[whole], weights / weights.sum()
        mean = np.sum(w * x, axis=1)
        out["mean"][whole] = mean
        out["sd"][whole] = np.sqrt(np.maximum(np.sum(w * (x - mean[:, None]) ** 2, axis=1), 0.0))
        cumulative = np.cumsum(w[draws.order], axis=1)
        for name, q in (("lower", 1.0 - level), ("upper", level)):
            at = np.minimum((cumulative < q).sum(axis=1), x.shape[1] - 1)
            out[name][whole] = draws.ordered[np.arange(len(x)), at]
    for n in np.flatnonzero(~whole):  # some draws missing: each pair on its own
        x = rows[n]
        kept = ~np.isnan(x)
        w = weights[kept] / weights[kept].sum() if kept.any() else weights[kept]
        mean = float(np.sum(w * x[kept])) if kept.any() else math.nan
        out["mean"][n] = mean
        out["sd"][n] = math.sqrt(max(float(np.sum(w * (x[kept] - mean) ** 2)), 0.0))
        out["lower"][n] = _weighted_quantile(x[kept], w, 1.0 - level)
        out["upper"][n] = _weighted_quantile(x[kept], w, level)
    return out, k


def _index(draws, dim: str, label) -> int:
    return int(np.flatnonzero(draws[dim].values == label)[0])


def _log_ratio(posterior, member: Member, roles: dict) -> np.ndarray:
    """The log ratio (chain, draw) of the member's prior density to the spec's at the
    fit's draws of the parameters that the changed priors govern (``roles``:
    ``_variable_roles``)."""

    draws = posterior.draws
    ratio = np.zeros((draws.sizes["chain"], draws.sizes["draw"]))
    for name, role in roles.items():
        if role not in member.changed:
            continue
        x = draws[name].values.reshape(*ratio.shape, -1)
        new, old = member.changed[role].distribution(), posterior.spec.priors[role].distribution()
        ratio += (new.logpdf(x) - old.logpdf(x)).sum(axis=-1)
    return ratio


def _variable_roles(posterior) -> dict[str, str]:
    """``{posterior variable: prior role}`` of the parameters the spec's priors govern."""
    spec = posterior.spec
    roles = family_of(spec).variable_roles(spec)
    draws = posterior.draws
    return {name: role for name, role in roles.items() if name in draws and role in spec.priors}


def _weighted_quantile(x: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest draw whose cumulative weight (of weights summing to 1) reaches ``q``."""
    if not x.size:
        return math.nan
    order = np.argsort(x)
    cumulative = np.cumsum(weights[order])
    return float(x[order][min(np.searchsorted(cumulative, q), x.size - 1)])


def _verdicts(bounds: pd.DataFrame, tau: float) -> list[str]:
    out = []
    for lower, upper in zip(bounds["lower"], bounds["upper"], strict=True):
        if pd.isna(upper):
            out.append("")
        elif upper < tau:
            out.append("below")
        elif pd.notna(lower) and lower > tau:
            out.append("above")
        else:
            out.append("undecided")
    return out


def _psense(posterior) -> pd.Series:
    """The power-scaling prior sensitivity of each pair's ``p_task`` (0 where every prior
    is flat, which power scaling leaves unchanged)."""
    import arviz_stats

    draws = posterior.draws["p_task"]
    if not posterior.has_group("log_prior"):
        values = np.zeros(draws.shape[2:])
    else:
        tree = posterior.subtree("posterior", "log_prior")  # the prior power-scaled alone
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = arviz_stats.psense(tree, var_names=["p_task"], group="prior")["p_task"].values
    return pd.Series(
        values.ravel(),
        index=pd.MultiIndex.from_product([draws["agent"].values, draws["task"].values]),
    )


def _pairs(bounds: pd.DataFrame, psense, tau, level) -> pd.DataFrame:
    """One row per pair with a bound under the spec's prior: the range of its bounds over
    the members, which member gives each end, its power-scaling sensitivity, the members
    whose reweighting cannot be trusted and, with ``tau``, whether the verdict flips
    (``_flips``)."""
    member, how = bounds["member"].to_numpy(), bounds["how"].to_numpy()
    upper = bounds["upper"].to_numpy(dtype=float)
    verdict = bounds["verdict"].to_numpy() if tau is not None else None
    rows = []
    for (agent, task), at in bounds.groupby(["agent", "task"], sort=False).indices.items():
        own = at[member[at] == OWN]
        if not own.size:
            continue  # a bound under some member where the spec's prior gives none
        known = at[~np.isnan(upper[at])]
        row = {
            "agent": agent,
            "task": task,
            "upper": upper[own[0]],
            "upper_low": upper[known].min(),
            "upper_high": upper[known].max(),
            "low_member": member[known[np.argmin(upper[known])]],
            "high_member": member[known[np.argmax(upper[known])]],
            "psense": math.nan if psense is None else float(psense.get((agent, task), math.nan)),
            "untrusted": ", ".join(member[at][how[at] == UNTRUSTED]),
        }
        if tau is not None:
            if (verdict[known] == verdict[own[0]]).all():
                row.update(prior_sensitive=False, flipped_by="", robust_trials=math.nan)
            else:
                row.update(_flips(bounds.iloc[known], bounds.iloc[own[0]], tau, level))
        rows.append(row)
    columns = [*PAIR_COLUMNS, *(FLIP_COLUMNS if tau is not None else ())]
    return pd.DataFrame(rows, columns=columns)


def _bounds(lower: float, upper: float) -> str:
    return f"bounds {format_number(lower)} to {format_number(upper)}"


def _flips(known: pd.DataFrame, spec, tau: float, level: float) -> dict:
    """For a pair whose members' verdicts differ: which members differ from the spec's,
    and the trials after which every member probably decides."""
    others = known[known["verdict"] != spec["verdict"]]
    said = ", ".join(
        f"{row.member} ({_bounds(row.lower, row.upper)})" for row in others.itertuples()
    )
    flipped = (
        f"{spec['verdict']} under the spec's prior ({_bounds(spec['lower'], spec['upper'])}), "
        f"{'/'.join(sorted(set(others['verdict'])))} under {said}"
    )
    needed = [
        trials_to_decide(row.mean, row.sd, tau, level)
        for row in known.itertuples()
        if row.sd > 0 and 0 < row.mean < 1
    ]
    trials = math.nan if not needed or None in needed else max(needed)
    return {"prior_sensitive": True, "flipped_by": flipped, "robust_trials": trials}
