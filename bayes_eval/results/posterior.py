"""The result of a fit: an ArviZ 1 ``xarray.DataTree`` with the spec and the evidence.

Every fit, exact or MCMC, has one tree of the same shape:

* ``posterior``: ``p_task`` over ``(chain, draw, agent, task)``, ``p_milestone`` or
  ``p_step`` where they apply, each over the cells that have one (``stack_factor_rates``),
  and an MCMC fit's sampled parameters;
* ``posterior_predictive``, ``observed_data`` and ``constant_data``: replicated and
  observed ``successes`` and the ``trials`` of every observed cell the model explains,
  over a labelled ``cell`` dim (ArviZ's layout, so its predictive plots read them);
* ``sample_stats``: the sampler's statistics (MCMC fits only);
* ``conjugate`` (ours): per (agent, task) the method, provenance, the reason for a
  missing estimate, a point value's log, the end-to-end counts behind the
  Clopper-Pearson bound, and an exact posterior's Beta shapes per run and factor;
* ``evidence`` (ours): the normalised evidence table, so a saved fit is complete;
  ``evidence_clusters`` its counts per cluster of runs, where it has clusters.

The root's attributes say how the tree was made (package version, file format, spec,
evidence hash, level, seed). Exact posteriors are summarised from their ``conjugate``
shapes deterministically; their draws (``posterior`` and the predictive groups) are
generated from the seed the first time ``tree`` is read, so summaries of thousands of
tasks never pay for them.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

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
from bayes_eval.evidence.table import CLUSTER_COLUMNS, TABLE_COLUMNS, Evidence, PathLike
from bayes_eval.exact.products import BetaProduct, beta_product, log_beta_draws
from bayes_eval.files import check_readable
from bayes_eval.results.factors import stack_factor_rates
from bayes_eval.results.predictive import replicate
from bayes_eval.specs import Spec, spec_from_toml, spec_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from bayes_eval.exact.builders import Estimates
    from bayes_eval.inference.diagnostics import Diagnostics

__all__ = ["FILE_FORMAT", "Posterior", "prior_shapes", "read_posterior"]

FACTOR = "factor"
# Layout of the saved tree; 1 was the per-group InferenceData file of version 0.1, 2 had
# the factor rates on the whole (agent, task, milestone) rectangle.
FILE_FORMAT = 3
PREDICTIVE_GROUPS = ("posterior_predictive", "observed_data", "constant_data")
# Chains an exact fit's independent draws are dealt into (where they divide the draws).
EXACT_CHAINS = 4
# Cells drawn together in an exact tree (4,000 draws of 500 cells of 5 factors: 80 MB).
DRAW_CHUNK_CELLS = 500


def package_version() -> str:
    """The installed version of bayes_eval."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayes_eval")
    except PackageNotFoundError:
        return "unknown"


