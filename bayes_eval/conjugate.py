"""Exact posteriors: Beta factors, their products and equal mixtures of products.

Every exact estimate in the package is a ``BetaProduct``: the success probability
``P`` is an equal mixture over components (expert-guided runs), each component a
product of independent ``Beta(a, b)`` factors (milestones or steps), times a
constant (point-valued factors). End-to-end is one component with one factor.

All the mathematics works on ``X = -log P`` so that probabilities down to 1e-300
keep their precision. Means and standard deviations are closed forms. Quantiles and
CDF values are deterministic, never read off Monte Carlo draws:

* one factor: scipy's Beta quantiles (exact);
* two or more factors, all shapes >= ``SADDLEPOINT_MIN_SHAPE``: the second-order
  Lugannani-Rice saddlepoint approximation of the sum of ``-log p`` (its cumulant
  generating function is closed-form in log-gamma functions), vectorised over tasks,
  within ``SADDLEPOINT_ERROR`` of the grid in that regime (checked in the tests);
* anything else (small or near-singular shapes, mixtures over runs): a grid of the
  exact bin masses of each ``-log p`` (from the Beta CDF, so singular densities are
  no problem), convolved by FFT, with a piecewise-linear CDF. The step is halved
  until two grids agree within ``QUANTILE_TOLERANCE`` in log P (relative error in
  P); at the latest when ``M h / 2`` is below it, which bounds the error outright.

A factor with ``b = 0`` (all successes under the Haldane prior) is a point mass at 1
and drops out of the product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import fft, special, stats

from bayes_eval.constants import (
    GRID_MAX_POINTS,
    GRID_MAX_X,
    GRID_TAIL_MASS,
    QUANTILE_TOLERANCE,
    SADDLEPOINT_ERROR,
    SADDLEPOINT_MIN_SHAPE,
)

__all__ = [
    "BetaProduct",
    "ProductSummary",
    "clopper_pearson_upper",
    "log_beta_draws",
    "summarise_products",
]


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
        Bound (grid) or validated size (saddlepoint) of the error in ``X``; 0 if exact.
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
    regular multi-factor products are solved together, vectorised.
    """
    probs = np.asarray(probs, dtype=float)
    x_points = np.zeros(0) if x_points is None else np.asarray(x_points, dtype=float)
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
    if regular:
        a = [products[i].factors[0][0] for i in regular]
        b = [products[i].factors[0][1] for i in regular]
        xq = _saddlepoint_quantiles(a, b, probs)
        xc = _saddlepoint_cdf(a, b, np.broadcast_to(x_points, (len(regular), x_points.size)))
        for j, i in enumerate(regular):
            out[i] = ProductSummary(xq[j], xc[j], SADDLEPOINT_ERROR, "saddlepoint")
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
    """``P(-log p <= x)``: through ``1 - p`` where that is precise (x < log 2), else ``p``."""
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    near = x < math.log(2)
    out = np.empty(x.shape)
    out[near] = special.betainc(b, a, -np.expm1(-x[near]))  # P(1 - p <= 1 - exp(-x))
    out[~near] = 1.0 - special.betainc(a, b, np.exp(-x[~near]))  # 1 - P(p < exp(-x))
    return out


def _x_ppf(a, b, q):
    """Quantile of ``-log p`` at probability ``q``, precise in both tails."""
    q = np.asarray(q, dtype=float)
    one_minus_p = special.betaincinv(b, a, q)  # 1 - p at the q-quantile of X
    p = special.betaincinv(a, b, 1.0 - q)
    with np.errstate(divide="ignore"):
        return np.where(one_minus_p < 0.5, -np.log1p(-one_minus_p), -np.log(p))


# ---------------------------------------------------------------------------
# grid: exact bin masses, one convolution, refined until two grids agree
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _GridCdf:
    """Piecewise-linear CDF of a discretised sum.

    Mass ``cum[j] - cum[j - 1]`` sits at ``start + j * step`` and is spread evenly
    over one step around it, so the CDF is linear between ``start + (j -+ 1/2) step``.
    """

    start: float
    step: float
    cum: np.ndarray

    def nodes(self):
        """Abscissae and CDF values of the piecewise-linear CDF."""
        x = self.start + self.step * (np.arange(self.cum.size + 1) - 0.5)
        return x, np.concatenate([[0.0], self.cum])

    def __call__(self, x):
        nodes, values = self.nodes()
        return np.interp(x, nodes, values)

    def quantile(self, q):
        nodes, values = self.nodes()
        j = np.clip(np.searchsorted(values, q, side="left"), 1, values.size - 1)
        rise = values[j] - values[j - 1]
        frac = np.where(rise > 0, (q - values[j - 1]) / np.where(rise > 0, rise, 1.0), 1.0)
        return nodes[j - 1] + np.clip(frac, 0.0, 1.0) * self.step


