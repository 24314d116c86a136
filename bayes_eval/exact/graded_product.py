"""Products of rates whose counts a grader that errs scored: milestones and expert steps.

A pair's estimate is a product ``P = prod_m p_m`` (an equal mixture of such products over
expert runs). Where a grader scored factor ``m``'s ``n_m`` runs, ``k_m`` of them graded
successes, its count is binomial in ``q_m = se p_m + (1 - sp)(1 - p_m)``; the factors one
grader scored share its sensitivity ``se`` and specificity ``sp`` (Betas, the spec's priors
updated by the grader's audit), so they are not independent given the data: every factor's
runs inform ``se`` and ``sp``, and through them the other factors.

Given ``se`` and ``sp`` the factors are independent, each the finite mixture over its true
count ``t`` of ``bayes_eval.exact.graded``, with weights ``C(n, t) B(a + t, b + n - t)
P(k | t, n, se, sp)`` that are polynomials of degree at most ``n`` in ``se`` and in ``sp``.
The grader's ``se`` and ``sp`` are integrated out by Gauss-Jacobi quadrature under their
Betas, whose ``Q`` nodes integrate every polynomial of degree ``2Q - 1`` exactly: with
``Q > N / 2`` (``N``, the runs the grader scored in the product) the posterior, its
moments and its law are exact, not approximated. The law of ``X = -log P`` is then the
nodes' mixture of the factors' convolutions, each factor's exact bin masses on one lattice
(``X`` in steps ``h``), convolved by FFT; the step halves until two lattices agree on every
quantile within ``QUANTILE_TOLERANCE``. Draws are exact: the true and detected counts are
drawn by forward filtering and backward sampling over their totals, then each rate from
its Beta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import fft, linalg, special, stats

from bayes_eval.exact.factors import QUANTILE_TOLERANCE, ProductSummary, x_isf, x_tails
from bayes_eval.exact.graded import graded_success, log_choose
from bayes_eval.exact.grid import GridCdf
from bayes_eval.exact.products import log_beta_draws

__all__ = ["GradedFactor", "GradedProduct", "graded_product"]

# The tail of each factor's X left off the lattice's top (it joins the last point).
TAIL_MASS = 1e-16
# Nodes whose share of the posterior is below this are dropped, and true counts whose
# share of it is below NEGLIGIBLE_TRUE at every node (they move no figure).
NEGLIGIBLE_NODE = 1e-17
NEGLIGIBLE_TRUE = 1e-18
# The most lattice points one law may use; past it the step stops halving and the error
# reached is reported.
MAX_POINTS = 2**21
# Nodes convolved together (memory: this many x the lattice's complex numbers).
NODE_CHUNK = 32
# Halvings of the step at most.
MAX_HALVINGS = 14
# Errors of quantiles below this X (P within 1e-6 of 1) are reported relative to it.
SMALLEST_X = 1e-6


@dataclass(frozen=True)
class GradedFactor:
    """One factor: ``graded`` successes of ``runs`` under the Beta ``prior``, scored by
    the grader ``group`` indexes (``GradedProduct.shapes``; -1: trusted, a plain Beta)."""

    prior: tuple[float, float]
    graded: int
    runs: int
    group: int = -1

    @property
    def true(self) -> np.ndarray:
        """The factor's possible true counts (its own where trusted)."""
        return np.arange(self.runs + 1) if self.group >= 0 else np.array([self.graded])

    @property
    def shapes(self) -> tuple[np.ndarray, np.ndarray]:
        """The Beta shapes of the rate given each true count."""
        a, b = self.prior
        return a + self.true, b + self.runs - self.true

    @cached_property
    def log_weight(self) -> np.ndarray:
        """``log C(n, t) B(a + t, b + n - t) / B(a, b)`` over ``true``."""
        a, b = self.prior
        t, n = self.true, self.runs
        return log_choose(n, t) + special.betaln(a + t, b + n - t) - special.betaln(a, b)


