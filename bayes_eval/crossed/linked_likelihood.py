"""The log probability of all of a pair's counts under the linked crossed model
(``crossed_joint``), given the draw of everything the pairs share, for its pointwise
log-likelihood.

A pair's guided and unguided runs share its competence ``u``, so the pair is the unit.
With ``x_m`` each milestone cell's log-odds but for ``pair_scale u`` and ``eta`` the
pair's end-to-end log-odds but for ``link pair_scale u + cell_scale e``::

    L = integral of phi(u) prod_m L_m(u) E(u) du,
    E(u) = integral of Binomial(K | N, expit(eta + link pair_scale u + cell_scale e)) phi(e) de

``L_m(u)`` is the cell's binomial at ``x_m + pair_scale u``, or for a cell of several
trials its integral over the cell's departure. The integrand is log-concave in ``u``
and ``e``; a one-trial outcome is a step in ``e`` where ``cell_scale`` is large, and in
``u`` where ``pair_scale`` is, so:

- ``u`` is integrated by adaptive Gauss-Hermite quadrature, ``NODES`` nodes placed by the
  mode and curvature of the joint integrand in ``(u, e)`` (damped Newton steps; a cell of
  several trials's departure there at its own mode given ``u``, which places the nodes
  and changes no value): within 1e-7 of scipy's quadrature in the tests, ``pair_scale``
  4 among them;
- ``e``, and a cell's own departure, by ``bayes_eval.crossed.likelihood.log_marginal``'s
  trapezoid rule at each node, which follows a step of any sharpness. Pairs with the same
  end-to-end counts share one table of ``E`` over the range of their log-odds
  (``GRID / sqrt(N)`` apart) and of ``cell_scale`` (``STEP / N`` apart), read by cubic
  Hermite interpolation in the first and cubic Lagrange in the second, wherever the
  table is smaller than the values it replaces: within 1e-7 of the rule in the tests,
  and far cheaper at one trial per pair.

The values are whole log probabilities, binomial coefficients included; the tests check
them against scipy's adaptive quadrature.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse, special

from bayes_eval.crossed.likelihood import departure_mode, log_marginal

__all__ = ["pair_log_likelihood"]

# Gauss-Hermite nodes in u; most integrand values held at once (memory: 8 bytes each);
# the end-to-end tables' spacing in log-odds (times 1 / sqrt(N)) and in cell_scale
# (times 1 / N).
NODES, CHUNK, GRID, STEP = 20, 1_000_000, 0.1, 0.02


def pair_log_likelihood(cell, eta, scales: dict, layout) -> np.ndarray:
    """``log L`` of each pair (the module's integral), per draw.

    ``cell`` is ``(draws, cells)``, each milestone cell's log-odds but for ``pair_scale
    u``; ``eta``, ``(draws, pairs)``, each pair's end-to-end log-odds but for ``link
    pair_scale u + cell_scale e``; ``scales`` holds ``pair_scale``, ``link``,
    ``cell_scale`` and ``milestone_cell_scale``, each ``(draws, 1)``; ``layout`` the
    counts (``k``, ``n`` per cell, ``cell_pair``; ``e2e_k``, ``e2e_n`` per pair).
    """
    integral = _Integral(layout)
    rows = max(1, CHUNK // (len(layout.pairs) * NODES))
    chunks = [slice(start, start + rows) for start in range(0, len(eta), rows)]

    def part(at):
        return cell[at], eta[at], {name: value[at] for name, value in scales.items()}

    placed = [integral.nodes(*part(at)) for at in chunks]
    tables = integral.tables(eta, scales, placed)
    out = np.empty(eta.shape)
    for at, nodes in zip(chunks, placed, strict=True):
        out[at] = integral.value(*part(at), nodes, tables)
    return out


class _Integral:
    """The module's integral over one layout's pairs."""

    def __init__(self, layout):
        self.layout = layout
        pairs, cells = len(layout.pairs), layout.cell_pair.size
        self.owner_t = sparse.csc_array(
            (np.ones(cells), (np.arange(cells), layout.cell_pair)), shape=(cells, pairs)
        )
        self.several = np.flatnonzero(layout.n > 1)
        self.ran = np.flatnonzero(layout.e2e_n > 0)
        counts = np.stack([layout.e2e_k[self.ran], layout.e2e_n[self.ran]], axis=1)
        distinct, which = np.unique(counts, axis=0, return_inverse=True)
        # the pairs run end to end, by their counts
        self.groups = [
            (tuple(row), np.flatnonzero(which.ravel() == i)) for i, row in enumerate(distinct)
        ]

    def by_pair(self, values):
        """``(draws, cells)`` or ``(draws, cells, nodes)`` summed into pairs."""
        if values.ndim == 2:
            return values @ self.owner_t
        draws, cells, nodes = values.shape
        flat = np.moveaxis(values, 1, 2).reshape(draws * nodes, cells) @ self.owner_t
        return np.moveaxis(flat.reshape(draws, nodes, -1), 2, 1)

    def nodes(self, cell, eta, scales):
        """Where each pair's nodes in ``u`` go: the mode of the integrand in ``(u, e)``'s
        ``u`` and the sd of ``u`` in the Laplace approximation there, each ``(draws,
        pairs)``."""
        layout, several = self.layout, self.several
        k, n, big_k, big_n = layout.k, layout.n, layout.e2e_k, layout.e2e_n
        slope_u, slope_e = scales["pair_scale"], scales["cell_scale"]
        slope_link, spread = scales["link"] * slope_u, scales["milestone_cell_scale"]

        def approximate(u, e):
            x = cell + slope_u * u[:, layout.cell_pair]
            own = np.zeros(x.shape)  # the departure's mode, none in a cell of one trial
            own[:, several] = departure_mode(x[:, several], spread, k[several], n[several])
            x = x + spread * own
            v = eta + slope_link * u + slope_e * e
            p, q = special.expit(x), special.expit(v)
            value = -k * np.logaddexp(0, -x) - (n - k) * np.logaddexp(0, x) - own**2 / 2
            value = self.by_pair(value)
            value += -big_k * np.logaddexp(0, -v) - (big_n - big_k) * np.logaddexp(0, v)
            width = n * p * (1 - p)
            width[:, several] /= 1 + spread**2 * width[:, several]
            end, spread_e = big_k - big_n * q, big_n * q * (1 - q)
            return (
                value - 0.5 * (u**2 + e**2),
                (-u + slope_u * self.by_pair(k - n * p) + slope_link * end, -e + slope_e * end),
                (
                    1 + slope_u**2 * self.by_pair(width) + slope_link**2 * spread_e,
                    slope_link * slope_e * spread_e,
                    1 + slope_e**2 * spread_e,
                ),
            )

        u, e = _mode(approximate, np.zeros(eta.shape), np.zeros(eta.shape))
        _, _, (curve_uu, curve_ue, curve_ee) = approximate(u, e)
        # u's sd in the Laplace approximation (Sigma_uu of the 2 x 2 inverse)
        return u, np.sqrt(curve_ee / (curve_uu * curve_ee - curve_ue**2))

    def tables(self, eta, scales, placed) -> dict:
        """A ``_Table`` of ``E`` for each end-to-end group where it is smaller than the
        values it replaces, by the group's counts."""
        u, spread_u = (np.concatenate(part) for part in zip(*placed, strict=True))
        slope_link = scales["link"] * scales["pair_scale"]
        reach = (
            np.abs(slope_link)
            * spread_u
            * np.abs(np.polynomial.hermite_e.hermegauss(NODES)[0]).max()
        )
        tables = {}
        for (k, n), same in self.groups:
            pairs = self.ran[same]
            x = eta[:, pairs] + slope_link * u[:, pairs]
            low, high = (x - reach[:, pairs]).min(), (x + reach[:, pairs]).max()
            table = _Table(k, n, low, high, scales["cell_scale"][:, 0])
            if table.size < len(eta) * pairs.size * NODES:
                tables[k, n] = table.build()
        return tables

    def value(self, cell, eta, scales, nodes, tables):
        """``log L`` of each pair, ``(draws, pairs)``."""
        layout, several = self.layout, self.several
        k, n = layout.k, layout.n
        u, spread_u = nodes
        z, w = np.polynomial.hermite_e.hermegauss(NODES)
        at_u = u[..., None] + spread_u[..., None] * z  # (draws, pairs, NODES)
        # the weights over phi(z), the 2 pi of phi(z) and of phi(u) cancelling
        log_w = np.log(w / np.sqrt(2 * np.pi)) + 0.5 * z**2 + np.log(spread_u)[..., None]
        x = cell[..., None] + scales["pair_scale"][..., None] * at_u[:, layout.cell_pair]
        log_choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
        each = log_choose[:, None] - k[:, None] * np.logaddexp(0.0, -x)
        each -= (n - k)[:, None] * np.logaddexp(0.0, x)
        if several.size:
            flat = x[:, several].reshape(len(x), -1)
            reps = (np.repeat(k[several], NODES), np.repeat(n[several], NODES))
            each[:, several] = log_marginal(flat, scales["milestone_cell_scale"], *reps).reshape(
                len(x), several.size, NODES
            )
        log_f = self.by_pair(each) - 0.5 * at_u**2 + log_w  # (draws, pairs, nodes)
        slope_link = scales["link"] * scales["pair_scale"]
        for (one_k, one_n), same in self.groups:  # e integrated out at each node
            pairs = self.ran[same]
            x = eta[:, pairs, None] + slope_link[..., None] * at_u[:, pairs]
            flat = x.reshape(len(x), -1)
            if (one_k, one_n) in tables:
                end = tables[one_k, one_n](flat, scales["cell_scale"])
            else:
                counts = (np.full(flat.shape[1], one_k), np.full(flat.shape[1], one_n))
                end = log_marginal(flat, scales["cell_scale"], *counts)
            log_f[:, pairs] += end.reshape(x.shape)
        top = log_f.max(axis=-1, keepdims=True)
        return top[..., 0] + np.log(np.exp(log_f - top).sum(axis=-1))


class _Table:
    """``log_marginal(x, s, k, n)`` tabulated over ``[low, high]`` in ``x`` and the range
    of ``scale`` (the module's spacing), read by cubic Hermite interpolation of its
    values and slopes in ``x`` and cubic Lagrange interpolation in ``s`` (exact where the
    value is quadratic in ``s``, as in its tails, ``n x + (n s)^2 / 2``)."""

    def __init__(self, k, n, low, high, scale):
        self.step, self.low, self.apart = GRID / np.sqrt(n), low, STEP / n
        self.s_low = scale.min() - self.apart  # a row below and two above every draw's
        self.points = int(np.ceil((high - low) / self.step)) + 2
        self.rows = int(np.ceil((scale.max() - self.s_low) / self.apart)) + 3
        self.size, self.counts = self.points * self.rows, (k, n)

    def build(self) -> _Table:
        """The table computed (``size`` values of ``log_marginal``)."""
        grid = self.low + self.step * np.arange(self.points)
        scale = self.s_low + self.apart * np.arange(self.rows)
        # each scale a column of log_marginal's: the spacing its own scale needs
        k, n = (np.full(self.rows, c) for c in self.counts)
        self.values = log_marginal(grid[:, None], scale, k, n, slope=True)
        return self

    def __call__(self, x, scale):
        """The value at each ``x``, ``(draws, m)``, of each draw's ``scale``, ``(draws, 1)``."""
        value, slope = self.values
        at = np.clip(((x - self.low) / self.step).astype(np.int64), 0, self.points - 2)
        t = (x - (self.low + self.step * at)) / self.step
        basis = (2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t, 3 * t**2 - 2 * t**3, t**3 - t**2)
        where = (scale[:, 0] - self.s_low) / self.apart
        first = np.minimum(where.astype(np.int64), self.rows - 3) - 1
        r = where - first  # in [1, 2): between the second and third of four rows
        out = np.zeros(x.shape)
        for row in range(4):
            weight = np.prod([(r - other) / (row - other) for other in range(4) if other != row], 0)
            col = (first + row)[:, None]
            out += weight[:, None] * (
                basis[0] * value[at, col]
                + basis[1] * self.step * slope[at, col]
                + basis[2] * value[at + 1, col]
                + basis[3] * self.step * slope[at + 1, col]
            )
        return out


def _mode(approximate, u, e, steps: int = 50, halvings: int = 30):
    """The mode of a strongly concave function of ``(u, e)`` (``approximate`` gives its
    value, gradient and minus its Hessian): Newton's steps, each halved where the value
    would fall, until every gradient is below 1e-6 (the mode places nodes)."""
    value, (g_u, g_e), (c_uu, c_ue, c_ee) = approximate(u, e)
    for _ in range(steps):
        if max(np.abs(g_u).max(initial=0), np.abs(g_e).max(initial=0)) < 1e-6:
            break
        det = c_uu * c_ee - c_ue**2
        step_u, step_e = (c_ee * g_u - c_ue * g_e) / det, (c_uu * g_e - c_ue * g_u) / det
        size = np.ones(u.shape)
        for _ in range(halvings):
            new = approximate(u + size * step_u, e + size * step_e)
            worse = new[0] < value - 1e-12 * (1 + np.abs(value))  # not rounding
            if not worse.any():
                break
            size = np.where(worse, size / 2, size)
        else:
            new = approximate(u + size * step_u, e + size * step_e)
        u, e = u + size * step_u, e + size * step_e
        value, (g_u, g_e), (c_uu, c_ue, c_ee) = new
    return u, e
