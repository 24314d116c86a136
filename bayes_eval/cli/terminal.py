"""What the command line prints: the summary as a terminal table, CSV or JSON, the
diagnostics verdict and the checks' lines.

pandas and the numerical modules are imported when a function first needs them, so that
``bayes-eval --help`` does not wait for them.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from numbers import Integral
from typing import TYPE_CHECKING

from bayes_eval.constants import PLAN_MAX_TRIALS
from bayes_eval.errors import escape_controls

if TYPE_CHECKING:
    import pandas as pd


# More pass@k rows than the terminal shows one by one (fit --attempts): a digest per agent.
ATTEMPTS_SHOWN = 200
# More pairs than a terminal shows one by one: a digest per agent (piped, every row).
SUMMARY_SHOWN = 200
# Distinct provenances the digest lists, with their counts of pairs.
PROVENANCES_SHOWN = 5


def show(text: str = "", file=None) -> None:
    """Print ``text`` for a person to read, on ``file`` (default stdout): characters that
    would act on a terminal (ESC, BEL, carriage returns, direction marks: a name in the
    user's table may hold them) are written as their escapes (``\\x1b``), never sent;
    the text's own line breaks are kept. CSV and JSON are written as they are."""
    print(escape_controls(str(text), keep="\n"), file=sys.stdout if file is None else file)


def verdict_text(posterior, check_lines: str, failed: list[str]) -> str:
    """The diagnostics verdict, the checks' lines and what failed after sampling."""
    return "\n".join(filter(None, [diagnostics_text(posterior), check_lines, *failed]))


def format_number(value) -> str:
    """``bayes_eval.results.summary.format_number``."""
    from bayes_eval.results.summary import format_number as formatted

    return formatted(value)


def print_summary(summary: pd.DataFrame, fmt: str) -> None:
    """``summary`` on stdout as CSV or JSON records."""
    if fmt == "csv":
        from bayes_eval.csv_text import csv_text

        sys.stdout.write(csv_text(summary))
        return
    records = [{k: json_value(v) for k, v in row.items()} for row in summary.to_dict("records")]
    print(json.dumps(records, indent=2))


def json_value(value):
    import pandas as pd

    if pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def terminal_table(frame: pd.DataFrame, digits=format_number) -> str:
    """``frame`` as a rich table fitted to the terminal's width (``COLUMNS``, else 120),
    or to the narrowest it can fold to, whichever is wider: numbers formatted by
    ``digits``, whole and right-aligned, so their figures line up; names fold, every
    character that would act on a terminal written as its escape; no colour. Where
    standard output is not a terminal (a pipe, a file), nothing folds: each row is one
    line, however wide, for a script to read (``_plain_table``: rich's layout without
    rendering each cell, which took most of a 10,000-pair exact fit's 6 s)."""
    import io
    import shutil

    import pandas as pd
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and frame[c].dtype != bool for c in frame]
    cells = [
        [digits(v) if right else _cell(v) for v in frame[column]]
        for column, right in zip(frame.columns, numeric, strict=True)
    ]
    if not sys.stdout.isatty():
        return _plain_table([escape_controls(str(c)) for c in frame.columns], cells, numeric)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column, right, values in zip(frame.columns, numeric, cells, strict=True):
        # numbers and short words keep their width; names fold where the terminal is too
        # narrow for them
        longest = max([*map(len, values), 1])
        whole = right or longest <= 8
        table.add_column(
            escape_controls(str(column)),
            justify="right" if right else "left",
            overflow="fold",
            no_wrap=whole,
            min_width=max(longest, len(str(column))) if whole else 8,
        )
    for row in zip(*cells, strict=True):
        table.add_row(*map(Text, row))  # Text: "[agent-a]" is a name, not rich markup
    out = io.StringIO()
    console = Console(
        file=out,
        width=shutil.get_terminal_size((120, 24)).columns,
        color_system=None,  # the text is shown through ``show``, which escapes codes
        highlight=False,
    )
    # narrower than the table can fold to, it is printed at that width: nothing is cut
    # (each column's least width, and three characters between columns)
    narrowest = sum(c.min_width for c in table.columns) + 3 * (len(table.columns) - 1)
    console.width = max(console.width, narrowest)
    console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _plain_table(heads: list[str], cells: list[list[str]], right: list[bool]) -> str:
    """The table rich draws unfolded (``terminal_table``): each column as wide as its
    widest cell, three spaces between columns, numbers right-aligned, a rule under the
    heads, no trailing spaces."""
    widths = [max([len(h), *map(len, c)]) for h, c in zip(heads, cells, strict=True)]

    def line(values) -> str:
        return "   ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    rule = "─" * (sum(widths) + 3 * (len(widths) - 1))
    return "\n".join([line(heads), rule, *map(line, zip(*cells, strict=True))])


