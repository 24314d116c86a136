"""The grid: exact bin masses of each factor's ``-log p``, one convolution, refined until
two grids agree.

Each factor's mass per bin comes from the Beta CDF and survival function (singular
densities are no problem), placed at the bins' centres (for a factor piled at
``X = 0``, split between each bin's edges so that its mean is kept) and convolved by
FFT. The step is halved until two grids agree; far tails are recomputed on grids tilted
to their saddlepoint, points near ``X = 0`` on grids capped just above them, and points
closer still from the leading law of the lower tail (``SmallXLaw``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, reduce

import numpy as np
from scipy import fft, special

from bayes_eval.exact.factors import (
    GRID_TAIL_MASS,
    QUANTILE_TOLERANCE,
    ProductSummary,
    x_isf,
    x_ppf,
    x_tails,
)
from bayes_eval.exact.saddlepoint import cgf

__all__ = ["GRID_SMALLEST_X", "GridCdf", "grid_summary"]

# Bins of a factor piled at X = 0 (b < 1), from its lowest, whose mean is computed to split
# their mass between their edges (the later ones are split in halves).
GRID_EXACT_BINS = 64
# Tail probability below which the grid is recomputed tilted to the point's saddlepoint.
GRID_TILT_BELOW = 1e-6
# A quantile near X = 0 is recomputed on grids capped just above it, each this many
# bins, at most GRID_ZOOMS times (each zoom narrows the range about a thousandfold).
GRID_ZOOM_POINTS = 4096
GRID_ZOOMS = 60
# Below this X (P = 1 to 295 digits) the error of a quantile is absolute, 1e-300.
GRID_SMALLEST_X = 1e-296
# Most grid points one product may use; past it the grid step grows and the
# achieved tolerance (always reported) loosens.
GRID_MAX_POINTS = 2**21
# A partial convolution whose largest value passes this is divided by it (see _convolve_all).
GRID_RESCALE_ABOVE = 1e150
# Factors convolved in sequence before their sums are convolved in a balanced tree.
GRID_SEQUENTIAL_FACTORS = 8
# Largest -log P the grid represents (P = exp(-2000), far below any float's use).
GRID_MAX_X = 2000.0


@dataclass(frozen=True)
class GridCdf:
    """Piecewise-linear CDF of a discretised sum, summed from both ends.

    Mass ``j`` sits at ``start + j * step``, spread evenly over one step around it, so
    the CDF is linear between the nodes ``start + (j -+ 1/2) step``. ``lower`` holds
    the CDF at the nodes and ``upper`` the survival function, each summed from its own
    end so that both tails keep their relative precision. A grid capped below the
    top of the support (``capped``) holds the lower tail only.
    """

    start: float
    step: float
    lower: np.ndarray
    upper: np.ndarray
    capped: bool = False

    @cached_property
    def nodes(self):
        """Abscissae of the piecewise-linear CDF."""
        return self.start + self.step * (np.arange(self.lower.size) - 0.5)

    def cdf(self, x):
        return np.interp(x, self.nodes, self.lower)

    def sf(self, x):
        return np.interp(x, self.nodes, self.upper)

    def quantile(self, q):
        """Quantiles, each read from the sum of its own tail."""
        q = np.asarray(q, dtype=float)
        nodes = self.nodes
        from_below = _invert(nodes, self.lower, q)
        from_above = _invert(nodes, -self.upper, -(1.0 - q))
        return np.where((q < 0.5) | self.capped, from_below, from_above)


def _invert(nodes, values, target):
    """Where the increasing piecewise-linear ``values`` at ``nodes`` reach ``target``."""
    j = np.clip(np.searchsorted(values, target, side="left"), 1, values.size - 1)
    rise = values[j] - values[j - 1]
    frac = np.where(rise > 0, (target - values[j - 1]) / np.where(rise > 0, rise, 1.0), 1.0)
    return nodes[j - 1] + np.clip(frac, 0.0, 1.0) * (nodes[1] - nodes[0])


def _supports(a, b):
    """Per factor, the range of ``-log p`` outside which ``GRID_TAIL_MASS`` lies."""
    lo = x_ppf(a, b, GRID_TAIL_MASS)
    hi = np.minimum(x_isf(a, b, GRID_TAIL_MASS), GRID_MAX_X)
    return lo, np.maximum(hi, lo)


def _bin_masses(a, b, lo, step, n_bins, known, *, tails=None):
    """Exact masses of bins ``[lo + k step, lo + (k + 1) step]`` of ``-log p``.

    Each mass is a difference of the CDF below the median and of the survival function
    above it, so masses far in either tail keep their digits; the masses outside the
    bins join the first and the last bin. ``known`` holds the previous call's
    ``(step, cdf, sf)`` at the bin edges: a call with half the step computes only the
    new edges. ``tails`` (a dict, or None) keeps the factor's CDF and survival function
    at the edges of its bins at one step, for the grids of one product capped at
    different points: an edge computed before is read, not computed again (the same
    numbers). Returns the masses and the new ``known``.
    """
    key = (a, b, lo, step)
    have = None if tails is None else tails.get(key)
    if have is not None:
        cdf, sf = have[0][: n_bins + 1], have[1][: n_bins + 1]
        if cdf.size < n_bins + 1:  # the edges past those computed before
            more = x_tails(a, b, lo + step * np.arange(cdf.size, n_bins + 1))
            cdf, sf = np.concatenate([cdf, more[0]]), np.concatenate([sf, more[1]])
    elif known is not None and known[0] == 2 * step and known[1].size >= n_bins // 2 + 1:
        fresh = lo + step * np.arange(1, n_bins + 1, 2)
        cdf, sf = np.empty(n_bins + 1), np.empty(n_bins + 1)
        cdf[0::2], sf[0::2] = known[1][: n_bins // 2 + 1], known[2][: n_bins // 2 + 1]
        cdf[1::2], sf[1::2] = x_tails(a, b, fresh)
    else:
        cdf, sf = x_tails(a, b, lo + step * np.arange(n_bins + 1))
    if tails is not None and (have is None or have[0].size < cdf.size):
        if any(other[3] != step for other in tails):  # one step's edges kept at a time
            tails.clear()
        tails[key] = (cdf, sf)
    mass = np.where(cdf[1:] <= 0.5, np.diff(cdf), -np.diff(sf))
    mass[0] += cdf[0]
    mass[-1] += sf[-1]
    return np.maximum(mass, 0.0), (step, cdf, sf)


def _grid_cdf(
    a, b, step, support, *, x_cap=np.inf, edges=None, tilt=0.0, lattices=None, tails=None
) -> GridCdf:
    """Discretise each factor's exact bin masses and convolve.

    A factor's bin masses sit at the bins' centres, ``lo + (k + 1/2) step``, except
    where its mass piles at ``X = 0`` (``b < 1``). There a bin's mean lies well below
    its centre, and centres would bias the sum by a fraction of a step (a bias of first
    order in the step); such a factor's lattice is its bin edges ``lo + k step``
    instead, each bin's mass split between its two edges so that the bin's mean is kept
    (``_upper_edge_shares``). Centres elsewhere keep the smaller second-order error of
    the midpoint rule.

    ``support`` is ``_supports(a, b)``; ``edges`` (a list, one entry per factor) keeps
    the factors' CDFs at their bin edges between calls. Below ``x_cap`` the grid is
    exact without the mass above it, so a capped grid is built only up to there.
    ``tilt`` (an ``s`` of the cumulant generating function) convolves the masses
    times ``exp(tilt x)`` and divides it out after: the sum of the FFT's rounding
    errors then sits where ``exp(tilt x) f(x)`` is largest, near the saddlepoint, so
    a tail of 1e-12 there keeps its relative precision (on the tilted side only).
    ``lattices`` (a dict shared by the components of one grid) holds each factor's
    lattice, so that factors repeated within or across components (every step at
    10/10) are discretised once; ``tails`` keeps their CDFs at their bin edges for other
    grids of the product at the same step (``_bin_masses``).
    """
    lo, hi = support
    capped = bool(np.isfinite(x_cap))
    # Mass of factor j above x_cap - sum(other lows) cannot matter below x_cap.
    hi = np.maximum(np.minimum(hi, x_cap - (lo.sum() - lo)), lo)
    edges = [None] * a.size if edges is None else edges
    lattices = {} if lattices is None else lattices
    masses, scale, start = [], 0.0, 0.0
    for j, key in enumerate(zip(a, b, lo, hi, strict=True)):
        if (key, step, capped) not in lattices:
            lattices[key, step, capped], edges[j] = _lattice(
                *key, step, capped, edges[j], tails=tails
            )
        mass, first = lattices[key, step, capped]
        start += first
        if tilt:
            with np.errstate(divide="ignore"):
                log_mass = np.log(np.maximum(mass, 0.0)) + tilt * (
                    first + step * np.arange(mass.size)
                )
            top = np.max(log_mass)
            if np.isfinite(top):  # (a factor without mass here leaves an empty sum)
                mass, scale = np.exp(log_mass - top), scale + top
        masses.append(mass)
    total, rescaled = _convolve_all(masses)
    total, scale = np.maximum(total, 0.0), scale + rescaled
    if tilt:
        exponent = scale - tilt * (start + step * np.arange(total.size))
        total = total * np.exp(np.minimum(exponent, 600.0))
    lower = np.concatenate([[0.0], np.cumsum(total)])
    upper = np.concatenate([np.cumsum(total[::-1])[::-1], [0.0]])
    return GridCdf(start, step, np.minimum(lower, 1.0), np.minimum(upper, 1.0), capped)


def _lattice(a, b, lo, hi, step, capped, known, *, tails=None):
    """One factor's masses on its lattice and the lattice's first point, and the new
    ``known`` of ``_bin_masses``: at the bins' centres, or for a factor piled at ``X =
    0`` (``b < 1``) split between the bins' edges (see ``_grid_cdf``)."""
    n_bins = max(1, int(np.ceil((hi - lo) / step)))
    mass, known = _bin_masses(a, b, lo, step, n_bins, known, tails=tails)
    if capped:
        mass[-1] -= known[2][-1]  # the mass above the cap is not in the grid
    if b >= 1:
        return (mass, lo + 0.5 * step), known
    share = _upper_edge_shares(a, b, lo, step, n_bins)
    split = np.zeros(n_bins + 1)
    split[:-1] += mass * (1.0 - share)
    split[1:] += mass * share
    return (split, lo), known


