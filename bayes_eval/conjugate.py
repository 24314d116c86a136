"""Exact posteriors: Beta factors, their products and equal mixtures of products.

Every exact estimate in the package is a ``BetaProduct``: the success probability
``P`` is an equal mixture over components (expert-guided runs), each component a
product of independent ``Beta(a, b)`` factors (milestones or steps), times a
constant (point-valued factors). End-to-end is one component with one factor.

All the mathematics works on ``X = -log P`` so that probabilities down to 1e-300,
and bounds within 1e-40 of 1, keep their precision. Means and standard deviations are
closed forms. Quantiles and CDF values are deterministic, never read off Monte Carlo
draws, within ``QUANTILE_TOLERANCE`` in ``X`` where ``X >= 1`` and relative to ``X``
below (a relative error of 1e-4 in both ``P`` and ``1 - P``):

* one factor: scipy's Beta quantiles (exact);
* two or more factors, all shapes >= ``SADDLEPOINT_MIN_SHAPE``, probabilities up to
  ``SADDLEPOINT_MAX_PROB``: the second-order Lugannani-Rice saddlepoint approximation
  of the sum of ``-log p`` (its cumulant generating function is closed-form in
  log-gamma differences), vectorised over tasks, each tail on its own side; within
  ``SADDLEPOINT_ERROR`` of mpmath there (tests/test_exact_reference.py);
* anything else (small or near-singular shapes, mixtures over runs, the far upper
  tail): a grid of the exact bin masses of each ``-log p`` (from the Beta CDF and
  survival function, so singular densities are no problem), at the bins' centres (for
  a factor piled at ``X = 0``, split between each bin's edges so that its mean is
  kept), convolved by FFT. The step is halved
  until two grids agree; far tails are recomputed on grids tilted to their
  saddlepoint, points near ``X = 0`` on grids capped just above them, and points
  closer still from the leading law of the lower tail (``_SmallXLaw``).

A factor with ``b = 0`` (all successes under the Haldane prior) is a point mass at 1
and drops out of the product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import fft, special, stats

__all__ = [
    "BetaProduct",
    "ProductSummary",
    "clopper_pearson_upper",
    "log_beta_draws",
    "summarise_products",
]

# Exact quantiles: largest error in X = -log P where X >= 1, and relative to X below, so
# that the relative error of both P and 1 - P is at most 1e-4 (0.01%).
QUANTILE_TOLERANCE = 1e-4
# Tail mass of each Beta factor that the grid may lump at the edge of its support.
GRID_TAIL_MASS = 1e-18
# Beta quantiles below this come from the leading power law of the lower tail (scipy's
# inverse stops at the smallest normal double).
BETA_POWER_LAW_BELOW = 1e-290
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
# Largest -log P the grid represents (P = exp(-2000), far below any float's use).
GRID_MAX_X = 2000.0
# Shape parameters at or above which the second-order saddlepoint is used for
# products of two or more factors, the largest probability of X = -log P it is used for
# (beyond it, in the upper tail of X, that is the lower bound at levels above 0.99, its
# error grows to 7e-4 where a shape is 10), and its error in X there: at most 6.6e-5
# against mpmath from level 0.5 to 1 - 1e-12 (tests/test_exact_reference.py).
SADDLEPOINT_MIN_SHAPE = 10.0
SADDLEPOINT_MAX_PROB = 0.99
SADDLEPOINT_ERROR = 1e-4


@dataclass(frozen=True)
class BetaProduct:
    """Distribution of ``P = mean_c prod_m p_cm``, independent ``p_cm ~ Beta(a_cm, b_cm)``.

    Parameters
    ----------
    components : tuple of (a, b) array pairs
        One pair per mixture component (run); arrays hold that component's factors.
        ``b == 0`` marks a point mass at 1; every ``a`` must be positive.
    """

    components: tuple[tuple[np.ndarray, np.ndarray], ...]
    _factors: tuple[tuple[np.ndarray, np.ndarray], ...] = field(init=False, repr=False)

    def __post_init__(self):
        kept = []
        for a, b in self.components:
            a = np.atleast_1d(np.asarray(a, dtype=float))
            b = np.atleast_1d(np.asarray(b, dtype=float))
            if np.any(~(a > 0)) or np.any(~(b >= 0)) or a.shape != b.shape:
                raise ValueError(f"invalid Beta factors a={a}, b={b}")
            proper = b > 0
            kept.append((a[proper], b[proper]))
        if not kept:
            raise ValueError("a BetaProduct needs at least one component")
        object.__setattr__(self, "_factors", tuple(kept))

    @property
    def factors(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Each component's proper factors (point masses at 1 removed)."""
        return self._factors

    def moments(self) -> tuple[float, float]:
        """Exact mean and standard deviation of ``P``, precise at any count.

        Per component ``c``, ``E[P_c] = prod a / (a + b)`` and ``Var P_c / E[P_c]^2 =
        prod (1 + b / (a (a + b + 1))) - 1``, both from ``log1p`` and ``expm1`` of small
        ratios, never from differences of log-gamma values (which lose every digit at
        a billion trials). Over the mixture, ``Var P = mean_c E[P_c]^2 r_c + (mean_c
        E[P_c]^2 - E[P]^2)``: two terms that cannot be negative.
        """
        log_means = np.array([-np.sum(np.log1p(b / a)) for a, b in self._factors])
        ratios = np.array(
            [np.expm1(np.sum(np.log1p(b / (a * (a + b + 1))))) for a, b in self._factors]
        )
        top = log_means.max()
        scaled = np.exp(log_means - top)  # component means relative to the largest
        within = np.mean(scaled**2 * ratios)
        between = np.var(scaled)
        mean = math.exp(top) * float(np.mean(scaled))
        return mean, math.exp(top) * math.sqrt(within + between)


