"""A run pair's departure drawn again from its exact conditional, in C: a crossed fit of
end-to-end runs keeps no departure (the pairs x draws that were most of its run folder),
and every reader draws each one back from what the fit keeps.

Given a posterior draw of everything else, a pair's standard departure ``e`` and whether
it surprises ``j`` have the joint density ``w_j phi(e) Binomial(k | n, expit(eta + s_j
e))``, ``w_j`` the share of surprising pairs (or the rest), ``s_j`` the wide or narrow
scale. Each component's log density in ``e`` is concave: below it lie the two tangents at
its mode plus and minus one width, whose lower envelope is a two-sided exponential. A
component is chosen by the mass of its envelope, a point is drawn from the envelope and
kept with probability ``exp(h_j(e) - envelope_j(e))``, until one is kept: an exact draw
(rejection sampling), a draw of the posterior with the rest of its draw.

Every value has its own random numbers, keyed by the fit's seed and the value's place
(chain, draw, pair), from a counter-based generator (SplitMix64): the same numbers
whatever the block of draws a reader takes, in every process.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from bayes_eval.resources import cores

__all__ = ["available", "redraw"]

SOURCE = r"""
#include <math.h>
#include <stdint.h>

static inline uint64_t be_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* a uniform in (0, 1): SplitMix64's next output, its top 53 bits */
static inline double be_uniform(uint64_t* state) {
    *state += 0x9e3779b97f4a7c15ULL;
    return ((double) (be_mix(*state) >> 11) + 0.5) * 0x1.0p-53;
}

static inline double be_expit(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double t = exp(x);
    return t / (1.0 + t);
}

/* the log density of e, h(e) = -e^2 / 2 + k log p + (n - k) log (1 - p) with logit p =
   eta + s e (log p and log (1 - p) share one exp and one log1p), and its slope */
static inline double be_density(double e, double eta, double s, double k, double n,
                                double* slope) {
    double x = eta + s * e, t = exp(-fabs(x));
    double p = x >= 0 ? 1.0 / (1.0 + t) : t / (1.0 + t);
    if (slope) *slope = -e + s * (k - n * p);
    return -0.5 * e * e + (x < 0 ? k * x : -(n - k) * x) - n * log1p(t);
}

typedef struct { double log_mass, top, rise, fall, meet; } be_hull;

/* the two tangents of the concave log density at its mode -+ one width (the mode by
   Newton's steps kept inside a bracket, to a thousandth of a width) */
static be_hull be_hull_of(double eta, double s, double k, double n) {
    double low = s * (k - n), high = s * k;
    double rate = (k + 0.5) / (n + 1.0), information = n * rate * (1.0 - rate);
    double e = s * information * (log(rate / (1.0 - rate)) - eta) / (s * s * information + 1);
    if (e < low) e = low;
    if (e > high) e = high;
    double p = be_expit(eta + s * e);
    for (int step = 0; step < 200; step++) {
        double slope = -e + s * (k - n * p), curve = -1.0 - s * s * n * p * (1.0 - p);
        if (slope > 0) low = e; else high = e;
        if (fabs(slope) < 1e-3 / sqrt(-curve)) break;
        double next = e - slope / curve;
        e = (next > low && next < high) ? next : 0.5 * (low + high);
        p = be_expit(eta + s * e);
    }
    double width = 1.0 / sqrt(1.0 + s * s * n * p * (1.0 - p));
    double below = e - width, above = e + width, rise, fall;
    double h_below = be_density(below, eta, s, k, n, &rise);
    double h_above = be_density(above, eta, s, k, n, &fall);
    be_hull h;
    h.rise = rise;
    h.fall = -fall;
    h.meet = (h_above - h_below + h.rise * below + h.fall * above) / (h.rise + h.fall);
    h.top = h_below + h.rise * (h.meet - below);
    h.log_mass = h.top + log(1.0 / h.rise + 1.0 / h.fall);
    return h;
}

/* rows x pairs values: value (r, i) has logit eta[r * pairs + i] + s e, the narrow and
   wide scales and the log weights of row r, the counts of pair i, and its random numbers
   keyed by seed and place[r] + i; 0, or -1 where a value was not drawn in 10,000 tries */
