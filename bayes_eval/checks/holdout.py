"""Which model predicts the end-to-end outcome that was not run: K-fold cross-validation
over (agent, task) pairs.

The pairs with end-to-end rows are split at random into K folds. For each fold, every
model is refitted with that fold's end-to-end rows hidden (its other rows, the pairs'
milestones among them, stay) and scored on them: a pair's score is the log of its
posterior predictive probability of the hidden counts,
``log mean_d prod_rows Binomial(s | n, P_d)`` over the draws ``P_d`` of its end-to-end
rate. A model that reads no end-to-end rows is fitted once, since hiding them changes
nothing it reads. A model that cannot predict a hidden pair (the exact end-to-end model
knows nothing of a pair without runs, a best-of-N estimate is a point value) is reported
as such, never dropped in silence; the models are ranked on the pairs they all predict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayes_eval.checks.comparison import Comparison, in_words, ranked
from bayes_eval.constants import AGENT, END_TO_END, TASK
from bayes_eval.errors import InputError
from bayes_eval.evidence.table import Evidence, TableSource, load_evidence
from bayes_eval.fit import fit
from bayes_eval.inference.sweep import run_sweep
from bayes_eval.messages import collected, note
from bayes_eval.registry import model_of
from bayes_eval.settings import SamplerInput, check_seed
from bayes_eval.specs import ModelSource, load_spec

if TYPE_CHECKING:
    from bayes_eval.results.posterior import Posterior

__all__ = ["compare_holdout"]

# Seed of the split into folds where none is given.
FOLD_SEED = 0


def compare_holdout(
    evidence: TableSource | Evidence,
    models: Sequence[ModelSource],
    *,
    folds: int = 5,
    seed: int | None = None,
    sampler: SamplerInput = None,
    workers: int | None = None,
    scheduler: str | None = None,
) -> Comparison:
    """Rank models by how well each predicts end-to-end outcomes it was not shown.

    Parameters
    ----------
    evidence : path, DataFrame or Evidence
        A table with end-to-end rows (and whatever else the models read).
    models : sequence of str, path or Spec
        Two models or more.
    folds : int
        K: each fold hides the end-to-end rows of a K-th of the pairs that have them.
    seed : int, optional
        Seed of the split and of every fit (default: each spec's for the fits, 0 for
        the split).
    sampler : dict or SamplerSettings, optional
        Overrides of the pooled models' sampler settings, as for ``fit``.
    workers, scheduler : optional
        Run the fits (one per model and fold) on a local dask cluster of ``workers``
        processes, or on the running one at ``scheduler`` (``run_sweep``); the numbers
        are those of a serial run.

    Returns
    -------
    Comparison
        ``table`` ranks the models that predict held-out pairs (``elpd`` is the sum of
        their log scores on the pairs all of them predict, with ``rank``, ``elpd_diff``,
        ``dse`` and ``weight`` as ``arviz_stats.compare`` gives them), with ``pairs``
        (shared), ``predicted`` (pairs the model predicts, of all held out), ``expected``
        (its expected successes on the shared pairs), ``observed`` (their successes) and
        ``diagnostics`` (folds whose MCMC diagnostics passed, of those fitted);
        ``pointwise`` has one row per shared pair: each model's log score and mean
        predicted rate (``log_score NAME``, ``predicted NAME``) and the pair's held-out
        ``successes`` and ``trials``; ``unscored`` names each model that predicts no
        held-out pair, and why.

    Raises
    ------
    InputError
        Fewer than two models, no end-to-end rows, ``folds`` not between 2 and the number
        of pairs, or fewer than two models that predict any held-out pair.
    """
    evidence = evidence if isinstance(evidence, Evidence) else load_evidence(evidence)
    if seed is not None:
        check_seed(seed, "seed")
    specs = [load_spec(model) for model in models]
    if len(specs) < 2:
        raise InputError(f"models: give two models or more to compare ({len(specs)} given)")
    names = [spec.name for spec in specs]
    if len(set(names)) < len(names):
        names = [str(model) for model in models]
    split = _split(evidence, folds, seed)
    rows = evidence.rows(END_TO_END)
    outcomes = {
        pair: (group["successes"].to_numpy(), group["trials"].to_numpy())
        for pair, group in rows.groupby([AGENT, TASK], sort=False)
    }
    # one fit per model and fold; a model that reads no end-to-end rows, once (fold None)
    jobs = [
        (name, spec, k)
        for name, spec in zip(names, specs, strict=True)
        for k in (range(folds) if END_TO_END in model_of(spec).uses else [None])
    ]
    setup = dict(
        jobs=jobs, evidence=evidence, split=split, outcomes=outcomes, seed=seed, sampler=sampler
    )

    def describe(index):
        name, _, fold = jobs[index]
        label = "every fold" if fold is None else f"fold {fold + 1} of {folds}"
        return f"compare --holdout: model {name}, {label}"

    results = run_sweep(
        _fold_scores, len(jobs), setup, workers=workers, scheduler=scheduler, describe=describe
    )
    scores = {
        name: _scores(
            name, spec, [r for (n, _, _), r in zip(jobs, results, strict=True) if n == name]
        )
        for name, spec in zip(names, specs, strict=True)
    }
    return _ranked(scores, outcomes, folds)


def _split(evidence: Evidence, folds: int, seed: int | None) -> list[list[tuple[str, str]]]:
    """The pairs with end-to-end rows, shuffled and dealt into ``folds`` folds."""
    rows = evidence.rows(END_TO_END)
    pairs = list(dict.fromkeys(zip(rows[AGENT], rows[TASK], strict=True)))
    if not pairs:
        raise InputError(
            f"{evidence.source}: no end_to_end rows, so no end-to-end outcome to hold out"
        )
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer):
        raise InputError(f"folds: {folds!r} is not a whole number")
    if not 2 <= folds <= len(pairs):
        raise InputError(
            f"folds: {folds} folds of {len(pairs)} pair(s) with end_to_end rows; give "
            f"2 to {len(pairs)}"
            if len(pairs) >= 2
            else f"{evidence.source}: one pair has end_to_end rows; hold-out needs two or more"
        )
    rng = np.random.default_rng(FOLD_SEED if seed is None else seed)
    order = rng.permutation(len(pairs))
    return [[pairs[i] for i in order[k::folds]] for k in range(folds)]


def _hidden(evidence: Evidence, pairs: list[tuple[str, str]], fold: int, folds: int) -> Evidence:
    """The evidence without the end-to-end rows (and clusters) of ``pairs``."""

    def kept(table: pd.DataFrame) -> pd.DataFrame:
        index = pd.MultiIndex.from_arrays([table[AGENT], table[TASK]])
        hide = index.isin(pairs) & (table["method"] == END_TO_END).to_numpy()
        return table[~hide].reset_index(drop=True)

    clusters = None if evidence.clusters is None else kept(evidence.clusters)
    return Evidence(
        table=kept(evidence.table),
        source=f"{evidence.source} (fold {fold + 1} of {folds}: end-to-end rows of "
        f"{len(pairs)} pairs hidden)",
        kept=evidence.kept,
        clusters=clusters,
    )


def _fold_scores(index: int, setup: dict) -> dict:
    """Job ``index`` of ``compare_holdout``: one model fitted with one fold's end-to-end
    rows hidden (or, fold None, to everything, for a model that reads none), and its log
    score and predicted rate on each pair of that fold (of every fold), or why none."""
    name, spec, fold = setup["jobs"][index]
    split, evidence = setup["split"], setup["evidence"]
    shown = evidence if fold is None else _hidden(evidence, split[fold], fold, len(split))
    posterior, reason = None, None
    with collected() as said:
        try:
            sampler = None if spec.exact else setup["sampler"]
            posterior = fit(shown, spec, seed=setup["seed"], sampler=sampler)
        except InputError as exc:
            reason = str(exc)
    out = dict(scored={}, expected={}, why_not={}, notes=list(said), passed=None)
    if posterior is None:
        pairs = [p for pairs in split for p in pairs] if fold is None else split[fold]
        out["why_not"] = dict.fromkeys(pairs, reason)
        return out
    out["passed"] = posterior.diagnostics is None or posterior.diagnostics.ok
    for pair in [p for pairs in split for p in pairs] if fold is None else split[fold]:
        draws, missing = _rate_draws(posterior, pair)
        if draws is None:
            out["why_not"][pair] = missing
            continue
        successes, trials = setup["outcomes"][pair]
        out["scored"][pair] = _log_score(draws, successes, trials)
        out["expected"][pair] = float(draws.mean() * trials.sum())
    return out


def _scores(name, spec, results: list[dict]) -> dict:
    """One model's fold results combined: its log score and predicted rate on every
    held-out pair it predicts, the reason for every pair it does not, its folds'
    diagnostics, and the notes every fold gave (those of the table, said once)."""
    scored, expected, why_not = {}, {}, {}
    for result in results:
        scored.update(result["scored"])
        expected.update(result["expected"])
        why_not.update(result["why_not"])
    fitted = [r["passed"] for r in results if r["passed"] is not None]
    for text in results[0]["notes"]:  # those of the table, not of a fold's hiding
        if all(text in r["notes"] for r in results):
            note(f"model {name}: {text}")
    diagnostics = f"{sum(fitted)} of {len(fitted)}" if fitted and not spec.exact else "-"
    return dict(
        spec=spec.name,
        scored=scored,
        expected=expected,
        why_not=why_not,
        diagnostics=diagnostics,
    )


def _rate_draws(posterior: Posterior, pair: tuple[str, str]):
    """The posterior draws of a pair's end-to-end rate, or None and why there are none."""
    agent, task = pair
    coords = posterior.coords
    if agent not in coords[AGENT] or task not in coords[TASK]:
        return None, "it estimates no pair without the rows it reads"
    i, j = coords[AGENT].index(agent), coords[TASK].index(task)
    if posterior.values("reason")[i, j]:
        return None, f"no estimate: {posterior.values('reason')[i, j]}"
    draws = posterior.draws["p_task"].sel({AGENT: agent, TASK: task}).values.ravel()
    if not posterior.values("method")[i, j] and np.isnan(draws).all():
        return None, "it estimates no pair without the rows it reads"
    if not np.isfinite(draws).all():
        return None, "its estimate is a point value, with no predictive distribution"
    return np.clip(draws, 0.0, 1.0), None