@dataclass(frozen=True)
class ProductSummary:
    """Deterministic summaries of ``X = -log P`` for one ``BetaProduct``.

    Attributes
    ----------
    x_quantiles : ndarray
        ``X`` quantiles at the requested probabilities (``P`` quantile at ``1 - q``
        is ``exp(-x_quantiles)``).
    x_cdf : ndarray
        ``P(X <= x)`` at the requested points, i.e. ``P(P >= exp(-x))``.
    error : float
        Bound or estimate (grid) or validated size (saddlepoint) of the error in ``X``,
        relative to ``X`` where ``X < 1`` (so in both ``P`` and ``1 - P``); 0 if exact.
    engine : str
        ``"point"``, ``"beta"``, ``"saddlepoint"`` or ``"grid"``.
    """

    x_quantiles: np.ndarray
    x_cdf: np.ndarray
    error: float
    engine: str


def summarise_products(
    products: list[BetaProduct], probs: np.ndarray, x_points: np.ndarray | None = None
) -> list[ProductSummary]:
    """Quantiles of ``X = -log P`` at ``probs`` and CDF values at ``x_points``, per product.

    Products are routed to the cheapest engine that meets ``QUANTILE_TOLERANCE``;
    regular multi-factor products are solved together, vectorised. Products that are
    the same distribution (the same factors in any order, the same components in any
    order: common in sparse tables, where many cells are all successes) are solved once.
    """
    probs = np.asarray(probs, dtype=float)
    x_points = np.zeros(0) if x_points is None else np.asarray(x_points, dtype=float)
    keys = [_canonical(product) for product in products]
    distinct = list(dict.fromkeys(keys))
    solved = _summarise_distinct([_from_canonical(key) for key in distinct], probs, x_points)
    by_key = dict(zip(distinct, solved, strict=True))
    return [by_key[key] for key in keys]


def _canonical(product):
    """A product's factors as a hashable key that ignores the order of factors and of
    components."""
    return tuple(
        sorted(tuple(sorted(zip(a.tolist(), b.tolist(), strict=True))) for a, b in product.factors)
    )


def _from_canonical(key):
    return BetaProduct(
        tuple((np.array([f[0] for f in c]), np.array([f[1] for f in c])) for c in key)
    )