def _cell(value) -> str:
    import pandas as pd

    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "-"
    return str(value).lower() if isinstance(value, bool) else escape_controls(str(value))


def summary_table(summary, posterior, threshold) -> str:
    """The summary for the terminal: every pair's row and the provenance, or on a terminal
    of more than ``SUMMARY_SHOWN`` pairs a digest per agent (``_summary_digest``)."""
    import pandas as pd

    level = summary["level"].iloc[0] if len(summary) else posterior.level
    header = (
        f"model {posterior.spec.name} on {posterior.evidence.source} "
        f"(one-sided bounds at level {level:g})"
    )
    if len(summary) > SUMMARY_SHOWN and sys.stdout.isatty():
        return _summary_digest(summary, header, level, threshold)
    shown = {
        "agent": "agent",
        "task": "task",
        "method": "method",
        "mean": "mean",
        "median": "median",
        "upper": f"upper ({level:g})",
    }
    if threshold is not None:
        shown["prob_above"] = f"P(P>{threshold:g})"
    shown["cp_upper"] = "cp_upper"
    if posterior.is_mcmc:  # an exact fit has no diagnostics to pass
        shown["diagnostics_ok"] = "ok"
    if not summary["observed"].all():  # a crossed fit's predictions
        shown["observed"] = "run"
    frame = summary[list(shown)].rename(columns=shown)
    if "run" in frame:
        frame["run"] = frame["run"].map({True: "yes", False: "PREDICTED"})
    if "ok" in frame:
        frame["ok"] = frame["ok"].map(lambda ok: "-" if pd.isna(ok) else str(bool(ok)).lower())
    text = [terminal_table(frame)]
    shared: dict[str, list[str]] = {}  # identical provenance is printed once
    for r in summary.to_dict("records"):
        name = f"{escape_controls(r['task'])} ({escape_controls(r['agent'])})"
        shared.setdefault(r["provenance"], []).append(name)
    notes = []
    for provenance, names in shared.items():
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        notes.append(f"  {shown}: {provenance}")
    return "\n".join([header, "", *text, "", "provenance:", *notes])


def _summary_digest(summary, header: str, level: float, threshold) -> str:
    """Per agent: its pairs, the median of their estimates, how many bounds lie below
    ``threshold``, and the highest upper bound with its task; then each distinct
    provenance with its count of pairs (the first ``PROVENANCES_SHOWN``)."""
    import pandas as pd

    rows = []
    for agent, group in summary.groupby("agent", sort=False):
        bounded = group[group["upper"].notna()]
        worst = bounded.loc[bounded["upper"].idxmax()] if len(bounded) else None
        row = {"agent": agent, "pairs": len(group), "median mean": group["mean"].median()}
        if threshold is not None:
            row[f"upper < {threshold:g}"] = int((group["upper"] < threshold).sum())
        row[f"highest upper ({level:g})"] = math.nan if worst is None else worst["upper"]
        row["its task"] = "-" if worst is None else worst["task"]
        rows.append(row)
    counts = summary["provenance"].value_counts(sort=False)
    notes = [f"  {n:,} pairs: {text}" for text, n in counts.head(PROVENANCES_SHOWN).items()]
    if len(counts) > PROVENANCES_SHOWN:
        notes.append(f"  and {len(counts) - PROVENANCES_SHOWN:,} more (summary.csv)")
    return "\n".join(
        [
            f"{header}; {len(summary):,} pairs, a digest per agent: every pair's row with "
            "--format csv, or in summary.csv with --out",
            "",
            terminal_table(pd.DataFrame(rows), digits=_digest_number),
            "",
            "provenance:",
            *notes,
        ]
    )


def _digest_number(value) -> str:
    """A count whole, any other number to four figures."""
    if isinstance(value, Integral):
        return f"{value:,}"
    return format_number(value)


