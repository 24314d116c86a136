"""``bayes-eval`` command line.

Errors are one line on stderr starting ``error:``; exit status 2 for bad input or
usage, 1 for a failed fit; no traceback unless ``--debug``. Output files are
written only after everything has succeeded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import traceback
import warnings
from decimal import Decimal
from pathlib import Path

import pandas as pd

from bayes_eval.checks.simulate import VIOLATIONS
from bayes_eval.constants import (
    CALIBRATION_MAX_TRIALS,
    DEFAULT_LEVEL,
    MCMC_ENGINES,
    PLAN_MAX_TRIALS,
    PLAN_POWER,
    SAMPLER_LIMITS,
)
from bayes_eval.errors import InputError
from bayes_eval.evidence.table import INT64_MAX, INTEGER_TEXT
from bayes_eval.inference import interrupts
from bayes_eval.outputs.runfolder import check_out, write_run
from bayes_eval.results.summary import format_number

# Largest tables `bayes-eval simulate paths` builds (each is fitted by every model, MCMC
# included, at every strength).
PATHS_MAX_TASKS = 10_000
PATHS_MAX_MILESTONES = 100

# Most binomial draws `bayes-eval simulate variance` makes (about ten minutes on one core).
SIMULATE_MAX_DRAWS = 4 * 10**9

# --workers: worker processes of a local dask cluster (each one process of this machine).
MAX_WORKERS = 256
# fit --by agent: characters of an agent's name kept in its run folder's name.
FOLDER_NAME_MAX = 64

# More end-to-end trials than a plan calls practical (the planner then points to milestones).
PLAN_PRACTICAL_TRIALS = 100_000

FORMATS = ("table", "csv", "json")
# How evidence is read (--from): the tidy table, a run-level format, or Inspect logs.
INPUT_FORMATS = ("evidence", "runs", "metr", "metr-jsonl", "taubench", "inspect")
INSPECT_OPTIONS = ("scorer", "success_threshold", "milestones", "agent_from", "task_from")


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one ``error:`` line and exit status 2."""

    def error(self, message):
        raise InputError(f"{self.prog}: {message}")


EPILOG = """\
start here:
  bayes-eval fit "$(bayes-eval example)"            fit the shipped example
  bayes-eval fit TABLE.csv --model joint --out RUN  fit your table, keep the run
  bayes-eval report RUN --threshold 0.05 --out REPORT
  bayes-eval COMMAND --help                         the options of one command

reference: the project's README and docs/ (models, evidence, outputs, verdicts)
"""

QUIET_HELP = "no progress on stderr (shown only when stderr is a terminal anyway)"


def _progress(args):
    """Where a pooled fit reports compiling and sampling: stderr when it is a terminal."""
    return None if args.quiet or not sys.stderr.isatty() else sys.stderr


def _reading_options(command) -> None:
    """How evidence is read: its format, clusters, kept columns, summed batches, and the
    mapping of Inspect logs."""
    reading = command.add_argument_group("reading (README: Reading results where they live)")
    reading.add_argument(
        "--from",
        dest="input_format",
        choices=INPUT_FORMATS,
        help="the input's format (default: Inspect logs for folders, .eval and .json files; "
        "metr-jsonl for .jsonl; else an evidence table)",
    )
    reading.add_argument(
        "--runs",
        dest="input_format",
        action="store_const",
        const="runs",
        help="one row per run: agent, task, success, optional step and run (= --from runs)",
    )
    reading.add_argument(
        "--cluster",
        help="runs that share this column's value (Inspect: sample, log or metadata:KEY) "
        "are correlated; end_to_end_pooled and hierarchical model them as over-dispersed",
    )
    inspect = command.add_argument_group("Inspect AI logs (pip install 'bayes_eval[inspect]')")
    inspect.add_argument("--scorer", help="the scorer whose score is success (default: the only)")
    inspect.add_argument(
        "--success-threshold",
        dest="success_threshold",
        help="numeric scores: success is score >= this",
    )
    inspect.add_argument(
        "--milestones", help="KEY1,KEY2,...: a dict-valued score's milestone keys, in order"
    )
    inspect.add_argument(
        "--agent-from", dest="agent_from", help="model (default), solver or metadata:KEY"
    )
    inspect.add_argument(
        "--task-from", dest="task_from", help="sample (default: TASK/ID), task or metadata:KEY"
    )
    command.add_argument(
        "--keep-columns",
        dest="keep_columns",
        action="store_true",
        help="carry columns outside the evidence format (e.g. notes) into the summary",
    )
    command.add_argument(
        "--sum-duplicates",
        dest="sum_duplicates",
        action="store_true",
        help="add up count rows of the same cell (batches) instead of refusing them",
    )


def _crossed_options(command) -> None:
    crossed = command.add_argument_group("crossed models (covariates and predictions)")
    crossed.add_argument("--agents", help="table of agent covariates (column agent + covariates)")
    crossed.add_argument("--tasks", help="table of task covariates (column task + covariates)")
    crossed.add_argument(
        "--predict-agent",
        dest="predict_agent",
        action="append",
        default=[],
        metavar="NAME,COLUMN=VALUE,...",
        help="a new agent described by its covariates alone; repeat for several",
    )


def _input_format(paths: list[str], args) -> str:
    """The format given (``--from``, ``--runs``, or an input format as ``--format``), or
    the one the paths show: Inspect logs for folders and ``.eval``/``.json`` files, METR's
    JSON Lines for ``.jsonl``, else an evidence table."""
    given = getattr(args, "input_format", None)
    named = getattr(args, "format", None)
    if named in INPUT_FORMATS:
        if given is not None and given != named:
            raise InputError(f"--format {named} and --from {given}: give the input format once")
        given, args.format = named, "table"
    if given is not None:
        return given
    suffixes = {Path(p).suffix.lower() for p in paths}
    if any(Path(p).is_dir() for p in paths) or suffixes <= {".eval", ".json"}:
        return "inspect"
    if suffixes == {".jsonl"}:
        return "metr-jsonl"
    return "evidence"


