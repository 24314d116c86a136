"""Verdicts against a threshold, what carries each, and their words.

Per (agent, task), from the summary (``bayes_eval.results.summary``) and the fit's checks:

* ``below threshold``: the upper bound is below ``tau`` (not an extrapolated one, unless
  asked for);
* ``above threshold``: the lower bound (one-sided, at the same level) is above ``tau``;
* ``undecided``: the two bounds straddle ``tau``, or there is no bound (a point value, or
  no estimate); the row's sentence says about how many more end-to-end trials would
  probably decide it (``plan.trials_to_decide``);
* ``unreliable``: whatever the bounds say, when the MCMC diagnostics failed, or the
  task's end-to-end data contradict its milestones (the milestone-assumption check)
  under a model that assumes them, or, under a model that accounts for other paths
  (``joint``), its own posterior predictive check flags the task's end-to-end counts;
  the row says which.

Each verdict carries the summary's ``basis`` (the pair's own runs, the model's pooling,
an extrapolation), which the verdict line counts and each row's plain sentence says in
words, its own runs' bound beside the model's. Each agent gets a roll-up: its count per
verdict by basis, and its pairs nearest the threshold on each side. ``on_own_runs`` lets
only a pair's own runs say below (``report --basis own``).
"""

from __future__ import annotations

import math

import pandas as pd

from bayes_eval.checks.assumption import PATH_MODELS
from bayes_eval.constants import (
    BASIS_EXTRAPOLATED,
    BASIS_OWN,
    BASIS_POOLED,
    BASIS_PREDICTION,
    END_TO_END,
    PLAN_MAX_TRIALS,
)
from bayes_eval.results.summary import format_number

__all__ = [
    "ABOVE",
    "BELOW",
    "DISAGREE",
    "UNDECIDED",
    "UNRELIABLE",
    "VERDICTS",
    "VERDICT_COLUMNS",
    "on_own_runs",
    "rollup",
    "sentence",
    "verdict_line",
    "verdicts",
]

BELOW, ABOVE, UNDECIDED, UNRELIABLE = (
    "below threshold",
    "above threshold",
    "undecided",
    "unreliable",
)
VERDICTS = (BELOW, ABOVE, UNDECIDED, UNRELIABLE)
# The reason of a pair left undecided where pooling would certify it below the threshold
# against its own runs (``verdicts``), and the verdict line's words for such pairs.
DISAGREE = "the model and the pair's own runs disagree"
DISAGREE_COUNTED = "where the model and the pair's own runs disagree"
# verdicts.csv: each pair's verdict, what carries it, its bound and its own runs' bound.
VERDICT_COLUMNS = (
    "agent",
    "task",
    "verdict",
    "basis",
    "upper",
    "own_runs",
    "own_upper",
    "level",
    "reason",
)
# The verdict line's words for each basis (``constants.BASIS_OWN`` ...), and the table's.
BASIS_WORDS = {
    BASIS_OWN: "on own runs",
    BASIS_POOLED: "on pooling",
    BASIS_EXTRAPOLATED: "extrapolated",
    BASIS_PREDICTION: "predicted",
}
BASIS_SHORT = dict(zip(BASIS_WORDS, ("own", "pooled", "extrapolated", "predicted"), strict=True))