def verdicts_text(summary, checks, threshold: float, diagnostics=None) -> str:
    """The verdict line of the pairs run (``outputs.verdicts.verdict_line``), as the
    report counts them (``diagnostics``: the fit's, where MCMC ran)."""
    from bayes_eval.outputs.verdicts import verdict_line, verdicts

    run = summary[summary["observed"].astype(bool)]
    verdict = verdicts(run, checks.assumption, threshold, checks.predictive, False, diagnostics)
    table = run.join(verdict)
    return f"verdicts at {threshold:g}: {verdict_line(table, threshold)}"


def attempts_table(attempts, threshold) -> str:
    """pass@k and pass^k per (agent, task, k), with their bounds, for the terminal; of
    more than ``ATTEMPTS_SHOWN`` rows, a digest per agent and ``k``."""
    level = attempts["level"].iloc[0] if len(attempts) else math.nan
    if len(attempts) > ATTEMPTS_SHOWN:
        return _attempts_digest(attempts, level)
    shown = {
        "agent": "agent",
        "task": "task",
        "attempts": "k",
        "pass_at_mean": "pass@k mean",
        "pass_at_upper": f"upper ({level:g})",
    }
    if threshold is not None:
        shown["pass_at_prob_above"] = f"P(pass@k>{threshold:g})"
    shown.update({"pass_all_mean": "pass^k mean", "pass_all_lower": f"lower ({1 - level:g})"})
    header = (
        "over k attempts: pass@k = P(at least one of k succeeds), pass^k = P(all k succeed); "
        "one-sided bounds (every column and the provenance: --format csv, or attempts.csv "
        "in --out)"
    )
    return _per_k(attempts, shown, header)


def _attempts_digest(attempts, level: float) -> str:
    """Per agent and ``k``: its tasks, the median of their pass@k means, and the highest
    upper bound with its task."""
    import pandas as pd

    rows = []
    for (agent, k), group in attempts.groupby(["agent", "attempts"], sort=False):
        bounded = group[group["pass_at_upper"].notna()]
        worst = bounded.loc[bounded["pass_at_upper"].idxmax()] if len(bounded) else None
        rows.append(
            {
                "agent": agent,
                "attempts": k,
                "tasks": len(group),
                "median pass@k mean": group["pass_at_mean"].median(),
                f"highest upper ({level:g})": math.nan if worst is None else worst["pass_at_upper"],
                "its task": "-" if worst is None else worst["task"],
            }
        )
    header = (
        f"over k attempts, per agent: pass@k = P(at least one of k succeeds) over its tasks, "
        f"one-sided bounds; {len(attempts):,} rows, each pair's in attempts.csv (--out) or "
        "with --format csv"
    )
    return _per_k(pd.DataFrame(rows), {c: c for c in rows[0]} | {"attempts": "k"}, header)


def population_table(population) -> str:
    """pass@k and pass^k across each agent's tasks (observed, and a new one), per k."""
    level = population["level"].iloc[0] if len(population) else math.nan
    shown = {
        "agent": "agent",
        "population": "tasks",
        "attempts": "k",
        "pass_at_mean": "pass@k mean",
        "pass_at_upper": f"upper ({level:g})",
        "pass_all_mean": "pass^k mean",
        "pass_all_lower": f"lower ({1 - level:g})",
    }
    header = (
        "across each agent's tasks: the observed ones' average, and a new one where the "
        "model has a population (population.csv in --out)"
    )
    return _per_k(population, shown, header)


def _per_k(table, shown: dict, header: str) -> str:
    """``table``'s ``shown`` columns, renamed, ``k`` with thousands separators, under
    ``header``."""
    frame = table[list(shown)].rename(columns=shown)
    frame["k"] = frame["k"].map(lambda k: f"{k:,}")
    return "\n".join([header, "", terminal_table(frame)])


def plain(value) -> str:
    """A plan's value for reading: numbers to four figures, or from 1,000 on whole with
    thousands separators; lists item by item."""
    if isinstance(value, list | tuple):
        return ", ".join(map(plain, value))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) and value >= 2**53:  # past a double's whole numbers
        return f"about {Decimal(value):.3e}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return format_number(value)


