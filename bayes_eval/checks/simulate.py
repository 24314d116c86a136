"""Simulation studies: when can milestone estimates be trusted?

* ``variance_study``: the variance of the milestone estimate (the product of the
  empirical milestone rates, Phuong et al.'s posterior mean under Haldane's prior)
  against the end-to-end estimate ``k / n``, at equal trials per stage and a fixed
  end-to-end rate ``R``, with every milestone at ``R^(1/M)``. Simulated, and beside it
  the closed forms ``R (1 - R) / n`` and ``(p (1 - p) / n + p^2)^M - p^(2M)``.
* ``paths_study``: tasks whose end-to-end success does not need the milestones as
  measured (another order, a skipped milestone, or a bypass path), fitted with a
  milestone model and the joint model and calibrated against simulated end-to-end
  ground truth, as the strength of the violation grows.
* ``random_design``: a random evaluation table of the shape real evaluations produce
  (for the robustness study of the pooled models' defaults).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_eval.constants import END_TO_END, MILESTONE_METHOD, VIOLATIONS
from bayes_eval.errors import InputError
from bayes_eval.registry import model_of

__all__ = [
    "CAPTURE_THE_FLAG",
    "DESIGN_RANGES",
    "end_to_end_rates",
    "paths_study",
    "random_design",
    "variance_study",
    "variance_sweep",
]

CHUNK = 1_000_000  # binomial draws made at once (memory: CHUNK integers)
# What real evaluation tables look like: inclusive ranges of agents, tasks, milestones per
# task, trials per cell, true end-to-end rates and the share of pairs with end-to-end rows.
DESIGN_RANGES = {
    "agents": (1, 10),
    "tasks": (3, 50),
    "milestones": (2, 8),
    "trials": (1, 100),
    "rate": (0.01, 0.95),
    "end_to_end_share": (0.3, 1.0),
}
# A capture-the-flag benchmark as public run logs give it: 8 models x 40 tasks, one
# subtask-guided run per subtask (the milestones) and one unguided run (end to end) each.
CAPTURE_THE_FLAG = {
    "agents": (8, 8),
    "tasks": (40, 40),
    "trials": (1, 1),
    "end_to_end_share": (1.0, 1.0),
}


def variance_study(
    milestones: int,
    end_to_end_rate: float,
    trials: int,
    *,
    replications: int = 1_000_000,
    seed: int = 0,
) -> dict:
    """Variance of end-to-end against milestone estimates at equal trials per stage.

    Parameters
    ----------
    milestones : int
        Number of milestones ``M``, each with rate ``end_to_end_rate ** (1 / M)``.
    end_to_end_rate : float
        The task's true end-to-end rate ``R``.
    trials : int
        Trials per stage: ``n`` end-to-end trials, and ``n`` per milestone.
    replications : int
        Simulated evaluations of each kind.
    seed : int

    Returns
    -------
    dict
        ``variance_ratio`` (end-to-end variance over milestone variance, simulated),
        the simulated and closed-form variances and ``variance_ratio_exact``.
    """
    rng = np.random.default_rng(seed)
    p = end_to_end_rate ** (1 / milestones)
    e2e = _chunked_moments(
        lambda size: rng.binomial(trials, end_to_end_rate, size) / trials, replications
    )
    product = _chunked_moments(
        lambda size: np.prod(rng.binomial(trials, p, (size, milestones)) / trials, axis=1),
        replications,
        width=milestones,
    )
    e2e_exact = end_to_end_rate * (1 - end_to_end_rate) / trials
    product_exact = (p * (1 - p) / trials + p * p) ** milestones - p ** (2 * milestones)
    return {
        "milestones": milestones,
        "end_to_end_rate": end_to_end_rate,
        "milestone_rate": p,
        "trials": trials,
        "replications": replications,
        "end_to_end_variance": e2e[1],
        "milestone_variance": product[1],
        "milestone_mean": product[0],
        "variance_ratio": e2e[1] / product[1],
        "end_to_end_variance_exact": e2e_exact,
        "milestone_variance_exact": product_exact,
        "variance_ratio_exact": e2e_exact / product_exact,
    }


def variance_sweep(
    milestones,
    end_to_end_rate: float,
    trials,
    *,
    replications: int = 1_000_000,
    seed: int = 0,
    workers: int | None = None,
    scheduler: str | None = None,
) -> pd.DataFrame:
    """``variance_study`` at every (trials, milestones) pair, one row each, serially or on
    a dask cluster (``workers``, ``scheduler``: ``bayes_eval.inference.sweep.run_sweep``). Every
    pair uses ``seed``, whatever runs it."""
    from bayes_eval.inference.sweep import run_sweep

    designs = [(m, n) for n in trials for m in milestones]

    def describe(index):
        m, n = designs[index]
        return f"variance: {m} milestones, {n} trials"

    setup = dict(designs=designs, rate=end_to_end_rate, replications=replications, seed=seed)
    records = run_sweep(
        _variance_design,
        len(designs),
        setup,
        workers=workers,
        scheduler=scheduler,
        describe=describe,
    )
    return pd.DataFrame(records)


def _variance_design(index: int, setup: dict) -> dict:
    m, n = setup["designs"][index]
    return variance_study(
        m, setup["rate"], n, replications=setup["replications"], seed=setup["seed"]
    )


def _chunked_moments(simulate, replications: int, width: int = 1) -> tuple[float, float]:
    """Mean and variance of ``replications`` simulated values, each made of ``width``
    draws, in chunks of about ``CHUNK`` draws."""
    total = total_sq = 0.0
    done = 0
    while done < replications:
        size = min(max(1, CHUNK // width), replications - done)
        values = simulate(size)
        total += values.sum()
        total_sq += np.square(values).sum()
        done += size
    mean = total / replications
    return mean, (total_sq - replications * mean * mean) / (replications - 1)


def end_to_end_rates(rates: np.ndarray, violation: str, strength: float) -> np.ndarray:
    """True end-to-end rates of tasks whose milestone rates (as measured) are ``rates``.

    ``rates`` has shape ``(tasks, milestones)``; ``strength`` in [0, 1], 0 meaning the
    milestones describe the only way to succeed (``P = prod p_m``):

    * ``bypass``: an alternative path succeeds with probability ``strength`` where the
      milestone path fails, ``P = Q + (1 - Q) strength``;
    * ``skip``: each milestone is unnecessary with probability ``strength``,
      ``P = prod (p_m + (1 - p_m) strength)``;
    * ``order``: after failing a milestone the agent works on others and returns to it
      from the new state (another order) with probability ``strength``, one more try at
      ``p_m``, ``P = prod p_m (1 + strength (1 - p_m))``.
    """
    if violation == "bypass":
        q = np.prod(rates, axis=1)
        return q + (1 - q) * strength
    if violation == "skip":
        return np.prod(rates + (1 - rates) * strength, axis=1)
    if violation == "order":
        return np.prod(rates * (1 + strength * (1 - rates)), axis=1)
    raise InputError(f"violation: '{violation}' is not one of {', '.join(VIOLATIONS)}")


def paths_study(
    *,
    violation: str = "bypass",
    strengths=(0.0, 0.05, 0.1, 0.2, 0.4),
    models=("mats2024", "joint"),
    tasks: int = 40,
    milestones: int = 3,
    trials: int = 100,
    end_to_end_share: float = 0.5,
    end_to_end_trials: int = 50,
    truth_trials: int = 100,
    seed: int = 0,
    workers: int | None = None,
    scheduler: str | None = None,
) -> pd.DataFrame:
    """Calibrate milestone-based models on tasks that violate the milestone assumption.

    For each strength, ``tasks`` tasks get milestone rates from Beta(1, 1) (the
    ``mats2024`` prior, so that strength 0 is exactly well specified for it) and
    ``trials`` trials per milestone; the first ``end_to_end_share`` of the tasks also
    get ``end_to_end_trials`` end-to-end trials (used by the joint model only); every
    task gets ``truth_trials`` held-out end-to-end trials as ground truth. Each model
    is fitted and calibrated (``bayes_eval.checks.calibration``). The fits run serially,
    or on a dask cluster with ``workers`` or ``scheduler``
    (``bayes_eval.inference.sweep.run_sweep``), with the same results.

    Returns
    -------
    pandas.DataFrame
        One row per (strength, model, subset), ``subset`` being ``all`` tasks or, for a
        model that sees end-to-end data, the tasks with ``milestones only``: ``level`` of
        the bound, ``bound_failures`` (upper bound below the true ``P``),
        ``failure_rate``, ``exceeded`` (ground-truth rate above the bound) and
        ``exceeded_if_calibrated`` (its expectation under the model),
        ``pit_ks_p_value``, ``coverage_90``, ``mean_log_score`` and ``diagnostics_ok``.
    """
    from bayes_eval.inference.sweep import run_sweep
    from bayes_eval.specs import load_spec

    if violation not in VIOLATIONS:
        raise InputError(f"violation: '{violation}' is not one of {', '.join(VIOLATIONS)}")
    specs = [load_spec(m) for m in models]
    for spec in specs:
        uses = set(model_of(spec).uses)
        if MILESTONE_METHOD not in uses or not uses <= {MILESTONE_METHOD, END_TO_END}:
            raise InputError(
                f"models: {spec.name} fits {spec.kind} evidence; the study needs milestone "
                "or joint models"
            )
    rng = np.random.default_rng(seed)
    names = [f"task_{t:03d}" for t in range(tasks)]
    with_e2e = np.arange(tasks) < round(end_to_end_share * tasks)
    datasets = []  # drawn in order, so that the results do not depend on the sweep
    for strength in strengths:
        rates = rng.uniform(size=(tasks, milestones))
        truth_p = end_to_end_rates(rates, violation, strength)
        milestone_rows = pd.DataFrame(
            dict(
                task=np.repeat(names, milestones),
                method="milestone",
                step=np.tile(np.arange(1, milestones + 1), tasks),
                successes=rng.binomial(trials, rates).ravel(),
                trials=trials,
            )
        )
        e2e_rows = pd.DataFrame(
            dict(
                task=np.array(names)[with_e2e],
                method="end_to_end",
                successes=rng.binomial(end_to_end_trials, truth_p[with_e2e]),
                trials=end_to_end_trials,
            )
        )
        truth = pd.DataFrame(
            dict(
                task=names,
                method="end_to_end",
                successes=rng.binomial(truth_trials, truth_p),
                trials=truth_trials,
            )
        )
        datasets.append((strength, truth_p, milestone_rows, e2e_rows, truth))
    fits = [(data, spec) for data in datasets for spec in specs]

    def describe(index):
        (strength, *_), spec = fits[index]
        return f"paths: {violation} {strength:g}, {spec.name}"

    setup = dict(fits=fits, violation=violation, with_e2e=with_e2e, seed=seed)
    rows = run_sweep(
        _paths_fit, len(fits), setup, workers=workers, scheduler=scheduler, describe=describe
    )
    return pd.DataFrame([row for fit_rows in rows for row in fit_rows])


def _paths_fit(index: int, setup: dict) -> list[dict]:
    """The rows of ``paths_study`` for one (strength, model): fit, then calibrate."""
    from bayes_eval.checks.calibration import calibrate
    from bayes_eval.fit import fit

    (strength, truth_p, milestone_rows, e2e_rows, truth), spec = setup["fits"][index]
    with_e2e, seed = setup["with_e2e"], setup["seed"]
    uses_e2e = END_TO_END in model_of(spec).uses
    evidence = pd.concat([milestone_rows, e2e_rows]) if uses_e2e else milestone_rows
    posterior = fit(evidence, spec, seed=seed)
    subsets = {"all": np.ones(with_e2e.size, dtype=bool)}
    if uses_e2e:
        subsets["milestones only"] = ~with_e2e
    rows = []
    for subset, keep in subsets.items():
        result = calibrate(posterior, truth[keep], seed=seed)
        cells = result.cells
        failures = int((cells["upper"].to_numpy() < truth_p[keep]).sum())
        coverage = result.coverage().set_index("nominal")
        exceedance = result.exceedance()
        rows.append(
            dict(
                violation=setup["violation"],
                strength=strength,
                level=result.level,
                model=spec.name,
                subset=subset,
                tasks=int(keep.sum()),
                bound_failures=failures,
                failure_rate=failures / keep.sum(),
                exceeded=exceedance["exceeded"],
                exceeded_if_calibrated=exceedance["expected_if_calibrated"],
                pit_ks_p_value=result.pit_p_value(),
                coverage_90=coverage.loc[0.9, "rate"],
                mean_log_score=float(cells["log_score"].mean()),
                diagnostics_ok=bool(posterior.summary()["diagnostics_ok"].all()),
            )
        )
    return rows


def random_design(rng, ranges=None) -> tuple[pd.DataFrame, dict]:
    """A random evaluation table of the shape real evaluations produce.

    Drawn from ``ranges`` (default ``DESIGN_RANGES``): the numbers of agents and tasks
    uniformly; trials per cell log-uniformly (one count per design; a fifth of the cells
    ragged, with fewer); milestones per task uniformly. A task's true end-to-end rate is
    logit-uniform over the rate range, shifted per agent (sd 1 on the logit scale) and
    clipped to the range; its milestones split it unevenly, ``p_m = R^w_m`` with ``w``
    Dirichlet(2). One (agent, task) in ten is not run. End-to-end rows (as many trials as
    the milestones) cover a random share of the pairs (``end_to_end_share``, 30-100%), at
    ``Q + (1 - Q) lambda`` with a bypass ``lambda ~ Beta(1, 9)``. Low rates and few trials
    give zero-success cells, high rates all-success ones.

    Returns
    -------
    evidence : pandas.DataFrame
        ``agent, task, method, step, successes, trials``.
    design : dict
        ``agents``, ``tasks``, ``trials``, ``pairs``, ``milestone_cells``,
        ``end_to_end_cells``, ``zero_cells`` and ``full_cells`` (milestone cells with 0
        and with all successes).
    """
    ranges = {**DESIGN_RANGES, **(ranges or {})}

    def draw(name):
        low, high = ranges[name]
        return int(rng.integers(low, high + 1))

    agents, tasks = draw("agents"), draw("tasks")
    low, high = ranges["trials"]
    trials = int(round(np.exp(rng.uniform(np.log(low), np.log(high)))))
    r_low, r_high = ranges["rate"]
    logit = rng.uniform(np.log(r_low / (1 - r_low)), np.log(r_high / (1 - r_high)), tasks)
    shift = rng.normal(0.0, 1.0, agents)
    rate = np.clip(1 / (1 + np.exp(-(logit[None, :] + shift[:, None]))), r_low, r_high)
    milestones = [draw("milestones") for _ in range(tasks)]
    run = rng.random((agents, tasks)) >= 0.1
    run[np.arange(agents), rng.integers(0, tasks, agents)] = True  # every agent runs a task
    e2e_share = rng.uniform(*ranges["end_to_end_share"])
    rows = []
    for a in range(agents):
        for t in range(tasks):
            if not run[a, t]:
                continue
            weights = rng.dirichlet(np.full(milestones[t], 2.0))
            p = rate[a, t] ** weights
            n = np.where(rng.random(milestones[t]) < 0.2, rng.integers(1, trials + 1), trials)
            agent, task = f"agent_{a}", f"task_{t:02d}"
            for m in range(milestones[t]):
                k = int(rng.binomial(n[m], p[m]))
                rows.append((agent, task, "milestone", m + 1, k, int(n[m])))
            if rng.random() < e2e_share:
                q = float(np.prod(p))
                truth = q + (1 - q) * rng.beta(1.0, 9.0)
                k = int(rng.binomial(trials, truth))
                rows.append((agent, task, "end_to_end", np.nan, k, trials))
    columns = ["agent", "task", "method", "step", "successes", "trials"]
    evidence = pd.DataFrame(rows, columns=columns)
    cells = evidence[evidence["method"] == "milestone"]
    design = dict(
        agents=agents,
        tasks=tasks,
        trials=trials,
        pairs=int(run.sum()),
        milestone_cells=len(cells),
        end_to_end_cells=int((evidence["method"] == "end_to_end").sum()),
        zero_cells=int((cells["successes"] == 0).sum()),
        full_cells=int((cells["successes"] == cells["trials"]).sum()),
    )
    return evidence, design
