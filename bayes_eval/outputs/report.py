"""The safety report: what a decision-maker reads, as self-contained HTML and Markdown.

Per (agent, task): the estimate, the upper bound at the level, ``P(P > tau)``, method and
prior, diagnostics, the milestone-assumption check, a verdict, what carries it and one
plain sentence (``bayes_eval.outputs.verdicts``); per agent, a roll-up.

Every number and figure is computed from the posterior; the HTML embeds its figures and
carries the summary as JSON, so it opens offline and its numbers can be checked.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bayes_eval.checks.agents import capability_order
from bayes_eval.constants import BASIS_MODEL, BASIS_OWN, END_TO_END
from bayes_eval.families import family_of
from bayes_eval.outputs.comparisons import milestone_comparison, ranking_sections
from bayes_eval.outputs.defence import agent_sections, sensitivity_sections
from bayes_eval.outputs.deployment import deployment_sections
from bayes_eval.outputs.drawing import Figures
from bayes_eval.outputs.grading import grader_sections
from bayes_eval.outputs.pages import html_page, markdown
from bayes_eval.outputs.verdicts import (
    VERDICT_COLUMNS,
    on_own_runs,
    rollup,
    sentence,
    verdict_line,
    verdicts,
)
from bayes_eval.registry import model_of
from bayes_eval.results.summary import format_number

__all__ = ["Report", "build_report"]

METHODS_TEXT = {
    "end_to_end": (
        "End-to-end runs",
        "The agent attempts the whole task; k successes in n runs, a Beta-Binomial posterior. "
        "The most direct evidence: it assumes only that runs are independent and alike. Rare "
        "successes need many runs (about 1/P per success).",
    ),
    "milestone": (
        "Milestones (Phuong et al. 2024)",
        "The task is split into ordered milestones, each run from a state where the earlier "
        "ones are solved; P is the product of the milestone rates. It assumes the agent can "
        "succeed only by passing every milestone in that order. Milestones underestimate "
        "real success whenever the task can be solved in another order, by skipping a "
        "milestone or by another path; the milestone-assumption check tests this where "
        "end-to-end data exist.",
    ),
    "expert_completion": (
        "Expert Completion Ratio (Højmark et al. 2024)",
        "An expert guides runs step by step, counting how many of N sampled messages make "
        "progress at each step; P is the mixture over runs of the product of step rates. "
        "Guidance puts the agent on the expert's path, so it shares the milestones' "
        "blindness to other paths. With the published step prior, Beta(1/50, 1/50) "
        "(ecr2024), a step without a success all but rules the task out: on simulated "
        "tables the true rate lay above its 97.5% bound in a quarter to a half of the cells "
        "without an end-to-end success (docs/coverage.md). ecr_pooled pools the steps "
        "instead, and its bounds held there.",
    ),
    "expert_best_of_n": (
        "Expert best-of-N (Phuong et al. 2024)",
        "An expert picks the first useful action among N sampled; P is approximated by "
        "2^-bits. A point value, not a posterior: best-of-N bits do not map to a success "
        "probability and are known to be poorly related to it. No bound is reported.",
    ),
    "golden_solution": (
        "Golden solution (Phuong et al. 2024)",
        "The probability the model assigns to a hand-written solution. A lower bound on P "
        "only (other solutions also count); it cannot show that P is small.",
    ),
}


@dataclass(frozen=True)
class Report:
    """A rendered report.

    Attributes
    ----------
    table : pandas.DataFrame
        The summary (``constants.SUMMARY_COLUMNS``) plus ``milestone_check`` and ``verdict``,
        for the pairs that were run.
    markdown, html : str
    figures : dict of str to bytes
        PNG files by name (embedded in the HTML, linked from the Markdown).
    predictions : pandas.DataFrame
        A crossed fit's summary rows of pairs never run (predictions, no verdict).
    """

    table: pd.DataFrame
    markdown: str
    html: str
    figures: dict
    predictions: pd.DataFrame = None

    def write(self, out) -> Path:
        """Write ``report.html``, ``report.md``, ``verdicts.csv`` (``VERDICT_COLUMNS`` of
        the table) and the figures into folder ``out``."""
        from bayes_eval.csv_text import write_csv

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.html").write_text(self.html, encoding="utf-8")
        (out / "report.md").write_text(self.markdown, encoding="utf-8")
        write_csv(self.table[list(VERDICT_COLUMNS)], out / "verdicts.csv")
        for name, data in self.figures.items():
            (out / name).write_bytes(data)
        return out


def build_report(
    posterior,
    threshold: float,
    level: float | None = None,
    *,
    checks,
    allow_extrapolated: bool = False,
    attempts=None,
    sensitivity=None,
    basis: str = BASIS_MODEL,
    backtest=None,
    figures: Figures | None = None,
) -> Report:
    """The report of a fitted ``Posterior`` for the question ``P < threshold``; a bound
    below its floor decides nothing unless ``allow_extrapolated`` (``verdicts``); with
    ``attempts`` (numbers of attempts), its section "At deployment scale" tabulates those;
    with ``sensitivity`` (``checks.sensitivity.prior_sensitivity`` at ``threshold``), each
    row says whether its verdict is prior-sensitive, in a section of its own. With
    ``basis`` ``"own"`` (``constants.BASIS_OWN``), only a pair's own runs may say below
    (``verdicts.on_own_runs``); ``"model"``, the model's bounds decide.

    ``checks`` is what ``bayes_eval.checks.fitted.check_fit`` found of the same fit: the
    report fits nothing itself. ``backtest`` (``checks.backtest.read_backtest``) says, beside
    each new agent's forecast, how the model's forecasts held in a backtest. ``figures``
    (``outputs.drawing.Figures``, started before the fit) draws the figures; by default,
    one of the report's own.
    """
    with contextlib.ExitStack() as stack:
        if figures is None:
            figures = stack.enter_context(Figures())
        predictive, assumption = checks.predictive, checks.assumption
        level = posterior.level if level is None else level
        summary = posterior.summary(level=level, threshold=threshold)
        # A crossed fit's pairs never run are predictions: reported apart, without a verdict.
        predictions = summary[~summary["observed"]].reset_index(drop=True)
        summary = summary[summary["observed"]].reset_index(drop=True)
        table = summary.copy()
        table["milestone_check"] = _check_column(table, assumption, posterior.evidence.table)
        table[["verdict", "reason"]] = verdicts(
            summary, assumption, threshold, predictive, allow_extrapolated, posterior.diagnostics
        )
        if basis == BASIS_OWN:
            evidence = posterior.evidence.table
            runs = evidence[evidence["method"] == END_TO_END]
            successes = runs.groupby(["agent", "task"])["successes"].sum().to_dict()
            table[["verdict", "reason"]] = on_own_runs(table, threshold, level, successes)
        table["sentence"] = [sentence(row, threshold, level) for row in table.itertuples()]
        if sensitivity is not None:
            table = sensitivity.mark(table)
            table["sentence"] = [
                text + (f" {note}." if (note := sensitivity.note(row.agent, row.task)) else "")
                for text, row in zip(table["sentence"], table.itertuples(), strict=True)
            ]
        _draw_figures(figures, posterior, summary, predictive, threshold)
        # its figure first too, so that it is drawn while the text is made
        deployment = deployment_sections(posterior, threshold, level, figures, attempts)
        order = capability_order(posterior, summary)
        sections = _sections(posterior, table, checks, threshold, level, order, basis)
        if sensitivity is not None:
            sections += sensitivity_sections(sensitivity)
        sections += agent_sections(posterior, level, order)
        sections += ranking_sections(posterior, checks.comparison)
        sections += deployment
        if len(predictions):
            sections += _prediction_sections(posterior, predictions, threshold, level, backtest)
        drawn = figures.drawn()
        return Report(
            table=table,
            markdown=markdown(sections),
            html=html_page(sections, drawn, summary),
            figures=drawn,
            predictions=predictions,
        )


def _prediction_sections(posterior, predictions, threshold, level, backtest=None):
    """Per agent, the crossed model's predictions for the tasks it was never run on, with
    the covariates they rest on."""
    covariates = posterior.group("covariates")
    agent_terms = list(covariates["agent_covariate"].values)
    task_terms = list(covariates["task_covariate"].values)
    dates = json.loads(covariates.attrs["agent_dates"])
    predicted_agents = set(json.loads(covariates.attrs["predicted"]))
    groups = json.loads(covariates.attrs["groups"])
    tasks = list(covariates["task"].values)
    evidence = posterior.evidence.table
    sections = [
        ("h2", "Predictions for tasks not run"),
        (
            "p",
            f"The crossed model ({posterior.spec.name}) predicts every agent's success on "
            "every task of the design. These rows are PREDICTIONS, not measurements: no "
            "run of the agent on the task stands behind them. Each rests on the agent's "
            "ability (from the tasks it ran, and from its covariates) and the task's "
            "difficulty (from the agents that ran it, and from its covariates), and on the "
            "model's assumption that an agent's rate on a task departs from ability minus "
            "difficulty only as much as it does on the pairs that were run. They say where "
            "to run next; they do not replace runs for a deployment decision.",
        ),
    ]
    for agent, rows in predictions.groupby("agent", sort=False):
        i = list(covariates["agent"].values).index(agent)
        values = [
            f"{term} {_covariate_text(covariates['agent_value'].values[i, k], dates[k])}"
            for k, term in enumerate(agent_terms)
        ]
        ran = evidence[evidence["agent"] == agent]["task"].nunique()
        basis = (
            "a new agent described by its covariates alone"
            if agent in predicted_agents
            else f"ability from the {ran} task(s) it ran"
        )
        sections.append(("h2", f"Predictions for {agent}"))
        sections.append(
            (
                "p",
                f"{len(rows)} task(s) not run; {basis}"
                + (f"; agent covariates: {', '.join(values)}" if values else "")
                + ".",
            )
        )
        if agent in predicted_agents:
            sections.append(("p", _tested(backtest, posterior.spec.name)))
        frame = {
            "task": rows["task"],
            "predicted P (mean)": rows["mean"].map(format_number),
            f"upper ({level:g})": rows["upper"].map(format_number),
            f"P(P > {threshold:g})": rows["prob_above"].map(format_number),
        }
        where = [tasks.index(t) for t in rows["task"]]
        for k, term in enumerate(task_terms):
            frame[term] = [format_number(covariates["task_value"].values[j, k]) for j in where]
        if groups:
            group_of = covariates["task_group"].values
            frame[covariates.attrs["group_column"]] = [groups[group_of[j]] for j in where]
        frame["status"] = "PREDICTION (not run)"
        sections.append(("table", pd.DataFrame(frame)))
    return sections


def _tested(backtest, model: str) -> str:
    """How the model's forecasts of new agents have held, or how to find out."""
    if backtest is None:
        return (
            "How such forecasts hold is not shown here: bayes-eval backtest fits the agents "
            "released before each cut-off and scores the later ones (report --backtest DIR)."
        )
    from bayes_eval.checks.backtest import backtest_sentence

    return backtest_sentence(backtest, model)