_GAUSS_NODES, _GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(24)
_GAUSS_NODES, _GAUSS_WEIGHTS = 0.5 * (_GAUSS_NODES + 1.0), 0.5 * _GAUSS_WEIGHTS  # on [0, 1]


def _upper_edge_shares(a, b, lo, step, n_bins):
    """For a factor whose mass piles at ``X = 0`` (``b < 1``), per bin ``[lo + k step, lo
    + (k + 1) step]`` of ``-log p``, the share of its mass that goes to the upper edge
    so that the bin's mean is kept: ``(E[X | bin] - lo - k step) / step``.

    The density ``~ x^(b - 1)`` puts a bin's mean well below its centre near 0, so the
    first ``GRID_EXACT_BINS`` bins are computed: the share is ``int_bin (F(top) - F(x))
    dx / (step mass)``, by Gauss-Legendre (the first bin's from 0 in ``x = top s^k``,
    ``k = 1 / (1 + b)``, where ``F(x) ~ C x^b`` makes the integrand flat). The mass
    below ``lo`` (``GRID_TAIL_MASS``) counts as at ``lo``. The other bins are halved:
    their bias is of second order in the step.
    """
    shares = np.full(n_bins, 0.5)
    exact = min(n_bins, GRID_EXACT_BINS)
    k = 1.0 / (1.0 + b)
    tops = lo + step * np.arange(1, exact + 1)
    bottoms = tops - step
    bottoms[0] = 0.0
    first = np.arange(exact)[:, None] == 0
    s = np.where(first, _GAUSS_NODES**k, _GAUSS_NODES)
    weights = np.where(first, _GAUSS_WEIGHTS * k * _GAUSS_NODES ** (k - 1), _GAUSS_WEIGHTS)
    x = bottoms[:, None] + (tops - bottoms)[:, None] * s
    cdf, sf = x_tails(a, b, np.concatenate([x.ravel(), tops, bottoms]))
    n = x.size
    low_side = cdf[n : n + exact] <= 0.5  # differences from the side that keeps digits
    gap = np.where(
        low_side[:, None],
        cdf[n : n + exact, None] - cdf[:n].reshape(x.shape),
        sf[:n].reshape(x.shape) - sf[n : n + exact, None],
    )
    mass = np.where(
        low_side, cdf[n : n + exact] - cdf[n + exact :], sf[n + exact :] - sf[n : n + exact]
    )
    mass[0] = cdf[n] if low_side[0] else 1.0 - sf[n]  # the first bin holds all below lo
    with np.errstate(divide="ignore", invalid="ignore"):
        above_bottom = np.sum(weights * gap, axis=1) * (tops - bottoms) / mass  # E[X - bottom]
        share = (above_bottom - (lo + step * np.arange(exact) - bottoms)) / step
    shares[:exact] = np.where(mass > 0, np.clip(share, 0.0, 1.0), 0.5)
    return shares


