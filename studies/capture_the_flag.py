"""Which model predicts held-out unguided outcomes on capture-the-flag tables?

    python studies/capture_the_flag.py [--tables 20] [--first 0] [--seed 0] [--agents 8]
        [--tasks 40] [--models crossed crossed_joint mats2024 joint] [--out studies/results]
        [--summarise CSV ...] [--describe] [--runs metr_runs.csv]

Simulates tables of the shape of a public capture-the-flag benchmark: agents x tasks, per
pair one subtask-guided run of 3 to 8 subtasks (milestone rows, one trial each) and one
unguided run (an end-to-end row, one trial). Half the pairs' unguided outcomes are hidden
(half of each task's, so that every task keeps some); each model is fitted to the rest
and scored on the hidden ones: the log of its posterior predictive probability of each
hidden outcome (log score; higher is better), its expected successes beside the observed,
and whether each pair's true unguided rate lies within its central 95% interval and below
its 97.5% upper bound (the report's bound). Prints one row per model (over all tables)
and writes one row per held-out pair and model to ``capture_the_flag.csv``. Every model is fitted,
``joint`` too, which refuses tables of this shape (``bayes_eval.advice``): these figures
are why. Each table's fits depend on its index and the seed alone, so a study split over
processes (``--first``, ``--models``) and summarised together (``--summarise`` of their
files) gives the numbers of one run.

With ``--runs metr_runs.csv`` the table is METR's public runs instead (end to end only;
the human baseliners left out), split ``--tables`` times at random: the end-to-end part
of the comparison (``crossed_joint`` refuses a table without milestone rows).

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
tasks): 7.6% of unguided runs succeed (benchmark: 24 of 320, 7.5%), 5.1% of guided runs
pass every subtask (the milestone models' expected share there, 3.7% to 4.2%), and 67% of
unguided successes come from pairs whose guided run failed a subtask (17 of 24, 71%);
means over 40 simulated tables (``--describe`` prints them; 0.9% to 14% unguided
successes from table to table).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_eval import fit, read_runs
from bayes_eval.constants import AGENT, END_TO_END, TASK
from bayes_eval.errors import InputError
from bayes_eval.inference.retry import fit_attempts
from bayes_eval.messages import collected

MODELS = ("crossed", "crossed_joint", "mats2024", "joint")
BASELINE = "crossed"  # the paired differences of the log scores are from this model's
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
    """The table with half its pairs' end-to-end rows hidden (half of each task's, at
    random, so that every task keeps end-to-end runs for a model that reads only those),
    and those pairs."""
    e2e = evidence[evidence["method"] == END_TO_END]
    hidden = []
    for _, group in e2e.groupby(TASK, sort=False):
        pairs = list(zip(group[AGENT], group[TASK], strict=True))
        hidden += [pairs[i] for i in np.sort(rng.permutation(len(pairs))[: len(pairs) // 2])]
    index = pd.MultiIndex.from_arrays([evidence[AGENT], evidence[TASK]])
    hide = index.isin(hidden) & (evidence["method"] == END_TO_END).to_numpy()
    return evidence[~hide].reset_index(drop=True), hidden


def score(posterior, hidden, outcome: dict, truth: pd.DataFrame | None) -> pd.DataFrame:
    """One row per hidden pair: its successes and trials, the expected successes, the log
    score (``log mean_d Binomial(k | n, P_d)`` over the draws), and, where the truth is
    known, whether the true rate lies within the central 95% interval and below the
    ``LEVEL`` bound of the pair's draws."""
    rates = None if truth is None else truth.set_index([AGENT, TASK])["rate"]
    draws = posterior.draws["p_task"]
    rows = []
    for agent, task in hidden:
        p = np.clip(draws.sel({AGENT: agent, TASK: task}).values.ravel(), 0.0, 1.0)
        k, n = outcome[agent, task]
        log_p = stats.binom.logpmf(k, n, p)
        row = dict(
            agent=agent,
            task=task,
            outcome=k,
            trials=n,
            predicted=float(n * p.mean()),
            log_score=float(special.logsumexp(log_p) - np.log(p.size)),
            rate=np.nan,
            within=np.nan,
            below_bound=np.nan,
        )
        if rates is not None:
            true = rates[agent, task]
            low, high, bound = np.quantile(p, [0.025, 0.975, LEVEL])
            row.update(rate=true, within=low <= true <= high, below_bound=true <= bound)
        rows.append(row)
    return pd.DataFrame(rows)


