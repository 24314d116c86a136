"""Partially pooled models on PyMC.

Mean/concentration parameterisation, ``p ~ Beta(mu kappa, (1 - mu) kappa)``. Where
the rates enter the likelihood only through their own counts they are marginalised
(``k ~ BetaBinomial(n, mu kappa, (1 - mu) kappa)``) and drawn back exactly for every
posterior draw, ``p | mu, kappa, k ~ Beta(mu kappa + k, (1 - mu) kappa + n - k)``, so
NUTS explores only the hyperparameters:

* ``end_to_end`` / ``tasks``: per agent ``mu``, ``kappa``; each task's ``P`` pooled.
* ``milestone`` / ``partial`` (the ``hierarchical`` spec): milestone rates pooled within
  a task around the task mean ``mu_task``; task means pooled across tasks around the
  agent's ``mu_agent`` with concentration ``kappa_agent``; ``P = prod p_m``.
* ``expert_completion`` / ``steps``: the same hierarchy over a run's steps; a task's
  ``P`` is the equal mixture over its runs of the product of their step rates.
* ``joint`` / ``partial``: the milestone hierarchy plus end-to-end counts
  ``k ~ Binomial(n, Q + (1 - Q) lambda)``, ``Q = prod p_m``, with a bypass probability
  ``lambda`` per task pooled across tasks (``mu_bypass``, ``kappa_bypass`` per agent).
  Here the milestone rates of a task also explain its end-to-end counts; they are still
  marginalised for tasks with up to ``MARGINAL_END_TO_END`` end-to-end trials (an exact
  finite sum, ``_survivor_chain``) and sampled above; ``lambda`` is marginalised (a finite
  sum, see ``_joint_model``); both are drawn back exactly; a task without end-to-end
  runs takes its ``lambda`` from the population.

Runs that come in clusters (a shared seed, sample or day: ``Evidence.clusters``) are
not independent trials. ``end_to_end`` / ``tasks`` and ``milestone`` / ``partial`` then
give each cluster its own rate around the rate it shares, ``q_c ~ Beta(p kappa_cluster,
(1 - p) kappa_cluster)`` with one ``kappa_cluster`` per agent; both ``q_c`` and ``p`` are
marginalised exactly (a finite sum, ``bayes_eval.clusters``) and ``p`` drawn back
exactly, so the bounds widen as much as the clusters differ and NUTS still explores only
the hyperparameters.

Each task mean (and, in ``joint``, each milestone rate) is sampled centred where its data
pin it down and non-centred where they say little about it (``choose_form``): a centred
parameter whose data are weak forms a funnel with its population's concentration, and a
non-centred one whose data are strong forms the inverse funnel. If the fit still fails
its diagnostics, it is refitted with a higher target_accept (and more draws where the
ESS is short), then in the other form; the best fit by its diagnostics is kept, and the
provenance names every attempt and which one was kept and why.

PyMC is imported only here and in ``bayes_eval.engines`` (which samples), and only when a
pooled model is fitted.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from bayes_eval.clusters import ClusterTerms, cluster_terms, draw_log_rates, log_marginal
from bayes_eval.conjugate import log_beta_draws
from bayes_eval.constants import (
    AGENT,
    CENTRED_MARGIN,
    EBFMI_MIN,
    END_TO_END,
    ESS_MIN,
    EXPERT_COMPLETION,
    MILESTONE,
    MILESTONE_METHOD,
    RETRY_TARGET_ACCEPT,
    RHAT_MAX,
    RUN,
    SAMPLER_DEFAULTS,
    STEP,
    TASK,
)
from bayes_eval.diagnostics import diagnose

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "build_layout",
    "centred_text",
    "count_data",
    "count_data_vars",
    "fit_attempts",
    "fit_pooled",
    "model_structure",
    "pooled_rates",
    "sample_until_diagnosed",
]

# End-to-end trials per task up to which the joint model marginalises the task's milestone
# rates (an exact finite sum whose cost grows as trials squared); above it they are
# sampled. Sampled with 7 to 10 trials, weak data, the rates formed a funnel with their
# concentration that failed the gate on 3 of 30 random designs (studies/robustness.py).
# At 10 a gradient costs what the earlier cubic sum cost at 5 (benchmarks/joint_gradient.py).
MARGINAL_END_TO_END = 10

ALL_DIMS = ("chain", "draw", AGENT, TASK)


@dataclass
class Layout:
    """The evidence of a pooled model as flat arrays.

    ``pairs`` are the (agent, task) estimated; ``pair_agent`` indexes ``agents``.
    Cells are milestone or step counts: ``cell_pair``, ``cell_run`` (0 for
    milestones), ``cell_factor`` (milestone or step number), ``k``, ``n``.
    End-to-end counts per pair are ``e2e_k``, ``e2e_n`` (``n = 0``: none).
    Where runs are clustered, ``clusters`` holds the terms of each rate's marginal
    (``bayes_eval.clusters``): the rates are the pairs (end-to-end) or the milestone cells;
    ``cluster_rows`` are the rows of ``Evidence.clusters`` they come from.
    """

    agents: list
    tasks: list
    pairs: list
    pair_agent: np.ndarray
    cell_pair: np.ndarray
    cell_run: np.ndarray
    cell_factor: np.ndarray
    k: np.ndarray
    n: np.ndarray
    e2e_k: np.ndarray
    e2e_n: np.ndarray
    runs: list
    clusters: ClusterTerms | None = None
    cluster_rows: np.ndarray | None = None


@dataclass(frozen=True)
class Form:
    """Which parameters are sampled centred: the task mean of each pair, and in ``joint``
    the rate of each milestone cell it samples (both empty for ``end_to_end``, which has
    neither). ``tails`` marks the sampled rates whose counts are all successes (1) or
    all failures (-1): those are sampled on their tail scale (``_tail_beta``) in every
    form, and ``cells`` does not apply to them."""

    pairs: np.ndarray
    cells: np.ndarray
    tails: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))

    @property
    def flippable(self) -> bool:
        return self.pairs.size > 0

    def key(self) -> tuple:
        return self.pairs.tobytes(), self.cells.tobytes(), self.tails.tobytes()

    def refits(self, diagnostics) -> list:
        """The forms to refit in, in order, after a first fit that failed: the same form
        (with more draws, or a smaller step), then the other form (``flipped``)."""
        return [self, self.flipped()] if self.flippable else [self]

    def flipped(self) -> Form:
        """The other form: all non-centred where any part is centred, else all centred
        (the tail scales stay)."""
        centred = not (self.pairs.any() or self.cells[self.tails == 0].any())
        return Form(
            np.full_like(self.pairs, centred), np.full_like(self.cells, centred), self.tails
        )

    def describe(self) -> str:
        parts = [f"task means {centred_text(self.pairs)}"]
        if self.cells.size:
            tail = self.tails != 0
            text = f"milestone rates {centred_text(self.cells[~tail])}" if (~tail).any() else ""
            if tail.any():
                scale = f"{int(tail.sum())} on their tail scale"
                text = f"{text}, {scale}" if text else f"milestone rates {scale}"
            parts.append(text)
        return ", ".join(parts)


def centred_text(centred: np.ndarray) -> str:
    """How the parameters ``centred`` marks are sampled, in the provenance's words."""
    if centred.all():
        return "centred"
    if not centred.any():
        return "non-centred"
    return f"{int(centred.sum())} centred, {int((~centred).sum())} non-centred"


