"""Backtests of forecasts of agents not yet built: every model asked for, and METR's
published method extrapolated the same way, fitted to the agents released before each
cut-off and scored on the later agents' runs.

A cut-off falls between two successive release dates; it is backtested where at least
``min_later`` agents come after it and at least two agents with a success before (METR's
trend needs two). For each held-out pair (a later agent, a task some earlier agent ran),
each method gives a predictive distribution of the pair's successes in its runs:

* a crossed model with agent covariates (``time_horizon``): fitted to the earlier agents'
  runs, each later agent predicted from its covariates alone (``predict``); the pair's
  count is the mixture over posterior draws of ``Binomial(n, P)``;
* METR's method (``bayes_eval.crossed.metr_method``): per earlier agent its logistic fit,
  the line of ``log2`` 50% horizon on release date through those with a success, and a new
  agent's success on a task of ``x = log2(minutes)`` taken as ``logistic(b (x - log2
  h50(date)))``, ``b`` the mean slope of the earlier agents with a success; the count is
  the mixture over METR's bootstrap replicates (each its own line and mean slope) of
  ``Binomial(n, p)``, ``p`` clipped to ``[1e-12, 1 - 1e-12]``.

Scored per cut-off and method: the log score (the sum over pairs of the log predictive
probability of the observed count), the coverage of the central 50%, 80% and 95% intervals
of each pair's count (end points included: a discrete count's interval covers at least its
level), and the error of each later agent's predicted 50% horizon against METR's method on
that agent's own runs (the mean of ``|log2 predicted - log2 own|``, in doublings; the
Bayesian prediction's median).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_eval.crossed.metr_method import CELL_COLUMNS
from bayes_eval.errors import InputError

__all__ = [
    "BACKTEST_COLUMNS",
    "LEVELS",
    "Backtest",
    "backtest",
    "backtest_sentence",
    "read_backtest",
]

LEVELS = (0.5, 0.8, 0.95)
METR = "metr"
BACKTEST_COLUMNS = (
    "cutoff",
    "method",
    "earlier_agents",
    "later_agents",
    "pairs",
    "log_score",
    *(f"covered_{round(100 * level)}" for level in LEVELS),
    "horizon_error",
    "diagnostics_ok",
)
CLIP = 1e-12


@dataclass(frozen=True)
class Backtest:
    """The backtest's scores.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per cut-off and method, ``BACKTEST_COLUMNS`` (``cutoff``: the first later
        agent's date, decimal years; ``diagnostics_ok`` NaN for METR's method).
    pairs : pandas.DataFrame
        One row per cut-off, method and held-out pair: its count, log score and coverage.
    notes : list of str
    """

    table: pd.DataFrame
    pairs: pd.DataFrame
    notes: list


def backtest(
    evidence,
    agents,
    *,
    by: str = "release_date",
    models=("time_horizon",),
    min_later: int = 3,
    bootstrap: int = 200,
    seed: int = 0,
    sampler=None,
) -> Backtest:
    """Backtest ``models`` and METR's method at every cut-off of ``by`` (the module
    docstring).

    Parameters
    ----------
    evidence : Evidence
        End-to-end runs with the task columns the models read (``human_minutes``,
        ``task_family``: METR's run files carry them).
    agents : path or DataFrame
        The agents' side table: ``agent`` and ``by``.
    by : str
        The agent covariate that orders the agents (ISO dates or numbers).
    models : sequence of str
        Crossed specs that predict new agents from covariates.
    min_later : int
        The fewest later agents a cut-off needs.
    bootstrap : int
        METR's bootstrap replicates behind its predictive distribution.
    seed : int
    sampler : dict, optional
        MCMC overrides for the models' fits.
    """
    from bayes_eval.crossed.metr_method import metr_horizons

    specs = _specs(models)
    side = _side(agents)
    dates = _dates(side, by)
    runs = _runs(evidence)
    missing = sorted(set(runs["agent"]) - set(dates.index))
    if missing:
        raise InputError(f"agents: no {by} for {', '.join(missing[:5])}")
    own = metr_horizons(runs, bootstrap=0).agents.set_index("agent")["h50"]
    rows, pairs, notes = [], [], []
    for cutoff, earlier, later in _cutoffs(runs, dates, min_later):
        train = runs[runs["agent"].isin(earlier)]
        test = runs[runs["agent"].isin(later) & runs["task"].isin(set(train["task"]))]
        left = int((runs["agent"].isin(later) & ~runs["task"].isin(set(train["task"]))).sum())
        if left:
            notes.append(
                f"cut-off {cutoff:.2f}: {left} later pair(s) on tasks no earlier agent ran"
            )
        metr = metr_horizons(train, dates, bootstrap=bootstrap, seed=seed)
        predictions = {METR: _metr_predictions(metr, test, dates)}
        for spec in specs:  # each labelled by its spec's own name, as its fits are
            predictions[spec.name] = _model_predictions(
                evidence, spec, (earlier, later), test, side, seed=seed, sampler=sampler
            )
        for method, (pmfs, horizons, ok) in predictions.items():
            scored = _scored(test, pmfs).assign(cutoff=cutoff, method=method)
            pairs.append(scored)
            error = [abs(np.log2(horizons[a]) - np.log2(own[a])) for a in later if own[a] > 0]
            row = {"cutoff": cutoff, "method": method, "earlier_agents": len(earlier)}
            row |= {"later_agents": len(later), "pairs": len(scored)}
            row["log_score"] = float(scored["log_score"].sum())
            for level in LEVELS:
                name = f"covered_{round(100 * level)}"
                row[name] = float(scored[name].mean())
            row["horizon_error"] = float(np.mean(error)) if error else np.nan
            row["diagnostics_ok"] = ok
            rows.append(row)
    if not rows:
        raise InputError(
            f"{by}: no cut-off leaves {min_later} later agents and two earlier ones with a success"
        )
    return Backtest(pd.DataFrame(rows, columns=list(BACKTEST_COLUMNS)), pd.concat(pairs), notes)


def _specs(models) -> list:
    """The models' specs; one that cannot predict a new agent from covariates refused."""
    from bayes_eval.registry import NEW_AGENTS, model_of
    from bayes_eval.specs import load_spec

    specs = [load_spec(name) for name in models]
    for spec in specs:
        if NEW_AGENTS not in model_of(spec).predicts or not spec.covariates.get("agent"):
            raise InputError(
                f"models: {spec.name} cannot predict a later agent from its covariates (a "
                "crossed spec with agent covariates can, such as time_horizon)"
            )
    return specs


def _side(agents) -> pd.DataFrame:
    """The agents' side table, indexed by agent (``read_side_table``)."""
    from bayes_eval.evidence.covariates import read_side_table

    return read_side_table(agents, "agent")


def _dates(table: pd.DataFrame, by: str) -> pd.Series:
    """Each agent's ``by`` value as a number (ISO dates as decimal years), read as a
    covariate is (``parse_values``)."""
    from bayes_eval.evidence.covariates import parse_values

    if by not in table.columns:
        raise InputError(f"{table.attrs['source']}: row 1: no column '{by}' (--by)")
    texts = table[by].astype(str).str.strip()
    located = [(text, f"row {table.attrs['rows'][agent]}") for agent, text in texts.items()]
    numbers, _ = parse_values(table.attrs["source"], by, located)
    return pd.Series(numbers, index=texts.index, dtype=float)


def _runs(evidence) -> pd.DataFrame:
    """The end-to-end cells as METR's method reads them."""
    table = evidence.table
    table = table[table["method"] == "end_to_end"]
    for column in ("human_minutes", "task_family"):
        if column not in table.columns:
            raise InputError(
                f"{evidence.source}: no column {column}: the backtest reads task lengths and "
                "families from the runs (METR's run files carry them; an evidence table keeps "
                "them with `keep_columns`)"
            )
    cells = table.rename(columns={"human_minutes": "minutes", "task_family": "family"})
    minutes = pd.to_numeric(cells["minutes"], errors="coerce")
    bad = cells.loc[~(minutes > 0), "minutes"]  # not a number, or not positive
    if len(bad):
        raise InputError(
            f"{evidence.source}: row {cells.loc[bad.index[0], 'row']}, column human_minutes: "
            f"'{bad.iloc[0]}' is not a positive number of minutes"
        )
    return cells.assign(minutes=minutes)[list(CELL_COLUMNS)].reset_index(drop=True)


def _cutoffs(runs, dates, min_later: int):
    """``(cutoff, earlier agents, later agents)`` per cut-off, in date order."""
    ran = dates[dates.index.isin(runs["agent"])].sort_values()
    succeeded = set(runs.loc[runs["successes"] > 0, "agent"])
    for value in sorted(set(ran.values))[1:]:
        earlier = list(ran.index[ran.values < value])
        later = list(ran.index[ran.values >= value])
        if len(later) >= min_later and len(succeeded & set(earlier)) >= 2:
            yield float(value), earlier, later


def _metr_predictions(metr, test, dates):
    """Per held-out pair the predictive pmf of METR's method extrapolated (the module
    docstring), each later agent's predicted 50% horizon, and no diagnostics."""
    agents = metr.agents
    use = ((agents["successes"] > 0) & np.isfinite(agents["h50"])).to_numpy()
    when = agents["date"].to_numpy(float)[use]
    lines = [(when, np.log2(agents["h50"].to_numpy()[use]), agents["slope"].to_numpy()[use])]
    replicates = metr.replicates
    for h50, slope in zip(replicates.get("h50", []), replicates.get("slope", []), strict=True):
        h50, slope = h50[use], slope[use]
        ok = np.isfinite(h50) & (h50 > 0) & np.isfinite(slope)
        if ok.sum() >= 2:
            lines.append((when[ok], np.log2(h50[ok]), slope[ok]))
    fitted = [(np.polyfit(at, log_h, 1), float(np.mean(slope))) for at, log_h, slope in lines]
    later_dates = dates[test["agent"]].to_numpy()
    x = np.log2(test["minutes"].to_numpy(float))
    p = np.stack([special.expit(b * (x - np.polyval(c, later_dates))) for c, b in fitted])
    pmfs = _mixture(test, np.clip(p, CLIP, 1 - CLIP))
    line = fitted[0][0]
    horizons = {a: float(np.exp2(np.polyval(line, dates[a]))) for a in pd.unique(test["agent"])}
    return pmfs, horizons, np.nan


def _model_predictions(evidence, spec, agents, test, side, *, seed, sampler):
    """Per held-out pair the predictive pmf of ``spec`` fitted to the earlier agents'
    runs (``agents``: the earlier and the later), each later agent predicted from its
    covariates alone; their median 50% horizons; whether the diagnostics passed."""
    import bayes_eval
    from bayes_eval.crossed.horizon import horizons
    from bayes_eval.evidence.table import load_evidence
    from bayes_eval.messages import collected

    earlier, later = agents
    columns = [term.column for term in spec.covariates.get("agent", ())]
    missing = [c for c in columns if c not in side.columns]
    if missing:
        raise InputError(f"{side.attrs['source']}: row 1: no column '{missing[0]}' ({spec.name})")
    table = evidence.table
    kept = table[table["agent"].isin(earlier)]
    names = ["agent", "task", "method", "successes", "trials", *evidence.kept]
    train = load_evidence(kept[names].reset_index(drop=True), keep_columns=True)
    predict = [
        ",".join([agent, *(f"{c}={str(side.loc[agent, c]).strip()}" for c in columns)])
        for agent in later
    ]
    with collected():
        posterior = bayes_eval.fit(
            train,
            spec,
            agents=side.loc[earlier].reset_index(),
            predict=predict,
            seed=seed,
            sampler=sampler,
        )
    p_task = posterior.draws["p_task"]
    pairs = zip(test["agent"], test["task"], strict=True)
    draws = np.stack([p_task.sel(agent=a, task=t).values.ravel() for a, t in pairs], axis=1)
    pmfs = _mixture(test, np.clip(draws, CLIP, 1 - CLIP))
    rows = horizons(posterior).agents.set_index("agent")
    return pmfs, {a: float(rows.loc[a, "h50"]) for a in later}, bool(posterior.diagnostics.ok)


def _mixture(test, p: np.ndarray) -> list[np.ndarray]:
    """Each pair's count pmf: the mean over rows of ``p`` (draws or replicates) of
    ``Binomial(n, p)``."""
    out = []
    for j, n in enumerate(test["trials"].to_numpy(int)):
        counts = np.arange(n + 1)
        out.append(stats.binom.pmf(counts[:, None], n, p[None, :, j]).mean(axis=1))
    return out


def _scored(test, pmfs) -> pd.DataFrame:
    """Each pair's log score and coverage of the central intervals of its pmf."""
    rows = []
    for (agent, task, k), pmf in zip(
        test[["agent", "task", "successes"]].itertuples(index=False), pmfs, strict=True
    ):
        cdf = np.cumsum(pmf)
        row = {"agent": agent, "task": task, "successes": int(k), "trials": len(pmf) - 1}
        row["log_score"] = float(np.log(pmf[int(k)]))
        for level in LEVELS:
            low = int(np.searchsorted(cdf, (1 - level) / 2 - 1e-12))
            high = int(np.searchsorted(cdf, (1 + level) / 2 - 1e-12))
            row[f"covered_{round(100 * level)}"] = low <= int(k) <= high
        rows.append(row)
    return pd.DataFrame(rows)


def read_backtest(path) -> pd.DataFrame:
    """The per cut-off table a backtest wrote (``backtest.csv`` in a folder written by
    ``bayes-eval backtest --out``, or the file itself)."""
    from pathlib import Path

    from bayes_eval.evidence.table import first_line

    path = Path(path)
    path = path / "backtest.csv" if path.is_dir() else path
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a backtest table ({first_line(exc)})") from None
    missing = [c for c in BACKTEST_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(
            f"{path}: row 1: no column {missing[0]} (a table bayes-eval backtest wrote)"
        )
    return table.assign(source=str(path))


def backtest_sentence(table: pd.DataFrame, model: str) -> str:
    """How ``model``'s forecasts of later agents held in a backtest (``read_backtest``):
    the coverage of each interval and the log score across cut-offs, beside METR's
    method's."""
    mine, metr = table[table["method"] == model], table[table["method"] == METR]
    source = table["source"].iloc[0] if "source" in table.columns else "the backtest"
    if mine.empty:
        return f"The backtest ({source}) holds no row of {model}: its forecasts are untested."

    def ranges(rows) -> str:
        parts = []
        for level in LEVELS:
            name = f"covered_{round(100 * level)}"
            low, high = rows[name].min(), rows[name].max()
            parts.append(
                f"{level:.0%} intervals {low:.0%}" + (f" to {high:.0%}" if high > low else "")
            )
        return ", ".join(parts)

    text = (
        f"How such forecasts have held: in the backtest ({source}), {model} fitted to the "
        f"agents released before each of {len(mine)} cut-off(s) and scored on the later "
        f"agents' runs covered {ranges(mine)} of the held-out pairs' counts (log score "
        f"{mine['log_score'].sum():.1f}"
    )
    if not metr.empty:
        text += f"; METR's method extrapolated: {metr['log_score'].sum():.1f}, {ranges(metr)}"
    failed = int((mine["diagnostics_ok"].astype(str) == "False").sum())
    text += ")" + (f"; {failed} of its fits failed their diagnostics" if failed else "")
    return text + "."