@dataclass(frozen=True)
class GradedProduct:
    """The posterior of ``P``: the equal mixture over ``runs`` (each a tuple of
    ``GradedFactor``) of their products, the graders' Betas ``shapes`` (sensitivity
    alpha, beta, specificity alpha, beta) after their audits, one per group."""

    runs: tuple[tuple[GradedFactor, ...], ...]
    shapes: tuple[tuple[float, float, float, float], ...]

    @cached_property
    def _nodes(self) -> list[dict]:
        """Per run and group, the quadrature's nodes: their shares of the posterior
        and each factor's weights over its true counts at each node."""
        out = []
        for factors in self.runs:
            groups = {}
            for g in sorted({f.group for f in factors if f.group >= 0}):
                members = [m for m, f in enumerate(factors) if f.group == g]
                groups[g] = _group_nodes(factors, members, self.shapes[g])
            out.append(groups)
        return out

    def moments(self) -> tuple[float, float]:
        """The exact mean and standard deviation of ``P``."""
        mean = self.power_mean(1.0)
        return mean, math.sqrt(max(self.power_mean(2.0) - mean**2, 0.0))

    def power_mean(self, k: float) -> float:
        """``E[P^k]``, exactly: per node the factors' Beta moments ``B(a + k, b) / B(a,
        b)`` mixed over their true counts, the nodes' shares summed."""

        def moment(a, b):
            return np.exp(special.betaln(a + k, b) - special.betaln(a, b))

        runs = []
        for factors, groups in zip(self.runs, self._nodes, strict=True):
            value = math.prod(float(moment(*f.shapes)[0]) for f in factors if f.group < 0)
            for nodes in groups.values():
                at = nodes["share"]
                for m, t, w in zip(nodes["members"], nodes["true"], nodes["weights"], strict=True):
                    at = at * (w @ moment(*(x[t] for x in factors[m].shapes)))
                value *= float(at.sum())
            runs.append(value)
        return float(np.mean(runs))

    # ------------------------------------------------------------------ the law of X

    def summary(self, probs, x_points) -> ProductSummary:
        """Quantiles of ``X = -log P`` at ``probs`` and ``P(X <= x)`` at ``x_points``:
        the step halves until two lattices agree within ``QUANTILE_TOLERANCE`` (in ``X``
        above 1, relative below), a low quantile on lattices capped just above it."""
        probs = np.asarray(probs, dtype=float)
        x_points = np.asarray(x_points, dtype=float)
        step = self._first_step()
        while self._points(step, np.inf) > MAX_POINTS:
            step *= 2
        xq = self._law(step, np.inf).quantile(probs)
        error = np.abs(xq - self._law(2 * step, np.inf).quantile(probs))
        for _ in range(MAX_HALVINGS):
            if np.all(error <= QUANTILE_TOLERANCE * np.minimum(1.0, xq)):
                break
            if self._points(step / 2, np.inf) > MAX_POINTS:
                break
            step /= 2
            finer = self._law(step, np.inf).quantile(probs)
            error, xq = np.abs(finer - xq), finer
        for n, q in enumerate(probs):  # a quantile near X = 0: relative to it
            if q < 0.5 and error[n] > QUANTILE_TOLERANCE * min(1.0, xq[n]):
                xq[n], error[n] = self._capped_quantile(q, xq[n], step)
        x_cdf = np.array([self._capped_cdf(x, step) for x in x_points])
        scaled = error / np.maximum(np.minimum(1.0, xq), SMALLEST_X)
        return ProductSummary(xq, x_cdf, float(np.max(scaled, initial=0.0)), "graded grid")

    def _capped_quantile(self, q, x, step):
        """The ``q`` quantile near ``x``, on lattices capped just above it (a quantile in
        the first lattice cell, mass piled at ``P = 1``, is as close to 0 as the finest
        step allows)."""
        x, error = max(x, 0.0), step
        for _ in range(MAX_HALVINGS):
            cap = 1.5 * x + 4 * step
            step = min(step, cap / 256)
            if self._points(step, cap) > MAX_POINTS:
                break
            finer = max(float(self._law(step, cap).quantile(np.array([q]))[0]), 0.0)
            error, x = abs(finer - x), finer
            if error <= QUANTILE_TOLERANCE * min(1.0, x):
                break
            step /= 2
        return x, error

    def _capped_cdf(self, x, step):
        if x < 0:
            return 0.0
        cap = x + 4 * step
        return float(self._law(step, cap).cdf(x))

    def _first_step(self) -> float:
        """A sixteenth of the narrowest spread in ``X`` of any factor's heaviest true
        count."""
        spreads = []
        for run in self._shapes_in_use:
            for a, b, most in run:
                heaviest = np.argmax(np.where(b > 0, most, -1.0))
                if b[heaviest] > 0:
                    a, b = a[heaviest], b[heaviest]
                    spreads.append(math.sqrt(special.polygamma(1, a) - special.polygamma(1, a + b)))
        return min(spreads, default=1.0) / 16

    @cached_property
    def _shapes_in_use(self) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """Per run and factor, the Beta shapes of the true counts that carry weight, and
        the largest share of the posterior each has at any node."""
        out = []
        for factors, groups in zip(self.runs, self._nodes, strict=True):
            shapes = [(*f.shapes, np.ones(1)) for f in factors]
            for nodes in groups.values():
                for m, t, most in zip(nodes["members"], nodes["true"], nodes["most"], strict=True):
                    shapes[m] = (*(x[t] for x in factors[m].shapes), most)
            out.append(shapes)
        return out

    @cached_property
    def _full_tops(self) -> list[list[float]]:
        """Per run and factor, where the last ``TAIL_MASS`` of its ``X`` begins: each
        true count's Beta at the tail its share leaves (0: a point mass at 1)."""
        return [[_top(a, b, TAIL_MASS / most) for a, b, most in run] for run in self._shapes_in_use]

    def _tops(self, cap) -> list[list[float]]:
        """Per run and factor, the top of its lattice: ``cap`` or ``_full_tops``."""
        return [[min(cap, top) for top in run] for run in self._full_tops]

    def _points(self, step, cap) -> int:
        return max(sum(int(top / step) + 2 for top in tops) for tops in self._tops(cap))

    def _law(self, step, cap) -> GridCdf:
        """The lattice law of ``X`` at ``step`` (points ``0, step, ...``; below ``cap``
        where it is finite, the mass above it left off)."""
        tops = self._tops(cap)
        size = fft.next_fast_len(
            max(sum(int(t / step) + 2 for t in run) for run in tops), real=True
        )
        total = np.zeros(size // 2 + 1, dtype=complex)
        runs = zip(self.runs, self._nodes, self._shapes_in_use, tops, strict=True)
        for factors, groups, shapes, run_tops in runs:
            spectrum = np.ones(size // 2 + 1, dtype=complex)
            for f, ab, top in zip(factors, shapes, run_tops, strict=True):
                if f.group < 0:
                    spectrum *= _spectra(*ab[:2], step, top, size)[0]
            for nodes in groups.values():
                spectra = [
                    _spectra(*shapes[m][:2], step, run_tops[m], size) for m in nodes["members"]
                ]
                mixed = np.zeros_like(spectrum)
                for start in range(0, nodes["share"].size, NODE_CHUNK):
                    part = slice(start, start + NODE_CHUNK)
                    chunk = nodes["share"][part, None].astype(complex)
                    for w, s in zip(nodes["weights"], spectra, strict=True):
                        chunk = chunk * (w[part] @ s)
                    mixed += chunk.sum(axis=0)
                spectrum *= mixed
            total += spectrum / len(self.runs)
        mass = fft.irfft(total, size)
        limit = size if np.isinf(cap) else int(cap / step) + 1
        mass = np.maximum(mass[:limit], 0.0)
        lower = np.concatenate([[0.0], np.cumsum(mass)])
        upper = np.concatenate([np.cumsum(mass[::-1])[::-1], [0.0]])
        if np.isfinite(cap):  # the mass above the cap: what the sum below leaves
            upper = np.maximum(1.0 - lower, 0.0)
        return GridCdf(0.0, step, np.minimum(lower, 1.0), np.minimum(upper, 1.0), np.isfinite(cap))

    # ------------------------------------------------------------------ draws

    def log_draws(self, size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``size`` exact draws: ``log_factors`` (draws x runs x factors, NaN where a run
        has no such factor), ``log_p`` (``log P``, a run drawn uniformly per draw), and
        ``q``, each graded factor's chance to be graded a success (``_graded_chance``)."""
        width = max(len(factors) for factors in self.runs)
        log_factors = np.full((size, len(self.runs), width), np.nan)
        grader = np.full((2, size, len(self.runs), len(self.shapes)), np.nan)
        for r, factors in enumerate(self.runs):
            true = np.zeros((size, len(factors)), dtype=np.int64)
            for m, f in enumerate(factors):
                if f.group < 0:
                    true[:, m] = f.graded
            for g in sorted({f.group for f in factors if f.group >= 0}):
                at = [m for m, f in enumerate(factors) if f.group == g]
                drawn, se, sp = _group_draws([factors[m] for m in at], self.shapes[g], size, rng)
                true[:, at] = drawn
                grader[0, :, r, g], grader[1, :, r, g] = se, sp
            for m, f in enumerate(factors):
                a, b = f.prior[0] + true[:, m], f.prior[1] + f.runs - true[:, m]
                log_factors[:, r, m] = _log_draws(a, b, rng)
        pick = rng.integers(len(self.runs), size=size)
        log_p = np.nansum(log_factors[np.arange(size), pick], axis=-1)
        return {
            "log_factors": log_factors,
            "log_p": log_p,
            "q": self._graded_chance(log_factors, grader),
        }

    def _graded_chance(self, log_factors, grader) -> np.ndarray:
        """Each graded factor's chance that a run is graded a success, ``se p + (1 - sp)
        (1 - p)``, per draw (NaN where a factor is trusted or absent)."""
        q = np.full(log_factors.shape, np.nan)
        for r, factors in enumerate(self.runs):
            for m, f in enumerate(factors):
                if f.group >= 0:
                    p, (se, sp) = np.exp(log_factors[:, r, m]), grader[:, :, r, f.group]
                    q[:, r, m] = graded_success(p, se, sp)
        return q

    def left_out(self, run: int, factor: int) -> float:
        """``log P(k | the run's other counts)`` of the ``factor``-th count of ``run``:
        its leave-one-out predictive, the grader's audit and the run's other counts kept
        (a ratio of two ``log_evidence``)."""
        factors = self.runs[run]
        rest = factors[:factor] + factors[factor + 1 :]
        return self.log_evidence(factors) - self.log_evidence(rest)

    def log_evidence(self, factors) -> float:
        """``log P(graded counts of factors)`` under the priors and the graders' Betas."""
        total = 0.0
        for f in factors:
            if f.group < 0:
                a, b = f.prior
                k, n = f.graded, f.runs
                total += stats.betabinom.logpmf(k, n, a, b)
        for g in sorted({f.group for f in factors if f.group >= 0}):
            members = [f for f in factors if f.group == g]
            final, _ = _forward(members, self.shapes[g])
            total += float(special.logsumexp(final))
        return total


def graded_product(fields: np.ndarray, prior: tuple[float, float]) -> GradedProduct:
    """A ``GradedProduct`` from a pair's ``graded_factors`` (runs x factors x
    ``bayes_eval.exact.builders.GRADED_FIELDS``, NaN where absent) under ``prior``."""
    shapes, runs = {}, []
    for run in fields:
        factors = []
        for k, n, group, *betas in run[~np.isnan(run[:, 0])]:
            if group >= 0:
                shapes[int(group)] = tuple(betas)
            factors.append(GradedFactor(prior, int(k), int(n), int(group)))
        if factors:
            runs.append(tuple(factors))
    return GradedProduct(tuple(runs), tuple(shapes[g] for g in range(len(shapes))))


def _log_draws(a, b, rng):
    """``log p`` for ``p ~ Beta(a, b)`` per element (0 where ``b = 0``: a point mass)."""
    out = np.zeros(np.shape(a))
    proper = b > 0
    if np.any(proper):
        out[proper] = log_beta_draws(a[proper], b[proper], (1,), rng)[0]
    return out


def _top(a, b, tail) -> float:
    """The largest ``X`` above which Betas ``a``, ``b`` leave their ``tail`` (each at
    most a half; 0: all point masses at 1)."""
    proper = b > 0
    if not np.any(proper):
        return 0.0
    return float(np.max(x_isf(a[proper], b[proper], np.minimum(tail, 0.5)[proper])))


def _spectra(a, b, step, top, size) -> np.ndarray:
    """The FFT of the bin masses of each ``Beta(a, b)``'s ``X`` on the lattice, one row
    each: the mass of ``[(i - 1/2) step, (i + 1/2) step)`` at point ``i`` (``[0, step /
    2)`` at 0), the rest above ``top`` at the last point."""
    if np.all(b == 0):  # trusted, every run a success under Haldane's prior: P = 1
        return np.ones((1, size // 2 + 1), dtype=complex)
    points = int(top / step) + 1
    edges = step * (np.arange(points) + 0.5)
    cdf, sf = x_tails(a[:, None], b[:, None], edges[None, :])
    mass = np.empty((a.size, points + 1))
    mass[:, 0] = cdf[:, 0]
    mass[:, 1:-1] = np.where(cdf[:, 1:] <= 0.5, np.diff(cdf, axis=1), -np.diff(sf, axis=1))
    mass[:, -1] = sf[:, -1]
    return fft.rfft(np.maximum(mass, 0.0), size, axis=1)


def _jacobi_nodes(alpha: float, beta: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Jacobi nodes in ``[0, 1]`` and weights (summing to 1) for the ``Beta(alpha,
    beta)`` density, by Golub-Welsch (scipy's own overflow for audits of thousands)."""
    a, b = beta - 1.0, alpha - 1.0  # weight (1 - x)^a (1 + x)^b on [-1, 1]
    n = np.arange(count, dtype=float)
    s = 2 * n + a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        diagonal = (b**2 - a**2) / (s * (s + 2))
    diagonal[0] = (b - a) / (a + b + 2)
    m = n[1:]
    s = 2 * m + a + b
    off = np.sqrt(4 * m * (m + a) * (m + b) * (m + a + b) / (s**2 * (s + 1) * (s - 1)))
    x, vectors = linalg.eigh_tridiagonal(diagonal, off)
    weights = vectors[0] ** 2
    return (1.0 + x) / 2.0, weights / weights.sum()


def _group_nodes(factors, members: list[int], shapes) -> dict:
    """The quadrature over one grader's ``se`` and ``sp``, exact for the runs of its
    ``members`` (positions in ``factors``): each node's share of the posterior, and each
    member's true counts that carry weight (``kept``) and its weights over them there."""
    s1, s2, c1, c2 = shapes
    count = sum(factors[m].runs for m in members) // 2 + 2
    se, w_se = _jacobi_nodes(s1, s2, count)
    sp, w_sp = _jacobi_nodes(c1, c2, count)
    log_share = np.log(np.outer(w_se, w_sp)).ravel()
    weights = []
    for f in (factors[m] for m in members):
        log_u = f.log_weight[None, :] + _log_graded(f, se, sp)
        total = special.logsumexp(log_u, axis=1)
        weights.append(log_u - total[:, None])
        log_share = log_share + total
    kept = log_share >= log_share.max() + math.log(NEGLIGIBLE_NODE)
    share = np.exp(log_share[kept] - log_share[kept].max())
    weights = [np.exp(w[kept]) for w in weights]
    share = share / share.sum()
    most = [(share[:, None] * w).max(axis=0) for w in weights]
    true = [np.flatnonzero(x >= NEGLIGIBLE_TRUE) for x in most]
    return {
        "share": share,
        "members": members,
        "true": true,
        "most": [x[t] for x, t in zip(most, true, strict=True)],
        "weights": [w[:, t] for w, t in zip(weights, true, strict=True)],
    }


def _log_graded(f: GradedFactor, se, sp) -> np.ndarray:
    """``log P(k graded | t true of n, se, sp)`` at every pair of ``se`` and ``sp``
    nodes (their grid, flattened, ``se`` first) x true counts: ``j`` detected of the
    ``t`` true successes, ``k - j`` false alarms among the ``n - t`` failures."""
    k, n = f.graded, f.runs
    t = np.arange(n + 1)[None, :, None]
    j = np.arange(k + 1)[None, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        detected = _log_binomial(j, t, se[:, None, None])
        alarms = _log_binomial(k - j, n - t, 1.0 - sp[:, None, None])
    # summed over j in linear space, each side scaled by its largest term
    top_se = np.max(detected, axis=(1, 2), keepdims=True)
    top_sp = np.max(alarms, axis=(1, 2), keepdims=True)
    with np.errstate(divide="ignore"):
        total = np.log(
            np.einsum("atj,btj->abt", np.exp(detected - top_se), np.exp(alarms - top_sp))
        )
    return (total + top_se[:, :, 0][:, None] + top_sp[:, :, 0][None]).reshape(-1, n + 1)


def _log_binomial(x, m, p):
    """``log Binomial(x; m, p)``, -inf where ``x`` is not in ``0..m``."""
    possible = (x >= 0) & (x <= m)
    x, m = np.where(possible, x, 0), np.where(possible, m, 0)
    value = log_choose(m, x) + special.xlogy(x, p) + special.xlog1py(m - x, -p)
    return np.where(possible, value, -np.inf)


def _transitions(f: GradedFactor) -> np.ndarray:
    """``log`` of factor ``f``'s weight of ``j`` detected and ``t`` true successes,
    ``(k + 1) x (n + 1)``, with ``se`` and ``sp`` left for the totals."""
    k, n = f.graded, f.runs
    j = np.arange(k + 1)[:, None]
    t = np.arange(n + 1)[None, :]
    possible = (j <= t) & (k - j <= n - t)
    with np.errstate(invalid="ignore"):
        value = f.log_weight[None, :] + log_choose(t, j) + log_choose(n - t, k - j)
    return np.where(possible, value, -np.inf)


def _forward(factors: list[GradedFactor], shapes):
    """Forward filtering over the totals ``J`` (detected) and ``T`` (true): the log
    weight of each ``(J, T)`` with ``se`` and ``sp`` integrated out (their Beta
    integrals), and the filter's tables for backward sampling."""
    s1, s2, c1, c2 = shapes
    tables = [np.zeros((1, 1))]
    for f in factors:
        before = tables[-1]
        step = _transitions(f)
        after = np.full((before.shape[0] + f.graded, before.shape[1] + f.runs), -np.inf)
        for j in range(f.graded + 1):
            for t in range(f.runs + 1):
                if np.isfinite(step[j, t]):
                    window = after[j : j + before.shape[0], t : t + before.shape[1]]
                    np.logaddexp(window, before + step[j, t], out=window)
        tables.append(after)
    k = sum(f.graded for f in factors)
    n = sum(f.runs for f in factors)
    big_j = np.arange(k + 1)[:, None]
    big_t = np.arange(n + 1)[None, :]
    with np.errstate(invalid="ignore"):
        grader = (
            special.betaln(s1 + big_j, s2 + big_t - big_j)
            - special.betaln(s1, s2)
            + special.betaln(c1 + (n - big_t) - (k - big_j), c2 + k - big_j)
            - special.betaln(c1, c2)
        )
    with np.errstate(invalid="ignore"):
        final = np.where(np.isfinite(tables[-1]), tables[-1] + grader, -np.inf)
    return np.where(np.isnan(final), -np.inf, final), tables


def _group_draws(factors, shapes, size, rng):
    """Exact draws of one grader's factors' true counts (draws x factors) and of its
    ``se`` and ``sp``: the totals from their posterior, then each factor's share of
    them backwards (forward filtering, backward sampling)."""
    s1, s2, c1, c2 = shapes
    final, tables = _forward(factors, shapes)
    flat = np.exp(final.ravel() - final.max())
    pick = rng.choice(flat.size, size=size, p=flat / flat.sum())
    big_j, big_t = np.unravel_index(pick, final.shape)
    k = sum(f.graded for f in factors)
    n = sum(f.runs for f in factors)
    se = rng.beta(s1 + big_j, s2 + big_t - big_j)
    sp = rng.beta(c1 + (n - big_t) - (k - big_j), c2 + k - big_j)
    true = np.empty((size, len(factors)), dtype=np.int64)
    left_j, left_t = big_j.copy(), big_t.copy()
    for m in range(len(factors) - 1, -1, -1):
        f, before = factors[m], tables[m]
        step = _transitions(f)
        j = np.arange(f.graded + 1)[None, :, None]
        t = np.arange(f.runs + 1)[None, None, :]
        rows, cols = left_j[:, None, None] - j, left_t[:, None, None] - t
        inside = (rows >= 0) & (cols >= 0) & (rows < before.shape[0]) & (cols < before.shape[1])
        log_w = np.where(
            inside,
            before[np.clip(rows, 0, before.shape[0] - 1), np.clip(cols, 0, before.shape[1] - 1)]
            + step[None],
            -np.inf,
        ).reshape(size, -1)
        w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
        cumulative = np.cumsum(w, axis=1)
        u = rng.random(size)[:, None] * cumulative[:, -1:]
        choice = np.minimum((cumulative < u).sum(axis=1), w.shape[1] - 1)
        chosen_j, chosen_t = np.unravel_index(choice, (f.graded + 1, f.runs + 1))
        true[:, m] = chosen_t
        left_j -= chosen_j
        left_t -= chosen_t
    return true, se, sp
