"""What simulation-based calibration (``bayes_eval.checks.sbc``) does the same way in every
family: the setup each simulation reads, the thinned fit of a simulated table, the ranks
of the truth among its draws, and a layout given a simulation's counts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayes_eval.constants import END_TO_END
from bayes_eval.counts.grading import with_terms
from bayes_eval.registry import model_of

__all__ = [
    "SimulationSetup",
    "rank",
    "rate_ranks",
    "ranks",
    "thinned",
    "with_cluster_counts",
    "with_counts",
    "with_graded_counts",
]


@dataclass(frozen=True)
class SimulationSetup:
    """What every simulation of one SBC run reads (sent to each dask worker once):
    ``design`` is the pooled layout or the crossed design, ``form`` the pooled form,
    ``hyper`` the prior roles drawn (with their variables), ``ranked`` the variables
    ranked, and ``truths`` every simulation's draw of the prior, where the family draws
    them at once (the crossed models', through their graph: ``(dims, values)`` by name,
    a simulation's at its index)."""

    spec: object
    evidence_rows: dict
    clusters: pd.DataFrame | None
    design: object
    form: object
    hyper: dict
    ranked: tuple
    draws: int
    tune: int
    seed: int
    truths: dict = field(default_factory=dict)


def thinned(model_data, setup: SimulationSetup, index: int):
    """The fit of simulation ``index``: two chains of ``5 (draws + 1)`` draws (their seed
    ``seed + index + 1``), thinned by 10 to ``draws`` nearly independent ones: the
    posterior, and the flat indices of the draws kept."""
    import nutpie

    draws, tune, seed = setup.draws, setup.tune, setup.seed + index + 1

    trace = nutpie.sample(
        model_data,
        draws=5 * (draws + 1),
        tune=tune,
        chains=2,
        seed=seed,
        progress_bar=False,
        save_warmup=False,
    )
    post = trace["posterior"].to_dataset()
    keep = np.linspace(0, post.sizes["chain"] * post.sizes["draw"] - 1, draws).astype(int)
    return post, keep


def ranks(post, truth, names, keep, rng) -> dict:
    """The rank of every element of each true quantity in ``names`` among its kept draws,
    labelled ``name[i]...``."""
    row = {}
    for name in names:
        true = np.asarray(truth[name])
        flat = post[name].values.reshape(-1, *true.shape)[keep]
        for index in np.ndindex(true.shape):
            label = name + "".join(f"[{i}]" for i in index)
            row[label] = rank(flat[(slice(None), *index)], true[index], rng)
    return row


def rate_ranks(p_task, positions, truth, keep, rng) -> dict:
    """The rank of every pair's true ``P`` among the kept draws of ``p_task`` (``(chain,
    draw, agent, task)``), the pairs at ``positions`` ``(i, j)``."""
    draws = p_task.reshape(-1, *p_task.shape[2:])[keep]
    return {
        f"p_task[{p}]": rank(draws[:, i, j], truth[p], rng) for p, (i, j) in enumerate(positions)
    }


def rank(draws, truth, rng) -> int:
    """Rank of ``truth`` among ``draws``, ties broken at random (values that underflow
    to 0 tie, and must not all rank first)."""
    below = int(np.sum(draws < truth))
    ties = int(np.sum(draws == truth))
    return below + int(rng.integers(ties + 1))


def with_cluster_counts(setup, spec, layout, data):
    """The layout of the evidence's rows with each cluster's simulated successes
    (``data``'s ``k_cluster``, taken out): the terms of the exact marginal over clusters
    depend on the counts, so a clustered simulation is laid out and compiled anew."""
    from bayes_eval.counts.layout import build_layout

    table = setup.clusters.copy()
    table.loc[layout.cluster_rows, "successes"] = data.pop("k_cluster")
    return build_layout(setup.evidence_rows, spec, table)


def with_graded_counts(layout, data):
    """The layout with the simulated counts (``data``'s ``k_obs``, taken out: end to end,
    or of the milestone or step cells), its graded rates' terms made for their simulated
    graded counts."""
    k = data.pop("k_obs")
    data.pop("k_obs_failures")
    grading = with_terms(layout.grading, k[layout.grading.pairs])
    counts = {"e2e_k": k} if layout.grading.method == END_TO_END else {"k": k}
    return dataclasses.replace(layout, grading=grading, **counts)


def with_counts(layout, spec, data):
    """The layout with the simulated counts in place of the design's."""
    from bayes_eval.counts.layout import end_to_end_groups

    if not model_of(spec).cell_method:
        return dataclasses.replace(layout, e2e_k=data.get("k_obs", layout.e2e_k))
    if "e2e_obs" in data:  # a crossed model's end-to-end counts, over the pairs run end to end
        e2e_k = layout.e2e_k.copy()
        e2e_k[layout.e2e_n > 0] = data["e2e_obs"]
        return dataclasses.replace(layout, k=data["k_obs"], e2e_k=e2e_k)
    e2e_k = layout.e2e_k.copy()
    for name, pairs in zip(("e2e_few", "e2e_k"), end_to_end_groups(layout), strict=True):
        if name in data:
            e2e_k[pairs] = data[name]
    return dataclasses.replace(layout, k=data.get("k_obs", layout.k), e2e_k=e2e_k)
