"""The exact models' builders: one (agent, task)'s rows to an ``Estimate``.

Every exact model reduces each (agent, task) to an ``Estimate``: a ``BetaProduct``
posterior (equal mixture over runs of products of Beta factors), a point value
(expert best-of-N, golden solution), or no estimate with the reason. The
``Posterior`` built from them computes summaries deterministically and draws
samples only when they are asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayes_eval.constants import (
    AGENT,
    BEST_OF_N,
    END_TO_END,
    EXPERT_COMPLETION,
    GOLDEN,
    MILESTONE_METHOD,
    RUN,
    TASK,
)
from bayes_eval.errors import InputError
from bayes_eval.exact.expert import best_of_n_runs, golden_runs
from bayes_eval.specs import Prior

__all__ = [
    "GRADED_FIELDS",
    "GRADER_SHAPES",
    "Estimate",
    "audited_text",
    "Estimates",
    "chain",
    "end_to_end",
    "end_to_end_table",
    "grade",
    "grading_variables",
    "expert_completion",
    "milestones",
    "milestones_table",
    "own_audited",
]


@dataclass
class Estimate:
    """What a model says about one (agent, task).

    Attributes
    ----------
    method : str
        The evidence the estimate rests on (the rung, for the chain).
    alpha, beta : list of lists of float
        Beta parameters per component (run) and factor; empty for point values.
    factors : list of int
        The milestone or step number of each factor (per component, in order).
    point_log : float
        ``log`` of a point value (best-of-N or golden); NaN for a posterior.
    cp : tuple of int or None
        (successes, trials) when the estimate is end-to-end, for Clopper-Pearson.
    provenance : str
        Model, prior and, for the chain, which rung produced each factor.
    reason : str
        Why there is no estimate (empty when there is one).
    used : pandas.Index
        The evidence rows (normalised table index) the estimate rests on.
    """

    agent: str
    task: str
    method: str
    alpha: list = field(default_factory=list)
    beta: list = field(default_factory=list)
    factors: list = field(default_factory=list)
    point_log: float = math.nan
    cp: tuple[int, int] | None = None
    provenance: str = ""
    reason: str = ""
    used: pd.Index = field(default_factory=lambda: pd.Index([]))


@dataclass
class Estimates:
    """The ``Estimate`` of many (agent, task) pairs, as arrays over pairs: what an exact fit
    lays out (``Posterior.from_estimates``).

    Attributes
    ----------
    agent, task, method, provenance, reason : ndarray of str
    alpha, beta : ndarray
        ``(pair, run, factor)``, NaN where a pair has no such run or factor; the factor
        axis is the milestone or step number (1-based), one slot for end-to-end.
    point_log : ndarray
        NaN where the pair's estimate is a posterior.
    cp : ndarray of int
        ``(pair, 2)``: successes and trials for Clopper-Pearson, -1 where absent.
    used : pandas.Index
        The evidence rows the estimates rest on.
    grader : ndarray of str, optional
        Where a grader that errs scored the runs (``grade``): its name per pair (``""``:
        none); ``alpha`` and ``beta`` are then NaN, the posterior being the mixture of
        ``bayes_eval.exact.graded`` over the graded count ``cp``.
    grader_shapes : ndarray, optional
        ``(pair, 4)``: the Betas of the grader's sensitivity and specificity after its
        audit, ``GRADER_SHAPES``; NaN where ``grader`` is empty.
    own_audited : ndarray of int, optional
        ``(pair, 3)``: the pair's runs the audit scored again (``OwnRuns``: runs, true
        successes, graded successes), their truth in place of the grader's verdict.
    graded_factors : ndarray, optional
        ``(pair, run, factor, GRADED_FIELDS)``: where a grader scored a product's counts
        (milestones, expert steps), each factor's graded count, runs, grader group and
        Betas (``bayes_eval.exact.graded_product``); NaN elsewhere.
    """

    agent: np.ndarray
    task: np.ndarray
    method: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    point_log: np.ndarray
    cp: np.ndarray
    provenance: np.ndarray
    reason: np.ndarray
    used: pd.Index
    grader: np.ndarray | None = None
    grader_shapes: np.ndarray | None = None
    own_audited: np.ndarray | None = None
    graded_factors: np.ndarray | None = None

    @classmethod
    def stack(cls, estimates: list[Estimate]) -> Estimates:
        """Pairs' estimates, built one at a time, as arrays."""
        n_runs = max((len(e.alpha) for e in estimates), default=1) or 1
        n_factors = max((max(e.factors, default=0) for e in estimates), default=0) or 1
        alpha = np.full((len(estimates), n_runs, n_factors), np.nan)
        beta = np.full_like(alpha, np.nan)
        cp = np.full((len(estimates), 2), -1, dtype=np.int64)
        for n, e in enumerate(estimates):
            for r, (a_run, b_run) in enumerate(zip(e.alpha, e.beta, strict=True)):
                slots = [max(f, 1) - 1 for f in e.factors[: len(a_run)]]
                alpha[n, r, slots] = a_run
                beta[n, r, slots] = b_run
            if e.cp is not None:
                cp[n] = e.cp

        def text(name):
            return np.array([getattr(e, name) for e in estimates], dtype=object).astype(str)

        return cls(
            text("agent"),
            text("task"),
            text("method"),
            alpha,
            beta,
            np.array([e.point_log for e in estimates], dtype=float),
            cp,
            text("provenance"),
            text("reason"),
            pd.Index([]).append([e.used for e in estimates]),
        )


