"""The command line's shared options: how evidence is read, sweeps, numbers checked as
flags, and the parser whose usage errors are one line.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from bayes_eval.constants import INT64_MAX, MCMC_ENGINES, REAL_TEXT
from bayes_eval.errors import InputError
from bayes_eval.evidence.formats import INPUT_FORMATS, INSPECT_OPTIONS, detect_format
from bayes_eval.resources import shipped_dir

# A whole number given as an option: ASCII digits with an optional sign ("1_0" and
# full-width digits, which Python's int accepts, are refused).
INTEGER_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)


class Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one ``error:`` line and exit status 2."""

    def error(self, message):
        raise InputError(f"{self.prog}: {message}")


QUIET_HELP = "no progress on stderr (shown only when stderr is a terminal anyway)"
SENSITIVITY_HELP = (
    "each bound under the prior family (the spec's, uniform, Jeffreys, sceptical, "
    "permissive); with --threshold, the verdicts it flips"
)


FORMATS = ("table", "csv", "json")
FORMAT_HELP = "table (to read), csv or json (default: table)"


# --workers: worker processes of a local dask cluster (each one process of this machine).
MAX_WORKERS = 256


def model_help() -> str:
    """``--model``'s help: every shipped model by name, or a spec file."""
    shipped = sorted(path.stem for path in shipped_dir("models").glob("*.toml"))
    return f"shipped spec name ({', '.join(shipped)}) or spec path (default: phuong_chain)"