def verdicts(
    summary: pd.DataFrame,
    assumption: pd.DataFrame,
    threshold: float,
    checks=None,
    allow_extrapolated: bool = False,
    diagnostics=None,
) -> pd.DataFrame:
    """The verdict per summary row (see the module docstring) and, for ``unreliable``
    rows and rows without a bound, the one reason (columns ``verdict``, ``reason``).

    A bound below its floor (``extrapolated``, ``summary.bound_context``) rests on the
    model's structure, not on runs: it never makes a row ``below`` unless
    ``allow_extrapolated``, and then the reason says it was asked for.

    ``assumption`` is ``assumption.milestone_assumption`` (its ``doubtful`` rows), and
    ``checks`` ``ppc.predictive_checks`` of the same fit (its flagged end-to-end cells
    count for rows of a model in ``PATH_MODELS``, and keep any pooled row from ``below``).

    A row whose diagnostics failed is ``unreliable``, naming the quantities that failed
    among those its bound rests on (``diagnostics``, the fit's ``Diagnostics``), unless its
    own runs carry its verdict (``basis`` ``own``): that verdict stands, and says so.
    """
    failing = {}
    if diagnostics is not None:
        pairs = list(zip(summary["agent"], summary["task"], strict=True))
        failing = dict(zip(pairs, diagnostics.failed_for(pairs), strict=True))
    why, flags = {}, {}
    if checks is not None and len(checks):
        flagged = checks[checks["flagged"] & (checks["evidence"] == END_TO_END)]
        modelled = summary[summary["method"].isin(PATH_MODELS)]
        paths = set(zip(modelled["agent"], modelled["task"], strict=True))
        for row in flagged.itertuples():
            flags[(row.agent, row.task)] = (
                f"the fit's posterior predictive check flags its end-to-end count "
                f"({row.successes}/{row.trials}, p = {format_number(row.p_value)})"
            )
            if (row.agent, row.task) in paths:
                why[(row.agent, row.task)] = flags[(row.agent, row.task)]
    if len(assumption):
        for row in assumption[assumption["doubtful"]].itertuples():
            why[(row.agent, row.task)] = (
                f"its end-to-end runs contradict its milestones (milestone-assumption check "
                f"p = {format_number(row.p_value)})"
            )
    out = []
    for row in summary.itertuples():
        failed = pd.notna(row.diagnostics_ok) and not row.diagnostics_ok
        reason = why.get((row.agent, row.task))
        if failed and not reason:
            what = failing.get((row.agent, row.task))
            failure = "the MCMC diagnostics failed" + (f" for {what}" if what else "")
            side = _own_side(row, threshold)
            if side:  # its own runs decide it alike: the verdict does not rest on the fit
                out.append((side, f"its own runs carry it: {failure}, which they do not rest on"))
                continue
            reason = failure
        if reason:
            out.append((UNRELIABLE, reason))
        elif pd.isna(row.upper):
            out.append((UNDECIDED, "no credible bound"))
        elif row.upper < threshold and _extrapolated(row):
            floor = (
                "what 0 successes in every run that informs it could show, "
                f"{_share(row.floor_upper)}"
            )
            if allow_extrapolated:
                out.append((BELOW, f"on an extrapolated bound, below {floor}, as asked"))
            else:
                out.append(
                    (
                        UNDECIDED,
                        f"its bound is extrapolated: below {floor}, it rests on the model's "
                        "structure, not on runs (--allow-extrapolated to decide on it)",
                    )
                )
        elif row.upper < threshold and (
            disagree := _disagreement(row, threshold, flags.get((row.agent, row.task)))
        ):
            out.append((UNDECIDED, disagree))
        elif row.upper < threshold:
            out.append((BELOW, ""))
        elif pd.notna(row.lower) and row.lower > threshold:
            out.append((ABOVE, ""))
        else:
            out.append((UNDECIDED, ""))
    return pd.DataFrame(out, index=summary.index, columns=["verdict", "reason"])


def _own_side(row, threshold: float) -> str:
    """``below`` or ``above`` where a row's own runs carry that verdict (``basis`` own);
    empty otherwise."""
    if getattr(row, "basis", None) != BASIS_OWN:
        return ""
    if row.upper < threshold:
        return BELOW
    return ABOVE if row.lower > threshold else ""


def _disagreement(row, threshold: float, flag: str | None) -> str:
    """Why a pair's own runs contradict the model that would certify it below
    ``threshold`` on pooling: its observed rate above ``threshold``, or ``flag`` (its
    end-to-end count flagged by the predictive check); empty where they do not, or where
    its own runs carry the verdict."""
    if getattr(row, "basis", None) != BASIS_POOLED:
        return ""
    runs, successes = getattr(row, "own_runs", math.nan), getattr(row, "own_successes", math.nan)
    seen = []
    if pd.notna(runs) and runs > 0 and successes / runs > threshold:
        seen.append(
            f"{successes:,.0f} of its own {runs:,.0f} runs succeeded, an observed rate of "
            f"{_share(successes / runs)}, above {_share(threshold)}"
        )
    if flag:
        seen.append(flag)
    if not seen:
        return ""
    return f"{DISAGREE}: {' and '.join(seen)}; pooling does not certify a pair against its own runs"


