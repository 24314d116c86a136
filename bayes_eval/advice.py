"""Advice on the model from a table's shape, where measurement says another predicts better.

Agentic benchmarks often run several agents on the same tasks, each pair once guided
through the task's subtasks (milestone rows) and once unguided (an end-to-end row), one
trial per cell. On tables of that shape (``sparse_shared``) the models differ most:
multiplying milestone rates underestimates the unguided successes, ``joint``'s bypass,
pooled within an agent, cannot tell easy tasks from hard ones, and ``crossed`` throws the
milestones away. ``crossed_joint`` is built for them. After a fit of another model to such
a table, ``advice`` gives one line with the measured evidence (``MEASURED``, from
``studies/capture_the_flag.py``) and the command that checks it on the user's own table;
``joint`` refuses such a table before sampling (``refuse_unfit``).
"""

from __future__ import annotations

from pathlib import Path

from bayes_eval.constants import END_TO_END, MILESTONE_METHOD
from bayes_eval.errors import InputError

__all__ = ["BUILT_FOR", "MEASURED", "OBSERVED", "advice", "refuse_unfit", "sparse_shared"]

BUILT_FOR = "crossed_joint"
# On 20 simulated capture-the-flag tables of 8 agents x 40 tasks, half of each task's
# unguided outcomes held out (`python studies/capture_the_flag.py`, 2026-11-27;
# docs/crossed.md): each model's mean held-out log score per table and its expected
# successes per table, and the successes that happened (per table).
MEASURED = {
    "crossed": (-33.4, 11.9),
    "mats2024": (-35.4, 4.5),
    "joint": (-32.5, 18.5),
    BUILT_FOR: (-26.9, 11.8),
}
OBSERVED = 10.1


def sparse_shared(table) -> str | None:
    """The shape of ``table`` (the evidence's normalised rows) in words where several agents
    share tasks and most milestone and end-to-end cells have one trial, else None."""
    milestones = table[table["method"] == MILESTONE_METHOD]
    end_to_end = table[table["method"] == END_TO_END]
    if milestones.empty or end_to_end.empty:
        return None
    if milestones["trials"].median() > 1 or end_to_end["trials"].median() > 1:
        return None
    agents = table["agent"].nunique()
    shared = int((table.groupby("task")["agent"].nunique() >= 2).sum())
    if agents < 2 or shared < 2:
        return None
    return (
        f"{agents} agents sharing {shared} tasks, milestone and end-to-end runs of one trial "
        "per cell"
    )


def advice(table, spec, source: str) -> str | None:
    """One line for a fit of ``spec`` to ``table`` (read from the file ``source``, if
    any) where the table has the shape ``sparse_shared`` describes and ``crossed_joint``
    predicted better than the spec's model on such tables, else None."""
    shape = sparse_shared(table)
    if shape is None or spec.name not in MEASURED or spec.name == BUILT_FOR:
        return None
    mine, better = MEASURED[spec.name][0], MEASURED[BUILT_FOR][0]
    source = source if Path(source).is_file() else "TABLE"  # a DataFrame has no path
    return (
        f"advice: on tables of this shape ({shape}) {BUILT_FOR} predicted held-out "
        f"unguided outcomes better than {spec.name} (mean log score {better:.1f} against "
        f"{mine:.1f} over 20 simulated capture-the-flag tables; docs/crossed.md); compare "
        f"them on this table: bayes-eval compare {source} --models {spec.name} {BUILT_FOR} "
        "--holdout end_to_end"
    )


def refuse_unfit(table, spec) -> None:
    """Refuse, before sampling, a table of the shape ``sparse_shared`` describes to
    ``spec``'s model, one whose registry entry says it is refused there (``joint``).

    Raises
    ------
    InputError
        A table of that shape.
    """
    shape = sparse_shared(table)
    if shape is None:
        return
    expected = MEASURED["joint"][1]
    raise InputError(
        f"model {spec.name}: this table has {shape}; there joint's bypass, pooled within "
        "an agent, is not identified by one run per pair and over-predicts the unguided "
        f"successes ({expected:.1f} expected per table where {OBSERVED:.1f} happened, on 20 "
        f"simulated tables of this shape; docs/models.md); use {BUILT_FOR}, built for it"
    )
