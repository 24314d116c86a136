"""``bayes-eval compare``: rank models by how well each predicts an observed cell left
out (``bayes_eval.compare``), fitted to one evidence table (``--models``) or read from
run folders written by ``fit --out``; or, with ``--holdout end_to_end``, by how well each
predicts end-to-end outcomes hidden from it (``bayes_eval.compare_holdout``)."""

from __future__ import annotations

from pathlib import Path

from bayes_eval.cli.options import (
    FORMAT_HELP,
    FORMATS,
    QUIET_HELP,
    evidence_of,
    mcmc_options,
    reading_options,
    sampler_of,
    sweep_arguments,
    sweep_options,
    whole,
)
from bayes_eval.cli.terminal import print_summary, show, terminal_table
from bayes_eval.constants import SAMPLER_LIMITS
from bayes_eval.errors import InputError
from bayes_eval.outputs.runfolder import holds_fit

# The columns the terminal shows, best model first.
SHOWN = ["rank", "elpd", "se", "elpd_diff", "dse", "weight", "loo", "cells", "refits", "high_k"]
HOLDOUT_SHOWN = [
    "rank",
    "elpd",
    "se",
    "elpd_diff",
    "dse",
    "weight",
    "predicted",
    "expected",
    "observed",
    "diagnostics",
]  # fmt: skip (the pairs shared are in the sentence)


def arguments(commands) -> None:
    """The command's flags."""
    compare = commands.add_parser(
        "compare", help="rank models by how well they predict an observed cell left out"
    )
    compare.add_argument(
        "sources",
        nargs="+",
        help="an evidence table (with --models), or run folders written by fit --out",
    )
    compare.add_argument(
        "--models", nargs="+", help="two or more shipped spec names or spec paths to fit"
    )
    compare.add_argument(
        "--holdout",
        choices=["end_to_end"],
        help="hide the end-to-end rows of a K-th of the pairs at a time, refit, and score "
        "the hidden outcomes (K-fold cross-validation over pairs)",
    )
    compare.add_argument("--folds", default="5", help="K of --holdout (default 5)")
    compare.add_argument(
        "--no-refit",
        action="store_true",
        help="leave the cells whose Pareto k exceeds 0.7 to PSIS, counted in high_k, instead "
        "of refitting up to 10 per model exactly (each refit is a whole fit)",
    )
    compare.add_argument(
        "--seed", help="seed of every fit, and of --holdout's folds (default: each spec's)"
    )
    compare.add_argument("--format", default="table", choices=FORMATS, help=FORMAT_HELP)
    reading_options(compare)
    mcmc_options(compare)
    sweep_arguments(compare, "of --holdout's fits")
    compare.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    compare.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    sweep = sweep_options(args)
    if not args.holdout and (sweep["workers"] is not None or sweep["scheduler"] is not None):
        option = "--workers" if sweep["workers"] is not None else "--scheduler"
        raise InputError(f"{option}: applies to --holdout's fits")
    if args.holdout:
        if args.no_refit:
            raise InputError("--no-refit: applies to the leave-one-out comparison, not --holdout")
        result, shown = _holdout(args), HOLDOUT_SHOWN
    else:
        from bayes_eval.checks.comparison import compare

        result, shown = compare(_fits(args), refit=not args.no_refit), SHOWN
    table = result.table.rename_axis("model").reset_index()
    if args.format != "table":
        print_summary(table, args.format)
        return 0
    show(terminal_table(table[["model", *shown]], digits=lambda x: f"{x:.4g}"))
    show(f"\n{result.sentence}")
    return 0


def _holdout(args):
    """``compare_holdout`` of the models on the one evidence table."""
    from bayes_eval.checks.holdout import compare_holdout

    paths = [Path(source) for source in args.sources]
    fitted = next((path for path in paths if holds_fit(path)), None)
    if fitted is not None:
        raise InputError(f"{fitted}: --holdout refits; give one evidence table with --models")
    evidence, seed, sampler = _to_fit(args)
    folds = whole(args.folds, "--folds", 2)
    return compare_holdout(
        evidence, args.models, folds=folds, seed=seed, sampler=sampler, **sweep_options(args)
    )


def _to_fit(args) -> tuple:
    """The evidence table, seed and sampler overrides of models fitted to one table
    (``--models``, two or more)."""
    if not args.models or len(args.models) < 2:
        raise InputError("--models: name two models or more to fit to the evidence")
    seed = whole(args.seed, "--seed", *SAMPLER_LIMITS["seed"])
    sampler = sampler_of(args)
    return evidence_of(args.sources, args), seed, sampler


def _fits(args) -> dict:
    """The fits to compare, by name: the run folders', or each model's fit to the table."""
    from bayes_eval.fit import fit, load_posterior
    from bayes_eval.specs import load_spec

    paths = [Path(source) for source in args.sources]
    fitted = [path for path in paths if holds_fit(path)]
    if fitted:
        if len(fitted) < len(paths) or args.models:
            raise InputError(
                f"{fitted[0]}: compare run folders alone, or one evidence table with --models"
            )
        names = [path.name if path.suffix != ".nc" else path.stem for path in paths]
        if len(set(names)) < len(names):
            names = [str(path) for path in paths]
        return {name: load_posterior(path) for name, path in zip(names, paths, strict=True)}
    evidence, seed, sampler = _to_fit(args)
    specs = [load_spec(model) for model in args.models]
    names = [spec.name for spec in specs]
    if len(set(names)) < len(names):
        names = list(args.models)
    return {
        name: fit(evidence, spec, seed=seed, sampler=None if spec.exact else sampler)
        for name, spec in zip(names, specs, strict=True)
    }
