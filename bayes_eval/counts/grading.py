"""Counts a grader that errs scored, in the pooled models (the crossed ones read its
audits and sample each graded rate: ``bayes_eval.crossed.grader``).

A rate ``p ~ Beta(a, b)`` is marginalised as elsewhere (``bayes_eval.pooled.models``): a
pair's end-to-end rate around its agent's ``mu kappa``, ``(1 - mu) kappa``, or a milestone
cell's or expert step's rate around its task mean (``hierarchical``, ``ecr_pooled``). Its
``n`` runs hold ``t`` true successes, of which the grader detects ``j`` (sensitivity
``se``) and to which it adds ``k - j`` false alarms among the ``n - t`` failures
(false-alarm rate ``1 - sp``), so the graded count ``k`` has

    P(k | a, b, se, sp) = sum_t BB(t; n, a, b) sum_j Bin(j; t, se) Bin(k - j; n - t, 1 - sp),

a finite sum, exact. ``se`` and ``sp`` are parameters per grader, with the spec's
``[grader]`` priors and the audit's counts as their binomial data (``detected`` of the
audited true successes, ``cleared`` of the audited true failures). Given a draw of the
parameters, ``t`` and then ``p`` are drawn back exactly: ``t`` by its term of the sum,
``p | t ~ Beta(a + t, b + n - t)``; and ``q = se p + (1 - sp)(1 - p)``, the chance a run
is graded a success (``p_graded``; a cell's ``p_graded_milestone``, ``p_graded_step``),
beside it.

A pair's end-to-end runs the audit scored again (``run_id``) give their truth in place of
their grade: ``u`` true successes in ``m`` such runs multiply the sum by ``Bin(u; m, p)``
(``a + t`` becomes ``a + t + u`` in its terms), and their grades count in the audit.

``Grading`` holds the sum's terms that do not depend on the parameters, one row per
graded pair over ``t`` and ``j`` (``IMPOSSIBLE`` where a term is); the model's graph
(``graded_log_likelihood``) and the numpy form that the log-likelihood group and the
draw-back read (``graded_log_marginal``, ``draw_graded``) sum the same terms, checked
against each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from bayes_eval.constants import (
    AGENT,
    END_TO_END,
    EXPERT_COMPLETION,
    MILESTONE,
    MILESTONE_METHOD,
    RUN,
    STEP,
    TASK,
)
from bayes_eval.errors import InputError
from bayes_eval.evidence.audit import GraderCounts
from bayes_eval.exact.graded import graded_success, log_choose

__all__ = [
    "GRADED_MAX_TERMS",
    "GRADER_RATES",
    "Grading",
    "audit_draw",
    "audit_shapes",
    "detection_graph",
    "detection_log",
    "draw_graded",
    "graded_chance",
    "grader_provenance",
    "grader_rates",
    "graded_log_likelihood",
    "graded_log_marginal",
    "grading_of",
    "with_graders",
    "with_terms",
]

# The most terms (graded pairs x true counts x detected counts) the model sums per
# gradient; a table past it is refused, with the exact model named (it has no limit).
GRADED_MAX_TERMS = 20_000_000
# The log of an impossible term: finite, so that a sum of nothing but impossible terms has
# a gradient (of -inf's it would be NaN), and still of no weight beside any possible one.
IMPOSSIBLE = -1e300
# The model's variables of each grader's sensitivity and specificity.
GRADER_RATES = ("sensitivity", "specificity")
# Per kind of graded rate, its chance of a graded success in the draws: the variable's
# name and the dims past (agent, task) that index a pair's rates.
GRADED_CHANCE = {
    END_TO_END: ("p_graded", ()),
    MILESTONE_METHOD: ("p_graded_milestone", (MILESTONE,)),
    EXPERT_COMPLETION: ("p_graded_step", (RUN, STEP)),
}


@dataclass(frozen=True)
class Grading:
    """The graders of a pooled or crossed fit and the terms of its graded counts.

    Attributes
    ----------
    graders : list of str
    counts : list of GraderCounts
        Per grader, its audit.
    pairs : ndarray of int
        The layout's rates a grader scored, ``grader`` indexing ``graders`` per such rate:
        pairs end to end, the layout's cells where ``method`` is ``milestone`` or
        ``expert_completion`` (milestone cells, a run's expert steps).
    runs, graded : ndarray of int
        Each graded rate's runs ``n`` and graded successes ``k``.
    constant : ndarray or None
        ``(pair, t, j)``: ``log C(n, t) + log C(t, j) + log C(n - t, k - j)``,
        ``IMPOSSIBLE`` where the term is impossible; None (with the other terms) where
        the model needs no sum over true counts (the crossed model samples each rate).
    detected_runs, missed_runs, alarm_runs, cleared_runs : ndarray or None
        ``(pair, t, j)``: ``j``, ``t - j``, ``k - j`` and ``n - t - k + j`` (0 where the term
        is impossible).
    true, failed : ndarray or None
        ``(pair, t)``: ``t`` and ``n - t`` (0 past ``n``).
    trusted : ndarray
        ``(pair, 3)``: the pair's own runs the audit scored again (``run_id``): how many,
        their true successes and their graded ones (``evidence.audit.OwnRuns``; zeros where
        none); ``runs`` and ``graded`` are those of its other runs.
    """

    graders: list
    counts: list[GraderCounts]
    pairs: np.ndarray
    grader: np.ndarray
    runs: np.ndarray
    graded: np.ndarray
    trusted: np.ndarray
    constant: np.ndarray | None = None
    detected_runs: np.ndarray | None = None
    missed_runs: np.ndarray | None = None
    alarm_runs: np.ndarray | None = None
    cleared_runs: np.ndarray | None = None
    true: np.ndarray | None = None
    failed: np.ndarray | None = None
    method: str = END_TO_END

    def audit_counts(self) -> tuple[np.ndarray, ...]:
        """Per grader: true successes detected and audited, true failures cleared and
        audited."""
        rows = [
            (c.detected, c.detected + c.missed, c.cleared, c.cleared + c.false_alarms)
            for c in self.counts
        ]
        return tuple(np.array(column, dtype=np.int64) for column in zip(*rows, strict=True))

    def rows(self, size: int) -> np.ndarray:
        """Each of the layout's ``size`` rates' row among the graded ones (-1: none)."""
        row = np.full(size, -1)
        row[self.pairs] = np.arange(self.pairs.size)
        return row

    def key(self) -> tuple:
        """What a compiled model depends on."""
        arrays = (self.pairs, self.grader, self.runs, self.graded, self.trusted)
        arrays += self.audit_counts()[1::2]
        return (self.method, tuple(self.graders), *(a.tobytes() for a in arrays))


def graded_chance(method: str, chance: np.ndarray) -> tuple[str, tuple, np.ndarray]:
    """The name, the dims past (agent, task) and the values of a graded rate's chance
    (``GRADED_CHANCE``) from ``chance``, a pair's (end to end) or laid over its (run,
    factor) cells: a milestone's without the run axis (a pair's milestones are one run's)."""
    name, dims = GRADED_CHANCE[method]
    return name, dims, chance[..., 0, :] if dims == (MILESTONE,) else chance