def _posterior(prior: Prior, successes: int, trials: int) -> tuple[float, float]:
    return prior.alpha + successes, prior.beta + (trials - successes)


# Each builder takes one (agent, task)'s rows as {method: rows sorted by run and step}.


def end_to_end(agent, task, by_method, spec) -> Estimate:
    """The end-to-end count's Beta posterior; none (with the reason) where the prior's
    alpha is 0 and the count 0 successes, which has no proper posterior."""
    prior = spec.priors["end_to_end"]
    rows = by_method[END_TO_END]
    row = rows.iloc[0]
    k, n = int(row["successes"]), int(row["trials"])
    a, b = _posterior(prior, k, n)
    provenance = (
        f"{spec.name}; end_to_end prior {prior.label()}; {k}/{n} ({row['grading']} grading)"
    )
    if not a > 0:
        return Estimate(
            agent,
            task,
            END_TO_END,
            cp=(k, n),
            used=rows.index,
            provenance=provenance,
            reason=improper("the end-to-end count", k, n, prior),
        )
    return Estimate(
        agent,
        task,
        END_TO_END,
        [[a]],
        [[b]],
        [0],
        cp=(k, n),
        used=rows.index,
        provenance=provenance,
    )


def improper(what: str, k: int, n: int, prior: Prior) -> str:
    """Why ``what``'s count of ``k`` of ``n`` has no proper posterior under ``prior``
    (alpha 0, no success), and what would give it one."""
    return (
        f"{what} has {k}/{n} successes: no proper posterior under {prior.label()}; a prior "
        "with alpha > 0 gives one (Beta(1, 1); Jeffreys' Beta(0.5, 0.5))"
    )


def _no_milestone_posterior(step, n, prior: Prior, rung: str) -> str:
    """Why a milestone of 0 successes leaves its task without an estimate (``rung``: the
    chain's, where it has no expert run for it either), and what would give it one."""
    return (
        f"milestone {step} has 0/{n} successes: no proper posterior under {prior.label()}, "
        "and no expert best-of-N or golden-solution run for it"
        + ("" if rung else " (phuong_chain would use one)")
    )


