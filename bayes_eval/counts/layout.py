"""The layout of a pooled or crossed model: the evidence as flat arrays, and which
parameters are sampled centred.

``build_layout`` turns the evidence rows of each (agent, task) pair into the arrays the
pooled and crossed models index (``Layout``). ``choose_form`` decides, before any fit,
which task means (and, in ``joint``, which milestone rates) are sampled centred: a
centred parameter whose data are weak forms a funnel with its population's
concentration, and a non-centred one whose data are strong forms the inverse funnel.
``end_to_end_groups`` says which of the joint model's milestone rates are marginalised
(tasks with up to ``MARGINAL_END_TO_END`` end-to-end trials) and which sampled.
``layout_of`` adds the counts an audited grader scored (``bayes_eval.counts.grading``);
``model_structure`` is what a compiled model depends on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from bayes_eval.constants import CELL_CONCENTRATION, CENTRED_MARGIN, END_TO_END, EXPERT_COMPLETION
from bayes_eval.counts.clusters import ClusterTerms, cluster_terms
from bayes_eval.counts.grading import Grading, grading_of
from bayes_eval.registry import model_of

__all__ = [
    "Form",
    "Layout",
    "MARGINAL_END_TO_END",
    "build_layout",
    "centred_text",
    "choose_form",
    "end_to_end_groups",
    "layout_of",
    "model_structure",
    "sampled_cells",
]

# End-to-end trials per task up to which the joint model marginalises the task's milestone
# rates (an exact finite sum whose cost grows as trials squared); above it they are
# sampled. Sampled with 7 to 10 trials, weak data, the rates formed a funnel with their
# concentration that failed the gate on 3 of 30 random designs (studies/robustness.py).
# At 10 a gradient costs what the earlier cubic sum cost at 5 (benchmarks/joint_gradient.py).
MARGINAL_END_TO_END = 10


@dataclass
class Layout:
    """The evidence of a pooled or crossed model as flat arrays.

    ``pairs`` are the (agent, task) estimated; ``pair_agent`` indexes ``agents``.
    Cells are milestone or step counts: ``cell_pair``, ``cell_run`` (0 for
    milestones), ``cell_factor`` (milestone or step number), ``k``, ``n``.
    End-to-end counts per pair are ``e2e_k``, ``e2e_n`` (``n = 0``: none).
    Where runs are clustered, ``clusters`` holds the terms of each rate's marginal
    (``bayes_eval.counts.clusters``): the rates are the pairs (end-to-end) or the milestone cells;
    ``cluster_rows`` are the rows of ``Evidence.clusters`` they come from. Where an
    audited grader scored the end-to-end runs, ``grading`` holds its terms
    (``bayes_eval.counts.grading``).
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
    grading: Grading | None = None

    @cached_property
    def pair_task(self) -> np.ndarray:
        """The index in ``tasks`` of each pair's task (as ``pair_agent`` for agents)."""
        return np.array([self.tasks.index(task) for _, task in self.pairs], dtype=np.int64)


