"""Which model predicts best: fits ranked by their expected log predictive density,
leaving one observed cell out.

Each fit's pointwise ``elpd_loo`` comes from the best estimate it has:

- an exact (conjugate) fit: exactly, in closed form, as is its in-sample log predictive
  density (``results.predictive.exact_log_predictive``), since PSIS cannot estimate a
  cell that alone informs its rate; no draws are made for them;
- an MCMC fit: PSIS-LOO (``arviz_stats.loo``) of its ``log_likelihood`` group, with the
  Pareto k of every cell; a cell whose k exceeds 0.7, where PSIS is unreliable, is
  refitted exactly (``_left_out``: its rows given no trials, its counts scored under the
  refit's draws), up to ``MAX_REFITS`` per fit; the rest (and every such cell of a fit
  read from a file, which cannot be refitted as it was) are counted and named.

Fits are compared only on the cells they all explain (a milestone model and an
end-to-end model share none; a model whose likelihood is of whole pairs, ``joint``,
``crossed_joint`` or ``crossed_milestones``, shares none with one of cells, and the first
two score a pair's milestone and end-to-end runs where the third scores its milestone
runs: such fits are refused before any refit);
the ranking, differences, their standard errors and the stacking weights are
``arviz_stats.compare``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayes_eval.constants import END_TO_END, MILESTONE_METHOD
from bayes_eval.crossed.groups import side_tables_of_group
from bayes_eval.errors import InputError
from bayes_eval.messages import collected
from bayes_eval.registry import model_of
from bayes_eval.results.predictive import exact_log_predictive, position_of

if TYPE_CHECKING:
    import xarray as xr

    from bayes_eval.results.posterior import Posterior

__all__ = ["Comparison", "compare", "in_words", "ranked"]

# Pareto k above which a PSIS estimate is unreliable (Vehtari et al. 2024).
GOOD_K = 0.7
# Most units (cells or pairs) of one fit whose Pareto k exceeds GOOD_K that are refitted
# exactly, each a full MCMC fit; the rest are counted as unreliable.
MAX_REFITS = 10
# A difference smaller than this many standard errors is read as noise.
NOISE_SE = 2.0
# A method's runs, in the words of a refusal, in the order it names them.
RUN_WORDS = {MILESTONE_METHOD: "milestone", END_TO_END: "end-to-end"}


@dataclass(frozen=True)
class Comparison:
    """Fits ranked by ``elpd_loo`` on the cells they share.

    Attributes
    ----------
    table : pandas.DataFrame
        ``arviz_stats.compare``'s table, best first (``rank``, ``elpd_diff``, ``dse``,
        ``p_worse``, ``elpd``, ``se``, ``p``, ``weight``, ...), with ``loo`` (``exact`` or
        ``PSIS``), ``cells`` (shared), ``refits`` (cells whose Pareto k was above 0.7,
        refitted exactly) and ``high_k`` (cells with Pareto k above 0.7 left unrefitted).
    pointwise : pandas.DataFrame
        One row per shared cell: each fit's ``elpd_loo`` and, for MCMC fits, Pareto k
        and whether the cell was refitted.
    sentence : str
        The ranking in words.
    unscored : dict of str to str
        Models left out of the ranking, and why (``compare_holdout``: a model that
        predicts no held-out pair).
    """

    table: pd.DataFrame
    pointwise: pd.DataFrame
    sentence: str
    unscored: Mapping[str, str] = field(default_factory=dict)


def compare(fits: Mapping[str, Posterior], *, refit: bool = True) -> Comparison:
    """Rank fits by their leave-one-cell-out predictive density (the module's estimates).

    Parameters
    ----------
    fits : mapping of str to Posterior
        Two fits or more, by the names the table shows.
    refit : bool
        Refit an MCMC fit's cells whose Pareto k exceeds 0.7 (up to ``MAX_REFITS`` per
        fit); without, they are counted in ``high_k`` (the report's comparison, which
        must not multiply a fit's cost).

    Raises
    ------
    InputError
        Fewer than two fits, an MCMC fit without a ``log_likelihood`` group, fits of
        clustered runs beside fits of cell totals, or fits that share no observed cell
        (the message names the model).
    """
    if len(fits) < 2:
        raise InputError(f"fits: give two fits or more to compare ({len(fits)} given)")
    _same_unit(fits)  # before any refit: one would be wasted on a comparison refused
    estimates = {name: _pointwise(name, posterior, refit) for name, posterior in fits.items()}
    _same_data(estimates)
    shared = _shared_cells(estimates)
    elpd = {name: _on_cells(estimate, shared) for name, estimate in estimates.items()}
    columns = {
        "loo": {name: estimate["loo"] for name, estimate in estimates.items()},
        "cells": dict.fromkeys(fits, len(shared)),
        "high_k": {name: _high_k(estimates[name], shared) for name in fits},
        "refits": {name: int(estimates[name]["frame"].loc[shared, "refit"].sum()) for name in fits},
    }
    table = ranked(elpd, columns)
    pointwise = pd.DataFrame(
        {f"elpd_loo {name}": elpd[name].elpd_i.values for name in fits}, index=list(shared)
    )
    for name in fits:
        if estimates[name]["loo"] == "PSIS":
            pointwise[f"pareto_k {name}"] = elpd[name].pareto_k.values
            pointwise[f"refit {name}"] = estimates[name]["frame"].loc[shared, "refit"].values
    return Comparison(table, pointwise.rename_axis("cell"), _sentence(table, pointwise))


def _pointwise(name: str, posterior, refit_high_k: bool) -> dict:
    """A fit's ``elpd_loo`` per cell (finite), its Pareto k, its in-sample log predictive
    density per cell, and its draws, as ``compare`` reads them: an exact fit's in closed
    form (it makes no draws for them), an MCMC fit's from its ``log_likelihood``."""
    if posterior.is_mcmc:
        elpd_i, pareto_k, lppd, refit, cells, draws = _psis(name, posterior, refit_high_k)
        kind = "PSIS"
    else:
        scores = exact_log_predictive(posterior)
        elpd_i, lppd = scores["elpd_loo"].values, scores["lppd"].values
        cells = scores["cell"].values
        pareto_k, refit = np.zeros(cells.size), np.zeros(cells.size, dtype=bool)
        draws = 0  # closed forms: none made
        kind = "exact"
    keep = np.isfinite(elpd_i)  # an improper prior predicts no cell it has not seen
    frame = pd.DataFrame(
        dict(elpd_i=elpd_i, pareto_k=pareto_k, lppd=lppd, refit=refit), index=cells
    )[keep]
    improper = int((~keep).sum())
    clustered = posterior.evidence.clusters is not None  # scores each cluster's counts
    return dict(
        frame=frame,
        loo=kind,
        draws=draws,
        spec=posterior.spec.name,
        improper=improper,
        clustered=clustered,
    )


def _psis(name: str, posterior, refit_high_k: bool):
    """An MCMC fit's PSIS ``elpd_loo``, Pareto k, in-sample log predictive density and
    exact refits per unit, its units and its number of draws."""
    import arviz_stats

    if not posterior.has_group("log_likelihood"):
        raise InputError(
            f"fits: model {name} ({posterior.spec.name}) has no pointwise log-likelihood (a "
            "run folder written before fits had one); refit it, or leave it out"
        )
    tree = posterior.subtree("posterior", "log_likelihood")
    (log_lik,) = tree["log_likelihood"].data_vars.values()  # per cell, or per pair
    draws = log_lik.sizes["chain"] * log_lik.sizes["draw"]
    lppd = _logmeanexp(log_lik.values.reshape(draws, -1))
    cells = log_lik[log_lik.dims[-1]].values
    refit = np.zeros(cells.size, dtype=bool)
    loo = arviz_stats.loo(tree, pointwise=True)
    elpd_i, pareto_k = loo.elpd_i.values.copy(), loo.pareto_k.values
    # not read from a file; a clustered fit's cells are not refitted (its clusters'
    # counts would need hiding too), their k above 0.7 counted in ``high_k``
    if refit_high_k and posterior.scores_draws and posterior.evidence.clusters is None:
        for c in np.flatnonzero(pareto_k > GOOD_K)[:MAX_REFITS]:
            elpd_i[c], refit[c] = _left_out(posterior, log_lik, c), True
    return elpd_i, pareto_k, lppd, refit, cells, draws


def _same_data(estimates: dict) -> None:
    """Refuse fits of which some score each cluster's counts and others a cell's totals:
    their log predictive densities are of different data."""
    clustered = {name for name, estimate in estimates.items() if estimate["clustered"]}
    if clustered and len(clustered) < len(estimates):
        name = sorted(clustered)[0]
        other = next(n for n in estimates if n not in clustered)
        raise InputError(
            f"fits: model {name} ({estimates[name]['spec']}) scores each cluster's counts and "
            f"{other} each cell's total, so their log scores are of different data; compare "
            "fits of the same table"
        )


def _same_unit(fits: Mapping[str, Posterior]) -> None:
    """Refuse fits whose log-likelihoods score different units: a pair's runs together
    (``joint``, ``crossed_joint``, ``crossed_milestones``) beside single cells share
    nothing to leave out, and a pair's milestone runs alone are not its milestone and
    end-to-end runs."""
    units = {  # an exact fit's are its cells
        name: next(iter(posterior.group("log_likelihood").data_vars.values())).dims[-1]
        if posterior.is_mcmc
        else "cell"
        for name, posterior in fits.items()
        if posterior.has_group("log_likelihood")
    }
    by_pair = [name for name, unit in units.items() if unit == "pair"]
    methods = {  # the runs of a pair each scores: its milestone runs alone, or its end-to-end too
        name: [m for m in RUN_WORDS if m in model_of(fits[name].spec).uses] for name in by_pair
    }
    runs = {
        " and ".join(RUN_WORDS[m] for m in used) + " runs": name for name, used in methods.items()
    }
    if len(runs) > 1:  # the fit of more runs named first
        ordered = sorted(runs.items(), key=lambda kv: -len(methods[kv[1]]))
        (one, first), (other, second) = ordered[:2]
        raise InputError(
            f"fits: {first} ({fits[first].spec.name}) scores each pair's {one} "
            f"and {second} ({fits[second].spec.name}) its {other}, so their log "
            "scores are of different data; compare them by hold-out (compare --holdout "
            "end_to_end)"
        )
    if len(set(units.values())) < 2:
        return
    named = ", ".join(f"{name} ({fits[name].spec.name})" for name in by_pair)
    verb = "scores" if len(by_pair) == 1 else "score"
    raise InputError(
        f"fits: {named} {verb} each pair's runs together and the others each cell, so "
        "leaving one out compares nothing; compare fits of one kind, or all of them by "
        "hold-out (compare --holdout end_to_end)"
    )


def _left_out(posterior, log_lik: xr.DataArray, c: int) -> float:
    """The exact ``elpd_loo`` of unit ``c`` (a cell, or a pair where the likelihood is of
    pairs) of an MCMC fit: the model refitted with the unit's rows given no trials (so
    its structure, and the meaning of every parameter, stays), and the unit's observed
    counts scored under the refit's draws with the fit's own likelihood,
    ``log mean_d p(y_c | theta_d)``."""
    import dataclasses

    from bayes_eval.fit import fit

    unit = log_lik.isel({log_lik.dims[-1]: c})
    table = posterior.evidence.table
    rows = (table["agent"] == str(unit["agent"].values)) & (
        table["task"] == str(unit["task"].values)
    )
    if "evidence" in unit.coords:  # one cell: its method and position in the pair
        method, position = str(unit["evidence"].values), str(unit["position"].values)
        at = [position_of(r.method, r.step, r.run) == position for r in table.itertuples()]
        rows &= (table["method"] == method) & np.array(at)
    hidden = table.copy()
    hidden.loc[rows, ["successes", "trials"]] = 0
    evidence = dataclasses.replace(posterior.evidence, table=hidden)
    draws = posterior.draws
    sampler = {"chains": draws.sizes["chain"], "draws": draws.sizes["draw"]}
    side = {}  # a crossed fit's covariates, as it was given them (its side tables or columns)
    if posterior.has_group("covariates"):
        group = posterior.group("covariates")
        side = {
            f"{k}s": v for k, v in side_tables_of_group(group, posterior.spec.covariates).items()
        }
    with collected():  # the refit's notes are the fit's own, said once already
        refit = fit(evidence, posterior.spec, seed=posterior.seed, sampler=sampler, **side)
    (scored,) = posterior.log_likelihood_at(refit.draws).data_vars.values()
    values = scored.isel({scored.dims[-1]: c}).values.ravel()
    return float(_logmeanexp(values[:, None])[0])


def _high_k(estimate: dict, cells: pd.Index) -> int:
    """Shared cells whose PSIS estimate is unreliable (Pareto k above ``GOOD_K``) and
    was not replaced by an exact refit."""
    frame = estimate["frame"].loc[cells]
    return int(((frame["pareto_k"] > GOOD_K) & ~frame["refit"]).sum())


def _logmeanexp(values: np.ndarray) -> np.ndarray:
    from scipy.special import logsumexp

    return logsumexp(values, axis=0) - np.log(values.shape[0])


def _shared_cells(estimates: dict) -> pd.Index:
    """The cells every fit explains, in the first fit's order; none shared is an error
    naming the fit that shares least with the others."""
    indexes = {name: e["frame"].index for name, e in estimates.items()}
    shared = next(iter(indexes.values()))
    for index in indexes.values():
        shared = shared.intersection(index, sort=False)
    if len(shared):
        return shared
    overlap = {
        name: sum(len(index.intersection(other)) for o, other in indexes.items() if o != name)
        for name, index in indexes.items()
    }
    name = min(overlap, key=overlap.get)
    why = "they read different evidence"
    improper = {n: e["improper"] for n, e in estimates.items() if e["improper"]}
    if improper:
        named = ", ".join(f"{n} on {count}" for n, count in improper.items())
        why += f", or an improper prior predicts no cell it has not seen ({named})"
    raise InputError(
        f"fits: model {name} ({estimates[name]['spec']}) shares no observed cell with the "
        f"others ({why}), so leaving one cell out compares nothing"
    )


def _on_cells(estimate: dict, cells: pd.Index):
    """``arviz_stats``'s LOO result for a fit, on ``cells`` alone."""
    import xarray as xr
    from arviz_stats.utils import ELPDDataLOO

    frame = estimate["frame"].loc[cells]
    values = frame["elpd_i"].to_numpy()

    def on_cells(column) -> xr.DataArray:
        return xr.DataArray(frame[column].to_numpy(), dims="cell", coords={"cell": cells})

    return ELPDDataLOO(
        elpd=float(values.sum()),
        se=float(np.sqrt(values.size * values.var())),
        p=float((frame["lppd"] - frame["elpd_i"]).sum()),
        n_samples=int(estimate["draws"]),
        n_data_points=int(values.size),
        scale="log",
        warning=bool((frame["pareto_k"] > GOOD_K).any()),
        good_k=GOOD_K,
        elpd_i=on_cells("elpd_i"),
        pareto_k=on_cells("pareto_k"),
    )


def ranked(elpd: Mapping, columns: Mapping[str, Mapping]) -> pd.DataFrame:
    """``arviz_stats.compare``'s table of the models' ``ELPDData``, best first, with
    ``columns`` (each a value per model) added."""
    import arviz_stats

    table = arviz_stats.compare(dict(elpd), round_to="none")
    for column, values in columns.items():
        table[column] = [values[name] for name in table.index]
    return table


def in_words(table: pd.DataFrame, what: str, shared: str) -> str:
    """The ranking as a sentence: which model predicts ``what`` best (on ``shared``), and
    whether each other's distance from it is more than noise."""
    words = [f"{table.index[0]} predicts {what} best ({shared})"]
    for name in table.index[1:]:
        diff, dse = float(table.at[name, "elpd_diff"]), float(table.at[name, "dse"])
        if abs(diff) <= NOISE_SE * dse:
            words.append(f"{name} is within noise of it ({diff:.1f} ± {dse:.1f})")
        else:
            words.append(f"{name} predicts worse by {-diff:.1f} ± {dse:.1f}")
    return "; ".join(words) + "."


def _sentence(table: pd.DataFrame, pointwise: pd.DataFrame) -> str:
    shared = f"{len(pointwise)} cell{'s' * (len(pointwise) != 1)} shared"
    text = in_words(table, "held-out cells", shared)
    unreliable = [f"{name} ({k})" for name, k in table["high_k"].items() if k]
    if unreliable:
        text += (
            f" Pareto k above {GOOD_K} on cells not refitted of {', '.join(unreliable)}: PSIS "
            "is unreliable there, so read that model's ELPD as uncertain."
        )
    return text