def _summarise_distinct(products, probs, x_points):
    out: list[ProductSummary | None] = [None] * len(products)
    regular = []
    for i, product in enumerate(products):
        factors = product.factors
        if len(factors) == 1 and factors[0][0].size == 0:
            out[i] = _point_mass(probs, x_points)
        elif len(factors) == 1 and factors[0][0].size == 1:
            a, b = factors[0][0][0], factors[0][1][0]
            out[i] = ProductSummary(_x_ppf(a, b, probs), _x_cdf(a, b, x_points), 0.0, "beta")
        elif len(factors) == 1 and min(factors[0][0].min(), factors[0][1].min()) >= (
            SADDLEPOINT_MIN_SHAPE
        ):
            regular.append(i)
        else:
            out[i] = _grid_summary(factors, probs, x_points)
    if regular and np.max(probs, initial=0.0) <= SADDLEPOINT_MAX_PROB:
        a = [products[i].factors[0][0] for i in regular]
        b = [products[i].factors[0][1] for i in regular]
        xq = _saddlepoint_quantiles(a, b, probs)
        xc = _saddlepoint_cdf(a, b, np.broadcast_to(x_points, (len(regular), x_points.size)))
        for j, i in enumerate(regular):
            if np.max(xc[j], initial=0.0) <= SADDLEPOINT_MAX_PROB:
                out[i] = ProductSummary(xq[j], xc[j], SADDLEPOINT_ERROR, "saddlepoint")
    for i in regular:  # the far upper tail of X: there the grid
        if out[i] is None:
            out[i] = _grid_summary(products[i].factors, probs, x_points)
    return out


def clopper_pearson_upper(successes, trials, level):
    """One-sided Clopper-Pearson upper bound at ``level`` (1 when all trials succeed)."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    with np.errstate(invalid="ignore"):
        bound = stats.beta.ppf(level, k + 1, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, bound)


def log_beta_draws(a, b, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Draws of ``log p`` for ``p ~ Beta(a, b)``, precise for tiny ``a`` or ``b``.

    Uses ``log G_a = log G_(a+1) + log(U) / a`` for gamma variates, so shapes such as
    1/50 do not underflow to ``log 0``. ``size`` is prepended to ``a``'s shape.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    shape = tuple(size) + np.broadcast_shapes(a.shape, b.shape)
    log_ga = _log_gamma_draws(a, shape, rng)
    log_gb = _log_gamma_draws(b, shape, rng)
    return log_ga - np.logaddexp(log_ga, log_gb)


def _log_gamma_draws(shape_param, shape, rng):
    k = np.broadcast_to(shape_param, shape)
    with np.errstate(over="ignore"):  # a shape near 1e-308: log G is -inf, G is 0
        return np.log(rng.standard_gamma(k + 1.0)) + np.log(rng.uniform(size=shape)) / k


def _point_mass(probs, x_points):
    """``P = 1`` exactly (every factor a point mass at 1): ``X = 0``."""
    return ProductSummary(np.zeros(probs.shape), (x_points >= 0).astype(float), 0.0, "point")


# ---------------------------------------------------------------------------
# one factor: X = -log p, p ~ Beta(a, b)
# ---------------------------------------------------------------------------


def _x_cdf(a, b, x):
    """``P(-log p <= x)``, precise however small."""
    return _x_tails(a, b, x)[0]


def _x_tails(a, b, x):
    """``P(-log p <= x)`` and ``P(-log p > x)``, each precise however small.

    One regularised incomplete Beta function gives one tail outright (through
    ``1 - p`` below ``x = log 2``, through ``p`` above); the other is one minus it,
    except where that would lose more than three digits, where scipy's (slower)
    complement is used. Where ``e^-x`` is below ``BETA_POWER_LAW_BELOW`` (it underflows
    past ``x = 745``) the upper tail is the power law ``e^(-a x) / (a B(a, b))``, exact
    to double precision there.
    """
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    near = x < math.log(2)
    far = x > -math.log(BETA_POWER_LAW_BELOW)
    log_far_tail = np.where(far, -a * x - math.log(a) - special.betaln(a, b), -np.inf)
    direct = np.where(
        near,
        special.betainc(b, a, -np.expm1(-np.where(near, x, 0.0))),  # P(1 - p <= 1 - e^-x)
        np.where(far, np.exp(log_far_tail), special.betainc(a, b, np.exp(-np.where(near, 1.0, x)))),
    )
    other = np.where(far, -np.expm1(log_far_tail), 1.0 - direct)
    small = (other < 1e-3) & ~far
    if np.any(small):
        xs, ns = x[small], near[small]
        other[small] = np.where(
            ns,
            special.betaincc(b, a, -np.expm1(-np.where(ns, xs, 0.0))),
            special.betaincc(a, b, np.exp(-np.where(ns, 1.0, xs))),
        )
    return np.where(near, direct, other), np.where(near, other, direct)


def _x_ppf(a, b, q):
    """Quantile of ``-log p`` at probability ``q``, precise in both tails."""
    q = np.asarray(q, dtype=float)
    one_minus_p = np.exp(_log_beta_quantile(b, a, q))  # 1 - p at the q-quantile of X
    with np.errstate(divide="ignore"):
        log_p = _log_beta_quantile(a, b, 1.0 - q)  # p at the same point
        return np.where(one_minus_p < 0.5, -np.log1p(-one_minus_p), -log_p)


def _x_isf(a, b, tail):
    """``x`` with ``P(-log p > x) = tail``, for small ``tail``."""
    return -_log_beta_quantile(a, b, tail)


def _log_beta_quantile(a, b, q):
    """``log`` of the ``Beta(a, b)`` quantile at ``q``.

    Where scipy's inverse gives NaN (it does for ``a`` just above 1 below q = 1e-16,
    as at the grid's ``GRID_TAIL_MASS``) or a quantile below ``BETA_POWER_LAW_BELOW``
    (it stops at the smallest normal double, 2.2e-308, where a small ``a`` puts the
    quantile at 1e-900), the leading term of the lower tail, ``P(p < t) ~ t^a / (a
    B(a, b))``, gives it: its relative error is of order ``t``.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log(special.betaincinv(a, b, q))
        power_law = (np.log(q) + np.log(a) + special.betaln(a, b)) / a
    return np.where(np.isnan(exact) | (exact < math.log(BETA_POWER_LAW_BELOW)), power_law, exact)