def _log_score(draws: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> float:
    """``log mean_d prod_rows Binomial(s | n, P_d)``."""
    from scipy.special import logsumexp
    from scipy.stats import binom

    log_p = binom.logpmf(successes[:, None], trials[:, None], draws[None, :]).sum(axis=0)
    return float(logsumexp(log_p) - np.log(draws.size))


def _ranked(scores: dict, outcomes: dict, folds: int) -> Comparison:
    """The models that predict held-out pairs, ranked on the pairs they all predict."""
    observed = {pair: successes for pair, (successes, _) in outcomes.items()}
    unscored = {name: _why_unscored(score) for name, score in scores.items() if not score["scored"]}
    kept = {name: score for name, score in scores.items() if score["scored"]}
    if len(kept) < 2:
        named = "; ".join(f"{name}: {why}" for name, why in unscored.items())
        raise InputError(
            f"models: fewer than two models predict a held-out end-to-end outcome ({named})"
        )
    shared = None
    for score in kept.values():
        pairs = pd.Index(list(score["scored"]))
        shared = pairs if shared is None else shared.intersection(pairs, sort=False)
    if not len(shared):
        raise InputError(
            "models: no held-out pair is predicted by every model ("
            + ", ".join(f"{name} predicts {len(s['scored'])}" for name, s in kept.items())
            + "); compare fewer models"
        )
    labels = [f"{agent} / {task}" for agent, task in shared]
    pointwise = pd.DataFrame(
        {f"log_score {name}": [s["scored"][p] for p in shared] for name, s in kept.items()},
        index=pd.Index(labels, name="pair"),
    )
    pointwise["successes"] = [int(outcomes[p][0].sum()) for p in shared]
    pointwise["trials"] = [int(outcomes[p][1].sum()) for p in shared]
    for name, s in kept.items():
        pointwise[f"predicted {name}"] = [
            s["expected"][p] / t for p, t in zip(shared, pointwise["trials"], strict=True)
        ]
    extra = {
        "pairs": {name: len(shared) for name in kept},
        "predicted": {name: f"{len(s['scored'])} of {len(observed)}" for name, s in kept.items()},
        "expected": {name: sum(s["expected"][p] for p in shared) for name, s in kept.items()},
        "observed": dict.fromkeys(kept, sum(int(observed[p].sum()) for p in shared)),
        "diagnostics": {name: s["diagnostics"] for name, s in kept.items()},
    }
    table = _table(pointwise, kept, extra, folds)
    partly = {
        name: f"predicts {len(s['scored'])} of {len(observed)} held-out pairs "
        f"({_common(s['why_not'])} elsewhere)"
        for name, s in kept.items()
        if s["why_not"]
    }
    sentence = _sentence(table, pointwise, {**partly, **unscored})
    return Comparison(table, pointwise, sentence, unscored)


def _table(pointwise: pd.DataFrame, names, extra: dict, folds: int) -> pd.DataFrame:
    """``arviz_stats.compare``'s ranking of the models whose scores are finite, then the
    models that gave a held-out outcome probability 0 (a point mass where it happened),
    whose score is minus infinity: last, with no weight."""
    scores = {name: pointwise[f"log_score {name}"] for name in names}
    finite = [name for name in names if np.isfinite(scores[name]).all()]
    if len(finite) > 1:
        table = ranked({name: _kfold(scores[name], folds) for name in finite}, {})
    else:
        table = pd.DataFrame(
            dict(rank=0, elpd_diff=0.0, dse=0.0, weight=1.0), index=pd.Index(finite)
        )
        table["elpd"] = [scores[name].sum() for name in finite]
        table["se"] = [np.sqrt(scores[name].size * scores[name].var(ddof=0)) for name in finite]
    for name in names:
        if name not in finite:
            table.loc[name, ["rank", "elpd", "elpd_diff", "weight"]] = [
                len(table), -np.inf, -np.inf, 0.0,
            ]  # fmt: skip
    table["rank"] = table["rank"].astype(int)
    for column, values in extra.items():
        table[column] = [values[name] for name in table.index]
    return table


def _why_unscored(score: dict) -> str:
    """Why a model predicts no held-out pair."""
    return f"cannot predict a held-out end-to-end outcome ({_common(score['why_not'])})"


def _common(why_not: dict) -> str:
    """The most common reason a model gives for the pairs it does not predict."""
    return str(pd.Series(list(why_not.values())).mode().iloc[0])


def _kfold(log_scores: pd.Series, folds: int):
    """``arviz_stats``' K-fold result for one model's log scores."""
    import xarray as xr
    from arviz_stats.utils import ELPDDataLOOKFold

    values = log_scores.to_numpy()
    return ELPDDataLOOKFold(
        elpd=float(values.sum()),
        se=float(np.sqrt(values.size * values.var())),
        p=float("nan"),  # no full-data fit to measure the effective parameters against
        n_samples=0,
        n_data_points=int(values.size),
        scale="log",
        warning=False,
        good_k=None,
        elpd_i=xr.DataArray(values, dims="pair", coords={"pair": log_scores.index}),
        n_folds=folds,
    )


def _sentence(table: pd.DataFrame, pointwise: pd.DataFrame, also: Mapping[str, str]) -> str:
    """The ranking in words, then what each model could not score."""
    shared = len(pointwise)
    finite = table[np.isfinite(table["elpd"])]
    pairs = f"{shared} pair{'s' * (shared != 1)} shared"
    text = in_words(finite, "held-out end-to-end outcomes", pairs) if len(finite) else ""
    for name in table.index[len(finite) :]:
        zero = int(np.isneginf(pointwise[f"log_score {name}"]).sum())
        text += (
            f" {name} gives probability 0 to {zero} held-out outcome(s) that happened (its "
            "estimate there is a point mass), so its log score is minus infinity."
        )
    for name, why in also.items():
        text += f" {name} {why}."
    return text.strip()