def on_own_runs(table: pd.DataFrame, threshold: float, level: float, successes) -> pd.DataFrame:
    """``verdict`` and ``reason`` where only a pair's own runs may say below (``report
    --basis own``): a below verdict they do not carry becomes undecided, its reason the
    runs without a success after which its own runs would say below
    (``results.summary.worth_runs`` at ``threshold``). ``successes`` maps (agent, task)
    to the pair's end-to-end successes."""
    from bayes_eval.results.summary import worth_runs

    out = table[["verdict", "reason"]].copy()
    moved = (table["verdict"] == BELOW) & (table["basis"] != BASIS_OWN)
    for at in table.index[moved]:
        row = table.loc[at]
        n = 0 if pd.isna(row["own_runs"]) else int(row["own_runs"])
        k = int(successes.get((row["agent"], row["task"]), 0))
        worth = worth_runs(threshold, k, level)  # NaN: no run count reaches it
        more = (
            f"{math.ceil(worth) - n:,} more runs without a success would decide it"
            if math.isfinite(worth)
            else "no number of runs without a success would decide it"
        )
        runs = (
            f"its own {n:,} runs ({k} successes) allow up to {_share(row['own_upper'])}"
            if n
            else "it has no end-to-end runs of its own"
        )
        out.loc[at] = (
            UNDECIDED,
            f"only its own runs may say below (--basis own), and {runs}; {more}",
        )
    return out


def verdict_line(table: pd.DataFrame, threshold: float) -> str:
    """The count per verdict, how many are undecided because the model and the pair's own
    runs disagree, how many are prior-sensitive (where the table says), and how many rows
    rest on an extrapolated bound below ``threshold`` (``below`` when asked for, else
    ``undecided``)."""
    line = "; ".join(_count(table[table["verdict"] == v], v) for v in VERDICTS)
    reasons = table["reason"].fillna("") if "reason" in table else pd.Series("", table.index)
    disagree = int(reasons.str.startswith(DISAGREE).sum())
    if disagree:
        line += (
            f"; {disagree} of the undecided {DISAGREE_COUNTED} (the model's bound is below "
            f"{threshold:g}, its own runs say otherwise)"
        )
    if "prior_sensitive" in table:  # the report's prior family was asked for
        sensitive = int(table["prior_sensitive"].fillna(False).sum())
        line += f"; {sensitive} prior-sensitive (the verdict changes within the prior family)"
    extrapolated = pd.Series([_extrapolated(row) for row in table.itertuples()], table.index)
    below = (table["upper"] < threshold) & table["verdict"].isin([BELOW, UNDECIDED])
    resting = table[extrapolated & below]
    if not len(resting):
        return line
    if (resting["verdict"] == BELOW).all():
        return f"{line}. {len(resting)} of the below rest on extrapolated bounds, as asked"
    return (
        f"{line}. {len(resting)} of the undecided have an extrapolated bound below "
        f"{threshold:g} (--allow-extrapolated decides on them)"
    )


def _count(rows: pd.DataFrame, verdict: str) -> str:
    """``N verdict``, and where there are some, how many of them each basis carries."""
    return f"{len(rows)} {verdict}{_by_basis(rows, BASIS_WORDS)}"


def _by_basis(rows: pd.DataFrame, words: dict) -> str:
    """How many of ``rows`` each basis carries, in ``words`` (" (1 on own runs, 109 on
    pooling)"); empty where no row has a basis."""
    if "basis" not in rows:
        return ""
    tally = rows["basis"].value_counts()
    parts = [f"{tally[b]} {text}" for b, text in words.items() if tally.get(b, 0)]
    return f" ({', '.join(parts)})" if parts else ""


def _extrapolated(row) -> bool:
    """Whether a summary row's bound lies below its floor (False where not known)."""
    flag = getattr(row, "extrapolated", False)
    return bool(pd.notna(flag) and flag)


def sentence(row, threshold: float, level: float) -> str:
    """One plain sentence on a report row (summary columns plus ``verdict`` and
    ``reason``): the bound, the estimate and the verdict, with what would decide it."""
    from bayes_eval.plan import trials_to_decide

    head = f"{row.agent}, {row.task}: "
    tau = f"τ = {_share(threshold)}"
    if pd.isna(row.upper):
        value = f"point value {_share(row.mean)}" if pd.notna(row.mean) else "no estimate"
        return f"{head}{value}, no credible bound; {row.verdict} at {tau}."
    bound = f"at most {_share(row.upper)} ({100 * level:g}% credible)"
    grader = getattr(row, "grader", "")
    if isinstance(grader, str) and grader:
        bound += f", graded by {grader} (its audited errors in the bound)"
    text = f"{head}{bound}, estimate {_share(row.mean)}"
    if row.verdict == UNRELIABLE:
        return f"{text}; unreliable: {row.reason}."
    if row.verdict == ABOVE:
        return f"{text}, at least {_share(row.lower)}; above threshold at {tau}{_on(row)}."
    if row.verdict == BELOW:
        asked = f" ({row.reason})" if row.reason else ""
        return f"{text}; below threshold at {tau}{_on(row)}{asked}."
    if row.verdict == UNDECIDED and row.reason:
        return f"{text}; undecided at {tau}: {row.reason}."
    own = _undecided_on(row)
    if not row.sd > 0:  # no spread (or none known): nothing for the planner to size
        return f"{text}; undecided at {tau}{own}."
    trials = trials_to_decide(row.mean, row.sd, threshold, level)
    if trials is None:
        more = f"more than {PLAN_MAX_TRIALS:,} more end-to-end trials would be needed to decide it"
    elif trials == 0:  # the Beta taken for the posterior decides already; the bounds do not
        more = "a few more end-to-end trials would probably decide it"
    else:
        more = f"about {_two_figures(trials)} more end-to-end trials would probably decide it"
    return f"{text}; undecided at {tau}: {more}{own}."


