"""Is agent B more capable than agent A? Per task and across tasks, from one fit.

Per task both agents have a posterior for: ``P(P_B > P_A)``, the posterior of the
difference ``P_B - P_A`` and of the ratio ``P_B / P_A``, each with its one-sided lower and
upper bounds at the level. The draws compared are the fit's own: within one joint
posterior for a pooled or crossed fit (draw ``d`` of both agents comes from the same
state of the model, so what they share is counted once), and independent draws of the two
conjugate posteriors for an exact fit (which are independent). A task where either agent
has a point value (expert best-of-N, golden solution) or no estimate is refused by name,
never compared as NaN. A crossed fit's predictions for pairs never run are compared, and
marked (``observed`` false).

Across tasks, the model's agent-level quantity: ``mu`` (``end_to_end`` pooled), the mean
``mu_agent`` of an agent's task means (the other pooled models) or the ability ``theta``
(crossed models, log-odds; its ratio is the odds ratio). An exact fit has none, nor has
a crossed model linking milestones to end-to-end runs (its ability is that of the bypass,
one part of the end-to-end rate): they compare the mean of ``P`` over the tasks both
agents have a posterior for.

With a margin ``M``, each row gets a verdict at the level: ``more capable by more than
M`` where the lower bound of the difference exceeds ``M``, ``not more capable by more
than M`` where its upper bound is below ``M``, else ``undecided``, with the end-to-end
trials per agent after which a task probably decides (``plan.trials_to_separate``). The
crossed ability's verdict is on the log-odds scale, against 0 (more capable at all), as a
margin in ``P`` has no fixed size there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayes_eval.errors import InputError
from bayes_eval.families import family_of
from bayes_eval.plan import trials_to_separate
from bayes_eval.specs import check_level

if TYPE_CHECKING:
    from bayes_eval.results.posterior import Posterior

__all__ = ["AgentComparison", "capability_order", "compare_agents"]

ACROSS_TASKS = "(across tasks)"
MORE, NOT_MORE, UNDECIDED = "more capable", "not more capable", "undecided"


@dataclass(frozen=True)
class AgentComparison:
    """Agent ``b`` against agent ``a``.

    Attributes
    ----------
    a, b : str
    table : pandas.DataFrame
        One row per task compared, then one ``(across tasks)``: ``quantity``,
        ``prob_b_greater``, ``diff_mean``, ``diff_lower``, ``diff_upper``,
        ``ratio_median``, ``ratio_lower``, ``ratio_upper``, ``draws``, ``observed``
        (false where a crossed fit predicts a pair never run; empty across tasks) and,
        with a margin, ``verdict`` and ``trials_to_decide`` (per agent, end-to-end).
    refused : list of str
        One line per task not compared, naming it and why.
    level : float
    margin : float or None
    """

    a: str
    b: str
    table: pd.DataFrame
    refused: list
    level: float
    margin: float | None

    def sentences(self) -> list[str]:
        """One sentence per row with a verdict (``margin`` given)."""
        if self.margin is None:
            return []
        out = []
        for row in self.table.itertuples():
            across = row.task == ACROSS_TASKS
            head = "across tasks" if across else row.task
            if across and row.quantity.startswith("ability"):
                head, margin = "across tasks (ability, log-odds)", 0.0
            else:
                margin = self.margin
            if row.verdict == MORE:
                text = f"{self.b} is more capable than {self.a} by more than {margin:g}"
            elif row.verdict == NOT_MORE:
                text = f"{self.b} is not more capable than {self.a} by more than {margin:g}"
            else:
                text = f"undecided whether {self.b} is ahead of {self.a} by more than {margin:g}"
                if not across:
                    trials = row.trials_to_decide
                    text += (
                        f"; about {int(trials):,} more end-to-end trials of each agent would "
                        "probably decide it"
                        if pd.notna(trials)
                        else "; no practical number of end-to-end trials decides it"
                    )
            out.append(f"{head}: {text} ({100 * self.level:g}% credible)")
        return out


def compare_agents(
    posterior: Posterior,
    a: str,
    b: str,
    *,
    level: float | None = None,
    margin: float | None = None,
) -> AgentComparison:
    """Agent ``b`` against agent ``a`` in one fit (the module docstring).

    Raises
    ------
    InputError
        An agent not in the fit, the same agent twice, a margin outside (-1, 1), or no
        task both agents have a posterior for.
    """
    level = posterior.level if level is None else check_level(level, "level")
    agents = list(posterior.draws["p_task"]["agent"].values)
    for name in (a, b):
        if name not in agents:
            raise InputError(
                f"compare-agents: no agent '{name}' in the fit; agents: {', '.join(agents)}"
            )
    if a == b:
        raise InputError(f"compare-agents: '{a}' against itself; name two agents")
    if margin is not None and not -1.0 < float(margin) < 1.0:
        raise InputError(f"margin: {margin} must lie strictly between -1 and 1 (a difference of P)")
    summary = posterior.summary(level=level).set_index(["agent", "task"]).to_dict("index")
    p = posterior.draws["p_task"]
    tasks = p["task"].values
    why = [[_why_not(summary, agent, task) for agent in (a, b)] for task in tasks]
    refused = [
        f"{task}: " + "; ".join(w for w in reasons if w)
        for task, reasons in zip(tasks, why, strict=True)
        if any(reasons)
    ]
    compared = np.array([not any(reasons) for reasons in why], dtype=bool)
    if not compared.any():
        raise InputError(
            f"compare-agents: no task where both {a} and {b} have a posterior ("
            + "; ".join(refused)
            + ")"
        )
    common = tasks[compared].tolist()
    rates = p.values[..., np.flatnonzero(compared)]
    xa, xb = (_rows_of(rates[:, :, agents.index(agent)]) for agent in (a, b))
    table = pd.DataFrame(_rows(common, "P", xa, xb, level))
    table["observed"] = [_observed(summary, a, b, task) for task in common]
    table = pd.concat(
        [table, pd.DataFrame([_across(posterior, p, a, b, common, level)])], ignore_index=True
    )
    if margin is not None:
        margin = float(margin)
        table["verdict"] = [_verdict(r, margin) for r in table.itertuples()]
        table["trials_to_decide"] = [
            _trials(summary, a, b, r, margin, level) for r in table.itertuples()
        ]
    return AgentComparison(a, b, table, refused, level, margin)


def capability_order(posterior: Posterior, summary: pd.DataFrame) -> list[str]:
    """The fit's agents, most capable first: by their end-to-end success on the table's
    tasks, the mean over tasks of each pair's posterior mean of ``P`` (every task of the
    design for a crossed fit, which predicts the pairs never run; the tasks an agent ran
    otherwise, ``summary``'s rows with a bound for an exact fit), never by a latent of one
    part of a model (the bypass ability of a joint model). Agents without one follow in
    the evidence's order."""
    agents = list(dict.fromkeys(posterior.evidence.table["agent"]))
    if not posterior.is_mcmc:
        rated = summary[summary["upper"].notna()]
        if "observed" in rated:
            rated = rated[rated["observed"].astype(bool)]
        value = rated.groupby("agent")["mean"].mean()
    else:
        mean = posterior.draws["p_task"].mean(("chain", "draw"))
        value = mean.mean("task", skipna=True).to_series().dropna()
    known = sorted((a for a in agents if a in value.index), key=lambda a: -value[a])
    return known + [a for a in agents if a not in value.index]