def audit_shapes(grading: Grading, priors: dict) -> np.ndarray:
    """Per grader, the Betas of its sensitivity and specificity after its audit alone
    (``priors``: the spec's ``[grader]``), as ``(grader, 4)``: ``GRADER_SHAPES``' order."""
    se, sp = ((priors[name].alpha, priors[name].beta) for name in GRADER_RATES)
    return np.array(
        [(*c.sensitivity_shapes(se), *c.specificity_shapes(sp)) for c in grading.counts]
    )


def audit_draw(grading: Grading, priors: dict, rng) -> dict:
    """One draw of each grader's sensitivity and specificity from their Betas after its
    audit (``audit_shapes``): the truth of a simulation that conditions on the audit, as
    simulation-based calibration of a graded fit does (the audit is data the fit keeps)."""
    shapes = audit_shapes(grading, priors)
    return {
        name: rng.beta(shapes[:, 2 * n], shapes[:, 2 * n + 1])
        for n, name in enumerate(GRADER_RATES)
    }


def grading_of(
    evidence,
    rates: list,
    k: np.ndarray,
    n: np.ndarray,
    spec,
    terms: bool = True,
    method: str = END_TO_END,
) -> Grading | None:
    """The ``Grading`` of the ``rates`` (with counts ``k`` of ``n``) whose rows an audited
    grader scored (``evidence.audit``), with the terms of the sum over true counts where
    ``terms``; None without an audit. A pair's end-to-end runs the audit scored again
    (``run_id``) are its ``trusted`` runs, their truth in place of their grade (the
    milestone and expert-step models refuse them: ``bayes_eval.fit.check_graded``).
    Refused, for the exact models, which take it: an audit row scoped to an agent, task,
    method or step (the model's sensitivity and specificity are one per grader). The
    rates are the (agent, task) pairs' end-to-end runs, or for ``method`` ``milestone``
    the (agent, task, milestone) cells and for ``expert_completion`` the (agent, task,
    run, step) cells."""
    audit = evidence.audit
    if audit is None:
        return None
    table = audit.table
    own = audit.audited_runs
    for column in ("agent", "task", "method", "step"):
        if column not in table:
            continue
        scoped = (table[column].astype(str) != "") & ~own  # an audited run: not a scope
        if scoped.any():
            row = table.index[scoped][0]
            raise InputError(
                f"{audit.source}: row {row}, column {column}: model {spec.name} gives each "
                "grader one sensitivity and specificity; an audit scoped to some runs is "
                "carried by the exact models (end_to_end, mats2024, ecr2024)"
            )
    rows = evidence.table[evidence.table["method"] == method]
    keys = [rows["agent"], rows["task"]]
    keys += [rows["run"]] * (method == EXPERT_COMPLETION) + [rows["step"]] * (method != END_TO_END)
    named = dict(zip(zip(*keys, strict=True), rows["grader"], strict=True))
    graders = list(audit.graders)
    grader = np.array([graders.index(named[key]) if named.get(key) else -1 for key in rates])
    scored = np.flatnonzero((grader >= 0) & (n > 0))
    counts = [audit.counts(name) for name in graders]
    k, n = k[scored], n[scored]
    parts = dict(
        graders=graders,
        counts=counts,
        pairs=scored,
        grader=grader[scored],
        runs=n,
        graded=k,
        trusted=np.zeros((scored.size, 3), dtype=np.int64),
        method=method,
    )
    grading = _with_own_runs(Grading(**parts), evidence, rows, rates)
    if not terms:
        return grading
    top_n, top_k = int(n.max(initial=0)), int(k.max(initial=0))
    if scored.size * (top_n + 1) * (top_k + 1) > GRADED_MAX_TERMS:
        raise InputError(
            f"model {spec.name}: the graded counts need {scored.size:,} x {top_n + 1:,} x "
            f"{top_k + 1:,} terms a step, more than {GRADED_MAX_TERMS:,}; fit end_to_end, "
            "whose exact posterior has no such limit, or split the runs into tasks"
        )
    return with_terms(grading)