def _evidence(paths, args, notes: list):
    """The evidence in ``paths`` (one table or run file, or Inspect logs), read as the
    command line's options say."""
    from bayes_eval.evidence.inspect_logs import read_inspect
    from bayes_eval.evidence.runs import read_runs
    from bayes_eval.evidence.table import load_evidence

    paths = [paths] if isinstance(paths, str | Path) else paths
    source = _input_format(paths, args)
    given = [f"--{o.replace('_', '-')}" for o in INSPECT_OPTIONS if getattr(args, o) is not None]
    if given and source != "inspect":
        raise InputError(f"{given[0]}: applies to Inspect logs, not to {source} input")
    if source != "evidence" and (args.keep_columns or args.sum_duplicates):
        flag = "--keep-columns" if args.keep_columns else "--sum-duplicates"
        raise InputError(f"{flag}: applies to an evidence table, not to {source} input")
    if source == "inspect":
        threshold = args.success_threshold
        if threshold is not None:
            threshold = _real(threshold, "--success-threshold")
        milestones = None
        if args.milestones is not None:
            milestones = [key.strip() for key in args.milestones.split(",")]
            if not all(milestones):
                raise InputError(f"--milestones: '{args.milestones}' has an empty key")
        return read_inspect(
            paths,
            scorer=args.scorer,
            success_threshold=threshold,
            milestones=milestones,
            agent_from=args.agent_from or "model",
            task_from=args.task_from or "sample",
            cluster=args.cluster,
            notes=notes,
        )
    if len(paths) > 1:
        raise InputError(f"{source} input: one file at a time (several are for Inspect logs)")
    if source == "evidence":
        if args.cluster is not None:
            raise InputError(
                "--cluster: applies to run files and Inspect logs; an evidence table marks "
                "clusters in its own cluster column"
            )
        return load_evidence(
            paths[0],
            keep_columns=args.keep_columns,
            sum_duplicates=args.sum_duplicates,
            notes=notes,
        )
    return read_runs(paths[0], source, cluster=args.cluster, notes=notes)


def _sweep_arguments(parser, when: str = "") -> None:
    """``--workers`` and ``--scheduler``, for a command that runs a sweep (``when``)."""
    group = parser.add_argument_group(
        f"sweep{' ' + when if when else ''} (default: serially in this process; the "
        "distributed extra)"
    )
    place = group.add_mutually_exclusive_group()
    place.add_argument("--workers", help="run on a local dask cluster of N worker processes")
    place.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on a running dask cluster (tcp://host:8786)"
    )


def _sweep_options(args) -> dict:
    """``workers`` and ``scheduler`` for ``bayes_eval.inference.sweep.run_sweep``, checked."""
    workers = None if args.workers is None else _whole(args.workers, "--workers", 1, MAX_WORKERS)
    return dict(workers=workers, scheduler=args.scheduler)


