"""``bayes-eval fit``: validate, fit and summarise evidence; with ``--out``, a run folder
(``bayes_eval.run``); with ``--by agent``, a fit per agent.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bayes_eval.cli.options import (
    FORMATS,
    INPUT_FORMATS,
    QUIET_HELP,
    SENSITIVITY_HELP,
    attempts_of,
    crossed_options,
    evidence_of,
    mcmc_options,
    model_help,
    reading_options,
    sampler_of,
    sweep_arguments,
    sweep_options,
    whole,
)
from bayes_eval.cli.terminal import (
    attempts_table,
    check_text,
    population_table,
    print_summary,
    sensitivity_text,
    show,
    summary_table,
    verdict_text,
    verdicts_text,
)
from bayes_eval.constants import SAMPLER_LIMITS
from bayes_eval.errors import InputError
from bayes_eval.outputs.drawing import Figures
from bayes_eval.outputs.runfolder import check_out, write_run


def arguments(commands) -> None:
    """The command's flags."""
    fit = commands.add_parser("fit", help="validate, fit and summarise an evidence table")
    evidence = "evidence table (CSV or Parquet), run file, or Inspect logs and folders of them"
    fit.add_argument("evidence", nargs="+", help=evidence)
    fit.add_argument("--model", default="phuong_chain", help=model_help())
    fit.add_argument("--level", help="one-sided credible level (default: the spec's)")
    fit.add_argument("--threshold", help="report P(P > TAU) for this TAU")
    fit.add_argument(
        "--attempts",
        metavar="K[,K...]",
        help="pass@k and pass^k over K attempts (1 to 1e9); with --format csv or json "
        "these rows are printed instead of the summary (which --out keeps)",
    )
    fit.add_argument("--seed", help="seed of the posterior draws (default: the spec's)")
    fit.add_argument("--sensitivity", action="store_true", help=SENSITIVITY_HELP)
    fit.add_argument("--out", help="folder for posterior.nc and summary.csv")
    fit.add_argument(
        "--format",
        default="table",
        choices=FORMATS + INPUT_FORMATS[1:],
        help="output: table, csv or json; an input format (metr-jsonl, ...) = --from it",
    )
    reading_options(fit)
    crossed_options(fit)
    by = "fit each agent (or checkpoint) on its own rows: one run folder each in --out"
    fit.add_argument("--by", choices=["agent"], help=by)
    sweep_arguments(fit, "with --by agent")
    mcmc_options(fit)
    fit.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    fit.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    out = None if args.out is None else check_out(Path(args.out))
    with Figures(processes=None if out is not None and args.by is None else 0) as figures:
        return _fit(args, out, figures)  # the figures' process starts before the imports


def _fit(args, out, figures) -> int:
    from bayes_eval import pipeline
    from bayes_eval.pipeline import Question
    from bayes_eval.specs import check_level, check_probability

    level = None if args.level is None else check_level(args.level, "--level")
    threshold = None if args.threshold is None else check_probability(args.threshold, "--threshold")
    attempts = None if args.attempts is None else attempts_of(args.attempts)
    seed = whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    sampler = sampler_of(args)
    sweep = sweep_options(args)
    if args.by is not None:
        question = Question(threshold, attempts=attempts, sensitivity=args.sensitivity)
        options = dict(level=level, seed=seed, sampler=sampler, **sweep)
        return _fit_per_agent(args, options, question, out)
    if sweep["workers"] is not None or sweep["scheduler"] is not None:
        option = "--workers" if sweep["workers"] is not None else "--scheduler"
        raise InputError(f"{option}: applies to sweeps; one fit runs here (add --by agent)")
    done = pipeline.run(
        evidence_of(args.evidence, args),
        args.model,
        out=out,
        threshold=threshold,
        level=level,
        seed=seed,
        sampler=sampler,
        agents=args.agents,
        tasks=args.tasks,
        predict=args.predict_agent,
        attempts=attempts,
        sensitivity=args.sensitivity,
        figures=figures,
    )
    posterior, summary, checks, written = done.posterior, done.summary, done.checks, done.written
    lines = check_text(checks.predictive, checks.assumption)
    verdict = verdict_text(posterior, lines, checks.failed)
    if done.sensitivity is not None:  # before the checks, on stderr too with csv or json
        verdict = "\n\n".join(filter(None, (sensitivity_text(done.sensitivity), verdict)))
    if verdict and args.format != "table":
        show(verdict, file=sys.stderr)
    if args.format != "table":
        print_summary(summary if done.attempts is None else done.attempts, args.format)
    else:
        show(summary_table(summary, posterior, threshold))
        if threshold is not None:
            show(f"\n{verdicts_text(summary, checks, threshold, posterior.diagnostics)}")
        if done.attempts is not None:
            show(f"\n{attempts_table(done.attempts, threshold)}")
            if len(done.population):
                show(f"\n{population_table(done.population)}")
        if verdict:
            show(f"\n{verdict}")
        if out is not None:
            show(f"\nwrote to {out}: {', '.join(written)}")
    return 0


