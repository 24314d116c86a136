"""``bayes-eval compare-agents RUN_DIR A B``: is agent B more capable than agent A, per task
and across tasks, within one fit (``bayes_eval.compare_agents``); ``bayes-eval
compare-agents LOG_A LOG_B``: the same of two agents' Inspect logs, paired sample by sample
(``bayes_eval.read_paired_inspect``) and fitted first."""

from __future__ import annotations

import sys
from pathlib import Path

from bayes_eval.cli.options import FORMAT_HELP, FORMATS, log_options, names_of, real
from bayes_eval.cli.terminal import print_summary, show, terminal_table
from bayes_eval.errors import InputError
from bayes_eval.specs import check_level


def arguments(commands) -> None:
    """The command's flags."""
    agents = commands.add_parser(
        "compare-agents",
        help="is agent B more capable than agent A? P(P_B > P_A), the difference and the "
        "ratio per task and across tasks, from one fit's --out folder or two agents' "
        "Inspect logs",
    )
    agents.add_argument(
        "inputs",
        nargs="+",
        metavar="RUN_DIR A B | LOG_A LOG_B",
        help="a folder written by bayes-eval fit --out and agents A (compared against) and B "
        "in it; or A's Inspect logs and B's (files or folders), paired by sample",
    )
    agents.add_argument(
        "--margin",
        help="a verdict per task: B more capable than A by more than M, not, or undecided",
    )
    agents.add_argument("--level", help="one-sided credible level (default: the fit's)")
    logs = agents.add_argument_group(
        "LOG_A LOG_B: Inspect logs (pip install 'bayes_eval[inspect]')"
    )
    logs.add_argument(
        "--model", help="the model fitted to both agents' runs (default: end_to_end, exact)"
    )
    log_options(logs)
    agents.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    agents.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    from bayes_eval.checks.agents import compare_agents
    from bayes_eval.fit import load_posterior

    level = None if args.level is None else check_level(args.level, "--level")
    margin = None if args.margin is None else real(args.margin, "--margin")
    logs = {name: getattr(args, name) for name in LOG_OPTIONS}
    if len(args.inputs) == 3:
        given = next((f"--{k.replace('_', '-')}" for k, v in logs.items() if v is not None), None)
        if given is not None:
            raise InputError(f"{given}: applies to two agents' logs (LOG_A LOG_B), not to a fit")
        run_dir, a, b = args.inputs
        posterior, pairing = load_posterior(Path(run_dir)), None
    elif len(args.inputs) == 2:
        posterior, a, b, pairing = _fit_logs(*args.inputs, logs, level)
    else:
        raise InputError(
            f"compare-agents: {len(args.inputs)} inputs; give RUN_DIR A B (a fit and two of "
            "its agents) or LOG_A LOG_B (two agents' Inspect logs)"
        )
    result = compare_agents(posterior, a, b, level=level, margin=margin)
    if args.format != "table":  # the data alone on stdout; what was left out on stderr
        if pairing is not None:
            show(f"note: {pairing}", file=sys.stderr)
        for line in result.refused:
            show(f"not compared: {line}", file=sys.stderr)
        print_summary(result.table, args.format)
        return 0
    show(f"{b} against {a} ({100 * result.level:g}% one-sided bounds)")
    show(f"{pairing}\n" if pairing is not None else "")
    show(terminal_table(_shown(result)))
    if result.margin is not None:
        show("\n" + "\n".join(result.sentences()))
    if result.refused:  # beside the table, where the reader looks
        show("\n" + "\n".join(f"not compared: {line}" for line in result.refused))
    return 0


# compare-agents' options for two agents' logs, as read_paired_inspect and fit take them.
LOG_OPTIONS = ("model", "scorer", "success_threshold", "agent_from", "task_from")


def _fit_logs(log_a: str, log_b: str, options: dict, level):
    """The fit of two agents' Inspect logs, paired, with the agents and the pairing."""
    import bayes_eval
    from bayes_eval.evidence.inspect_logs import read_paired_inspect

    model = options.pop("model") or "end_to_end"
    if options["scorer"] is not None:
        options["scorer"] = names_of(options["scorer"], "--scorer")
    if options["success_threshold"] is not None:
        options["success_threshold"] = real(options["success_threshold"], "--success-threshold")
    paired = read_paired_inspect(
        log_a, log_b, **{k: v for k, v in options.items() if v is not None}
    )
    posterior = bayes_eval.fit(paired.evidence, model, level=level)
    return posterior, paired.a, paired.b, paired.pairing


def _shown(result):
    """The comparison's table as the terminal shows it: the bounds of the difference and
    the ratio, the verdict and the trials to decide."""
    import pandas as pd

    table = result.table
    shown = pd.DataFrame(
        {
            "task": [
                f"across tasks: {quantity}"
                if quantity != "P"
                else (task if observed else f"{task} (predicted, not run)")
                for task, quantity, observed in zip(
                    table["task"], table["quantity"], table["observed"], strict=True
                )
            ],
            "P(B > A)": table["prob_b_greater"],
            "B - A": table["diff_mean"],
            "B - A from": table["diff_lower"],
            "B - A to": table["diff_upper"],
            "B / A": table["ratio_median"],
            "B / A to": table["ratio_upper"],
        }
    )
    if result.margin is not None:
        shown["verdict"] = table["verdict"]
        shown["trials to decide"] = table["trials_to_decide"]
    return shown
