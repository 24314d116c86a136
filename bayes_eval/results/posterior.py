"""The result of a fit: an ArviZ 1 ``xarray.DataTree`` with the spec and the evidence.

Every fit, exact or MCMC, has one tree of the same shape:

* ``posterior``: ``p_task`` over ``(chain, draw, agent, task)``, ``p_milestone`` or
  ``p_step`` where they apply, each over the cells that have one (``stack_factor_rates``),
  and an MCMC fit's sampled parameters;
* ``posterior_predictive``, ``observed_data`` and ``constant_data``: replicated and
  observed ``successes`` and the ``trials`` of every observed cell the model explains,
  over a labelled ``cell`` dim (ArviZ's layout, so its predictive plots read them);
* ``log_likelihood``, ``prior``, ``prior_predictive`` and ``log_prior`` (for
  ``arviz_stats.loo``, ``compare`` and ``psense``);
* ``sample_stats``: the sampler's statistics (MCMC fits only);
* ``conjugate`` (ours): per (agent, task) the method, provenance, the reason for a
  missing estimate, a point value's log, the end-to-end counts behind the
  Clopper-Pearson bound, and an exact posterior's Beta shapes per run and factor;
  Where an audited grader scored the runs, each pair's ``grader`` and the Betas of its
  sensitivity and specificity (``grader_shapes``), the shapes NaN (``bayes_eval.exact.graded``);
* ``evidence`` (ours): the normalised evidence table, so a saved fit is complete;
  ``evidence_clusters`` its counts per cluster of runs, where it has clusters, and
  ``evidence_audit`` the grader's audit, where it has one.

The root's attributes say how the tree was made (package version, file format, spec,
evidence hash, level, seed).

A fit keeps what cannot be made again, and makes the rest when it is first read, from
its seed, so that it is the same bytes whenever and wherever it is made: an exact fit
keeps its Beta shapes (``conjugate``) and draws ``posterior`` from them; an MCMC fit keeps
the draws its sampler made (the sampled parameters, ``posterior`` in the file) and the
sampler's statistics, and its fitting family makes the rest of ``posterior`` (the rates
drawn back) and every other group from them (``Derivation``). ``to_netcdf`` writes what a
fit keeps; ``read_posterior`` and ``bayes_eval.load_posterior`` make the rest again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from bayes_eval.constants import AGENT, END_TO_END, TASK
from bayes_eval.errors import InputError
from bayes_eval.evidence.audit import Audit
from bayes_eval.evidence.table import CLUSTER_COLUMNS, TABLE_COLUMNS, Evidence, PathLike
from bayes_eval.exact.products import BetaProduct, beta_product
from bayes_eval.files import check_readable
from bayes_eval.results.factors import stack_factor_rates
from bayes_eval.results.predictive import replicate
from bayes_eval.settings import stream_seed
from bayes_eval.specs import Spec, spec_from_toml, spec_text

if TYPE_CHECKING:
    from bayes_eval.exact.graded import GradedRate
    from bayes_eval.exact.graded_product import GradedProduct
    from bayes_eval.inference.diagnostics import Diagnostics

__all__ = ["FILE_FORMAT", "READ_FORMATS", "Derivation", "Posterior", "StoredFit", "read_posterior"]

FACTOR = "factor"
# Layout of the saved tree; 1 was the per-group InferenceData file of version 0.1, 2 had
# the factor rates on the whole (agent, task, milestone) rectangle, 3 every group, 4 a
# variable equal to another twice and its long texts uncompressed.
FILE_FORMAT = 5
READ_FORMATS = (4, 5)
# A group's attribute naming its variables written once, as copies of another: {copy: of}.
COPIES = "bayes_eval_copies"
PREDICTIVE_GROUPS = ("posterior_predictive", "observed_data", "constant_data")
# The groups a fit makes from what it keeps, in the order of its tree.
DERIVED_GROUPS = (
    "posterior",
    *PREDICTIVE_GROUPS,
    "log_likelihood",
    "prior",
    "prior_predictive",
    "log_prior",
)
# Variables of this many values or more are written compressed (HDF5's deflate, after
# its byte shuffle).
COMPRESSED_SIZE = 10_000


def package_version() -> str:
    """The installed version of bayes_eval."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayes_eval")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Derivation:
    """How an MCMC fit's groups follow from the draws it keeps: functions of its fitting
    family, with the fit's design bound in (partials, which a sweep's workers pickle).

    Attributes
    ----------
    rates : callable, optional
        ``rates(kept)``: the ``posterior`` group from the kept draws (the rates drawn
        back, seeded, and the coordinates); none for a model not yet fitted.
    log_likelihood : callable, optional
        ``log_likelihood(draws)``: the model's pointwise log-likelihood at posterior draws.
    prior : callable, optional
        ``prior(posterior, draws, n_draws, seed)``: draws of the spec's priors.
    log_prior : callable, optional
        ``log_prior(posterior, draws)``: the log prior density of the draws.
    """

    rates: Callable | None = None
    log_likelihood: Callable | None = None
    prior: Callable | None = None
    log_prior: Callable | None = None


