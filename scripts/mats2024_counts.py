"""Find per-milestone counts that reproduce data/mats2024_appendix.csv's milestone columns.

Run from the repository root: ``python scripts/mats2024_counts.py``. For each task, with
100 trials per milestone and the mats2024 spec's uniform Beta(1, 1) prior, list every
(unordered) set of milestone success counts whose posterior mean, prod (k + 1) / 102,
rounds to the published ``milestone_mean``; then keep those whose 97.5% quantile also
rounds to the published ``milestone_q975``. Writes data/mats2024_counts.csv with the first
such set per task (milestone order is immaterial to the product) and prints how many sets
matched each column, so tasks that no counts reproduce are reported, not hidden.
"""

from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval.exact.products import BetaProduct, summarise_products

TRIALS = 100
ROOT = Path(__file__).resolve().parent.parent


def mean_matches(n_milestones: int, mean: float) -> np.ndarray:
    """Non-increasing count tuples whose uniform-prior posterior mean rounds to ``mean``."""
    lo, hi = np.log(mean - 0.0005), np.log(mean + 0.0005)
    rate = np.log((np.arange(TRIALS + 1) + 1) / (TRIALS + 2))
    tuples = np.arange(TRIALS + 1)[:, None]
    logs = rate[tuples[:, 0]]
    for depth in range(1, n_milestones):
        remaining = n_milestones - depth
        # Later factors are at most the last one: prune tuples that can no longer reach lo.
        keep = logs + remaining * rate[tuples[:, -1]] >= lo
        tuples, logs = tuples[keep], logs[keep]
        new = [np.column_stack([tuples, np.full(len(tuples), k)]) for k in range(TRIALS + 1)]
        new_logs = [logs + rate[k] for k in range(TRIALS + 1)]
        ok = [tuples[:, -1] >= k for k in range(TRIALS + 1)]
        tuples = np.concatenate([t[o] for t, o in zip(new, ok, strict=True)])
        logs = np.concatenate([v[o] for v, o in zip(new_logs, ok, strict=True)])
    return tuples[(logs >= lo) & (logs < hi)]


def q975(counts: np.ndarray) -> float:
    a = counts + 1.0
    b = TRIALS - counts + 1.0
    (summary,) = summarise_products([BetaProduct(((a, b),))], np.array([0.025]))
    return float(np.exp(-summary.x_quantiles[0]))


def main() -> None:
    table = pd.read_csv(ROOT / "data" / "mats2024_appendix.csv")
    rows = []
    for record in table.itertuples():
        candidates = mean_matches(record.milestones, record.milestone_mean)
        both = [c for c in candidates if round(q975(c), 3) == record.milestone_q975]
        print(
            f"{record.task}: {len(candidates)} count sets match the mean, "
            f"{len(both)} also the 97.5% quantile"
        )
        if both:
            for step, k in enumerate(both[0], start=1):
                rows.append(
                    dict(
                        task=record.task,
                        method="milestone",
                        step=step,
                        successes=int(k),
                        trials=TRIALS,
                    )
                )
    out = ROOT / "data" / "mats2024_counts.csv"
    pd.DataFrame(rows).to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