# ---------------------------------------------------------------------------
# grid: exact bin masses, one convolution, refined until two grids agree
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _GridCdf:
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
    lo = _x_ppf(a, b, GRID_TAIL_MASS)
    hi = np.minimum(_x_isf(a, b, GRID_TAIL_MASS), GRID_MAX_X)
    return lo, np.maximum(hi, lo)


def _bin_masses(a, b, lo, step, n_bins, known):
    """Exact masses of bins ``[lo + k step, lo + (k + 1) step]`` of ``-log p``.

    Each mass is a difference of the CDF below the median and of the survival function
    above it, so masses far in either tail keep their digits; the masses outside the
    bins join the first and the last bin. ``known`` holds the previous call's
    ``(step, cdf, sf)`` at the bin edges: a call with half the step computes only the
    new edges. Returns the masses and the new ``known``.
    """
    if known is not None and known[0] == 2 * step and known[1].size >= n_bins // 2 + 1:
        fresh = lo + step * np.arange(1, n_bins + 1, 2)
        cdf, sf = np.empty(n_bins + 1), np.empty(n_bins + 1)
        cdf[0::2], sf[0::2] = known[1][: n_bins // 2 + 1], known[2][: n_bins // 2 + 1]
        cdf[1::2], sf[1::2] = _x_tails(a, b, fresh)
    else:
        cdf, sf = _x_tails(a, b, lo + step * np.arange(n_bins + 1))
    mass = np.where(cdf[1:] <= 0.5, np.diff(cdf), -np.diff(sf))
    mass[0] += cdf[0]
    mass[-1] += sf[-1]
    return np.maximum(mass, 0.0), (step, cdf, sf)


def _grid_cdf(a, b, step, support, x_cap=np.inf, edges=None, tilt=0.0, lattices=None) -> _GridCdf:
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
    10/10) are discretised once.
    """
    lo, hi = support
    capped = bool(np.isfinite(x_cap))
    # Mass of factor j above x_cap - sum(other lows) cannot matter below x_cap.
    hi = np.maximum(np.minimum(hi, x_cap - (lo.sum() - lo)), lo)
    edges = [None] * a.size if edges is None else edges
    lattices = {} if lattices is None else lattices
    total, scale, start = None, 0.0, 0.0
    for j, key in enumerate(zip(a, b, lo, hi, strict=True)):
        if (key, step, capped) not in lattices:
            lattices[key, step, capped], edges[j] = _lattice(*key, step, capped, edges[j])
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
        total = mass if total is None else _convolve(total, mass)
    total = np.maximum(total, 0.0)
    if tilt:
        exponent = scale - tilt * (start + step * np.arange(total.size))
        total = total * np.exp(np.minimum(exponent, 600.0))
    lower = np.concatenate([[0.0], np.cumsum(total)])
    upper = np.concatenate([np.cumsum(total[::-1])[::-1], [0.0]])
    return _GridCdf(start, step, np.minimum(lower, 1.0), np.minimum(upper, 1.0), capped)


def _lattice(a, b, lo, hi, step, capped, known):
    """One factor's masses on its lattice and the lattice's first point, and the new
    ``known`` of ``_bin_masses``: at the bins' centres, or for a factor piled at ``X =
    0`` (``b < 1``) split between the bins' edges (see ``_grid_cdf``)."""
    n_bins = max(1, int(np.ceil((hi - lo) / step)))
    mass, known = _bin_masses(a, b, lo, step, n_bins, known)
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
    cdf, sf = _x_tails(a, b, np.concatenate([x.ravel(), tops, bottoms]))
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


