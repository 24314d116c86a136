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

* one factor: scipy's Beta quantiles (exact, ``bayes_eval.exact.factors``);
* two or more factors, all shapes >= ``SADDLEPOINT_MIN_SHAPE``, probabilities up to
  ``SADDLEPOINT_MAX_PROB``: the second-order Lugannani-Rice saddlepoint approximation
  of the sum of ``-log p`` (``bayes_eval.exact.saddlepoint``);
* anything else (small or near-singular shapes, mixtures over runs, the far upper
  tail): a grid of the exact bin masses of each ``-log p``, convolved by FFT
  (``bayes_eval.exact.grid``).

A factor with ``b = 0`` (all successes under the Haldane prior) is a point mass at 1
and drops out of the product.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from bayes_eval.exact.factors import ProductSummary, mixture_summary, x_cdf, x_ppf
from bayes_eval.exact.grid import grid_summary
from bayes_eval.exact.saddlepoint import (
    SADDLEPOINT_ERROR,
    SADDLEPOINT_MAX_PROB,
    SADDLEPOINT_MIN_SHAPE,
    saddlepoint_cdf,
    saddlepoint_quantiles,
)
from bayes_eval.messages import duration_text, progress

__all__ = [
    "EXACT_MAX_FACTORS",
    "EXACT_MAX_RUNS",
    "BetaProduct",
    "beta_product",
    "clopper_pearson_upper",
    "log_beta_draws",
    "summarise_products",
]


# The largest exact posterior one pair may have, refused before any work past it: each
# run has a grid of its own, so time and memory grow with the runs (on 2 cores, 400 runs of
# 5 steps took 83 s and 5.9 GB; one run of 5,000 steps 26 s: benchmarks/long_products.py).
EXACT_MAX_RUNS = 200
EXACT_MAX_FACTORS = 10_000
# A product this large, or a summary running this long, says how it is getting on.
PROGRESS_FACTORS = 500
PROGRESS_SECONDS = 3.0