def _convolve_all(masses: list) -> tuple[np.ndarray, float]:
    """The convolution of all ``masses``: in sequence within runs of
    ``GRID_SEQUENTIAL_FACTORS``, then the runs' sums pairwise in a balanced tree. Each
    level of the tree transforms about the length of the result, so that a product of
    ``M`` factors costs about ``log2 M`` such levels, not ``M`` transforms of the growing
    sum (minutes for a few hundred factors). A product of at most that many factors is
    convolved in sequence, as before the tree, to the same bits.

    Returns the convolution and the log of the factor it was divided by: a partial sum
    whose largest value passes ``GRID_RESCALE_ABOVE`` is divided by it (tilted masses,
    each at most 1 at its peak, grow with every factor: a few hundred overflowed)."""
    log_scale = 0.0

    def convolve(x, y):
        nonlocal log_scale
        result = _convolve(x, y)
        top = float(np.max(result))
        if top > GRID_RESCALE_ABOVE:
            result, log_scale = result / top, log_scale + math.log(top)
        return result

    masses = [
        reduce(convolve, masses[i : i + GRID_SEQUENTIAL_FACTORS])
        for i in range(0, len(masses), GRID_SEQUENTIAL_FACTORS)
    ]
    while len(masses) > 1:
        pairs = [convolve(x, y) for x, y in zip(masses[0::2], masses[1::2], strict=False)]
        masses = pairs + masses[len(pairs) * 2 :]
    return masses[0], log_scale


