"""Routes for a crossed fit's pair departures, measured against sampling them (the package's).

    python benchmarks/crossed_routes.py sample PAIRS ROUTE [--draws 2000]
    python benchmarks/crossed_routes.py accuracy [--nodes 21]
    python benchmarks/crossed_routes.py redraw [--values 6648000]
    python benchmarks/crossed_routes.py gradient PAIRS [--calls 2000]

``sample`` fits the seeded table of ``benchmarks/crossed_tables.py`` (PAIRS one of its
sizes) with the crossed model's population and surprising pairs (no covariates), on the
package's nutpie engine, 4 chains, ``--draws`` after 1,000 tuning steps, target_accept
0.95, by one of three routes: ``sampled`` (the package's: each pair's departure sampled
non-centred), ``summed`` (the departures integrated out of the likelihood by adaptive
Gauss-Hermite quadrature in the graph, ``--nodes`` per pair and component, the mode's
Newton steps held out of the gradient) and ``centred`` (each pair's departure on the
logit scale sampled with the two-normal mixture as its prior). It prints the wall
(compile and sample), the leapfrog steps a draw, the least bulk ESS of the population's
quantities and divergences.

``accuracy`` gives the summed route's error: its log-likelihood of 20,000 random pairs
(up to 60 runs) against the package's trapezoid rule (``log_marginal``, 1e-12), by scale.

``redraw`` times an exact draw of every pair's departure from its conditional given a
posterior draw, as a fit that does not keep its departures needs for its rates
(rejection from the hull of two tangents of each component's concave log density), on
as many values as METR's crossed fit had (831 pairs x 8,000 draws), in numpy and by the
package's compiled C (``bayes_eval.crossed.redraw``), and checks the numpy draws'
distribution against a fine grid's on one pair (the package's tests check its own).

``gradient`` times the sampled route's log density with its gradient, as nutpie calls it,
with each run's log-likelihood through two softplus terms and through one (the
package's), on a table of PAIRS.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from scipy import special, stats

sys.path.insert(0, os.path.dirname(__file__))

from crossed_tables import SIZES, crossed_table  # noqa: E402

SHARE, WIDTH = (2.0, 18.0), (0.7, 0.5)  # the shipped crossed spec's surprise priors


def gauss_hermite(xp, eta, scale, k, n, nodes, steps=20):
    """``log integral phi(e) p^k (1 - p)^(n - k) de``, ``p = expit(eta + s e)``, by
    adaptive Gauss-Hermite quadrature at the mode (numpy, or PyTensor as ``xp``)."""
    x_gh, w_gh = np.polynomial.hermite.hermgauss(nodes)
    graph = xp is not np
    sigmoid = (lambda v: xp.sigmoid(v)) if graph else special.expit
    softplus = (lambda v: xp.softplus(v)) if graph else (lambda v: np.logaddexp(0.0, v))
    low, high = scale * (k - n) + 0 * eta, scale * k + 0 * eta
    rate = (k + 0.5) / (n + 1.0)
    information = n * rate * (1 - rate)
    e = scale * information * (np.log(rate / (1 - rate)) - eta) / (scale**2 * information + 1)
    for _ in range(steps):
        p = sigmoid(eta + scale * e)
        slope, curve = scale * (k - n * p) - e, -(scale**2) * n * p * (1 - p) - 1
        step = e - slope / curve
        low, high = xp.where(slope > 0, e, low), xp.where(slope > 0, high, e)
        e = xp.where((step > low) & (step < high), step, 0.5 * (low + high))
    p = sigmoid(eta + scale * e)
    width = 1 / xp.sqrt(scale**2 * n * p * (1 - p) + 1)
    if graph:
        from pytensor.gradient import zero_grad

        e, width = zero_grad(e), zero_grad(width)
    at = e[..., None] + np.sqrt(2) * width[..., None] * x_gh
    x = eta[..., None] + (scale[..., None] if np.ndim(scale) else scale) * at
    log_f = k[..., None] * -softplus(-x) + (n - k)[..., None] * -softplus(x) - 0.5 * at**2
    terms = np.log(w_gh) + x_gh**2 + log_f
    total = xp.logsumexp(terms, axis=-1) if graph else special.logsumexp(terms, axis=-1)
    return xp.log(np.sqrt(2) * width) + total - 0.5 * np.log(2 * np.pi)


def model(table, route: str, nodes: int, softplus: int = 1):
    """The crossed model's population and surprising pairs on ``table``, by ``route``; a
    run's log-likelihood through one softplus (the package's: ``log (1 - p) = log p -
    logit``) or two (``log p``, ``log (1 - p)`` each its own)."""
    import pandas as pd
    import pymc as pm
    import pytensor.tensor as pt

    a, agents = pd.factorize(table.agent)
    t, tasks = pd.factorize(table.task)
    k, n = table.successes.to_numpy(float), table.trials.to_numpy(float)
    with pm.Model(coords={"agent": agents, "task": tasks, "pair": np.arange(len(k))}) as m:
        mean = pm.Normal("ability_mean", 0, 2.5)
        ability_scale = pm.LogNormal("ability_scale", 0, 1)
        difficulty_scale = pm.LogNormal("difficulty_scale", 0, 1)
        ability_z = pm.Normal("ability_z", 0, 1, dims="agent")
        difficulty_z = pm.ZeroSumNormal("difficulty_z", sigma=1.0, dims="task")
        scale = pm.LogNormal("cell_scale", 0, 1)
        share = pm.Beta("surprise_share", *SHARE)
        wide = scale * (1 + pm.LogNormal("surprise_width", *WIDTH))
        eta = mean + ability_scale * ability_z[a] - difficulty_scale * difficulty_z[t]

        def binomial(x):
            if softplus == 1:
                return n * -pt.softplus(-x) - (n - k) * x
            return k * -pt.softplus(-x) + (n - k) * -pt.softplus(x)

        if route == "centred":
            weights = pt.stack([1 - share, share])
            sigmas = pt.stack([scale, wide])
            d = pm.NormalMixture("cell_d", w=weights, mu=np.zeros(2), sigma=sigmas, dims="pair")
            pm.Potential("k", binomial(eta + d).sum())
            return m
        if route == "summed":
            narrow_ll = gauss_hermite(pt, eta, scale, k, n, nodes)
            wide_ll = gauss_hermite(pt, eta, wide, k, n, nodes)
        else:
            z = pm.Normal("cell_z", 0, 1, dims="pair")
            narrow_ll, wide_ll = binomial(eta + scale * z), binomial(eta + wide * z)
        pm.Potential("k", pt.logaddexp(pt.log1p(-share) + narrow_ll, pt.log(share) + wide_ll).sum())
    return m


def sample_route(pairs: int, route: str, draws: int, nodes: int) -> None:
    import arviz_stats

    from bayes_eval import SamplerSettings
    from bayes_eval.inference.engines import choose_engine, sample

    table = crossed_table(*SIZES[pairs])
    settings = SamplerSettings(draws=draws, tune=1000, chains=4, target_accept=0.95)
    start = time.perf_counter()
    trace = sample(model(table, route, nodes), choose_engine("nutpie", 1), settings, 0, (route,))
    wall = time.perf_counter() - start
    post, stats_ = trace["posterior"].to_dataset(), trace["sample_stats"].to_dataset()
    names = ["ability_mean", "ability_scale", "difficulty_scale", "cell_scale"]
    names += ["surprise_share", "surprise_width"]
    least = min(float(arviz_stats.ess(post[name]).values) for name in names)
    print(
        f"{route}, {len(table):,} pairs: wall {wall:.1f} s, {float(stats_.n_steps.mean()):.1f} "
        f"leapfrog steps a draw, least bulk ESS {least:.0f}, "
        f"{int(stats_.diverging.sum())} divergences"
    )


def accuracy(nodes: int) -> None:
    from bayes_eval.crossed.likelihood import log_marginal

    rng = np.random.default_rng(1)
    size = 20_000
    eta, scale = rng.uniform(-12, 12, size), rng.choice([0.3, 1.0, 2.5, 5.0, 10.0], size)
    n = rng.integers(1, 60, size).astype(float)
    k = np.where(rng.random(size) < 0.3, 0, rng.binomial(n.astype(int), rng.random(size)))
    k = k.astype(float)
    exact = log_marginal(eta[None], scale[None], k, n)[0]
    choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    error = np.abs(gauss_hermite(np, eta, scale, k, n, nodes, steps=40) + choose - exact)
    for value in np.unique(scale):
        print(f"scale {value:g}: largest log-likelihood error {error[scale == value].max():.1e}")


def log_density(e, eta, scale, k, n):
    x = eta + scale * e
    return -0.5 * e * e - k * np.logaddexp(0.0, -x) - (n - k) * np.logaddexp(0.0, x)


def hull(eta, scale, k, n):
    """The two tangents of the concave ``log_density`` at its mode +- its width: the log of
    their hull's mass, its height where they meet, their slopes and where they meet."""
    low, high = scale * (k - n), scale * k
    rate = (k + 0.5) / (n + 1.0)
    information = n * rate * (1.0 - rate)
    e = np.clip(
        scale * information * (special.logit(rate) - eta) / (scale**2 * information + 1), low, high
    )
    open_ = np.arange(e.size)
    while open_.size:
        at = open_
        s, p = scale[at], special.expit(eta[at] + scale[at] * e[at])
        slope = -e[at] + s * (k[at] - n[at] * p)
        curve = -1.0 - s**2 * n[at] * p * (1.0 - p)
        low[at], high[at] = (
            np.where(slope > 0, e[at], low[at]),
            np.where(slope > 0, high[at], e[at]),
        )
        step = e[at] - slope / curve
        settled = np.abs(slope) < 1e-3 / np.sqrt(-curve)  # within 1e-3 of a width of the mode
        inside = (step > low[at]) & (step < high[at])
        e[at] = np.where(settled, e[at], np.where(inside, step, 0.5 * (low[at] + high[at])))
        open_ = at[~settled]
    p = special.expit(eta + scale * e)
    width = 1.0 / np.sqrt(1.0 + scale**2 * n * p * (1.0 - p))
    below, above = e - width, e + width
    h_below, h_above = log_density(below, eta, scale, k, n), log_density(above, eta, scale, k, n)
    rise = -below + scale * (k - n * special.expit(eta + scale * below))
    fall = above - scale * (k - n * special.expit(eta + scale * above))
    meet = (h_above - h_below + rise * below + fall * above) / (rise + fall)
    top = h_below + rise * (meet - below)
    return top + np.log(1 / rise + 1 / fall), top, rise, fall, meet


