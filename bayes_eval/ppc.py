"""Posterior predictive checks, and the milestone-assumption check.

Every observed count (an end-to-end cell, a milestone, an expert-completion step) is
replicated once per posterior draw, ``k_rep ~ Binomial(n, p_draw)``, and compared with
the observation by the mid-p Bayesian p-value ``P(k_rep > k) + P(k_rep = k) / 2``,
flagged below 0.025 or above 0.975. The p-values are computed from the binomial
distribution at each draw (no Monte Carlo error from the replication itself).

The milestone-assumption check asks, for a task with milestone and end-to-end data,
how probable at least the observed end-to-end successes are under the milestone-only
posterior of ``P``: a tiny value says the agent succeeds by paths the milestones do
not describe, and milestone-based bounds underestimate it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

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

__all__ = ["FLAG_LOW", "FLAG_HIGH", "milestone_assumption", "predictive_checks", "replicate"]

FLAG_LOW, FLAG_HIGH = 0.025, 0.975
ASSUMPTION_ALPHA = 0.01  # below this the milestone assumption is reported as contradicted


def _cells(posterior):
    """(kind, agent, task, index, k, n, draws) for every observed cell the model explains."""
    post = posterior.posterior
    agents, tasks = list(post[AGENT].values), list(post[TASK].values)
    estimated = {(a, t) for a, t, _, _ in posterior.cells()}
    kinds = []
    if "p_milestone" in post:
        kinds.append((MILESTONE_METHOD, "p_milestone"))
    if "p_step" in post:
        kinds.append((EXPERT_COMPLETION, "p_step"))
    table = posterior.evidence.table
    out = []
    for row in table.itertuples():
        pair = (row.agent, row.task)
        if pair not in estimated:
            continue
        i, j = agents.index(row.agent), tasks.index(row.task)
        explains_e2e = posterior.spec.kind in ("end_to_end", "joint") or (
            posterior.values("method")[i, j] == END_TO_END  # the chain's end-to-end rung
        )
        if row.method == END_TO_END and explains_e2e:
            draws = post["p_task"].values[:, :, i, j]
            index = ""
        elif (row.method, "p_milestone") in kinds:
            draws = post["p_milestone"].sel({MILESTONE: row.step}).values[:, :, i, j]
            index = f"milestone {row.step}"
        elif (row.method, "p_step") in kinds:
            runs = sorted(
                set(
                    table.loc[
                        (table.agent == row.agent)
                        & (table.task == row.task)
                        & (table.method == EXPERT_COMPLETION),
                        "run",
                    ]
                )
            )
            draws = (
                post["p_step"]
                .sel({RUN: runs.index(row.run) + 1, STEP: row.step})
                .values[:, :, i, j]
            )
            index = f"run {row.run}, step {row.step}"
        else:
            continue
        if np.all(np.isnan(draws)):
            continue  # the model did not use this row (e.g. another rung of the chain)
        out.append(
            (row.method, row.agent, row.task, index, int(row.successes), int(row.trials), draws)
        )
    return out


def predictive_checks(posterior) -> pd.DataFrame:
    """One row per observed cell: observed and replicated rates, the mid-p value, a flag.

    Exact models need no draws: each cell's rate has a Beta posterior, so its replicated
    count is Beta-Binomial and the p-value is closed-form. MCMC fits average the
    binomial tail over their draws.
    """
    rows = []
    if posterior.is_mcmc:
        for method, agent, task, index, k, n, draws in _cells(posterior):
            p = np.clip(draws.ravel(), 0.0, 1.0)
            value = stats.binom.sf(k, n, p).mean() + 0.5 * stats.binom.pmf(k, n, p).mean()
            rows.append((agent, task, method, index, k, n, float(p.mean()), float(value)))
    else:
        cells = list(_exact_cells(posterior))
        if cells:
            k, n, a, b = (np.array([c[i] for c in cells], dtype=float) for i in range(4, 8))
            point = b == 0  # a point mass at 1 (k = n under Haldane): replicates k exactly
            safe_b = np.where(point, 1.0, b)
            value = stats.betabinom.sf(k, n, a, safe_b) + 0.5 * stats.betabinom.pmf(k, n, a, safe_b)
            value = np.where(point, 0.5, value)
            mean = np.where(point, 1.0, a / (a + safe_b))
            rows = [
                (*c[:6], float(m), float(v)) for c, m, v in zip(cells, mean, value, strict=True)
            ]
    records = [
        dict(
            agent=agent,
            task=task,
            evidence=method,
            cell=index,
            successes=int(k),
            trials=int(n),
            observed_rate=k / n,
            replicated_rate=rate,
            p_value=value,
            flagged=not FLAG_LOW <= value <= FLAG_HIGH,
        )
        for agent, task, method, index, k, n, rate, value in rows
    ]
    columns = [
        "agent",
        "task",
        "evidence",
        "cell",
        "successes",
        "trials",
        "observed_rate",
        "replicated_rate",
        "p_value",
        "flagged",
    ]
    return pd.DataFrame(records, columns=columns)


def _exact_cells(posterior):
    """(agent, task, method, index, k, n, alpha, beta) of every cell an exact model explains."""
    agents, tasks = list(posterior.coords[AGENT]), list(posterior.coords[TASK])
    alpha, beta = posterior.values("alpha"), posterior.values("beta")
    estimate = posterior.values("method")
    table = posterior.evidence.table
    runs = {
        pair: sorted(set(rows["run"]))
        for pair, rows in table[table["method"] == EXPERT_COMPLETION].groupby(["agent", "task"])
    }
    for row in table.itertuples():
        if row.agent not in agents or row.task not in tasks:
            continue
        i, j = agents.index(row.agent), tasks.index(row.task)
        if not posterior.has_exact_posterior(i, j) or row.method != estimate[i, j]:
            continue  # a point value, no estimate, or evidence of another rung
        if row.method == END_TO_END:
            run, slot, index = 0, 0, ""
        elif row.method == MILESTONE_METHOD:
            run, slot, index = 0, row.step - 1, f"milestone {row.step}"
        else:
            run = runs[(row.agent, row.task)].index(row.run)
            slot, index = row.step - 1, f"run {row.run}, step {row.step}"
        a, b = alpha[i, j, run, slot], beta[i, j, run, slot]
        if not np.isnan(a):
            yield row.agent, row.task, row.method, index, row.successes, row.trials, a, b


def replicate(posterior, seed: int):
    """Replicated counts per observed cell and draw: the ``posterior_predictive`` group.

    ``k_rep`` has dims ``(chain, draw, cell)``; the ``cell`` coordinate names each cell.
    """
    import xarray as xr

    rng = np.random.default_rng(seed)
    cells = _cells(posterior)
    labels = [
        f"{agent} / {task} / {method} {index}".strip()
        for method, agent, task, index, _, _, _ in cells
    ]
    replicated = [rng.binomial(n, np.clip(draws, 0.0, 1.0)) for *_, n, draws in cells]
    values = np.stack(replicated, axis=-1) if cells else np.zeros((1, 1, 0), dtype=int)
    return xr.Dataset({"k_rep": (("chain", "draw", "cell"), values)}, coords={"cell": labels})


def milestone_assumption(evidence, model: str = "mats2024", seed: int = 0) -> pd.DataFrame:
    """Per task with milestone and end-to-end data: are the end-to-end successes plausible?

    ``p_value`` is the posterior predictive probability of at least the observed
    end-to-end successes when ``P`` is the product of the milestone rates (``model``, an
    exact milestone spec, fitted to the milestone rows alone).
    """
    from bayes_eval.fit import fit

    table = evidence.table
    e2e = table[table["method"] == END_TO_END].set_index(["agent", "task"])
    milestones = table[table["method"] == MILESTONE_METHOD]
    both = sorted(set(zip(milestones["agent"], milestones["task"], strict=True)) & set(e2e.index))
    columns = [
        "agent",
        "task",
        "successes",
        "trials",
        "milestone_mean",
        "milestone_upper",
        "p_value",
        "contradicted",
        "message",
    ]
    if not both:
        return pd.DataFrame(columns=columns)
    keep = [pair in set(both) for pair in zip(milestones["agent"], milestones["task"], strict=True)]
    frame = milestones[keep].drop(columns=["row", "n_rows"])
    posterior = fit(_as_input(frame), model, seed=seed)
    summary = posterior.summary().set_index(["agent", "task"])
    post = posterior.posterior["p_task"]
    rows = []
    for agent, task in both:
        k, n = int(e2e.loc[(agent, task), "successes"]), int(e2e.loc[(agent, task), "trials"])
        draws = post.sel({AGENT: agent, TASK: task}).values.ravel()
        if np.all(np.isnan(draws)):
            value = float("nan")  # no milestone posterior (e.g. a zero under Haldane)
        else:
            value = float(stats.binom.sf(k - 1, n, np.clip(draws, 0, 1)).mean())
        bad = bool(value < ASSUMPTION_ALPHA)
        rows.append(
            dict(
                agent=agent,
                task=task,
                successes=k,
                trials=n,
                milestone_mean=summary.loc[(agent, task), "mean"],
                milestone_upper=summary.loc[(agent, task), "upper"],
                p_value=value,
                contradicted=bad,
                message=_message(agent, task, k, n, value, bad),
            )
        )
    return pd.DataFrame(rows, columns=columns)


def _message(agent, task, k, n, value, bad) -> str:
    if np.isnan(value):
        return f"{task} ({agent}): no milestone posterior to check against"
    if not bad:
        return (
            f"{task} ({agent}): {k}/{n} end-to-end successes are consistent with the "
            f"milestones (p = {value:.3g})"
        )
    return (
        f"WARNING {task} ({agent}): {k}/{n} end-to-end successes are very unlikely if the "
        f"agent must pass the milestones in order (p = {value:.2g}). It succeeds by paths "
        "the milestones do not describe, so milestone-based estimates and bounds "
        "underestimate it; use end-to-end data or the joint model."
    )


def _as_input(frame: pd.DataFrame) -> pd.DataFrame:
    """Normalised rows back to the evidence input format (absent values empty)."""
    out = frame.replace({-1: None, "": None})
    return out.drop(columns=[c for c in ("logprob",) if out[c].isna().all()])
