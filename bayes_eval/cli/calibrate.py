"""``bayes-eval calibrate``: a fit against end-to-end ground truth, or the published table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bayes_eval.cli.options import FORMAT_HELP, FORMATS, same_folder, whole
from bayes_eval.cli.terminal import format_number, show
from bayes_eval.constants import SAMPLER_LIMITS
from bayes_eval.errors import InputError
from bayes_eval.outputs.runfolder import check_out, write_run


def arguments(commands) -> None:
    """The command's flags."""
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
    calibrate.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    calibrate.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    from bayes_eval.checks.calibration import calibrate, published_calibration
    from bayes_eval.fit import load_posterior
    from bayes_eval.outputs.plots import calibration_plot
    from bayes_eval.specs import check_level

    if args.published is not None:
        if args.run_dir or args.truth:
            raise InputError("calibrate: give either --published FILE or RUN_DIR --truth FILE")
        result = published_calibration(args.published)
        if args.format == "json":
            print(json.dumps(result, indent=2))
        else:
            show(_published_table(result, args.format))
        return 0
    if not args.run_dir or not args.truth:
        raise InputError("calibrate: needs RUN_DIR and --truth FILE (or --published FILE)")
    level = None if args.level is None else check_level(args.level, "--level")
    seed = whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    path = Path(args.run_dir)
    posterior = load_posterior(path)
    out = check_out(Path(args.out) if args.out else path if path.is_dir() else path.parent)
    result = calibrate(posterior, args.truth, level=level, seed=seed)

    def write(staging: Path) -> None:
        result.cells.to_csv(staging / "calibration.csv", index=False)
        if len(result.calibrated):
            calibration_plot(result, staging / "calibration.png")

    write_run(out, write, command="calibrate", adds_to_run=same_folder(out, path))
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    elif args.format == "csv":
        sys.stdout.write(result.cells.to_csv(index=False))
    else:
        show(_calibration_text(result))
        show(f"\nwrote to {out}: calibration.csv, calibration.png")
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
    import pandas as pd

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
