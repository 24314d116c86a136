"""Seeded synthetic crossed tables of a programme's size: agents x tasks of end-to-end runs.

    python benchmarks/crossed_tables.py AGENTS TASKS [--seed 0] > table.csv

``logit P[a, t] = ability_a - difficulty_t + e_at`` with abilities Normal(0, 1.5),
difficulties Normal(1, 2) and each pair's departure Normal(0, 0.8); a fifth of the pairs
are never run, the others 1 to 5 runs each (uniform), as sparse and ragged as agentic
benchmarks are. The pairs run: about 0.8 x AGENTS x TASKS (25 x 250 gives 5,000, 100 x 625
gives 50,000). Rows are the evidence's end-to-end counts (``agent, task, method,
successes, trials``), one per pair run, the same bytes for the same arguments.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from scipy import special

NEVER_RUN = 0.2
MOST_RUNS = 5
# The sizes benchmarks/scale_curve.py fits: (agents, tasks), about 0.8 x their product pairs.
SIZES = {1_000: (10, 125), 5_000: (25, 250), 20_000: (50, 500), 50_000: (100, 625)}


def crossed_table(agents: int, tasks: int, seed: int = 0) -> pd.DataFrame:
    """The end-to-end counts of an ``agents`` x ``tasks`` table (the module's docstring)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0.0, 1.5, agents)
    difficulty = rng.normal(1.0, 2.0, tasks)
    departure = rng.normal(0.0, 0.8, (agents, tasks))
    runs = rng.integers(1, MOST_RUNS + 1, (agents, tasks))
    ran = rng.random((agents, tasks)) >= NEVER_RUN
    rate = special.expit(ability[:, None] - difficulty[None, :] + departure)
    successes = rng.binomial(runs, rate)
    a, t = np.nonzero(ran)
    width_a, width_t = len(str(agents - 1)), len(str(tasks - 1))
    return pd.DataFrame(
        {
            "agent": [f"agent_{i:0{width_a}d}" for i in a],
            "task": [f"task_{j:0{width_t}d}" for j in t],
            "method": "end_to_end",
            "successes": successes[a, t],
            "trials": runs[a, t],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("agents", type=int)
    parser.add_argument("tasks", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    crossed_table(args.agents, args.tasks, args.seed).to_csv(sys.stdout, index=False)


if __name__ == "__main__":
    main()
