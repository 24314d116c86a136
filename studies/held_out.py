"""Do the pooled and crossed models predict held-out unguided (end-to-end) outcomes better
than the milestone method?

    python studies/held_out.py [--data TABLE.csv] [--folds 5] [--models mats2024
        hierarchical joint] [--seed 0] [--out studies/results] [--rate LOW HIGH]
        [--milestones LOW HIGH] [--loo] [--workers N | --scheduler ADDRESS]

The table holds milestone rows (for example subtask-guided runs) and end-to-end rows
(unguided runs) of the same (agent, task) pairs. Without ``--data`` it is a simulated
capture-the-flag table: 8 agents x 40 tasks, one trial per milestone and per end-to-end
run, every pair run end to end, a bypass on every task (``random_design`` with
``CAPTURE_THE_FLAG``; ``--rate`` and ``--milestones`` narrow its ranges).

The study is ``bayes_eval.compare_holdout`` (``bayes-eval compare --holdout end_to_end``):
the pairs are split into ``--folds`` folds, and for each fold every model that reads
end-to-end rows is refitted with that fold's end-to-end rows hidden (a model that reads
none, such as ``mats2024``, is fitted once) and scored by its posterior predictive
probability of the hidden outcomes. Beside the command's ranking, it prints per model the
mean log score and Brier score (of the mean predicted rate against ``k / n``) per
held-out pair and their paired differences from ``mats2024`` with standard errors, and
writes one row per held-out pair to ``held_out.csv``. ``--workers N`` runs the fits on a
local dask cluster, ``--scheduler ADDRESS`` on a running one, with the same scores as
serially.

``--loo`` asks whether leaving one cell out picks the same model: every model that reads
end-to-end rows is fitted once to the whole table, ``bayes_eval.compare`` ranks them by
leave-one-cell-out on the cells they share (the end-to-end cells), and the study prints
that ranking and whether its first model is the hold-out ranking's first among them, or
``compare``'s refusal where they share none (``joint`` scores a pair's runs together).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import compare, compare_holdout, fit
from bayes_eval.checks.simulate import CAPTURE_THE_FLAG, random_design
from bayes_eval.constants import END_TO_END
from bayes_eval.errors import InputError
from bayes_eval.inference.sweep import place_arguments
from bayes_eval.messages import collected
from bayes_eval.registry import model_of
from bayes_eval.specs import load_spec

MODELS = ("mats2024", "hierarchical", "joint")
BASELINE = "mats2024"


def per_pair(pointwise: pd.DataFrame, models) -> pd.DataFrame:
    """Each model's log and Brier score on each held-out pair, one row per pair and model."""
    observed = pointwise["successes"] / pointwise["trials"]
    return pd.concat(
        pd.DataFrame(
            dict(
                model=model,
                successes=pointwise["successes"],
                trials=pointwise["trials"],
                predicted=pointwise[f"predicted {model}"],
                log_score=pointwise[f"log_score {model}"],
                brier=(pointwise[f"predicted {model}"] - observed) ** 2,
            )
        )
        for model in models
    ).reset_index()


def summarise(scores: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Per model: held-out pairs, mean log and Brier scores, and the paired differences
    from ``baseline`` (positive log-score difference: better) with their standard errors."""
    keyed = scores.set_index(["pair", "model"])
    base = keyed.xs(baseline, level="model") if baseline in scores["model"].values else None
    rows = {}
    for model, group in scores.groupby("model", sort=False):
        row = dict(
            pairs=len(group), log_score=group["log_score"].mean(), brier=group["brier"].mean()
        )
        if base is not None and model != baseline:
            mine = keyed.xs(model, level="model").loc[base.index]
            for name in ("log_score", "brier"):
                diff = mine[name] - base[name]
                row[f"{name}_vs_{baseline}"] = diff.mean()
                row[f"{name}_vs_{baseline}_se"] = diff.std(ddof=1) / np.sqrt(len(diff))
        rows[model] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def leave_one_cell_out(table: pd.DataFrame, models, held_out: pd.DataFrame, seed: int) -> None:
    """Fit every model of ``models`` that reads end-to-end rows to the whole table, rank
    them by leaving one cell out, and print whether the first is the first of those models
    in the hold-out ranking ``held_out``."""
    readers = [m for m in models if END_TO_END in model_of(load_spec(m)).uses]
    if len(readers) < 2:
        print(f"--loo: fewer than two models read end-to-end rows ({', '.join(readers)})")
        return
    with collected():
        fits = {m: fit(table, m, seed=seed) for m in readers}
    try:
        result = compare(fits)
    except InputError as exc:  # per-pair and per-cell likelihoods share no unit
        print(f"--loo: {exc}")
        return
    print(result.table.to_string(float_format=lambda x: f"{x:.4g}"))
    print(result.sentence)
    first = result.table.index[0]
    held_first = next(m for m in held_out.index if m in readers)
    agree = "agrees with" if first == held_first else "differs from"
    print(f"leave-one-cell-out's first, {first}, {agree} hold-out's first of them, {held_first}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="evidence table (default: a simulated one)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="studies/results")
    parser.add_argument(
        "--rate", nargs=2, type=float, metavar=("LOW", "HIGH"), help="simulated rates' range"
    )
    parser.add_argument(
        "--milestones", nargs=2, type=int, metavar=("LOW", "HIGH"), help="simulated per task"
    )
    parser.add_argument("--loo", action="store_true", help="also rank by leaving one cell out")
    place_arguments(parser)
    args = parser.parse_args(argv)
    if args.data:
        table = pd.read_csv(args.data, keep_default_na=False, na_values=[""])
    else:
        ranges = dict(CAPTURE_THE_FLAG)
        if args.rate:
            ranges["rate"] = tuple(args.rate)
        if args.milestones:
            ranges["milestones"] = tuple(args.milestones)
        table, design = random_design(np.random.default_rng(args.seed), ranges)
        print(f"simulated capture-the-flag table: {design}", file=sys.stderr)
    with collected():  # the rows each model leaves out, known
        result = compare_holdout(
            table,
            args.models,
            folds=args.folds,
            seed=args.seed,
            workers=args.workers,
            scheduler=args.scheduler,
        )
    scores = per_pair(result.pointwise, result.table.index)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scores.to_csv(out / "held_out.csv", index=False)
    print(result.table.to_string(float_format=lambda x: f"{x:.4g}"))
    print(summarise(scores).to_string(float_format=lambda x: f"{x:.4g}"))
    print(result.sentence)
    if args.loo:
        leave_one_cell_out(table, args.models, result.table, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
