"""Posterior predictive checks.

Every observed count (an end-to-end cell, a milestone, an expert-completion step) is
replicated once per posterior draw, ``k_rep ~ Binomial(n, p_draw)``, and compared with
the observation by the mid-p Bayesian p-value ``P(k_rep > k) + P(k_rep = k) / 2``,
flagged below 0.025 or above 0.975. The p-values are computed from the binomial
distribution at each draw (no Monte Carlo error from the replication itself). Each cell
also gets its randomised probability integral transform, ``P(k_rep < k) + U P(k_rep = k)``
with ``U`` uniform (seeded): uniform across cells where the predictive distribution is the
data's, whatever the counts (Czado, Gneiting and Held 2009), so that ArviZ's PIT plots can
read it.

Where runs come in clusters, a cluster-aware fit replicates each cluster as its model
does, ``q_c ~ Beta(p kappa_cluster, (1 - p) kappa_cluster)``, ``k_c ~ Binomial(n_c, q_c)``,
and the cell's count is the sum; its p-value is then read off those replicates.

The milestone-assumption check, which refits the milestones alone, is
``bayes_eval.checks.assumption``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_eval.constants import (
    AGENT,
    END_TO_END,
    EXPERT_COMPLETION,
    MILESTONE_METHOD,
    TASK,
)
from bayes_eval.registry import model_of
from bayes_eval.results.factors import by_cell, cell_label
from bayes_eval.settings import stream_rng

__all__ = [
    "pair_coords",
    "COLUMNS",
    "FLAG_HIGH",
    "FLAG_LOW",
    "cell_coords",
    "exact_loo",
    "exact_log_predictive",
    "mid_p",
    "predictive_checks",
    "replicate",
]

FLAG_LOW, FLAG_HIGH = 0.025, 0.975
# The prior of an exact model's cell rate, by the cell's evidence.
PRIOR_ROLES = {END_TO_END: "end_to_end", MILESTONE_METHOD: "milestone", EXPERT_COMPLETION: "step"}

# The columns of the checks' table, one row per observed cell.
COLUMNS = [
    "agent",
    "task",
    "evidence",
    "cell",
    "successes",
    "trials",
    "observed_rate",
    "replicated_rate",
    "p_value",
    "flagged",
    "pit",
]


def _cells(posterior, post):
    """(kind, agent, task, index, k, n, draws) for every observed cell the model explains.

    ``post`` is the posterior draws (the tree's ``posterior`` group as a Dataset).
    """
    agent_at = {agent: i for i, agent in enumerate(post[AGENT].values)}
    task_at = {task: j for j, task in enumerate(post[TASK].values)}
    estimated = {(a, t) for a, t, _, _ in posterior.cells()}
    factors = {name: by_cell(post, name) for name in ("p_milestone", "p_step")}
    chances = _graded_chances(post)
    model = model_of(posterior.spec)
    table = posterior.evidence.table
    out = []
    for row in table.itertuples():
        pair = (row.agent, row.task)
        if pair not in estimated:
            continue
        i, j = agent_at[row.agent], task_at[row.task]
        explains_e2e = (END_TO_END in model.uses and not model.rungs) or (
            posterior.values("method")[i, j] == END_TO_END  # the chain's end-to-end rung
        )
        k, n = int(row.successes), int(row.trials)
        if row.method == END_TO_END and explains_e2e:
            # a graded count's rate: the chance a run is graded a success (exact.graded)
            graded = "p_graded" in post and not np.isnan(post["p_graded"].values[0, 0, i, j])
            draws = post["p_graded" if graded else "p_task"].values[:, :, i, j]
            index = ""
            if graded and not posterior.is_mcmc:  # the runs the audit did not score again
                rate = posterior.graded_at(i, j)
                k, n = rate.graded, rate.runs
        elif row.method == MILESTONE_METHOD and factors["p_milestone"]:
            label = cell_label("p_milestone", *pair, row.step)
            draws = chances["p_graded_milestone"].get(label, factors["p_milestone"].get(label))
            index = position_of(row.method, row.step, row.run)
        elif row.method == EXPERT_COMPLETION and factors["p_step"]:
            runs = sorted(
                set(
                    table.loc[
                        (table.agent == row.agent)
                        & (table.task == row.task)
                        & (table.method == EXPERT_COMPLETION),
                        "run",
                    ]
                )
            )
            label = cell_label("p_step", *pair, runs.index(row.run) + 1, row.step)
            draws = chances["p_graded_step"].get(label, factors["p_step"].get(label))
            index = position_of(row.method, row.step, row.run)
        else:
            continue
        if draws is None or np.all(np.isnan(draws)):
            continue  # the model did not use this row (e.g. another rung of the chain)
        out.append((row.method, row.agent, row.task, index, k, n, draws))
    return out


def mid_p(k: int, n: int, p: np.ndarray) -> float:
    """``P(k_rep > k) + P(k_rep = k) / 2`` for ``k_rep ~ Binomial(n, p)``, averaged over the
    draws ``p`` (``_tails``)."""
    above, equal = _tails(k, n, p)
    return above + 0.5 * equal


def _tails(k: int, n: int, p: np.ndarray) -> tuple[float, float]:
    """``P(k_rep > k)`` and ``P(k_rep = k)`` for ``k_rep ~ Binomial(n, p)``, averaged over
    the draws ``p``. The point probability comes from ``logpmf``: scipy's ``pmf`` raises
    OverflowError where a draw is a subnormal number (a rate within 1e-308 of 0, which
    pooled fits of one-trial cells do draw)."""
    return float(stats.binom.sf(k, n, p).mean()), float(np.exp(stats.binom.logpmf(k, n, p)).mean())


def predictive_checks(posterior) -> pd.DataFrame:
    """One row per observed cell: observed and replicated rates, the mid-p value, a flag.

    Exact models need no draws: each cell's rate has a Beta posterior, so its replicated
    count is Beta-Binomial and the p-value is closed-form; a count an audited grader
    scored, and MCMC fits, average the binomial tail over their draws (of the rate a run
    is graded a success, ``p_graded``, for the first).
    """
    if posterior.is_mcmc:
        rows = []
        post = posterior.draws
        clusters = _cluster_sizes(posterior, post)
        rng = stream_rng(posterior.seed, "checks")
        for method, agent, task, index, k, n, draws in _cells(posterior, post):
            p = np.clip(draws.ravel(), 0.0, 1.0)
            sizes = clusters.get((agent, task, method, index))
            if sizes is None:
                above, equal = _tails(k, n, p)
            else:
                phi = _cluster_concentration(post, agent).ravel()
                replicated = _clustered(sizes, p, phi, rng)
                above, equal = float(np.mean(replicated > k)), float(np.mean(replicated == k))
            rows.append((agent, task, method, index, k, n, float(p.mean()), above, equal))
        columns = [np.array(column) for column in zip(*rows, strict=True)]
    else:
        cells = _exact_cells(posterior)
        k, n, a, b = _counts_and_shapes(posterior, cells)
        point = b == 0  # a point mass at 1 (k = n under Haldane): replicates k exactly
        safe_b = np.where(point, 1.0, b)
        above = np.where(point, 0.0, beta_binomial_sf(k, n, a, safe_b))
        equal = np.where(point, 1.0, stats.betabinom.pmf(k, n, a, safe_b))
        mean = np.where(point, 1.0, a / (a + safe_b))
        post = posterior.draws if cells["graded"].any() else None
        chances = _graded_chances(post) if post is not None else {}
        for cell in np.flatnonzero(cells["graded"].to_numpy()):
            draws = _graded_draws(post, chances, cells.iloc[cell])  # the grader's rate q
            above[cell], equal[cell] = _tails(int(k[cell]), int(n[cell]), draws)
            mean[cell] = draws.mean()
        names = ["agent", "task", "method", "index", "successes", "trials"]
        cells[["successes", "trials"]] = np.column_stack([k, n]).astype(np.int64)
        columns = [cells[name].to_numpy() for name in names] + [mean, above, equal]
    if not columns or not len(columns[0]):
        return pd.DataFrame(columns=COLUMNS)
    return _checks_table(columns, stream_rng(posterior.seed, "pit"))


def beta_binomial_sf(k, n, a, b) -> np.ndarray:
    """``scipy.stats.betabinom.sf(k, n, a, b)`` over arrays of cells, the same numbers to
    the last bit, at numpy's speed: scipy sums each cell's probabilities of 0 to k in a
    Python loop over cells; here the cells of each distinct k are summed at once, along
    the last axis (the same pairwise sum as scipy's per cell). Cells outside the plain case
    (k at or beyond n, a shape at zero) go to scipy itself."""
    k, n, a, b = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (k, n, a, b)))
    plain = (k >= 0) & (k < n) & (k == np.floor(k)) & (n == np.floor(n)) & (a > 0) & (b > 0)
    plain &= np.isfinite(a) & np.isfinite(b)
    out = np.empty(k.shape)
    out[~plain] = stats.betabinom.sf(k[~plain], n[~plain], a[~plain], b[~plain])
    for value in np.unique(k[plain]):
        cells = plain & (k == value)
        shapes = (n[cells, None], a[cells, None], b[cells, None])
        out[cells] = 1.0 - stats.betabinom.pmf(np.arange(value + 1), *shapes).sum(axis=-1)
    return out


def _checks_table(columns: list, rng) -> pd.DataFrame:
    """The checks' table (``COLUMNS``) from its ``columns``, one row per cell: agent, task,
    method, index, successes ``k``, trials ``n``, the replicated rate, and ``above`` and
    ``equal``, each cell's ``P(k_rep > k)`` and ``P(k_rep = k)``; ``rng`` draws the
    PIT's uniforms, one per cell in order."""
    agent, task, method, index, k, n, rate, above, equal = columns
    k, n = np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64)
    above, equal = np.asarray(above, dtype=float), np.asarray(equal, dtype=float)
    value = above + 0.5 * equal
    below = np.clip(1.0 - above - equal, 0.0, 1.0)
    pit = np.clip(below + rng.uniform(size=len(k)) * equal, 0.0, 1.0)
    columns = {
        "agent": agent,
        "task": task,
        "evidence": method,
        "cell": index,
        "successes": k,
        "trials": n,
        "observed_rate": k / n,
        "replicated_rate": np.asarray(rate, dtype=float),
        "p_value": value,
        "flagged": ~((FLAG_LOW <= value) & (value <= FLAG_HIGH)),
        "pit": pit,
    }
    return pd.DataFrame(columns, columns=COLUMNS)


def _cluster_sizes(posterior, post) -> dict:
    """``{(agent, task, method, index): trials per cluster}`` of a fit that modelled
    clusters (its draws have ``kappa_cluster``); empty otherwise."""
    clusters = posterior.evidence.clusters
    if clusters is None or "kappa_cluster" not in post:
        return {}
    out = {}
    for (agent, task, method, step), rows in clusters.groupby(
        ["agent", "task", "method", "step"], sort=False
    ):
        index = f"milestone {step}" if method == MILESTONE_METHOD else ""
        out[(agent, task, method, index)] = rows["trials"].to_numpy()
    return out


def _clustered(sizes, p, phi, rng) -> np.ndarray:
    """A cell's successes replicated cluster by cluster, one per draw of ``p`` and ``phi``:
    ``sum_c Binomial(n_c, q_c)``, ``q_c ~ Beta(p phi, (1 - p) phi)``."""
    tiny = np.finfo(float).tiny
    a, b = np.maximum(p * phi, tiny), np.maximum((1 - p) * phi, tiny)
    q = rng.beta(a[:, None], b[:, None], size=(p.size, sizes.size))
    return rng.binomial(sizes, q).sum(axis=-1)


def _exact_cells(posterior) -> pd.DataFrame:
    """Every cell an exact model explains, one row per evidence row in the table's order:
    ``agent``, ``task``, ``method``, ``index`` (its position, ``position_of``),
    ``successes``, ``trials``, and the shapes ``alpha``, ``beta`` of its rate's posterior
    (NaN where it is ``graded``, a count an audited grader scored), and its pair's
    position ``i``, ``j``. A row of a pair with a point value or no estimate, or of another
    rung of the chain than the one the pair rests on, is no cell."""
    table = posterior.evidence.table
    i = pd.Index(posterior.coords[AGENT]).get_indexer(table["agent"])
    j = pd.Index(posterior.coords[TASK]).get_indexer(table["task"])
    rows = (i >= 0) & (j >= 0)
    rows[rows] = (
        (posterior.values("reason")[i[rows], j[rows]] == "")
        & np.isnan(posterior.values("point_log")[i[rows], j[rows]])
        & (table["method"].to_numpy()[rows] == posterior.values("method")[i[rows], j[rows]])
    )
    cells = table.loc[rows, ["agent", "task", "method", "step", "run", "successes", "trials"]]
    i, j = i[rows], j[rows]
    # an expert-completion row's run: its place among its pair's runs, sorted
    runs = table.loc[table["method"] == EXPERT_COMPLETION, ["agent", "task", "run"]]
    runs = runs.drop_duplicates().sort_values(["agent", "task", "run"])
    runs["place"] = runs.groupby(["agent", "task"], sort=False).cumcount()
    place = cells.merge(runs, on=["agent", "task", "run"], how="left")["place"]
    method, step = cells["method"].to_numpy(), cells["step"].to_numpy()
    completion = method == EXPERT_COMPLETION
    run = np.where(completion, place.fillna(0).to_numpy(dtype=np.int64), 0)
    slot = np.where(method == END_TO_END, 0, step - 1)
    steps = step.astype(str).astype(object)
    index = np.where(method == MILESTONE_METHOD, "milestone " + steps, "")
    index = np.where(
        completion, "run " + cells["run"].to_numpy(dtype=object) + ", step " + steps, index
    )
    a = posterior.values("alpha")[i, j, run, slot]
    b = posterior.values("beta")[i, j, run, slot]
    graded = posterior.graded_positions[i, j]
    if (graded & (method != END_TO_END)).any():  # a graded product's factors (its shapes NaN)
        fields = posterior.values("graded_factors")
        graded &= (method == END_TO_END) | ~np.isnan(fields[i, j, run, slot, 0])
    else:
        graded &= method == END_TO_END
    kept = ~np.isnan(a) | graded  # not the others (e.g. another rung of the chain)
    return pd.DataFrame(
        {
            "agent": cells["agent"].to_numpy()[kept],
            "task": cells["task"].to_numpy()[kept],
            "method": method[kept],
            "index": index[kept],
            "successes": cells["successes"].to_numpy()[kept],
            "trials": cells["trials"].to_numpy()[kept],
            "alpha": a[kept],
            "beta": b[kept],
            "i": i[kept],
            "j": j[kept],
            "run": run[kept],
            "slot": slot[kept],
            "graded": graded[kept],
        }
    )


def _graded_chances(post) -> dict:
    """A graded factor's draws of its chance to be graded a success
    (``exact.graded_product``), per name and cell label (``by_cell``)."""
    return {name: by_cell(post, name) for name in ("p_graded_milestone", "p_graded_step")}


def _graded_draws(post, chances, cell) -> np.ndarray:
    """A graded cell's draws of ``q``, the chance that a run is graded a success: its
    pair's ``p_graded`` (end-to-end), or its factor's (``chances``, ``_graded_chances``)."""
    i, j = cell["i"], cell["j"]
    if cell["method"] == END_TO_END:
        return post["p_graded"].values[:, :, i, j].ravel()
    if cell["method"] == MILESTONE_METHOD:
        label = cell_label("p_milestone", cell["agent"], cell["task"], cell["slot"] + 1)
        return chances["p_graded_milestone"][label].ravel()
    label = cell_label("p_step", cell["agent"], cell["task"], cell["run"] + 1, cell["slot"] + 1)
    return chances["p_graded_step"][label].ravel()


def _counts_and_shapes(posterior, cells):
    """The exact cells' successes, trials and Beta shapes, as floats; a graded cell's
    counts are those of its runs the audit did not score again (``Posterior.graded_at``),
    the count its grader's rate explains."""
    k, n, a, b = (cells[c].to_numpy(dtype=float) for c in ("successes", "trials", "alpha", "beta"))
    for cell in np.flatnonzero(cells["graded"].to_numpy() & (cells["method"] == END_TO_END)):
        rate = posterior.graded_at(cells["i"].iloc[cell], cells["j"].iloc[cell])
        k[cell], n[cell] = rate.graded, rate.runs
    return k, n, a, b


def exact_loo(posterior):
    """Each observed cell's leave-one-out log predictive density, exactly, for an exact fit.

    In a conjugate model a cell's rate is its own, ``Beta(a0 + k, b0 + n - k)`` after the
    cell's counts; with the cell left out the rate is back at its prior, so the cell's
    predictive is ``BetaBinomial(k | n, a0, b0)`` (under the structure the fit used: the
    rung a chain model chose stays chosen). PSIS-LOO cannot estimate it, because the cell
    alone informs its rate (its Pareto k is high). NaN where the prior is improper
    (Haldane's ``Beta(0, 0)``): such a model predicts nothing for a cell it has not seen.

    Returns
    -------
    xarray.DataArray
        ``elpd_loo`` over the ``cell`` dimension of the fit's predictive groups
        (``cell_coords``), in their order.
    """
    return exact_log_predictive(posterior)["elpd_loo"]


def exact_log_predictive(posterior):
    """Each observed cell's ``elpd_loo`` (``exact_loo``) and, beside it, its in-sample
    log predictive density ``lppd``: ``BetaBinomial(k | n, a, b)`` under the cell's
    posterior ``Beta(a, b)`` (the binomial at the point mass its draws take where a
    shape is 0), both in closed form, over ``exact_loo``'s ``cell`` dimension. A count
    an audited grader scored has its marginal likelihood as ``elpd_loo`` (exact) and its
    ``lppd`` from the joint posterior's draws."""
    import xarray as xr

    cells = _exact_cells(posterior)
    k, n, a, b = _counts_and_shapes(posterior, cells)
    priors = {
        method: posterior.spec.priors[role]
        for method, role in PRIOR_ROLES.items()
        if role in posterior.spec.priors
    }
    a0 = cells["method"].map({m: prior.alpha for m, prior in priors.items()}).to_numpy(dtype=float)
    b0 = cells["method"].map({m: prior.beta for m, prior in priors.items()}).to_numpy(dtype=float)
    keys = list(zip(cells["method"], cells["agent"], cells["task"], cells["index"], strict=True))
    elpd_loo = _beta_binomial_logpmf(k, n, a0, b0, improper=np.nan)
    lppd = _beta_binomial_logpmf(k, n, a, b, improper=None)
    post = posterior.draws if cells["graded"].any() else None
    chances = _graded_chances(post) if post is not None else {}
    for cell in np.flatnonzero(cells["graded"].to_numpy()):
        # left out: the graded count's marginal given the pair's other counts, the
        # grader's audit kept (exact.graded, exact.graded_product); in sample: the
        # binomial at the joint posterior's draws of q
        row = cells.iloc[cell]
        if row["method"] == END_TO_END:
            elpd_loo[cell] = posterior.graded_at(row["i"], row["j"]).log_evidence
        else:
            product = posterior.graded_product_at(row["i"], row["j"])
            fields = posterior.values("graded_factors")[row["i"], row["j"], row["run"]]
            factor = int(np.sum(~np.isnan(fields[: row["slot"], 0])))  # its place in the run
            elpd_loo[cell] = product.left_out(int(row["run"]), factor)
        q = _graded_draws(post, chances, row)
        log_pmf = stats.binom.logpmf(k[cell], n[cell], q)
        lppd[cell] = special.logsumexp(log_pmf) - np.log(q.size)
    return xr.Dataset(
        {"elpd_loo": ("cell", elpd_loo), "lppd": ("cell", lppd)}, coords=cell_coords(keys)
    )


def _beta_binomial_logpmf(k, n, a, b, improper):
    """``log BetaBinomial(k | n, a, b)``; where ``a`` or ``b`` is 0, ``improper`` or,
    where it is None, the binomial at the point mass the Beta's draws take (``p = 1``
    where ``b`` is 0, else ``p = 0``)."""
    proper = (a > 0) & (b > 0)
    values = np.full(k.shape, np.nan)
    values[proper] = stats.betabinom.logpmf(k[proper], n[proper], a[proper], b[proper])
    if improper is None:
        at = np.where(b[~proper] > 0, 0.0, 1.0)
        values[~proper] = binomial_logpmf(k[~proper], n[~proper], at)
    else:
        values[~proper] = improper
    return values


def position_of(method: str, step, run) -> str:
    """An evidence row's position in its pair, as its cell's ``position`` coordinate:
    ``milestone 2``, ``run r1, step 2``, or empty (an end-to-end row)."""
    if method == MILESTONE_METHOD:
        return f"milestone {step}"
    if method == EXPERT_COMPLETION:
        return f"run {run}, step {step}"
    return ""


def pair_coords(pairs) -> dict:
    """The coordinates of a ``pair`` dimension, one per ``(agent, task)``: ``pair`` names
    it (``agent / task``), ``agent`` and ``task`` label it too. The log-likelihoods of
    whole pairs share them."""
    return {
        "pair": ("pair", [f"{agent} / {task}" for agent, task in pairs]),
        "agent": ("pair", [agent for agent, _ in pairs]),
        "task": ("pair", [task for _, task in pairs]),
    }


def cell_coords(keys) -> dict:
    """The coordinates of a ``cell`` dimension, one cell per ``(method, agent, task,
    position)`` key: ``cell`` names it (``agent / task / milestone 2``, ``_named``), and
    ``agent``, ``task``, ``evidence`` and ``position`` (milestone or run and step) label it
    too. The predictive groups and the log-likelihood share them."""
    labels = {
        "cell": [
            f"{agent} / {task} / {_named(method, index)}" for method, agent, task, index in keys
        ],
        "agent": [key[1] for key in keys],
        "task": [key[2] for key in keys],
        "evidence": [key[0] for key in keys],
        "position": [key[3] for key in keys],
    }
    return {name: ("cell", np.array(values, dtype=str)) for name, values in labels.items()}


def _named(method: str, index: str) -> str:
    """A cell's method and position as its label ends: ``end_to_end``, ``milestone 2``,
    ``expert_completion run 1, step 2``."""
    return index if index.startswith(method) else f"{method} {index}".strip()


def _cluster_concentration(post, agent: str) -> np.ndarray:
    """The draws of ``kappa_cluster`` of ``agent``'s cells: one per agent in the pooled
    models, one for all in the crossed ones."""
    phi = post["kappa_cluster"]
    return (phi.sel({AGENT: agent}) if AGENT in phi.dims else phi).values


def replicate(posterior, post, seed: int, log_likelihood: bool = True) -> dict:
    """The predictive groups in ArviZ's layout, over one ``cell`` per observed count.

    ``posterior_predictive`` holds ``successes`` replicated per draw of ``post`` (the
    posterior draws), ``observed_data`` the observed ``successes`` and ``constant_data``
    the ``trials``, labelled by ``cell_coords``. An exact fit also gets its
    ``log_likelihood``, unless ``log_likelihood`` is False (a prior's replicates): each
    cell's binomial log probability given the draw of its rate, the likelihood the
    conjugate model conditions on (a pooled fit makes its own).
    """
    import xarray as xr

    rng = np.random.default_rng(seed)
    cells = _cells(posterior, post)
    clusters = _cluster_sizes(posterior, post)
    coords = cell_coords([c[:4] for c in cells])
    replicated = []
    for method, agent, task, index, _, n, draws in cells:
        p = np.clip(draws, 0.0, 1.0)
        sizes = clusters.get((agent, task, method, index))
        if sizes is None:
            replicated.append(rng.binomial(n, p))
            continue
        phi = _cluster_concentration(post, agent)
        replicated.append(_clustered(sizes, p.ravel(), phi.ravel(), rng).reshape(p.shape))
    shape = (post.sizes["chain"], post.sizes["draw"], 0)
    values = np.stack(replicated, axis=-1) if cells else np.zeros(shape, dtype=np.int64)
    observed = np.array([c[4] for c in cells], dtype=np.int64)
    trials = np.array([c[5] for c in cells], dtype=np.int64)
    sample = {"chain": post["chain"], "draw": post["draw"]}
    groups = {
        "posterior_predictive": xr.Dataset(
            {"successes": (("chain", "draw", "cell"), values)}, coords={**sample, **coords}
        ),
        "observed_data": xr.Dataset({"successes": ("cell", observed)}, coords=coords),
        "constant_data": xr.Dataset({"trials": ("cell", trials)}, coords=coords),
    }
    if log_likelihood and not posterior.is_mcmc:
        rates = np.stack([c[6] for c in cells], axis=-1) if cells else np.zeros(shape)
        log_lik = binomial_logpmf(observed, trials, np.clip(rates, 0.0, 1.0))
        groups["log_likelihood"] = xr.Dataset(
            {"successes": (("chain", "draw", "cell"), log_lik)}, coords={**sample, **coords}
        )
    return groups


def binomial_logpmf(successes, trials, rates) -> np.ndarray:
    """``scipy.stats.binom.logpmf(successes, trials, rates)`` term for term, with the
    binomial coefficient computed once per count rather than once per rate: the counts
    broadcast against the rates' last axis (draws of thousands of cells' rates cost
    scipy three log-gammas each)."""
    k = np.floor(np.asarray(successes, dtype=float))
    n = np.asarray(trials)
    log_choose = special.gammaln(n + 1) - (special.gammaln(k + 1) + special.gammaln(n - k + 1))
    return log_choose + special.xlogy(k, rates) + special.xlog1py(n - k, -rates)
