"""The milestone-assumption check: end-to-end runs against the milestones' posterior."""

import numpy as np
import pandas as pd

import bayes_eval
from bayes_eval.checks.assumption import milestone_assumption


def simulate(rng, bypass: float, n_tasks=30):
    rows = []
    for t in range(n_tasks):
        rates = rng.uniform(0.3, 0.7, 3)
        q = float(np.prod(rates))
        p_task = q + (1 - q) * bypass
        for step, p in enumerate(rates, start=1):
            rows.append(
                dict(
                    task=f"t{t}",
                    method="milestone",
                    step=step,
                    successes=rng.binomial(100, p),
                    trials=100,
                )
            )
        rows.append(
            dict(task=f"t{t}", method="end_to_end", successes=rng.binomial(100, p_task), trials=100)
        )
    return bayes_eval.load_evidence(pd.DataFrame(rows))


def test_milestone_assumption_detects_bypass_paths_and_spares_honest_milestones():
    rng = np.random.default_rng(9)
    honest = milestone_assumption(simulate(rng, bypass=0.0))
    assert honest["contradicted"].mean() <= 0.1  # alpha = 0.01 per task, plus model noise
    bypassed = milestone_assumption(simulate(rng, bypass=0.3))
    assert bypassed["contradicted"].mean() >= 0.8
    assert bypassed["message"].str.contains("paths the milestones do not describe").any()