def _convolve(x, y):
    """Full linear convolution of two mass vectors by FFT."""
    size = x.size + y.size - 1
    n = fft.next_fast_len(size, real=True)
    return fft.irfft(fft.rfft(x, n) * fft.rfft(y, n), n)[:size]


def grid_summary(factors, probs, x_points):
    """Quantiles and CDF values on grids refined until successive ones agree.

    The first step is a quarter of the narrowest factor's spread; each pass halves
    it, until two passes agree within ``QUANTILE_TOLERANCE`` or the step is so fine
    that ``_discretisation_bound`` meets it by itself. Quantiles in a far tail or close
    to 0, and CDF values there, are then recomputed by ``_Grid``. The reported error,
    in ``X`` where ``X >= 1`` and relative to ``X`` below, is per quantile the smaller
    of the last change (the discretisation's bias is of second order in the step, so
    the change from the step before is about three times the error left) and that
    bound.
    """
    proper = [(a, b) for a, b in factors if a.size]
    m = max((a.size for a, _ in proper), default=1)
    supports = [_supports(a, b) if a.size else None for a, b in factors]
    spans = [np.sum(hi - lo) for lo, hi in filter(None, supports)]
    spread = min(
        float(np.min(np.sqrt(special.polygamma(1, a) - special.polygamma(1, a + b))))
        for a, b in proper
    )
    coarsest = max(spans, default=0.0) / GRID_MAX_POINTS
    guaranteed = _step_within(QUANTILE_TOLERANCE, m)
    step = max(spread / 4, coarsest)
    edges = [[None] * a.size for a, _ in factors]
    cdfs, xq = _grid_pass(factors, supports, step, probs, edges)
    central = np.minimum(probs, 1.0 - probs) >= GRID_TILT_BELOW  # tails: polished below
    previous = None
    while True:
        if step <= max(guaranteed, coarsest):
            errors = np.full(probs.shape, _discretisation_bound(m, step))
            break
        step = max(step / 2, coarsest)
        finer, fine_xq = _grid_pass(factors, supports, step, probs, edges)
        change = np.abs(fine_xq - xq)
        previous, cdfs, xq = cdfs, finer, fine_xq
        if np.all(change[central] <= QUANTILE_TOLERANCE):
            errors = np.minimum(change, _discretisation_bound(m, step))
            break
    law = _SmallXLaw.of(factors)
    grid = _Grid(factors, supports, m, step, law)
    law_xq, law_errors = (
        (np.zeros(probs.shape), np.full(probs.shape, np.inf))
        if law is None
        else law.quantiles(probs)
    )
    polished = [
        (lx, le) if le <= QUANTILE_TOLERANCE * lx else grid.polish(q, x, e)
        for q, x, e, lx, le in zip(probs, xq, errors, law_xq, law_errors, strict=True)
    ]
    xq = np.array([x for x, _ in polished])
    errors = [e for _, e in polished]
    x_cdf = np.array([grid.cdf_at(x, cdfs, previous) for x in x_points])
    scaled = np.array(errors) / np.maximum(np.minimum(1.0, xq), GRID_SMALLEST_X)
    return ProductSummary(xq, x_cdf, float(np.max(scaled, initial=0.0)), "grid")