def end_to_end_table(pair_rows, spec) -> Estimates:
    """``end_to_end`` of every pair of ``pair_rows`` (``PairRows``) at once."""
    prior = spec.priors["end_to_end"]
    rows = pair_rows.first(END_TO_END)
    k = rows["successes"].to_numpy(dtype=np.int64)
    n = rows["trials"].to_numpy(dtype=np.int64)
    a, b = (np.asarray(x, dtype=float) for x in _posterior(prior, k, n))
    counts = pd.Series(k.astype(str), dtype=object) + "/" + n.astype(str).astype(object)
    grading = rows["grading"].to_numpy(dtype=object)
    head = f"{spec.name}; end_to_end prior {prior.label()}; "
    reason = np.full(k.size, "", dtype=object)
    bad = ~(a > 0)
    reason[bad] = [
        improper("the end-to-end count", i, j, prior) for i, j in zip(k[bad], n[bad], strict=True)
    ]
    a[bad] = b[bad] = np.nan
    return Estimates(
        rows["agent"].to_numpy(dtype=str),
        rows["task"].to_numpy(dtype=str),
        np.full(k.size, END_TO_END),
        a.reshape(-1, 1, 1),
        b.reshape(-1, 1, 1),
        np.full(k.size, np.nan),
        np.stack([k, n], axis=1),
        (head + counts + " (" + grading + " grading)").to_numpy(dtype=str),
        reason.astype(str),
        pair_rows.table.index[pair_rows.positions()],
    )


# The Beta shapes of a grader's sensitivity and specificity, in ``grader_shapes``' order
# (the dimension ``GRADER_SHAPE``); a pair's runs the audit scored again, ``OWN_AUDITED``.
GRADER_SHAPES = ("sensitivity_alpha", "sensitivity_beta", "specificity_alpha", "specificity_beta")
GRADER_SHAPE = "grader_shape"
OWN_AUDITED = ("runs", "true_successes", "graded_successes")


def grade(estimates: Estimates, pair_rows, audit, spec) -> Estimates:
    """Estimates whose counts an audited grader scored (the rows' ``grader`` column,
    ``bayes_eval.evidence.audit.with_audit``; a blank one, a trusted grader): an
    end-to-end pair's posterior is the mixture of ``bayes_eval.exact.graded``, a product
    of milestones or expert steps that of ``bayes_eval.exact.graded_product``, with the
    grader's sensitivity and specificity (``spec.grader``'s priors updated by the audit
    rows that apply to each count) integrated out. Point values are left as they are."""
    from dataclasses import replace

    pairs, (n_runs, n_factors) = len(estimates.method), estimates.alpha.shape[1:]
    names = np.full(pairs, "", dtype=object)
    shapes = np.full((pairs, len(GRADER_SHAPES)), np.nan)
    own = np.zeros((pairs, 3), dtype=np.int64)
    factors = np.full((pairs, n_runs, n_factors, len(GRADED_FIELDS)), np.nan)
    provenance = estimates.provenance.astype(object)
    alpha, beta = estimates.alpha.copy(), estimates.beta.copy()
    texts = {}

    def shapes_of(name, **scope):
        counts = audit.counts(name, **scope)
        sensitivity = counts.sensitivity_shapes(_shapes(spec.grader["sensitivity"]))
        specificity = counts.specificity_shapes(_shapes(spec.grader["specificity"]))
        key = (name, sensitivity, specificity)
        if key not in texts:
            texts[key] = grader_text(name, sensitivity, specificity, counts.total)
        return (*sensitivity, *specificity), texts[key]

    for n, ((agent, task), by_method) in enumerate(pair_rows.items()):
        method = estimates.method[n]
        rows = by_method.get(method)
        point = method in (BEST_OF_N, GOLDEN)  # an expert's point value: no bound to widen
        if point or estimates.reason[n] or rows is None or not (rows["grader"] != "").any():
            continue  # no graded count: a point value, no estimate, or a trusted grader
        if method == END_TO_END:
            name, k, runs, row = (rows[c].iloc[0] for c in ("grader", "successes", "trials", "row"))
            shapes[n], text = shapes_of(name, agent=agent, task=task, method=END_TO_END)
            provenance[n] += "; " + text
            mine = audit.own_runs(name, agent, task)
            if mine.runs:
                own[n] = own_audited(mine, k, runs, row, audit.source, task)
                provenance[n] += audited_text(*own[n])
        else:
            said = _graded_factors(factors[n], rows, method, audit, shapes_of, (agent, task))
            provenance[n] += "".join(f"; {what} {text}" for text, what in said.items())
        names[n] = ", ".join(dict.fromkeys(rows["grader"][rows["grader"] != ""]))
        alpha[n] = beta[n] = np.nan
    return replace(
        estimates,
        alpha=alpha,
        beta=beta,
        provenance=provenance.astype(str),
        grader=names.astype(str),
        grader_shapes=shapes,
        own_audited=own,
        graded_factors=None if np.isnan(factors).all() else factors,
    )


