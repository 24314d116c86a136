"""The result of a fit: an ArviZ ``InferenceData`` plus the spec and the evidence.

Exact models keep their posteriors as parameters (the ``conjugate`` group: Beta
shapes per agent, task, run and factor, and point values), from which the summary
is computed deterministically at any level. Posterior draws (``p_task`` and the
per-milestone or per-step rates) are generated from a seed the first time they
are asked for, so summaries of thousands of tasks never pay for them.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayes_eval.conjugate import BetaProduct, log_beta_draws
from bayes_eval.constants import (
    AGENT,
    END_TO_END,
    EXPERT_COMPLETION,
    MILESTONE,
    MILESTONE_METHOD,
    RUN,
    STEP,
    TASK,
)
from bayes_eval.errors import InputError
from bayes_eval.evidence import TABLE_COLUMNS, Evidence
from bayes_eval.specs import spec_from_toml

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["Posterior", "load_posterior"]

FACTOR = "factor"
GROUPS = ("posterior", "observed_data", "conjugate", "evidence")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayes_eval")
    except PackageNotFoundError:
        return "unknown"


class Posterior:
    """A fitted model.

    Parameters
    ----------
    parameters : dict of str to (dims, ndarray)
        The ``conjugate`` group's variables, per (agent, task): ``method``,
        ``provenance``, ``reason``, ``point_log``, ``cp_successes``/``cp_trials`` and
        the Beta shapes ``alpha``/``beta`` over ``(agent, task, run, factor)`` (NaN
        where absent). Kept as numpy arrays so summaries never import xarray.
    coords : dict of str to sequence
        Coordinates of ``agent``, ``task``, ``run`` and ``factor``.
    spec : Spec
    evidence : Evidence
    level : float
        Default one-sided credible level of ``summary``.
    seed : int
        Seed of the posterior draws.
    """

    def __init__(
        self,
        parameters,
        coords,
        spec,
        evidence: Evidence,
        level: float,
        seed: int,
        sample_stats=None,
    ):
        self.parameters = parameters
        self.coords = coords
        self.spec = spec
        self.evidence = evidence
        self.level = level
        self.seed = seed
        self.sample_stats = sample_stats

    @property
    def is_mcmc(self) -> bool:
        """True when the draws come from MCMC (pooled models), not from exact posteriors."""
        return self.sample_stats is not None

    @classmethod
    def from_mcmc(cls, layout, posterior, sample_stats, spec, evidence, *, level, seed, engine):
        """Wrap a pooled model's draws (``posterior`` holds ``p_task`` over agent, task)."""
        shape = (len(layout.agents), len(layout.tasks))
        method = np.full(shape, "", dtype=object)
        provenance = np.full(shape, "", dtype=object)
        priors = ", ".join(f"{role} {prior.label()}" for role, prior in spec.priors.items())
        run = (
            f"{engine['engine']} {engine['chains']} chains x {engine['draws']} draws "
            f"(tune {engine['tune']}, target_accept {engine['target_accept']:g}, seed {seed})"
        )
        if "task_means" in engine:
            run += f"; task means {engine['task_means']}"
        e2e = np.full(shape + (2,), -1, dtype=np.int64)
        for p, (agent, task) in enumerate(layout.pairs):
            i, j = layout.agents.index(agent), layout.tasks.index(task)
            method[i, j] = spec.kind
            provenance[i, j] = f"{spec.name}; {spec.kind}/{spec.pooling}; {priors}; {run}"
            if layout.e2e_n[p] > 0 and spec.kind in ("end_to_end", "joint"):
                e2e[i, j] = (layout.e2e_k[p], layout.e2e_n[p])
        pair = (AGENT, TASK)
        parameters = {
            "method": (pair, method.astype(str)),
            "provenance": (pair, provenance.astype(str)),
            "reason": (pair, np.full(shape, "", dtype=str)),
            "cp_successes": (pair, e2e[..., 0]),
            "cp_trials": (pair, e2e[..., 1]),
        }
        coords = {AGENT: layout.agents, TASK: layout.tasks}
        result = cls(parameters, coords, spec, evidence, level, seed, sample_stats)
        result.__dict__["posterior"] = posterior
        return result

    @cached_property
    def diagnostics(self):
        """``bayes_eval.diagnostics.Diagnostics`` of an MCMC fit (None for exact ones)."""
        if not self.is_mcmc:
            return None
        from bayes_eval.diagnostics import diagnose, sampled_variables

        variables = [*sampled_variables(self.posterior), "p_task"]
        return diagnose(self.posterior, self.sample_stats, variables)

    @classmethod
    def from_estimates(cls, estimates, spec, evidence, *, level, seed) -> Posterior:
        """Lay out a list of ``fit.Estimate`` as the ``conjugate`` parameters."""
        agents = list(dict.fromkeys(e.agent for e in estimates))
        tasks = list(dict.fromkeys(e.task for e in estimates))
        agent_at = {a: i for i, a in enumerate(agents)}
        task_at = {t: j for j, t in enumerate(tasks)}
        n_runs = max((len(e.alpha) for e in estimates), default=1) or 1
        n_factors = max((max(e.factors, default=0) for e in estimates), default=0) or 1
        shape = (len(agents), len(tasks))
        alpha = np.full(shape + (n_runs, n_factors), np.nan)
        beta = np.full_like(alpha, np.nan)
        text = {
            name: np.full(shape, "", dtype=object) for name in ("method", "provenance", "reason")
        }
        point_log = np.full(shape, np.nan)
        cp = np.full(shape + (2,), -1, dtype=np.int64)
        for e in estimates:
            i, j = agent_at[e.agent], task_at[e.task]
            for r, (a_run, b_run) in enumerate(zip(e.alpha, e.beta, strict=True)):
                slots = [max(f, 1) - 1 for f in e.factors[: len(a_run)]]
                alpha[i, j, r, slots] = a_run
                beta[i, j, r, slots] = b_run
            text["method"][i, j] = e.method
            text["provenance"][i, j] = e.provenance
            text["reason"][i, j] = e.reason
            point_log[i, j] = e.point_log
            if e.cp is not None:
                cp[i, j] = e.cp
        pair = (AGENT, TASK)
        parameters = {
            "alpha": (pair + (RUN, FACTOR), alpha),
            "beta": (pair + (RUN, FACTOR), beta),
            "point_log": (pair, point_log),
            "cp_successes": (pair, cp[..., 0]),
            "cp_trials": (pair, cp[..., 1]),
            **{name: (pair, values.astype(str)) for name, values in text.items()},
        }
        coords = {
            AGENT: agents,
            TASK: tasks,
            RUN: np.arange(1, n_runs + 1),
            FACTOR: np.arange(1, n_factors + 1),
        }
        return cls(parameters, coords, spec, evidence, level, seed)

    def values(self, name: str) -> np.ndarray:
        """The array of one ``conjugate`` variable."""
        return self.parameters[name][1]

    @cached_property
    def conjugate(self) -> xr.Dataset:
        """The exact posterior's parameters as an ``xarray.Dataset``."""
        import xarray as xr

        return xr.Dataset(self.parameters, coords=self.coords)

    # ------------------------------------------------------------------ summaries

    def cells(self) -> list[tuple[str, str, int, int]]:
        """``(agent, task, i, j)`` of every pair with a result row, ``i, j`` its array position."""
        method = self.values("method")
        agents, tasks = list(self.coords[AGENT]), list(self.coords[TASK])
        return [
            (agents[i], tasks[j], int(i), int(j))
            for i, j in zip(*np.nonzero(method != ""), strict=True)
        ]

    def has_exact_posterior(self, i: int, j: int) -> bool:
        """Whether position ``(i, j)`` holds an exact posterior (not MCMC, a point value or
        no estimate)."""
        return not (
            self.is_mcmc
            or self.values("reason")[i, j]
            or not np.isnan(self.values("point_log")[i, j])
        )

    def product_at(self, i: int, j: int) -> BetaProduct | None:
        """The exact posterior of ``P`` at array position ``(i, j)``, or None."""
        if not self.has_exact_posterior(i, j):
            return None
        return _product(self.values("alpha")[i, j], self.values("beta")[i, j])

    def summary(self, level: float | None = None, threshold: float | None = None) -> pd.DataFrame:
        """One row per (agent, task) with the columns of DESIGN section 5."""
        from bayes_eval.summary import summarise

        return summarise(self, self.level if level is None else level, threshold)

    # ------------------------------------------------------------------ draws and groups

    @cached_property
    def posterior(self) -> xr.Dataset:
        """Posterior draws: ``p_task`` and ``p_milestone`` / ``p_step`` where they apply."""
        return _draws(self, self.spec.draws, self.seed)

    @cached_property
    def predictive_checks(self) -> pd.DataFrame:
        """Mid-p posterior predictive check per observed cell (``bayes_eval.ppc``)."""
        from bayes_eval.ppc import predictive_checks

        return predictive_checks(self)

    @cached_property
    def milestone_check(self) -> pd.DataFrame:
        """The milestone-assumption check of the evidence (``bayes_eval.ppc``)."""
        from bayes_eval.ppc import milestone_assumption

        return milestone_assumption(self.evidence)

    @cached_property
    def posterior_predictive(self) -> xr.Dataset:
        """Replicated counts of every observed cell the model explains (``k_rep``)."""
        from bayes_eval.ppc import replicate

        return replicate(self, self.seed + 2)

    @cached_property
    def observed_data(self) -> xr.Dataset:
        """The counts the model saw, per evidence method, as labelled arrays."""
        import xarray as xr

        parts = {}
        for method, name in (
            (END_TO_END, "task"),
            (MILESTONE_METHOD, "milestone"),
            (EXPERT_COMPLETION, "step"),
        ):
            if method in self.evidence.methods():
                counts = self.evidence.counts(method)
                if method == EXPERT_COMPLETION:
                    counts = counts.rename({RUN: "expert_run"})
                parts[f"successes_{name}"] = counts["successes"]
                parts[f"trials_{name}"] = counts["trials"]
        return xr.Dataset(parts)

    @property
    def idata(self):
        """The result as an ``arviz.InferenceData`` (imports ArviZ on first use)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import arviz as az

            groups = {
                "posterior": self.posterior,
                "observed_data": self.observed_data,
                "conjugate": self.conjugate,
            }
            if self.is_mcmc:
                groups["sample_stats"] = self.sample_stats
            return az.InferenceData(**groups)

    def attrs(self) -> dict:
        """Provenance written into every saved group."""
        return {
            "bayes_eval_version": _version(),
            "spec_name": self.spec.name,
            "spec_source": self.spec.source,
            "spec_toml": self.spec.text,
            "evidence_source": self.evidence.source,
            "evidence_hash": self.evidence.hash,
            "level": float(self.level),
            "seed": int(self.seed),
        }

    def to_netcdf(self, path) -> Path:
        """Write every group to one NetCDF file (readable by ``arviz.from_netcdf``)."""
        import xarray as xr

        path = Path(path)
        attrs = self.attrs()
        table = self.evidence.table.rename_axis("evidence_row")
        groups = {
            "posterior": self.posterior,
            "posterior_predictive": self.posterior_predictive,
            "observed_data": self.observed_data,
            "conjugate": self.conjugate,
            "evidence": xr.Dataset.from_dataframe(table),
        }
        if self.is_mcmc:
            groups["sample_stats"] = self.sample_stats
        mode = "w"
        for name, data in groups.items():
            data = data.assign_attrs(attrs)
            data.to_netcdf(path, mode=mode, group=name, engine="h5netcdf")
            mode = "a"
        return path


def load_posterior(path) -> Posterior:
    """Read a ``Posterior`` written by ``to_netcdf``; refuse a file whose evidence hash differs.

    ``path`` is the file, or a folder written by ``bayes-eval fit --out`` (its
    ``posterior.nc``).

    Raises
    ------
    InputError
        Missing or unreadable file, missing group, or a hash mismatch.
    """
    import xarray as xr

    path = Path(path)
    if path.is_dir():
        path = path / "posterior.nc"
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    groups = {}
    for name in (*GROUPS, "sample_stats", "posterior_predictive"):
        try:
            with xr.open_dataset(path, group=name, engine="h5netcdf") as data:
                groups[name] = data.load()
        except (OSError, ValueError) as exc:
            if name in ("sample_stats", "posterior_predictive"):  # optional groups
                continue
            raise InputError(f"{path}: not a bayes_eval posterior (group {name}: {exc})") from exc
    attrs = groups["conjugate"].attrs
    table = groups["evidence"].to_dataframe().reset_index(drop=True)[list(TABLE_COLUMNS)]
    for column in ("agent", "task", "method", "run", "grading"):
        table[column] = table[column].astype(str).replace("nan", "")
    evidence = Evidence(table=table, source=str(attrs["evidence_source"]))
    if evidence.hash != attrs["evidence_hash"]:
        raise InputError(f"{path}: the stored evidence does not match its hash; file altered?")
    spec = spec_from_toml(attrs["spec_toml"], str(attrs["spec_source"]))
    conjugate = groups["conjugate"]
    parameters = {name: (var.dims, var.values) for name, var in conjugate.data_vars.items()}
    for name in ("method", "provenance", "reason"):
        dims, values = parameters[name]
        parameters[name] = (dims, values.astype(str))
    coords = {name: conjugate[name].values.tolist() for name in conjugate.dims}
    stats = groups.get("sample_stats")
    if stats is not None:
        stats.attrs = {}
    result = Posterior(
        parameters, coords, spec, evidence, float(attrs["level"]), int(attrs["seed"]), stats
    )
    for name in ("posterior", "posterior_predictive"):
        if name in groups:
            groups[name].attrs = {}
            result.__dict__[name] = groups[name]
    return result


def _product(alpha: np.ndarray, beta: np.ndarray) -> BetaProduct:
    """A ``BetaProduct`` from NaN-padded ``(run, factor)`` shapes; empty runs are dropped."""
    components = []
    for a_run, b_run in zip(alpha, beta, strict=True):
        present = ~np.isnan(a_run)
        if present.any():
            components.append((a_run[present], b_run[present]))
    return BetaProduct(tuple(components))


def _draws(result: Posterior, n_draws: int, seed: int):
    import xarray as xr

    rng = np.random.default_rng(seed)
    agents, tasks = result.coords[AGENT], result.coords[TASK]
    n_runs, n_factors = len(result.coords[RUN]), len(result.coords[FACTOR])
    log_task = np.full((n_draws, len(agents), len(tasks)), np.nan)
    log_factor = np.full((n_draws, len(agents), len(tasks), n_runs, n_factors), np.nan)
    methods, point, reason = (result.values(n) for n in ("method", "point_log", "reason"))
    for i in range(len(agents)):
        for j in range(len(tasks)):
            if not methods[i, j] or reason[i, j] or not np.isnan(point[i, j]):
                continue
            a = result.values("alpha")[i, j]
            b = result.values("beta")[i, j]
            present = ~np.isnan(a)
            proper = present & (b > 0)
            draws = np.where(present, 0.0, np.nan)[None].repeat(n_draws, axis=0)
            draws[:, proper] = log_beta_draws(a[proper], b[proper], (n_draws,), rng)
            log_factor[:, i, j] = draws
            runs = np.flatnonzero(present.any(axis=1))
            chosen = runs[rng.integers(len(runs), size=n_draws)]
            log_task[:, i, j] = np.nansum(draws[np.arange(n_draws), chosen], axis=-1)
    coords = {"chain": [0], "draw": np.arange(n_draws), AGENT: agents, TASK: tasks}
    data = {"p_task": (("chain", "draw", AGENT, TASK), np.exp(log_task)[None])}
    rates = np.exp(log_factor)
    if (methods == MILESTONE_METHOD).any():
        milestone_rates = np.where(
            (methods == MILESTONE_METHOD)[..., None], rates[..., 0, :], np.nan
        )
        data["p_milestone"] = (("chain", "draw", AGENT, TASK, MILESTONE), milestone_rates[None])
        coords[MILESTONE] = result.coords[FACTOR]
    if (methods == EXPERT_COMPLETION).any():
        step_rates = np.where((methods == EXPERT_COMPLETION)[..., None, None], rates, np.nan)
        data["p_step"] = (("chain", "draw", AGENT, TASK, RUN, STEP), step_rates[None])
        coords[RUN] = result.coords[RUN]
        coords[STEP] = result.coords[FACTOR]
    return xr.Dataset(data, coords=coords)