def with_terms(grading: Grading, graded: np.ndarray | None = None) -> Grading:
    """``grading`` with the terms of the sum over true counts for its graded counts, or
    for the counts ``graded`` in their place (a simulation's, in SBC)."""
    from dataclasses import replace

    if graded is not None:
        grading = replace(grading, graded=np.asarray(graded, dtype=np.int64))
    k, n = grading.graded, grading.runs
    top_n, top_k = int(n.max(initial=0)), int(k.max(initial=0))
    t = np.arange(top_n + 1)[None, :, None]
    j = np.arange(top_k + 1)[None, None, :]
    k3, n3 = k[:, None, None], n[:, None, None]
    possible = (t <= n3) & (j <= t) & (j <= k3) & (k3 - j <= n3 - t)
    with np.errstate(invalid="ignore"):
        constant = log_choose(n3, t) + log_choose(t, j) + log_choose(n3 - t, k3 - j)
    runs = [np.where(possible, x, 0.0) for x in (j, t - j, k3 - j, n3 - t - k3 + j)]
    inside = (t[..., 0] <= n[:, None]).astype(float)
    return replace(
        grading,
        constant=np.where(possible, constant, IMPOSSIBLE),
        detected_runs=runs[0],
        missed_runs=runs[1],
        alarm_runs=runs[2],
        cleared_runs=runs[3],
        true=t[..., 0] * inside,
        failed=np.maximum(n[:, None] - t[..., 0], 0) * inside,
    )