def grading_variables(coords, i, j, *, grader, shapes, own, factors=None):
    """The grading variables of a fit's ``conjugate`` group on the ``(agent, task)`` grid
    of ``coords``, pair ``n`` at ``(i[n], j[n])``: ``grader`` (its name, ``""`` where
    none), ``grader_shapes`` (``GRADER_SHAPES``), ``own_audited`` (``OWN_AUDITED``) and,
    where a product's counts were graded, ``graded_factors`` (``GRADED_FIELDS``). Exact,
    pooled and crossed fits lay them out alike."""
    import xarray as xr

    grid = (coords[AGENT].size, coords[TASK].size)
    pair = (AGENT, TASK)

    def laid_out(values, fill, dims, dtype):
        values = np.asarray(values, dtype=dtype)
        out = np.full(grid + values.shape[1:], fill, dtype=dtype)
        out[i, j] = values
        return (pair + dims, out)

    data = {
        "grader": laid_out(grader, "", (), object),
        "grader_shapes": laid_out(shapes, np.nan, (GRADER_SHAPE,), float),
        "own_audited": laid_out(own, 0, ("audited_count",), np.int64),
    }
    data["grader"] = (pair, data["grader"][1].astype(str))
    new = {GRADER_SHAPE: list(GRADER_SHAPES), "audited_count": list(OWN_AUDITED)}
    if factors is not None:
        data["graded_factors"] = laid_out(factors, np.nan, (RUN, "factor", "graded_field"), float)
        new["graded_field"] = list(GRADED_FIELDS)
        for dim, size in zip((RUN, "factor"), np.shape(factors)[1:3], strict=True):
            if dim not in coords:  # a pooled or crossed fit's: numbered from 1, as an exact's
                new[dim] = np.arange(1, size + 1)
    return xr.Dataset(data, coords={**{k: coords[k] for k in coords}, **new})


# What ``Estimates.graded_factors`` holds per factor: its graded count, its runs, its
# grader (numbered within the pair: factors one grader scored under the same audit rows
# share its sensitivity and specificity; -1: a trusted grader) and that grader's Betas.
GRADED_FIELDS = ("graded", "runs", "grader_group", *GRADER_SHAPES)


def _graded_factors(out, rows, method, audit, shapes_of, pair) -> dict:
    """A product's factors written into ``out`` as ``graded_factors`` holds them (runs x
    factors x ``GRADED_FIELDS``); returns the provenance's words on each grader, with the
    factors it scored."""
    agent, task = pair
    groups, said = {}, {}
    run_of = {run: r for r, run in enumerate(sorted(rows["run"].unique()))}
    position = rows.groupby("run", sort=False).cumcount().to_numpy()
    for m, row in enumerate(rows.itertuples()):
        r = run_of[row.run] if method == EXPERT_COMPLETION else 0
        slot = int(row.step) - 1 if method == MILESTONE_METHOD else int(position[m])
        out[r, slot, :2] = row.successes, row.trials
        out[r, slot, 2] = -1
        if row.grader:
            scope = {"agent": agent, "task": task, "method": method, "step": row.step}
            key = (row.grader, tuple(audit.applying(row.grader, **scope).index))
            out[r, slot, 2] = groups.setdefault(key, len(groups))
            out[r, slot, 3:], text = shapes_of(row.grader, **scope)
            label = (
                f"m{row.step}" if method == MILESTONE_METHOD else f"run {row.run} step {row.step}"
            )
            said.setdefault(text, []).append(label)
    return {text: ", ".join(labels) for text, labels in said.items()}


