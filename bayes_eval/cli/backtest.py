"""``bayes-eval backtest RUNS --agents agents.csv --by release_date``: forecasts of later
agents from earlier ones, scored at every cut-off (``bayes_eval.checks.backtest``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bayes_eval.cli.options import (
    FORMAT_HELP,
    FORMATS,
    evidence_of,
    mcmc_options,
    names_of,
    reading_options,
    sampler_of,
    whole,
)
from bayes_eval.cli.terminal import json_value, print_summary, show, terminal_table
from bayes_eval.outputs.runfolder import check_out, write_run


def arguments(commands) -> None:
    """The command's flags."""
    backtest = commands.add_parser(
        "backtest",
        help="fit the agents released before each cut-off and score the later agents' runs: "
        "the models' forecasts beside METR's method extrapolated",
    )
    backtest.add_argument("evidence", nargs="+", help="runs (METR's run files) or evidence")
    backtest.add_argument("--agents", required=True, help="agents' table: agent and --by")
    backtest.add_argument("--by", default="release_date", help="the column ordering the agents")
    backtest.add_argument(
        "--models", default="time_horizon", help="crossed specs, comma-separated (time_horizon)"
    )
    backtest.add_argument(
        "--min-later", dest="min_later", default="3", help="later agents a cut-off needs (3)"
    )
    backtest.add_argument(
        "--bootstrap", default="200", help="METR's bootstrap replicates behind its forecasts"
    )
    backtest.add_argument("--seed", default="0", help="the fits' and the bootstrap's seed")
    backtest.add_argument("--out", help="folder for backtest.csv and backtest_pairs.csv")
    backtest.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    reading_options(backtest)
    mcmc_options(backtest)
    backtest.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    from bayes_eval.checks.backtest import backtest

    result = backtest(
        evidence_of(args.evidence, args),
        args.agents,
        by=args.by,
        models=tuple(names_of(args.models, "--models")),
        min_later=whole(args.min_later, "--min-later", 1),
        bootstrap=whole(args.bootstrap, "--bootstrap", 0),
        seed=whole(args.seed, "--seed", 0),
        sampler=sampler_of(args),
    )
    if args.out:

        def write(staging: Path) -> None:
            result.table.to_csv(staging / "backtest.csv", index=False)
            result.pairs.to_csv(staging / "backtest_pairs.csv", index=False)

        write_run(check_out(Path(args.out)), write, command="backtest")
    for note in result.notes:
        show(f"note: {note}", file=sys.stderr)
    if args.format == "csv":
        print_summary(result.table, "csv")
    elif args.format == "json":
        records = result.table.to_dict("records")
        print(json.dumps(records, indent=2, default=json_value))
    else:
        show(
            "log score: the sum of the log predictive probabilities of the later agents' "
            "counts (higher is better); covered: the share of pairs inside the central "
            "interval; horizon error: mean |log2 predicted - log2 own| 50% horizon\n"
        )
        show(terminal_table(result.table, digits=lambda x: f"{x:.3g}"))
    return 0
