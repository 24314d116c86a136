"""The kinds of fit, each a ``Posterior`` that says how its groups are made from what it
keeps (``bayes_eval.results.posterior``): an exact fit from its Beta shapes, an MCMC fit
from its kept draws through its family's ``Derivation``, and an MCMC model before any
sampling, whose prior alone is drawn."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from bayes_eval.constants import AGENT, RUN, TASK
from bayes_eval.errors import InputError
from bayes_eval.results.exact_draws import exact_draws, exact_log_prior, exact_prior
from bayes_eval.results.posterior import FACTOR, PREDICTIVE_GROUPS, Derivation, Posterior

if TYPE_CHECKING:
    from bayes_eval.evidence.table import Evidence
    from bayes_eval.exact.builders import Estimates
    from bayes_eval.inference.diagnostics import Diagnostics
    from bayes_eval.specs import Spec

__all__ = ["ExactPosterior", "McmcPosterior", "ModelPrior"]


class ExactPosterior(Posterior):
    """An exact (conjugate) fit: each pair's Beta shapes (``conjugate``), its draws made
    from them, its log-likelihood with its replicates, its prior from the spec's Betas."""

    REPLICATED = (*PREDICTIVE_GROUPS, "log_likelihood")

    @classmethod
    def from_estimates(
        cls, estimates: Estimates, spec: Spec, evidence: Evidence, *, level: float, seed: int
    ) -> ExactPosterior:
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
        if estimates.grader is not None:
            from bayes_eval.exact.builders import grading_variables

            grading = {"grader": estimates.grader, "shapes": estimates.grader_shapes}
            grading.update(own=estimates.own_audited, factors=estimates.graded_factors)
            conjugate = conjugate.merge(grading_variables(conjugate.coords, i, j, **grading))
        return cls.build({"conjugate": conjugate}, spec, evidence, level=level, seed=seed)

    def _how_made(self) -> str:
        return f"exact (conjugate); {self.spec.draws} draws made when .tree is read"

    def _made_draws(self) -> xr.Dataset:
        return exact_draws(self, self.spec.draws, self.seed)

    def _prior(self, draws, n_draws: int, seed: int) -> xr.Dataset:
        return exact_prior(self, draws, n_draws, seed)

    def _log_prior(self, draws: xr.Dataset) -> xr.Dataset | None:
        return exact_log_prior(self, draws)

    @functools.cached_property
    def exact_positions(self) -> np.ndarray:
        """Agents x tasks, True where a pair's result is an exact posterior (not a point
        value, no estimate or no result row)."""
        return (
            (self.values("method") != "")
            & (self.values("reason") == "")
            & np.isnan(self.values("point_log"))
        )


class McmcPosterior(Posterior):
    """An MCMC fit: the draws its sampler made (``posterior`` in what it keeps) and the
    sampler's statistics; its family's ``derivation`` makes every other group of them.

    Parameters
    ----------
    tree, spec, evidence, draws
        As ``Posterior``'s (``draws``: the ``derivation.rates`` of the kept draws, where
        the fit made them already).
    derivation : Derivation
        How its other groups follow from its kept draws.
    diagnostics : Diagnostics, optional
        Those the sampler made of the same draws; made when first asked for otherwise.
    """

    is_mcmc = True
    draws_prior_through_model = True

    def __init__(
        self,
        tree: xr.DataTree,
        spec: Spec,
        evidence: Evidence,
        *,
        derivation: Derivation,
        draws: xr.Dataset | None = None,
        diagnostics: Diagnostics | None = None,
    ) -> None:
        super().__init__(tree, spec, evidence, draws=draws)
        self._derivation = derivation
        self._diagnostics = diagnostics

    def _how_made(self) -> str:
        sizes = self._tree["posterior"].sizes
        verdict = "passed" if self.diagnostics.ok else "FAILED: " + self.diagnostics.messages[0]
        return f"MCMC, {sizes['chain']} chains x {sizes['draw']} draws; diagnostics {verdict}"

    def _made_draws(self) -> xr.Dataset:
        return self._derivation.rates(self._tree["posterior"].to_dataset())

    def _log_likelihood(self, draws: xr.Dataset) -> xr.Dataset | None:
        if self._derivation.log_likelihood is None:
            return None
        made = self._derivation.log_likelihood(draws)
        if "cell" in made.dims:  # not a likelihood of whole pairs
            made = made.sel(cell=self.group("observed_data")["cell"].values)
        return made

    def _prior(self, draws, n_draws: int, seed: int) -> xr.Dataset:
        return self._derivation.prior(self, draws, n_draws, seed)

    def _log_prior(self, draws: xr.Dataset) -> xr.Dataset | None:
        made = self._derivation.log_prior
        return None if made is None else made(self, draws)

    @functools.cached_property
    def diagnostics(self) -> Diagnostics:
        """Its diagnostics (``bayes_eval.inference.diagnostics.diagnose`` of its posterior
        and sampler statistics, where the sampler did not give them)."""
        if self._diagnostics is not None:
            return self._diagnostics
        from bayes_eval.inference.diagnostics import Diagnostics, diagnose

        if "diagnostics" in self._tree:
            return Diagnostics.from_dataset(self._tree["diagnostics"].to_dataset())
        stats = self._tree["sample_stats"].to_dataset()
        return diagnose(xr.DataTree.from_dict({"posterior": self.draws, "sample_stats": stats}))

    @property
    def has_log_likelihood(self) -> bool:
        return self._derivation.log_likelihood is not None

    def log_likelihood_at(self, draws: xr.Dataset) -> xr.Dataset:
        """The fit's own pointwise log-likelihood of its data at other draws of its
        parameters (a refit's, with the same structure); see ``scores_draws``."""
        return self._derivation.log_likelihood(draws)


class ModelPrior(Posterior):
    """An MCMC model on the evidence's design before any sampling: its ``prior_groups``
    draw the spec's priors through the model (``derivation.prior``); it has no posterior
    draws."""

    draws_prior_through_model = True

    def __init__(
        self, tree: xr.DataTree, spec: Spec, evidence: Evidence, *, derivation: Derivation
    ) -> None:
        super().__init__(tree, spec, evidence)
        self._derivation = derivation

    def _how_made(self) -> str:
        return "prior only: not sampled"

    def _made_draws(self) -> xr.Dataset:
        raise InputError(f"model {self.spec.name}: not fitted yet, it has no posterior draws")

    def _prior(self, draws, n_draws: int, seed: int) -> xr.Dataset:
        return self._derivation.prior(self, draws, n_draws, seed)

    def _log_prior(self, draws: xr.Dataset) -> None:
        """None: it has no posterior draws to weigh."""
        return None

    @property
    def has_log_likelihood(self) -> bool:
        return False
