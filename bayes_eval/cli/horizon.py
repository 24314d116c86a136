"""``bayes-eval horizon RUN_DIR``: time horizons and their trend from a crossed fit;
``--method metr``: METR's published method on the same runs
(``bayes_eval.crossed.metr_method``)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from bayes_eval.cli.options import FORMAT_HELP, FORMATS, real, same_folder, whole
from bayes_eval.cli.terminal import json_value, show, terminal_table
from bayes_eval.outputs.runfolder import check_out, write_run


def arguments(commands) -> None:
    """The command's flags."""
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
    horizon.add_argument(
        "--method",
        choices=("model", "metr"),
        default="model",
        help="model: the fit's horizons (default); metr: METR's per-agent logistic "
        "regressions on the fit's runs, with its hierarchical bootstrap",
    )
    metr = horizon.add_argument_group("--method metr (METR's settings by default)")
    metr.add_argument(
        "--weighting",
        choices=("invsqrt", "equal"),
        default="invsqrt",
        help="task weights: 1 / sqrt(family size) (METR's headline) or equal",
    )
    metr.add_argument("--regularization", default="0.1", help="C = 1 / this; 0 for none")
    metr.add_argument("--bootstrap", default="1000", help="replicates (0: no intervals)")
    metr.add_argument("--since", metavar="DATE", help="the trend's first release date (ISO)")
    metr.add_argument("--seed", default="0", help="the bootstrap's seed")
    horizon.add_argument(
        "--out", help="folder for horizons.csv and horizons.png (metr_horizons.csv) (RUN_DIR)"
    )
    horizon.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    horizon.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    from bayes_eval.crossed.horizon import horizons
    from bayes_eval.fit import load_posterior
    from bayes_eval.outputs.plots import horizon_plot
    from bayes_eval.specs import check_probability

    interval = check_probability(args.interval, "--interval")
    path = Path(args.run_dir)
    posterior = load_posterior(path)
    if args.method == "metr":
        return _metr(args, posterior, interval, path)
    result = horizons(posterior, interval=interval, forecast=args.forecast)
    out = check_out(Path(args.out) if args.out else path if path.is_dir() else path.parent)

    def write(staging: Path) -> None:
        result.agents.to_csv(staging / "horizons.csv", index=False)
        if len(result.forecasts):
            result.forecasts.to_csv(staging / "forecasts.csv", index=False)
        horizon_plot(result, staging / "horizons.png")

    write_run(out, write, command="horizon", adds_to_run=same_folder(out, path))
    if args.format == "csv":
        sys.stdout.write(result.agents.to_csv(index=False))
    elif args.format == "json":
        print(json.dumps(result.to_dict(), indent=2, default=json_value))
    else:
        show(_horizon_text(result))
        show(f"\nwrote to {out}: horizons.csv, horizons.png")
    return 0


def _horizon_text(result) -> str:
    """The horizons, trend and forecasts for people."""
    unit = result.unit
    inside = f"{result.interval:.0%} interval"
    frame = result.agents.copy()
    _with_intervals(frame)
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
        terminal_table(frame[list(shown)].rename(columns=shown), digits=str),
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


def _metr(args, posterior, interval: float, path: Path) -> int:
    """``--method metr``: METR's horizons of the fit's runs, written and shown."""
    from dataclasses import replace

    from bayes_eval.crossed.metr_method import cells_of_fit, metr_horizons
    from bayes_eval.errors import InputError
    from bayes_eval.evidence.covariates import decimal_year

    if args.forecast:
        raise InputError("--forecast: forecasts are the fit's (--method model)")
    cells, dates, notes = cells_of_fit(posterior)
    since = None if args.since is None else decimal_year(args.since.strip(), "--since")
    regularization = real(args.regularization, "--regularization")
    if regularization < 0:
        raise InputError(f"--regularization: {args.regularization} must be >= 0")
    result = metr_horizons(
        cells,
        dates,
        weighting=args.weighting,
        regularization=regularization,
        bootstrap=whole(args.bootstrap, "--bootstrap", 0),
        interval=interval,
        seed=whole(args.seed, "--seed", 0),
        since=since,
    )
    result = replace(result, notes=notes + result.notes)
    out = check_out(Path(args.out) if args.out else path if path.is_dir() else path.parent)
    write_run(
        out,
        lambda staging: result.agents.to_csv(staging / "metr_horizons.csv", index=False),
        command="horizon --method metr",
        adds_to_run=same_folder(out, path),
    )
    if args.format == "csv":
        sys.stdout.write(result.agents.to_csv(index=False))
        return 0
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2, default=json_value))
        return 0
    frame = result.agents.copy()
    _with_intervals(frame)
    frame["date"] = frame["date"].map(lambda y: f"{y:.2f}")
    shown = {"agent": "agent", "date": "date", "successes": "successes", "runs": "runs"}
    shown |= {"h50": "50% horizon", "h80": "80% horizon"}
    table = terminal_table(frame[list(shown)].rename(columns=shown), digits=str)
    show("\n".join([result.heading(), "", table, "", *result.sentences()]))
    show(f"\nwrote to {out}: metr_horizons.csv")
    return 0


def _with_intervals(frame) -> None:
    """Each horizon of ``frame`` as text with its interval, in place."""
    for q in ("h50", "h80"):
        frame[q] = [
            f"{_length(m)} ({_length(lo)} to {_length(hi)})"
            for m, lo, hi in zip(frame[q], frame[q + "_lower"], frame[q + "_upper"], strict=True)
        ]


def _length(value: float) -> str:
    if math.isnan(value):
        return "none"
    return "inf" if not math.isfinite(value) else f"{value:.3g}"
