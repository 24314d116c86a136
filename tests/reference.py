"""Independent high-precision references for ``X = -log P``, ``P`` a product of Beta factors.

Nothing here shares code with ``bayes_eval.exact``: the references are mpmath
integrals at 40 digits, each checked in ``tests/test_exact_reference.py`` against closed
forms (a single Beta, and telescoping products, which are a single Beta exactly).

* ``bromwich_tails``: the inversion integral of the cumulant generating function along the
  vertical line through the saddlepoint (relative precision in both tails); for factors
  whose shapes are not tiny, where the integrand decays fast.
* ``two_factor_tails``: ``P(p1 p2 >= e^-x)`` as one integral over ``1 - p1``, written in
  ``w = (1 - p1)^b1`` so that a near-singular density ``(1 - p1)^(b1 - 1)`` becomes flat.
* ``beta_tails``: one factor's closed form at 40 digits, and ``boost_beta_tails`` the same
  from Boost's incomplete Beta (through scipy) for shapes up to 10^7, where mpmath's series
  takes minutes; the two agree within 1e-12 where both run (tested).
"""

import math

import mpmath as mp
from scipy import special

mp.mp.dps = 40


def cgf(a, b, s):
    return mp.fsum(
        mp.loggamma(x - s) - mp.loggamma(x) + mp.loggamma(x + y) - mp.loggamma(x + y - s)
        for x, y in zip(a, b, strict=True)
    )


def _saddlepoint(a, b, x):
    """s with K'(s) = x, by bisection on t = log(min a - s)."""
    top = min(a)
    lo, hi = mp.mpf(-60), mp.mpf(80)
    for _ in range(300):
        mid = (lo + hi) / 2
        s = top - mp.exp(mid)
        slope = mp.fsum(
            mp.digamma(x + y - s) - mp.digamma(x - s) for x, y in zip(a, b, strict=True)
        )
        lo, hi = (mid, hi) if slope > x else (lo, mid)
    return top - mp.exp((lo + hi) / 2)


def bromwich_tails(a, b, x):
    """``(P(X <= x), P(X > x))`` for one product, each to relative precision."""
    a, b, x = [mp.mpf(v) for v in a], [mp.mpf(v) for v in b], mp.mpf(x)
    c = _saddlepoint(a, b, x)
    curvature = mp.fsum(mp.psi(1, p - c) - mp.psi(1, p + q - c) for p, q in zip(a, b, strict=True))
    sd = 1 / mp.sqrt(curvature)
    if abs(c) * sd < mp.mpf("1e-3"):  # the pole at s = 0: pass it at a tenth of a sd
        c = -mp.mpf("0.1") / sd
    base = cgf(a, b, c) - c * x

    def integrand(t):
        s = mp.mpc(c, t)
        return mp.re(mp.exp(cgf(a, b, s) - s * x - base) / s)

    points = [0] + [sd * k for k in (0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096)] + [mp.inf]
    value = mp.quad(integrand, points) * mp.exp(base) / mp.pi
    lower = -value if c < 0 else 1 - value
    return lower, 1 - lower if c < 0 else value


def two_factor_tails(a, b, x):
    """``(P(X <= x), P(X > x))`` for two factors of any shapes."""
    (a1, a2), (b1, b2), x = [mp.mpf(v) for v in a], [mp.mpf(v) for v in b], mp.mpf(x)
    u0 = -mp.expm1(-x)  # X <= x  <=>  p1 p2 >= 1 - u0
    top = u0**b1
    norm = b1 * mp.beta(a1, b1)

    def weight(w):
        return (1 - w ** (1 / b1)) ** (a1 - 1)

    def lower(w):  # P(1 - p2 <= (u0 - v) / (1 - v)) at 1 - p1 = v
        v = w ** (1 / b1)
        return weight(w) * mp.betainc(b2, a2, 0, max((u0 - v) / (1 - v), 0), regularized=True)

    def upper(w):  # P(p2 < e^-x / (1 - v))
        v = w ** (1 / b1)
        return weight(w) * mp.betainc(a2, b2, 0, min(mp.exp(-x) / (1 - v), 1), regularized=True)

    below = mp.quad(lower, [0, top / 2, top]) / norm
    above = (mp.quad(upper, [0, top / 2, top]) + mp.quad(weight, [top, (1 + top) / 2, 1])) / norm
    return below, above


def beta_tails(a, b, x):
    """``(P(X <= x), P(X > x))`` for one factor: the closed form.

    mpmath's incomplete Beta is a hypergeometric series that can cancel: at 40 digits
    Beta(2e5, 606)'s upper tail at ``x = 0.005`` comes out 8e-4 off. So each value is
    computed at 40 digits and again at twice as many, doubling until the two agree to 25.
    """
    previous = None
    for digits in (40, 80, 160, 320, 640):
        with mp.workdps(digits):
            current = _beta_tails(mp.mpf(a), mp.mpf(b), mp.mpf(x))
        if previous and all(
            abs(c - p) <= mp.mpf("1e-25") * c for c, p in zip(current, previous, strict=True)
        ):
            return current
        previous = current
    raise ArithmeticError(f"Beta({a}, {b}) tails at x = {x} did not settle by 640 digits")


def _beta_tails(a, b, x):
    if x < mp.log(2):  # each tail from the side where its bound keeps its digits
        u0 = -mp.expm1(-x)
        return mp.betainc(b, a, 0, u0, regularized=True), mp.betainc(b, a, u0, 1, regularized=True)
    t = mp.exp(-x)
    upper = mp.betainc(a, b, 0, t, regularized=True)  # P(p < e^-x)
    lower = 1 - upper if upper < 0.5 else mp.betainc(a, b, t, 1, regularized=True)
    return lower, upper


def boost_beta_tails(a, b, x):
    """``(P(X <= x), P(X > x))`` for one factor, from Boost's regularised incomplete Beta.

    Each tail is computed on the side that keeps its digits; past ``x = 700``, where
    ``e^-x`` nears the end of the doubles, the upper tail is its power law ``e^(-a x) /
    (a B(a, b))``, whose relative remainder (of order ``b e^-x``) is below 1e-290.
    """
    if x < math.log(2):
        u0 = -math.expm1(-x)
        return special.betainc(b, a, u0), special.betaincc(b, a, u0)
    if x > 700:
        upper = math.exp(-a * x - math.log(a) - special.betaln(a, b))
        return 1.0 - upper, upper
    t = math.exp(-x)
    return special.betaincc(a, b, t), special.betainc(a, b, t)
