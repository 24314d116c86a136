"""Generate the shipped example evidence tables, with known true rates.

Run from the repository root: ``python scripts/make_example.py``. Fixed seeds, so the
files are reproducible.

* data/example_evidence.csv: every kind of evidence, for the exact models and the chain;
  the true rates are the constants below.
* data/example_pooled.csv: many tasks with milestones, half with end-to-end runs, drawn
  from the hierarchy the pooled models assume plus a bypass probability (success by paths
  the milestones miss); the true rates are in data/example_pooled_truth.csv and 200 new
  end-to-end runs per task, ground truth for ``bayes-eval calibrate``, in
  data/example_pooled_heldout.csv.
* data/example_graded.csv and data/example_audit.csv: end-to-end runs scored by two
  graders that err, with known sensitivity and specificity, and their audit (runs a human
  scored again), for ``bayes-eval fit --audit``; the true rates are ``GRADED_TRUTH``.
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


POOLED_SEED = 20241123
POOLED_TASKS = 10
# Per agent: mean milestone rate across tasks, its concentration, the within-task
# concentration, and the mean bypass probability.
POOLED_AGENTS = {"agent-a": (0.6, 8.0, 30.0, 0.10), "agent-b": (0.45, 8.0, 30.0, 0.05)}
HELD_OUT_SEED = 20241124
HELD_OUT_TRIALS = 200


def pooled() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Milestones for every task, end-to-end runs for every other one, with bypass."""
    rng = np.random.default_rng(POOLED_SEED)
    rows, truth = [], []
    for agent, (mu, kappa_agent, kappa, bypass_mean) in POOLED_AGENTS.items():
        for t in range(POOLED_TASKS):
            task = f"task_{t:02d}"
            mu_task = rng.beta(mu * kappa_agent, (1 - mu) * kappa_agent)
            rates = rng.beta(mu_task * kappa, (1 - mu_task) * kappa, int(rng.integers(2, 7)))
            bypass = rng.beta(bypass_mean * 20, (1 - bypass_mean) * 20)
            q = float(np.prod(rates))
            p_task = q + (1 - q) * bypass
            truth.append(
                dict(
                    agent=agent,
                    task=task,
                    milestone_product=round(q, 6),
                    bypass=round(bypass, 6),
                    end_to_end_rate=round(p_task, 6),
                )
            )
            for step, p in enumerate(rates, start=1):
                rows.append(
                    dict(
                        agent=agent,
                        task=task,
                        method="milestone",
                        step=step,
                        successes=rng.binomial(50, p),
                        trials=50,
                    )
                )
            if t % 2 == 0:
                rows.append(
                    dict(
                        agent=agent,
                        task=task,
                        method="end_to_end",
                        successes=rng.binomial(40, p_task),
                        trials=40,
                    )
                )
    table = pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])
    table["step"] = table["step"].astype("Int64")
    return table, pd.DataFrame(truth)


GRADED_SEED = 20241125
GRADED_RUNS = 200
# grader -> (sensitivity, specificity, audited true successes, audited true failures)
GRADERS = {"llm-judge": (0.85, 0.995, 60, 240), "unit-tests": (0.98, 0.999, 30, 70)}
# task -> (true end-to-end rate, the grader that scores its runs), all of agent-a's
GRADED_TRUTH = {
    "recon": (0.30, "unit-tests"),
    "phishing_kit": (0.10, "llm-judge"),
    "lateral_movement": (0.02, "llm-judge"),
    "persistence": (0.005, "llm-judge"),
    "exfiltration": (0.001, "llm-judge"),
    "self_replication": (0.0, "unit-tests"),
}


def graded() -> tuple[pd.DataFrame, pd.DataFrame]:
    """GRADED_RUNS runs per task, each graded: a true success is called one with the
    grader's sensitivity, a true failure with one minus its specificity; and each
    grader's audit, as counts of (truth, graded)."""
    rng = np.random.default_rng(GRADED_SEED)
    rows = []
    for task, (rate, grader) in GRADED_TRUTH.items():
        sensitivity, specificity = GRADERS[grader][:2]
        true = rng.binomial(GRADED_RUNS, rate)
        called = rng.binomial(true, sensitivity) + rng.binomial(GRADED_RUNS - true, 1 - specificity)
        rows.append(
            dict(
                agent="agent-a",
                task=task,
                method="end_to_end",
                successes=called,
                trials=GRADED_RUNS,
                grader=grader,
            )
        )
    audit = []
    for grader, (sensitivity, specificity, positives, negatives) in GRADERS.items():
        detected = rng.binomial(positives, sensitivity)
        alarms = rng.binomial(negatives, 1 - specificity)
        for truth, called, runs in (
            (1, 1, detected),
            (1, 0, positives - detected),
            (0, 0, negatives - alarms),
            (0, 1, alarms),
        ):
            if runs:
                audit.append(dict(grader=grader, truth=truth, graded=called, runs=runs))
    return pd.DataFrame(rows), pd.DataFrame(audit)


def held_out(truth: pd.DataFrame) -> pd.DataFrame:
    """Ground truth for calibration: HELD_OUT_TRIALS new end-to-end runs of every task."""
    rng = np.random.default_rng(HELD_OUT_SEED)
    return pd.DataFrame(
        dict(
            agent=truth["agent"],
            task=truth["task"],
            method="end_to_end",
            successes=rng.binomial(HELD_OUT_TRIALS, truth["end_to_end_rate"]),
            trials=HELD_OUT_TRIALS,
        )
    )


def main() -> None:
    data = Path(__file__).resolve().parent.parent / "data"
    table, truth = pooled()
    table.to_csv(data / "example_pooled.csv", index=False)
    truth.to_csv(data / "example_pooled_truth.csv", index=False)
    held_out(truth).to_csv(data / "example_pooled_heldout.csv", index=False)
    print(f"wrote {data / 'example_pooled.csv'} ({len(table)} rows), its truth and held-out runs")
    runs, audit = graded()
    runs.to_csv(data / "example_graded.csv", index=False)
    audit.to_csv(data / "example_audit.csv", index=False)
    print(f"wrote {data / 'example_graded.csv'} and its audit, {data / 'example_audit.csv'}")
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