class Posterior:
    """A fitted model: its ``DataTree``, spec and evidence. What every fit answers; each
    kind of fit is a type of its own (``bayes_eval.results.fits``: ``ExactPosterior``,
    ``McmcPosterior``, and ``ModelPrior``, an MCMC model before sampling), which says how
    its groups are made from what it keeps.

    Parameters
    ----------
    tree : xarray.DataTree
        What the fit keeps (the module's docstring): the ``conjugate`` and ``evidence``
        groups and the root attributes; an MCMC fit's kept draws (``posterior``) and
        ``sample_stats``.
    spec : Spec
    evidence : Evidence
    draws : xarray.Dataset, optional
        The ``posterior`` group where the fit has made it already.
    """

    # Whether the draws come from MCMC, not from exact posteriors.
    is_mcmc = False
    # Whether its prior is drawn through a sampled model's priors (an MCMC model, fitted
    # or not), not from an exact model's Beta factors.
    draws_prior_through_model = False
    # The groups made with the replicates (``bayes_eval.results.predictive.replicate``).
    REPLICATED = PREDICTIVE_GROUPS

    def __init__(
        self, tree: xr.DataTree, spec: Spec, evidence: Evidence, *, draws: xr.Dataset | None = None
    ) -> None:
        self._tree = tree
        self.spec = spec
        self.evidence = evidence
        self._arrays: dict[str, np.ndarray] = {}
        self._groups: dict[str, xr.Dataset] = {} if draws is None else {"posterior": draws}
        self._summaries: dict[tuple, pd.DataFrame] = {}

    def __repr__(self) -> str:
        spec, node = self.spec, self._tree["conjugate"]
        estimated = int((node["method"].values != "").sum())
        lines = [
            f"Posterior: model {spec.name} ({spec.kind}, pooling {spec.pooling}), "
            f"{node.sizes[AGENT]} agent(s) x {node.sizes[TASK]} task(s), {estimated} estimated",
            f"  evidence {self.evidence.source} (hash {self.evidence.hash[:12]}), "
            f"level {self.level:g}, seed {self.seed}",
        ]
        lines.append(f"  {self._how_made()}")
        groups = [*self._tree.children, *(g for g in DERIVED_GROUPS if g not in self._tree)]
        lines.append(f"  groups: {', '.join(groups)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The text of ``repr`` above xarray's view of what the fit keeps (the groups made
        from it are not made for the view)."""
        import html

        return f"<pre>{html.escape(repr(self))}</pre>{self._tree._repr_html_()}"

    def _how_made(self) -> str:
        """One line of ``repr``: how the fit's draws are made."""
        raise NotImplementedError

    def _made_draws(self) -> xr.Dataset:
        """The ``posterior`` group, made from what the fit keeps."""
        raise NotImplementedError

    def _log_likelihood(self, draws: xr.Dataset) -> xr.Dataset | None:
        """The ``log_likelihood`` group at ``draws`` where it is not made with the
        replicates (``REPLICATED``)."""
        raise NotImplementedError

    def _prior(self, draws: xr.Dataset | None, n_draws: int, seed: int) -> xr.Dataset:
        """``n_draws`` draws of the spec's priors (``prior_groups``)."""
        raise NotImplementedError

    def _log_prior(self, draws: xr.Dataset) -> xr.Dataset | None:
        """The log prior density of ``draws`` (the ``log_prior`` group)."""
        raise NotImplementedError

    @property
    def diagnostics(self) -> Diagnostics | None:
        """An MCMC fit's diagnostics; None for a fit that was not sampled."""
        return None

    @property
    def has_log_likelihood(self) -> bool:
        """Whether the fit has a pointwise log-likelihood (``log_likelihood``)."""
        return True

    @property
    def kept(self) -> xr.DataTree:
        """What the fit keeps, and ``to_netcdf`` writes (the module's docstring)."""
        return self._tree

    @property
    def draws(self) -> xr.Dataset:
        """The ``posterior`` group: an exact fit's draws from its Beta shapes, an MCMC
        fit's kept draws with the rates drawn back; made the first time it is read."""
        if "posterior" not in self._groups:
            self._groups["posterior"] = self._made_draws()
        return self._groups["posterior"]

    @property
    def tree(self) -> xr.DataTree:
        """Every group: what the fit keeps, and every group made from it (each made the
        first time it is asked for, here or by ``group``)."""
        groups = {name: node.to_dataset() for name, node in self._tree.children.items()}
        for name in DERIVED_GROUPS:
            made = self._derived(name)
            if made is not None:
                groups[name] = made
        order = [g for g in DERIVED_GROUPS if g in groups]
        order += [g for g in groups if g not in order]
        tree = xr.DataTree.from_dict({name: groups[name] for name in order})
        tree.attrs = dict(self._tree.attrs)
        return tree

    def subtree(self, *names: str) -> xr.DataTree:
        """A tree of the groups ``names`` alone (each made where it is made from what the
        fit keeps), with the root's attributes: what an ArviZ function reads, without
        making the groups it does not."""
        tree = xr.DataTree.from_dict({name: self.group(name) for name in names})
        tree.attrs = dict(self._tree.attrs)
        return tree

    def has_group(self, name: str) -> bool:
        """Whether the tree has the group ``name``, without making it (``log_prior`` is
        made to tell: none where every prior is uniform)."""
        if name in self._tree.children and name != "posterior":
            return True
        if name == "log_likelihood":
            return self.has_log_likelihood
        if name == "log_prior":
            return self._derived("log_prior") is not None
        return name in DERIVED_GROUPS

    def _derived(self, name: str) -> xr.Dataset | None:
        """The group ``name`` made from what the fit keeps (None where the fit has none)."""
        if name in self._groups or name not in DERIVED_GROUPS:
            return self._groups.get(name)
        draws = self.draws
        if name in self.REPLICATED:
            self._groups.update(replicate(self, draws, stream_seed(self.seed, "replicates")))
        elif name == "log_likelihood":
            self._groups[name] = self._log_likelihood(draws)
        elif name in ("prior", "prior_predictive"):
            prior = self.prior_groups(draws)
            self._groups.update(prior=prior["prior"], prior_predictive=prior["prior_predictive"])
        elif name == "log_prior":
            made = self._log_prior(draws)
            self._groups[name] = made if made is not None and made.data_vars else None
        return self._groups.get(name)

    @property
    def scores_draws(self) -> bool:
        """Whether ``log_likelihood_at`` can score other draws: an MCMC fit with its
        model's pointwise log-likelihood."""
        return self.is_mcmc and self.has_group("log_likelihood")

    def prior_groups(self, draws: xr.Dataset | None = None) -> dict[str, xr.Dataset]:
        """``prior`` and ``prior_predictive`` (as ``prior``, and the predictive's
        ``observed_data`` and ``constant_data``): the spec's priors drawn through the
        model on this fit's design, with no data. ``draws``, the posterior's, name the
        variables a crossed prior holds (all of them without)."""
        prior = self._prior(draws, self.spec.draws, stream_seed(self.seed, "prior"))
        prior = stack_factor_rates(prior)
        seed = stream_seed(self.seed, "prior replicates")
        groups = replicate(self, prior, seed, log_likelihood=False)
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
    def coords(self) -> dict[str, list]:
        """Coordinates of the ``conjugate`` group (agent, task, and run and factor)."""
        node = self._tree["conjugate"]
        return {name: node[name].values.tolist() for name in node.dims}

    @property
    def written_by(self) -> str:
        """The version of bayes_eval that made this fit."""
        return str(self._tree.attrs.get("bayes_eval_version", "unknown"))

    def group(self, name: str) -> xr.Dataset:
        """One group of the tree as a Dataset (``covariates``, ``conjugate``, and those
        made when first read, ``DERIVED_GROUPS``)."""
        if name in DERIVED_GROUPS:
            made = self._derived(name)
            if made is None:
                raise KeyError(f"the fit has no group {name}")
            return made
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
        **made: Any,
    ) -> Posterior:
        """Assemble what a fit keeps from its groups, with the evidence and the root
        attributes, as a fit of this type (``made``: the rest of its arguments). An MCMC
        fit's ``groups`` hold its kept draws (``posterior``) and ``sample_stats``, its
        ``diagnostics`` those the sampler made (``sample_until_diagnosed``), if any."""
        diagnostics = made.get("diagnostics")
        table = evidence.table.rename_axis("evidence_row")
        groups = {**groups, "evidence": xr.Dataset.from_dataframe(table)}
        if diagnostics is not None:
            groups["diagnostics"] = diagnostics.to_dataset()
        if evidence.clusters is not None:
            clusters = evidence.clusters.rename_axis("cluster_row")
            groups["evidence_clusters"] = xr.Dataset.from_dataframe(clusters)
        if evidence.audit is not None:
            audit = xr.Dataset.from_dataframe(evidence.audit.table.rename_axis("audit_row"))
            groups["evidence_audit"] = audit.assign_attrs(source=evidence.audit.source)
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
        return cls(tree, spec, evidence, **made)

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
        point value, no estimate or no result row): none but an exact fit's."""
        return np.zeros(self.values("method").shape, dtype=bool)

    def has_exact_posterior(self, i: int, j: int) -> bool:
        """Whether position ``(i, j)`` holds an exact posterior (``exact_positions``)."""
        return bool(self.exact_positions[i, j])

    def product_at(self, i: int, j: int) -> BetaProduct | GradedProduct | None:
        """The exact posterior of ``P`` at array position ``(i, j)``, or None."""
        if not self.has_exact_posterior(i, j):
            return None
        graded = self.graded_at(i, j)
        if graded is not None:
            return graded.product()
        if self.graded_positions[i, j]:
            return self.graded_product_at(i, j)
        return beta_product(self.values("alpha")[i, j], self.values("beta")[i, j])

    def graded_product_at(self, i: int, j: int) -> GradedProduct:
        """The posterior of a product whose counts a grader scored (milestones, expert
        steps; ``bayes_eval.exact.graded_product``) at ``(i, j)``."""
        return self._graded_products[(int(i), int(j))]

    @functools.cached_property
    def _graded_products(self) -> dict:
        """Every ``graded_product_at``, made once (its quadrature's nodes are kept on it
        for the summary, the draws and the left-out predictive alike)."""
        from bayes_eval.exact.graded_product import graded_product
        from bayes_eval.results.exact_draws import PRIOR_ROLE

        methods = self.values("method")
        products = {}
        for i, j in np.argwhere(self.graded_positions & (methods != END_TO_END)):
            prior = self.spec.priors[PRIOR_ROLE[methods[i, j]]]
            fields = self.values("graded_factors")[i, j]
            products[(int(i), int(j))] = graded_product(fields, (prior.alpha, prior.beta))
        return products

    @functools.cached_property
    def graded_positions(self) -> np.ndarray:
        """Agents x tasks, True where an exact posterior is over counts a grader that errs
        scored (``bayes_eval.exact.graded``)."""
        if "grader" not in self._tree["conjugate"]:
            return np.zeros(self.values("method").shape, dtype=bool)
        return self.exact_positions & (self.values("grader") != "")

    def graded_at(self, i: int, j: int) -> GradedRate | None:
        """The graded posterior of ``P`` at ``(i, j)`` (``graded_positions``), or None."""
        return self._graded_rates.get((int(i), int(j)))

    @functools.cached_property
    def _graded_rates(self) -> dict:
        """Every ``graded_at``, made once: of a pair's runs the audit did not score again,
        under the prior those it did update (their truth, not the grader's verdict)."""
        from bayes_eval.exact.graded import audited_rate

        rates = {}
        end_to_end = self.values("method") == END_TO_END
        for i, j in np.argwhere(self.graded_positions & end_to_end):
            prior = self.spec.priors["end_to_end"]
            k, n = (int(self.values(f"cp_{x}")[i, j]) for x in ("successes", "trials"))
            shapes, own = (self.values(name)[i, j] for name in ("grader_shapes", "own_audited"))
            rates[(int(i), int(j))] = audited_rate(k, n, (prior.alpha, prior.beta), shapes, own)
        return rates

    def summary(self, level: float | None = None, threshold: float | None = None) -> pd.DataFrame:
        """One row per (agent, task): the summary table (``bayes_eval.results.summary``),
        made once per level and threshold (a copy each time). Without a threshold, one
        made at the same level with a threshold serves, the columns a threshold sets
        (``THRESHOLD_COLUMNS``) blanked."""
        from bayes_eval.results.summary import THRESHOLD_COLUMNS, summarise

        key = (self.level if level is None else level, threshold)
        if key in self._summaries:
            return self._summaries[key].copy()
        if threshold is None:
            made = next((t for (at, t) in self._summaries if at == key[0]), None)
            if made is not None:
                blank = dict.fromkeys(THRESHOLD_COLUMNS, np.nan)
                return self._summaries[(key[0], made)].assign(**blank)
        self._summaries[key] = summarise(self, *key)
        return self._summaries[key].copy()

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
        """Write what the fit keeps (``kept``) to one NetCDF file, its large variables
        compressed; ``bayes_eval.load_posterior`` reads it back and makes the rest, the same
        tree (``xarray.open_datatree`` reads what it keeps).

        The file is made in memory and then written: HDF5 writing straight to a disk that
        fills leaves a file it cannot close, and crashes the process when it tries again
        (a segmentation fault at exit); written from memory, a full disk is an ordinary
        ``OSError`` naming the file."""
        path = Path(path)
        tree = _without_copies(self._tree)
        encoding = {
            node.path: {
                name: _compressed(variable)
                for name, variable in node.data_vars.items()
                if _compressible(variable)
            }
            for node in tree.subtree
        }
        with _local_scheduler():
            data = tree.to_netcdf(
                engine="h5netcdf", encoding={k: v for k, v in encoding.items() if v}
            )
        try:
            path.write_bytes(data)
        except OSError as exc:  # a full disk's error names no file
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        return path