def draw_departures(eta, scales, log_weights, k, n, rng):
    """``(e, j)`` from ``w_j phi(e) Binomial(k | n, expit(eta + s_j e))`` per value, exactly:
    a component by its hull's mass, a point from its hull, kept with probability
    ``exp(h_j(e) - hull_j(e))``, until every value has one."""
    hulls = [hull(eta, s, k, n) for s in scales]
    log_mass = np.stack([w + h[0] for w, h in zip(log_weights, hulls, strict=True)])
    chance = np.exp(log_mass - special.logsumexp(log_mass, axis=0))
    e, j = np.empty(eta.size), np.zeros(eta.size, dtype=np.int64)
    open_ = np.arange(eta.size)
    while open_.size:
        picked = (rng.random(open_.size) > np.cumsum(chance[:, open_], axis=0)).sum(axis=0)
        picked = np.minimum(picked, len(scales) - 1)
        top, rise, fall, meet = np.choose(picked, [np.stack(h[1:])[:, open_] for h in hulls])
        scale = np.choose(picked, [s[open_] for s in scales])
        left = rng.random(open_.size) * (1 / rise + 1 / fall) < 1 / rise
        gap = rng.standard_exponential(open_.size)
        point = np.where(left, meet - gap / rise, meet + gap / fall)
        log_kept = log_density(point, eta[open_], scale, k[open_], n[open_]) - (top - gap)
        kept = np.log(rng.random(open_.size)) < log_kept
        e[open_[kept]], j[open_[kept]] = point[kept], picked[kept]
        open_ = open_[~kept]
    return e, j