@dataclass(frozen=True)
class _SmallXLaw:
    """The leading law of ``P(X <= x)`` near ``X = 0``, exact to double precision there.

    Near 0, ``-log p`` with ``p ~ Beta(a, b)`` has ``P(X <= x) = x^b Gamma(a + b) /
    (Gamma(a) Gamma(b + 1)) (1 + r)``, and a sum of such terms has ``P = K x^B (1 + r)``
    with ``B = sum b`` and ``K = prod Gamma(a + b) / Gamma(a) / Gamma(B + 1)``; an equal
    mixture averages them. The relative remainder ``|r|`` is taken as ``2 x sum (a + b +
    1)`` (each density is ``x^(b - 1)`` times a series whose first term is about
    ``(a + b + 1) x``), so a quantile's error in ``X`` is ``x |r| / B``.
    """

    log_k: np.ndarray
    powers: np.ndarray
    slope: float

    @classmethod
    def of(cls, factors):
        """The law of a product's components, or ``None`` where one is a point mass at 0."""
        if any(a.size == 0 for a, _ in factors):
            return None
        powers = np.array([b.sum() for _, b in factors])
        log_k = np.array(
            [
                np.sum(special.gammaln(a + b) - special.gammaln(a)) - special.gammaln(p + 1.0)
                for (a, b), p in zip(factors, powers, strict=True)
            ]
        )
        return cls(log_k, powers, max(float(np.sum(a + b + 1.0)) for a, b in factors))

    def quantiles(self, probs):
        """Quantiles and their errors in ``X``, by bisection on ``log x``."""
        log_q = np.log(probs) + math.log(self.log_k.size)  # the sum over components is n q
        # The sum lies between its largest term and n times it: the root between theirs.
        lo = np.min((np.log(probs)[:, None] - self.log_k) / self.powers, axis=1)
        hi = np.min((log_q[:, None] - self.log_k) / self.powers, axis=1)
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            below = self._log_sum(mid) < log_q
            moved = np.where(below, mid, lo), np.where(below, hi, mid)
            if np.array_equal(moved[0], lo) and np.array_equal(moved[1], hi):
                break  # a fixed point: every further step would leave it (one component: at once)
            lo, hi = moved
        with np.errstate(over="ignore", under="ignore"):
            x = np.exp(hi)
            return x, x * self.remainder(x) / self.powers.min()

    def cdf(self, x):
        """``P(X <= x)``."""
        return math.exp(float(self._log_sum(np.array([math.log(x)]))[0])) / self.log_k.size

    def remainder(self, x):
        """Bound on the relative error of ``cdf`` at ``x``."""
        return 2.0 * x * self.slope

    def _log_sum(self, log_x):
        return log_sum_exp(self.log_k + self.powers * log_x[:, None])


