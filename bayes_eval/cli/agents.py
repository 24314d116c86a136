"""``bayes-eval compare-agents RUN_DIR A B``: is agent B more capable than agent A, per task
and across tasks, within one fit (``bayes_eval.compare_agents``)."""

from __future__ import annotations

import sys
from pathlib import Path

from bayes_eval.cli.options import FORMAT_HELP, FORMATS, real
from bayes_eval.cli.terminal import print_summary, show, terminal_table
from bayes_eval.specs import check_level


def arguments(commands) -> None:
    """The command's flags."""
    agents = commands.add_parser(
        "compare-agents",
        help="is agent B more capable than agent A? P(P_B > P_A), the difference and the "
        "ratio per task and across tasks, from one fit's --out folder",
    )
    agents.add_argument("run_dir", help="folder written by bayes-eval fit --out")
    agents.add_argument("a", metavar="A", help="the agent compared against (the earlier one)")
    agents.add_argument("b", metavar="B", help="the agent compared (the newer one)")
    agents.add_argument(
        "--margin",
        help="a verdict per task: B more capable than A by more than M, not, or undecided",
    )
    agents.add_argument("--level", help="one-sided credible level (default: the fit's)")
    agents.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    agents.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    from bayes_eval.checks.agents import compare_agents
    from bayes_eval.fit import load_posterior

    level = None if args.level is None else check_level(args.level, "--level")
    margin = None if args.margin is None else real(args.margin, "--margin")
    posterior = load_posterior(Path(args.run_dir))
    result = compare_agents(posterior, args.a, args.b, level=level, margin=margin)
    if args.format != "table":  # the data alone on stdout; what was left out on stderr
        for line in result.refused:
            show(f"not compared: {line}", file=sys.stderr)
        print_summary(result.table, args.format)
        return 0
    show(f"{args.b} against {args.a} ({100 * result.level:g}% one-sided bounds)\n")
    show(terminal_table(_shown(result)))
    if result.margin is not None:
        show("\n" + "\n".join(result.sentences()))
    if result.refused:  # beside the table, where the reader looks
        show("\n" + "\n".join(f"not compared: {line}" for line in result.refused))
    return 0


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