int64_t be_redraw(int64_t rows, int64_t pairs, uint64_t seed, const int64_t* place,
                  const double* eta, const double* narrow, const double* wide,
                  const double* log_usual, const double* log_share,
                  const double* k, const double* n, double* z, uint8_t* surprising) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < pairs; i++) {
            int64_t at = r * pairs + i;
            uint64_t state = be_mix(seed ^ be_mix((uint64_t) (place[r] + i)));
            be_hull hulls[2];
            double scales[2] = {narrow[r], wide[r]};
            hulls[0] = be_hull_of(eta[at], narrow[r], k[i], n[i]);
            double chance = 0.0; /* of the wide component */
            if (isfinite(log_share[r])) {
                hulls[1] = be_hull_of(eta[at], wide[r], k[i], n[i]);
                double odds = log_share[r] + hulls[1].log_mass - log_usual[r] - hulls[0].log_mass;
                chance = be_expit(odds);
            }
            int tries = 0;
            for (;; tries++) {
                if (tries == 10000) return -1;
                int j = be_uniform(&state) < chance;
                be_hull* h = &hulls[j];
                double gap = -log(be_uniform(&state));
                int left = be_uniform(&state) * (1.0 / h->rise + 1.0 / h->fall) < 1.0 / h->rise;
                double e = left ? h->meet - gap / h->rise : h->meet + gap / h->fall;
                double log_kept = be_density(e, eta[at], scales[j], k[i], n[i], 0) - (h->top - gap);
                if (log(be_uniform(&state)) < log_kept) {
                    z[at] = e;
                    surprising[at] = (uint8_t) j;
                    break;
                }
            }
        }
    }
    return 0;
}
"""

_DOUBLES = ctypes.POINTER(ctypes.c_double)


@functools.cache
def _function():
    """The compiled ``be_redraw`` (from the cache of compiled libraries), or None where no
    C compiler is found."""
    from bayes_eval.inference.native import library

    try:
        (loaded,), _ = library.libraries([SOURCE])
    except library.NoCompiler:
        return None
    function = loaded.be_redraw
    function.restype = ctypes.c_int64
    function.argtypes = [
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_uint64,
        ctypes.POINTER(ctypes.c_int64),
        *[_DOUBLES] * 8,
        ctypes.POINTER(ctypes.c_uint8),
    ]
    return function


def available() -> bool:
    """Whether departures can be drawn again here (a C compiler, or the library cached)."""
    return _function() is not None


def redraw(eta, scales, log_weights, counts, place, seed: int):
    """Every run pair's departure and whether it surprises, drawn from their conditional.

    Parameters
    ----------
    eta : ndarray, (rows, pairs)
        The pairs' additive logits, a row per (chain, draw).
    scales, log_weights : pair of ndarray, (rows,) each
        The narrow and wide scales, and the log of the weights of the usual and the
        surprising pairs (the second ``-inf`` where no pair surprises).
    counts : pair of ndarray, (pairs,) each
        Each pair's successes and runs.
    place : ndarray of int64, (rows,)
        The place of each row's first value among all the fit's values: with ``seed``,
        the key of its random numbers.
    seed : int

    Returns
    -------
    z : ndarray, (rows, pairs)
    surprising : ndarray of bool, (rows, pairs)
    """
    function = _function()
    if function is None:
        raise RuntimeError("no C compiler: a crossed fit's departures cannot be drawn here")
    rows, pairs = eta.shape
    eta = np.require(eta, dtype=np.float64, requirements="C")
    per_row = [np.require(x, dtype=np.float64, requirements="C") for x in (*scales, *log_weights)]
    counts = [np.require(x, dtype=np.float64, requirements="C") for x in counts]
    place = np.require(place, dtype=np.int64, requirements="C")
    z, surprising = np.empty((rows, pairs)), np.empty((rows, pairs), dtype=np.uint8)

    def run(at: slice) -> int:  # ctypes lets go of the GIL: the parts run side by side
        return function(
            at.stop - at.start,
            pairs,
            seed,
            _pointer(place[at], ctypes.c_int64),
            _pointer(eta[at], ctypes.c_double),
            *[_pointer(x[at], ctypes.c_double) for x in per_row],
            *[_pointer(x, ctypes.c_double) for x in counts],
            _pointer(z[at], ctypes.c_double),
            _pointer(surprising[at], ctypes.c_uint8),
        )

    parts = max(1, min(cores(), rows))
    bounds = np.linspace(0, rows, parts + 1).astype(int)
    with ThreadPoolExecutor(parts) as pool:
        status = list(pool.map(run, [slice(a, b) for a, b in itertools.pairwise(bounds)]))
    if any(status):
        raise RuntimeError("a departure was not drawn in 10,000 tries (a bug: please report it)")
    return z, surprising.astype(bool)


def _pointer(array: np.ndarray, kind):
    """A C pointer to ``array``'s first value."""
    return array.ctypes.data_as(ctypes.POINTER(kind))