def log_sum_exp(values: np.ndarray) -> np.ndarray:
    """``scipy.special.logsumexp(values, axis=-1)`` of finite ``values``, operation for
    operation (the largest terms counted apart, the rest summed relative to them), without
    its array-API dispatch, which cost an exact fit of 1,000 tasks most of its time in the
    bisections of ``_SmallXLaw.quantiles``."""
    top = values.max(axis=-1, keepdims=True)
    at_top = values == top
    count = at_top.sum(axis=-1, keepdims=True, dtype=float)
    rest = np.where(at_top, 0.0, np.exp(values - top)).sum(axis=-1, keepdims=True) / count
    return (np.log1p(rest) + np.log(count) + top)[..., 0]


def _discretisation_bound(m, step):
    """Bound on a grid quantile's error in ``X`` from the step alone: each of ``m``
    factors' mass moves at most a step (to an edge of its bin), and the grid's CDF
    spreads each point over one step."""
    return (m + 0.5) * step


def _step_within(error, m):
    """The step at which ``_discretisation_bound`` is ``error``."""
    return error / (m + 0.5)


def _grid_pass(factors, supports, step, probs, edges):
    lattices = {}
    cdfs = [
        _grid_cdf(a, b, step, support, edges=known, lattices=lattices) if a.size else None
        for (a, b), support, known in zip(factors, supports, edges, strict=True)
    ]
    return cdfs, _mixture_quantiles(cdfs, probs)