@dataclass(frozen=True)
class Form:
    """Which parameters are sampled centred: the task mean of each pair, and in ``joint``
    the rate of each milestone cell it samples (both empty for ``end_to_end``, which has
    neither). ``tails`` marks the sampled rates whose counts are all successes (1) or
    all failures (-1): those are sampled on their tail scale (``models._tail_beta``) in every
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
      task mean nears 1: it is marked for its tail scale (``Form.tails``, ``models._tail_beta``);
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
    entry = model_of(spec)
    if not entry.cell_method:
        return Form(empty, empty)
    role = CELL_CONCENTRATION[entry.cell_method]
    kappa = np.exp(spec.priors[role].params["mu"])  # LogNormal median
    kappa_agent = np.exp(spec.priors["task_concentration"].params["mu"])
    n = layout.n.astype(float)
    per_cell = n * (kappa + 1) / (n + kappa + 1)  # 1 / (1 / (kappa + 1) + 1 / n), 0 at n = 0
    information = np.bincount(layout.cell_pair, per_cell, minlength=len(layout.pairs))
    pairs = information >= CENTRED_MARGIN * (kappa_agent + 1)
    if not entry.paths:  # the joint model's cells sampled for its many-trial pairs
        return Form(pairs, empty)
    sampled = sampled_cells(layout)  # only the cells it samples
    trials = (layout.n + layout.e2e_n[layout.cell_pair])[sampled]
    k, n = layout.k[sampled], layout.n[sampled]
    tails = np.where((k == n) & (n > 0), 1, np.where((k == 0) & (n > 0), -1, 0))
    mixed = (k > 0) & (k < n)  # bounded by its own data on both sides
    cells = (trials >= CENTRED_MARGIN * (kappa + 1)) | (mixed & (trials >= kappa + 1))
    return Form(pairs, cells, tails.astype(np.int8))


def build_layout(by_pair, spec, clusters=None) -> Layout:
    """The flat arrays a pooled or crossed model indexes, from the evidence rows of each
    (agent, task) pair that ``spec`` reads (``clusters``: ``Evidence.clusters``, if any)."""
    pairs = list(by_pair)
    agents = list(dict.fromkeys(a for a, _ in pairs))
    tasks = list(dict.fromkeys(t for _, t in pairs))
    cell_method = model_of(spec).cell_method
    cells, e2e, runs = [], [], []
    for p, pair in enumerate(pairs):
        rows = by_pair[pair]
        run_names = []
        table = rows.get(cell_method) if cell_method else None
        if table is not None:  # (crossed_joint reads pairs with end-to-end rows alone too)
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
    if clusters is not None and model_of(spec).clustered:
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
    method = model_of(spec).cell_method or END_TO_END
    rows = clusters[clusters["method"] == method]
    index = {pair: p for p, pair in enumerate(pairs)}
    pair = np.array([index.get(key, -1) for key in zip(rows["agent"], rows["task"], strict=True)])
    rows, pair = rows[pair >= 0], pair[pair >= 0]
    k, n = rows["successes"].to_numpy(np.int64), rows["trials"].to_numpy(np.int64)
    used = rows.index.to_numpy()
    if method == END_TO_END:
        return cluster_terms(pair, k, n, len(pairs)), used
    cell_of = {(c[0], c[2]): i for i, c in enumerate(cells)}
    steps = rows["step"].to_numpy(np.int64)
    rate = np.array([cell_of[(p, m)] for p, m in zip(pair, steps, strict=True)], dtype=np.int64)
    return cluster_terms(rate, k, n, len(cells)), used


def end_to_end_groups(layout) -> tuple[np.ndarray, np.ndarray]:
    """The pairs whose end-to-end trials the joint model sums the milestone rates out of
    (1 to ``MARGINAL_END_TO_END`` trials; most milestones first, the order of
    ``survivor_chain``), and those it samples them for (more)."""
    few = np.flatnonzero((layout.e2e_n > 0) & (layout.e2e_n <= MARGINAL_END_TO_END))
    milestones = np.bincount(layout.cell_pair, minlength=len(layout.pairs))[few]
    return few[np.argsort(-milestones, kind="stable")], np.flatnonzero(
        layout.e2e_n > MARGINAL_END_TO_END
    )


def sampled_cells(layout) -> np.ndarray:
    """The milestone cells whose rates the joint model samples: those of tasks with more
    than ``MARGINAL_END_TO_END`` end-to-end trials. The rates of every other task are
    marginalised."""
    return np.isin(layout.cell_pair, end_to_end_groups(layout)[1])


def layout_of(evidence, by_pair, spec, terms: bool = True):
    """A pooled or crossed model's layout of the rows it uses, with the counts an audited
    grader scored (``bayes_eval.counts.grading``; with the terms of their sum over true
    counts where ``terms``: the crossed model samples each rate, and needs none): the
    end-to-end counts, or the milestone or expert-step cells of the models whose rates
    they are (``hierarchical``, ``ecr_pooled``, ``crossed_milestones``)."""
    import dataclasses

    layout = build_layout(by_pair, spec, evidence.clusters)
    graded = model_of(spec).graded  # the joint model's: its end-to-end runs (check_graded)
    if END_TO_END in graded:
        rates, k, n, method = layout.pairs, layout.e2e_k, layout.e2e_n, END_TO_END
    elif graded:  # the rates are cells
        cells = zip(layout.cell_pair, layout.cell_run, layout.cell_factor, strict=True)
        (method,) = graded
        expert = method == EXPERT_COMPLETION
        rates = [
            (*layout.pairs[p], *[layout.runs[p][run]] * expert, step) for p, run, step in cells
        ]
        k, n = layout.k, layout.n
    else:
        return layout
    grading = grading_of(evidence, rates, k, n, spec, terms, method)
    return dataclasses.replace(layout, grading=grading)


def model_structure(layout, spec) -> tuple:
    """Everything a compiled model depends on except the observed successes (clustered
    runs: their counts too, which the marginal's terms hold as constants)."""
    arrays = (layout.pair_agent, layout.cell_pair, layout.cell_run, layout.n, layout.e2e_n)
    if layout.clusters is not None:
        arrays += tuple(vars(layout.clusters).values())
    graded = ()
    if layout.grading is not None:
        graded = (repr(sorted(spec.grader.items())), *layout.grading.key())
    return (
        spec.kind,
        spec.pooling,
        repr(sorted(spec.priors.items())),
        tuple(layout.agents),
        *(a.tobytes() for a in arrays),
        *graded,
    )