def choose_form(layout, spec) -> Form:
    """Centred where the data say more about a parameter than its population does.

    A task mean is centred when the information its milestones carry about it, ``sum_m
    1 / (1 / (kappa + 1) + 1 / n_m)`` (each milestone a noisy draw around the mean), is
    ``CENTRED_MARGIN`` times its prior's, ``kappa_agent + 1``.

    The joint model's sampled milestone rates (tasks with more than
    ``MARGINAL_END_TO_END`` end-to-end trials):

    * a rate whose own counts are all successes (or all failures) is bounded by them on
      one side only, and on the logit scale its other side stretches as ``1 / b`` when its
      task mean nears 1: it is marked for its tail scale (``Form.tails``, ``_tail_beta``);
    * a rate with ``n`` trials is centred when its binomial information, ``n / (p (1 -
      p))``, is ``CENTRED_MARGIN`` times its Beta prior's, ``(kappa + 1) / (p (1 - p))``;
      ``n`` counts the task's end-to-end trials too, which inform every rate through the
      product (on the second robustness design, 33 end-to-end trials and most milestones
      all-success, the rates with fewer than 33 trials of their own, non-centred,
      diverged);
    * a rate with both successes and failures of its own is bounded by them on both
      sides whatever its shapes, so it is centred from a margin of 1 (``kappa + 1``
      trials): non-centred, its scale grows as ``1 / b`` when its task mean nears 1 and
      its data pin ``z`` in a ridge that narrows with ``b`` (the fourth robustness design,
      15 + 15 trials, diverged there).

    Both concentrations are taken at their prior medians: the choice is made before any
    fit. The margin leans towards the non-centred form, which at worst mixes more slowly
    where the centred one diverges (``studies/robustness.py``).
    """
    empty = np.zeros(0, dtype=bool)
    if spec.kind == "end_to_end":
        return Form(empty, empty)
    role = "step_concentration" if spec.kind == "expert_completion" else "milestone_concentration"
    kappa = np.exp(spec.priors[role].params["mu"])  # LogNormal median
    kappa_agent = np.exp(spec.priors["task_concentration"].params["mu"])
    n = layout.n.astype(float)
    per_cell = n * (kappa + 1) / (n + kappa + 1)  # 1 / (1 / (kappa + 1) + 1 / n), 0 at n = 0
    information = np.bincount(layout.cell_pair, per_cell, minlength=len(layout.pairs))
    pairs = information >= CENTRED_MARGIN * (kappa_agent + 1)
    if spec.kind != "joint":
        return Form(pairs, empty)
    sampled = _sampled_cells(layout)  # only the cells it samples
    trials = (layout.n + layout.e2e_n[layout.cell_pair])[sampled]
    k, n = layout.k[sampled], layout.n[sampled]
    tails = np.where((k == n) & (n > 0), 1, np.where((k == 0) & (n > 0), -1, 0))
    mixed = (k > 0) & (k < n)  # bounded by its own data on both sides
    cells = (trials >= CENTRED_MARGIN * (kappa + 1)) | (mixed & (trials >= kappa + 1))
    return Form(pairs, cells, tails.astype(np.int8))


def fit_pooled(evidence, by_pair, spec, *, level, seed, sampler=None, log=sys.stderr):
    """Fit a pooled spec with MCMC and return a ``Posterior`` carrying its draws.

    Parameters
    ----------
    evidence : Evidence
    by_pair : dict
        ``{(agent, task): {method: rows}}`` of the rows the model uses.
    spec : Spec
    level : float
    seed : int
    sampler : dict, optional
        Overrides of the spec's ``[sampler]`` (engine, draws, tune, chains,
        target_accept).
    log : file, optional
        Where progress lines go (stderr); None for silence.
    """

    from bayes_eval.posterior import Posterior

    settings = {**SAMPLER_DEFAULTS, **spec.sampler, **(sampler or {})}
    layout = build_layout(by_pair, spec, evidence.clusters)
    build = (BUILDERS if layout.clusters is None else CLUSTERED_BUILDERS)[spec.kind]

    def finish(draws):
        rates = pooled_rates(draws, layout, spec, np.random.default_rng(seed + 1))
        draws = draws.assign(rates).assign_coords({TASK: layout.tasks, **_labels(layout, draws)})
        for dim, name in ((MILESTONE, "p_milestone"), (STEP, "p_step")):
            if name in draws:
                draws = draws.assign_coords({dim: np.arange(1, draws.sizes[dim] + 1)})
        if "p_step" in draws:
            draws = draws.assign_coords({RUN: np.arange(1, draws.sizes[RUN] + 1)})
        return draws

    groups, run_text = sample_until_diagnosed(
        lambda form: build(layout, spec, form),
        finish,
        choose_form(layout, spec),
        settings,
        seed,
        log,
        model_structure(layout, spec),
        cells=layout.n.size + layout.e2e_n.size,
    )
    if layout.clusters is not None:
        run_text += (
            f"; runs in {layout.clusters.cluster_rate.size} clusters, over-dispersed within "
            "a cluster (a Beta-Binomial per cluster, kappa_cluster per agent)"
        )
    groups["conjugate"] = _estimates(layout, spec, seed, run_text)
    return Posterior.build(groups, spec, evidence, level=level, seed=seed)


def sample_until_diagnosed(build, finish, form, settings, seed, log, key, cells):
    """Sample a model until its fit passes the diagnostics gate, or the retries run out.

    The engine is chosen once (``engines.choose_engine``: ``auto`` says why on ``log``).
    The first fit uses ``form``, ``settings`` and ``seed``; if it fails, it is refitted with
    ``_retry_settings`` in the forms ``form.refits`` names (the same form, then the other
    one), one after another until one passes, attempt ``i`` (from 0) with seed
    ``seed + i``. The best fit by its diagnostics is kept.

    Parameters
    ----------
    build : callable
        ``build(form)`` returns the PyMC model.
    finish : callable
        ``finish(draws)`` returns the posterior Dataset (rates drawn back, coordinates).
    form : Form
    settings : dict
        Sampler settings (engine, draws, tune, chains, target_accept).
    seed : int
    log : file or None
    key : tuple
        The model's structure, for the compiled-model cache (``model_structure``).
    cells : int
        The table's count cells, for ``auto``'s choice.

    Returns
    -------
    groups : dict
        ``posterior`` and ``sample_stats`` of the kept fit.
    run_text : str
        The sampler settings and form of the kept fit, and every attempt where there
        were several (the provenance's words).
    """
    import xarray as xr

    from bayes_eval.engines import choose_engine, sample

    engine = choose_engine(settings["engine"], cells)
    if engine.reason and log is not None:
        print(f"engine: {engine.name}, chosen by auto: {engine.reason}", file=log, flush=True)
    settings = {**settings, "engine": engine}

    def run(form, tried, attempt):
        # a refit starts its chains afresh (seed + attempt): a chain stuck in its warm-up
        # (its step size collapsed) would otherwise be stuck again in the same place
        trace = sample(build(form), engine, tried, seed + attempt, log, key=(*key, form.key()))
        draws = finish(trace["posterior"].to_dataset())
        stats = trace["sample_stats"].to_dataset()
        stats.attrs["target_accept"] = float(tried["target_accept"])
        groups = {"posterior": draws, "sample_stats": stats}
        return groups, diagnose(xr.DataTree.from_dict(groups))

    plans = [(form, settings)]
    fits, attempts = [], []
    while plans:
        form, tried = plans.pop(0)
        attempt = len(fits)
        fits.append((*run(form, tried, attempt), form, tried))
        failed = fits[-1][1].messages
        reseeded = f", seed {seed + attempt}" if attempt else ""
        attempts.append(f"{_attempt(form, tried)}{reseeded}: " + ("; ".join(failed) or "passed"))
        if not failed:
            break
        if len(fits) == 1:
            retry = _retry_settings(fits[0][1], settings)
            # the same form and settings again would only repeat the fit
            plans = [
                (other, retry)
                for other in form.refits(fits[0][1])
                if other.key() != form.key() or retry != settings
            ]
        if plans and log is not None:
            print(
                f"sampling: the fit failed its diagnostics ({failed[0]}); refitting with "
                f"{_attempt(*plans[0])}",
                file=log,
                flush=True,
            )
    best = min(range(len(fits)), key=lambda i: _badness(fits[i][1]))
    groups, diagnostics, form, tried = fits[best]
    record = ""
    if len(fits) > 1:
        why = "it passed" if diagnostics.ok else "the fewest failed checks"
        record = f"; kept attempt {best + 1} of {len(fits)} ({why}): " + "; ".join(
            f"attempt {i + 1} {text}" for i, text in enumerate(attempts)
        )
    chosen = f"; engine chosen by auto: {engine.reason}" if engine.reason else ""
    return groups, _attempt(form, tried) + record + chosen