def _real(text: str, option: str) -> float:
    """A finite decimal number."""
    from bayes_eval.evidence.table import REAL_TEXT

    if not REAL_TEXT.fullmatch(text.strip()):
        raise InputError(f"{option}: '{text}' is not a decimal number")
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"{option}: {text} is not a finite number")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bayes-eval",
        description="How likely is an AI agent to succeed at a task, with a credible upper bound.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    fit = commands.add_parser("fit", help="validate, fit and summarise an evidence table")
    fit.add_argument(
        "evidence",
        nargs="+",
        help="evidence table (CSV or Parquet), run file, or Inspect logs and folders of them",
    )
    fit.add_argument(
        "--model",
        default="phuong_chain",
        help="shipped spec name or spec path (default: phuong_chain)",
    )
    fit.add_argument("--level", help="one-sided credible level (default: the spec's)")
    fit.add_argument("--threshold", help="report P(P > TAU) for this TAU")
    fit.add_argument("--seed", help="seed of the posterior draws (default: the spec's)")
    fit.add_argument("--out", help="folder for posterior.nc and summary.csv")
    fit.add_argument(
        "--format",
        default="table",
        choices=FORMATS + INPUT_FORMATS[1:],
        help="output: table, csv or json; an input format (metr-jsonl, ...) = --from it",
    )
    _reading_options(fit)
    _crossed_options(fit)
    fit.add_argument(
        "--by",
        choices=["agent"],
        help="fit each agent (or checkpoint) on its own rows: one run folder each in --out",
    )
    _sweep_arguments(fit, "with --by agent")
    mcmc = fit.add_argument_group("MCMC settings (pooled models only; default: the spec's)")
    mcmc.add_argument(
        "--engine",
        choices=MCMC_ENGINES,
        help="nutpie, pymc, numpyro (JAX; the jax extra) or auto (says why it chose)",
    )
    mcmc.add_argument("--draws", help="draws per chain")
    mcmc.add_argument("--tune", help="tuning steps per chain")
    mcmc.add_argument("--chains", help="number of chains")
    mcmc.add_argument("--target-accept", dest="target_accept", help="NUTS target acceptance")
    fit.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    fit.add_argument("--debug", action="store_true", help="show tracebacks")
    check = commands.add_parser("check", help="print the MCMC diagnostics of a fit's --out folder")
    check.add_argument("run_dir", help="folder written by bayes-eval fit --out")
    check.add_argument("--debug", action="store_true", help="show tracebacks")
    calibrate = commands.add_parser(
        "calibrate", help="calibrate a fit against end-to-end ground truth, or the published table"
    )
    calibrate.add_argument("run_dir", nargs="?", help="folder written by bayes-eval fit --out")
    calibrate.add_argument("--truth", help="end-to-end ground truth (evidence format)")
    calibrate.add_argument(
        "--published", help="Hojmark et al. (2024) appendix table (data/mats2024_appendix.csv)"
    )
    calibrate.add_argument("--level", help="level of the upper bound (default: the fit's)")
    calibrate.add_argument("--seed", default="0", help="seed of the PIT randomisation")
    calibrate.add_argument("--out", help="folder for the table and plots (default: RUN_DIR)")
    calibrate.add_argument("--format", default="table", choices=FORMATS)
    calibrate.add_argument("--debug", action="store_true", help="show tracebacks")
    simulate = commands.add_parser("simulate", help="simulation studies")
    studies = simulate.add_subparsers(dest="study", required=True, parser_class=_Parser)
    variance = studies.add_parser(
        "variance", help="variance of milestone against end-to-end estimates"
    )
    variance.add_argument("--milestones", nargs="+", default=["2"], help="one or more M")
    variance.add_argument("--end-to-end-rate", dest="rate", default="0.0025")
    variance.add_argument("--trials", nargs="+", default=["100"], help="trials per stage")
    variance.add_argument("--replications", default="1000000")
    paths = studies.add_parser("paths", help="milestone bounds when other solution paths exist")
    paths.add_argument("--violation", default="bypass", choices=VIOLATIONS)
    paths.add_argument("--strengths", nargs="+", default=["0", "0.05", "0.1", "0.2", "0.4"])
    paths.add_argument("--models", nargs="+", default=["mats2024", "joint"])
    paths.add_argument("--tasks", default="40")
    paths.add_argument("--milestones", default="3")
    paths.add_argument("--trials", default="100", help="trials per milestone")
    paths.add_argument("--end-to-end-share", dest="share", default="0.5")
    paths.add_argument("--end-to-end-trials", dest="e2e_trials", default="50")
    paths.add_argument("--truth-trials", dest="truth_trials", default="100")
    for study in (variance, paths):
        _sweep_arguments(study)
        study.add_argument("--seed", default="0")
        study.add_argument("--out", help="folder for the results table and plot")
        study.add_argument("--format", default="table", choices=FORMATS)
        study.add_argument("--debug", action="store_true", help="show tracebacks")
    report = commands.add_parser("report", help="write the safety report (HTML and Markdown)")
    report.add_argument("source", help="evidence table, or a folder written by fit --out")
    report.add_argument("--threshold", required=True, help="the TAU of the question P < TAU")
    report.add_argument("--model", help="spec for an evidence table (default: phuong_chain)")
    report.add_argument("--level", help="one-sided credible level (default: the spec's)")
    report.add_argument("--seed", help="seed of the posterior draws (default: the spec's)")
    report.add_argument("--out", required=True, help="folder for report.html, report.md, figures")
    report.add_argument(
        "--allow-extrapolated",
        action="store_true",
        help="let a bound below its floor (extrapolated) decide 'below'; the report says so",
    )
    _reading_options(report)
    report.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    report.add_argument("--debug", action="store_true", help="show tracebacks")
    plan = commands.add_parser(
        "plan", help="trials that certify P < TAU, or the next run to make (RUN_DIR --task)"
    )
    plan.add_argument("run_dir", nargs="?", help="folder written by fit --out (next-run mode)")
    plan.add_argument("--threshold", required=True, help="the TAU to certify P < TAU")
    plan.add_argument("--level", help=f"one-sided credible level (default: {DEFAULT_LEVEL})")
    plan.add_argument("--prior", default="uniform", help="uniform, jeffreys or ALPHA,BETA")
    plan.add_argument("--rate", help="hypothesised true end-to-end rate: expected trials")
    plan.add_argument("--milestone-rates", dest="milestone_rates", nargs="+", help="hypothesised")
    plan.add_argument("--power", default=str(PLAN_POWER), help="probability of certifying")
    plan.add_argument("--task", help="task to plan for (next-run mode)")
    plan.add_argument("--agent", help="agent (next-run mode; needed with several agents)")
    plan.add_argument("--cost", nargs="+", help="cost of one trial of each milestone")
    plan.add_argument("--end-to-end-cost", dest="e2e_cost", default="1")
    plan.add_argument("--batch", nargs="+", default=["10", "50"], help="batch sizes")
    plan.add_argument("--seed", default="0")
    plan.add_argument("--format", default="table", choices=FORMATS)
    plan.add_argument("--debug", action="store_true", help="show tracebacks")
    horizon = commands.add_parser(
        "horizon", help="time horizons and their trend from a crossed fit (time_horizon)"
    )
    horizon.add_argument("run_dir", help="folder written by bayes-eval fit --out")
    horizon.add_argument(
        "--interval", default="0.95", help="central credible level of the intervals (0.95)"
    )
    horizon.add_argument(
        "--forecast", nargs="+", default=[], metavar="DATE", help="forecast for these ISO dates"
    )
    horizon.add_argument("--out", help="folder for horizons.csv and horizons.png (RUN_DIR)")
    horizon.add_argument("--format", default="table", choices=FORMATS)
    horizon.add_argument("--debug", action="store_true", help="show tracebacks")
    example = commands.add_parser("example", help="print the path of a shipped dataset")
    example.add_argument(
        "name",
        nargs="?",
        default="example_evidence",
        help="dataset name (default: example_evidence)",
    )
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayes_eval")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bayes-eval``; returns the exit status. With no arguments it prints
    the help."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        _parser().print_help()
        return 0
    debug = "--debug" in argv
    with interrupts.raising(), warnings.catch_warnings():
        if not debug:  # a warning is for the developer; the user gets notes and errors
            warnings.simplefilter("ignore")
        try:
            args = _parser().parse_args(argv)
            return COMMANDS[args.command](args)
        except interrupts.Interrupted as exc:  # stop at once: no retry, no partial output
            if debug:
                traceback.print_exc()
            print(f"interrupted ({exc})", file=sys.stderr)
            return exc.exit_status
        except BrokenPipeError:  # `| head`: stop quietly, as standard tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE
        except InputError as exc:
            if debug:
                traceback.print_exc()
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # a failed fit: say so in one line
            if debug:
                traceback.print_exc()
            command = next((a for a in argv if not a.startswith("-")), "bayes-eval")
            print(f"error: {command} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1


def _whole(text: str | None, option: str, minimum: int, maximum: int = INT64_MAX) -> int | None:
    """A whole number in ASCII digits between ``minimum`` and ``maximum``, or None."""
    if text is None:
        return None
    if not INTEGER_TEXT.fullmatch(text.strip()):
        raise InputError(f"{option}: '{text}' is not a whole number")
    value = int(text)
    if value < minimum:
        raise InputError(f"{option}: {value} must be >= {minimum}")
    if value > maximum:
        raise InputError(f"{option}: {value} must be <= {maximum}")
    return value


def _sampler(args) -> dict:
    """The MCMC overrides given on the command line, validated."""
    from bayes_eval.specs import check_probability

    out = {
        "engine": args.engine,
        "draws": _whole(args.draws, "--draws", *SAMPLER_LIMITS["draws"]),
        "tune": _whole(args.tune, "--tune", *SAMPLER_LIMITS["tune"]),
        "chains": _whole(args.chains, "--chains", *SAMPLER_LIMITS["chains"]),
    }
    if args.target_accept is not None:
        out["target_accept"] = check_probability(args.target_accept, "--target-accept")
    return {key: value for key, value in out.items() if value is not None}


def _fit(args) -> int:
    from bayes_eval.fit import fit
    from bayes_eval.specs import check_level, check_probability

    level = None if args.level is None else check_level(args.level, "--level")
    threshold = None if args.threshold is None else check_probability(args.threshold, "--threshold")
    seed = _whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    sampler = _sampler(args)
    sweep = _sweep_options(args)
    out = None if args.out is None else check_out(Path(args.out))
    notes: list[str] = []
    if args.by is not None:
        return _fit_per_agent(args, level, threshold, seed, sampler, sweep, out, notes)
    if sweep["workers"] is not None or sweep["scheduler"] is not None:
        option = "--workers" if sweep["workers"] is not None else "--scheduler"
        raise InputError(f"{option}: applies to sweeps; one fit runs here (add --by agent)")
    posterior = fit(
        _evidence(args.evidence, args, notes),
        args.model,
        level=level,
        seed=seed,
        notes=notes,
        sampler=sampler,
        log=_progress(args),
        agents=args.agents,
        tasks=args.tasks,
        predict=args.predict_agent,
    )
    summary = posterior.summary(threshold=threshold)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    failed: list[str] = []
    checks, assumption = _checks(posterior, failed)
    written = []
    if out is not None:
        written = _write(out, posterior, summary, checks, assumption, threshold, failed)
    verdict = _verdict_text(posterior, _check_lines(checks, assumption), failed)
    if verdict and args.format != "table":
        print(verdict, file=sys.stderr)
    if args.format != "table":
        _print_summary(summary, args.format)
    else:
        print(_table(summary, posterior, threshold))
        if verdict:
            print(f"\n{verdict}")
        if out is not None:
            print(f"\nwrote to {out}: {', '.join(written)}")
    return 0


def _fit_per_agent(args, level, threshold, seed, sampler, sweep, out, notes) -> int:
    """``fit --by agent``: a fit per agent, each written to its own run folder in ``out``
    as it finishes (``agents.csv`` says which folder is whose), and printed together."""
    from bayes_eval.fit import fit_per_agent

    given = [name for name in ("agents", "tasks") if getattr(args, name) is not None]
    if given or args.predict_agent:
        option = f"--{given[0]}" if given else "--predict-agent"
        raise InputError(
            f"{option}: covariates and predictions belong to crossed models, which fit "
            "agents together; --by agent fits each alone"
        )
    evidence = _evidence(args.evidence, args, notes)
    agents = list(dict.fromkeys(evidence.table["agent"]))
    folders = dict(zip(agents, _folder_names(agents), strict=True))
    fitted = {}

    def keep(agent, posterior):
        if out is not None and not fitted:  # every agent's rows passed their checks
            index = pd.DataFrame(dict(agent=agents, folder=[folders[a] for a in agents]))
            write_run(
                out,
                lambda staging: index.to_csv(staging / "agents.csv", index=False),
                command="fit --by agent",
            )
        summary = posterior.summary(threshold=threshold)
        failed: list[str] = []
        checks, assumption = _checks(posterior, failed)
        if out is not None:
            _write(out / folders[agent], posterior, summary, checks, assumption, threshold, failed)
        fitted[agent] = (posterior, summary, _check_lines(checks, assumption), failed)

    fit_per_agent(
        evidence,
        args.model,
        level=level,
        seed=seed,
        notes=notes,
        sampler=sampler,
        on_fit=keep,
        log=_progress(args),
        **sweep,
    )
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    verdicts = {}
    for agent, (posterior, _, check_lines, failed) in fitted.items():
        verdicts[agent] = _verdict_text(posterior, check_lines, failed)
        if verdicts[agent] and args.format != "table":
            print(f"agent '{agent}': {verdicts[agent]}", file=sys.stderr)
    if args.format != "table":
        summary = pd.concat([fitted[agent][1] for agent in agents], ignore_index=True)
        _print_summary(summary, args.format)
    else:
        blocks = []
        for agent in agents:
            posterior, agent_summary = fitted[agent][:2]
            block = _table(agent_summary, posterior, threshold)
            blocks.append(block + (f"\n\n{verdicts[agent]}" if verdicts[agent] else ""))
        print("\n\n".join(blocks))
        if out is not None:
            print(f"\nwrote to {out}: agents.csv and a run folder per agent ({len(agents)})")
    return 0


def _verdict_text(posterior, check_lines: str, failed: list[str]) -> str:
    """The diagnostics verdict, the checks' lines and what failed after sampling."""
    return "\n".join(filter(None, [_verdict(posterior), check_lines, *failed]))


def _print_summary(summary: pd.DataFrame, fmt: str) -> None:
    """``summary`` on stdout as CSV or JSON records."""
    if fmt == "csv":
        sys.stdout.write(summary.to_csv(index=False))
        return
    records = [{k: _json_value(v) for k, v in row.items()} for row in summary.to_dict("records")]
    print(json.dumps(records, indent=2))


def _folder_names(agents: list[str]) -> list[str]:
    """A folder name per agent: its name in letters, digits, ``.``, ``_`` and ``-``
    (others become ``_``), made unique with its position where two would clash."""
    names, taken = [], set()
    for i, agent in enumerate(agents):
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", agent).strip("._")[:FOLDER_NAME_MAX] or "agent"
        if name.lower() in taken:
            name = f"{name}_{i + 1}"
        taken.add(name.lower())
        names.append(name)
    return names


def _checks(posterior, failed: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The posterior predictive and milestone-assumption checks of a fit. Nothing that
    runs after sampling may lose the fit: a check that fails is reported in ``failed``
    and gives an empty table."""
    from bayes_eval.checks import assumption as milestone_check
    from bayes_eval.results import predictive

    checks = _guarded(
        "posterior predictive checks", failed, predictive.predictive_checks, posterior
    )
    assumption = _guarded(
        "milestone-assumption check",
        failed,
        milestone_check.milestone_assumption,
        posterior.evidence,
        fitted=posterior,
    )
    checks = pd.DataFrame(columns=predictive.COLUMNS) if checks is None else checks
    assumption = pd.DataFrame(columns=milestone_check.COLUMNS) if assumption is None else assumption
    return checks, assumption


def _guarded(what: str, failed: list, function, *args, **kwargs):
    """``function(*args, **kwargs)``, or None where it raises, with a line in ``failed``
    naming ``what`` failed and why, and that the fit is kept."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # a failed check is reported; the fit stands
        failed.append(f"{what} FAILED ({type(exc).__name__}: {exc}); the fit is kept")
        return None


def _verdict(posterior) -> str:
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


def _check(args) -> int:
    from bayes_eval.results.posterior import load_posterior

    path = Path(args.run_dir)
    posterior = load_posterior(path)
    if not posterior.is_mcmc:
        print(
            f"{path}: model {posterior.spec.name} is exact (conjugate): no MCMC, nothing to "
            "diagnose"
        )
        return 0
    diagnostics = posterior.diagnostics
    table = _terminal_table(diagnostics.table, digits=lambda x: f"{x:.4g}")
    ebfmi = ", ".join(f"{e:.2f}" for e in diagnostics.ebfmi)
    print(f"{path}: model {posterior.spec.name}\n\n{table}\n")
    print(f"divergences: {diagnostics.divergences}; E-BFMI per chain: {ebfmi}")
    print(_verdict(posterior))
    return 0 if diagnostics.ok else 1


def _example(args) -> int:
    from bayes_eval.resources import shipped_datasets

    datasets = shipped_datasets()
    if args.name not in datasets:
        raise InputError(f"example: no dataset '{args.name}'; shipped: {', '.join(datasets)}")
    print(datasets[args.name])
    return 0


def _check_lines(checks, assumption) -> str:
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


def _write(out: Path, posterior, summary, checks, assumption, threshold, failed) -> list[str]:
    """Write the run's files and return their names; a report or figure that fails is
    reported in ``failed`` (the fit, its summary and its checks are written all the same)."""
    from bayes_eval.outputs.plots import forest_plot, ppc_plot
    from bayes_eval.outputs.report import build_report

    def figures(staging: Path) -> None:
        if threshold is not None:  # the report (its verdicts need the threshold) draws
            report = build_report(posterior, threshold, checks=checks, assumption=assumption)
            report.write(staging)  # forest.png and ppc.png too
        else:  # the pairs run (a crossed fit's predictions are in the summary)
            forest_plot(summary[summary["observed"]], staging / "forest.png", threshold)
            if len(checks):
                ppc_plot(posterior, checks, staging / "ppc.png")

    def write(staging: Path) -> None:
        posterior.to_netcdf(staging / "posterior.nc")
        summary.to_csv(staging / "summary.csv", index=False)
        checks.to_csv(staging / "ppc.csv", index=False)
        if len(assumption):
            assumption.to_csv(staging / "milestone_check.csv", index=False)
        _guarded("the report and figures", failed, figures, staging)

    return write_run(out, write, command="fit")


def _same(out: Path, source: Path) -> bool:
    """Whether ``out`` is the run folder that ``source`` (the folder or a file in it) was
    read from, whose files are then kept."""
    folder = source if source.is_dir() else source.parent
    return out.is_dir() and out.resolve() == folder.resolve()


def _calibrate(args) -> int:
    from bayes_eval.checks.calibration import calibrate, published_calibration
    from bayes_eval.outputs.plots import calibration_plot
    from bayes_eval.results.posterior import load_posterior
    from bayes_eval.specs import check_level

    if args.published is not None:
        if args.run_dir or args.truth:
            raise InputError("calibrate: give either --published FILE or RUN_DIR --truth FILE")
        result = published_calibration(args.published)
        if args.format == "json":
            print(json.dumps(result, indent=2))
        else:
            print(_published_table(result, args.format))
        return 0
    if not args.run_dir or not args.truth:
        raise InputError("calibrate: needs RUN_DIR and --truth FILE (or --published FILE)")
    level = None if args.level is None else check_level(args.level, "--level")
    seed = _whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    path = Path(args.run_dir)
    posterior = load_posterior(path)
    out = check_out(Path(args.out) if args.out else path if path.is_dir() else path.parent)
    result = calibrate(posterior, args.truth, level=level, seed=seed)

    def write(staging: Path) -> None:
        result.cells.to_csv(staging / "calibration.csv", index=False)
        if len(result.calibrated):
            calibration_plot(result, staging / "calibration.png")

    write_run(out, write, command="calibrate", adds_to_run=_same(out, path))
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    elif args.format == "csv":
        sys.stdout.write(result.cells.to_csv(index=False))
    else:
        print(_calibration_text(result))
        print(f"\nwrote to {out}: calibration.csv, calibration.png")
    return 0


def _calibration_text(result) -> str:
    cells = result.cells.copy()
    cells["pit"] = cells["pit"].map(format_number)
    cells["upper"] = cells["upper"].map(format_number)
    cells["truth_rate"] = cells["truth_rate"].map(format_number)
    columns = ["agent", "task", "truth_successes", "truth_trials", "truth_rate", "upper"]
    table = cells[[*columns, "exceeded", "pit"]].to_string(index=False)
    over = result.exceedance()
    lines = [f"model {result.model}, one-sided level {result.level:g}\n", table, ""]
    if over["cells"]:
        lines.append(
            f"exceeded: {over['exceeded']} of {over['cells']} cells have a ground-truth rate "
            f"above the upper bound ({over['rate']:.3f}, 95% interval {over['rate_lower']:.3f}"
            f"-{over['rate_upper']:.3f}); expected if calibrated, given the ground truth's own "
            f"noise: {over['expected_if_calibrated']:.1f} (nominal {over['nominal']:g} of cells "
            "only with noiseless ground truth)"
        )
        for row in result.coverage().itertuples():
            lines.append(
                f"coverage of central {row.nominal:g} predictive intervals: {row.covered} of "
                f"{row.cells} ({row.rate:.3f}, 95% interval {row.rate_lower:.3f}-"
                f"{row.rate_upper:.3f})"
            )
        lines.append(
            f"PIT uniformity (Kolmogorov-Smirnov): p = {result.pit_p_value():.3g}; "
            f"mean log score {result.calibrated['log_score'].mean():.3f}"
        )
    missing = result.cells[result.cells["note"] != ""]
    lines += [f"not calibrated: {r.task} ({r.agent}): {r.note}" for r in missing.itertuples()]
    return "\n".join(lines)


def _published_table(result, fmt: str) -> str:
    rows = []
    for method, truths in result["correlations"].items():
        for truth, values in truths.items():
            rows.append(dict(method=method, ground_truth=truth, **values))
    frame = pd.DataFrame(rows)
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip()
    lines = [
        f"{truth}: {result[truth]['exceeded']} of {result[truth]['tasks']} tasks above the "
        f"milestone 97.5% quantile ({', '.join(result[truth]['exceeded_tasks']) or 'none'})"
        for truth in ("end_to_end", "end_grading_only")
    ]
    return "\n".join([*lines, "", frame.to_string(index=False, float_format="%.3f")])


def _fraction(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{option}: '{text}' is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise InputError(f"{option}: {text} must lie in [0, 1]")
    return value


def _simulate(args) -> int:
    from bayes_eval.checks.simulate import paths_study, variance_sweep
    from bayes_eval.outputs import plots
    from bayes_eval.specs import check_probability

    seed = _whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    sweep = _sweep_options(args)
    out = None if args.out is None else check_out(Path(args.out))
    if args.study == "variance":
        rate = check_probability(args.rate, "--end-to-end-rate")
        milestones = [_whole(m, "--milestones", 1) for m in args.milestones]
        trials = [_whole(n, "--trials", 1) for n in args.trials]
        replications = _whole(args.replications, "--replications", 2)
        draws = replications * (1 + max(milestones)) * len(trials)
        if draws > SIMULATE_MAX_DRAWS:
            raise InputError(
                f"--replications {replications} with up to {max(milestones)} milestones and "
                f"{len(trials)} trial count(s) makes {draws:.2e} binomial draws, more than "
                f"{SIMULATE_MAX_DRAWS:.0e} (about ten minutes); use fewer"
            )
        results = variance_sweep(
            milestones, rate, trials, replications=replications, seed=seed, **sweep
        )
        name, plot = "variance", plots.variance_plot
    else:
        results = paths_study(
            violation=args.violation,
            strengths=[_fraction(s, "--strengths") for s in args.strengths],
            models=args.models,
            tasks=_whole(args.tasks, "--tasks", 2, PATHS_MAX_TASKS),
            milestones=_whole(args.milestones, "--milestones", 1, PATHS_MAX_MILESTONES),
            trials=_whole(args.trials, "--trials", 1),
            end_to_end_share=_fraction(args.share, "--end-to-end-share"),
            end_to_end_trials=_whole(args.e2e_trials, "--end-to-end-trials", 1),
            truth_trials=_whole(args.truth_trials, "--truth-trials", 1, CALIBRATION_MAX_TRIALS),
            seed=seed,
            **sweep,
        )
        name, plot = "paths", plots.paths_plot
    if out is not None:

        def write(staging: Path) -> None:
            results.to_csv(staging / f"{name}.csv", index=False)
            plot(results, staging / f"{name}.png")

        write_run(out, write, command="simulate")
    if args.format == "json":
        records = [{k: _json_value(v) for k, v in r.items()} for r in results.to_dict("records")]
        print(json.dumps(records[0] if len(records) == 1 else records, indent=2))
    elif args.format == "csv":
        sys.stdout.write(results.to_csv(index=False))
    else:
        print(results.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        if out is not None:
            print(f"\nwrote to {out}: {name}.csv, {name}.png")
    return 0


def _json_value(value):
    if pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _terminal_table(frame: pd.DataFrame, digits=format_number) -> str:
    """``frame`` as a rich table fitted to the terminal's width (``COLUMNS``, else 120),
    or to the narrowest it can fold to, whichever is wider: numbers formatted by
    ``digits``, whole and right-aligned, so their figures line up; names fold; no colour
    unless stdout is a terminal."""
    import io
    import shutil

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and frame[c].dtype != bool for c in frame]
    cells = [
        [digits(v) if right else _cell(v) for v in frame[column]]
        for column, right in zip(frame.columns, numeric, strict=True)
    ]
    for column, right, values in zip(frame.columns, numeric, cells, strict=True):
        # numbers and short words keep their width; names fold where the terminal is too
        # narrow for them
        longest = max(*map(len, values), 1)
        whole = right or longest <= 8
        table.add_column(
            str(column),
            justify="right" if right else "left",
            overflow="fold",
            no_wrap=whole,
            min_width=max(longest, len(str(column))) if whole else 8,
        )
    for row in zip(*cells, strict=True):
        table.add_row(*map(Text, row))  # Text: "[agent-a]" is a name, not rich markup
    out = io.StringIO()
    tty = sys.stdout.isatty()
    console = Console(
        file=out,
        width=shutil.get_terminal_size((120, 24)).columns,
        color_system="auto" if tty else None,
        force_terminal=tty,
        highlight=False,
    )
    # narrower than the table can fold to, it is printed at that width: nothing is cut
    # (each column's least width, and three characters between columns)
    narrowest = sum(c.min_width for c in table.columns) + 3 * (len(table.columns) - 1)
    console.width = max(console.width, narrowest)
    console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "-"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _table(summary, posterior, threshold) -> str:
    level = summary["level"].iloc[0] if len(summary) else posterior.level
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
    text = [_terminal_table(frame)]
    header = (
        f"model {posterior.spec.name} on {posterior.evidence.source} "
        f"(one-sided bounds at level {level:g})"
    )
    shared: dict[str, list[str]] = {}  # identical provenance is printed once
    for r in summary.to_dict("records"):
        shared.setdefault(r["provenance"], []).append(f"{r['task']} ({r['agent']})")
    notes = []
    for provenance, names in shared.items():
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        notes.append(f"  {shown}: {provenance}")
    return "\n".join([header, "", *text, "", "provenance:", *notes])


def _report(args) -> int:
    from bayes_eval.outputs.report import build_report, load_or_fit
    from bayes_eval.specs import check_level, check_probability

    threshold = check_probability(args.threshold, "--threshold")
    level = None if args.level is None else check_level(args.level, "--level")
    seed = _whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    out = check_out(Path(args.out))
    source, notes = Path(args.source), []
    if not ((source / "posterior.nc").is_file() or source.suffix == ".nc"):
        source = _evidence(source, args, notes)
    else:
        options = ("keep_columns", "sum_duplicates", "input_format", "cluster", *INSPECT_OPTIONS)
        given = next((o for o in options if getattr(args, o) not in (None, False)), None)
        if given is not None:
            flag = "--from" if given == "input_format" else f"--{given.replace('_', '-')}"
            raise InputError(f"{flag}: applies to evidence to fit, not to a fitted run")
    posterior = load_or_fit(source, model=args.model, level=level, seed=seed, log=_progress(args))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    result = build_report(posterior, threshold, level, allow_extrapolated=args.allow_extrapolated)
    written = write_run(
        out, result.write, command="report", adds_to_run=_same(out, Path(args.source))
    )
    print(_report_summary(result.table, threshold))
    print(f"wrote to {out}: {', '.join(written)}")
    return 0


def _report_summary(table, threshold: float) -> str:
    """The report on the terminal: the verdict line (``report.verdict_line``) and, per
    agent, its worst task."""
    from bayes_eval.outputs.report import rollup, verdict_line

    lines = [f"verdicts: {verdict_line(table, threshold)}"]
    for row in rollup(table).to_dict("records"):
        if row["worst task"]:  # where the agent has a bound
            lines.append(
                f"  {row['agent']}: worst task {row['worst task']} "
                f"(at most {row['its upper bound']})"
            )
    return "\n".join(lines)


def _plan(args) -> int:
    from bayes_eval import plan
    from bayes_eval.specs import check_level, check_probability

    threshold = check_probability(args.threshold, "--threshold")
    level = DEFAULT_LEVEL if args.level is None else check_level(args.level, "--level")
    prior = plan.parse_prior(args.prior)
    seed = _whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    if args.run_dir is not None:
        result = _next_run(args, threshold, level, seed)
    elif args.milestone_rates is not None:
        rates = [check_probability(r, "--milestone-rates") for r in args.milestone_rates]
        power = check_probability(args.power, "--power")
        result = plan.milestone_trials(rates, threshold, level, prior, power=power, seed=seed)
    else:
        trials = plan.zero_success_trials(threshold, level, prior)
        result = {"threshold": threshold, "level": level, "prior": list(prior), "trials": trials}
        if trials > PLAN_PRACTICAL_TRIALS:
            result["note"] = (
                f"{_plain(trials)} end-to-end trials, all failures, is impractical. The milestone "
                "route certifies the product of milestone rates with far fewer: bayes-eval "
                f"plan --threshold {threshold:g} --milestone-rates R1 R2 ... gives the trials "
                "per milestone for hypothesised rates; expert-guided steps (model ecr2024) are "
                "the other route"
            )
        if args.rate is not None:
            rate = _fraction(args.rate, "--rate")
            result["rate"] = rate
            if trials > PLAN_MAX_TRIALS:
                result["rate_note"] = (
                    f"the stopping time at --rate is computed up to {PLAN_MAX_TRIALS:,} "
                    f"trials, and certifying takes at least {_plain(trials)} here"
                )
            else:
                result.update(plan.expected_trials(rate, threshold, level, prior))
    if isinstance(result, pd.DataFrame):
        if args.format == "json":
            print(json.dumps(result.to_dict("records"), indent=2))
        elif args.format == "csv":
            sys.stdout.write(result.to_csv(index=False))
        else:
            print(_terminal_table(result))
            best = result.iloc[0]
            if "certified" in result and result["certified"].iloc[0]:
                print(
                    f"\nalready certified: the upper bound {format_number(best['current_upper'])}"
                    f" is below {args.threshold}; more runs would only narrow it"
                )
            else:
                print(f"\nrun next: {best['run']}, {best['trials']} trials")
        return 0
    if args.format == "json":
        print(json.dumps(result, indent=2))
    elif args.format == "csv":
        sys.stdout.write(pd.DataFrame([result]).to_csv(index=False))
    else:
        print("\n".join(f"{key}: {_plain(value)}" for key, value in result.items()))
    return 0


def _plain(value) -> str:
    """A plan's value for reading: numbers to four figures, or from 1,000 on whole with
    thousands separators; lists item by item."""
    if isinstance(value, list | tuple):
        return ", ".join(map(_plain, value))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) and value >= 2**53:  # past a double's whole numbers
        return f"about {Decimal(value):.3e}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return format_number(value)


def _next_run(args, threshold, level, seed):
    from bayes_eval import plan
    from bayes_eval.results.posterior import load_posterior

    if args.task is None:
        raise InputError("plan: RUN_DIR needs --task (the task to plan the next run for)")
    posterior = load_posterior(args.run_dir)
    costs = None if args.cost is None else [_positive(c, "--cost") for c in args.cost]
    return plan.next_run(
        posterior,
        args.task,
        agent=args.agent,
        costs=costs,
        end_to_end_cost=_positive(args.e2e_cost, "--end-to-end-cost"),
        batches=[_whole(b, "--batch", 1) for b in args.batch],
        threshold=threshold,
        level=level,
        seed=seed,
    )


def _positive(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{option}: '{text}' is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise InputError(f"{option}: {text} must be a positive number")
    return value


def _horizon(args) -> int:
    from bayes_eval.crossed.horizon import horizons
    from bayes_eval.outputs.plots import horizon_plot
    from bayes_eval.results.posterior import load_posterior
    from bayes_eval.specs import check_probability

    interval = check_probability(args.interval, "--interval")
    path = Path(args.run_dir)
    posterior = load_posterior(path)
    result = horizons(posterior, interval=interval, forecast=args.forecast)
    out = check_out(Path(args.out) if args.out else path if path.is_dir() else path.parent)

    def write(staging: Path) -> None:
        result.agents.to_csv(staging / "horizons.csv", index=False)
        if len(result.forecasts):
            result.forecasts.to_csv(staging / "forecasts.csv", index=False)
        horizon_plot(result, staging / "horizons.png")

    write_run(out, write, command="horizon", adds_to_run=_same(out, path))
    if args.format == "csv":
        sys.stdout.write(result.agents.to_csv(index=False))
    elif args.format == "json":
        print(json.dumps(result.to_dict(), indent=2, default=_json_value))
    else:
        print(_horizon_text(result))
        print(f"\nwrote to {out}: horizons.csv, horizons.png")
    return 0


def _horizon_text(result) -> str:
    """The horizons, trend and forecasts for people."""
    unit = result.unit
    inside = f"{result.interval:.0%} interval"
    frame = result.agents.copy()
    for q in ("h50", "h80"):
        frame[q] = [
            f"{_length(m)} ({_length(lo)} to {_length(hi)})"
            for m, lo, hi in zip(frame[q], frame[q + "_lower"], frame[q + "_upper"], strict=True)
        ]
    shown = {"agent": "agent"}
    if result.date_column:
        frame[result.date_column] = frame[result.date_column].map(lambda y: f"{y:.2f}")
        shown[result.date_column] = result.date_column
    shown.update(
        {"successes": "successes", "runs": "runs", "h50": "50% horizon", "h80": "80% horizon"}
    )
    frame["agent"] = [
        f"{a} (predicted)" if p else a
        for a, p in zip(frame["agent"], frame["predicted"], strict=True)
    ]
    lines = [
        f"time horizons in {unit}: the task length at which predicted success is 50% (80%), "
        f"median ({inside})",
        "",
        _terminal_table(frame[list(shown)].rename(columns=shown), digits=str),
    ]
    if result.trend is not None:
        row = result.trend.iloc[0]
        lines += [
            "",
            f"trend: the 50% horizon doubles every {row['median']:.3g} months "
            f"({row['lower']:.3g} to {row['upper']:.3g}, {inside})",
        ]
    for row in result.forecasts.to_dict("records"):
        lines.append(
            f"  forecast {row['date']}, {row['what']}: {_length(row['h50'])} "
            f"({_length(row['h50_lower'])} to {_length(row['h50_upper'])})"
        )
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def _length(value: float) -> str:
    return "inf" if not math.isfinite(value) else f"{value:.3g}"


COMMANDS = {
    "horizon": _horizon,
    "fit": _fit,
    "example": _example,
    "check": _check,
    "calibrate": _calibrate,
    "simulate": _simulate,
    "report": _report,
    "plan": _plan,
}


if __name__ == "__main__":
    sys.exit(main())