def _with_own_runs(grading: Grading, evidence, rows, pairs: list) -> Grading:
    """``grading`` with each graded pair's own runs the audit scored again (``run_id``)
    as ``trusted``, and ``runs``, ``graded`` those of its other runs; unchanged where the
    audit scored none again. A pair whose counts cannot hold its audited runs is refused
    (``bayes_eval.exact.builders.own_audited``)."""
    from dataclasses import replace

    from bayes_eval.exact.builders import own_audited

    audit = evidence.audit
    if not audit.audited_runs.any():
        return grading
    row_of = dict(zip(zip(rows["agent"], rows["task"], strict=True), rows["row"], strict=True))
    trusted = grading.trusted.copy()
    for g, (p, grader) in enumerate(zip(grading.pairs, grading.grader, strict=True)):
        agent, task = pairs[p]
        mine = audit.own_runs(grading.graders[grader], agent, task)
        if mine.runs:
            k, n = int(grading.graded[g]), int(grading.runs[g])
            trusted[g] = own_audited(mine, k, n, row_of[(agent, task)], audit.source, task)
    return replace(
        grading,
        runs=grading.runs - trusted[:, 0],
        graded=grading.graded - trusted[:, 2],
        trusted=trusted,
    )


def _detections(grading: Grading, sensitivity, specificity) -> np.ndarray:
    """``log sum_j Bin(j; t, se) Bin(k - j; n - t, 1 - sp)``, ``(draws..., pair, t)``."""
    se = np.asarray(sensitivity)[..., grading.grader][..., None, None]
    sp = np.asarray(specificity)[..., grading.grader][..., None, None]
    with np.errstate(divide="ignore"):
        inner = (
            grading.constant
            + grading.detected_runs * np.log(se)
            + grading.missed_runs * np.log1p(-se)
            + grading.alarm_runs * np.log1p(-sp)
            + grading.cleared_runs * np.log(sp)
        )
    return special.logsumexp(inner, axis=-1)


def _true_counts(grading: Grading, a, b) -> np.ndarray:
    """``log C(m, u) B(a + u + t, b + m - u + n - t) / B(a, b)`` (with ``constant``'s
    ``C(n, t)``, the Beta-Binomial of ``t``, times the Binomial of the ``u`` true successes
    of the pair's ``m`` runs the audit scored again), ``(draws..., pair, t)``."""
    a, b = np.asarray(a)[..., None], np.asarray(b)[..., None]
    m, u = grading.trusted[:, :1], grading.trusted[:, 1:2]
    n = grading.true[:, :1] + grading.failed[:, :1] + m  # t + (n - t) at t = 0, and m
    return (
        log_choose(m, u)
        + special.gammaln(grading.true + u + a)
        + special.gammaln(grading.failed + m - u + b)
        - special.gammaln(n + a + b)
        + special.gammaln(a + b)
        - special.gammaln(a)
        - special.gammaln(b)
    )