def _labels(layout, draws) -> dict:
    """Names for the pooled models' index dimensions, as the diagnostics show them:
    ``agent, task`` for a pair, ``agent, task, milestone m`` for a sampled cell."""

    def cell(c):
        agent, task = layout.pairs[layout.cell_pair[c]]
        return f"{agent}, {task}, milestone {layout.cell_factor[c]}"

    labels = {"pair": [f"{agent}, {task}" for agent, task in layout.pairs]}
    if "sampled_cell" in draws.dims:
        labels["sampled_cell"] = [cell(c) for c in draws["sampled_cell"].values]
    return {dim: names for dim, names in labels.items() if dim in draws.dims}


def _attempt(form, settings) -> str:
    """One fit's sampler settings and form, as the provenance names them."""
    engine = settings["engine"]
    text = (
        f"{engine.name} ({engine.device}) {settings['chains']} chains x {settings['draws']} draws "
        f"(tune {settings['tune']}, target_accept {settings['target_accept']:g})"
    )
    return text + (f", {form.describe()}" if form.flippable else "")


def fit_attempts(provenance: str) -> int:
    """How many fits a pooled estimate took, read from its provenance ("kept attempt i of
    N", which ``fit_pooled`` writes only where there was more than one)."""
    found = re.search(r"kept attempt \d+ of (\d+)", provenance)
    return int(found.group(1)) if found else 1


def _retry_settings(diagnostics, settings) -> dict:
    """The settings of the refit: target_accept raised to 0.99 where the fit diverged (or
    its energy was explored poorly), the draws doubled where an ESS fell short or the
    chains disagreed."""
    out = dict(settings)
    if diagnostics.divergences or min(diagnostics.ebfmi, default=1.0) < EBFMI_MIN:
        out["target_accept"] = max(RETRY_TARGET_ACCEPT, float(settings["target_accept"]))
    table = diagnostics.table
    short = (table[["ess_bulk", "ess_tail"]] < ESS_MIN).any(axis=None)
    if short or (table["r_hat"] > RHAT_MAX).any():
        out["draws"] = 2 * int(settings["draws"])
    return out


def _badness(diagnostics) -> tuple:
    """Order of fits, best first: passed, then fewer failed checks, fewer divergences, a
    smaller largest R-hat and a larger smallest tail ESS."""
    table = diagnostics.table
    return (
        not diagnostics.ok,
        len(diagnostics.messages),
        diagnostics.divergences,
        float(table["r_hat"].max()),
        -float(table["ess_tail"].min()),
    )


def _estimates(layout, spec, seed, run) -> xr.Dataset:
    """The ``conjugate`` group of a pooled fit: method, provenance (model, priors, sampler)
    and the end-to-end counts behind the Clopper-Pearson bound, per (agent, task)."""
    import xarray as xr

    shape = (len(layout.agents), len(layout.tasks))
    method = np.full(shape, "", dtype=object)
    provenance = np.full(shape, "", dtype=object)
    priors = ", ".join(f"{role} {prior.label()}" for role, prior in spec.priors.items())
    run = f"{run}; seed {seed}"
    e2e = np.full(shape + (2,), -1, dtype=np.int64)
    for p, (agent, task) in enumerate(layout.pairs):
        i, j = layout.agents.index(agent), layout.tasks.index(task)
        method[i, j] = spec.kind
        provenance[i, j] = f"{spec.name}; {spec.kind}/{spec.pooling}; {priors}; {run}"
        if layout.e2e_n[p] > 0 and spec.kind in ("end_to_end", "joint"):
            e2e[i, j] = (layout.e2e_k[p], layout.e2e_n[p])
    pair = (AGENT, TASK)
    return xr.Dataset(
        {
            "method": (pair, method.astype(str)),
            "provenance": (pair, provenance.astype(str)),
            "reason": (pair, np.full(shape, "", dtype=str)),
            "point_log": (pair, np.full(shape, np.nan)),
            "cp_successes": (pair, e2e[..., 0]),
            "cp_trials": (pair, e2e[..., 1]),
        },
        coords={AGENT: layout.agents, TASK: layout.tasks},
    )


# ---------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------


def build_layout(by_pair, spec, clusters=None) -> Layout:
    """The flat arrays a pooled or crossed model indexes, from the evidence rows of each
    (agent, task) pair that ``spec`` reads (``clusters``: ``Evidence.clusters``, if any)."""
    pairs = list(by_pair)
    agents = list(dict.fromkeys(a for a, _ in pairs))
    tasks = list(dict.fromkeys(t for _, t in pairs))
    cell_method = {
        "milestone": MILESTONE_METHOD,
        "expert_completion": EXPERT_COMPLETION,
        "joint": MILESTONE_METHOD,
    }.get(spec.kind)
    cells, e2e, runs = [], [], []
    for p, pair in enumerate(pairs):
        rows = by_pair[pair]
        run_names = []
        if cell_method is not None:
            table = rows[cell_method]
            run_names = sorted(set(table["run"])) if cell_method == EXPERT_COMPLETION else [""]
            for run, step, k, n in zip(
                table["run"], table["step"], table["successes"], table["trials"], strict=True
            ):
                cells.append((p, run_names.index(run) if run in run_names else 0, step, k, n))
        runs.append(run_names)
        if END_TO_END in rows:
            row = rows[END_TO_END].iloc[0]
            e2e.append((int(row["successes"]), int(row["trials"])))
        else:
            e2e.append((0, 0))
    cells = np.array(cells, dtype=np.int64).reshape(-1, 5)
    e2e = np.array(e2e, dtype=np.int64).reshape(-1, 2)
    terms = rows = None
    if clusters is not None and spec.kind in CLUSTERED_BUILDERS:
        terms, rows = _cluster_terms(clusters, spec, pairs, cells)
    return Layout(
        agents=agents,
        tasks=tasks,
        pairs=pairs,
        pair_agent=np.array([agents.index(a) for a, _ in pairs]),
        cell_pair=cells[:, 0],
        cell_run=cells[:, 1],
        cell_factor=cells[:, 2],
        k=cells[:, 3],
        n=cells[:, 4],
        e2e_k=e2e[:, 0],
        e2e_n=e2e[:, 1],
        runs=runs,
        clusters=terms,
        cluster_rows=rows,
    )


def _cluster_terms(clusters, spec, pairs, cells) -> tuple[ClusterTerms, np.ndarray]:
    """The marginal's terms of every rate of the pairs fitted, a pair's end-to-end rate or
    a milestone cell's rate (``cells``: the layout's rows of pair, run, step, k, n), and
    the rows of ``clusters`` they rest on."""
    method = END_TO_END if spec.kind == "end_to_end" else MILESTONE_METHOD
    rows = clusters[clusters["method"] == method]
    index = {pair: p for p, pair in enumerate(pairs)}
    pair = np.array([index.get(key, -1) for key in zip(rows["agent"], rows["task"], strict=True)])
    rows, pair = rows[pair >= 0], pair[pair >= 0]
    k, n = rows["successes"].to_numpy(np.int64), rows["trials"].to_numpy(np.int64)
    used = rows.index.to_numpy()
    if spec.kind == "end_to_end":
        return cluster_terms(pair, k, n, len(pairs)), used
    cell_of = {(c[0], c[2]): i for i, c in enumerate(cells)}
    steps = rows["step"].to_numpy(np.int64)
    rate = np.array([cell_of[(p, m)] for p, m in zip(pair, steps, strict=True)], dtype=np.int64)
    return cluster_terms(rate, k, n, len(cells)), used


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------


def _concentration(pm, name, prior, dims):
    """``log kappa`` of a LogNormal concentration (``name``, sampled on the log scale)."""
    import pytensor.tensor as pt

    kappa = pm.LogNormal(name, mu=prior.params["mu"], sigma=prior.params["sigma"], dims=dims)
    return pt.log(kappa)


