"""The report's section "At deployment scale": pass@k across each agent's tasks as the
number of attempts grows (``bayes_eval.results.population``), its figure, and the number
of attempts at which a new task's pass@k reaches the report's threshold."""

from __future__ import annotations

import math

import pandas as pd

from bayes_eval.constants import (
    AGENT,
    ANY_NEVER_SOLVED,
    CONCENTRATION_SCALE,
    NEVER_SHARE,
)
from bayes_eval.registry import model_of
from bayes_eval.results.population import (
    crossing,
    never_solved_caution,
    population_curves,
    power_law,
)
from bayes_eval.results.summary import format_number

__all__ = ["CURVE_ATTEMPTS", "TABLE_ATTEMPTS", "deployment_sections"]

# The attempts of the figure (three per decade) and of the table.
CURVE_ATTEMPTS = tuple(sorted({round(10 ** (e / 3)) for e in range(19)}))
TABLE_ATTEMPTS = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
FIGURE = "deployment.png"


def deployment_sections(posterior, threshold: float, level: float, figures, attempts=None) -> list:
    """The section's ``(kind, payload)`` pairs, its figure drawn by ``figures``
    (``outputs.drawing.Figures``); with ``attempts`` (numbers of attempts), its table at
    those ``k`` and a table per pair."""
    from bayes_eval.outputs.plots import attempts_plot

    ks = TABLE_ATTEMPTS if attempts is None else tuple(attempts)
    curves = population_curves(posterior, sorted({*CURVE_ATTEMPTS, *ks}), level)
    if not len(curves):
        return []
    figures.draw(FIGURE, attempts_plot, curves, threshold=threshold)
    sections = [
        ("h2", "At deployment scale"),
        (
            "p",
            "An agent deployed to many users, or an attacker who retries, gets k attempts "
            "at a task. pass@k is the chance that at least one of k independent attempts "
            "succeeds, 1 - (1 - P)^k; it grows with k, and how fast depends on how the "
            "success rates spread across tasks. The figure shows it for each agent (a "
            "colour), averaged over the agent's observed tasks (upper row) and, where the "
            "model describes the agent's population of tasks, for a new task drawn from it "
            f"(lower row): posterior means solid, the one-sided {level:g} upper bound "
            "dotted, the threshold dashed. On the right, the chance that all k attempts "
            "fail, 1 - pass@k: where the tasks' rates follow a Beta, it falls as a power of "
            "k, a straight line. Per pair, bayes-eval fit --attempts gives the same for "
            "every task.",
        ),
        ("figure", (FIGURE, "pass@k against attempts k (log-log), one colour per agent")),
        ("p", f"Per agent, pass@k's mean and, in brackets, its {level:g} upper bound:"),
        ("table", _table(curves, ks)),
    ]
    if attempts is not None:
        sections += [
            ("p", f"Per pair, pass@k's mean and {level:g} upper bound, and pass^k's mean:"),
            ("table", _pairs(posterior.attempts(ks, level, threshold), threshold)),
        ]
    found = crossing(posterior, threshold, level)
    if found is not None:
        items = [_crossing_text(row, threshold, level) for row in found.itertuples()]
        sections += [("p", f"**When a new task's pass@k reaches {threshold:g}.**"), ("list", items)]
    spread = _spread_of_the_prior(posterior)
    if spread is not None:
        sections.append(("p", spread))
    if NEVER_SHARE in posterior.draws:
        sections.append(
            (
                "p",
                "**Tasks never solved.** This model takes a share of each agent's tasks to be "
                "never solvable (P = 0)"
                + (", or none" if ANY_NEVER_SOLVED in posterior.draws else "")
                + ", so a new task's pass@k may level off below 1. But "
                + never_solved_caution(posterior.spec)
                + "."
                + _any_never_solved(posterior),
            )
        )
    law = power_law(posterior, level)
    if law is not None:
        sections.append(
            (
                "p",
                "**The power law.** Under the model's Beta population of tasks, the share "
                "of new tasks never solved in k attempts falls as k^(-alpha), alpha the "
                "Beta's first shape (mu kappa): a small alpha means many tasks an agent "
                "almost never solves, and pass@k that approaches 1 slowly"
                + (
                    " (here of the tasks it can solve; the share never solvable stays)."
                    if NEVER_SHARE in posterior.draws
                    else "."
                ),
            )
        )
        sections.append(
            (
                "list",
                [
                    f"{row.agent}: alpha {format_number(row.alpha_mean)} "
                    f"({format_number(row.alpha_lower)} to {format_number(row.alpha_upper)})"
                    for row in law.itertuples()
                ],
            )
        )
    return sections


