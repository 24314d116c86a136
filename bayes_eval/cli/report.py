"""``bayes-eval report``: the safety report of evidence or of a fit's run folder
(``bayes_eval.report``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bayes_eval.cli.options import (
    INSPECT_OPTIONS,
    QUIET_HELP,
    SENSITIVITY_HELP,
    attempts_of,
    evidence_of,
    reading_options,
    same_folder,
    whole,
)
from bayes_eval.cli.terminal import show
from bayes_eval.constants import BASIS_MODEL, REPORT_BASES, SAMPLER_LIMITS
from bayes_eval.errors import InputError
from bayes_eval.outputs.runfolder import check_out, holds_fit, write_run


def arguments(commands) -> None:
    """The command's flags."""
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
    report.add_argument(
        "--basis",
        choices=REPORT_BASES,
        default=BASIS_MODEL,
        help="what may say below: the model's bounds (default), or only each pair's own "
        "runs (the others undecided, with the runs that would decide them)",
    )
    report.add_argument(
        "--compare",
        nargs="+",
        default=[],
        metavar="MODEL",
        help="models to fit to the same evidence and rank beside the report's model",
    )
    report.add_argument(
        "--attempts",
        metavar="K[,K...]",
        help="tabulate pass@k at these numbers of attempts (1 to 1e9), across tasks and per pair",
    )
    report.add_argument(
        "--sensitivity",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"{SENSITIVITY_HELP} (on by default)",
    )
    report.add_argument(
        "--backtest",
        metavar="DIR",
        help="a folder written by bayes-eval backtest --out: beside each new agent's "
        "forecast, how the model's forecasts held",
    )
    reading_options(report)
    report.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    report.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    from bayes_eval.pipeline import report
    from bayes_eval.specs import check_level, check_probability, load_spec

    threshold = check_probability(args.threshold, "--threshold")
    level = None if args.level is None else check_level(args.level, "--level")
    seed = whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    attempts = None if args.attempts is None else attempts_of(args.attempts)
    for model in args.compare:  # before any fit
        try:
            load_spec(model)
        except InputError as exc:
            raise InputError(f"--compare: {exc}") from None
    out = check_out(Path(args.out))
    source = Path(args.source)
    if not holds_fit(source):
        source = evidence_of(source, args)
    else:
        options = ("keep_columns", "sum_duplicates", "input_format", "cluster", *INSPECT_OPTIONS)
        given = next((o for o in options if getattr(args, o) not in (None, False)), None)
        if given is not None:  # main reads the parameter as its flag (options.as_flags)
            raise InputError(f"{given}: applies to evidence to fit, not to a fitted run")
    result = report(
        source,
        threshold,
        model=args.model,
        level=level,
        seed=seed,
        allow_extrapolated=args.allow_extrapolated,
        compare=args.compare,
        attempts=attempts,
        sensitivity=args.sensitivity,
        basis=args.basis,
        backtest=args.backtest,
    )
    written = write_run(
        out, result.write, command="report", adds_to_run=same_folder(out, Path(args.source))
    )
    show(_report_summary(result.table, threshold))
    show(f"wrote to {out}: {', '.join(written)}")
    return 0


def _report_summary(table, threshold: float) -> str:
    """The report on the terminal: the verdict line (``report.verdict_line``) and, per
    agent, its verdicts and the pairs nearest the threshold (``verdicts.rollup``)."""
    from bayes_eval.outputs.verdicts import VERDICTS, rollup, verdict_line

    lines = [f"verdicts: {verdict_line(table, threshold)}"]
    for row in rollup(table, threshold).to_dict("records"):
        counts = ", ".join(f"{row[v]} {v.split()[0]}" for v in VERDICTS)
        nearest = "; ".join(f"{k}: {v}" for k, v in row.items() if k.startswith("nearest"))
        lines.append(f"  {row['agent']}: {counts}; {nearest}")
    return "\n".join(lines)