def _fit_per_agent(args, options: dict, question, out) -> int:
    """``fit --by agent``: a fit per agent (``options``: ``fit_per_agent``'s level, seed,
    sampler and sweep), each concluded to answer ``question`` (``pipeline.Question``) and
    written to its own run folder in ``out`` as it finishes (``agents.csv`` says which
    folder is whose), and printed together."""
    import pandas as pd

    from bayes_eval.fit import fit_per_agent
    from bayes_eval.outputs.runfolder import folder_names
    from bayes_eval.pipeline import conclude

    given = [name for name in ("agents", "tasks") if getattr(args, name) is not None]
    if given or args.predict_agent:
        option = f"--{given[0]}" if given else "--predict-agent"
        raise InputError(
            f"{option}: covariates and predictions belong to crossed models, which fit "
            "agents together; --by agent fits each alone"
        )
    evidence = evidence_of(args.evidence, args)
    agents = list(dict.fromkeys(evidence.table["agent"]))
    folders = dict(zip(agents, folder_names(agents), strict=True))
    concluded, verdicts = {}, {}

    def keep(agent, posterior):
        if out is not None and not concluded:  # every agent's rows passed their checks
            index = pd.DataFrame(dict(agent=agents, folder=[folders[a] for a in agents]))
            write_run(
                out,
                lambda staging: index.to_csv(staging / "agents.csv", index=False),
                command="fit --by agent",
            )
        folder = None if out is None else out / folders[agent]
        done = concluded[agent] = conclude(posterior, question, out=folder)
        lines = check_text(done.checks.predictive, done.checks.assumption)
        verdicts[agent] = verdict_text(posterior, lines, done.checks.failed)

    fit_per_agent(evidence, args.model, on_fit=keep, **options)
    threshold, attempts = question.threshold, question.attempts
    if args.format != "table":
        for agent in concluded:
            if verdicts[agent]:
                show(f"agent '{agent}': {verdicts[agent]}", file=sys.stderr)
        shown = [
            concluded[agent].summary if attempts is None else concluded[agent].attempts
            for agent in agents
        ]  # the summaries, or the attempts tables
        print_summary(pd.concat(shown, ignore_index=True), args.format)
    else:
        blocks = []
        for agent in agents:
            done = concluded[agent]
            block = summary_table(done.summary, done.posterior, threshold)
            if attempts is not None:
                block += f"\n\n{attempts_table(done.attempts, threshold)}"
            blocks.append(block + (f"\n\n{verdicts[agent]}" if verdicts[agent] else ""))
        show("\n\n".join(blocks))
        if out is not None:
            show(f"\nwrote to {out}: agents.csv and a run folder per agent ({len(agents)})")
    return 0