def _detection_terms(grading: Grading, sensitivity, specificity):
    """``log sum_j Bin(j; t, se) Bin(k - j; n - t, 1 - sp)`` (with ``C(n, t)``) a graded
    pair at a time, ``(g, its Grading, terms (draws..., t))``: ``sensitivity``,
    ``specificity`` per grader with leading axes of draws; made once per distinct (runs,
    graded count, grader), the pairs taken in that order (draws x t x j numbers at a
    time)."""
    key = np.column_stack([grading.runs, grading.graded, grading.grader])
    order = np.lexsort(key.T[::-1])
    made = None
    for g in order:
        one = _pair(grading, g)
        if made is None or not np.array_equal(made[0], key[g]):
            made = key[g], _detections(one, sensitivity, specificity)[..., 0, :]
        yield g, one, made[1]


def _pair_terms(grading: Grading, a, b, sensitivity, specificity):
    """``log BB(t; n, a, b) + log sum_j Bin(j; t, se) Bin(k - j; n - t, 1 - sp)`` a graded
    pair at a time, ``(g, its Grading, terms (draws..., t))`` (``_detection_terms``); ``a``,
    ``b`` per graded pair with leading axes of draws."""
    for g, one, detected in _detection_terms(grading, sensitivity, specificity):
        yield g, one, detected + _true_counts(one, a[..., g : g + 1], b[..., g : g + 1])[..., 0, :]


def graded_log_marginal(grading: Grading, a, b, sensitivity, specificity) -> np.ndarray:
    """``log P(k | a, b, se, sp)`` of every graded pair, ``(draws..., pair)``: the sum of
    terms over ``t`` (``_pair_terms``)."""
    a, b = np.asarray(a), np.asarray(b)
    out = np.empty(a.shape)
    for g, _, terms in _pair_terms(grading, a, b, sensitivity, specificity):
        out[..., g] = special.logsumexp(terms, axis=-1)
    return out


def grader_rates(pm, grading: Grading, priors: dict):
    """Per grader, its sensitivity and specificity (``priors``: the spec's ``[grader]``)
    in the model being built, over a ``grader`` dim, with the audit as their binomial
    data; returns the two."""
    pm.modelcontext(None).add_coord("grader", grading.graders)
    # started where the audit puts them: (p, se, sp) and (1 - p, 1 - sp, 1 - se) give the
    # same graded counts, and a chain started at se = sp = 1/2 may take the mirror, which
    # the audit makes far less likely but a chain does not leave (METR: 2 of 4 chains)
    start = audit_shapes(grading, priors)
    se, sp = (
        pm.Beta(
            name,
            **_shapes(priors[name]),
            dims="grader",
            initval=start[:, 2 * n] / start[:, 2 * n : 2 * n + 2].sum(axis=1),
        )
        for n, name in enumerate(GRADER_RATES)
    )
    detected, positives, cleared, negatives = grading.audit_counts()
    pm.Binomial("audit_detected", n=positives, p=se, observed=detected)
    pm.Binomial("audit_cleared", n=negatives, p=sp, observed=cleared)
    return se, sp


def graded_log_likelihood(pm, grading: Grading, priors: dict, alpha, beta, rate_group):
    """The model's terms: per grader ``se``, ``sp`` (``priors``: the spec's ``[grader]``;
    the audit as their binomial data), and ``sum log P(k | a, b, se, sp)`` over the graded
    rates, the design as data; returns that sum. ``rate_group`` is each of the layout's
    rates' index into ``alpha`` and ``beta``: a pair's agent (end to end), a cell's pair
    (milestones, expert steps, whose rates pool around their task mean)."""
    se, sp = grader_rates(pm, grading, priors)
    # pairs in buckets of alike run counts (n + 1 within a power of 2), each padded to its
    # own largest counts: a table's few long pairs do not widen every pair's sum
    n, k = grading.runs, grading.graded
    bucket = np.ceil(np.log2(n + 1)).astype(np.int64)
    total = 0.0
    for b in np.unique(bucket):
        rows = np.flatnonzero(bucket == b)
        part = _part(grading, rows, int(n[rows].max()) + 1, int(k[rows].max()) + 1)
        total += _bucket_sum(pm, part, f"graded{b}", (se, sp), (alpha, beta), rate_group)
    return total


