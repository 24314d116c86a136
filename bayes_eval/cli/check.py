"""``bayes-eval check RUN_DIR``: every MCMC diagnostic of a pooled fit; ``bayes-eval check
--prior EVIDENCE --model M``: what the model's priors claim about the table before any data
(``bayes_eval.prior_check``)."""

from __future__ import annotations

from pathlib import Path

from bayes_eval.cli.options import (
    FORMAT_HELP,
    FORMATS,
    crossed_options,
    evidence_of,
    reading_options,
    real,
    whole,
)
from bayes_eval.cli.terminal import diagnostics_text, print_summary, show, terminal_table
from bayes_eval.constants import SAMPLER_LIMITS
from bayes_eval.errors import InputError
from bayes_eval.specs import check_level


def arguments(commands) -> None:
    """The command's flags."""
    check = commands.add_parser(
        "check",
        help="print the MCMC diagnostics of a fit's --out folder, or (--prior) what a "
        "model's priors claim about a table before any data",
    )
    check.add_argument(
        "source", help="folder written by bayes-eval fit --out; with --prior, an evidence table"
    )
    check.add_argument(
        "--prior",
        action="store_true",
        help="the prior predictive check of --model on the evidence table's design",
    )
    check.add_argument("--model", help="with --prior: shipped spec name or spec path")
    check.add_argument(
        "--threshold",
        nargs="+",
        help="with --prior: the thresholds TAU whose P(P < TAU) is shown (default 1e-2 1e-3 1e-5)",
    )
    check.add_argument(
        "--level", help="with --prior: central probability of each count's interval (0.95)"
    )
    check.add_argument("--seed", help="with --prior: seed of the prior draws (default: the spec's)")
    check.add_argument("--plot", help="with --prior: write the prior predictive plot (PNG) here")
    check.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    reading_options(check)
    crossed_options(check)
    check.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    if args.prior:
        return _prior(args)
    given = [
        flag for flag in ("model", "threshold", "level", "seed", "plot") if getattr(args, flag)
    ]
    if given:
        raise InputError(f"--{given[0]}: applies with --prior only")
    from bayes_eval.fit import load_posterior

    path = Path(args.source)
    posterior = load_posterior(path)
    if not posterior.is_mcmc:
        show(
            f"{path}: model {posterior.spec.name} is exact (conjugate): no MCMC, nothing to "
            "diagnose"
        )
        return 0
    diagnostics = posterior.diagnostics
    table = terminal_table(diagnostics.table, digits=lambda x: f"{x:.4g}")
    ebfmi = ", ".join(f"{e:.2f}" for e in diagnostics.ebfmi)
    show(f"{path}: model {posterior.spec.name}\n\n{table}\n")
    show(f"divergences: {diagnostics.divergences}; E-BFMI per chain: {ebfmi}")
    show(diagnostics_text(posterior))
    return 0 if diagnostics.ok else 1


def _prior(args) -> int:
    """The prior predictive check: each cell's count beside its prior interval, each
    pair's prior probability of a rate below the thresholds."""
    from bayes_eval.checks.prior import THRESHOLDS, prior_check

    if not args.model:
        raise InputError("--model: name the model whose priors to check")
    thresholds = THRESHOLDS
    if args.threshold:
        thresholds = [real(text, "--threshold") for text in args.threshold]
    level = 0.95 if args.level is None else check_level(args.level, "--level")
    seed = whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    plot = Path(args.plot) if args.plot else None
    if plot is not None and plot.suffix.lower() != ".png":
        raise InputError(f"--plot: {plot} must end in .png")
    result = prior_check(
        evidence_of(args.source, args),
        args.model,
        thresholds=thresholds,
        level=level,
        seed=seed,
        agents=args.agents,
        tasks=args.tasks,
        predict=args.predict_agent,
    )
    if plot is not None:
        from bayes_eval.outputs.plots import prior_plot

        prior_plot(result.tree, plot)
    if args.format != "table":
        print_summary(result.pairs, args.format)
        return 0
    name = result.tree.attrs["spec_name"]
    show(f"{args.source}: model {name}, before any data\n")
    show(f"each observed count and the {level:g} interval its prior predicts:")
    shown = ["cell", "successes", "trials", "lower", "upper", "position"]
    show(terminal_table(result.cells[shown], digits=lambda x: f"{x:.3g}"))
    show("\nthe prior mean of each pair's P, and the prior probability that P < TAU:")
    show(terminal_table(result.pairs, digits=lambda x: f"{x:.3g}"))
    if plot is not None:
        show(f"\nwrote {plot}")
    return 0