@dataclass(frozen=True)
class _Grid:
    """One product's factors, for recomputing single quantiles and CDF values; ``tails``
    keeps its factors' CDFs at the bin edges of the last step used (``_bin_masses``), so
    that the grids of several quantiles and CDF values at one step share them."""

    factors: tuple
    supports: list
    m: int
    step: float
    law: _SmallXLaw | None
    tails: dict = field(default_factory=dict, repr=False, compare=False)

    def polish(self, q, x, error):
        """The ``q`` quantile, recomputed where the shared grid cannot claim the tolerance.

        In a far tail (``min(q, 1 - q) < GRID_TILT_BELOW``) the grid is tilted to the
        saddlepoint of the estimate. Where ``error`` exceeds the tolerance (relative to
        ``x`` below 1: mass piled near ``P = 1``), the grid is capped just above ``x``
        unless ``q`` is a far upper tail (then the whole grid is refined): first with
        ``GRID_ZOOM_POINTS`` bins, and while the quantile sits in their first bins its
        position is extrapolated from the CDF's power law there; then with a step fine
        enough for ``_discretisation_bound``. A far upper tail that no affordable step
        bounds so, and a quantile whose step would need more than ``GRID_MAX_POINTS``
        (a product of hundreds of factors: it is computed once at the finest step allowed),
        take their error from the change from a grid of twice the step. Below
        ``GRID_SMALLEST_X`` it stops. Returns the quantile and its error in ``X``.
        """
        tail = min(q, 1.0 - q) < GRID_TILT_BELOW
        from_below = 1.0 - q >= GRID_TILT_BELOW  # a capped grid holds no far upper tail
        step, clamped = self.step, False
        for _ in range(GRID_ZOOMS):
            wanted = QUANTILE_TOLERANCE * min(1.0, x)
            if (error <= wanted and not tail) or x + error < GRID_SMALLEST_X:
                break
            cap = np.inf
            if error > wanted and from_below:
                cap, floor = x + 2 * error, x - error
                final = floor > 0.5 * x
                step = _step_within(wanted * floor / x, self.m) if final else cap / GRID_ZOOM_POINTS
                if step < self._finest(cap):  # finer than GRID_MAX_POINTS allow: once, at it
                    if clamped:
                        break  # as fine as the grid may go: the error stays as reported
                    step, clamped = self._finest(cap), True
            elif error > wanted:  # refine the whole grid (a capped one holds no upper tail)
                finer = max(_step_within(wanted, self.m), self._finest(np.inf))
                if finer >= step and not tail:
                    break  # as fine as the grid may go: the error stays as reported
                step = min(step, finer)
            cdfs = self._cdfs(step, x, cap)
            estimate = x
            x = float(_mixture_quantiles(cdfs, np.array([q]))[0])
            error, tail = _discretisation_bound(self.m, step), False
            if (clamped or not np.isfinite(cap)) and error > QUANTILE_TOLERANCE * min(1.0, x):
                coarse = self._cdfs(2 * step, estimate, cap)
                error = min(error, abs(x - float(_mixture_quantiles(coarse, np.array([q]))[0])))
            if np.isfinite(cap) and x < 64 * step:
                x, error = _power_law_guess(cdfs, q, step, x, error)
        return x, error

    def cdf_at(self, x, cdfs, previous):
        """``P(X <= x)`` from the shared grid ``cdfs``, each tail read from its own end;
        from the small-x law where it is exact enough. Its error in ``X`` is the
        horizontal distance at ``x`` between ``cdfs`` and the grid before, ``previous``
        (as for quantiles; None: the step's bound), or the step's bound where smaller. A
        far tail is recomputed on a grid tilted to ``x`` (capped just above ``x`` for a
        lower tail), and a value whose error exceeds the tolerance on a grid capped there
        with a step that meets it."""
        if (
            self.law is not None
            and 0 < x
            and self.law.remainder(x) <= (QUANTILE_TOLERANCE * self.law.powers.min())
        ):
            return self.law.cdf(x)
        lower, upper = float(_mixture_cdf(cdfs, x)), float(_mixture_sf(cdfs, x))
        error = _discretisation_bound(self.m, self.step)
        if previous is not None:
            back = float(_mixture_quantiles(previous, np.array([lower]))[0])
            error = min(error, abs(back - x))
        wanted = QUANTILE_TOLERANCE * min(1.0, x)
        step = self.step if error <= wanted else _step_within(wanted, self.m)
        if x > 0 and upper < GRID_TILT_BELOW:  # a far upper tail: from above
            return 1.0 - float(_mixture_sf(self._cdfs(step, x, np.inf), x))
        if x > 0 and (lower < GRID_TILT_BELOW or error > wanted):
            return float(_mixture_cdf(self._cdfs(step, x, x + step), x))
        return lower if lower <= 0.5 else 1.0 - upper

    def _finest(self, cap):
        """The finest step that keeps each component's factors together within
        ``GRID_MAX_POINTS`` below ``cap``, as the shared grid does (each factor alone
        within it, as before, let a product of 500 factors take 10 GB)."""
        widths = [np.minimum(hi, cap) - lo for lo, hi in filter(None, self.supports)]
        return max(float(np.sum(w)) for w in widths) / GRID_MAX_POINTS

    def _cdfs(self, step, x, cap):
        """Each component's grid at ``step``, capped at ``cap`` and tilted to ``x`` (a sum
        of many factors, each below the cap, has most of its mass near ``M`` times the
        cap: untilted, a lower tail 1e-19 of it would sink in the FFT's rounding).

        A capped grid is read from below, so it is never tilted upwards: tilted to an
        ``x`` above the mean, the rounding errors of its low end would be scaled up by
        ``exp(s (x - X))`` (1e27 for a bound at level 1 - 1e-6 on Beta(2e5, 600)), and
        its CDF would reach 1 there.
        """
        step = max(step, self._finest(cap))
        upwards = np.inf if np.isinf(cap) else 0.0
        lattices = {}
        return [
            _grid_cdf(
                a,
                b,
                step,
                support,
                x_cap=cap,
                tilt=min(_tilt(a, b, x), upwards),
                lattices=lattices,
                tails=self.tails,
            )
            if a.size
            else None
            for (a, b), support in zip(self.factors, self.supports, strict=True)
        ]