def reading_options(command) -> None:
    """How evidence is read: its format, clusters, kept columns, summed batches, and the
    mapping of Inspect logs."""
    reading = command.add_argument_group("reading (docs/reading.md)")
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
    log_options(inspect)
    inspect.add_argument(
        "--milestones", help="KEY1,KEY2,...: a dict-valued score's milestone keys, in order"
    )
    inspect.add_argument(
        "--audit-scorer",
        dest="audit_scorer",
        help="a trusted scorer (a human re-score): the runs it scored audit --scorer",
    )
    command.add_argument(
        "--audit",
        metavar="AUDIT.csv",
        help="the audit of the grader that scored the runs (grader, truth, graded): its "
        "misses and false alarms widen every bound (docs/grader.md)",
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


def log_options(group) -> None:
    """How Inspect logs map to runs: the scorer, its threshold, the agent and the task."""
    group.add_argument(
        "--scorer",
        help="the scorer whose score is success (default: the only); NAME1,NAME2,...: each "
        "log's one of these (logs of several tasks)",
    )
    group.add_argument(
        "--success-threshold",
        dest="success_threshold",
        help="numeric scores: success is score >= this",
    )
    group.add_argument(
        "--agent-from", dest="agent_from", help="model (default), solver or metadata:KEY"
    )
    group.add_argument(
        "--task-from", dest="task_from", help="sample (default: TASK/ID), task or metadata:KEY"
    )


def mcmc_options(command) -> None:
    """The MCMC settings that override a pooled spec's ``[sampler]``."""
    mcmc = command.add_argument_group("MCMC settings (pooled models only; default: the spec's)")
    mcmc.add_argument(
        "--engine",
        choices=MCMC_ENGINES,
        help="nutpie, pymc, numpyro (JAX; the jax extra) or auto (says why it chose)",
    )
    mcmc.add_argument("--draws", help="draws per chain")
    mcmc.add_argument("--tune", help="tuning steps per chain")
    mcmc.add_argument("--chains", help="number of chains")
    mcmc.add_argument("--thin", help="keep one draw in this many (1 keeps every draw)")
    mcmc.add_argument("--target-accept", dest="target_accept", help="NUTS target acceptance")


def crossed_options(command) -> None:
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


def evidence_of(paths, args):
    """The evidence in ``paths`` (one table or run file, or Inspect logs), read as the
    command line's options say (``bayes_eval.pipeline.read_evidence``)."""
    from bayes_eval.pipeline import read_evidence

    paths = [paths] if isinstance(paths, str | Path) else paths
    given = getattr(args, "input_format", None)
    named = getattr(args, "format", None)
    if named in INPUT_FORMATS:  # an input format given as --format
        if given is not None and given != named:
            raise InputError(f"--format {named} and --from {given}: give the input format once")
        given, args.format = named, "table"
    inspect = {option: getattr(args, option) for option in INSPECT_OPTIONS}
    if detect_format(paths, given) == "inspect":
        if inspect["success_threshold"] is not None:
            inspect["success_threshold"] = real(args.success_threshold, "--success-threshold")
        for option in ("scorer", "milestones"):
            if inspect[option] is not None:
                inspect[option] = names_of(inspect[option], f"--{option}")
    evidence = read_evidence(
        paths,
        input_format=given,
        keep_columns=args.keep_columns,
        sum_duplicates=args.sum_duplicates,
        cluster=args.cluster,
        **inspect,
    )
    if getattr(args, "audit", None) is None:
        return evidence
    from bayes_eval.evidence.audit import with_audit

    return with_audit(evidence, args.audit)


# The library's parameters that its errors name, as the command line's flags (``main``
# translates the head of an error's message).
FLAGS = {
    "input_format": "--from",
    "keep_columns": "--keep-columns",
    "audit": "--audit",
    "sum_duplicates": "--sum-duplicates",
    "cluster": "--cluster",
    "scorer": "--scorer",
    "success_threshold": "--success-threshold",
    "milestones": "--milestones",
    "agent_from": "--agent-from",
    "task_from": "--task-from",
    "audit_scorer": "--audit-scorer",
    "model": "--model",
    "fits": "--models",
    "threshold": "--threshold",
    "thresholds": "--threshold",
    "fit_per_agent": "--by agent",
    "engine": "--engine",
    "draws": "--draws",
    "tune": "--tune",
    "chains": "--chains",
    "thin": "--thin",
    "target_accept": "--target-accept",
    "agents": "--agents",
    "tasks": "--tasks",
    "predict": "--predict-agent",
    "forecast": "--forecast",
    "violation": "--violation",
    "models": "--models",
    "folds": "--folds",
    "workers": "--workers",
    "scheduler": "--scheduler",
    "out": "--out",
    "prior": "--prior",
    "rates": "--milestone-rates",
    "costs": "--cost",
    "agent": "--agent",
    "task": "--task",
    "margin": "--margin",
}
# A parameter named in the body of a message.
PARAMETER = re.compile(r"`([a-z_]+)`")
# The parameters whose errors name the value given after them (``forecast next year``).
VALUED = ("predict", "forecast")


def as_flags(message: str) -> str:
    """An error's message with the library parameters it names read as their flags.

    The head is the text before the first ``": "``: a parameter (``out``), parameters
    joined by ``/`` or ``and`` (``workers and scheduler``), or a parameter and the value
    it was given (``predict NAME``, for the parameters in ``VALUED``); any other head is
    left as it is. In the rest, a parameter in backquotes (```scorer```) is its flag.
    """
    message = PARAMETER.sub(lambda found: FLAGS.get(found[1], found[0]), message)
    head, colon, rest = message.partition(": ")
    words = head.split(" ")
    names = words[0].split("/")
    if not colon or not all(name in FLAGS for name in names):
        return message
    if len(words) == 3 and words[1] == "and" and words[2] in FLAGS:
        words[2] = FLAGS[words[2]]
    elif len(words) > 1 and words[0] not in VALUED:
        return message
    words[0] = "/".join(FLAGS[name] for name in names)
    return " ".join(words) + colon + rest


def sweep_arguments(parser, when: str = "") -> None:
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


def sweep_options(args) -> dict:
    """``workers`` and ``scheduler`` for ``bayes_eval.inference.sweep.run_sweep``, checked."""
    workers = None if args.workers is None else whole(args.workers, "--workers", 1, MAX_WORKERS)
    return dict(workers=workers, scheduler=args.scheduler)


def names_of(text: str, option: str) -> list[str]:
    """A comma-separated list of names (``--scorer``, ``--milestones``), none empty."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise InputError(f"{option}: '{text}' has an empty name")
    return names


def real(text: str, option: str) -> float:
    """A finite decimal number."""
    if not REAL_TEXT.fullmatch(text.strip()):
        raise InputError(f"{option}: '{text}' is not a decimal number")
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"{option}: {text} is not a finite number")
    return value


def whole(text: str | None, option: str, minimum: int, maximum: int = INT64_MAX) -> int | None:
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


def sampler_of(args) -> dict:
    """The MCMC overrides given on the command line, checked before any work by
    ``SamplerSettings`` (whose errors ``main`` reads as these flags)."""
    from bayes_eval.settings import SamplerSettings

    out = {
        "engine": args.engine,
        "draws": whole(args.draws, "--draws", 0),
        "tune": whole(args.tune, "--tune", 0),
        "chains": whole(args.chains, "--chains", 0),
        "thin": whole(args.thin, "--thin", 0),
    }
    if args.target_accept is not None:
        out["target_accept"] = real(args.target_accept, "--target-accept")
    out = {key: value for key, value in out.items() if value is not None}
    SamplerSettings().updated(out)
    return out


def fraction(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{option}: '{text}' is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise InputError(f"{option}: {text} must lie in [0, 1]")
    return value


def positive(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{option}: '{text}' is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise InputError(f"{option}: {text} must be a positive number")
    return value


def same_folder(out: Path, source: Path) -> bool:
    """Whether ``out`` is the run folder that ``source`` (the folder or a file in it) was
    read from, whose files are then kept."""
    folder = source if source.is_dir() else source.parent
    return out.is_dir() and out.resolve() == folder.resolve()


def attempts_of(text: str) -> tuple[int, ...]:
    """``--attempts K[,K...]``: the numbers of attempts, each 1 to 1e9."""
    from bayes_eval.results.attempts import parse_attempts

    try:
        return parse_attempts(text)
    except InputError as exc:  # "attempts: ..." names the flag
        raise InputError(f"--{exc}") from None
