"""Which model predicts held-out unguided outcomes on capture-the-flag tables?

    python studies/capture_the_flag.py [--tables 20] [--seed 0] [--agents 8] [--tasks 40]
        [--models crossed crossed_joint mats2024 joint] [--out studies/results]

Simulates tables of the shape of a public capture-the-flag benchmark: agents x tasks, per
pair one subtask-guided run of 3 to 8 subtasks (milestone rows, one trial each) and one
unguided run (an end-to-end row, one trial). Half the pairs' unguided outcomes are hidden;
each model is fitted to the rest and scored on the hidden ones: the Bernoulli log score of
its posterior predictive probability (higher is better), its expected successes beside
the observed, and whether each pair's true unguided rate lies within its central 95%
interval and below its 97.5% upper bound (the report's bound). Prints one row per model
(over all tables) and writes one row per held-out pair and model to
``capture_the_flag.csv``.

The simulator (``simulate_table``) is not any model's family. A pair's guided subtask
``m`` succeeds with ``expit(-1.5 + theta_a - d_t + v_at - delta_tm + 0.5 e_atm)``: the
agent's ability ``theta_a ~ N(0, 0.8)``, the task's difficulty ``d_t ~ N(0, 1.7)``
(shared by every agent: tasks hard for one are hard for all), how the agent gets on with
the task ``v_at ~ N(0, 0.7)``, the subtask's own difficulty ``delta_tm ~ N(0, 1)``. The
unguided run follows the subtasks without their hints, each a log-odd harder, and
succeeds along them with probability ``Q`` (their product); else it succeeds by another
path (the bypass) with ``expit(-4.2 + beta_a + theta_a - d_t + 0.5 v_at + w_at)``,
``beta_a ~ N(0, 0.7)`` the agent's own bent for other paths, ``w_at ~ N(0, 0.6)``. So
``P = Q + (1 - Q) lambda``. Calibrated to the benchmark's summary figures (8 agents x 40
tasks): 8.2% of unguided runs succeed (benchmark: 24 of 320, 7.5%), 5.6% of guided runs
pass every subtask (the milestone models' expected share there, 3.7% to 4.2%), and 70% of
unguided successes come from pairs whose guided run failed a subtask (17 of 24, 71%);
means over 40 simulated tables (``--describe`` prints them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from bayes_eval import fit
from bayes_eval.constants import AGENT, END_TO_END, TASK
from bayes_eval.errors import InputError
from bayes_eval.messages import collected

MODELS = ("crossed", "crossed_joint", "mats2024", "joint")
LEVEL = 0.975  # the report's one-sided bound


def simulate_table(rng, agents: int = 8, tasks: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A capture-the-flag table (the module's simulator) and its truth.

    Returns
    -------
    evidence : pandas.DataFrame
        ``agent, task, method, step, successes, trials``: per pair, one milestone row per
        subtask and one end-to-end row, each of one trial.
    truth : pandas.DataFrame
        Per pair: ``rate`` (the true unguided rate ``P``), ``path`` (its part along the
        subtasks, ``Q``) and ``guided`` (the chance the guided run passes every subtask).
    """
    theta = rng.normal(0.0, 0.8, agents)
    bent = rng.normal(0.0, 0.7, agents)
    difficulty = rng.normal(0.0, 1.7, tasks)
    subtasks = rng.integers(3, 9, tasks)
    rows, truth = [], []
    for a in range(agents):
        for t in range(tasks):
            agent, task = f"agent_{a}", f"task_{t:02d}"
            affinity = rng.normal(0.0, 0.7)
            logit = -1.5 + theta[a] - difficulty[t] + affinity - rng.normal(0.0, 1.0, subtasks[t])
            logit = logit + rng.normal(0.0, 0.5, subtasks[t])
            path = float(np.prod(special.expit(logit - 1.0)))
            bypass = special.expit(
                -4.2 + bent[a] + theta[a] - difficulty[t] + 0.5 * affinity + rng.normal(0.0, 0.6)
            )
            rate = path + (1.0 - path) * bypass
            guided = special.expit(logit)
            for m, p in enumerate(guided, start=1):
                rows.append((agent, task, "milestone", m, int(rng.random() < p), 1))
            rows.append((agent, task, END_TO_END, np.nan, int(rng.random() < rate), 1))
            truth.append((agent, task, rate, path, float(np.prod(guided))))
    columns = ["agent", "task", "method", "step", "successes", "trials"]
    return (
        pd.DataFrame(rows, columns=columns),
        pd.DataFrame(truth, columns=[AGENT, TASK, "rate", "path", "guided"]),
    )


def describe(evidence: pd.DataFrame, truth: pd.DataFrame) -> dict:
    """The summary figures the simulator is calibrated to, for one table."""
    e2e = evidence[evidence["method"] == END_TO_END].set_index([AGENT, TASK])["successes"]
    milestones = evidence[evidence["method"] != END_TO_END]
    passed = milestones.groupby([AGENT, TASK])["successes"].min()
    won = e2e[e2e == 1].index
    return dict(
        unguided=e2e.mean(),
        guided_every=truth["guided"].mean(),
        failed_subtask=1.0 - passed.loc[won].mean() if len(won) else np.nan,
        subtask_rate=milestones["successes"].mean(),
    )


