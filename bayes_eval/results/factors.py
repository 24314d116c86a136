"""A pair's factor rates (``p_milestone``, ``p_step``) in the tree: one dimension of the
cells that have a rate, not the ragged ``(agent, task, milestone)`` rectangle."""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayes_eval.constants import AGENT, MILESTONE, RUN, STEP, TASK

__all__ = ["FACTOR_RATES", "by_cell", "cell_label", "stack_factor_rates"]

# The factor rates and the dims that index a pair's factors.
FACTOR_RATES = {
    "p_milestone": (MILESTONE,),
    "p_step": (RUN, STEP),
    "p_graded_milestone": (MILESTONE,),  # a graded count's chance (exact.graded_product)
    "p_graded_step": (RUN, STEP),
}


def stack_factor_rates(draws: xr.Dataset) -> xr.Dataset:
    """``p_milestone`` and ``p_step`` on the cells that have a rate, not on a rectangle.

    A pair's factors are ragged (tasks have different numbers of milestones, pairs
    estimated by another method have none), so the rectangle ``(agent, task, milestone)``
    would hold NaN slots, rows of NaN in ``arviz_stats.summary``. Each factor rate gets
    one dimension of the cells where it has draws, ``milestone_cell`` (``step_cell``),
    labelled as ``cell_label`` writes it: ``p_milestone.sel(milestone_cell="a / t /
    milestone 2")``. (Per-cell agent and task coordinates would be clearer, but
    ``arviz_stats.summary`` refuses coordinates that not every variable has.)
    """
    stacked_rates = {}
    for name, index_dims in FACTOR_RATES.items():
        dim = f"{name.removeprefix('p_')}_cell"
        if name not in draws or dim in draws[name].dims:
            continue
        rates = draws[name].transpose("chain", "draw", AGENT, TASK, *index_dims)
        values = rates.values
        where = np.nonzero(np.isfinite(values).any(axis=(0, 1)))
        labels = [
            rates[d].values[w] for d, w in zip((AGENT, TASK, *index_dims), where, strict=True)
        ]
        cells = [cell_label(name, *key) for key in zip(*labels, strict=True)]
        stacked = xr.DataArray(
            values[(slice(None), slice(None), *where)],
            dims=("chain", "draw", dim),
            coords={"chain": rates["chain"], "draw": rates["draw"], dim: cells},
        )
        stacked_rates[name] = stacked
    dims = {d for name in stacked_rates for d in FACTOR_RATES[name]}
    draws = draws.drop_vars(list(stacked_rates)).drop_dims(list(dims), errors="ignore")
    return draws.assign(stacked_rates)


def cell_label(name: str, agent: str, task: str, *index) -> str:
    """A factor rate's cell: ``agent / task / milestone m`` or ``agent / task / run r,
    step s`` (``r`` counts the pair's runs from 1)."""
    at = ", ".join(f"{d} {int(v)}" for d, v in zip(FACTOR_RATES[name], index, strict=True))
    return f"{agent} / {task} / {at}"


def by_cell(post: xr.Dataset, name: str) -> dict:
    """A factor rate's draws ``(chain, draw)`` per cell label (``cell_label``); empty where
    the fit has no such rate."""
    if name not in post:
        return {}
    rates = post[name]
    return {label: rates.values[..., c] for c, label in enumerate(rates[rates.dims[-1]].values)}
