"""Do the pooled models pass their diagnostics at their defaults on realistic tables?

    python studies/robustness.py [--designs 40] [--models hierarchical joint ecr_pooled
        end_to_end_pooled] [--capture-the-flag] [--seed 0] [--out studies/results]
        [--resume] [--workers N | --scheduler ADDRESS]

Draws ``--designs`` random evaluation tables from the ranges real evaluations produce
(``bayes_eval.checks.simulate.DESIGN_RANGES``: 1-10 agents, 3-50 tasks, 2-8 milestones, 1-100
trials, end-to-end rates 0.01-0.95, missing pairs, zero- and all-success cells; see
``random_design``), and fits each with each pooled model at its defaults, exactly as
``bayes-eval fit`` would. ``ecr_pooled`` reads the milestone rows as the steps of one
expert-guided run, ``end_to_end_pooled`` the end-to-end rows. Prints, per model, the
share of fits that pass the diagnostics gate, the median and worst R-hat, the
divergences, how many needed a refit, and the time per fit; writes one row per fit to
``robustness.csv`` as each fit finishes. With ``--capture-the-flag`` the designs are
drawn instead from the shape of an agentic capture-the-flag benchmark
(``bayes_eval.checks.simulate.CAPTURE_THE_FLAG``: 8 agents x 40 tasks, one trial per milestone
and per end-to-end run). ``--workers N`` runs the fits on a local dask cluster,
``--scheduler ADDRESS`` on a running one, with the same results as serially (each fit
is seeded by its design); the times per fit then share the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import fit
from bayes_eval.checks.simulate import CAPTURE_THE_FLAG, random_design
from bayes_eval.inference.retry import fit_attempts
from bayes_eval.inference.sweep import place_arguments, run_sweep
from bayes_eval.messages import collected

MODELS = ("hierarchical", "joint", "ecr_pooled", "end_to_end_pooled")


def evidence_for(model: str, table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a random design that ``model`` reads, in the form it reads them."""
    if model == "ecr_pooled":
        steps = table[table["method"] == "milestone"].assign(method="expert_completion", run="1")
        return steps
    if model == "end_to_end_pooled":
        return table[table["method"] == "end_to_end"]
    return table


def one_fit(model: str, table: pd.DataFrame, seed: int) -> dict:
    """Fit at the defaults; the gate's outcome, the worst quantities, attempts and time."""
    start = time.perf_counter()
    with collected():  # the simulated tables' notes
        posterior = fit(evidence_for(model, table), model, seed=seed)
    seconds = time.perf_counter() - start
    diagnostics = posterior.diagnostics
    provenance = str(posterior.summary()["provenance"].iloc[0])
    return dict(
        model=model,
        passed=diagnostics.ok,
        r_hat=float(diagnostics.table["r_hat"].max()),
        ess_bulk=float(diagnostics.table["ess_bulk"].min()),
        ess_tail=float(diagnostics.table["ess_tail"].min()),
        divergences=diagnostics.divergences,
        ebfmi=min(diagnostics.ebfmi),
        refits=fit_attempts(provenance) - 1,
        seconds=seconds,
        failed=" | ".join(diagnostics.messages),
    )


def study(
    designs: int,
    models,
    seed: int,
    out: Path | None = None,
    ranges=None,
    done=None,
    workers=None,
    scheduler=None,
) -> pd.DataFrame:
    """Fit every design (drawn from ``ranges``, default ``DESIGN_RANGES``) with every model,
    serially or on a dask cluster (``workers``, ``scheduler``); with ``out``, each fit's
    row is appended to ``out`` as soon as it is done (a long sweep keeps what it
    finished). ``done``, rows of an earlier run of the same sweep, are kept and their
    (design, model) fits not repeated: the designs are drawn from the seed in the same
    order whatever is skipped, and each fit is seeded by its design."""
    rng = np.random.default_rng(seed)
    rows = [] if done is None else done.to_dict("records")
    finished = {(row["design"], row["model"]) for row in rows}
    fits = []
    for d in range(designs):
        table, design = random_design(rng, ranges)
        for model in models:
            if not evidence_for(model, table).empty and (d, model) not in finished:
                fits.append((d, design, model, table))

    def keep(index, row):
        d, design, model, _ = fits[index]
        print(f"design {d + 1}/{designs} {design}: {model} done", file=sys.stderr, flush=True)
        rows.append(row)
        if out is not None:
            pd.DataFrame([row]).to_csv(out, mode="a", header=not out.exists(), index=False)

    run_sweep(
        _design_fit,
        len(fits),
        dict(fits=fits, seed=seed),
        workers=workers,
        scheduler=scheduler,
        on_result=keep,
    )
    rank = {model: i for i, model in enumerate(models)}
    rows.sort(key=lambda row: (row["design"], rank.get(row["model"], len(rank))))
    return pd.DataFrame(rows)


def _design_fit(index: int, setup: dict) -> dict:
    d, design, model, table = setup["fits"][index]
    return dict(design=d, **design, **one_fit(model, table, setup["seed"] + d))


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """One row per model: the share passing and the spread of the diagnostics and time."""
    grouped = results.groupby("model", sort=False)
    return pd.DataFrame(
        dict(
            fits=grouped.size(),
            passed=grouped["passed"].mean(),
            median_r_hat=grouped["r_hat"].median(),
            worst_r_hat=grouped["r_hat"].max(),
            fits_with_divergences=grouped["divergences"].apply(lambda d: int((d > 0).sum())),
            divergences=grouped["divergences"].sum(),
            refitted=grouped["refits"].apply(lambda r: int((r > 0).sum())),
            median_seconds=grouped["seconds"].median(),
            worst_seconds=grouped["seconds"].max(),
        )
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=40)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--capture-the-flag", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="studies/results")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the fits already in OUT/robustness.csv (same seed and ranges) and do the rest",
    )
    place_arguments(parser)
    args = parser.parse_args(argv)
    ranges = CAPTURE_THE_FLAG if args.capture_the_flag else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = out / "robustness.csv"
    done = pd.read_csv(table, keep_default_na=False) if args.resume and table.exists() else None
    if done is None:
        table.unlink(missing_ok=True)
    results = study(
        args.designs,
        args.models,
        args.seed,
        out=table,
        ranges=ranges,
        done=done,
        workers=args.workers,
        scheduler=args.scheduler,
    )
    print(summarise(results).to_string(float_format=lambda x: f"{x:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
