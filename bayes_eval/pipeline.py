"""The whole job, from Python as from the command line: read the evidence in whichever form
it comes, fit, check, and write a run folder (``run``); or report (``report``).

``bayes_eval.run(evidence, model, out=...)`` does what ``bayes-eval fit EVIDENCE --model
MODEL --out DIR`` does, and ``bayes_eval.report`` what ``bayes-eval report`` does; the
command line only translates its flags into these calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bayes_eval.checks.fitted import FitChecks, check_fit, guarded
from bayes_eval.checks.sensitivity import Sensitivity, prior_sensitivity
from bayes_eval.constants import BASIS_MODEL, END_TO_END, REPORT_BASES
from bayes_eval.csv_text import write_csv
from bayes_eval.errors import InputError
from bayes_eval.evidence.formats import detect_format
from bayes_eval.evidence.table import Evidence, PathLike, TableSource
from bayes_eval.fit import fit, load_posterior
from bayes_eval.messages import note
from bayes_eval.outputs.drawing import Figures
from bayes_eval.outputs.report import Report, build_report
from bayes_eval.outputs.runfolder import write_run
from bayes_eval.results.attempts import parse_attempts
from bayes_eval.results.population import NEW_TASK
from bayes_eval.results.posterior import Posterior
from bayes_eval.settings import SamplerInput
from bayes_eval.specs import ModelSource, check_probability

__all__ = [
    "Question",
    "Run",
    "conclude",
    "load_or_fit",
    "read_evidence",
    "refitter",
    "report",
    "run",
    "write_run_folder",
]


@dataclass
class Run:
    """What ``run`` did: the fit, its summary, its checks, the files it wrote and, where
    asked for, pass@k and pass^k per pair (``attempts``: ``bayes_eval.results.attempts``)
    and across each agent's tasks (``population``: ``bayes_eval.results.population``), and
    the bounds under the prior family (``sensitivity``: ``bayes_eval.prior_sensitivity``)."""

    posterior: Posterior
    summary: pd.DataFrame
    checks: FitChecks
    written: list[str] = field(default_factory=list)
    attempts: pd.DataFrame | None = None
    population: pd.DataFrame | None = None
    sensitivity: Sensitivity | None = None


def read_evidence(
    paths: PathLike | Sequence[PathLike],
    *,
    input_format: str | None = None,
    keep_columns: bool = False,
    sum_duplicates: bool = False,
    cluster: str | None = None,
    scorer: str | None = None,
    success_threshold: float | None = None,
    milestones: Sequence[str] | None = None,
    agent_from: str | None = None,
    task_from: str | None = None,
    audit_scorer: str | None = None,
) -> Evidence:
    """The evidence in ``paths``: an evidence table, a run file or Inspect logs.

    Parameters
    ----------
    paths : path or list of paths
        One table or run file, or Inspect logs (files or folders).
    input_format : str, optional
        One of ``evidence.formats.INPUT_FORMATS``; by default what the paths show
        (``evidence.formats.detect_format``).
    keep_columns, sum_duplicates : bool
        An evidence table's options (``bayes_eval.load_evidence``).
    cluster : str, optional
        Which runs share a cluster, for run files and Inspect logs.
    scorer, success_threshold, milestones, agent_from, task_from, audit_scorer
        Inspect logs' options, as ``bayes_eval.read_inspect`` takes them (``agent_from``
        ``"model"`` and ``task_from`` ``"sample"`` unless given); refused for other input.
    """
    from bayes_eval.evidence.inspect_logs import read_inspect
    from bayes_eval.evidence.runs import read_runs
    from bayes_eval.evidence.table import load_evidence

    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    source = detect_format(paths, input_format)
    inspect = dict(
        scorer=scorer,
        success_threshold=success_threshold,
        milestones=milestones,
        agent_from=agent_from,
        task_from=task_from,
        audit_scorer=audit_scorer,
    )
    given = [name for name, value in inspect.items() if value is not None]
    if given and source != "inspect":
        raise InputError(f"{given[0]}: applies to Inspect logs, not to {source} input")
    if source != "evidence" and (keep_columns or sum_duplicates):
        name = "keep_columns" if keep_columns else "sum_duplicates"
        raise InputError(f"{name}: applies to an evidence table, not to {source} input")
    if source == "inspect":
        inspect.update(agent_from=agent_from or "model", task_from=task_from or "sample")
        return read_inspect(paths, cluster=cluster, **inspect)
    if len(paths) > 1:
        raise InputError(f"{source} input: one file at a time (several are for Inspect logs)")
    if source == "evidence":
        if cluster is not None:
            raise InputError(
                "cluster: applies to run files and Inspect logs; an evidence table marks "
                "clusters in its own cluster column"
            )
        return load_evidence(paths[0], keep_columns=keep_columns, sum_duplicates=sum_duplicates)
    return read_runs(paths[0], source, cluster=cluster)


def run(
    evidence: TableSource | Evidence,
    model: ModelSource = "phuong_chain",
    *,
    out: PathLike | None = None,
    threshold: float | None = None,
    level: float | None = None,
    seed: int | None = None,
    sampler: SamplerInput = None,
    agents: TableSource | None = None,
    tasks: TableSource | None = None,
    predict: Sequence[str] = (),
    attempts: Sequence[int] | str | None = None,
    sensitivity: bool = False,
    audit: TableSource | None = None,
    figures: Figures | None = None,
) -> Run:
    """Fit, check, and (with ``out``) write a run folder, as ``bayes-eval fit --out``.

    Parameters
    ----------
    evidence : path, DataFrame or Evidence
        As ``bayes_eval.fit`` takes it (``read_evidence`` reads the other forms).
    model, level, seed, sampler, agents, tasks, predict, audit
        As for ``bayes_eval.fit`` (notes and progress go to ``logging`` as there).
    out : path, optional
        The run folder: ``posterior.nc``, ``summary.csv``, ``ppc.csv``,
        ``milestone_check.csv``, the figures and, with ``threshold``, the safety report;
        written whole or not at all (``bayes_eval.outputs.runfolder``).
    threshold : float, optional
        The ``tau`` of ``prob_above`` and of the report's verdicts.
    attempts : sequence of int or str, optional
        Numbers of attempts ``k`` (1 to 1e9; text such as ``"10,1e6"`` too): pass@k and
        pass^k of every pair in ``Run.attempts`` and ``attempts.csv``, and across each
        agent's tasks in ``Run.population`` and ``population.csv``.
    sensitivity : bool
        Each bound under the prior family (``bayes_eval.prior_sensitivity``): the
        summary's ``prior_*`` columns, ``Run.sensitivity`` and ``sensitivity.csv``;
        members that reweighting cannot reach are refitted with these same arguments.
    figures : bayes_eval.outputs.drawing.Figures, optional
        What draws the run folder's figures: by default, with ``out``, one started before
        the fit, so that its process is ready when the fit is.

    A check, the report or a figure that fails after the fit is reported in
    ``Run.checks.failed``; the fit, its summary and the other checks are kept.
    """
    from bayes_eval.outputs.runfolder import check_out

    if threshold is not None:
        threshold = check_probability(threshold, "threshold")
    if attempts is not None:
        attempts = parse_attempts(attempts)
    out = None if out is None else check_out(Path(out))
    given = dict(level=level, seed=seed, sampler=sampler, agents=agents, tasks=tasks)
    with contextlib.ExitStack() as stack:
        if out is not None and figures is None:
            figures = stack.enter_context(Figures())
        posterior = fit(evidence, model, predict=predict, audit=audit, **given)

        def refit(spec):
            return fit(posterior.evidence, spec, predict=predict, **given)

        question = Question(
            threshold, attempts=attempts, sensitivity=refit if sensitivity else False
        )
        return conclude(posterior, question, out=out, figures=figures)


# Shipped models whose fit describes an agent's task population (a new task's pass@k).
POPULATION_MODELS = ("end_to_end_shared", "end_to_end_pooled", "crossed")


@dataclass(frozen=True)
class Question:
    """What a run asks of a fit besides its bounds: ``threshold``, the ``tau`` of its
    verdicts ``P < tau``; ``level`` of the bounds (None: the fit's); ``attempts``, the
    numbers of attempts of pass@k and pass^k; and ``sensitivity``, the bounds under the
    prior family (True, or a function that refits a spec for the members reweighting
    cannot reach)."""

    threshold: float | None = None
    level: float | None = None
    attempts: Sequence[int] | str | None = None
    sensitivity: bool | Callable = False


def conclude(posterior, question: Question = Question(), *, out=None, figures=None) -> Run:
    """What ``run`` does once the fit is made, to answer ``question``: its summary, its
    checks (``check_fit``), pass@k and pass^k for its attempts, the bounds under the prior
    family where it asks for them, and with ``out`` its run folder
    (``write_run_folder``, its figures drawn by ``figures`` where given)."""
    threshold, level, attempts = question.threshold, question.level, question.attempts
    summary = posterior.summary(level=level, threshold=threshold)
    table = curves = found = None
    if attempts is not None:
        table = posterior.attempts(attempts, level=level, threshold=threshold)
        curves = posterior.population(attempts, level=level)
        _note_prior_pass_at_k(posterior, curves, max(parse_attempts(attempts)))
    checks = check_fit(posterior)
    if question.sensitivity:
        sensitivity = question.sensitivity
        refit = sensitivity if callable(sensitivity) else refitter(posterior)
        found = _sensitivity(posterior, threshold, checks, refit, level=level)
        if found is not None:
            summary = found.mark(summary)
    written = (
        []
        if out is None
        else write_run_folder(
            out,
            posterior,
            summary,
            checks,
            threshold=threshold,
            attempts=table,
            population=curves,
            sensitivity=found,
            figures=figures,
        )
    )
    return Run(posterior, summary, checks, written, table, curves, found)


def _note_prior_pass_at_k(posterior, curves: pd.DataFrame, k: int) -> None:
    """One note where pass@k at ``k`` rests on each pair's fixed prior more than on its
    runs: a model without a task population (no new-task curve) and pairs run fewer than
    ``k`` times end to end."""
    if k <= 1 or (curves["population"] == NEW_TASK).any():
        return
    evidence = posterior.evidence.table
    runs = evidence[evidence["method"] == END_TO_END].groupby(["agent", "task"])["trials"].sum()
    pairs = evidence.groupby(["agent", "task"]).ngroups
    short = pairs - int((runs >= k).sum())
    if short:
        note(
            f"pass@k at k = {k:,} reflects the prior more than the runs for {short} of "
            f"{pairs} pair(s), run fewer than {k:,} times end to end: {posterior.spec.name} "
            "gives each pair's rate a fixed prior of its own, and pass@k far beyond the "
            "runs is that prior's tail. A model with a task population "
            f"({', '.join(POPULATION_MODELS)}) learns how rates vary across tasks and "
            "carries that into pass@k"
        )


def _sensitivity(posterior, threshold, checks: FitChecks, refit, level=None):
    """``prior_sensitivity`` after the fit: None, with a line in ``checks.failed``, where
    it fails (the fit is kept)."""
    return guarded(
        "the prior sensitivity",
        checks.failed,
        prior_sensitivity,
        posterior,
        threshold,
        level=level,
        refit=refit,
    )


def refitter(posterior):
    """A function that fits another spec to a fit's evidence with its level and seed, or
    None where the fit's side tables (a crossed model's covariates) are not at hand."""
    if any(posterior.spec.covariates.get(key) for key in ("agent", "task", "task_group")):
        return None

    def refit(spec):
        return fit(posterior.evidence, spec, level=posterior.level, seed=posterior.seed)

    return refit


def write_run_folder(
    out,
    posterior,
    summary,
    checks: FitChecks,
    *,
    threshold=None,
    attempts=None,
    population=None,
    sensitivity=None,
    figures=None,
) -> list[str]:
    """Write a fit's run folder and return its files' names; a report or figure that
    fails is reported in ``checks.failed`` (the fit, its summary and its checks are
    written all the same). ``attempts``, ``population`` and ``sensitivity`` (its bounds),
    where given, are written as ``attempts.csv``, ``population.csv`` and
    ``sensitivity.csv``; ``figures`` (``outputs.drawing.Figures``) draws the figures, by
    default a ``Figures`` of the folder's own."""
    from bayes_eval.outputs.plots import forest_plot, ppc_plot

    def report(staging: Path, figures) -> None:
        if threshold is not None:  # the report (its verdicts need the threshold) draws
            build_report(
                posterior, threshold, checks=checks, sensitivity=sensitivity, figures=figures
            ).write(staging)
            return
        # the pairs run (a crossed fit's predictions are in the summary)
        figures.draw("forest.png", forest_plot, summary[summary["observed"]], threshold=None)
        if len(checks.predictive):
            figures.draw("ppc.png", ppc_plot, checks.predictive)
        for name, data in figures.drawn().items():
            (staging / name).write_bytes(data)

    def drawn(staging: Path) -> None:
        with contextlib.ExitStack() as stack:
            own = figures if figures is not None else stack.enter_context(Figures())
            report(staging, own)

    def write(staging: Path) -> None:
        posterior.to_netcdf(staging / "posterior.nc")
        write_csv(summary, staging / "summary.csv")
        if attempts is not None:
            write_csv(attempts, staging / "attempts.csv")
            write_csv(population, staging / "population.csv")
        write_csv(checks.predictive, staging / "ppc.csv")
        if sensitivity is not None:
            write_csv(sensitivity.bounds, staging / "sensitivity.csv")
        if len(checks.assumption):
            write_csv(checks.assumption, staging / "milestone_check.csv")
        guarded("the report and figures", checks.failed, drawn, staging)

    return write_run(Path(out), write, command="fit")