@dataclass(frozen=True)
class BetaProduct:
    """Distribution of ``P = mean_c prod_m p_cm``, independent ``p_cm ~ Beta(a_cm, b_cm)``,
    or, with ``weights``, of the weighted mixture ``sum_c w_c prod_m p_cm``.

    Parameters
    ----------
    components : tuple of (a, b) array pairs
        One pair per mixture component (run); arrays hold that component's factors.
        ``b == 0`` marks a point mass at 1; every ``a`` must be positive.
    weights : tuple of float, optional
        The components' weights (normalised here); None: equal. A graded end-to-end
        posterior (``bayes_eval.exact.graded``) is a weighted mixture of single factors.
    """

    components: tuple[tuple[np.ndarray, np.ndarray], ...]
    weights: tuple[float, ...] | None = None
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
        if self.weights is not None:
            weights = np.asarray(self.weights, dtype=float)
            if weights.shape != (len(kept),) or np.any(~(weights > 0)):
                raise ValueError(f"invalid mixture weights {weights}")
            object.__setattr__(self, "weights", tuple((weights / weights.sum()).tolist()))
        object.__setattr__(self, "_factors", tuple(kept))

    @property
    def shares(self) -> np.ndarray:
        """Each component's weight in the mixture (equal unless ``weights`` says)."""
        if self.weights is None:
            return np.full(len(self._factors), 1.0 / len(self._factors))
        return np.asarray(self.weights)

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
        E[P_c]^2 - E[P]^2)``: two terms that cannot be negative (means over ``c`` weighted
        by ``shares`` in a weighted mixture).
        """
        log_means = np.array([-np.sum(np.log1p(b / a)) for a, b in self._factors])
        ratios = np.array(
            [np.expm1(np.sum(np.log1p(b / (a * (a + b + 1))))) for a, b in self._factors]
        )
        top = log_means.max()
        scaled = np.exp(log_means - top)  # component means relative to the largest
        shares = self.shares
        within = np.sum(shares * scaled**2 * ratios)
        mean_scaled = float(np.sum(shares * scaled))
        between = max(float(np.sum(shares * (scaled - mean_scaled) ** 2)), 0.0)
        mean = math.exp(top) * mean_scaled
        return mean, math.exp(top) * math.sqrt(within + between)


def beta_product(alpha: np.ndarray, beta: np.ndarray) -> BetaProduct:
    """A ``BetaProduct`` from NaN-padded ``(run, factor)`` shapes; empty runs are dropped."""
    components = []
    for a_run, b_run in zip(alpha, beta, strict=True):
        present = ~np.isnan(a_run)
        if present.any():
            components.append((a_run[present], b_run[present]))
    return BetaProduct(tuple(components))


def summarise_products(
    products: list[BetaProduct], probs: np.ndarray, x_points: np.ndarray | None = None
) -> list[ProductSummary]:
    """Quantiles of ``X = -log P`` at ``probs`` and CDF values at ``x_points``, per product
    (a product that is not a ``BetaProduct`` summarises itself: ``summary``).

    Products are routed to the cheapest engine that meets ``QUANTILE_TOLERANCE``;
    regular multi-factor products are solved together, vectorised. Products that are
    the same distribution (the same factors in any order, the same components in any
    order: common in sparse tables, where many cells are all successes) are solved once.
    """
    probs = np.asarray(probs, dtype=float)
    x_points = np.zeros(0) if x_points is None else np.asarray(x_points, dtype=float)
    keys = [_canonical(p) if isinstance(p, BetaProduct) else p for p in products]
    distinct = list(dict.fromkeys(keys))
    solved = _summarise_distinct([_from_canonical(key) for key in distinct], probs, x_points)
    by_key = dict(zip(distinct, solved, strict=True))
    return [by_key[key] for key in keys]


def _canonical(product):
    """A product's factors (and weights) as a hashable key that ignores the order of
    factors and of components."""
    components = [
        tuple(sorted(zip(a.tolist(), b.tolist(), strict=True))) for a, b in product.factors
    ]
    if product.weights is None:
        return tuple(sorted(components))
    return ("weighted", tuple(sorted(zip(components, product.weights, strict=True))))


def _from_canonical(key):
    if not isinstance(key, tuple):  # a distribution that summarises itself
        return key
    weights = None
    if key and key[0] == "weighted":
        key, weights = zip(*key[1], strict=True)
    return BetaProduct(
        tuple((np.array([f[0] for f in c]), np.array([f[1] for f in c])) for c in key), weights
    )


def _summarise_distinct(products, probs, x_points):
    out: list[ProductSummary | None] = [None] * len(products)
    regular = []
    report = _Progress()
    for i, product in enumerate(products):
        if not isinstance(product, BetaProduct):  # a graded product (exact.graded_product)
            out[i] = product.summary(probs, x_points)
            continue
        factors = product.factors
        if product.weights is not None and len(factors) > 1:
            out[i] = _weighted(product, probs, x_points)
        elif len(factors) == 1 and factors[0][0].size == 0:
            out[i] = _point_mass(probs, x_points)
        elif len(factors) == 1 and factors[0][0].size == 1:
            a, b = factors[0][0][0], factors[0][1][0]
            out[i] = ProductSummary(x_ppf(a, b, probs), x_cdf(a, b, x_points), 0.0, "beta")
        elif len(factors) == 1 and min(factors[0][0].min(), factors[0][1].min()) >= (
            SADDLEPOINT_MIN_SHAPE
        ):
            regular.append(i)
        else:
            report.before(product)
            out[i] = grid_summary(factors, probs, x_points)
    if regular and np.max(probs, initial=0.0) <= SADDLEPOINT_MAX_PROB:
        a = [products[i].factors[0][0] for i in regular]
        b = [products[i].factors[0][1] for i in regular]
        xq = saddlepoint_quantiles(a, b, probs)
        xc = saddlepoint_cdf(a, b, np.broadcast_to(x_points, (len(regular), x_points.size)))
        for j, i in enumerate(regular):
            if np.max(xc[j], initial=0.0) <= SADDLEPOINT_MAX_PROB:
                out[i] = ProductSummary(xq[j], xc[j], SADDLEPOINT_ERROR, "saddlepoint")
    for i in regular:  # the far upper tail of X: there the grid
        if out[i] is None:
            report.before(products[i])
            out[i] = grid_summary(products[i].factors, probs, x_points)
    return out


def _weighted(product, probs, x_points) -> ProductSummary:
    """A weighted mixture of single Beta factors (a graded posterior), exactly."""
    if any(a.size != 1 for a, _ in product.factors):
        raise ValueError("a weighted mixture is summarised where each component is one factor")
    a, b = (np.array([f[k][0] for f in product.factors]) for k in (0, 1))
    return mixture_summary(a, b, product.shares, probs, x_points)


class _Progress:
    """Progress of the grid's summaries (the slow engine): a line before a product of
    ``PROGRESS_FACTORS`` factors or more, and every few seconds once they have run
    ``PROGRESS_SECONDS``."""

    def __init__(self):
        self.done = 0
        self.start = self.said = time.perf_counter()

    def before(self, product: BetaProduct) -> None:
        now = time.perf_counter()
        if now - self.start > PROGRESS_SECONDS and now - self.said > PROGRESS_SECONDS:
            progress(
                f"exact: {self.done} posteriors summarised on the grid "
                f"({duration_text(now - self.start)} so far)"
            )
            self.said = now
        factors = sum(a.size for a, _ in product.factors)
        if factors >= PROGRESS_FACTORS:
            runs = len(product.factors)
            progress(
                f"exact: a product of {factors:,} factors over {runs:,} run(s), on a grid "
                "(up to a minute)"
            )
        self.done += 1


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