def _bucket_sum(pm, part: Grading, name: str, grader: tuple, shapes: tuple, rate_group):
    """``sum log P(k | a, b, se, sp)`` over one bucket's pairs (``graded_log_likelihood``),
    its design as data named ``{name}_...``; ``grader`` is ``(se, sp)``, ``shapes`` the
    rates' ``(alpha, beta)``."""
    import pytensor.tensor as pt

    (se, sp), (alpha, beta) = grader, shapes

    # log Gamma(a + u + t) and log Gamma(b + m - u + n - t) once per group and count, read
    # per rate (u of its m runs the audit scored again true successes: none where m = 0)
    size, counts = part.true.shape, np.arange(part.true.shape[1])
    m, u = part.trusted[:, 0], part.trusted[:, 1]
    width = size[1] + int(m.max(initial=0))
    group = rate_group[part.pairs]
    n = part.runs
    true = counts[None, :] + u[:, None]
    left = np.maximum(n[:, None] - counts[None, :], 0) + (m - u)[:, None]
    true_at, failed_at = (
        pm.Data(f"{name}_{field}_at", (group[:, None] * width + values).ravel())
        for field, values in (("true", true), ("failed", left))
    )
    every = pm.Data(f"{name}_counts", np.arange(width, dtype=float))
    log_a = pt.gammaln(every[None, :] + alpha[:, None]).ravel()
    log_b = pt.gammaln(every[None, :] + beta[:, None]).ravel()
    group = pm.Data(f"{name}_group", group)
    runs = pm.Data(f"{name}_runs", (n + m).astype(float))
    outer = (
        _detected(pm, part, name, se, sp, part.constant)
        + log_a[true_at].reshape(size)
        + log_b[failed_at].reshape(size)
        - pt.gammaln(runs + alpha[group] + beta[group])[:, None]
    )
    per_group = pt.gammaln(alpha + beta) - pt.gammaln(alpha) - pt.gammaln(beta)
    audited = float(np.sum(log_choose(m, u)))  # the audited runs' C(m, u)
    return pt.sum(pt.logsumexp(outer, axis=-1)) + pt.sum(per_group[group]) + audited


def _detected(pm, part: Grading, name: str, se, sp, constant):
    """``log sum_j constant Bin(j; t, se) Bin(k - j; n - t, 1 - sp)`` without the binomial
    coefficients (``constant`` holds them), ``(pair, t)``, the sum over ``j`` once per
    distinct (runs, graded count, grader), its design as data named ``{name}_...``."""
    import pytensor.tensor as pt

    key = np.column_stack([part.runs, part.graded, part.grader])
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    data = {
        field: pm.Data(f"{name}_{field}", getattr(part, field)[first])
        for field in ("detected_runs", "missed_runs", "alarm_runs", "cleared_runs")
    }
    at = pm.Data(f"{name}_grader", part.grader[first])
    inner = (
        pm.Data(f"{name}_constant", constant[first])
        + data["detected_runs"] * pt.log(se)[at][:, None, None]
        + data["missed_runs"] * pt.log1p(-se)[at][:, None, None]
        + data["alarm_runs"] * pt.log1p(-sp)[at][:, None, None]
        + data["cleared_runs"] * pt.log(sp)[at][:, None, None]
    )
    return pt.logsumexp(inner, axis=-1)[pm.Data(f"{name}_combination", inverse.ravel())]


def _without_true_choose(grading: Grading) -> np.ndarray:
    """``constant`` less ``log C(n, t)``: the terms of ``log P(k | t)`` alone."""
    n, t = grading.runs[:, None], np.arange(grading.true.shape[1])[None, :]
    with np.errstate(invalid="ignore"):
        choose = np.where(t <= n, log_choose(n, np.minimum(t, n)), 0.0)
    return grading.constant - choose[..., None]