def _covariate_text(value: float, is_date: bool) -> str:
    """A covariate's value for people; a date (decimal year) with one decimal."""
    return f"{value:.2f} (decimal year)" if is_date else format_number(value)


def _check_column(table, assumption, evidence) -> list[str]:
    """What the milestone-assumption check says about each row, in words: not testable or
    not applicable where the data cannot test it, not informative where it cannot fail
    (no end-to-end success), else its p-value and what it implies."""
    methods = evidence.groupby(["agent", "task"])["method"].agg(set).to_dict()
    found = {}
    for row in assumption.itertuples():
        if row.successes == 0:
            text = "not informative: 0 end-to-end successes"
        elif row.contradicted:
            text = (
                f"contradicted (p = {format_number(row.p_value)}): {row.successes}/"
                f"{row.trials} end-to-end successes, more than the milestones allow"
            )
        else:
            text = f"consistent (p = {format_number(row.p_value)}): the milestones allow it"
        if pd.notna(row.bypass):  # a model that accounts for other paths
            text = f"milestones alone: {text}; bypass ≈ {format_number(row.bypass)}"
        found[(row.agent, row.task)] = text
    out = []
    for pair in zip(table["agent"], table["task"], strict=True):
        has = methods.get(pair, set())
        if pair in found:
            out.append(found[pair])
        elif "milestone" not in has:
            out.append("not applicable: no milestone runs")
        else:
            out.append("not testable: no end-to-end runs")
    return out