def _mean(pm, name, prior, dims):
    """``log mu`` and ``log (1 - mu)`` of a Beta-distributed mean, sampled as its logit."""
    import pytensor.tensor as pt

    size = len(pm.modelcontext(None).coords[dims])
    log_a, log_b = (pt.as_tensor(np.full(size, np.log(v))) for v in (prior.alpha, prior.beta))
    return _beta_parts(pm, name, log_a, log_b, np.ones(size, dtype=bool), dims)


def _coords(layout):
    return {
        AGENT: layout.agents,
        "pair": np.arange(len(layout.pairs)),
        "cell": np.arange(layout.k.size),
    }


def _end_to_end_model(layout, spec, form=None):
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model(coords=_coords(layout)) as model:
        log_mu, log_1mu = _mean(pm, "mu", spec.priors["mean"], AGENT)
        log_kappa = _concentration(pm, "kappa", spec.priors["concentration"], AGENT)
        k, f = count_data_vars(pm, "k_obs", layout.e2e_k, layout.e2e_n, "pair")
        a, b = pt.exp(log_mu + log_kappa), pt.exp(log_1mu + log_kappa)
        pm.Potential("k_end_to_end", _beta_binomial(a, b, layout.pair_agent, k, f, layout.e2e_n))
    return model


def _task_hierarchy(pm, layout, spec, form):
    """Agent-level mean of task means, task means, and the within-task concentration.

    ``mu_task ~ Beta(a, b)``, ``a = mu_agent kappa_agent``, ``b = (1 - mu_agent)
    kappa_agent``, sampled centred (``mu_task_logit``) for the pairs ``form.pairs`` marks
    and non-centred (``mu_task_z``) for the others: exactly the same prior either way.
    Returns ``log mu_task``, ``log (1 - mu_task)`` and ``log kappa``.
    """
    log_mu, log_1mu = _mean(pm, "mu_agent", spec.priors["task_mean"], AGENT)
    log_kappa = _concentration(pm, "kappa_agent", spec.priors["task_concentration"], AGENT)
    agent = layout.pair_agent
    log_a, log_b = (log_mu + log_kappa)[agent], (log_1mu + log_kappa)[agent]
    log_task, log_1m_task = _beta_parts(pm, "mu_task", log_a, log_b, form.pairs, "pair")
    role = "step_concentration" if spec.kind == "expert_completion" else "milestone_concentration"
    return log_task, log_1m_task, _concentration(pm, "kappa", spec.priors[role], AGENT)


def _beta_parts(pm, name, log_a, log_b, centred, dim, tails=None):
    """``log p`` and ``log (1 - p)`` of ``p ~ Beta(a, b)`` over ``dim``, from the shapes'
    logs. Sampled on the logit scale, centred (``{name}_logit``) where ``centred`` and
    non-centred (``{name}_z``, ``_noncentred_beta``) elsewhere, except where ``tails``
    is 1 or -1: there on the upper or lower tail scale (``{name}_upper``,
    ``{name}_lower``, ``_tail_beta``). ``p`` is recorded as the deterministic ``name``.

    Every form keeps ``log p`` and ``log (1 - p)`` exact where ``p`` rounds to 0 or 1 (an
    all-success task whose mean's logit wanders to 40): PyMC's Beta would make the shape
    ``(1 - p) kappa`` 0 there, and the step a divergence.
    """
    import pytensor.tensor as pt

    size = centred.size
    tails = np.zeros(size, dtype=np.int8) if tails is None else tails
    log_p, log_1mp = pt.zeros(size), pt.zeros(size)
    forms = {
        "logit": (centred & (tails == 0), _logit_beta),
        "z": (~centred & (tails == 0), _noncentred_beta),
        "upper": (tails == 1, _tail_beta),
        "lower": (tails == -1, _tail_beta),
    }
    for form, (mask, parts) in forms.items():
        where = np.flatnonzero(mask)
        if not where.size:
            continue
        free = pm.Flat(f"{name}_{form}", shape=where.size)
        if form == "lower":  # the upper tail of 1 - p ~ Beta(b, a)
            log_1mx, log_x, log_density = parts(log_b[where], log_a[where], free)
        else:
            log_x, log_1mx, log_density = parts(log_a[where], log_b[where], free)
        pm.Potential(f"{name}_{form}_prior", pt.sum(log_density))
        log_p = pt.set_subtensor(log_p[where], log_x)
        log_1mp = pt.set_subtensor(log_1mp[where], log_1mx)
    pm.Deterministic(name, pt.exp(log_p), dims=dim)
    return log_p, log_1mp


def _logit_beta(log_a, log_b, x):
    """``log p``, ``log (1 - p)`` and the log density of ``x = logit p``, ``p ~ Beta(a, b)``:
    ``a log p + b log (1 - p) - log B(a, b)`` (the Beta density times ``p (1 - p)``)."""
    import pytensor.tensor as pt

    a, b = pt.exp(log_a), pt.exp(log_b)
    log_p, log_1mp = -pt.softplus(-x), -pt.softplus(x)
    log_beta = pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(a + b)
    return log_p, log_1mp, a * log_p + b * log_1mp - log_beta


def _noncentred_beta(log_a, log_b, z):
    """``log p``, ``log (1 - p)`` and the log density of ``z`` for ``p ~ Beta(a, b)`` written
    as ``logit p = log(a / b) + z sqrt(1 / a + 1 / b + 1 / a^2 + 1 / b^2)``.

    The scale follows the sd of ``logit p``, ``sqrt(trigamma(a) + trigamma(b))``: about
    ``sqrt(1 / a + 1 / b)`` for large shapes and ``sqrt(1 / a^2 + 1 / b^2)`` for small
    ones, so ``z`` is about standard normal whatever ``a`` and ``b``. With the large-shape
    scale alone, the tails of ``z`` under shapes near 0.05 (a concentration near 0.1)
    would decay at rate ``sqrt(a)``, a heavy tail that NUTS crosses only with long
    trajectories. The density (``_logit_beta`` plus ``log |d logit p / dz| = log scale``)
    keeps ``p`` exactly Beta. Neither needs digamma or trigamma, whose gradients numba
    would run in object mode.
    """
    import pytensor.tensor as pt

    inverse_a, inverse_b = pt.exp(-log_a), pt.exp(-log_b)
    scale = pt.sqrt(inverse_a * (1 + inverse_a) + inverse_b * (1 + inverse_b))
    log_p, log_1mp, log_density = _logit_beta(log_a, log_b, log_a - log_b + scale * z)
    return log_p, log_1mp, log_density + pt.log(scale)


def _tail_beta(log_a, log_b, w):
    """``log p``, ``log (1 - p)`` and the log density of ``w`` for ``p ~ Beta(a, b)``
    written as ``-log(1 - p) = exp(w) / b``.

    For a rate whose counts are all successes. As its task mean nears 1, ``b = (1 - mu)
    kappa`` nears 0 and the logit of ``p`` gets an exponential tail of scale ``1 / b``: a
    chain that follows the mean there cannot cross it on the logit scale (the second
    robustness design, R-hat 1.38). On this scale ``b (-log(1 - p))`` tends to an
    Exponential(1) as ``b`` shrinks, so ``w`` keeps the same shape whatever ``b``; for a
    large ``b`` it is about the log of a Gamma(a), and the successes bound its lower tail
    at rate ``a + k``. The density is the Beta's times ``|dp / dw| = (1 - p) exp(w) / b``:
    ``(a - 1) log p - exp(w) + w - log Gamma(a) - log Gamma(b + 1) + log Gamma(a + b)``,
    with ``Gamma(b) = Gamma(b + 1) / b`` taken in closed form, so nothing cancels as ``b``
    goes to 0. Where ``e = exp(w) / b`` is below 1e-10, ``log p = log e - e / 2`` (its
    series, which does not underflow with ``e``).
    """
    import pytensor.tensor as pt

    a, b = pt.exp(log_a), pt.exp(log_b)
    log_e = w - log_b
    e = pt.exp(log_e)
    small = log_e < np.log(1e-10)
    # the other branch sees a safe value, so its gradient is never 0 x inf
    log_p = pt.switch(small, log_e - e / 2, pt.log(-pt.expm1(-pt.switch(small, 1.0, e))))
    log_norm = pt.gammaln(a + b) - pt.gammaln(a) - pt.gammaln(b + 1)
    return log_p, -e, (a - 1) * log_p - pt.exp(w) + w + log_norm


