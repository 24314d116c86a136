"""The report's defence of its bounds: how much of each bound is the prior (the prior
family, ``checks.sensitivity``), and whether each agent is more capable than the one
before it (``checks.agents``)."""

from __future__ import annotations

import pandas as pd

from bayes_eval.checks.agents import ACROSS_TASKS, compare_agents
from bayes_eval.checks.sensitivity import PSENSE_LIMIT
from bayes_eval.errors import InputError
from bayes_eval.results.summary import format_number

__all__ = ["agent_sections", "sensitivity_sections"]

# At most this many consecutive pairs of agents get a comparison in the report.
REPORTED_AGENT_PAIRS = 10


def sensitivity_sections(sensitivity) -> list:
    """The section "How much of each bound is the prior": each bound's range over the
    prior family, its power-scaling diagnostic, and the verdicts the family flips."""
    pairs = sensitivity.pairs
    if not len(pairs):
        return []
    flipped = pairs[pairs["prior_sensitive"].fillna(False).astype(bool)]
    text = (
        "Each bound recomputed under a family of priors: the spec's own, uniform and "
        "Jeffreys' priors for every rate or mean, and for each prior a sceptical member "
        "(holding twice as hard to its centre) and a permissive one (half as hard). "
        "Exact models recompute every member exactly; MCMC models reweight the fit's "
        "draws (Pareto-smoothed importance sampling) and refit where the weights' Pareto "
        "k exceeds 0.7. "
        f"{len(flipped)} of {len(pairs)} verdicts change within the family."
    )
    scaled = pairs["psense"].notna().any()  # power scaling ran (MCMC fits)
    if scaled:
        informative = int((pairs["psense"] > PSENSE_LIMIT).sum())
        text += (
            f" Power scaling (Kallioinen et al. 2024) finds the prior informative (sensitivity "
            f"above {PSENSE_LIMIT:g}) for {informative} of {len(pairs)} bounds."
        )
    text += (
        " The table of pairs gives each bound's range over the family (prior range)"
        + (" and its power-scaling sensitivity" if scaled else "")
        + "."
    )
    sections = [("h2", "How much of each bound is the prior"), ("p", text)]
    if len(flipped):
        notes = [
            f"{row.agent}, {row.task}: {sensitivity.note(row.agent, row.task)}"
            for row in flipped.itertuples()
        ]
        sections.append(("list", notes))
    untrusted = pairs[pairs["untrusted"] != ""]
    if len(untrusted):
        sections.append(
            (
                "p",
                f"{len(untrusted)} bound(s) have members whose reweighting could not be "
                "trusted and that could not be refitted here (bayes-eval fit --sensitivity "
                "refits them): " + ", ".join(sorted(set(untrusted["untrusted"]))) + ".",
            )
        )
    return sections


def agent_sections(posterior, level: float, order: list[str]) -> list:
    """The section "Agents compared": the agents in ``order`` (most capable first,
    ``checks.agents.capability_order``), each against the one ranked next above it, across
    tasks and per task (``checks.agents.compare_agents``)."""
    if len(order) < 2:
        return []
    rows, refused = [], []
    for b, a in list(zip(order, order[1:], strict=False))[:REPORTED_AGENT_PAIRS]:
        try:
            result = compare_agents(posterior, a, b, level=level)
        except InputError as exc:
            refused.append(f"{b} against {a}: {exc}")
            continue
        refused += [f"{b} against {a}, {line}" for line in result.refused]
        # the tasks both agents ran (a crossed fit also compares its predictions)
        tasks = result.table[(result.table["task"] != ACROSS_TASKS) & result.table["observed"]]
        across = result.table[result.table["task"] == ACROSS_TASKS].iloc[0]
        rows.append(
            {
                "B against A": f"{b} against {a}",
                "across tasks": across["quantity"],
                "P(B > A)": format_number(across["prob_b_greater"]),
                f"B - A ({level:g} bounds)": f"{format_number(across['diff_lower'])} to "
                f"{format_number(across['diff_upper'])}",
                "tasks B ahead": int((tasks["prob_b_greater"] > level).sum()),
                "tasks A ahead": int((tasks["prob_b_greater"] < 1 - level).sum()),
                "tasks compared": len(tasks),
            }
        )
    text = (
        "The agents from the most capable down, by their end-to-end success on the "
        "table's tasks (the mean over tasks of each pair's posterior mean), each (A) "
        "against the one ranked next above it (B), within this one fit: P(B > A) and the "
        "one-sided bounds of the difference across tasks, and, of the tasks both agents "
        f"ran, those where either is ahead with probability above {level:g}. bayes-eval "
        "compare-agents RUN_DIR A B gives each task, the ratio and, with --margin, a verdict."
    )
    sections = [("h2", "Agents compared"), ("p", text)]
    if rows:
        sections.append(("table", pd.DataFrame(rows)))
    if refused:
        sections.append(("list", [f"not compared: {line}" for line in refused]))
    return sections