def audited_text(runs: int, true: int, graded: int) -> str:
    """The provenance's words on a pair's runs the audit scored again."""
    return (
        f"; {runs} of its runs audited ({true} true successes, {graded} graded), their "
        "truth in place of the grader's verdict"
    )


def own_audited(mine, k: int, n: int, row: int, source: str, task: str) -> tuple:
    """A pair's audited runs as ``own_audited`` holds them, refused (one line) where the
    pair's graded counts cannot hold them."""
    if mine.runs > n or mine.graded_successes > k or k - mine.graded_successes > n - mine.runs:
        raise InputError(
            f"{source}: the {mine.runs} audited runs of task '{task}' ({mine.graded_successes} "
            f"graded successes) are not among its {n} runs of {k} graded successes (evidence "
            f"row {row})"
        )
    return mine.runs, mine.true_successes, mine.graded_successes


def _shapes(prior: Prior) -> tuple[float, float]:
    return prior.alpha, prior.beta


def grader_text(name: str, sensitivity, specificity, audited: int) -> str:
    """The provenance's words on a grader: its sensitivity and specificity (posterior
    means and central 95% intervals of their Betas) and the runs audited."""
    from scipy import stats

    def measure(shapes) -> str:
        low, high = stats.beta.ppf([0.025, 0.975], *shapes)
        digits = 2 if high < 0.99 else 3 if high < 0.999 else 4
        return f"{shapes[0] / sum(shapes):.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"

    return (
        f"graded by {name}: sensitivity {measure(sensitivity)}, specificity "
        f"{measure(specificity)} from {audited:,} audited runs"
    )


def milestones(agent, task, by_method, spec) -> Estimate:
    """The milestone method alone: a zero-success milestone under Haldane's prior has no
    proper posterior, so the task gets no estimate (with the reason)."""
    return _milestone_product(
        agent, task, {MILESTONE_METHOD: by_method[MILESTONE_METHOD]}, spec, rung=""
    )


def milestones_table(pair_rows, spec) -> Estimates:
    """``milestones`` of every pair of ``pair_rows`` (``PairRows``) at once."""
    prior = spec.priors["milestone"]
    rows, pair = pair_rows.rows(MILESTONE_METHOD)
    step, k, n = (rows[c].to_numpy(dtype=np.int64) for c in ("step", "successes", "trials"))
    a, b = _posterior(prior, k, n)
    pairs = int(pair.max(initial=-1)) + 1
    first = np.flatnonzero(np.diff(pair, prepend=-1) != 0)  # each pair's first row
    # each pair's first milestone without a proper posterior (0 successes under Haldane)
    none = np.iinfo(np.int64).max
    bad = np.full(pairs, none)
    without = np.flatnonzero(~(a > 0))
    np.minimum.at(bad, pair[without], without)
    proper = bad == none
    keep = proper[pair]
    alpha = np.full((pairs, 1, max(int(step.max(initial=0)), 1)), np.nan)
    beta = np.full_like(alpha, np.nan)
    alpha[pair[keep], 0, step[keep] - 1] = a[keep]
    beta[pair[keep], 0, step[keep] - 1] = b[keep]
    parts = pd.Series(
        "m"
        + step.astype(str).astype(object)
        + " milestone "
        + k.astype(str).astype(object)
        + "/"
        + n.astype(str).astype(object)
    )
    head = f"{spec.name}; milestone prior {prior.label()}"
    provenance = np.full(pairs, head, dtype=object)
    provenance[proper] = head + "; " + parts.groupby(pair).agg(", ".join).to_numpy()[proper]
    reason = np.full(pairs, "", dtype=object)
    worst = bad[~proper]
    reason[~proper] = [
        _no_milestone_posterior(s, t, prior, "") for s, t in zip(step[worst], n[worst], strict=True)
    ]
    agents, tasks = (rows[c].to_numpy(dtype=object)[first] for c in ("agent", "task"))
    return Estimates(
        agents.astype(str),
        tasks.astype(str),
        np.full(pairs, MILESTONE_METHOD).astype(str),
        alpha,
        beta,
        np.full(pairs, np.nan),
        np.full((pairs, 2), -1, dtype=np.int64),
        provenance.astype(str),
        reason.astype(str),
        rows.index,
    )