def detection_graph(pm, grading: Grading, se, sp):
    """``log P(k | t) = log sum_j Bin(j; t, se) Bin(k - j; n - t, 1 - sp)`` of every graded
    pair's count given ``t`` true successes of its ``n`` runs, ``(pair, t)`` (about
    ``IMPOSSIBLE`` past ``n``), in the model being built (``se``, ``sp``: its graders'
    rates, ``grader_rates``): the grader's part of the sum over true counts where the
    model gives ``P(t)`` itself (``joint``)."""
    return _detected(pm, grading, "detected", se, sp, _without_true_choose(grading))


def detection_log(grading: Grading, sensitivity, specificity) -> np.ndarray:
    """``detection_graph``'s numpy form, ``(draws..., pair, t)``, ``sensitivity``,
    ``specificity`` per grader with leading axes of draws."""
    from dataclasses import replace

    bare = replace(grading, constant=_without_true_choose(grading))
    top = grading.true.shape[1]
    out = np.full(np.shape(sensitivity)[:-1] + (grading.pairs.size, top), IMPOSSIBLE)
    for g, _, detected in _detection_terms(bare, sensitivity, specificity):
        out[..., g, : detected.shape[-1]] = detected
    return out


def draw_graded(grading: Grading, a, b, sensitivity, specificity, rng) -> tuple:
    """Draws of ``p`` and ``q`` for every graded pair, ``(draws, pair)``: ``t`` by its term
    of the sum, ``p | t ~ Beta(a + t + u, b + n - t + m - u)`` (``u`` true successes in
    the ``m`` runs the audit scored again), ``q = se p + (1 - sp)(1 - p)``; ``a``,
    ``b`` per draw and graded pair, ``sensitivity``, ``specificity`` per draw and grader."""
    draws = a.shape[0]
    p = np.empty((draws, grading.pairs.size))
    for g, one, terms in _pair_terms(grading, a, b, sensitivity, specificity):
        weight = np.exp(terms - terms.max(axis=-1, keepdims=True))
        cumulative = np.cumsum(weight, axis=-1)
        pick = rng.uniform(size=(draws, 1)) * cumulative[:, -1:]
        t = np.minimum((cumulative < pick).sum(axis=-1), one.true.shape[1] - 1)
        m, u = one.trusted[0, :2]  # the runs the audit scored again, and their successes
        p[:, g] = rng.beta(a[:, g] + one.true[0, t] + u, b[:, g] + one.failed[0, t] + m - u)
    se = np.asarray(sensitivity)[:, grading.grader]
    sp = np.asarray(specificity)[:, grading.grader]
    return p, graded_success(p, se, sp)


def _pair(grading: Grading, g: int) -> Grading:
    """The ``Grading`` of the ``g``-th graded pair alone, over its own counts."""
    return _part(grading, np.array([g]), grading.runs[g] + 1, grading.graded[g] + 1)


def _part(grading: Grading, rows: np.ndarray, true: int, detected: int) -> Grading:
    """The ``Grading`` of the graded pairs ``rows``, over ``t < true`` and ``j <
    detected`` (their terms past those are impossible)."""
    from dataclasses import replace

    cube = np.s_[rows, :true, :detected]
    return replace(
        grading,
        pairs=grading.pairs[rows],
        grader=grading.grader[rows],
        runs=grading.runs[rows],
        graded=grading.graded[rows],
        trusted=grading.trusted[rows],
        constant=grading.constant[cube],
        detected_runs=grading.detected_runs[cube],
        missed_runs=grading.missed_runs[cube],
        alarm_runs=grading.alarm_runs[cube],
        cleared_runs=grading.cleared_runs[cube],
        true=grading.true[rows, :true],
        failed=grading.failed[rows, :true],
    )


def _shapes(prior) -> dict:
    return {"alpha": prior.alpha, "beta": prior.beta}