def _compressible(variable) -> bool:
    """Whether a variable is written compressed: numbers from ``COMPRESSED_SIZE`` values,
    texts from as many bytes as that many float64 (913 sentences of 600 characters are 2
    MB in memory)."""
    if variable.dtype.kind == "U":
        return variable.nbytes >= 8 * COMPRESSED_SIZE
    return variable.dtype.kind in "fiub" and variable.size >= COMPRESSED_SIZE


def _compressed(variable) -> dict:
    """The encoding of a large variable: HDF5's deflate after its byte shuffle; a text's
    as UTF-8 characters (a text of variable length cannot be compressed), so that a
    sentence repeated for every pair, as the provenance is, costs next to nothing (a
    5,046-pair crossed fit's texts: 3.8 MB -> 0.25 MB)."""
    encoding = {"compression": "gzip", "compression_opts": 4, "shuffle": True}
    return {**encoding, "dtype": "S1"} if variable.dtype.kind == "U" else encoding


def _without_copies(tree: xr.DataTree) -> xr.DataTree:
    """``tree`` with each variable that equals an earlier one of its group (values, dims
    and attributes: a crossed fit's ``difficulty`` is its ``difficulty_offset`` where the
    difficulties are sampled centred without covariates, 8 of a 5,046-pair fit's 16 MB)
    left out, and named in its group's ``COPIES`` attribute (``_made_whole``)."""
    tree = tree.copy(deep=False)
    for node in tree.subtree:
        variables, copies = node.dataset.data_vars, {}
        for at, (name, variable) in enumerate(variables.items()):
            of = next(
                (
                    earlier
                    for earlier, first in list(variables.items())[:at]
                    if earlier not in copies and _same(first, variable)
                ),
                None,
            )
            if of is not None:
                copies[name] = of
        if copies:
            node.dataset = node.dataset.drop_vars(list(copies))
            node.attrs[COPIES] = json.dumps(copies)
    return tree