def _convolve(x, y):
    """Full linear convolution of two mass vectors by FFT."""
    size = x.size + y.size - 1
    n = fft.next_fast_len(size, real=True)
    return fft.irfft(fft.rfft(x, n) * fft.rfft(y, n), n)[:size]


def _grid_summary(factors, probs, x_points):
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
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
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
        return special.logsumexp(self.log_k + self.powers * log_x[:, None], axis=1)


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
    """One product's factors, for recomputing single quantiles and CDF values."""

    factors: tuple
    supports: list
    m: int
    step: float
    law: _SmallXLaw | None

    def polish(self, q, x, error):
        """The ``q`` quantile, recomputed where the shared grid cannot claim the tolerance.

        In a far tail (``min(q, 1 - q) < GRID_TILT_BELOW``) the grid is tilted to the
        saddlepoint of the estimate. Where ``error`` exceeds the tolerance (relative to
        ``x`` below 1: mass piled near ``P = 1``), the grid is capped just above ``x``
        unless ``q`` is a far upper tail (then the whole grid is refined): first with
        ``GRID_ZOOM_POINTS`` bins, and while the quantile sits in their first bins its
        position is extrapolated from the CDF's power law there; then with a step fine
        enough for ``_discretisation_bound``. A far upper tail that no affordable step
        bounds so takes its error from the change from a grid of twice the step. Below
        ``GRID_SMALLEST_X`` it stops. Returns the quantile and its error in ``X``.
        """
        tail = min(q, 1.0 - q) < GRID_TILT_BELOW
        from_below = 1.0 - q >= GRID_TILT_BELOW  # a capped grid holds no far upper tail
        step = self.step
        for _ in range(GRID_ZOOMS):
            wanted = QUANTILE_TOLERANCE * min(1.0, x)
            if (error <= wanted and not tail) or x + error < GRID_SMALLEST_X:
                break
            cap = np.inf
            if error > wanted and from_below:
                cap, floor = x + 2 * error, x - error
                final = floor > 0.5 * x
                step = _step_within(wanted * floor / x, self.m) if final else cap / GRID_ZOOM_POINTS
            elif error > wanted:  # refine the whole grid (a capped one holds no upper tail)
                finer = max(_step_within(wanted, self.m), self._finest(np.inf))
                if finer >= step and not tail:
                    break  # as fine as the grid may go: the error stays as reported
                step = min(step, finer)
            cdfs = self._cdfs(step, x, cap)
            estimate = x
            x = float(_mixture_quantiles(cdfs, np.array([q]))[0])
            error, tail = _discretisation_bound(self.m, step), False
            if not np.isfinite(cap) and error > QUANTILE_TOLERANCE * min(1.0, x):
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
        """The finest step that keeps every factor within ``GRID_MAX_POINTS`` below ``cap``."""
        widths = [np.minimum(hi, cap) - lo for lo, hi in filter(None, self.supports)]
        return max(float(np.max(w)) for w in widths) / GRID_MAX_POINTS

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
                a, b, step, support, cap, tilt=min(_tilt(a, b, x), upwards), lattices=lattices
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
            slope = _cgf(a[None, :], b[None, :], np.array([a_min - math.exp(mid)]))[1][0]
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