def _on(row) -> str:
    """What carries a verdict, in words, where a model borrows from other pairs (its own
    runs' bounds beside the model's); empty for an exact model's rows."""
    basis = getattr(row, "basis", None)
    runs = getattr(row, "own_runs", float("nan"))
    if basis == BASIS_OWN and pd.notna(getattr(row, "own_upper", float("nan"))):
        return f" on its own runs too (its own {runs:,.0f} runs {_own_range(row)})"
    if basis != BASIS_POOLED:
        return ""
    if pd.isna(runs):
        return " on the model's pooling: it has no end-to-end runs of its own"
    text = f" on the model's pooling: its own {runs:,.0f} runs {_own_range(row)}"
    if row.verdict == BELOW and pd.notna(row.worth_runs):
        text += f"; the pooling is worth {row.worth_runs:,.0f} runs"
    return text


def _undecided_on(row) -> str:
    """Where the model leaves undecided what a pair's own runs would decide: those runs'
    range (empty otherwise)."""
    runs = getattr(row, "own_runs", float("nan"))
    if getattr(row, "basis", None) != BASIS_POOLED or pd.isna(runs):
        return ""
    return f"; its own {runs:,.0f} runs {_own_range(row)}, which the model's pooling widens"


def _own_range(row) -> str:
    """The range a pair's own runs allow, as the side of its verdict asks."""
    if row.verdict == BELOW:
        return f"allow up to {_share(row.own_upper)}"
    if row.verdict == ABOVE:
        return f"allow as little as {_share(row.own_lower)}"
    return f"alone allow {_share(row.own_lower)} to {_share(row.own_upper)}"


def _share(value: float) -> str:
    """A probability for a sentence: a percentage with two figures, or (below 0.01%) the
    number itself; above 99.5%, two figures of what it falls short of 100% by."""
    if value > 0.995:
        return f"{100 - float(f'{100 * (1 - value):.2g}'):.10g}%"
    if value >= 1e-4:
        return f"{float(f'{100 * value:.2g}'):g}%"
    return f"{value:.2g}"


def _two_figures(n: int) -> str:
    return f"{int(float(f'{n:.2g}')):,}"


def rollup(table: pd.DataFrame, threshold: float, order=None) -> pd.DataFrame:
    """Per agent (in ``order``, else the table's): its count per verdict with what carries
    them ("109 (1 own, 108 pooled)"), the pairs whose upper bounds lie nearest
    ``threshold`` below and above it."""
    rows = []
    for agent in order or list(dict.fromkeys(table["agent"])):
        group = table[table["agent"] == agent]
        if not len(group):
            continue
        bounded = group[group["upper"].notna()]
        below = bounded[bounded["upper"] < threshold]
        above = bounded[bounded["upper"] >= threshold]
        row = {"agent": agent}
        row.update({v: _tally(group[group["verdict"] == v]) for v in VERDICTS})
        row[f"nearest below {threshold:g}"] = _pair(below, highest=True)
        row[f"nearest above {threshold:g}"] = _pair(above, highest=False)
        rows.append(row)
    return pd.DataFrame(rows)


def _tally(rows: pd.DataFrame) -> str:
    """``N``, and where a model borrows, how many of them each basis carries."""
    if "basis" not in rows or set(rows["basis"]) <= {BASIS_OWN}:
        return str(len(rows))
    return f"{len(rows)}{_by_basis(rows, BASIS_SHORT)}"


def _pair(rows: pd.DataFrame, highest: bool) -> str:
    """The task of ``rows`` with the highest (else the lowest) upper bound, and that
    bound; "none" for no rows."""
    if not len(rows):
        return "none"
    at = rows["upper"].idxmax() if highest else rows["upper"].idxmin()
    return f"{rows.at[at, 'task']}: {_share(rows.at[at, 'upper'])}"