def _same(a: xr.DataArray, b: xr.DataArray) -> bool:
    """Whether ``b`` can be written as a copy of ``a``: the same dims, type, attributes
    and values (numbers only)."""
    return (
        a.dims == b.dims
        and a.dtype == b.dtype
        and a.dtype.kind == "f"
        and a.attrs == b.attrs
        and np.array_equal(a.values, b.values)
    )


def _made_whole(tree: xr.DataTree) -> xr.DataTree:
    """``tree`` as written: its copies (``_without_copies``) made again, and its texts as
    numpy strings (xarray reads texts stored as characters, ``_compressed``, as Python
    objects)."""
    for node in tree.subtree:
        copies = json.loads(node.attrs.pop(COPIES, "{}"))
        for name, of in copies.items():
            node[name] = node[of].copy(deep=True)
        for name, variable in node.dataset.data_vars.items():
            if variable.dtype == object:
                node[name] = variable.astype(str)
    return tree


def _local_scheduler():
    """Where dask is in use, its local scheduler for the block: with a distributed client
    active, xarray locks a file it writes with a cluster-wide lock named by the file, and a
    file made in memory has no name the cluster knows (``Semaphore or Lock ... not
    known``); the tree's arrays are in memory, so nothing is computed by dask."""
    if "dask" not in sys.modules:
        return contextlib.nullcontext()
    import dask

    return dask.config.set(scheduler="synchronous")