# ---------------------------------------------------------------------------
# saddlepoint: second-order Lugannani-Rice for sums of -log Beta, vectorised
# ---------------------------------------------------------------------------


def _pad(a_list, b_list):
    width = max(len(a) for a in a_list)
    # Padding factors have b = 0, so every term of the CGF is 0 for them; their
    # a is the row's largest so that min(a) is still the real factors' minimum.
    a = np.repeat([[ai.max()] for ai in a_list], width, axis=1)
    b = np.zeros((len(a_list), width))
    for i, (ai, bi) in enumerate(zip(a_list, b_list, strict=True)):
        a[i, : ai.size] = ai
        b[i, : bi.size] = bi
    return a, b


def _cgf(a, b, s):
    """Cumulant generating function of ``sum -log p`` and its first four derivatives."""
    s = s[:, None]
    k0 = _log_gamma_ratio(a + b, s) - _log_gamma_ratio(a, s)
    k1 = special.digamma(a + b - s) - special.digamma(a - s)
    k2 = special.polygamma(1, a - s) - special.polygamma(1, a + b - s)
    k3 = special.polygamma(2, a + b - s) - special.polygamma(2, a - s)
    k4 = special.polygamma(3, a - s) - special.polygamma(3, a + b - s)
    return [k.sum(axis=1) for k in (k0, k1, k2, k3, k4)]


# Stirling's series for log Gamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2): the
# coefficients of z^-1, z^-3, ..., z^-9. Beyond STIRLING_FROM its next term is below 1e-17.
STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)
STIRLING_FROM = 20.0


def _log_gamma_ratio(z, s):
    """``log Gamma(z) - log Gamma(z - s)``, precise when both arguments are huge.

    A plain difference of ``gammaln`` loses ``|log Gamma(z)| * 1e-16`` (1e-9 at a
    million trials), which the saddlepoint's second-order terms amplify into percent
    errors. From ``STIRLING_FROM`` on, the difference is taken term by term, with
    ``log(z / (z - s))`` as ``-log1p(-s / z)``.
    """
    z, s = np.broadcast_arrays(z, s)
    out = special.gammaln(z) - special.gammaln(z - s)
    large = np.minimum(z, z - s) >= STIRLING_FROM
    if np.any(large):
        zl, sl = z[large], s[large]
        rest = zl - sl
        series = sum(
            c * (zl ** -(2 * k + 1) - rest ** -(2 * k + 1)) for k, c in enumerate(STIRLING)
        )
        out[large] = sl * np.log(zl) - (rest - 0.5) * np.log1p(-sl / zl) - sl + series
    return out


def _window(a, b):
    """Half-width in s of the window around 0 where Lugannani-Rice is interpolated."""
    return 0.05 / np.sqrt(_cgf(a, b, np.zeros(a.shape[0]))[2])


def _lugannani_rice(a, b, s, edge):
    """``(P(X <= K'(s)), P(X > K'(s)))`` by second-order Lugannani-Rice.

    Each tail is computed on its own side, so both keep their relative precision far
    out (a lower tail of 1e-30 is not ``1 - (1 - 1e-30)``). Near s = 0 the terms cancel
    catastrophically (0/0 in the limit): within ``|s| < edge`` (``|u| < 0.05``, a
    twentieth of a standard deviation, where the CDF is nearly linear) interpolate
    linearly in s between the window's edges.
    """
    near = np.abs(s) < edge
    lower, upper = _lugannani_rice_tails(a, b, np.where(near, edge, s))
    if np.any(near):
        left_lower, left_upper = _lugannani_rice_tails(a, b, -edge)
        weight = (s + edge) / (2 * edge)
        lower = np.where(near, left_lower + weight * (lower - left_lower), lower)
        upper = np.where(near, left_upper + weight * (upper - left_upper), upper)
    return lower, upper


def _lugannani_rice_tails(a, b, s):
    k0, k1, k2, k3, k4 = _cgf(a, b, s)
    w = np.sign(s) * np.sqrt(np.maximum(2 * (s * k1 - k0), 0.0))
    u = s * np.sqrt(k2)
    l3 = k3 / k2**1.5
    l4 = k4 / k2**2
    correction = stats.norm.pdf(w) * (
        1 / u - 1 / w + (l4 / 8 - 5 * l3**2 / 24) / u - l3 / (2 * u**2) - 1 / u**3 + 1 / w**3
    )
    lower = np.clip(stats.norm.cdf(w) - correction, 0.0, 1.0)
    upper = np.clip(stats.norm.sf(w) + correction, 0.0, 1.0)
    return lower, upper