def run_split(index, evidence, truth, rng, models, seed: int) -> pd.DataFrame:
    """Every model on ``evidence`` with half of each task's end-to-end rows hidden: the
    held-out rows of each (none for a model that refuses the table, which is said)."""
    shown, hidden = held_out_split(evidence, rng)
    e2e = evidence[evidence["method"] == END_TO_END]
    outcome = {
        (a, t): (k, n)
        for a, t, k, n in zip(e2e[AGENT], e2e[TASK], e2e["successes"], e2e["trials"], strict=True)
    }
    out = []
    for model in models:
        start = time.perf_counter()
        try:
            with collected():
                posterior = fit(shown, model, seed=seed + index, allow_unfit=True)
        except InputError as exc:
            print(f"table {index}: {model} refused: {exc}", file=sys.stderr, flush=True)
            continue
        seconds = time.perf_counter() - start
        try:
            rows = score(posterior, hidden, outcome, truth)
        except KeyError as exc:  # a pair the model has no estimate of
            print(f"table {index}: {model} cannot predict {exc}", file=sys.stderr, flush=True)
            continue
        ok = posterior.diagnostics is None or posterior.diagnostics.ok
        fits = fit_attempts(posterior.summary()["provenance"].iloc[0])
        rows = rows.assign(table=index, model=model, diagnostics_ok=ok, fits=fits)
        rows = rows.assign(seconds=seconds)
        out.append(rows)
        print(
            f"table {index}: {model} log score {rows['log_score'].sum():.2f}, expected "
            f"{rows['predicted'].sum():.1f} of {rows['outcome'].sum()}, {seconds:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def run_table(index: int, seed: int, models, agents: int, tasks: int) -> pd.DataFrame:
    """Every model on simulated table ``index``: its held-out rows."""
    rng = np.random.default_rng([seed, index])
    evidence, truth = simulate_table(rng, agents, tasks)
    return run_split(index, evidence, truth, rng, models, seed)


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, over the tables: the mean log score per table (and its standard error),
    its mean paired difference from ``BASELINE``'s on the same tables (and its standard
    error), expected and observed successes per table, coverage of the central 95% interval and
    of the 97.5% bound (all pairs; pairs whose true rate is below 0.05), the share of
    tables whose fit passed its diagnostics (and passed at its first fit, no refit) and the
    median fit time."""
    rows = rows.astype({"within": float, "below_bound": float})
    per_table = rows.groupby(["model", "table"], sort=False).agg(
        log_score=("log_score", "sum"),
        expected=("predicted", "sum"),
        observed=("outcome", "sum"),
        ok=("diagnostics_ok", "first"),
        first_fit=("fits", lambda fits: fits.iloc[0] == 1),
        seconds=("seconds", "first"),
    )
    grouped = per_table.groupby(level="model", sort=False)
    low = rows[rows["rate"] < 0.05].groupby("model", sort=False)
    whole = rows.groupby("model", sort=False)
    scores = per_table["log_score"].unstack("model")
    versus = scores.sub(scores[BASELINE], axis=0) if BASELINE in scores else scores * np.nan
    return pd.DataFrame(
        {
            "tables": grouped.size(),
            "log_score": grouped["log_score"].mean(),
            "log_score_se": grouped["log_score"].std(ddof=1) / np.sqrt(grouped.size()),
            f"vs_{BASELINE}": versus.mean(),
            f"vs_{BASELINE}_se": versus.std(ddof=1) / np.sqrt(versus.count()),
            "expected": grouped["expected"].mean(),
            "observed": grouped["observed"].mean(),
            "within_95": whole["within"].mean(),
            "below_bound": whole["below_bound"].mean(),
            "below_bound_rate_under_0.05": low["below_bound"].mean(),
            "diagnostics_passed": grouped["ok"].mean(),
            "passed_first_fit": (per_table["ok"] & per_table["first_fit"])
            .groupby(level="model", sort=False)
            .mean(),
            "median_seconds": grouped["seconds"].median(),
        }
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="index of the first table")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--out", default="studies/results")
    parser.add_argument(
        "--describe", action="store_true", help="print the simulator's summary figures only"
    )
    parser.add_argument(
        "--summarise", nargs="+", metavar="CSV", help="print the summary of written rows only"
    )
    parser.add_argument(
        "--runs",
        help="a METR run file (its runs end to end; the true rates unknown) instead of "
        "simulated tables: one split per --tables",
    )
    args = parser.parse_args(argv)
    if args.summarise:
        rows = pd.concat([pd.read_csv(path) for path in args.summarise], ignore_index=True)
        print(summarise(rows).to_string(float_format=_short))
        return 0
    if args.describe:
        rng = np.random.default_rng(args.seed)
        figures = [describe(*simulate_table(rng, args.agents, args.tasks)) for _ in range(40)]
        figures = pd.DataFrame(figures).agg(["mean", "min", "max"])
        print(figures.to_string(float_format="{:.3f}".format))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    real = None
    if args.runs:
        real = read_runs(args.runs, "metr").table
        real = real[real[AGENT] != "human"][[AGENT, TASK, "method", "successes", "trials"]]
    for index in range(args.first, args.first + args.tables):
        if real is None:
            tables.append(run_table(index, args.seed, args.models, args.agents, args.tasks))
        else:
            rng = np.random.default_rng([args.seed, index])
            tables.append(run_split(index, real, None, rng, args.models, args.seed))
        rows = pd.concat(tables, ignore_index=True)
        rows.to_csv(out / "capture_the_flag.csv", index=False)
    print(summarise(rows).to_string(float_format=_short))
    return 0


def _short(x: float) -> str:
    return f"{x:.3g}"


if __name__ == "__main__":
    sys.exit(main())