def _hierarchy_model(layout, spec, form):
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model(coords=_coords(layout)) as model:
        log_mu, log_1mu, log_kappa = _task_hierarchy(pm, layout, spec, form)
        log_kappa = log_kappa[layout.pair_agent]
        a, b = pt.exp(log_mu + log_kappa), pt.exp(log_1mu + log_kappa)
        k, f = count_data_vars(pm, "k_obs", layout.k, layout.n, "cell")
        pm.Potential("k_cell", _beta_binomial(a, b, layout.cell_pair, k, f, layout.n))
    return model


def _clustered_hierarchy_model(layout, spec, form):
    """``hierarchical`` with clustered runs: each milestone rate and its clusters' rates
    marginalised exactly (``bayes_eval.clusters``) around the sampled task means."""
    import pymc as pm

    with pm.Model(coords=_coords(layout)) as model:
        log_mu, log_1mu, log_kappa = _task_hierarchy(pm, layout, spec, form)
        pair = layout.cell_pair
        log_kappa = log_kappa[layout.pair_agent][pair]
        log_phi = _cluster_concentration(pm, spec)[layout.pair_agent][pair]
        _cluster_marginal(pm, log_mu[pair] + log_kappa, log_1mu[pair] + log_kappa, log_phi, layout)
    return model


def _clustered_end_to_end_model(layout, spec, form=None):
    """``end_to_end_pooled`` with clustered runs: each task's ``P`` and its clusters' rates
    marginalised exactly (``bayes_eval.clusters``); NUTS sees ``mu``, ``kappa`` and
    ``kappa_cluster`` per agent."""
    import pymc as pm

    with pm.Model(coords=_coords(layout)) as model:
        log_mu, log_1mu = _mean(pm, "mu", spec.priors["mean"], AGENT)
        log_kappa = _concentration(pm, "kappa", spec.priors["concentration"], AGENT)
        log_phi = _cluster_concentration(pm, spec)
        agent = layout.pair_agent
        log_a, log_b = (log_mu + log_kappa)[agent], (log_1mu + log_kappa)[agent]
        _cluster_marginal(pm, log_a, log_b, log_phi[agent], layout)
    return model


def _cluster_concentration(pm, spec):
    """``log kappa_cluster`` per agent: how alike the rates of one rate's clusters are."""
    return _concentration(pm, "kappa_cluster", spec.priors["cluster_concentration"], AGENT)


def _cluster_marginal(pm, log_a, log_b, log_phi, layout):
    """The exact log-likelihood of every rate's clusters given its prior's log shapes and
    log ``kappa_cluster`` (``bayes_eval.clusters.log_marginal``)."""
    import pytensor.tensor as pt

    total = log_marginal(pt, pt.gammaln, pt.logsumexp, log_a, log_b, log_phi, layout.clusters)
    pm.Potential("k_clusters", total)


def count_data(name, successes, trials) -> dict:
    """A model's data (``pm.Data`` by name) for ``successes`` of ``trials``: the successes
    as ``name``, the failures as ``name_failures``.

    Failures are data, never ``n - k`` in the graph: PyTensor's canonicaliser rewrites
    ``b + (n - k)`` as ``(b + n) - k``, which rounds a Beta shape below 1e-16 (the
    failure shape of a task mean near 1) to exactly 0, and the gradient to NaN.
    """
    return {name: successes, f"{name}_failures": trials - successes}


def count_data_vars(pm, name, successes, trials, dims=None):
    """The successes and failures of ``count_data`` as ``pm.Data``."""
    data = count_data(name, successes, trials)
    return tuple(pm.Data(key, value, dims=dims) for key, value in data.items())


def _beta_binomial(alpha, beta, group, k, failures, n):
    """``sum log BetaBinomial(k | n, alpha[group], beta[group])`` over the cells, without
    the binomial coefficients (constant in the parameters); ``failures`` is ``n - k``
    (``count_data``).

    ``log B(k + a, n - k + b) - log B(a, b)`` has two log-gamma terms that depend on
    the cell's successes; the others depend only on the group and the trials, so they
    are computed once per group (``B(a, b)``) and once per (group, trials) pair
    (``Gamma(n + a + b)``): two log-gamma terms per cell, and as many in the gradient,
    where ``pm.BetaBinomial`` has nine (it also recomputes the coefficients from the data).
    As there, a shape that underflows to 0 makes the log-likelihood ``-inf``.
    """
    import pytensor.tensor as pt
    from pymc.distributions.dist_math import check_parameters

    a, b = alpha[group], beta[group]
    per_cell = pt.gammaln(k + a) + pt.gammaln(failures + b)
    per_group = pt.gammaln(alpha + beta) - pt.gammaln(alpha) - pt.gammaln(beta)
    (group_u, n_u), cells = np.unique(np.stack([group, n]), axis=1, return_counts=True)
    per_trials = cells * pt.gammaln(n_u + alpha[group_u] + beta[group_u])
    total = pt.sum(per_cell) + pt.sum(per_group[group]) - pt.sum(per_trials)
    return check_parameters(total, pt.all(alpha > 0), pt.all(beta > 0), msg="alpha, beta > 0")


def end_to_end_groups(layout) -> tuple[np.ndarray, np.ndarray]:
    """The pairs whose end-to-end trials the joint model sums the milestone rates out of
    (1 to ``MARGINAL_END_TO_END`` trials; most milestones first, the order of
    ``_survivor_chain``), and those it samples them for (more)."""
    few = np.flatnonzero((layout.e2e_n > 0) & (layout.e2e_n <= MARGINAL_END_TO_END))
    milestones = np.bincount(layout.cell_pair, minlength=len(layout.pairs))[few]
    return few[np.argsort(-milestones, kind="stable")], np.flatnonzero(
        layout.e2e_n > MARGINAL_END_TO_END
    )


def _sampled_cells(layout) -> np.ndarray:
    """The milestone cells whose rates the joint model samples: those of tasks with more
    than ``MARGINAL_END_TO_END`` end-to-end trials. The rates of every other task are
    marginalised."""
    return np.isin(layout.cell_pair, end_to_end_groups(layout)[1])