def held_out_split(evidence: pd.DataFrame, rng) -> tuple[pd.DataFrame, list]:
    """The table with half its pairs' end-to-end rows hidden, and those pairs."""
    e2e = evidence[evidence["method"] == END_TO_END]
    pairs = list(zip(e2e[AGENT], e2e[TASK], strict=True))
    hidden = [pairs[i] for i in np.sort(rng.permutation(len(pairs))[: len(pairs) // 2])]
    index = pd.MultiIndex.from_arrays([evidence[AGENT], evidence[TASK]])
    hide = index.isin(hidden) & (evidence["method"] == END_TO_END).to_numpy()
    return evidence[~hide].reset_index(drop=True), hidden


def score(posterior, hidden, outcome: dict, truth: pd.DataFrame) -> pd.DataFrame:
    """One row per hidden pair: the outcome, the predictive probability of a success, the
    log score, and whether the true rate lies within the central 95% interval and below
    the ``LEVEL`` bound of the pair's draws."""
    rates = truth.set_index([AGENT, TASK])["rate"]
    draws = posterior.draws["p_task"]
    rows = []
    for agent, task in hidden:
        p = np.clip(draws.sel({AGENT: agent, TASK: task}).values.ravel(), 0.0, 1.0)
        y, mean, true = outcome[agent, task], float(p.mean()), rates[agent, task]
        low, high, bound = np.quantile(p, [0.025, 0.975, LEVEL])
        rows.append(
            dict(
                agent=agent,
                task=task,
                outcome=y,
                predicted=mean,
                log_score=float(np.log(mean if y else 1.0 - mean)),
                rate=true,
                within=bool(low <= true <= high),
                below_bound=bool(true <= bound),
            )
        )
    return pd.DataFrame(rows)


def run_table(index: int, seed: int, models, agents: int, tasks: int) -> pd.DataFrame:
    """Every model on simulated table ``index``: its held-out rows."""
    rng = np.random.default_rng([seed, index])
    evidence, truth = simulate_table(rng, agents, tasks)
    shown, hidden = held_out_split(evidence, rng)
    e2e = evidence[evidence["method"] == END_TO_END]
    outcome = dict(zip(zip(e2e[AGENT], e2e[TASK], strict=True), e2e["successes"], strict=True))
    out = []
    for model in models:
        start = time.perf_counter()
        with collected():
            posterior = fit(shown, model, seed=seed + index)
        seconds = time.perf_counter() - start
        rows = score(posterior, hidden, outcome, truth)
        ok = posterior.diagnostics is None or posterior.diagnostics.ok
        rows = rows.assign(table=index, model=model, diagnostics_ok=ok, seconds=seconds)
        out.append(rows)
        print(
            f"table {index}: {model} log score {rows['log_score'].sum():.2f}, expected "
            f"{rows['predicted'].sum():.1f} of {rows['outcome'].sum()}, {seconds:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return pd.concat(out, ignore_index=True)


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, over the tables: the mean log score per table (and its standard error),
    expected and observed successes per table, coverage of the central 95% interval and
    of the 97.5% bound (all pairs; pairs whose true rate is below 0.05), diagnostics passed
    and the median fit time."""
    per_table = rows.groupby(["model", "table"], sort=False).agg(
        log_score=("log_score", "sum"),
        expected=("predicted", "sum"),
        observed=("outcome", "sum"),
        ok=("diagnostics_ok", "first"),
        seconds=("seconds", "first"),
    )
    grouped = per_table.groupby(level="model", sort=False)
    low = rows[rows["rate"] < 0.05].groupby("model", sort=False)
    whole = rows.groupby("model", sort=False)
    return pd.DataFrame(
        {
            "tables": grouped.size(),
            "log_score": grouped["log_score"].mean(),
            "log_score_se": grouped["log_score"].std(ddof=1) / np.sqrt(grouped.size()),
            "expected": grouped["expected"].mean(),
            "observed": grouped["observed"].mean(),
            "within_95": whole["within"].mean(),
            "below_bound": whole["below_bound"].mean(),
            "below_bound_rate_under_0.05": low["below_bound"].mean(),
            "diagnostics_passed": grouped["ok"].mean(),
            "median_seconds": grouped["seconds"].median(),
        }
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--out", default="studies/results")
    parser.add_argument(
        "--describe", action="store_true", help="print the simulator's summary figures only"
    )
    args = parser.parse_args(argv)
    if args.describe:
        rng = np.random.default_rng(args.seed)
        figures = [describe(*simulate_table(rng, args.agents, args.tasks)) for _ in range(40)]
        figures = pd.DataFrame(figures).agg(["mean", "min", "max"])
        print(figures.to_string(float_format="{:.3f}".format))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    for index in range(args.tables):
        try:
            tables.append(run_table(index, args.seed, args.models, args.agents, args.tasks))
        except InputError as exc:
            print(f"error: table {index}: {exc}", file=sys.stderr)
            return 2
        rows = pd.concat(tables, ignore_index=True)
        rows.to_csv(out / "capture_the_flag.csv", index=False)
    print(summarise(rows).to_string(float_format=lambda x: f"{x:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