def expert_completion(agent, task, by_method, spec) -> Estimate:
    prior = spec.priors["step"]
    rows = by_method[EXPERT_COMPLETION]
    alpha, beta, parts = [], [], []
    for run, steps in rows.groupby("run", sort=True):
        ab = [
            _posterior(prior, int(k), int(n))
            for k, n in zip(steps["successes"], steps["trials"], strict=True)
        ]
        alpha.append([a for a, _ in ab])
        beta.append([b for _, b in ab])
        parts.append(f"run {run}: {len(ab)} steps")
        zero = next((i for i, (a, _) in enumerate(ab) if not a > 0), None)
        if zero is not None:
            k, n = int(steps["successes"].iloc[zero]), int(steps["trials"].iloc[zero])
            return Estimate(
                agent,
                task,
                EXPERT_COMPLETION,
                used=rows.index,
                provenance=f"{spec.name}; step prior {prior.label()}",
                reason=improper(f"run {run}, step {steps['step'].iloc[zero]}", k, n, prior),
            )
    return Estimate(
        agent,
        task,
        EXPERT_COMPLETION,
        alpha,
        beta,
        list(range(1, max(map(len, alpha)) + 1)),
        used=rows.index,
        provenance=f"{spec.name}; step prior {prior.label()}; equal mixture of "
        f"{len(alpha)} run(s) ({'; '.join(parts)})",
    )


def chain(agent, task, by_method, spec) -> Estimate:
    """Phuong et al.'s fallback chain for one task. A rung whose evidence has no proper
    posterior under the spec's prior (a milestone of 0 successes under Haldane's prior,
    with no expert run for it) passes the task on to the next rung that has evidence, and
    the provenance says so; where none has, the task has no estimate, with the reason."""
    e2e = by_method.get(END_TO_END)
    if e2e is not None and int(e2e["successes"].iloc[0]) > 0:
        return _tag(end_to_end(agent, task, by_method, spec), "rung end_to_end")
    passed = None  # the milestone rung's estimate, where it has no posterior
    if MILESTONE_METHOD in by_method:
        estimate = _milestone_product(agent, task, by_method, spec, rung="rung milestone; ")
        if not estimate.reason:
            return estimate
        passed = estimate
    later = _later_rungs(agent, task, by_method, spec, e2e)
    if passed is None:
        return later
    if later.reason:
        return passed
    why = f"the milestone rung passed over: {passed.reason}"
    later.provenance = later.provenance.replace(";", f"; {why};", 1)
    later.used = later.used.append(passed.used)
    return later


