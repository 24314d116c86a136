"""``crossed_joint`` against ``crossed`` on capture-the-flag tables of 320 and 1,000 pairs,
in one run.

Run from the repository root:

    python benchmarks/crossed_joint_scale.py [--sizes 8x40 20x50] [--seed 5]

For each size, a simulated capture-the-flag table (``studies/capture_the_flag.py``: per
pair 3 to 8 subtasks and one unguided run, one trial each) is fitted twice on this
machine, each at its spec's defaults (nutpie, 4 chains of 2000 draws after 1000 tuning
steps, compilation included, a fresh process's caches): ``crossed_joint`` to every row,
``crossed`` to the unguided rows alone. Prints each fit's wall time, whether its
diagnostics passed at the first fit, and the ratio of the two times: what reading the
milestones costs beyond the crossed model on the same pairs; then the time each fit
then takes to make its ArviZ tree (the predictive, pointwise log-likelihood and prior
groups, which writing a run folder needs), and the ratio of the totals.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "studies"))

from capture_the_flag import simulate_table  # noqa: E402

from bayes_eval import fit  # noqa: E402
from bayes_eval.inference.retry import fit_attempts  # noqa: E402
from bayes_eval.messages import collected  # noqa: E402


def timed(table, model: str) -> tuple[float, bool, float]:
    """Seconds to fit ``model`` to ``table``, whether it passed at its first fit, and
    seconds to make the fit's tree."""
    start = time.perf_counter()
    with collected():
        posterior = fit(table, model)
    seconds = time.perf_counter() - start
    first = fit_attempts(posterior.summary()["provenance"].iloc[0]) == 1
    start = time.perf_counter()
    assert "log_likelihood" in posterior.tree
    return seconds, bool(posterior.diagnostics.ok and first), time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["8x40", "20x50"])
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    for size in args.sizes:
        agents, tasks = (int(n) for n in size.split("x"))
        table, _ = simulate_table(np.random.default_rng(args.seed), agents, tasks)
        linked = timed(table, "crossed_joint")
        crossed = timed(table[table["method"] == "end_to_end"], "crossed")
        print(
            f"{agents} x {tasks} ({agents * tasks} pairs, {len(table)} rows): crossed_joint "
            f"{linked[0]:.1f} s (passed at the first fit: {linked[1]}), crossed "
            f"{crossed[0]:.1f} s (passed: {crossed[1]}), ratio {linked[0] / crossed[0]:.2f}; "
            f"their trees {linked[2]:.1f} s and {crossed[2]:.1f} s, ratio of the totals "
            f"{(linked[0] + linked[2]) / (crossed[0] + crossed[2]):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