def _supports(a, b):
    """Per factor, the range of ``-log p`` outside which ``GRID_TAIL_MASS`` lies."""
    lo = _x_ppf(a, b, GRID_TAIL_MASS)
    hi = np.minimum(_x_ppf(a, b, 1.0 - GRID_TAIL_MASS), GRID_MAX_X)
    return lo, np.maximum(hi, lo)


def _grid_cdf(a, b, step, support, x_cap=np.inf, edges=None) -> _GridCdf:
    """Discretise each factor's exact bin masses at their bin centres and convolve.

    ``support`` is ``_supports(a, b)``. ``edges`` (a list, one entry per factor) keeps
    each factor's CDF at its bin edges between calls: a call with half the previous
    step computes only the new edges.
    """
    lo, hi = support
    # Mass of factor j above x_cap - sum(other lows) cannot matter below x_cap.
    hi = np.maximum(np.minimum(hi, x_cap - (lo.sum() - lo)), lo)
    edges = [None] * a.size if edges is None else edges
    total = None
    for j, (aj, bj, lj, hj) in enumerate(zip(a, b, lo, hi, strict=True)):
        n_bins = max(1, int(np.ceil((hj - lj) / step)))
        known = edges[j]
        if known is not None and known[0] == 2 * step and known[1].size >= n_bins // 2 + 1:
            cdf = np.empty(n_bins + 1)
            cdf[0::2] = known[1][: n_bins // 2 + 1]
            cdf[1::2] = _x_cdf(aj, bj, lj + step * np.arange(1, n_bins + 1, 2))
        else:
            cdf = _x_cdf(aj, bj, lj + step * np.arange(n_bins + 1))
        edges[j] = (step, cdf)
        mass = np.diff(cdf)
        mass[0] += cdf[0]  # the lower tail joins the first bin
        mass = np.maximum(mass, 0.0)
        total = mass if total is None else _convolve(total, mass)
    cum = np.clip(np.maximum.accumulate(np.cumsum(np.maximum(total, 0.0))), 0.0, 1.0)
    return _GridCdf(float(lo.sum() + 0.5 * a.size * step), step, cum)


def _convolve(x, y):
    """Full linear convolution of two mass vectors by FFT."""
    size = x.size + y.size - 1
    n = fft.next_fast_len(size, real=True)
    return fft.irfft(fft.rfft(x, n) * fft.rfft(y, n), n)[:size]


def _grid_summary(factors, probs, x_points):
    """Quantiles and CDF values on grids refined until successive ones agree.

    The first step is a quarter of the narrowest factor's spread; each pass halves
    it, until two passes agree within ``QUANTILE_TOLERANCE`` or the step is so fine
    (``M step / 2 <= QUANTILE_TOLERANCE``) that each factor's discretisation error,
    at most half a step, bounds the error by itself. The reported error is the
    smaller of the last change and that bound.
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
    guaranteed = 2 * QUANTILE_TOLERANCE / m
    step = max(spread / 4, coarsest)
    edges = [[None] * a.size for a, _ in factors]
    cdfs, xq = _grid_pass(factors, supports, step, probs, edges)
    while True:
        if step <= max(guaranteed, coarsest):
            error = 0.5 * m * step
            break
        step = max(step / 2, coarsest)
        finer, fine_xq = _grid_pass(factors, supports, step, probs, edges)
        change = float(np.max(np.abs(fine_xq - xq)))
        cdfs, xq = finer, fine_xq
        if change <= QUANTILE_TOLERANCE:
            error = min(change, 0.5 * m * step)
            break
    if coarsest > guaranteed and error > QUANTILE_TOLERANCE:
        # The support was too wide for a fine grid: refine up to the largest point we need.
        x_cap = max(np.max(xq), np.max(x_points, initial=0.0)) + 1.0
        cdfs = [
            _grid_cdf(a, b, guaranteed, support, x_cap) if a.size else None
            for (a, b), support in zip(factors, supports, strict=True)
        ]
        xq = _mixture_quantiles(cdfs, probs)
        error = QUANTILE_TOLERANCE
    return ProductSummary(xq, _mixture_cdf(cdfs, x_points), error, "grid")


def _grid_pass(factors, supports, step, probs, edges):
    cdfs = [
        _grid_cdf(a, b, step, support, edges=known) if a.size else None
        for (a, b), support, known in zip(factors, supports, edges, strict=True)
    ]
    return cdfs, _mixture_quantiles(cdfs, probs)


def _mixture_cdf(cdfs, x):
    """CDF of the equal mixture; ``None`` marks a component that is a point mass at X = 0."""
    x = np.asarray(x, dtype=float)
    return sum((x >= 0).astype(float) if c is None else c(x) for c in cdfs) / len(cdfs)


def _mixture_quantiles(cdfs, probs):
    """Quantiles of the equal mixture (by bisection when there are several components)."""
    if len(cdfs) == 1 and cdfs[0] is not None:
        return cdfs[0].quantile(probs)
    tops = [c.nodes()[0][-1] for c in cdfs if c is not None]
    lo, hi = np.full(probs.shape, -1.0), np.full(probs.shape, max(tops, default=1.0))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        reached = _mixture_cdf(cdfs, mid) >= probs
        hi, lo = np.where(reached, mid, hi), np.where(reached, lo, mid)
        if np.all(hi - lo < 1e-3 * QUANTILE_TOLERANCE):
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
    k0 = (
        special.gammaln(a - s)
        - special.gammaln(a)
        + special.gammaln(a + b)
        - special.gammaln(a + b - s)
    )
    k1 = special.digamma(a + b - s) - special.digamma(a - s)
    k2 = special.polygamma(1, a - s) - special.polygamma(1, a + b - s)
    k3 = special.polygamma(2, a + b - s) - special.polygamma(2, a - s)
    k4 = special.polygamma(3, a - s) - special.polygamma(3, a + b - s)
    return [k.sum(axis=1) for k in (k0, k1, k2, k3, k4)]


def _window(a, b):
    """Half-width in s of the window around 0 where Lugannani-Rice is interpolated."""
    return 0.05 / np.sqrt(_cgf(a, b, np.zeros(a.shape[0]))[2])


def _lugannani_rice(a, b, s, edge):
    """``P(X <= K'(s))`` by second-order Lugannani-Rice.

    Near s = 0 the terms cancel catastrophically (0/0 in the limit): within
    ``|s| < edge`` (``|u| < 0.05``, a twentieth of a standard deviation, where the CDF
    is nearly linear) interpolate linearly in s between the window's edges.
    """
    near = np.abs(s) < edge
    cdf = _lugannani_rice_cdf(a, b, np.where(near, edge, s))
    if np.any(near):
        left = _lugannani_rice_cdf(a, b, -edge)
        weight = (s + edge) / (2 * edge)
        cdf = np.where(near, left + weight * (cdf - left), cdf)
    return cdf


def _lugannani_rice_cdf(a, b, s):
    k0, k1, k2, k3, k4 = _cgf(a, b, s)
    w = np.sign(s) * np.sqrt(np.maximum(2 * (s * k1 - k0), 0.0))
    u = s * np.sqrt(k2)
    l3 = k3 / k2**1.5
    l4 = k4 / k2**2
    tail = stats.norm.sf(w) + stats.norm.pdf(w) * (
        1 / u - 1 / w + (l4 / 8 - 5 * l3**2 / 24) / u - l3 / (2 * u**2) - 1 / u**3 + 1 / w**3
    )
    return np.clip(1.0 - tail, 0.0, 1.0)


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
    a, b = _pad(a_list, b_list)
    edge = _window(a, b)
    _, mean, var, _, _ = _cgf(a, b, np.zeros(a.shape[0]))
    out = np.empty((a.shape[0], probs.size))
    for j, q in enumerate(probs):
        target = np.full(a.shape[0], q)
        guess = stats.norm.ppf(q) / np.sqrt(var)  # s of the normal approximation
        s = _solve_saddlepoint(a, b, target, lambda s: _lugannani_rice(a, b, s, edge), guess)
        out[:, j] = _cgf(a, b, s)[1]
    return out


def _saddlepoint_cdf(a_list, b_list, x):
    a, b = _pad(a_list, b_list)
    _, mean, var, _, _ = _cgf(a, b, np.zeros(a.shape[0]))
    out = np.empty(x.shape)
    for j in range(x.shape[1]):
        positive = x[:, j] > 0
        target = np.where(positive, x[:, j], 1.0)
        guess = (target - mean) / var  # s of the normal approximation
        s = _solve_saddlepoint(a, b, target, lambda s: _cgf(a, b, s)[1], guess)
        out[:, j] = np.where(positive, _lugannani_rice(a, b, s, _window(a, b)), 0.0)
    return out
