"""``bayes-eval example [NAME]``: the path of a shipped dataset."""

from __future__ import annotations

from bayes_eval.cli.terminal import show
from bayes_eval.errors import InputError


def arguments(commands) -> None:
    """The command's flags."""
    example = commands.add_parser("example", help="print the path of a shipped dataset")
    example.add_argument(
        "name",
        nargs="?",
        default="example_evidence",
        help="dataset name (default: example_evidence)",
    )


def run(args) -> int:
    from bayes_eval.resources import shipped_datasets

    datasets = shipped_datasets()
    if args.name not in datasets:
        raise InputError(f"example: no dataset '{args.name}'; shipped: {', '.join(datasets)}")
    show(datasets[args.name])
    return 0
