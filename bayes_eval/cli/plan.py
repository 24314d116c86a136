"""``bayes-eval plan``: the trials that certify ``P < TAU``, the next run to make, or where
to spend a budget of runs for pass@k."""

from __future__ import annotations

import json
import sys

from bayes_eval.cli.options import FORMAT_HELP, FORMATS, attempts_of, fraction, positive, whole
from bayes_eval.cli.terminal import (
    format_number,
    plain,
    plan_text,
    print_summary,
    show,
    terminal_table,
    unlikely_text,
)
from bayes_eval.constants import DEFAULT_LEVEL, PLAN_MAX_TRIALS, PLAN_POWER, SAMPLER_LIMITS
from bayes_eval.errors import InputError


def arguments(commands) -> None:
    """The command's flags."""
    plan = commands.add_parser(
        "plan",
        help="trials that certify P < TAU, the next run to make (RUN_DIR --task), or where "
        "to spend a budget of runs for pass@k (RUN_DIR --attempts K --budget B)",
    )
    plan.add_argument("run_dir", nargs="?", help="folder written by fit --out (next-run mode)")
    plan.add_argument("--threshold", help="the TAU to certify P < TAU (all but --budget)")
    plan.add_argument("--level", help=f"one-sided credible level (default: {DEFAULT_LEVEL})")
    plan.add_argument("--prior", default="uniform", help="uniform, jeffreys or ALPHA,BETA")
    plan.add_argument("--rate", help="a true end-to-end rate to suppose: trials until certified")
    plan.add_argument(
        "--milestone-rates",
        dest="milestone_rates",
        nargs="+",
        help="true rates to suppose, one per milestone: the trials per milestone that certify",
    )
    plan.add_argument("--power", default=str(PLAN_POWER), help="chance to certify (milestones)")
    plan.add_argument("--task", help="task to plan for (next-run mode)")
    plan.add_argument("--agent", help="agent (next-run mode; needed with several agents)")
    plan.add_argument("--cost", nargs="+", help="cost of a trial of each milestone, or of an audit")
    plan.add_argument(
        "--end-to-end-cost", dest="e2e_cost", default="1", help="cost of one end-to-end trial"
    )
    plan.add_argument(
        "--batch", nargs="+", help="batch sizes (default 10 50; with --budget one, default 1)"
    )
    plan.add_argument("--attempts", help="with --budget: the k of pass@k to pin down")
    plan.add_argument("--budget", help="runs to share among an agent's tasks (RUN_DIR)")
    plan.add_argument(
        "--rule",
        default="information",
        help="with --budget: information (default), hardest or uniform",
    )
    plan.add_argument("--seed", default="0", help="seed of the simulations (default 0)")
    plan.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    plan.add_argument("--debug", action="store_true", help="show tracebacks")


# More end-to-end trials than a plan calls practical (the planner then points to milestones).
PLAN_PRACTICAL_TRIALS = 100_000