def _joint_model(layout, spec, form):
    """Milestone hierarchy plus end-to-end counts, with the bypass marginalised.

    With ``s = Q + (1 - Q) lambda`` and ``lambda ~ Beta(a, b)``, expanding ``s^k``
    binomially gives ``P(k | Q) = C(n, k) (1 - Q)^(n - k) sum_j C(k, j) Q^(k - j)
    (1 - Q)^j B(a + j, b + n - k) / B(a, b)``, j = 0..k: a finite sum, so NUTS never
    sees lambda (``_bypass`` draws it back exactly).

    The milestone rates are sampled only where that is needed. A task without end-to-end
    runs has its rates marginalised as in ``hierarchical`` (Beta-Binomial). A task with
    at most ``MARGINAL_END_TO_END`` end-to-end trials (one, in the usual agentic
    benchmark) too: given the hyperparameters its rates are independent Betas, and its
    end-to-end likelihood is a finite sum over how many trials pass each milestone
    (``_survivor_chain``, ``_path_likelihood``); ``_marginal_draws`` draws the rates and
    lambda back. Only tasks with more end-to-end trials sample their rates (``p_cell``,
    over ``sampled_cell``).
    """
    import pymc as pm
    import pytensor.tensor as pt

    sampled = _sampled_cells(layout)
    few, many = end_to_end_groups(layout)
    coords = {**_coords(layout), "sampled_cell": np.flatnonzero(sampled)}
    with pm.Model(coords=coords) as model:
        log_mu, log_1mu, log_kappa = _task_hierarchy(pm, layout, spec, form)
        log_kappa = log_kappa[layout.pair_agent]
        log_a, log_b = log_mu + log_kappa, log_1mu + log_kappa  # per pair
        k, f = count_data_vars(pm, "k_obs", layout.k, layout.n, "cell")
        kept = np.flatnonzero(~sampled)
        if kept.size:
            a, b, group = pt.exp(log_a), pt.exp(log_b), layout.cell_pair[kept]
            pm.Potential("k_cell", _beta_binomial(a, b, group, k[kept], f[kept], layout.n[kept]))
        log_bypass, log_1m_bypass = _mean(pm, "mu_bypass", spec.priors["bypass_mean"], AGENT)
        log_kappa_bypass = _concentration(
            pm, "kappa_bypass", spec.priors["bypass_concentration"], AGENT
        )
        bypass_a = pt.exp(log_bypass + log_kappa_bypass)[layout.pair_agent]
        bypass_b = pt.exp(log_1m_bypass + log_kappa_bypass)[layout.pair_agent]
        if few.size:
            cells, counts = _cells_of(layout, few)
            group = layout.cell_pair[cells]
            a = pt.exp(log_a)[group] + k[cells]
            b = pt.exp(log_b)[group] + f[cells]
            n = layout.e2e_n[few]
            chain = _survivor_chain(pt, a, b, n, counts, int(n.max()))
            e2e_k, e2e_f = count_data_vars(pm, "e2e_few", layout.e2e_k[few], n)
            log_lik = _path_likelihood(pt, chain[-1], bypass_a[few], bypass_b[few], e2e_k, n, e2e_f)
            pm.Potential("end_to_end_few", pt.sum(log_lik))
        if many.size:
            where = np.flatnonzero(sampled)
            group = layout.cell_pair[where]
            log_p, log_1mp = _beta_parts(
                pm, "p_cell", log_a[group], log_b[group], form.cells, "sampled_cell", form.tails
            )
            pm.Potential("k_sampled", pt.sum(k[where] * log_p + f[where] * log_1mp))
            log_q = pt.inc_subtensor(pt.zeros(len(layout.pairs))[group], log_p)
            n = layout.e2e_n[many]
            e2e_k, e2e_f = count_data_vars(pm, "e2e_k", layout.e2e_k[many], n)
            log_lik = _bypass_terms(
                pt,
                log_q[many][:, None],
                _log_1m_product(pt, layout, many, where, log_p, log_1mp)[:, None],
                bypass_a[many][:, None],
                bypass_b[many][:, None],
                e2e_k[:, None],
                n[:, None],
                e2e_f[:, None],
                int(n.max()),
                logsumexp=True,
            )
            pm.Potential("end_to_end", pt.sum(log_lik))
    return model


def _log_1m_product(pt, layout, pairs, sampled, log_p, log_1mp):
    """``log(1 - Q)`` of each of ``pairs``, ``Q`` the product of its sampled rates (given
    over the cells ``sampled`` by their ``log p`` and ``log (1 - p)``), built milestone by
    milestone from ``1 - Q = (1 - p_1) + p_1 (1 - Q_rest)``: exact where ``Q`` rounds to 1
    (an all-success task on the tail scale), where ``log(1 - exp(log Q))`` would be
    ``-inf`` and its gradient NaN."""
    cells, counts = _cells_of(layout, pairs)
    position = np.full(layout.k.size, -1)
    position[sampled] = np.arange(sampled.size)
    index = position[cells]
    total = log_1mp[index[:, 0]]
    for m in range(1, index.shape[1]):
        step = pt.logaddexp(log_1mp[index[:, m]], log_p[index[:, m]] + total)
        total = pt.where(m < counts, step, total)
    return total


def _cells_of(layout, pairs):
    """The cells of each pair as a ``(pairs, most milestones)`` index array, padded with
    the pair's first cell, and the number of real ones per pair."""
    lists = [np.flatnonzero(layout.cell_pair == p) for p in pairs]
    width = max(len(c) for c in lists)
    cells = np.array([np.pad(c, (0, width - len(c)), mode="edge") for c in lists])
    return cells, np.array([len(c) for c in lists])


# Below this log probability a path is impossible (finite, unlike -inf, so that a sum of
# impossible terms has a gradient and no NaN).
IMPOSSIBLE = -1e10


def _survivor_chain(xp, a, b, n, counts, n_max):
    """``log P(c_m = c)``, ``c = 0..n_max``, of the number ``c_m`` of a task's ``n``
    end-to-end trials that pass milestones ``1..m`` on the milestone path, ``m = 0..M``:
    one ``(n_max + 1, rows)`` array per ``m``.

    Every trial passes milestone ``m`` with the same rate ``p_m``, and the rates are
    independent ``Beta(a_m, b_m)`` given the hyperparameters, so with ``p_m`` summed out
    ``c_m | c_(m-1) ~ BetaBinomial(c_(m-1), a_m, b_m)`` and the chain is Markov, from
    ``c_0 = n``: ``(n_max + 1)^2`` positive terms per milestone and row, no cancellation
    (``_transition``). ``a``, ``b`` are ``(rows, milestones)``; row ``r`` has ``counts[r]``
    real milestones, the rest padding, and rows come with the most milestones first, so
    that milestone ``m`` moves a leading block of rows only (the others keep their
    count). ``n`` is each row's number of trials. ``xp`` is numpy or
    ``pytensor.tensor``.
    """
    logsumexp = special.logsumexp if xp is np else xp.logsumexp
    counts = np.asarray(counts)
    if np.any(np.diff(counts) > 0):
        raise ValueError("_survivor_chain: rows must come with the most milestones first")
    rising = [_log_rising(xp, shape, n_max) for shape in (a, b, a + b)]
    start = np.where(np.arange(n_max + 1)[:, None] == np.asarray(n)[None, :], 0.0, IMPOSSIBLE)
    chain = [start if xp is np else xp.as_tensor(start)]
    for m in range(int(counts.max())):
        rows = int(np.sum(counts > m))
        moved = logsumexp(
            chain[-1][:, None, :rows] + _transition(xp, n_max, *(r[:, m, :rows] for r in rising)),
            axis=0,
        )
        kept = chain[-1][:, rows:]
        chain.append(moved if rows == counts.size else xp.concatenate([moved, kept], axis=1))
    return chain


def _log_rising(xp, shape, n_max):
    """``log (s)_r = sum_{t < r} log(s + t)``, ``r = 0..n_max``, of ``shape`` ``(rows,
    milestones)``: ``(n_max + 1, milestones, rows)``."""
    logs = xp.log(shape.T[None] + np.arange(n_max)[:, None, None])
    return xp.concatenate([xp.zeros_like(logs[:1]), xp.cumsum(logs, axis=0)], axis=0)


def _transition(xp, n_max, rising_a, rising_b, rising_ab):
    """``log BetaBinomial(c' | c, a, b) = log C(c, c') + log (a)_c' + log (b)_(c - c') -
    log (a + b)_c`` as ``(c, c', rows)`` (``IMPOSSIBLE`` for ``c' > c``), from the log
    rising factorials ``(c, rows)`` of one milestone's shapes, ``c = 0..n_max``."""
    c = np.arange(n_max + 1)
    passed = c[None, :] <= c[:, None]
    failed = np.where(passed, c[:, None] - c[None, :], 0)
    log_choose = special.gammaln(c + 1)[:, None] - special.gammaln(c + 1)[None, :]
    log_choose = np.where(passed, log_choose - special.gammaln(failed + 1), 0.0)[..., None]
    terms = log_choose + rising_a[None] + rising_b[failed] - rising_ab[:, None]
    return xp.where(passed[..., None], terms, IMPOSSIBLE)


