"""An exact fit's draws: each factor rate drawn from its Beta posterior (or its spec
prior; a graded pair's rate from its mixture, ``bayes_eval.exact.graded``), multiplied
in log space into ``p_task`` (probabilities down to 1e-300 keep full precision), with a
seeded ``numpy.random.Generator``; and the log prior density of the rates drawn.
``Posterior`` makes its ``posterior``, ``prior`` and ``log_prior`` groups of an exact
fit with them, the first time they are read."""

from __future__ import annotations

import numpy as np
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
from bayes_eval.exact.products import log_beta_draws
from bayes_eval.results.factors import stack_factor_rates

__all__ = ["PRIOR_ROLE", "exact_draws", "exact_log_prior", "exact_prior", "prior_shapes"]

# Chains an exact fit's independent draws are dealt into (where they divide the draws).
EXACT_CHAINS = 4
# Cells drawn together in an exact tree (4,000 draws of 500 cells of 5 factors: 80 MB).
DRAW_CHUNK_CELLS = 500
FACTOR = "factor"


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


def exact_draws(result, n_draws: int, seed: int, shapes=None) -> xr.Dataset:
    """Exact posterior draws of ``p_task`` and the factor rates, sampled in log space;
    ``shapes``, where given, the Beta shapes ``(alpha, beta)`` drawn from instead of the
    posterior's (the prior's, in ``_exact_prior``)."""
    rng = np.random.default_rng(seed)
    coords = result.coords
    agents, tasks = coords[AGENT], coords[TASK]
    n_runs, n_factors = len(coords[RUN]), len(coords[FACTOR])
    methods = result.values("method")
    log_task = np.full((n_draws, len(agents), len(tasks)), np.nan)
    # the factor rates are kept of milestone and expert-completion cells alone (an
    # end-to-end rate is p_task): none kept, none made, for a table of end-to-end runs
    factor_cells = (methods == MILESTONE_METHOD) | (methods == EXPERT_COMPLETION)
    factor_shape = (n_draws, len(agents), len(tasks), n_runs, n_factors)
    log_factor = np.full(factor_shape, np.nan) if factor_cells.any() else None
    alpha = result.values("alpha") if shapes is None else shapes[0]
    beta = result.values("beta") if shapes is None else shapes[1]
    cells = np.argwhere(result.exact_positions & ~np.isnan(alpha).all(axis=(-2, -1)))
    # cells in chunks, so that one chunk's draws stay within memory however many cells
    for start in range(0, len(cells), DRAW_CHUNK_CELLS):
        i, j = cells[start : start + DRAW_CHUNK_CELLS].T
        factors, log_task[:, i, j] = _cell_draws(alpha[i, j], beta[i, j], n_draws, rng)
        if log_factor is not None:
            log_factor[:, i, j] = factors
    graded = result.graded_positions & (shapes is None)  # the prior's draws: none graded
    graded_end_to_end = graded & (methods == END_TO_END)
    p_graded = np.full(log_task.shape, np.nan) if graded_end_to_end.any() else None
    products = graded & (methods != END_TO_END)  # graded milestones, expert steps
    graded_factor = np.full(factor_shape, np.nan) if products.any() else None
    for i, j in np.argwhere(graded):  # drawn with the grader's rates (exact.graded)
        if methods[i, j] != END_TO_END:  # a product (exact.graded_product)
            joint = result.graded_product_at(i, j).log_draws(n_draws, rng)
            runs, width = joint["q"].shape[1:]
            log_factor[:, i, j, :runs, :width] = joint["log_factors"]
            graded_factor[:, i, j, :runs, :width] = joint["q"]
            log_task[:, i, j] = joint["log_p"]
            continue
        joint = result.graded_at(i, j).joint_draws(n_draws, rng)
        log_task[:, i, j] = np.log(joint["p"])
        p_graded[:, i, j] = joint["q"]
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
    data = {
        "p_task": (
            ("chain", "draw", AGENT, TASK),
            chained(np.exp(log_task, out=log_task)),
            {"description": P_TASK_DESCRIPTION},
        )
    }
    if p_graded is not None:
        data["p_graded"] = (
            ("chain", "draw", AGENT, TASK),
            chained(p_graded),
            {"description": P_GRADED_DESCRIPTION},
        )
    factor_rates = {} if log_factor is None else {"p": np.exp(log_factor, out=log_factor)}
    if graded_factor is not None:
        factor_rates["p_graded"] = graded_factor  # a graded count's chance (graded_product)
    for prefix, rates in factor_rates.items():
        if (methods == MILESTONE_METHOD).any():
            at = np.where((methods == MILESTONE_METHOD)[..., None], rates[..., 0, :], np.nan)
            dims = ("chain", "draw", AGENT, TASK, MILESTONE)
            data[f"{prefix}_milestone"] = (dims, chained(at))
            draw_coords[MILESTONE] = coords[FACTOR]
        if (methods == EXPERT_COMPLETION).any():
            at = np.where((methods == EXPERT_COMPLETION)[..., None, None], rates, np.nan)
            data[f"{prefix}_step"] = (("chain", "draw", AGENT, TASK, RUN, STEP), chained(at))
            draw_coords[RUN] = coords[RUN]
            draw_coords[STEP] = coords[FACTOR]
    return stack_factor_rates(xr.Dataset(data, coords=draw_coords))


# What ``p_task`` holds, for a reader of the tree (ArviZ shows a NaN pair as a row of NaN).
P_TASK_DESCRIPTION = (
    "each pair's probability of success; NaN where the pair has no posterior: a point "
    "value (expert best-of-N, golden solution: conjugate/point_log, the summary's mean) "
    "or no estimate (the summary's provenance says why)"
)


P_GRADED_DESCRIPTION = (
    "where a grader that errs scored the pair's runs: the chance that a run is graded a "
    "success, se p + (1 - sp)(1 - p), drawn with p_task from their joint posterior; NaN "
    "elsewhere"
)


# The spec prior of an exact estimate's factors, by the estimate's method.
PRIOR_ROLE = {END_TO_END: "end_to_end", MILESTONE_METHOD: "milestone", EXPERT_COMPLETION: "step"}


def prior_shapes(result) -> tuple[np.ndarray, np.ndarray]:
    """The prior's Beta shapes in the layout of the ``conjugate`` shapes: each factor's
    spec prior; NaN for a pair any of whose priors is improper (Haldane's ``Beta(0, 0)``
    has no draws)."""
    present = ~np.isnan(result.values("alpha"))
    methods = result.values("method")
    graded = result.graded_positions
    present[..., 0, 0] |= graded & (methods == END_TO_END)  # one factor, its shapes NaN
    if (graded & (methods != END_TO_END)).any():
        present |= ~np.isnan(result.values("graded_factors")[..., 0])  # a graded product's
    alpha = np.full(present.shape, np.nan)
    beta = np.full(present.shape, np.nan)
    for method, role in PRIOR_ROLE.items():
        cells = result.exact_positions & (methods == method)
        if not cells.any():
            continue
        prior = result.spec.priors[role]
        if prior.alpha > 0 and prior.beta > 0:
            alpha[cells] = np.where(present[cells], prior.alpha, np.nan)
            beta[cells] = np.where(present[cells], prior.beta, np.nan)
    return alpha, beta


def exact_prior(result, _draws_given, n_draws: int, seed: int) -> xr.Dataset:
    """An exact fit's prior: its factor rates drawn from their spec priors, multiplied as
    the posterior's are (``exact_draws``)."""
    return exact_draws(result, n_draws, seed, prior_shapes(result))


def exact_log_prior(result, draws: xr.Dataset) -> xr.Dataset:
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
