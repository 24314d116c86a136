"""The prior predictive check: what a spec's priors claim about a table before any data.

Per observed cell, the interval of counts the prior predicts and where the observed count
falls in it; per (agent, task), the prior probability that its success rate ``P`` is below
the thresholds safety cases decide at. The draws are the fit's own ``prior`` and
``prior_predictive`` groups (``Posterior.prior_groups``), so the check sees the model
exactly as a fit of it would, with no sampling. An exact model's probabilities below a
threshold are exact (its prior is a product of Betas, ``summarise_products``); an MCMC
model's are the share of its prior draws, whose resolution is one over their number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from bayes_eval.evidence.table import Evidence, TableSource
from bayes_eval.fit import prior_only
from bayes_eval.specs import ModelSource, check_level

__all__ = ["THRESHOLDS", "PriorCheck", "prior_check"]

# The thresholds a safety case decides at, in this check's table by default.
THRESHOLDS = (1e-2, 1e-3, 1e-5)


@dataclass(frozen=True)
class PriorCheck:
    """The prior predictive check of a spec on a table.

    Attributes
    ----------
    tree : xarray.DataTree
        ``prior``, ``prior_predictive``, ``observed_data`` and ``constant_data`` (ArviZ's
        schema: ``arviz_plots.plot_ppc_interval(tree, group="prior_predictive")``).
    cells : DataFrame
        Per observed cell: ``agent``, ``task``, ``cell`` (its label in the tree),
        ``successes``, ``trials``, the prior predictive interval of the successes at
        ``level`` (``lower``, ``upper``), and ``position``, the mid-p share of prior
        predictive counts below the observed one (near 0 or 1: the prior did not expect it).
    pairs : DataFrame
        Per (agent, task) the model estimates: ``prior_mean`` of ``P`` and
        ``below_<t>``, the prior probability that ``P < t``, per threshold; ``source``
        says whether those are exact or shares of the prior draws (and how many).
    """

    tree: xr.DataTree
    cells: pd.DataFrame
    pairs: pd.DataFrame


def prior_check(
    evidence: TableSource | Evidence,
    model: ModelSource,
    *,
    thresholds: Sequence[float] = THRESHOLDS,
    level: float = 0.95,
    seed: int | None = None,
    agents: TableSource | None = None,
    tasks: TableSource | None = None,
    predict: Sequence[str] = (),
) -> PriorCheck:
    """What ``model``'s priors say about ``evidence`` before any data.

    Parameters
    ----------
    evidence : path, DataFrame or Evidence
        The table whose design (agents, tasks, milestones, trials) the prior is drawn on;
        its counts are set beside the prior predictive, not used.
    model : str, path or Spec
        Any spec.
    thresholds : sequence of float
        Each in (0, 1): the table gives the prior probability that ``P`` is below it.
    level : float
        Central probability of the prior predictive interval of each cell's count.
    seed : int, optional
        Seed of the prior draws; defaults to the spec's.
    agents, tasks, predict
        Crossed models, as in ``fit``.

    Returns
    -------
    PriorCheck
    """
    from bayes_eval.errors import InputError

    level = check_level(level, "level")
    thresholds = [float(t) for t in thresholds]
    bad = [t for t in thresholds if not 0.0 < t < 1.0]
    if bad or not thresholds:
        raise InputError(f"thresholds: each must be in (0, 1); got {bad or 'none'}")
    posterior = prior_only(evidence, model, seed=seed, agents=agents, tasks=tasks, predict=predict)
    groups = posterior.prior_groups()
    tree = xr.DataTree.from_dict(groups)
    tree.attrs = {
        "spec_name": posterior.spec.name,
        "evidence_source": posterior.evidence.source,
        "evidence_hash": posterior.evidence.hash,
        "seed": posterior.seed,
    }
    return PriorCheck(tree, _cells(groups, level), _pairs(posterior, groups, thresholds))


def _cells(groups: dict, level: float) -> pd.DataFrame:
    """Each observed count beside the interval its prior predictive gives it."""
    replicated = groups["prior_predictive"]["successes"]
    flat = replicated.values.reshape(-1, replicated.sizes["cell"])
    observed = groups["observed_data"]
    k = observed["successes"].values
    tail = (1 - level) / 2
    lower, upper = np.quantile(flat, [tail, 1 - tail], axis=0, method="inverted_cdf")
    position = (flat < k).mean(axis=0) + 0.5 * (flat == k).mean(axis=0)
    return pd.DataFrame(
        {
            "agent": observed["agent"].values,
            "task": observed["task"].values,
            "cell": observed["cell"].values,
            "successes": k,
            "trials": groups["constant_data"]["trials"].values,
            "lower": lower.astype(int),
            "upper": upper.astype(int),
            "position": position,
        }
    )


def _pairs(posterior, groups: dict, thresholds: list[float]) -> pd.DataFrame:
    """The prior mean of each pair's ``P`` and its prior probability below each
    threshold: exact for an exact model, else the share of the prior draws."""
    p_task = groups["prior"]["p_task"]
    draws = p_task.values.reshape(-1, *p_task.shape[2:])
    exact = None if posterior.draws_prior_through_model else _exact_below(posterior, thresholds)
    rows = []
    for agent, task, i, j in posterior.cells():
        values = draws[:, i, j]
        if np.isnan(values).all():
            continue  # no prior draws: an improper prior, or a point value
        if exact is not None:
            mean, below = exact[(i, j)]
            source = "exact"
        else:
            mean, below = values.mean(), [(values < t).mean() for t in thresholds]
            source = f"{values.size} prior draws"
        row = {"agent": agent, "task": task, "prior_mean": float(mean)}
        row.update({f"below_{t:g}": float(b) for t, b in zip(thresholds, below, strict=True)})
        rows.append({**row, "source": source})
    columns = ["agent", "task", "prior_mean", *(f"below_{t:g}" for t in thresholds)]
    return pd.DataFrame(rows, columns=[*columns, "source"])


def _exact_below(posterior, thresholds: list[float]) -> dict:
    """The prior mean of ``P`` and ``P(P < t)`` per threshold for every pair with a proper
    prior: the Beta product's exact mean, and one minus the CDF of ``X = -log P`` at
    ``-log t`` from its exact engines."""
    from bayes_eval.exact.products import beta_product, summarise_products
    from bayes_eval.results.exact_draws import prior_shapes

    alpha, beta = prior_shapes(posterior)
    at, products = [], []
    for _, _, i, j in posterior.cells():
        if not np.isnan(alpha[i, j]).all():  # a proper prior
            at.append((i, j))
            products.append(beta_product(alpha[i, j], beta[i, j]))
    x = -np.log(np.asarray(thresholds))
    solved = summarise_products(products, np.zeros(0), x)
    return {
        ij: (product.moments()[0], 1.0 - s.x_cdf)
        for ij, product, s in zip(at, products, solved, strict=True)
    }