def _solve_saddlepoint(a, b, target, value_of, guess):
    """Find s with ``value_of(s) == target`` (increasing in s), s in (-inf, min a).

    Works in ``t = log(min a - s)``, where ``value_of`` decreases; starts from a bracket
    of width 1 around ``guess`` (an approximate s), widened to the whole range
    (t from -30, s next to min a, to +30, s ~ -1e13) where it does not hold, and
    narrows it by the Illinois variant of regula falsi.
    """
    a_min = a.min(axis=1)

    def g(t):
        return value_of(a_min - np.exp(t)) - target

    centre = np.log(np.maximum(a_min - guess, 1e-12))
    lo, hi = centre - 0.5, centre + 0.5
    g_lo, g_hi = g(lo), g(hi)
    lo, g_lo = np.where(g_lo >= 0, lo, -30.0), np.where(g_lo >= 0, g_lo, np.inf)
    hi, g_hi = np.where(g_hi <= 0, hi, 30.0), np.where(g_hi <= 0, g_hi, -np.inf)
    if np.any(np.isinf(g_lo)) or np.any(np.isinf(g_hi)):
        g_lo = np.where(np.isinf(g_lo), g(lo), g_lo)
        g_hi = np.where(np.isinf(g_hi), g(hi), g_hi)
    side = np.zeros(target.shape)
    for _ in range(100):
        span = g_lo - g_hi
        t = np.where(
            span > 0, lo + g_lo * (hi - lo) / np.where(span > 0, span, 1.0), 0.5 * (lo + hi)
        )
        t = np.clip(t, lo, hi)
        g_t = g(t)
        right = g_t > 0  # root lies above t
        lo, g_lo = np.where(right, t, lo), np.where(right, g_t, g_lo)
        hi, g_hi = np.where(right, hi, t), np.where(right, g_hi, g_t)
        # Illinois: halve the stale end's value when the same end moves twice.
        g_hi = np.where(right & (side > 0), 0.5 * g_hi, g_hi)
        g_lo = np.where(~right & (side < 0), 0.5 * g_lo, g_lo)
        side = np.where(right, 1.0, -1.0)
        if np.all((hi - lo < 1e-10) | (np.abs(g_t) < 1e-10)):
            break
    return a_min - np.exp(t)


def _saddlepoint_quantiles(a_list, b_list, probs):
    """X quantiles, each found on the logarithm of its smaller tail (relative precision)."""
    a, b = _pad(a_list, b_list)
    edge = _window(a, b)
    _, mean, var, _, _ = _cgf(a, b, np.zeros(a.shape[0]))
    out = np.empty((a.shape[0], probs.size))
    for j, q in enumerate(probs):
        target = np.full(a.shape[0], math.log(q) if q < 0.5 else -math.log1p(-q))
        tail = 0 if q < 0.5 else 1
        sign = 1.0 if q < 0.5 else -1.0  # -log of the upper tail increases with s

        def log_tail(s, tail=tail, sign=sign):
            return sign * np.log(np.maximum(_lugannani_rice(a, b, s, edge)[tail], 1e-300))

        guess = stats.norm.ppf(q) / np.sqrt(var)  # s of the normal approximation
        s = _solve_saddlepoint(a, b, target, log_tail, guess)
        out[:, j] = _cgf(a, b, s)[1]
    return out


def _saddlepoint_cdf(a_list, b_list, x):
    a, b = _pad(a_list, b_list)
    _, mean, var, _, _ = _cgf(a, b, np.zeros(a.shape[0]))
    edge = _window(a, b)
    out = np.empty(x.shape)
    for j in range(x.shape[1]):
        positive = x[:, j] > 0
        target = np.where(positive, x[:, j], 1.0)
        guess = (target - mean) / var  # s of the normal approximation
        s = _solve_saddlepoint(a, b, target, lambda s: _cgf(a, b, s)[1], guess)
        out[:, j] = np.where(positive, _lugannani_rice(a, b, s, edge)[0], 0.0)
    return out