def _draw_figures(figures: Figures, posterior, summary, checks, threshold) -> None:
    """The estimates' forest and densities and, where cells were checked, the predictive
    check, drawn by ``figures``."""
    from bayes_eval.outputs.plots import density_draws, density_plot, forest_plot, ppc_plot

    figures.draw("forest.png", forest_plot, summary, threshold=threshold)
    draws = density_draws(posterior.draws["p_task"], summary, threshold)
    figures.draw("densities.png", density_plot, draws, summary, threshold=threshold)
    if len(checks):
        figures.draw("ppc.png", ppc_plot, checks)


def _sections(posterior, table, checks, threshold, level, order, basis):
    """The report's content, in order: ``(kind, payload)`` pairs that both renderers read
    (``outputs.pages``): first the decision, per agent in ``order``, then every pair."""
    assumption, predictive = checks.assumption, checks.predictive
    evidence = posterior.evidence.table
    methods = sorted(set(evidence["method"]))
    counted = evidence[evidence["trials"] > 0]
    n_agents, n_tasks = evidence["agent"].nunique(), evidence["task"].nunique()
    counts = ", ".join(
        f"{int(rows['trials'].sum())} {method.replace('_', '-')} trials"
        for method, rows in counted.groupby("method")
    )
    spec = posterior.spec
    question = (
        f"The question: is each agent's probability of succeeding at each task below "
        f"{threshold:g}? A task is below the threshold when its one-sided {level:g} "
        f"credible upper bound is below {threshold:g}, above it when its lower bound at the "
        f"same level is above {threshold:g}, and undecided in between; unreliable when a "
        "check says its estimate cannot be trusted, whatever the bounds say. Each verdict "
        "says what carries it: the pair's own runs (own), or what the model borrows from "
        "other pairs (pooled), or an extrapolation. Data: "
        f"{posterior.evidence.source}, {len(evidence)} observations of {n_agents} agent(s) "
        f"on {n_tasks} task(s) ({', '.join(methods)}{'; ' + counts if counts else ''}). "
        f"Model: {spec.name} ({spec.kind}, pooling {spec.pooling}), seed {posterior.seed}, "
        f"evidence hash {posterior.evidence.hash[:12]}."
    )
    on = ", below only on a pair's own runs (--basis own)" if basis == BASIS_OWN else ""
    sections = [
        ("h1", "Safety report"),
        ("p", f"**Verdicts at {threshold:g}{on}.** {verdict_line(table, threshold)}."),
        ("h2", "Decision per agent"),
        (
            "p",
            "Most capable first (as in Agents compared): each verdict's count with what "
            "carries it, and the pairs whose upper bounds lie nearest the threshold on "
            "either side, where a little more evidence would move a verdict.",
        ),
        ("table", rollup(table, threshold, order)),
        ("p", question),
        ("h2", "Pairs"),
        (
            "p",
            "Every pair run. A click on a column's head sorts by it; the boxes filter by "
            "agent, verdict and basis and search every cell; why gives the verdict in "
            "words. verdicts.csv and summary.csv hold the same rows.",
        ),
        ("pairs", _pairs(posterior, table, threshold, level)),
        ("h2", "Provenance"),
        ("list", _provenance(table)),
        *grader_sections(posterior, table, level),
    ]
    compared = milestone_comparison(posterior, table, level, checks.milestone_method, assumption)
    if len(compared):
        sections += [
            ("h2", "The milestone method beside this model"),
            (
                "p",
                "Phuong et al.'s milestone method multiplies the milestone rates; it "
                "assumes success only by passing every milestone in order. Its bound and "
                f"this model's ({spec.name}) for each task with milestone runs:",
            ),
            ("table", compared),
        ]
    diagnostics = posterior.diagnostics
    if diagnostics is not None:
        sections.append(("h2", "Diagnostics"))
        if diagnostics.ok:
            sections.append(
                ("p", "All MCMC checks passed (R-hat, bulk and tail ESS, divergences, E-BFMI).")
            )
        else:
            sections.append(("list", list(diagnostics.messages)))
    if len(assumption):
        sections += [("h2", "Milestone-assumption check"), ("list", list(assumption["message"]))]
    sections += [
        ("h2", "Figures"),
        (
            "figure",
            (
                "forest.png",
                "The estimates on a log10 probability axis (of many pairs, per agent "
                "those nearest the threshold on each side): lines from the one-sided "
                f"{level:g} lower to upper bound, dots at the medians, the dashed line "
                "the threshold.",
            ),
        ),
        (
            "figure",
            (
                "densities.png",
                "Posterior density of each pair's success probability (log10 "
                "scale; of many pairs, those nearest the threshold); the line runs from "
                "the one-sided lower to upper bound.",
            ),
        ),
    ]
    if len(predictive):
        flagged = int(predictive["flagged"].sum())
        sections.append(
            (
                "figure",
                (
                    "ppc.png",
                    f"Posterior predictive check: {flagged} of "
                    f"{len(predictive)} observed cells flagged (mid-p < 0.025 or "
                    "> 0.975). The line is the ECDF of the cells' PIT values less the "
                    "uniform's: inside its band where the model predicts the counts "
                    "as often as they occur; ppc.csv has every cell.",
                ),
            )
        )
    sections.append(("h2", "Methods, their assumptions and failure modes"))
    used = set(table["method"]) | set(methods)
    for key, (title, text) in METHODS_TEXT.items():
        if key in used:
            sections.append(("p", f"**{title}.** {text}"))
    for title, text in family_of(spec).report_paragraphs(model_of(spec)):
        sections.append(("p", f"**{title}.** {text}"))
    return sections