def unlikely_text(rate: float, threshold: float, result: dict) -> str:
    """In words: certification within the planner's horizon is unlikely at ``rate``."""
    chance = format_number(result["probability_certified"])
    side = (
        f"above the threshold {threshold:g}: a certificate would be wrong, and this is the "
        "chance of one"
        if rate >= threshold
        else f"below the threshold {threshold:g}, too near it to separate"
    )
    return (
        f"certifying is unlikely: at a true rate of {rate:g} ({side}), the bound falls "
        f"below the threshold within {PLAN_MAX_TRIALS:,} trials with probability {chance}; "
        "the trials it takes have no median or expectation within that horizon"
    )


def plan_text(result: dict) -> str:
    """A plan for reading: a line per figure, the prior family's figures as a table."""
    import pandas as pd

    lines = []
    for key, value in result.items():
        if isinstance(value, dict):
            family = pd.DataFrame({"prior": list(value), "trials": map(plain, value.values())})
            table = terminal_table(family).splitlines()
            lines += [f"{key}, under each prior of the family:", *(f"  {t}" for t in table)]
        else:
            lines.append(f"{key}: {plain(value)}")
    return "\n".join(lines)


def diagnostics_text(posterior) -> str:
    """One paragraph on the MCMC diagnostics ('' for exact fits)."""
    diagnostics = posterior.diagnostics
    if diagnostics is None:
        return ""
    if diagnostics.ok:
        return "diagnostics: all checks passed (R-hat, bulk and tail ESS, divergences, E-BFMI)"
    lines = ["diagnostics FAILED: the estimates are unreliable (diagnostics_ok = false)"]
    lines += [f"  - {message}" for message in diagnostics.messages]
    lines.append(f"most likely to help: {diagnostics.advice}")
    return "\n".join(lines)


def check_text(checks, assumption) -> str:
    lines = []
    if len(checks):
        flagged = int(checks["flagged"].sum())
        lines.append(
            f"posterior predictive checks: {flagged} of {len(checks)} observed cells "
            "flagged (p < 0.025 or > 0.975)"
        )
        for row in checks[checks["flagged"]].head(10).itertuples():
            lines.append(
                f"  - {row.task} ({row.agent}) {row.evidence} {row.cell}: "
                f"{row.successes}/{row.trials}, p = {row.p_value:.3g}"
            )
    if len(assumption):
        bad = assumption[assumption["contradicted"]]
        head = (
            f"milestone-assumption check: {len(bad)} of {len(assumption)} tasks with "
            "milestone and end-to-end data contradict the milestones"
        )
        if not assumption["doubtful"].any() and len(bad):  # a model that accounts for paths
            head += " (the model accounts for other paths: evidence about them, no warning)"
        lines.append(head)
        lines += [f"  - {message}" for message in bad["message"]]
    return "\n".join(lines)


def sensitivity_text(sensitivity) -> str:
    """The prior family's verdict on the fit: how far the bounds move, how many the prior
    informs (power scaling, MCMC fits), and each pair whose verdict it flips."""
    from bayes_eval.checks.sensitivity import PSENSE_LIMIT

    pairs = sensitivity.pairs
    if not len(pairs):
        return "prior sensitivity: no bound to test"
    spread = (pairs["upper_high"] / pairs["upper_low"]).max()
    worst = pairs.loc[(pairs["upper_high"] / pairs["upper_low"]).idxmax()]
    lines = [
        f"prior sensitivity: across the family the bounds move by up to a factor "
        f"{spread:.3g} ({worst['agent']}, {worst['task']}: {format_number(worst['upper_low'])} "
        f"under {worst['low_member']} to {format_number(worst['upper_high'])} under "
        f"{worst['high_member']})"
    ]
    informative = int((pairs["psense"] > PSENSE_LIMIT).sum())
    if pairs["psense"].notna().any():
        lines[0] += (
            f"; {informative} of {len(pairs)} bounds have a power-scaling prior sensitivity "
            f"above {PSENSE_LIMIT:g} (an informative prior)"
        )
    if sensitivity.threshold is not None:
        flipped = pairs[pairs["prior_sensitive"].astype(bool)]
        lines[0] += f"; {len(flipped)} of {len(pairs)} verdicts change within it"
        lines += [
            f"  {row.agent}, {row.task}: {sensitivity.note(row.agent, row.task)}"
            for row in flipped.itertuples()
        ]
    return "\n".join(lines)