def _why_not(summary: dict, agent, task) -> str:
    """Why a pair cannot be compared (empty where it can); ``summary``: the summary's
    rows by (agent, task)."""
    if (agent, task) not in summary:
        return f"{agent} has no estimate (not run)"
    row = summary[(agent, task)]
    if pd.notna(row["upper"]):
        return ""
    if pd.notna(row["mean"]):
        return f"{agent} has a point value ({row['method']}), no posterior to compare"
    return f"{agent} has no estimate ({row['provenance'].split('no estimate: ')[-1]})"


def _rows_of(draws: np.ndarray) -> np.ndarray:
    """``(chain, draw, ...)`` draws as one contiguous row of draws per quantity."""
    count = draws.shape[0] * draws.shape[1]
    return np.ascontiguousarray(draws.reshape(count, -1).T)


def _row(task, quantity, xa, xb, level, ratio=None) -> dict:
    """The comparison of two sets of draws (the ratio ``xb / xa`` unless given)."""
    ratio = None if ratio is None else ratio[None]
    return {
        name: value[0]
        for name, value in _rows([task], quantity, xa[None], xb[None], level, ratio).items()
    }


def _rows(tasks, quantity, xa, xb, level, ratio=None) -> dict:
    """The comparisons of two sets of draws, one row of draws per task (the ratio
    ``xb / xa`` unless given), as columns."""
    diff = xb - xa
    if ratio is None:
        with np.errstate(all="ignore"):  # a rate of 0 or below 1e-308: ratio inf or nan
            ratio = xb / xa
    lower, upper = np.quantile(diff, [1.0 - level, level], axis=1)
    # draws themselves (no interpolation): a ratio is infinite where a rate is 0
    ratios = np.quantile(ratio, [0.5, 1.0 - level, level], axis=1, method="inverted_cdf")
    return {
        "task": list(tasks),
        "quantity": [quantity] * len(tasks),
        "prob_b_greater": (xb > xa).mean(axis=1),
        "diff_mean": diff.mean(axis=1),
        "diff_lower": lower,
        "diff_upper": upper,
        "ratio_median": ratios[0],
        "ratio_lower": ratios[1],
        "ratio_upper": ratios[2],
        "draws": np.full(len(tasks), diff.shape[1]),
    }


def _observed(summary: dict, a, b, task) -> bool:
    """Whether both agents were run on the task (a crossed fit predicts pairs never run;
    a summary without the column has only pairs run)."""
    return bool(
        summary[(a, task)].get("observed", True) and summary[(b, task)].get("observed", True)
    )


def _across(posterior, p, a, b, common, level) -> dict:
    """The agent-level comparison: the model's quantity, or the mean over common tasks."""
    draws = posterior.draws
    quantity = family_of(posterior.spec).agent_level(posterior.spec)
    if quantity is None:
        xa, xb = (p.sel(agent=agent, task=common).mean("task").values.ravel() for agent in (a, b))
        return _row(ACROSS_TASKS, f"mean P over {len(common)} tasks", xa, xb, level)
    xa, xb = (draws[quantity.name].sel(agent=agent).values.ravel() for agent in (a, b))
    odds = np.exp(xb - xa) if quantity.log_odds else None
    return _row(ACROSS_TASKS, quantity.label, xa, xb, level, odds)


def _verdict(row, margin: float) -> str:
    """The verdict at ``margin`` (on the ability's log-odds scale: more capable at all)."""
    margin = 0.0 if row.quantity.startswith("ability") else margin
    if row.diff_lower > margin:
        return MORE
    if row.diff_upper < margin:
        return NOT_MORE
    return UNDECIDED


def _trials(summary, a, b, row, margin, level) -> float:
    """End-to-end trials per agent that probably decide an undecided task (NaN otherwise)."""
    if row.verdict != UNDECIDED or row.task == ACROSS_TASKS:
        return math.nan
    ra, rb = summary[(a, row.task)], summary[(b, row.task)]
    trials = trials_to_separate(ra["mean"], ra["sd"], rb["mean"], rb["sd"], margin, level)
    return math.nan if trials is None else float(trials)