class Posterior:
    """A fitted model: its ``DataTree``, spec and evidence.

    Parameters
    ----------
    tree : xarray.DataTree
        At least the ``conjugate`` and ``evidence`` groups and the root attributes; an
        exact fit's draws are added on first access of ``tree``.
    spec : Spec
    evidence : Evidence
    diagnostics : Diagnostics, optional
        An MCMC fit's diagnostics where the sampler made them of the same draws; made
        here otherwise.

    Attributes
    ----------
    diagnostics : Diagnostics or None
        An MCMC fit's diagnostics (``bayes_eval.inference.diagnostics.diagnose`` of its
        tree); None for exact fits.
    """

    def __init__(
        self,
        tree: xr.DataTree,
        spec: Spec,
        evidence: Evidence,
        diagnostics: Diagnostics | None = None,
    ) -> None:
        self._tree = tree
        self.spec = spec
        self.evidence = evidence
        self._arrays: dict[str, np.ndarray] = {}
        self._pointwise = None  # these three: see ``build``
        self._prior = None
        self._log_prior = None
        self.diagnostics = None
        if self.is_mcmc:
            from bayes_eval.inference.diagnostics import diagnose

            self.diagnostics = diagnose(tree) if diagnostics is None else diagnostics

    def __repr__(self) -> str:
        spec, node = self.spec, self._tree["conjugate"]
        estimated = int((node["method"].values != "").sum())
        lines = [
            f"Posterior: model {spec.name} ({spec.kind}, pooling {spec.pooling}), "
            f"{node.sizes[AGENT]} agent(s) x {node.sizes[TASK]} task(s), {estimated} estimated",
            f"  evidence {self.evidence.source} (hash {self.evidence.hash[:12]}), "
            f"level {self.level:g}, seed {self.seed}",
        ]
        if self.is_mcmc:
            sizes = self._tree["posterior"].sizes
            verdict = "passed" if self.diagnostics.ok else "FAILED: " + self.diagnostics.messages[0]
            lines.append(
                f"  MCMC, {sizes['chain']} chains x {sizes['draw']} draws; diagnostics {verdict}"
            )
        else:
            lines.append(f"  exact (conjugate); {spec.draws} draws made when .tree is read")
        lines.append(f"  groups: {', '.join(self._tree.children)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The text of ``repr`` above xarray's view of the tree (as it stands: an exact
        fit's draws are not made for it)."""
        import html

        return f"<pre>{html.escape(repr(self))}</pre>{self._tree._repr_html_()}"

    @property
    def draws(self) -> xr.Dataset:
        """The ``posterior`` group; an exact fit draws it the first time it is read."""
        if "posterior" not in self._tree:
            draws = _draws(self, self.spec.draws, self.seed)
            self._tree = self._tree.assign({"posterior": xr.DataTree(draws)})
        return self._tree["posterior"].to_dataset()

    @property
    def tree(self) -> xr.DataTree:
        """Every group; the first read adds what is still missing: an exact fit's draws,
        and the predictive, log-likelihood and prior groups of any fit."""
        if "posterior_predictive" not in self._tree:
            draws = self.draws
            groups = replicate(self, draws, self.seed + 2)
            pointwise = None if self._pointwise is None else self._pointwise(draws)
            if pointwise is not None:  # an MCMC fit's own, in the cells' order
                if "cell" in pointwise.dims:  # not a likelihood of whole pairs
                    pointwise = pointwise.sel(cell=groups["observed_data"]["cell"].values)
                groups["log_likelihood"] = pointwise
            prior = self.prior_groups(draws)
            groups.update(prior=prior["prior"], prior_predictive=prior["prior_predictive"])
            log_prior = (self._log_prior or _exact_log_prior)(self, draws)
            if log_prior.data_vars:  # none where every prior is uniform
                groups["log_prior"] = log_prior
            self._tree = self._tree.assign({k: xr.DataTree(v) for k, v in groups.items()})
        return self._tree

    @property
    def scores_draws(self) -> bool:
        """Whether ``log_likelihood_at`` can score other draws: an MCMC fit made in this
        session (not read from a file)."""
        return self._pointwise is not None

    def log_likelihood_at(self, draws: xr.Dataset) -> xr.Dataset:
        """The fit's own pointwise log-likelihood of its data at other draws of its
        parameters (a refit's, with the same structure); see ``scores_draws``."""
        return self._pointwise(draws)

    def prior_groups(self, draws: xr.Dataset | None = None) -> dict[str, xr.Dataset]:
        """``prior`` and ``prior_predictive`` (as ``prior``, and the predictive's
        ``observed_data`` and ``constant_data``): the spec's priors drawn through the
        model on this fit's design, with no data. ``draws``, the posterior's, name the
        variables a crossed prior holds (all of them without)."""
        if self._prior is None and self.is_mcmc:  # read from a file: drawn with the fit
            names = ("prior", "prior_predictive", "observed_data", "constant_data")
            return {name: self.tree[name].to_dataset() for name in names}
        make = self._prior or _exact_prior
        prior = stack_factor_rates(make(self, draws, self.spec.draws, self.seed + 3))
        groups = replicate(self, prior, self.seed + 4, log_likelihood=False)
        return {
            "prior": prior,
            "prior_predictive": groups["posterior_predictive"],
            "observed_data": groups["observed_data"],
            "constant_data": groups["constant_data"],
        }

    @property
    def level(self) -> float:
        """Default one-sided credible level of ``summary``."""
        return float(self._tree.attrs["level"])

    @property
    def seed(self) -> int:
        """Seed of the draws."""
        return int(self._tree.attrs["seed"])

    @property
    def is_mcmc(self) -> bool:
        """True when the draws come from MCMC (pooled models), not from exact posteriors."""
        return "sample_stats" in self._tree

    @property
    def coords(self) -> dict[str, list]:
        """Coordinates of the ``conjugate`` group (agent, task, and run and factor)."""
        node = self._tree["conjugate"]
        return {name: node[name].values.tolist() for name in node.dims}

    @property
    def written_by(self) -> str:
        """The version of bayes_eval that made this fit."""
        return str(self._tree.attrs.get("bayes_eval_version", "unknown"))

    def group(self, name: str) -> xr.Dataset:
        """One group of the tree as a Dataset (``covariates``, ``conjugate``, ...)."""
        return self._tree[name].to_dataset()

    def values(self, name: str) -> np.ndarray:
        """The numpy array of one ``conjugate`` variable."""
        if name not in self._arrays:
            self._arrays[name] = self._tree["conjugate"][name].values
        return self._arrays[name]

    @classmethod
    def build(
        cls,
        groups: dict,
        spec: Spec,
        evidence: Evidence,
        *,
        level: float,
        seed: int,
        log_likelihood: Callable[[xr.Dataset], xr.Dataset | None] | None = None,
        prior: Callable | None = None,
        log_prior: Callable | None = None,
        diagnostics: Diagnostics | None = None,
    ) -> Posterior:
        """Assemble a fit's tree from its groups, with the evidence and the root attributes.

        ``log_likelihood(draws)``, where given, makes the ``log_likelihood`` group from the
        posterior draws when the tree is first read (a pooled fit's own forms; it is as
        large as ``posterior_predictive``, so it waits as that does). ``prior(posterior,
        draws, n_draws, seed)`` and ``log_prior(posterior, draws)``, where given, make an
        MCMC fit's ``prior`` and ``log_prior`` groups then too (an exact fit's are made
        here from its spec's Beta priors). ``diagnostics``: an MCMC fit's, where the
        sampler made them (``sample_until_diagnosed``)."""
        table = evidence.table.rename_axis("evidence_row")
        groups = {**groups, "evidence": xr.Dataset.from_dataframe(table)}
        if evidence.clusters is not None:
            clusters = evidence.clusters.rename_axis("cluster_row")
            groups["evidence_clusters"] = xr.Dataset.from_dataframe(clusters)
        tree = xr.DataTree.from_dict(groups)
        tree.attrs = {
            "bayes_eval_version": package_version(),
            "bayes_eval_format": FILE_FORMAT,
            "spec_name": spec.name,
            "spec_source": spec.source,
            "spec_toml": spec_text(spec),
            "evidence_source": evidence.source,
            "evidence_hash": evidence.hash,
            "level": float(level),
            "seed": int(seed),
        }
        posterior = cls(tree, spec, evidence, diagnostics)
        posterior._pointwise = log_likelihood
        posterior._prior, posterior._log_prior = prior, log_prior
        return posterior

    @classmethod
    def from_estimates(
        cls, estimates: Estimates, spec: Spec, evidence: Evidence, *, level: float, seed: int
    ) -> Posterior:
        """An exact fit: the pairs' ``Estimates`` laid out as the ``conjugate`` group."""
        agents = list(dict.fromkeys(estimates.agent.tolist()))
        tasks = list(dict.fromkeys(estimates.task.tolist()))
        i = pd.Index(agents).get_indexer(estimates.agent)
        j = pd.Index(tasks).get_indexer(estimates.task)
        shape = (len(agents), len(tasks))
        n_runs, n_factors = estimates.alpha.shape[1:]
        alpha = np.full(shape + (n_runs, n_factors), np.nan)
        beta = np.full_like(alpha, np.nan)
        alpha[i, j], beta[i, j] = estimates.alpha, estimates.beta
        point_log = np.full(shape, np.nan)
        point_log[i, j] = estimates.point_log
        cp = np.full(shape + (2,), -1, dtype=np.int64)
        cp[i, j] = estimates.cp
        text = {}
        for name in ("method", "provenance", "reason"):
            text[name] = np.full(shape, "", dtype=object)
            text[name][i, j] = getattr(estimates, name)
        pair = (AGENT, TASK)
        conjugate = xr.Dataset(
            {
                "alpha": (pair + (RUN, FACTOR), alpha),
                "beta": (pair + (RUN, FACTOR), beta),
                "point_log": (pair, point_log),
                "cp_successes": (pair, cp[..., 0]),
                "cp_trials": (pair, cp[..., 1]),
                **{name: (pair, values.astype(str)) for name, values in text.items()},
            },
            coords={
                AGENT: agents,
                TASK: tasks,
                RUN: np.arange(1, n_runs + 1),
                FACTOR: np.arange(1, n_factors + 1),
            },
        )
        return cls.build({"conjugate": conjugate}, spec, evidence, level=level, seed=seed)

    # ------------------------------------------------------------------ summaries

    def cells(self) -> list[tuple[str, str, int, int]]:
        """``(agent, task, i, j)`` of every pair with a result row, ``i, j`` its array position."""
        method = self.values("method")
        agents, tasks = self.values(AGENT).tolist(), self.values(TASK).tolist()
        return [
            (agents[i], tasks[j], int(i), int(j))
            for i, j in zip(*np.nonzero(method != ""), strict=True)
        ]

    @functools.cached_property
    def exact_positions(self) -> np.ndarray:
        """Agents x tasks, True where a pair's result is an exact posterior (not MCMC, a
        point value, no estimate or no result row)."""
        if self.is_mcmc:
            return np.zeros(self.values("method").shape, dtype=bool)
        return (
            (self.values("method") != "")
            & (self.values("reason") == "")
            & np.isnan(self.values("point_log"))
        )

    def has_exact_posterior(self, i: int, j: int) -> bool:
        """Whether position ``(i, j)`` holds an exact posterior (``exact_positions``)."""
        return bool(self.exact_positions[i, j])

    def product_at(self, i: int, j: int) -> BetaProduct | None:
        """The exact posterior of ``P`` at array position ``(i, j)``, or None."""
        if not self.has_exact_posterior(i, j):
            return None
        return beta_product(self.values("alpha")[i, j], self.values("beta")[i, j])

    def summary(self, level: float | None = None, threshold: float | None = None) -> pd.DataFrame:
        """One row per (agent, task): the summary table (``bayes_eval.results.summary``)."""
        from bayes_eval.results.summary import summarise

        return summarise(self, self.level if level is None else level, threshold)

    def attempts(
        self,
        attempts: Sequence[int] | str,
        level: float | None = None,
        threshold: float | None = None,
    ) -> pd.DataFrame:
        """One row per (agent, task, k): pass@k and pass^k over ``k`` attempts for each
        ``k`` in ``attempts`` (``bayes_eval.results.attempts``)."""
        from bayes_eval.results.attempts import summarise_attempts

        return summarise_attempts(self, attempts, level, threshold)

    def population(self, attempts: Sequence[int] | str, level: float | None = None) -> pd.DataFrame:
        """pass@k and pass^k across each agent's tasks, observed and new, for each ``k``
        in ``attempts`` (``bayes_eval.results.population``)."""
        from bayes_eval.results.population import population_curves

        return population_curves(self, attempts, level)

    # ------------------------------------------------------------------ files

    def to_netcdf(self, path: PathLike) -> Path:
        """Write the whole tree to one NetCDF file (``xarray.open_datatree`` reads it).

        The file is made in memory and then written: HDF5 writing straight to a disk that
        fills leaves a file it cannot close, and crashes the process when it tries again
        (a segmentation fault at exit); written from memory, a full disk is an ordinary
        ``OSError`` naming the file."""
        path = Path(path)
        with _local_scheduler():
            data = self.tree.to_netcdf(engine="h5netcdf")
        try:
            path.write_bytes(data)
        except OSError as exc:  # a full disk's error names no file
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        return path


def _local_scheduler():
    """Where dask is in use, its local scheduler for the block: with a distributed client
    active, xarray locks a file it writes with a cluster-wide lock named by the file, and a
    file made in memory has no name the cluster knows (``Semaphore or Lock ... not
    known``); the tree's arrays are in memory, so nothing is computed by dask."""
    if "dask" not in sys.modules:
        return contextlib.nullcontext()
    import dask

    return dask.config.set(scheduler="synchronous")


def read_posterior(path: PathLike) -> Posterior:
    """Read a ``Posterior`` written by ``to_netcdf``; refuse a file whose evidence hash
    differs (``bayes_eval.load_posterior`` checks the run folder and an exact fit's
    posterior too).

    ``path`` is the file, or a folder written by ``bayes-eval fit --out`` (its
    ``posterior.nc``).

    Raises
    ------
    InputError
        Missing or unreadable file, a file of another layout (an older version's), a
        missing group, or a hash mismatch.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "posterior.nc"
    check_readable(path, str(path), "posterior file")
    try:
        with xr.open_datatree(path, engine="h5netcdf") as opened:
            tree = opened.load()
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a bayes_eval posterior ({exc})") from exc
    attrs = tree.attrs
    if attrs.get("bayes_eval_format") != FILE_FORMAT:
        raise InputError(_refusal(path, tree))
    for name in ("conjugate", "evidence"):
        if name not in tree:
            raise InputError(f"{path}: not a bayes_eval posterior (no group {name})")
    table = tree["evidence"].to_dataset().to_dataframe().reset_index(drop=True)
    kept = tuple(c for c in table.columns if c not in TABLE_COLUMNS)
    clusters = None
    if "evidence_clusters" in tree:
        clusters = tree["evidence_clusters"].to_dataset().to_dataframe().reset_index(drop=True)
        clusters = clusters[list(CLUSTER_COLUMNS)]
    evidence = Evidence(
        table=table[[*TABLE_COLUMNS, *kept]],
        source=str(attrs["evidence_source"]),
        kept=kept,
        clusters=clusters,
    )
    if evidence.hash != attrs["evidence_hash"]:
        raise InputError(f"{path}: the stored evidence does not match its hash; file altered?")
    spec = spec_from_toml(attrs["spec_toml"], str(attrs["spec_source"]))
    return Posterior(tree, spec, evidence)


def _refusal(path: Path, tree: xr.DataTree) -> str:
    """One line: which version wrote a file of another layout, and how to refit."""
    old = next(
        (
            node.attrs
            for node in tree.children.values()
            if "bayes_eval_version" in node.attrs  # version 0.1 wrote them on every group
        ),
        tree.attrs,
    )
    if "bayes_eval_version" not in old:
        return f"{path}: not a bayes_eval posterior (no bayes_eval_format attribute)"
    refit = f"bayes-eval fit {old.get('evidence_source', 'EVIDENCE')}"
    refit += f" --model {old.get('spec_name', 'MODEL')}"
    if "seed" in old:
        refit += f" --seed {int(old['seed'])}"
    if "level" in old:
        refit += f" --level {float(old['level']):g}"
    return (
        f"{path}: written by bayes_eval {old['bayes_eval_version']} in file format "
        f"{old.get('bayes_eval_format', 1)}, which bayes_eval {package_version()} does not "
        f"read (it reads format {FILE_FORMAT}); refit with: {refit} --out NEW_FOLDER"
    )


def _cell_draws(alpha, beta, n_draws: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Draws of ``log`` of each factor rate and of ``log P`` for cells of Beta shapes
    ``alpha``, ``beta`` (cells x runs x factors, NaN where absent): ``P`` the product of
    one present run's factors, that run drawn uniformly for each draw; a factor of shape
    ``beta = 0`` is a point mass at 1."""
    present = ~np.isnan(alpha)
    proper = present & (beta > 0)
    draws = np.where(present, 0.0, np.nan)[None].repeat(n_draws, axis=0)
    draws[:, proper] = log_beta_draws(alpha[proper], beta[proper], (n_draws,), rng)
    runs = present.any(axis=-1)  # cells x runs
    # each cell's present runs first, in order; a draw picks one of its cell's
    order = np.argsort(~runs, axis=-1, kind="stable")
    picked = rng.integers(runs.sum(axis=-1), size=(n_draws, len(runs)))
    chosen = np.take_along_axis(order, picked.T, axis=-1).T  # draws x cells
    cell = np.arange(len(runs))
    task = np.nansum(draws[np.arange(n_draws)[:, None], cell, chosen], axis=-1)
    return draws, task


def _draws(result: Posterior, n_draws: int, seed: int, shapes=None) -> xr.Dataset:
    """Exact posterior draws of ``p_task`` and the factor rates, sampled in log space;
    ``shapes``, where given, the Beta shapes ``(alpha, beta)`` drawn from instead of the
    posterior's (the prior's, in ``_exact_prior``)."""
    rng = np.random.default_rng(seed)
    coords = result.coords
    agents, tasks = coords[AGENT], coords[TASK]
    n_runs, n_factors = len(coords[RUN]), len(coords[FACTOR])
    log_task = np.full((n_draws, len(agents), len(tasks)), np.nan)
    log_factor = np.full((n_draws, len(agents), len(tasks), n_runs, n_factors), np.nan)
    methods = result.values("method")
    alpha = result.values("alpha") if shapes is None else shapes[0]
    beta = result.values("beta") if shapes is None else shapes[1]
    cells = np.argwhere(result.exact_positions & ~np.isnan(alpha).all(axis=(-2, -1)))
    # cells in chunks, so that one chunk's draws stay within memory however many cells
    for start in range(0, len(cells), DRAW_CHUNK_CELLS):
        i, j = cells[start : start + DRAW_CHUNK_CELLS].T
        factors, task = _cell_draws(alpha[i, j], beta[i, j], n_draws, rng)
        log_factor[:, i, j], log_task[:, i, j] = factors, task
    # independent draws dealt in order into chains, so that R-hat (about 1) is defined
    chains = next(c for c in (EXACT_CHAINS, 2, 1) if n_draws % c == 0)

    def chained(values):
        return values.reshape((chains, n_draws // chains) + values.shape[1:])

    draw_coords = {
        "chain": np.arange(chains),
        "draw": np.arange(n_draws // chains),
        AGENT: agents,
        TASK: tasks,
    }
    data = {"p_task": (("chain", "draw", AGENT, TASK), chained(np.exp(log_task)))}
    rates = np.exp(log_factor)
    if (methods == MILESTONE_METHOD).any():
        milestone_rates = np.where(
            (methods == MILESTONE_METHOD)[..., None], rates[..., 0, :], np.nan
        )
        data["p_milestone"] = (("chain", "draw", AGENT, TASK, MILESTONE), chained(milestone_rates))
        draw_coords[MILESTONE] = coords[FACTOR]
    if (methods == EXPERT_COMPLETION).any():
        step_rates = np.where((methods == EXPERT_COMPLETION)[..., None, None], rates, np.nan)
        data["p_step"] = (("chain", "draw", AGENT, TASK, RUN, STEP), chained(step_rates))
        draw_coords[RUN] = coords[RUN]
        draw_coords[STEP] = coords[FACTOR]
    return stack_factor_rates(xr.Dataset(data, coords=draw_coords))


# The spec prior of an exact estimate's factors, by the estimate's method.
PRIOR_ROLE = {END_TO_END: "end_to_end", MILESTONE_METHOD: "milestone", EXPERT_COMPLETION: "step"}


def prior_shapes(result: Posterior) -> tuple[np.ndarray, np.ndarray]:
    """The prior's Beta shapes in the layout of the ``conjugate`` shapes: each factor's
    spec prior; NaN for a pair any of whose priors is improper (Haldane's ``Beta(0, 0)``
    has no draws)."""
    present = ~np.isnan(result.values("alpha"))
    alpha = np.full(present.shape, np.nan)
    beta = np.full(present.shape, np.nan)
    methods = result.values("method")
    for method, role in PRIOR_ROLE.items():
        cells = result.exact_positions & (methods == method)
        if not cells.any():
            continue
        prior = result.spec.priors[role]
        if prior.alpha > 0 and prior.beta > 0:
            alpha[cells] = np.where(present[cells], prior.alpha, np.nan)
            beta[cells] = np.where(present[cells], prior.beta, np.nan)
    return alpha, beta


def _exact_prior(result: Posterior, _draws_given, n_draws: int, seed: int) -> xr.Dataset:
    """An exact fit's prior: its factor rates drawn from their spec priors, multiplied as
    the posterior's are (``_draws``)."""
    return _draws(result, n_draws, seed, prior_shapes(result))


def _exact_log_prior(result: Posterior, draws: xr.Dataset) -> xr.Dataset:
    """The log prior density of every exact rate drawn, named after the variable it is
    drawn in: ``p_task`` for an end-to-end estimate (0 for a product, whose factors
    carry it), ``p_milestone`` and ``p_step`` per cell. Haldane's improper prior is
    unnormalised; a rate drawn at exactly 0 or 1 (a point mass) contributes 0. A rate
    whose prior is uniform is left out (its log density is constant)."""
    from scipy import special

    def log_density(role, p):
        prior = result.spec.priors[role]
        a, b = prior.alpha, prior.beta
        with np.errstate(divide="ignore", invalid="ignore"):
            value = special.xlogy(a - 1, p) + special.xlog1py(b - 1, -p)
            if a > 0 and b > 0:
                value = value - special.betaln(a, b)
        return np.where(np.isfinite(value), value, 0.0)

    out = {}
    methods = result.values("method")
    if (methods == END_TO_END).any():
        p = draws["p_task"]
        values = np.where(methods == END_TO_END, log_density("end_to_end", p.values), 0.0)
        out["p_task"] = p.copy(data=values)
    for name, role in (("p_milestone", "milestone"), ("p_step", "step")):
        if name in draws:
            out[name] = draws[name].copy(data=log_density(role, draws[name].values))
    # a uniform prior is the same at every power: nothing for psense to scale
    return xr.Dataset({name: v for name, v in out.items() if np.ptp(v.values) > 0})
