"""``bayes-eval simulate variance|paths``: the simulation studies."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bayes_eval.cli.options import (
    FORMAT_HELP,
    FORMATS,
    Parser,
    fraction,
    sweep_arguments,
    sweep_options,
    whole,
)
from bayes_eval.cli.terminal import json_value, show
from bayes_eval.constants import CALIBRATION_MAX_TRIALS, SAMPLER_LIMITS, VIOLATIONS
from bayes_eval.errors import InputError
from bayes_eval.outputs.runfolder import check_out, write_run


def arguments(commands) -> None:
    """The command's flags."""
    simulate = commands.add_parser("simulate", help="simulation studies")
    studies = simulate.add_subparsers(
        dest="study", required=True, parser_class=Parser, help="the study: variance or paths"
    )
    variance = studies.add_parser(
        "variance", help="variance of milestone against end-to-end estimates"
    )
    variance.add_argument("--milestones", nargs="+", default=["2"], help="one or more M")
    variance.add_argument(
        "--end-to-end-rate",
        dest="rate",
        default="0.0025",
        help="the true end-to-end rate R, each of M milestones at R^(1/M) (default 0.0025)",
    )
    variance.add_argument("--trials", nargs="+", default=["100"], help="trials per stage")
    variance.add_argument(
        "--replications", default="1000000", help="simulated evaluations (default 1000000)"
    )
    paths = studies.add_parser("paths", help="milestone bounds when other solution paths exist")
    paths.add_argument(
        "--violation",
        default="bypass",
        choices=VIOLATIONS,
        help="how the true tasks break the milestone assumption (default bypass)",
    )
    paths.add_argument(
        "--strengths",
        nargs="+",
        default=["0", "0.05", "0.1", "0.2", "0.4"],
        help="strengths of the violation, 0 (none) to 1 (default 0 0.05 0.1 0.2 0.4)",
    )
    paths.add_argument(
        "--models",
        nargs="+",
        default=["mats2024", "joint"],
        help="milestone or joint models to calibrate (default mats2024 joint)",
    )
    paths.add_argument("--tasks", default="40", help="tasks per strength (default 40)")
    paths.add_argument("--milestones", default="3", help="milestones per task (default 3)")
    paths.add_argument("--trials", default="100", help="trials per milestone")
    paths.add_argument(
        "--end-to-end-share",
        dest="share",
        default="0.5",
        help="share of the tasks that also get end-to-end runs (default 0.5)",
    )
    paths.add_argument(
        "--end-to-end-trials",
        dest="e2e_trials",
        default="50",
        help="end-to-end trials of each such task (default 50)",
    )
    paths.add_argument(
        "--truth-trials",
        dest="truth_trials",
        default="100",
        help="held-out end-to-end trials per task, the ground truth (default 100)",
    )
    for study in (variance, paths):
        sweep_arguments(study)
        study.add_argument("--seed", default="0", help="seed of the simulation (default 0)")
        study.add_argument("--out", help="folder for the results table and plot")
        study.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
        study.add_argument("--debug", action="store_true", help="show tracebacks")


# Largest tables `bayes-eval simulate paths` builds (each is fitted by every model, MCMC
# included, at every strength).
PATHS_MAX_TASKS = 10_000


PATHS_MAX_MILESTONES = 100


# Most binomial draws `bayes-eval simulate variance` makes (about ten minutes on one core).
SIMULATE_MAX_DRAWS = 4 * 10**9


def run(args) -> int:
    from bayes_eval.checks.simulate import paths_study, variance_sweep
    from bayes_eval.outputs import plots
    from bayes_eval.specs import check_probability

    seed = whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    sweep = sweep_options(args)
    out = None if args.out is None else check_out(Path(args.out))
    if args.study == "variance":
        rate = check_probability(args.rate, "--end-to-end-rate")
        milestones = [whole(m, "--milestones", 1) for m in args.milestones]
        trials = [whole(n, "--trials", 1) for n in args.trials]
        replications = whole(args.replications, "--replications", 2)
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
            strengths=[fraction(s, "--strengths") for s in args.strengths],
            models=args.models,
            tasks=whole(args.tasks, "--tasks", 2, PATHS_MAX_TASKS),
            milestones=whole(args.milestones, "--milestones", 1, PATHS_MAX_MILESTONES),
            trials=whole(args.trials, "--trials", 1),
            end_to_end_share=fraction(args.share, "--end-to-end-share"),
            end_to_end_trials=whole(args.e2e_trials, "--end-to-end-trials", 1),
            truth_trials=whole(args.truth_trials, "--truth-trials", 1, CALIBRATION_MAX_TRIALS),
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
        records = [{k: json_value(v) for k, v in r.items()} for r in results.to_dict("records")]
        print(json.dumps(records[0] if len(records) == 1 else records, indent=2))
    elif args.format == "csv":
        sys.stdout.write(results.to_csv(index=False))
    else:
        show(results.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        if out is not None:
            show(f"\nwrote to {out}: {name}.csv, {name}.png")
    return 0
