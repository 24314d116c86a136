"""Does the joint model predict held-out unguided (end-to-end) outcomes better than the
milestone method?

    python studies/held_out.py [--data TABLE.csv] [--folds 5] [--models mats2024
        hierarchical joint] [--seed 0] [--out studies/results] [--rate LOW HIGH]
        [--milestones LOW HIGH] [--workers N | --scheduler ADDRESS]

The table holds milestone rows (for example subtask-guided runs) and end-to-end rows
(unguided runs) of the same (agent, task) pairs. Without ``--data`` it is a simulated
capture-the-flag table: 8 agents x 40 tasks, one trial per milestone and per end-to-end
run, every pair run end to end, a bypass on every task (``random_design`` with
``CAPTURE_THE_FLAG``; ``--rate`` and ``--milestones`` narrow its ranges). The pairs with
end-to-end rows are split at random into ``--folds`` folds. For each fold, its
end-to-end rows are held out and every model that reads end-to-end rows is fitted to the
rest: ``joint`` to every milestone row and the other folds' end-to-end rows, a crossed
end-to-end model (``crossed``, which predicts pairs it never saw) to the other folds'
end-to-end rows alone. The milestone models (``mats2024``, the milestone method;
``hierarchical``, its pooled form) are fitted once, to the milestone rows, and scored on
every fold. Each held-out outcome, ``k`` successes in ``n``, is
scored by its posterior predictive probability ``E[Binomial(k | n, P)]`` over the
model's draws of ``P``: the log score, and the Brier score of the predicted rate
against ``k / n``. Prints, per model, the mean log score and Brier score per held-out
pair and the paired difference from ``mats2024`` with its standard error, whether every
fit passed its diagnostics, the most attempts a fit needed and the time per fit; writes
one row per held-out pair and model to ``held_out.csv``. ``--workers N`` runs the fits
on a local dask cluster, ``--scheduler ADDRESS`` on a running one, with the same scores
as serially.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_eval import fit
from bayes_eval.checks.simulate import CAPTURE_THE_FLAG, random_design
from bayes_eval.constants import END_TO_END
from bayes_eval.inference.retry import fit_attempts
from bayes_eval.inference.sweep import place_arguments, run_sweep
from bayes_eval.messages import collected
from bayes_eval.specs import load_spec

MODELS = ("mats2024", "hierarchical", "joint")
BASELINE = "mats2024"


def fold_of_pairs(table: pd.DataFrame, folds: int, rng) -> pd.Series:
    """A fold number per (agent, task) pair with end-to-end rows, at random, the folds as
    equal as they can be."""
    pairs = table.loc[table["method"] == "end_to_end", ["agent", "task"]].drop_duplicates()
    order = rng.permutation(len(pairs))
    return pd.Series(order % folds, index=pd.MultiIndex.from_frame(pairs), name="fold")


def predictive_scores(posterior, held: pd.DataFrame) -> pd.DataFrame:
    """Log and Brier scores of each held-out end-to-end row under ``posterior``'s draws
    of ``P``: ``log mean_s Binomial(k | n, P_s)`` and ``(mean_s P_s - k / n)^2``."""
    draws = posterior.draws["p_task"]
    rows = []
    for row in held.itertuples(index=False):
        p = draws.sel(agent=row.agent, task=row.task).values.ravel()
        log_pmf = stats.binom.logpmf(row.successes, row.trials, p)
        rows.append(
            dict(
                agent=row.agent,
                task=row.task,
                successes=row.successes,
                trials=row.trials,
                predicted=float(p.mean()),
                log_score=float(special.logsumexp(log_pmf) - np.log(p.size)),
                brier=float((p.mean() - row.successes / row.trials) ** 2),
            )
        )
    return pd.DataFrame(rows)


def study(
    table: pd.DataFrame, models, folds: int, seed: int, workers=None, scheduler=None
) -> pd.DataFrame:
    """Every model's scores on every held-out end-to-end row. A model that reads
    end-to-end rows is refitted fold by fold; a milestone model sees the same rows in
    every fold and is fitted once. The fits run serially or on a dask cluster
    (``workers``, ``scheduler``), each seeded by its fold."""
    kinds = {}
    for model in models:
        spec = load_spec(model)
        if spec.kind == END_TO_END and spec.pooling != "crossed":
            raise ValueError(
                f"{model} reads end-to-end rows alone and cannot predict a pair whose rows "
                "are held out; use a crossed model (crossed) or one that reads milestones"
            )
        kinds[model] = spec.kind
    rng = np.random.default_rng(seed)
    fold = fold_of_pairs(table, folds, rng)
    pair = pd.MultiIndex.from_frame(table[["agent", "task"]])
    end_to_end = (table["method"] == "end_to_end").to_numpy()
    fold_of_row = fold.reindex(pair).to_numpy()
    fits = [(model, f) for model in models for f in range(folds if refitted(kinds[model]) else 1)]

    def done(index, _scores):
        model, f = fits[index]
        label = f"fold {f + 1}/{folds}" if refitted(kinds[model]) else "every fold"
        print(f"{model}, {label} done", file=sys.stderr, flush=True)

    setup = dict(
        fits=fits,
        table=table,
        end_to_end=end_to_end,
        fold_of_row=fold_of_row,
        fold=fold,
        kinds=kinds,
        seed=seed,
    )
    results = run_sweep(
        _fold_fit, len(fits), setup, workers=workers, scheduler=scheduler, on_result=done
    )
    return pd.concat(results, ignore_index=True)


def refitted(kind: str) -> bool:
    """Whether a model of ``kind`` reads end-to-end rows, so is refitted fold by fold."""
    return kind in (END_TO_END, "joint")


def _fold_fit(index: int, setup: dict) -> pd.DataFrame:
    """Fit one (model, fold) and score its held-out rows."""
    model, f = setup["fits"][index]
    table, end_to_end, fold = setup["table"], setup["end_to_end"], setup["fold"]
    kind = setup["kinds"][model]
    held_out = end_to_end & ((setup["fold_of_row"] == f) if refitted(kind) else True)
    kept = ~end_to_end | ~held_out
    if kind == END_TO_END:  # it reads the end-to-end rows alone
        kept &= end_to_end
    start = time.perf_counter()
    with collected():  # the rows each model leaves out, known
        posterior = fit(table[kept], model, seed=setup["seed"] + f)
    seconds = time.perf_counter() - start
    provenance = str(posterior.summary()["provenance"].iloc[0])
    scores = predictive_scores(posterior, table[held_out])
    return scores.assign(
        model=model,
        fold=fold.loc[list(zip(scores["agent"], scores["task"], strict=True))].values,
        passed=posterior.diagnostics.ok if posterior.is_mcmc else True,
        attempts=fit_attempts(provenance),
        seconds=seconds,
    )


def summarise(scores: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Per model: held-out pairs, mean log and Brier scores, the paired differences from
    ``baseline`` (positive log-score difference: better) with their standard errors,
    and whether every fit passed."""
    keyed = scores.set_index(["agent", "task", "model"])
    base = keyed.xs(baseline, level="model") if baseline in scores["model"].values else None
    rows = {}
    for model, group in scores.groupby("model", sort=False):
        row = dict(
            pairs=len(group),
            log_score=group["log_score"].mean(),
            brier=group["brier"].mean(),
            all_passed=bool(group["passed"].all()),
            fits=group["seconds"].nunique(),
            seconds_per_fit=group["seconds"].unique().mean(),
            most_attempts=group["attempts"].max(),
        )
        if base is not None and model != baseline:
            mine = keyed.xs(model, level="model").loc[base.index]
            for name in ("log_score", "brier"):
                diff = mine[name] - base[name]
                row[f"{name}_vs_{baseline}"] = diff.mean()
                row[f"{name}_vs_{baseline}_se"] = diff.std(ddof=1) / np.sqrt(len(diff))
        rows[model] = row
    return pd.DataFrame.from_dict(rows, orient="index")


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
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scores = study(
        table, args.models, args.folds, args.seed, workers=args.workers, scheduler=args.scheduler
    )
    scores.to_csv(out / "held_out.csv", index=False)
    print(summarise(scores).to_string(float_format=lambda x: f"{x:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