@dataclass(frozen=True)
class StoredFit:
    """What a fit's file holds, read and checked: its tree (what the fit kept), spec and
    evidence. Its fitting family makes the fit of it again (``Family.read_back``)."""

    tree: xr.DataTree
    spec: Spec
    evidence: Evidence

    @property
    def level(self) -> float:
        return float(self.tree.attrs["level"])

    @property
    def seed(self) -> int:
        return int(self.tree.attrs["seed"])


def read_posterior(path: PathLike) -> StoredFit:
    """Read what ``Posterior.to_netcdf`` wrote; refuse a file whose evidence hash differs
    (``bayes_eval.load_posterior`` checks the run folder and an exact fit's posterior too,
    and makes the fit again).

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
            tree = _made_whole(opened.load())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a bayes_eval posterior ({exc})") from exc
    attrs = tree.attrs
    if attrs.get("bayes_eval_format") not in READ_FORMATS:
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
    audit = None
    if "evidence_audit" in tree:
        stored = tree["evidence_audit"]
        audit = Audit(stored.to_dataset().to_dataframe(), str(stored.attrs["source"]))
    evidence = Evidence(
        table=table[[*TABLE_COLUMNS, *kept]],
        source=str(attrs["evidence_source"]),
        kept=kept,
        clusters=clusters,
        audit=audit,
    )
    if evidence.hash != attrs["evidence_hash"]:
        raise InputError(f"{path}: the stored evidence does not match its hash; file altered?")
    spec = spec_from_toml(attrs["spec_toml"], str(attrs["spec_source"]))
    return StoredFit(tree, spec, evidence)


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
        f"read (it reads formats {' and '.join(map(str, READ_FORMATS))}); refit with: "
        f"{refit} --out NEW_FOLDER"
    )
