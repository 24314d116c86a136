"""How far a change moved a fit's bounds, in their Monte Carlo error: two ``summary.csv``
files of the same table and model, before and after.

    python scripts/bound_shift.py BEFORE/summary.csv AFTER/summary.csv

Prints, over the pairs both have, each bound's change over its joint Monte Carlo standard
error ``(upper_after - upper_before) / sqrt(upper_mcse_before^2 + upper_mcse_after^2)``:
its largest size, mean and standard deviation (about 0 and 1 where the two fits differ by
Monte Carlo error alone), how many exceed 2 and 3, the pairs run and never run apart; and
the ratio of the bounds' Monte Carlo errors, after over before.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    before, after = pd.read_csv(args.before), pd.read_csv(args.after)
    both = before.merge(after, on=["agent", "task", "method"], suffixes=("_before", "_after"))
    joint = np.hypot(both["upper_mcse_before"], both["upper_mcse_after"])
    shift = (both["upper_after"] - both["upper_before"]) / joint
    print(f"{len(both)} pairs in both ({len(before)} before, {len(after)} after)")
    for part, mask in (
        ("all", np.ones(len(both), dtype=bool)),
        ("run", both["observed_before"].to_numpy(bool)),
        ("never run", ~both["observed_before"].to_numpy(bool)),
    ):
        if not mask.any():
            continue
        seen = shift[mask]
        print(
            f"{part}: {mask.sum()} pairs, change over joint MCSE: largest "
            f"{seen.abs().max():.2f}, mean {seen.mean():.2f}, sd {seen.std():.2f}; "
            f"over 2: {(seen.abs() > 2).sum()} ({(seen.abs() > 2).mean():.1%}), "
            f"over 3: {(seen.abs() > 3).sum()}"
        )
    ratio = both["upper_mcse_after"] / both["upper_mcse_before"]
    print(
        f"upper_mcse after over before: median {ratio.median():.2f}, quartiles "
        f"{ratio.quantile(0.25):.2f} to {ratio.quantile(0.75):.2f}"
    )


if __name__ == "__main__":
    main()