def _bypass_outcomes(xp, gammaln, survivors, alpha, beta, k, n, failures):
    """``log P(c_M = c, k successes)``, ``c = 0..max(n)``: ``c`` trials through the milestones
    (``survivors``, the last array of ``_survivor_chain``) and the other ``k - c``
    successes by the bypass, ``C(n - c, k - c) B(alpha + k - c, beta + n - k) / B(alpha,
    beta)`` (``lambda`` summed out); ``IMPOSSIBLE`` for ``c > k``. ``alpha``, ``beta``,
    ``k``, ``n`` and ``failures`` (``n - k``, ``count_data``) are per row."""
    n = np.asarray(n)[None, :]
    c = np.arange(n.max() + 1)[:, None]
    through = c <= k[None, :]
    by_bypass = xp.maximum(k[None, :] - c, 0)
    rest = np.maximum(n - c, 0)
    log_choose = gammaln(rest + 1) - gammaln(by_bypass + 1) - gammaln(rest - by_bypass + 1)
    bypass = _log_beta(gammaln, alpha[None, :] + by_bypass, beta[None, :] + failures[None, :])
    terms = survivors + log_choose + bypass - _log_beta(gammaln, alpha, beta)[None, :]
    return xp.where(through, terms, IMPOSSIBLE)


def _log_beta(gammaln, p, q):
    """``log B(p, q)`` from ``gammaln`` (scipy's or PyTensor's)."""
    return gammaln(p) + gammaln(q) - gammaln(p + q)


def _path_likelihood(xp, survivors, alpha, beta, k, n, failures):
    """``log P(k | hyperparameters)`` of ``k`` end-to-end successes in ``n`` trials per row:
    the sum over ``c`` of ``_bypass_outcomes``."""
    logsumexp = special.logsumexp if xp is np else xp.logsumexp
    gammaln = special.gammaln if xp is np else xp.gammaln
    terms = _bypass_outcomes(xp, gammaln, survivors, alpha, beta, k, n, failures)
    return logsumexp(terms, axis=0)


def joint_data(layout, e2e_k) -> dict:
    """The joint model's end-to-end data (``pm.Data`` by name) for per-pair successes."""
    data = {}
    for name, pairs in zip(("e2e_few", "e2e_k"), end_to_end_groups(layout), strict=True):
        if pairs.size:
            data.update(count_data(name, e2e_k[pairs], layout.e2e_n[pairs]))
    return data


def _bypass_terms(xp, log_q, log_1mq, a, b, k, n, failures, j_max, logsumexp):
    """``log`` of the terms j = 0..j_max of the marginal above (``-inf`` for j > k);
    ``log_1mq`` is ``log(1 - Q)`` and ``failures`` is ``n - k`` (``count_data``).

    ``xp`` is ``pytensor.tensor`` (in the model, where ``k`` is data that may change and
    ``j_max`` is the largest possible ``k``) or numpy (for the exact redraw); with
    ``logsumexp`` the terms are summed into ``log P(k | Q)`` per task.
    """
    from scipy import special

    gammaln = special.gammaln if xp is np else xp.gammaln
    j = np.arange(j_max + 1)[None, :]
    j_safe = xp.minimum(k, j)
    log_choose = gammaln(k + 1) - gammaln(j_safe + 1) - gammaln(k - j_safe + 1)
    # Q^(k - j) is 1 at j = k even when Q underflows to 0, and (1 - Q)^0 is 1 even when Q
    # rounds to 1 (0 * -inf would be NaN).
    q_power = xp.where(k - j_safe > 0, (k - j_safe) * log_q, 0.0)
    terms = log_choose + q_power + xp.where(j_safe > 0, j_safe * log_1mq, 0.0)
    terms = terms + _log_beta(gammaln, a + j_safe, b + failures) - _log_beta(gammaln, a, b)
    terms = xp.where(k >= j, terms, -np.inf)
    if not logsumexp:
        return terms
    top = xp.max(terms, axis=1, keepdims=True)
    total = top[:, 0] + xp.log(xp.sum(xp.exp(terms - top), axis=1))
    log_binom = gammaln(n + 1) - gammaln(k + 1) - gammaln(failures + 1)
    failed = xp.where(failures[:, 0] > 0, failures[:, 0] * log_1mq[:, 0], 0.0)
    return log_binom[:, 0] + failed + total


BUILDERS = {
    "end_to_end": _end_to_end_model,
    "milestone": _hierarchy_model,
    "expert_completion": _hierarchy_model,
    "joint": _joint_model,
}
# The models of clustered runs (``end_to_end_pooled``, ``hierarchical``).
CLUSTERED_BUILDERS = {
    "end_to_end": _clustered_end_to_end_model,
    "milestone": _clustered_hierarchy_model,
}


# ---------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------


def model_structure(layout, spec) -> tuple:
    """Everything a compiled model depends on except the observed successes (clustered
    runs: their counts too, which the marginal's terms hold as constants)."""
    arrays = (layout.pair_agent, layout.cell_pair, layout.cell_run, layout.n, layout.e2e_n)
    if layout.clusters is not None:
        arrays += tuple(vars(layout.clusters).values())
    return (
        spec.kind,
        spec.pooling,
        repr(sorted(spec.priors.items())),
        tuple(layout.agents),
        *(a.tobytes() for a in arrays),
    )


# ---------------------------------------------------------------------------
# exact draws of the rates given each posterior draw
# ---------------------------------------------------------------------------


def pooled_rates(post, layout, spec, rng) -> dict:
    """``p_task`` and the per-milestone or per-step rates, per posterior draw."""
    chains, draws = post.sizes["chain"], post.sizes["draw"]
    shape = (chains, draws)
    agents, tasks = layout.agents, layout.tasks
    grid = np.full(shape + (len(agents), len(tasks)), np.nan)
    where = [(agents.index(a), tasks.index(t)) for a, t in layout.pairs]
    # failures are counted before they are added: (tiny + n) - k rounds to 0 when k = n
    if spec.kind == "end_to_end" and layout.clusters is not None:
        mu, kappa, phi = (
            post[name].values[..., layout.pair_agent] for name in ("mu", "kappa", "kappa_cluster")
        )
        p = np.exp(_clustered_draws(mu * kappa, (1 - mu) * kappa, phi, layout, rng))
        return {"p_task": (ALL_DIMS, _gridded(grid, where, p))}
    if spec.kind == "end_to_end":
        mu = post["mu"].values[..., layout.pair_agent]
        kappa = post["kappa"].values[..., layout.pair_agent]
        p = rng.beta(mu * kappa + layout.e2e_k, (1 - mu) * kappa + (layout.e2e_n - layout.e2e_k))
        return {"p_task": (ALL_DIMS, _gridded(grid, where, p))}
    if spec.kind == "joint":
        log_p, bypass_few = _marginal_draws(post, layout, rng, shape)
        cell_p = np.exp(log_p)
    elif layout.clusters is not None:
        a, b = _cell_shapes(post, layout, counts=False)
        phi = post["kappa_cluster"].values[..., layout.pair_agent[layout.cell_pair]]
        log_p = _clustered_draws(a, b, phi, layout, rng)
        cell_p = np.exp(log_p)
    else:
        # drawn in log space: rates far below 1e-300 must not underflow to log 0
        log_p = log_beta_draws(*_cell_shapes(post, layout), (), rng)
        cell_p = np.exp(log_p)
    n_runs = max(len(r) for r in layout.runs)
    n_factors = int(layout.cell_factor.max())
    factor = np.full(shape + (len(agents), len(tasks), n_runs, n_factors), np.nan)
    pair_i = np.array([w[0] for w in where])[layout.cell_pair]
    pair_j = np.array([w[1] for w in where])[layout.cell_pair]
    factor[:, :, pair_i, pair_j, layout.cell_run, layout.cell_factor - 1] = cell_p
    log_q = mixture_log_product(log_p, layout, rng)
    p_task = np.exp(log_q)
    out = {}
    if spec.kind == "joint":
        bypass = _bypass(post, layout, rng, shape, log_q)
        for p, drawn in bypass_few.items():
            bypass[..., p] = drawn
        out["bypass_task"] = (ALL_DIMS, _gridded(np.full_like(grid, np.nan), where, bypass))
        p_task = p_task + (1 - p_task) * bypass
    out["p_task"] = (ALL_DIMS, _gridded(grid, where, p_task))
    if spec.kind == "expert_completion":
        out["p_step"] = (ALL_DIMS + (RUN, STEP), factor)
    else:
        out["p_milestone"] = (ALL_DIMS + (MILESTONE,), factor[..., 0, :])
    return out