def _later_rungs(agent, task, by_method, spec, e2e) -> Estimate:
    """The chain's rungs after the milestones: expert completion, whole-task best-of-N
    and golden solutions, then an end-to-end count of 0 successes."""
    if EXPERT_COMPLETION in by_method:
        return _tag(expert_completion(agent, task, by_method, spec), "rung expert_completion")
    for method in (BEST_OF_N, GOLDEN):
        whole = by_method.get(method)
        if whole is not None and (whole["milestone"] < 1).any():
            whole = whole[whole["milestone"] < 1]
            value, text = _expert_point(method, whole)
            return Estimate(
                agent,
                task,
                method,
                point_log=value,
                used=whole.index,
                provenance=f"{spec.name}; rung {method} (whole task): {text}",
            )
    if e2e is not None:
        return _tag(
            end_to_end(agent, task, by_method, spec),
            "rung end_to_end (0 successes, no other usable evidence)",
        )
    return Estimate(
        agent,
        task,
        spec.kind,
        provenance=spec.name,
        reason="only milestone-level expert rows, and no milestone rows to place them",
    )


def _tag(estimate: Estimate, rung: str) -> Estimate:
    estimate.provenance = estimate.provenance.replace(";", f"; {rung};", 1)
    return estimate


def _milestone_product(agent, task, by_method, spec, rung: str) -> Estimate:
    """Product of milestone posteriors; a milestone with no proper posterior (0 successes
    under Haldane's prior) falls back to expert best-of-N, then golden-solution rows for
    it, where ``by_method`` has them (the chain), else the task gets no estimate."""
    prior = spec.priors["milestone"]
    rows = by_method[MILESTONE_METHOD]
    alpha, beta, factors, parts = [], [], [], []
    point_log, rungs, used = 0.0, set(), rows.index
    for step, k, n in zip(rows["step"], rows["successes"], rows["trials"], strict=True):
        a, b = _posterior(prior, int(k), int(n))
        if a > 0:
            alpha.append(a)
            beta.append(b)
            factors.append(int(step))
            parts.append(f"m{step} milestone {k}/{n}")
            continue
        for method in (BEST_OF_N, GOLDEN):
            expert = by_method.get(method)
            if expert is not None and (expert["milestone"] == step).any():
                expert = expert[expert["milestone"] == step]
                value, text = _expert_point(method, expert)
                used = used.append(expert.index)
                point_log += value
                rungs.add(method)
                parts.append(f"m{step} {method} {text} (0/{n} unguided)")
                break
        else:
            return Estimate(
                agent,
                task,
                MILESTONE_METHOD,
                provenance=f"{spec.name}; milestone prior {prior.label()}",
                used=used,
                reason=_no_milestone_posterior(step, n, prior, rung),
            )
    head = f"{spec.name}; milestone prior {prior.label()}; "
    if not rungs:
        return Estimate(
            agent,
            task,
            MILESTONE_METHOD,
            [alpha],
            [beta],
            factors,
            used=used,
            provenance=head + rung + ", ".join(parts),
        )
    # A point value in the product makes the whole estimate a point value.
    method = GOLDEN if GOLDEN in rungs else BEST_OF_N
    mean_log = sum(math.log(a / (a + b)) for a, b in zip(alpha, beta, strict=True))
    kind = "lower bound x posterior means" if method == GOLDEN else "point value"
    return Estimate(
        agent,
        task,
        method,
        point_log=point_log + mean_log,
        used=used,
        provenance=head + f"rung {method} ({kind}); " + ", ".join(parts),
    )


def _expert_point(method: str, rows: pd.DataFrame) -> tuple[float, str]:
    """``log`` of a best-of-N estimate (mean of 2^-bits over runs) or golden bound (best run)."""
    if method == BEST_OF_N:
        runs = best_of_n_runs(rows)
        value = float(np.log(np.mean(np.exp(runs["log_p"]))))
        bits = ", ".join(f"{b:.2f}" for b in runs["bits"])
        return value, f"2^-bits, bits per run [{bits}] (point value)"
    runs = golden_runs(rows)
    value = float(runs["log_p"].max())
    return value, f"exp(sum logprob) = {math.exp(value):.3g} (lower bound, best of {len(runs)})"