def _pairs(posterior, table, threshold, level):
    """The pairs table (``outputs.pages``): the columns shown, each pair's sentence last,
    and the values its numeric columns sort by. The milestone check where a pair has
    milestone runs; the prior family's range of each bound where it was computed."""
    upper, above = f"upper ({level:g})", f"P(P > {threshold:g})"
    numbers = {
        upper: table["upper"],
        "own runs": table["own_runs"],
        "own upper": table["own_upper"],
        above: table["prob_above"],
        "estimate (mean)": table["mean"],
    }
    shown = {
        "agent": table["agent"],
        "task": table["task"],
        "verdict": table["verdict"],
        "basis": table["basis"].fillna("none"),
        **{name: values.map(format_number) for name, values in numbers.items()},
        "own runs": table["own_runs"].map(lambda n: "-" if pd.isna(n) else f"{n:,.0f}"),
        "method": table["method"],
        "diagnostics": table["diagnostics_ok"].map(
            lambda ok: "n/a" if pd.isna(ok) else ("passed" if ok else "FAILED")
        )
        if posterior.is_mcmc
        else table["upper"].map(lambda u: "exact, no MCMC" if pd.notna(u) else "n/a"),
    }
    if not table["milestone_check"].str.startswith("not applicable").all():
        shown["milestone check"] = table["milestone_check"]
    if "prior_upper_high" in table:  # the prior family's (``checks.sensitivity``)
        low, high = table["prior_upper_low"], table["prior_upper_high"]
        shown["prior range"] = [
            "-" if pd.isna(h) else f"{format_number(lo)} to {format_number(h)}"
            for lo, h in zip(low, high, strict=True)
        ]
        numbers["prior range"] = high
        if table["prior_psense"].notna().any():
            numbers["power-scaling"] = table["prior_psense"]
            shown["power-scaling"] = table["prior_psense"].map(format_number)
        if "prior_sensitive" in table:
            shown["prior-sensitive"] = table["prior_sensitive"].map(
                lambda flag: "-" if pd.isna(flag) else ("PRIOR-SENSITIVE" if flag else "no")
            )
    shown["sentence"] = table["sentence"]
    return pd.DataFrame(shown), pd.DataFrame(numbers)


# Pairs named beside a provenance they share; the others are counted (summary.csv).
PROVENANCE_NAMES = 50


def _provenance(table) -> list[str]:
    """Each distinct provenance once, with the rows that share it (of more than
    ``PROVENANCE_NAMES``, the first named and the others counted)."""
    shared: dict[str, list[str]] = {}
    for agent, task, text in zip(table["agent"], table["task"], table["provenance"], strict=True):
        shared.setdefault(text, []).append(f"{agent} / {task}")
    out = []
    for text, rows in shared.items():
        more = len(rows) - PROVENANCE_NAMES
        named = ", ".join(rows[:PROVENANCE_NAMES])
        if more > 0:
            named += f" and {more:,} more pairs (summary.csv names each pair's)"
        out.append(f"{named}: {text}")
    return out