def gradient(pairs: int, calls: int) -> None:
    """Time the sampled route's log density with its gradient, as nutpie calls it (the C
    the package compiles), with each run's log-likelihood through one softplus or two."""
    import ctypes

    from bayes_eval.inference.nutpie_model import CachedModel

    table = crossed_table(*SIZES[pairs])
    signature = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_uint64] + [ctypes.c_void_p] * 4)
    seconds = {}
    for softplus in (2, 1):
        template = CachedModel.compile(model(table, "sampled", 0, softplus), "").template
        function = signature(template.compiled_logp_func.address)
        dim = template._n_dim
        x = np.random.default_rng(0).normal(0.0, 0.1, dim)
        grad, logp = np.empty(dim), np.empty(1)
        at = [x.ctypes.data, grad.ctypes.data, logp.ctypes.data, template.user_data.ctypes.data]
        start = time.perf_counter()
        for _ in range(calls):
            function(dim, *at)
        seconds[softplus] = (time.perf_counter() - start) / calls
        print(
            f"{len(table):,} pairs, {softplus} softplus a run's likelihood: "
            f"{seconds[softplus] * 1e6:.1f} us a call, {seconds[softplus] * 1e9 / len(table):.0f} "
            "ns a pair"
        )
    print(f"ratio one / two: {seconds[1] / seconds[2]:.2f}")


