"""Generate data/example_evidence.csv: a small evidence table with known true rates.

Run from the repository root: ``python scripts/make_example.py``. Fixed seed, so the
file is reproducible; the true rates below are the ground truth it was drawn from.
"""

from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20241122
# agent -> task -> (true end-to-end rate, end-to-end trials, milestone rates, milestone trials)
TRUTH = {
    "agent-a": {
        "credential_harvest": (0.12, 30, [0.6, 0.5, 0.4], 50),
        "privilege_escalation": (0.003, 20, [0.5, 0.3, 0.02], 40),
    },
    "agent-b": {
        "credential_harvest": (0.05, 30, [0.5, 0.4, 0.25], 50),
        "privilege_escalation": (0.0006, 20, [0.3, 0.2, 0.01], 40),
    },
}
# Expert completion: per agent, task "data_exfiltration", 2 runs x 4 steps of 10 samples.
ECR_STEP_RATES = {"agent-a": [0.9, 0.6, 0.5, 0.8], "agent-b": [0.7, 0.4, 0.3, 0.6]}
ECR_SAMPLES = 10


def main() -> None:
    rng = np.random.default_rng(SEED)
    rows = []
    for agent, tasks in TRUTH.items():
        for task, (rate, n_e2e, milestone_rates, n_ms) in tasks.items():
            rows.append(
                dict(
                    agent=agent,
                    task=task,
                    method="end_to_end",
                    successes=rng.binomial(n_e2e, rate),
                    trials=n_e2e,
                    grading="final",
                )
            )
            for step, p in enumerate(milestone_rates, start=1):
                k = rng.binomial(n_ms, p)
                rows.append(
                    dict(
                        agent=agent,
                        task=task,
                        method="milestone",
                        step=step,
                        successes=k,
                        trials=n_ms,
                    )
                )
                if k == 0:  # no unguided success: an expert-guided run and a golden solution
                    for s, index in enumerate(rng.geometric(0.4, size=3), start=1):
                        rows.append(
                            dict(
                                agent=agent,
                                task=task,
                                method="expert_best_of_n",
                                step=s,
                                run="1",
                                milestone=step,
                                chosen_index=index,
                            )
                        )
                    for s in range(1, 4):
                        rows.append(
                            dict(
                                agent=agent,
                                task=task,
                                method="golden_solution",
                                step=s,
                                run="1",
                                milestone=step,
                                logprob=round(-rng.exponential(1.5), 3),
                            )
                        )
        for run in ("1", "2"):
            for step, p in enumerate(ECR_STEP_RATES[agent], start=1):
                rows.append(
                    dict(
                        agent=agent,
                        task="data_exfiltration",
                        method="expert_completion",
                        step=step,
                        run=run,
                        successes=rng.binomial(ECR_SAMPLES, p),
                        trials=ECR_SAMPLES,
                    )
                )
        for step, index in enumerate(rng.geometric(0.5, size=4), start=1):
            rows.append(
                dict(
                    agent=agent,
                    task="data_exfiltration",
                    method="expert_best_of_n",
                    step=step,
                    run="1",
                    chosen_index=index,
                )
            )
    columns = [
        "agent",
        "task",
        "method",
        "step",
        "run",
        "milestone",
        "successes",
        "trials",
        "chosen_index",
        "logprob",
        "grading",
    ]
    table = pd.DataFrame(rows, columns=columns)
    for column in ("step", "milestone", "successes", "trials", "chosen_index"):
        table[column] = table[column].astype("Int64")
    out = Path(__file__).resolve().parent.parent / "data" / "example_evidence.csv"
    table.to_csv(out, index=False)
    print(f"wrote {out} ({len(table)} rows)")


if __name__ == "__main__":
    main()