def load_or_fit(source, *, model=None, level=None, seed=None) -> Posterior:
    """A ``Posterior`` from a ``bayes-eval fit --out`` folder or ``posterior.nc`` file, or
    fitted to an evidence table (path, DataFrame or Evidence)."""
    if isinstance(source, str | Path) and (Path(source).is_dir() or str(source).endswith(".nc")):
        if model is not None:
            raise InputError("model: a fitted run folder already has its model")
        return load_posterior(source)
    return fit(source, model or "phuong_chain", level=level, seed=seed)


def report(
    source: TableSource | Evidence,
    threshold: float,
    *,
    model: ModelSource | None = None,
    level: float | None = None,
    seed: int | None = None,
    out: PathLike | None = None,
    allow_extrapolated: bool = False,
    compare: Sequence[ModelSource] = (),
    attempts: Sequence[int] | str | None = None,
    sensitivity: bool = True,
    basis: str = BASIS_MODEL,
    backtest: PathLike | None = None,
) -> Report:
    """Fit (or load) and report.

    Parameters
    ----------
    source : path, DataFrame or Evidence
        An evidence table, or a folder written by ``bayes-eval fit --out``.
    threshold : float
        The ``tau`` of the question ``P < tau``.
    model, level, seed
        As for ``bayes_eval.fit`` (``model`` only for evidence; default ``phuong_chain``).
    out : path, optional
        Folder to write ``report.html``, ``report.md`` and the figures into.
    allow_extrapolated : bool
        Let a bound below its floor decide ``below`` (``outputs.report.verdicts``); the
        report says so.
    compare : sequence of str or path
        Models fitted to the same evidence and ranked beside the report's model and the
        milestone method in its section "Which model the bounds come from".
    attempts : sequence of int or str, optional
        Numbers of attempts for the section "At deployment scale" (default 1 to 1e6 in
        decades) and its table per pair (only with ``attempts``).
    sensitivity : bool
        The section on the prior: each bound under the prior family, and the verdicts
        it flips (``bayes_eval.prior_sensitivity``).
    basis : {"model", "own"}
        What may say below: the model's bounds (default), or only each pair's own runs
        (``outputs.verdicts.on_own_runs``; the others are undecided, with the runs that
        would decide them).
    backtest : path, optional
        A backtest's folder or table (``bayes-eval backtest --out``): beside each new
        agent's forecast, how the model's forecasts held in it.
    """
    threshold = check_probability(threshold, "threshold")
    if basis not in REPORT_BASES:
        raise InputError(f"basis: {basis!r} is not one of {', '.join(REPORT_BASES)}")
    if attempts is not None:
        attempts = parse_attempts(attempts)
    if backtest is not None:
        from bayes_eval.checks.backtest import read_backtest

        backtest = read_backtest(backtest)
    posterior = load_or_fit(source, model=model, level=level, seed=seed)
    checks = check_fit(posterior, keep_going=False, others=compare)
    found = (
        _sensitivity(posterior, threshold, checks, refitter(posterior), level)
        if sensitivity
        else None
    )
    result = build_report(
        posterior,
        threshold,
        level,
        checks=checks,
        allow_extrapolated=allow_extrapolated,
        attempts=attempts,
        sensitivity=found,
        basis=basis,
        backtest=backtest,
    )
    if out is not None:
        result.write(out)
    return result