def redraw(values: int) -> None:
    from bayes_eval.crossed import redraw as compiled

    rng = np.random.default_rng(0)
    eta = rng.normal(-2, 3, values)
    k = rng.integers(0, 5, values).astype(float)
    n = k + rng.integers(1, 10, values)
    scales = [np.full(values, 1.2), np.full(values, 3.7)]  # METR's medians: narrow, wide
    weights = [np.full(values, np.log(0.89)), np.full(values, np.log(0.11))]
    start = time.perf_counter()
    draw_departures(eta, scales, weights, k, n, rng)
    numpy_seconds = time.perf_counter() - start
    print(f"{values:,} departures drawn in {numpy_seconds:.1f} s (numpy)")
    rows = values // 1000  # the package's compiled redraw, a row of 1,000 pairs a draw
    start = time.perf_counter()
    compiled.redraw(
        eta[: rows * 1000].reshape(rows, 1000),
        (scales[0][:rows], scales[1][:rows]),
        (weights[0][:rows], weights[1][:rows]),
        (k[:1000], n[:1000]),
        np.arange(rows) * 1000,
        0,
    )
    seconds = time.perf_counter() - start
    print(
        f"{rows * 1000:,} departures drawn in {seconds:.2f} s (the package's C, "
        f"{compiled.cores()} threads): {numpy_seconds / seconds:.1f} times as fast"
    )
    size, (eta_, k_, n_, share) = 200_000, (-1.0, 30.0, 59.0, 0.05)
    e, j = draw_departures(
        np.full(size, eta_),
        [np.full(size, 4.0), np.full(size, 14.8)],
        [np.full(size, np.log1p(-share)), np.full(size, np.log(share))],
        np.full(size, k_),
        np.full(size, n_),
        rng,
    )
    grid = np.linspace(-40, 40, 4_000_001)
    parts = [np.log1p(-share) + log_density(grid, eta_, 4.0, k_, n_)]
    parts.append(np.log(share) + log_density(grid, eta_, 14.8, k_, n_))
    top = max(part.max() for part in parts)
    narrow, wide = (np.exp(part - top) for part in parts)
    cdf = np.cumsum(narrow + wide)
    cdf /= cdf[-1]
    test = stats.kstest(e, lambda x: np.interp(x, grid, cdf))
    print(
        f"one pair (30 of 59, scales 4 and 14.8): share wide {j.mean():.4f} against "
        f"{wide.sum() / (narrow.sum() + wide.sum()):.4f}; Kolmogorov-Smirnov p {test.pvalue:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("sample")
    one.add_argument("pairs", type=int, choices=sorted(SIZES))
    one.add_argument("route", choices=["sampled", "summed", "centred"])
    one.add_argument("--draws", type=int, default=2000)
    one.add_argument("--nodes", type=int, default=11)
    commands.add_parser("accuracy").add_argument("--nodes", type=int, default=21)
    commands.add_parser("redraw").add_argument("--values", type=int, default=831 * 8000)
    timed = commands.add_parser("gradient")
    timed.add_argument("pairs", type=int, choices=sorted(SIZES))
    timed.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    if args.command == "sample":
        sample_route(args.pairs, args.route, args.draws, args.nodes)
    elif args.command == "accuracy":
        accuracy(args.nodes)
    elif args.command == "gradient":
        gradient(args.pairs, args.calls)
    else:
        redraw(args.values)


if __name__ == "__main__":
    main()