def _power_law_guess(cdfs, q, step, x, error):
    """Where ``q`` sits in a grid's first bins, extrapolate ``F(x) ~ c x^k`` from the
    CDF at 64 and 512 steps (for ``q`` far below the grid's resolution); the guess's
    error is taken as its whole size so that the next zoom caps just above it."""
    far, near = 512 * step, 64 * step
    f_far, f_near = _mixture_cdf(cdfs, far), _mixture_cdf(cdfs, near)
    if not 0 < f_near < f_far or q >= f_near:
        return x, error
    power = math.log(f_far / f_near) / math.log(far / near)
    guess = near * math.exp(math.log(q / f_near) / power)
    return guess, guess


def _tilt(a, b, x):
    """About the saddlepoint ``s`` with ``K'(s) = x`` for one component's factors.

    Bisection on ``log(min a - s)``; it need not be exact, as the tilt only moves
    where the rounding errors sit. Where ``K'`` cannot be evaluated (``s`` within
    rounding of ``min a``) it counts as too large.
    """
    a_min = float(np.min(a))
    lo, hi = math.log(a_min) - 35.0, 35.0  # log(min a - s): K' falls as it grows
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        with np.errstate(all="ignore"):
            slope = cgf(a[None, :], b[None, :], np.array([a_min - math.exp(mid)]))[1][0]
        lo, hi = (mid, hi) if not slope <= x else (lo, mid)
    return a_min - math.exp(0.5 * (lo + hi))


def _mixture_cdf(cdfs, x):
    """CDF of the equal mixture; ``None`` marks a component that is a point mass at X = 0."""
    x = np.asarray(x, dtype=float)
    return sum((x >= 0).astype(float) if c is None else c.cdf(x) for c in cdfs) / len(cdfs)


def _mixture_sf(cdfs, x):
    x = np.asarray(x, dtype=float)
    return sum((x < 0).astype(float) if c is None else c.sf(x) for c in cdfs) / len(cdfs)


def _mixture_quantiles(cdfs, probs):
    """Quantiles of the equal mixture (by bisection when there are several components),
    each found on its own tail."""
    if len(cdfs) == 1 and cdfs[0] is not None:
        return cdfs[0].quantile(probs)
    tops = [c.nodes[-1] for c in cdfs if c is not None]
    lo, hi = np.full(probs.shape, -1.0), np.full(probs.shape, max(tops, default=1.0))
    below = (probs < 0.5) | any(c is not None and c.capped for c in cdfs)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        reached = np.where(
            below, _mixture_cdf(cdfs, mid) >= probs, _mixture_sf(cdfs, mid) <= 1 - probs
        )
        hi, lo = np.where(reached, mid, hi), np.where(reached, lo, mid)
        if np.all(hi - lo < 1e-3 * QUANTILE_TOLERANCE * np.minimum(1.0, hi)):
            break
    return 0.5 * (lo + hi)
