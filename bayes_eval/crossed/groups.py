"""The groups a crossed fit carries besides its draws: ``conjugate`` (method, provenance
and whether each (agent, task) was run, with the end-to-end counts behind its
Clopper-Pearson bound) and ``covariates`` (the covariate values, how they were
standardised, the task groups and the predicted agents)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from bayes_eval.constants import AGENT, TASK
from bayes_eval.counts.grading import grader_provenance, with_graders

if TYPE_CHECKING:
    from bayes_eval.crossed.design import Design

__all__ = ["covariate_group", "covariates_of_group", "estimates_group", "side_tables_of_group"]

AGENT_TERM, TASK_TERM = "agent_covariate", "task_covariate"


def estimates_group(design: Design, spec, seed, run):
    """The ``conjugate`` group: method, provenance and ``observed`` per (agent, task),
    and the end-to-end counts behind the Clopper-Pearson bound of the pairs run."""
    import xarray as xr

    layout, cov = design.layout, design.covariates
    agents, tasks = design.agents, layout.tasks
    shape = (len(agents), len(tasks))
    observed = design.observed()
    priors = ", ".join(f"{role} {prior.label()}" for role, prior in spec.priors.items())
    head = f"{spec.name}; {spec.kind}/crossed; {priors}; {cov.describe()}; {run}; seed {seed}"
    provenance = np.full(shape, "", dtype=object)
    counts = np.full(shape + (2,), -1, dtype=np.int64)
    grading = layout.grading
    graders = {} if grading is None else grader_provenance(grading, spec, layout)
    for p, (i, j) in enumerate(zip(layout.pair_agent, design.pair_task, strict=True)):
        provenance[i, j] = head + graders.get(p, "")
        if layout.e2e_n[p] > 0:
            counts[i, j] = (layout.e2e_k[p], layout.e2e_n[p])
    fitted = len(layout.agents)
    for i, agent in enumerate(agents):
        for j in range(len(tasks)):
            if observed[i, j]:
                continue
            if i < fitted:
                provenance[i, j] = (
                    f"{head}; PREDICTION: never run; from the agent's ability on the tasks it "
                    "ran and the task's difficulty for the agents that ran it"
                )
            else:
                given = zip(cov.agent_terms, design.predicted_raw[i - fitted], strict=True)
                values = ", ".join(f"{term.text} {value:g}" for term, value in given)
                provenance[i, j] = (
                    f"{head}; PREDICTION: new agent '{agent}' described by its covariates "
                    f"alone ({values}), its ability drawn from the agents' trend"
                )
    pair = (AGENT, TASK)
    conjugate = xr.Dataset(
        {
            "method": (pair, np.full(shape, spec.kind)),
            "provenance": (pair, provenance.astype(str)),
            "reason": (pair, np.full(shape, "", dtype=str)),
            "point_log": (pair, np.full(shape, np.nan)),
            "cp_successes": (pair, counts[..., 0]),
            "cp_trials": (pair, counts[..., 1]),
            "observed": (pair, observed),
        },
        coords={AGENT: agents, TASK: tasks},
    )
    return conjugate if grading is None else with_graders(conjugate, grading, layout, spec)


def covariate_group(design: Design):
    """The ``covariates`` group: every agent's and task's covariate values on the terms'
    scale, how they were standardised, the task groups, and (attributes) the terms, the
    length term, the date terms, the predicted agents and where values came from."""
    import xarray as xr

    cov = design.covariates
    groups = cov.task_group if cov.groups else np.full(len(design.layout.tasks), -1)
    raw = cov.agent_raw
    if design.predicted:
        raw = np.concatenate([raw, design.predicted_raw], axis=0)
    data = xr.Dataset(
        {
            "agent_value": ((AGENT, AGENT_TERM), raw),
            "agent_centre": ((AGENT_TERM,), cov.agent_centre),
            "agent_scale": ((AGENT_TERM,), cov.agent_scale),
            "task_value": ((TASK, TASK_TERM), cov.task_raw),
            "task_centre": ((TASK_TERM,), cov.task_centre),
            "task_scale": ((TASK_TERM,), cov.task_scale),
            "task_group": ((TASK,), groups),
        },
        coords={
            AGENT: design.agents,
            TASK: design.layout.tasks,
            AGENT_TERM: [t.text for t in cov.agent_terms],
            TASK_TERM: [t.text for t in cov.task_terms],
        },
    )
    data.attrs = {
        "groups": json.dumps(cov.groups),
        "group_column": cov.group_column or "",
        "length": cov.length.text if cov.length else "",
        "agent_dates": json.dumps(list(cov.agent_dates)),
        "predicted": json.dumps(list(design.predicted)),
        "sources": json.dumps(cov.sources),
    }
    return data


def covariates_of_group(group, spec_covariates: dict):
    """The covariates of a fit read back from its ``covariates`` group (``covariate_group``):
    the ``Covariates`` of its fitted agents and tasks, the predicted agents' names and
    their values on the terms' scale."""
    from bayes_eval.evidence.covariates import Covariates

    attrs = group.attrs
    predicted = tuple(json.loads(attrs["predicted"]))
    raw = np.asarray(group["agent_value"].values, dtype=float)
    fitted = raw.shape[0] - len(predicted)
    groups = json.loads(attrs["groups"])
    task_terms = tuple(spec_covariates.get("task", ()))
    covariates = Covariates(
        agent_terms=tuple(spec_covariates.get("agent", ())),
        task_terms=task_terms,
        agent_raw=raw[:fitted],
        task_raw=np.asarray(group["task_value"].values, dtype=float),
        agent_centre=group["agent_centre"].values,
        agent_scale=group["agent_scale"].values,
        task_centre=group["task_centre"].values,
        task_scale=group["task_scale"].values,
        agent_dates=tuple(json.loads(attrs["agent_dates"])),
        groups=groups,
        task_group=group["task_group"].values if groups else np.zeros(0, dtype=np.int64),
        group_column=attrs["group_column"] or None,
        length=next((t for t in task_terms if t.text == attrs["length"]), None),
        sources=json.loads(attrs["sources"]),
    )
    return covariates, predicted, raw[fitted:]


def side_tables_of_group(group, spec_covariates: dict) -> dict:
    """The side tables (``{"agent": DataFrame, "task": DataFrame}``) that give a refit of
    the fitted agents and tasks the covariates of a fit's ``covariates`` group: each
    term's column at the value the term took (a date as its decimal year, which
    standardises alike), the task groups by name."""
    import pandas as pd

    predicted = len(json.loads(group.attrs["predicted"]))
    agents = group[AGENT].values[: group.sizes[AGENT] - predicted]
    out = {}
    for key, names, values in (
        ("agent", agents, group["agent_value"].values),
        ("task", group[TASK].values, group["task_value"].values),
    ):
        table = pd.DataFrame({key: [str(name) for name in names]})
        for at, term in enumerate(spec_covariates.get(key, ())):
            table[term.column] = term.inverse(values[: len(names), at])
        out[key] = table
    groups, column = json.loads(group.attrs["groups"]), group.attrs["group_column"]
    if column:
        out["task"][column] = [groups[g] for g in group["task_group"].values]
    return out