def grader_provenance(grading: Grading, spec, layout) -> dict:
    """``{pair: "; graded by ..."}`` of the graded pairs (by their index in ``layout``):
    their grader's sensitivity and specificity after its audit
    (``bayes_eval.exact.builders.grader_text``), and for milestone cells the milestones
    each grader scored (``m1, m2 graded by ...``; expert steps as ``run r step s``), as an
    exact product's provenance."""
    from bayes_eval.exact.builders import audited_text, grader_text

    shapes = audit_shapes(grading, spec.grader)
    _, positives, _, negatives = grading.audit_counts()
    audited = positives + negatives
    texts = [
        grader_text(name, shapes[g, :2], shapes[g, 2:], int(audited[g]))
        for g, name in enumerate(grading.graders)
    ]
    if grading.method != END_TO_END:
        said: dict = {}
        for cell, g in zip(grading.pairs, grading.grader, strict=True):
            pair, step = int(layout.cell_pair[cell]), layout.cell_factor[cell]
            label = f"m{step}"
            if grading.method == EXPERT_COMPLETION:
                label = f"run {layout.runs[pair][layout.cell_run[cell]]} step {step}"
            said.setdefault(pair, {}).setdefault(g, []).append(label)
        return {
            p: "".join(f"; {', '.join(labels)} {texts[g]}" for g, labels in by_grader.items())
            for p, by_grader in said.items()
        }
    at = zip(grading.pairs, grading.grader, grading.trusted, strict=True)
    return {int(p): f"; {texts[g]}" + (audited_text(*own) if own[0] else "") for p, g, own in at}


def with_graders(conjugate, grading: Grading, layout, spec):
    """The ``conjugate`` group with each graded pair's grader, the Betas of its
    sensitivity and specificity after the audit and its runs the audit scored again
    (``own_audited``: runs, true and graded successes), and for milestone or expert-step
    cells each cell's ``graded_factors`` (at its run and step), as an exact fit keeps them
    (``bayes_eval.exact.builders.grading_variables``), which its own runs' bounds read."""
    from bayes_eval.exact.builders import GRADED_FIELDS, grading_variables

    agents, tasks = (list(conjugate[dim].values) for dim in (AGENT, TASK))
    shapes = audit_shapes(grading, spec.grader)
    if grading.method == END_TO_END:
        pairs = [layout.pairs[p] for p in grading.pairs]
        graded = grading_variables(
            conjugate.coords,
            [agents.index(agent) for agent, _ in pairs],
            [tasks.index(task) for _, task in pairs],
            grader=[grading.graders[g] for g in grading.grader],
            shapes=shapes[grading.grader],
            own=grading.trusted,
        )
        return conjugate.merge(graded)
    # a product of cells: its factors laid out as an exact product's
    pairs = np.unique(layout.cell_pair[grading.pairs])
    grader_of = np.full(layout.k.size, -1)
    grader_of[grading.pairs] = grading.grader
    runs, steps = max(len(r) for r in layout.runs), int(layout.cell_factor.max())
    factors = np.full((pairs.size, runs, steps, len(GRADED_FIELDS)), np.nan)
    names = []
    for n, p in enumerate(pairs):
        cells = np.flatnonzero(layout.cell_pair == p)
        mine = grader_of[cells]
        ordered = list(dict.fromkeys(mine[mine >= 0]))  # numbered within the pair
        names.append(", ".join(grading.graders[g] for g in ordered))
        run, slot = layout.cell_run[cells], layout.cell_factor[cells] - 1
        factors[n, run, slot, 0], factors[n, run, slot, 1] = layout.k[cells], layout.n[cells]
        factors[n, run, slot, 2] = [ordered.index(g) if g >= 0 else -1 for g in mine]
        graded = mine >= 0
        factors[n, run[graded], slot[graded], 3:] = shapes[mine[graded]]
    graded = grading_variables(
        conjugate.coords,
        [agents.index(layout.pairs[p][0]) for p in pairs],
        [tasks.index(layout.pairs[p][1]) for p in pairs],
        grader=names,
        shapes=np.full((pairs.size, shapes.shape[1]), np.nan),
        own=np.zeros((pairs.size, 3), dtype=np.int64),
        factors=factors,
    )
    return conjugate.merge(graded)