def run(args) -> int:
    import pandas as pd

    from bayes_eval import plan
    from bayes_eval.specs import check_level, check_probability

    if args.budget is not None:
        return _allocation(args)
    if args.threshold is None:
        raise InputError("plan: --threshold is required (except with --budget)")
    threshold = check_probability(args.threshold, "--threshold")
    level = DEFAULT_LEVEL if args.level is None else check_level(args.level, "--level")
    prior = plan.parse_prior(args.prior)
    seed = whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    if args.run_dir is not None:
        result = _next_run(args, threshold, level, seed)
    elif args.milestone_rates is not None:
        rates = [check_probability(r, "--milestone-rates") for r in args.milestone_rates]
        power = check_probability(args.power, "--power")
        result = plan.milestone_trials(rates, threshold, level, prior, power=power, seed=seed)
        result["trials_by_prior"] = plan.milestone_family(
            rates, threshold, level, prior, power, seed
        )
    else:
        trials = plan.zero_success_trials(threshold, level, prior)
        result = {"threshold": threshold, "level": level, "prior": list(prior), "trials": trials}
        result["trials_by_prior"] = plan.zero_success_family(threshold, level, prior)
        if trials > PLAN_PRACTICAL_TRIALS:
            result["note"] = (
                f"{plain(trials)} end-to-end trials, all failures, is impractical. The milestone "
                "route certifies the product of milestone rates with far fewer: bayes-eval "
                f"plan --threshold {threshold:g} --milestone-rates R1 R2 ... gives the trials "
                "per milestone for hypothesised rates; expert-guided steps (model ecr2024) are "
                "the other route"
            )
        if args.rate is not None:
            rate = fraction(args.rate, "--rate")
            result["rate"] = rate
            if trials > PLAN_MAX_TRIALS:
                result["rate_note"] = (
                    f"the stopping time at --rate is computed up to {PLAN_MAX_TRIALS:,} "
                    f"trials, and certifying takes at least {plain(trials)} here"
                )
            else:
                result.update(plan.expected_trials(rate, threshold, level, prior))
                if result["median_trials"] is None:  # certifying is less likely than not
                    result["expected_trials"] = None  # not an expectation cut at the horizon
                    result["rate_note"] = unlikely_text(rate, threshold, result)
    if isinstance(result, pd.DataFrame):
        if args.format == "json":
            print(json.dumps(result.to_dict("records"), indent=2))
        elif args.format == "csv":
            sys.stdout.write(result.to_csv(index=False))
        else:
            show(terminal_table(result))
            best = result.iloc[0]
            if "certified" in result and result["certified"].iloc[0]:
                show(
                    f"\nalready certified: the upper bound {format_number(best['current_upper'])}"
                    f" is below {args.threshold}; more runs would only narrow it"
                )
            else:
                show(f"\nrun next: {best['run']}, {best['trials']} trials")
        return 0
    if args.format == "json":
        print(json.dumps(result, indent=2))
    elif args.format == "csv":
        sys.stdout.write(pd.DataFrame([result]).to_csv(index=False))
    else:
        show(plan_text(result))
    return 0


def _next_run(args, threshold, level, seed):
    from bayes_eval import plan
    from bayes_eval.fit import load_posterior

    if args.task is None:
        raise InputError("plan: RUN_DIR needs --task (the task to plan the next run for)")
    posterior = load_posterior(args.run_dir)
    costs = None if args.cost is None else [positive(c, "--cost") for c in args.cost]
    return plan.next_run(
        posterior,
        args.task,
        agent=args.agent,
        costs=costs,
        end_to_end_cost=positive(args.e2e_cost, "--end-to-end-cost"),
        batches=[whole(b, "--batch", 1) for b in (args.batch or ["10", "50"])],
        threshold=threshold,
        level=level,
        seed=seed,
    )


def _allocation(args) -> int:
    """``plan RUN_DIR --attempts K --budget B``: runs per task, and what each rule leaves."""
    from bayes_eval.allocation import allocate
    from bayes_eval.fit import load_posterior

    if args.run_dir is None or args.attempts is None:
        raise InputError(
            "plan: --budget needs RUN_DIR (a fit written by fit --out) and --attempts K"
        )
    given = [o for o in ("threshold", "task", "rate", "milestone_rates") if getattr(args, o)]
    if given:
        raise InputError(f"--{given[0].replace('_', '-')}: does not apply with --budget")
    if args.batch is not None and len(args.batch) != 1:
        raise InputError("--batch: one batch size with --budget")
    batch = 1 if args.batch is None else whole(args.batch[0], "--batch", 1)
    attempts = attempts_of(args.attempts)
    if len(attempts) != 1:
        raise InputError("--attempts: one target k with --budget")
    table = allocate(
        load_posterior(args.run_dir),
        attempts[0],
        whole(args.budget, "--budget", 1),
        agent=args.agent,
        rule=args.rule,
        batch=batch,
    )
    if args.format != "table":
        print_summary(table, args.format)
    else:
        show(terminal_table(table))
        attrs = table.attrs
        after = ", ".join(f"{rule} {format_number(sd)}" for rule, sd in attrs["sd_after"].items())
        show(
            f"\nexpected posterior sd of the average pass@{attrs['attempts']:,} over the "
            f"tasks: now {format_number(attrs['sd_now'])}; after the runs, by rule: {after} "
            f"(this plan: {attrs['rule']})"
        )
    return 0