def _any_never_solved(posterior) -> str:
    """Each agent's posterior chance of having tasks it never solves, where the model has
    one (``any_never_solved``); else nothing."""
    if ANY_NEVER_SOLVED not in posterior.draws:
        return ""
    chance = posterior.draws[ANY_NEVER_SOLVED].mean(("chain", "draw"))
    pairs = zip(chance[AGENT].values, chance.values, strict=True)
    each = ", ".join(f"{agent} {p:.2f}" for agent, p in pairs)
    return f" The posterior chance that an agent has such tasks at all: {each}."


def _spread_of_the_prior(posterior) -> str | None:
    """A warning naming the agents of an end-to-end Beta population whose spread of task
    rates the prior alone decides: those whose tasks each ran once at most (under a
    concentration shared across agents, only where every agent's did)."""
    if model_of(posterior.spec).population != "beta" or not posterior.is_mcmc:
        return None
    trials, most = posterior.values("cp_trials"), {}  # each pair's end-to-end runs
    for agent, _, i, j in posterior.cells():
        most[agent] = max(most.get(agent, 0), trials[i, j])
    once = [agent for agent, n in most.items() if n <= 1]
    if not once or (CONCENTRATION_SCALE in posterior.spec.priors and len(once) < len(most)):
        return None
    who = "every agent" if len(once) == len(most) else "agents " + ", ".join(once)
    return (
        f"**The spread is the prior's.** For {who}, each task ran once at most, and one "
        "run per task says nothing about how alike the tasks are: one outcome per task "
        "fits every spread of rates equally. How pass@k grows with k, and every bound at "
        "k above 1, is then what the concentration prior says, not the data. Two runs of "
        "some tasks let the data decide"
        + (
            "; end_to_end_shared learns the spread from every agent's tasks run twice or more."
            if CONCENTRATION_SCALE not in posterior.spec.priors
            else "."
        )
    )


def _table(curves: pd.DataFrame, ks) -> pd.DataFrame:
    """Per agent and population, pass@k's mean and upper bound at ``ks``."""
    shown = curves[curves["attempts"].isin(ks)]
    rows = []
    for (agent, population), group in shown.groupby(["agent", "population"], sort=False):
        row = {"agent": agent, "tasks": population}
        for r in group.itertuples():
            row[f"k = {r.attempts:,}"] = (
                f"{format_number(r.pass_at_mean)} (≤ {format_number(r.pass_at_upper)})"
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _pairs(attempts: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """The per-pair table, numbers as the report shows them."""
    return pd.DataFrame(
        {
            "agent": attempts["agent"],
            "task": attempts["task"],
            "k": attempts["attempts"].map(lambda k: f"{k:,}"),
            "pass@k": attempts["pass_at_mean"].map(format_number),
            "pass@k upper": attempts["pass_at_upper"].map(format_number),
            f"P(pass@k > {threshold:g})": attempts["pass_at_prob_above"].map(format_number),
            "pass^k": attempts["pass_all_mean"].map(format_number),
        }
    )


def _crossing_text(row, threshold: float, level: float) -> str:
    if math.isinf(row.k_median) and math.isinf(row.k_lower):
        return f"{row.agent}: not within 1e9 attempts, even at the {level:g} bound"
    return (
        f"{row.agent}: after {_attempts(row.k_median)} (median); with probability "
        f"{level:g} not before {_attempts(row.k_lower)}"
    )


def _attempts(k: float) -> str:
    if math.isinf(k):
        return "more than 1e9 attempts"
    return "1 attempt" if k == 1 else f"{int(k):,} attempts"
