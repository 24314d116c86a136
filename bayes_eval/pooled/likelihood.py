"""The log-likelihood of each observed cell, per posterior draw, for ArviZ's ``loo`` and
``compare``.

It is the likelihood the model conditions on. ``end_to_end_pooled``, ``hierarchical``
and ``ecr_pooled`` marginalise every cell's rate (``bayes_eval.pooled.models``), so a
cell's count is Beta-Binomial given the draw of its prior's mean and concentration: an
end-to-end count given its agent's ``mu`` and ``kappa``, a milestone or step count given
its task's ``mu_task`` and its agent's ``kappa``. A binomial given the cell's own rate
would condition on a parameter that only that cell informs, and PSIS-LOO fails on such
cells (their Pareto k above 0.7). The values are whole log probabilities, binomial
coefficients included, so that sums over cells are log predictive densities.

Models whose likelihood does not split into cells this way (``joint``'s end-to-end
counts, clustered runs) have no ``log_likelihood`` group yet: it is left out rather than
replaced by a likelihood the model does not condition on. The crossed model's is
``bayes_eval.crossed.likelihood``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from bayes_eval.constants import END_TO_END, EXPERT_COMPLETION, MILESTONE_METHOD
from bayes_eval.pooled.rates import cell_shapes
from bayes_eval.results.predictive import cell_coords

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["log_likelihood"]

# The evidence of a pooled model's cells, by its kind.
CELL_METHODS = {"milestone": MILESTONE_METHOD, "expert_completion": EXPERT_COMPLETION}


def log_likelihood(post: xr.Dataset, layout, spec) -> xr.Dataset | None:
    """The ``log_likelihood`` group of a pooled fit (the module's forms), over the
    ``cell`` dimension of its predictive groups; None where the model has none yet.

    ``post`` holds the draws of the model's hyperparameters (``mu`` and ``kappa`` per
    agent, or ``mu_task`` per pair and ``kappa`` per agent).
    """
    import xarray as xr

    if layout.clusters is not None or spec.kind not in ("end_to_end", *CELL_METHODS):
        return None
    if spec.kind == "end_to_end":
        tiny = np.finfo(float).tiny  # as ``cell_shapes``: a mean of 1 keeps a proper Beta
        mu = post["mu"].values[..., layout.pair_agent]
        kappa = post["kappa"].values[..., layout.pair_agent]
        a, b = np.maximum(mu * kappa, tiny), np.maximum((1 - mu) * kappa, tiny)
        k, n = layout.e2e_k, layout.e2e_n
        keys = [(END_TO_END, agent, task, "") for agent, task in layout.pairs]
    else:
        a, b = cell_shapes(post, layout, counts=False)
        k, n = layout.k, layout.n
        keys = [_cell_key(layout, spec, c) for c in range(k.size)]
    values = stats.betabinom.logpmf(k, n, a, b)
    return xr.Dataset(
        {"successes": (("chain", "draw", "cell"), values)},
        coords={"chain": post["chain"], "draw": post["draw"], **cell_coords(keys)},
    )


def _cell_key(layout, spec, c: int) -> tuple[str, str, str, str]:
    """``(method, agent, task, position)`` of milestone or step cell ``c``, as the
    predictive groups name it."""
    agent, task = layout.pairs[layout.cell_pair[c]]
    step = int(layout.cell_factor[c])
    method = CELL_METHODS[spec.kind]
    if method == MILESTONE_METHOD:
        return method, agent, task, f"milestone {step}"
    run = layout.runs[layout.cell_pair[c]][layout.cell_run[c]]
    return method, agent, task, f"run {run}, step {step}"