def _clustered_draws(a, b, phi, layout, rng):
    """``log p`` of every clustered rate per posterior draw, from its prior's shapes and
    ``kappa_cluster``, each ``(chain, draw, rate)`` (``bayes_eval.clusters``)."""
    flat = (x.reshape(-1, x.shape[-1]) for x in (a, b, phi))
    return draw_log_rates(*flat, layout.clusters, rng).reshape(a.shape)


def mixture_log_product(log_p, layout, rng):
    """``log P`` per pair from cell log rates ``(..., cell)``: the log product of one run's
    cells, the run drawn uniformly (the equal mixture over runs; milestones have one run)."""
    shape = log_p.shape[:-1]
    n_runs = max(len(r) for r in layout.runs)
    log_run = np.zeros((len(layout.pairs), n_runs) + shape)
    np.add.at(log_run, (layout.cell_pair, layout.cell_run), np.moveaxis(log_p, -1, 0))
    log_run = np.moveaxis(log_run, (0, 1), (-2, -1))
    counts = np.array([max(len(r), 1) for r in layout.runs])
    chosen = (rng.random(shape + (len(layout.pairs),)) * counts).astype(int)
    return np.take_along_axis(log_run, chosen[..., None], axis=-1)[..., 0]


def _gridded(grid, where, values):
    """Place per-pair values ``(..., pair)`` on the ``(..., agent, task)`` grid."""
    for p, (i, j) in enumerate(where):
        grid[..., i, j] = values[..., p]
    return grid


def _bypass(post, layout, rng, shape, log_q):
    """Exact draws of each task's bypass probability, per posterior draw.

    Without end-to-end runs: from the population, ``Beta(mu kappa, (1 - mu) kappa)``.
    With more than ``MARGINAL_END_TO_END``: from its posterior given ``Q``, the mixture
    over j = 0..k of ``Beta(a + j, b + n - k)`` weighted by the terms of the marginal
    likelihood. (With fewer, ``_marginal_draws`` draws it with the milestone rates.)
    """
    agent = layout.pair_agent
    a = post["mu_bypass"].values[..., agent] * post["kappa_bypass"].values[..., agent]
    b = post["kappa_bypass"].values[..., agent] - a
    bypass = rng.beta(a, b)
    for p in end_to_end_groups(layout)[1]:
        k, n = layout.e2e_k[p], layout.e2e_n[p]
        ap, bp = a[..., p].reshape(-1, 1), b[..., p].reshape(-1, 1)
        # 0 * -inf where Q underflows, log 0 where it rounds to 1: both masked inside
        with np.errstate(invalid="ignore", divide="ignore"):
            terms = _bypass_terms(
                np,
                log_q[..., p].reshape(-1, 1),
                np.log(-np.expm1(log_q[..., p].reshape(-1, 1))),
                ap,
                bp,
                np.array([[k]]),
                np.array([[n]]),
                np.array([[n - k]]),
                k,
                logsumexp=False,
            )
        j = _categorical(terms, rng)
        bypass[..., p] = rng.beta(ap[:, 0] + j, bp[:, 0] + (n - k)).reshape(shape)
    return bypass


def _marginal_draws(post, layout, rng, shape):
    """Log milestone rates of every cell of the joint model, and the bypass of each task
    with at most ``MARGINAL_END_TO_END`` end-to-end trials, per posterior draw.

    Sampled rates are read from ``p_cell``. Marginalised ones are drawn exactly: given
    the hyperparameters, a cell's rate is ``Beta(a', b')``, ``a' = mu kappa + k``,
    ``b' = (1 - mu) kappa + n - k``, and the task's end-to-end trials add a path of
    survivor counts (``_survivor_chain``). The path is drawn from its end: ``c_M`` trials
    through every milestone, the other ``k - c_M`` successes by the bypass (``lambda ~
    Beta(alpha + k - c_M, beta + n - k)``); then backwards, ``c_(m-1)`` given ``c_m``, with
    weights ``P(c_(m-1)) P(c_m | c_(m-1))``; and ``p_m ~ Beta(a'_m + c_m, b'_m + c_(m-1) -
    c_m)``.
    """
    agent = layout.pair_agent
    a, b = _cell_shapes(post, layout)
    extra_a, extra_b = np.zeros_like(a), np.zeros_like(b)
    bypass_a = post["mu_bypass"].values[..., agent] * post["kappa_bypass"].values[..., agent]
    bypass_b = post["kappa_bypass"].values[..., agent] - bypass_a
    bypass_few = {}
    for p in end_to_end_groups(layout)[0]:
        cells = np.flatnonzero(layout.cell_pair == p)
        k, n = int(layout.e2e_k[p]), int(layout.e2e_n[p])
        ap, bp = bypass_a[..., p].ravel(), bypass_b[..., p].ravel()
        ac, bc = a[..., cells].reshape(-1, cells.size), b[..., cells].reshape(-1, cells.size)
        rows = np.full(ap.size, 1)
        chain = _survivor_chain(np, ac, bc, n * rows, cells.size * rows, n)
        outcomes = _bypass_outcomes(
            np, special.gammaln, chain[-1], ap, bp, k * rows, n * rows, (n - k) * rows
        )
        survivors = _categorical(outcomes.T, rng)
        bypass_few[p] = rng.beta(ap + k - survivors, bp + (n - k)).reshape(shape)
        rising = [_log_rising(np, shape_m, n) for shape_m in (ac, bc, ac + bc)]
        shift_a, shift_b = np.zeros_like(ac), np.zeros_like(bc)
        draws = np.arange(ap.size)
        for m in reversed(range(cells.size)):
            # recomputed, not kept from the forward chain: (n + 1)^2 values per draw
            step = _transition(np, n, *(r[:, m] for r in rising))[:, survivors, draws]
            before = _categorical((chain[m] + step).T, rng)
            shift_a[:, m], shift_b[:, m] = survivors, before - survivors
            survivors = before
        extra_a[..., cells] = shift_a.reshape(shape + (cells.size,))
        extra_b[..., cells] = shift_b.reshape(shape + (cells.size,))
    log_p = log_beta_draws(a + extra_a, b + extra_b, (), rng)
    sampled = _sampled_cells(layout)
    if sampled.any():
        with np.errstate(divide="ignore"):  # a sampled rate may underflow to 0
            log_p[..., sampled] = np.log(post["p_cell"].values)
    return log_p, bypass_few


def _cell_shapes(post, layout, counts=True):
    """Per posterior draw, the Beta shapes of every milestone cell's rate given its task
    mean and its counts, ``mu kappa + k`` and ``(1 - mu) kappa + n - k``."""
    mean = post["mu_task"].values[..., layout.cell_pair]
    conc = post["kappa"].values[..., layout.pair_agent[layout.cell_pair]]
    # A sampled mean whose logit exceeds 37 is 1 in floating point (and one below -745 is
    # 0): each prior shape is floored at the smallest normal number, 2.2e-308, so that an
    # all-success (or all-failure) cell's Beta stays proper and its log-gamma finite
    # (scipy's gammaln is inf below it).
    tiny = np.finfo(float).tiny
    a, b = np.maximum(mean * conc, tiny), np.maximum((1 - mean) * conc, tiny)
    if not counts:  # the prior's shapes: clustered counts enter through their terms
        return a, b
    return a + layout.k, b + (layout.n - layout.k)


def _categorical(log_weights, rng) -> np.ndarray:
    """One index per row of ``log_weights`` (unnormalised), drawn by its weights."""
    weights = np.exp(log_weights - log_weights.max(axis=-1, keepdims=True))
    cumulative = np.cumsum(weights, axis=-1)
    u = rng.random(log_weights.shape[:-1] + (1,)) * cumulative[..., -1:]
    return np.minimum((u > cumulative).sum(axis=-1), log_weights.shape[-1] - 1)
