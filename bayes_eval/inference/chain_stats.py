"""Rank-normalised split R-hat, bulk and tail ESS and the quantiles' Monte Carlo standard
errors of many quantities at once.

``arviz_stats``' array functions compute each quantity's diagnostics in a Python loop over
its elements (``make_ufunc``), ranking each element's draws afresh for every statistic.
These are the same statistics (Vehtari et al. 2021, as ``arviz_stats`` computes them,
step for step) over a whole ``(element, chain, draw)`` array: the ranks by one sort along
each element's draws, the autocovariances by one FFT along the draws, and Geyer's initial
positive and monotone sequences as a first non-positive pair and a running minimum, not a
loop; the bulk's ranks serve R-hat and ESS alike. On METR's crossed fit (1,096
quantities, 4 x 2000 draws) that is 2.3 times as fast (``benchmarks/diagnostics_speed.py``):
sorting the draws is most of the work either way. The results equal ``arviz_stats``' to
rounding (``tests/test_chain_stats.py`` compares every element of random chains,
autocorrelated, tied, constant and with NaN, and the gate's table of a real fit with
``arviz_stats.summary``).

An element with a NaN draw gets NaN, as in ``arviz_stats``. Elements are taken
``BLOCK`` at a time, so the work space stays near 25 MB whatever the table.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

__all__ = ["convergence", "quantile_mcse"]

# Elements per block: 32 elements of 4 chains x 2,000 draws take about 25 MB of work
# space (ranks, FFTs); 128 took about 100 MB and were no faster (2.2 s against 2.0 s on
# METR's crossed fit), 1,024 took 750 MB and were slower (benchmarks/diagnostics_speed.py).
BLOCK = 32
# Blom's fractional offset of the ranks' normal scores (as arviz_stats).
BLOM = 3 / 8
# The normal's probabilities one standard deviation either side of its mean, as
# arviz_stats' quantile MCSE writes them.
SIGMA_PROBS = np.array([[0.1586553], [0.8413447]])


def convergence(values: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R-hat, bulk ESS and tail ESS of each ``(chain, draw)`` row of ``values``
    (``(element, chain, draw)``), as ``arviz_stats``' ``rhat`` (rank-normalised split:
    the larger of the bulk's and the folded tail's) and ``ess`` (``method="bulk"``, and
    ``"tail"`` with ``prob``: the smaller ESS of the indicators of the draws at most the
    ``prob`` and ``1 - prob`` quantiles) give them. NaN where an element has a NaN draw;
    R-hat NaN with fewer than 2 chains, all three with fewer than 4 draws."""
    values = np.asarray(values, dtype=float)
    elements, chains, draws = values.shape
    out = tuple(np.full(elements, np.nan) for _ in range(3))
    if draws < 4:
        return out
    low, high = sorted((prob, 1.0 - prob))
    for at, block in _blocks(values):
        split = _split_chains(block)
        scaled = _z_scale(split)  # the bulk's ranks serve R-hat and ESS alike
        if chains >= 2:
            median = np.median(split.reshape(len(split), -1), axis=1)
            folded = _z_scale(np.abs(split - median[:, None, None]))
            out[0][at] = np.maximum(_rhat(scaled), _rhat(folded))
        out[1][at] = _ess(scaled)
        tails = [_quantile_ess(split, block, p) for p in (low, high)]
        out[2][at] = np.minimum(*tails)
    return out


def quantile_mcse(values: np.ndarray, prob: float) -> np.ndarray:
    """The Monte Carlo standard error of each ``(chain, draw)`` row's ``prob`` quantile
    (``values`` is ``(element, chain, draw)``), as ``arviz_stats``' ``mcse`` with
    ``method="quantile"`` gives it: half the distance between the order statistics at
    the Beta quantiles of one standard deviation around ``prob``, for the ESS of the
    indicator of the draws at most the quantile. NaN where an element has a NaN draw, or
    with fewer than 4 draws."""
    values = np.asarray(values, dtype=float)
    elements, _, draws = values.shape
    out = np.full(elements, np.nan)
    if draws < 4:
        return out
    for at, block in _blocks(values):
        ess = _quantile_ess(_split_chains(block), block, prob)
        with np.errstate(invalid="ignore"):
            ppf = stats.beta.ppf(SIGMA_PROBS, ess * prob + 1, ess * (1 - prob) + 1)
        ordered = np.sort(block.reshape(len(block), -1), axis=1)
        size = ordered.shape[1]
        low = np.floor(np.fmax(ppf[0] * size - 1, 0)).astype(int)
        high = np.ceil(np.fmin(ppf[1] * size - 1, size - 1)).astype(int)
        rows = np.arange(len(block))
        out[at] = (ordered[rows, high] - ordered[rows, low]) / 2
    return out


def _blocks(values: np.ndarray):
    """``values`` ``BLOCK`` elements at a time, those with a NaN draw left out: per block,
    its elements' indices and their draws."""
    for start in range(0, len(values), BLOCK):
        block = values[start : start + BLOCK]
        valid = ~np.isnan(block).any(axis=(1, 2))
        if valid.any():
            yield start + np.flatnonzero(valid), block[valid]


def _split_chains(block: np.ndarray) -> np.ndarray:
    """Each chain's first and last ``draws // 2`` draws as chains of their own (the
    first halves, then the second halves; a middle draw left out)."""
    half = block.shape[2] // 2
    return np.concatenate([block[:, :, :half], block[:, :, -half:]], axis=1)


def _z_scale(split: np.ndarray) -> np.ndarray:
    """The normal scores of each element's average ranks over all its draws."""
    flat = split.reshape(split.shape[0], -1)
    ranks = _average_ranks(flat)
    size = flat.shape[1]
    return special.ndtri((ranks - BLOM) / (size - 2 * BLOM + 1)).reshape(split.shape)


def _average_ranks(flat: np.ndarray) -> np.ndarray:
    """Each row's ranks, 1 to its length, ties given their average (as
    ``scipy.stats.rankdata(method="average")``, exactly: a tie group from sorted place
    ``s`` to ``e`` ranks ``(s + e) / 2 + 1``), sorted by numpy's default sort, which needs
    no stability for average ranks."""
    order = np.argsort(flat, axis=1)
    ordered = np.take_along_axis(flat, order, axis=1)
    size = flat.shape[1]
    place = np.arange(size)
    first = np.ones(ordered.shape, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ranks = place + 1.0
    if not first.all():  # ties: each place ranked at its group's middle
        last = np.ones(ordered.shape, dtype=bool)
        last[:, :-1] = first[:, 1:]
        start = np.maximum.accumulate(np.where(first, place, 0), axis=1)
        end = np.minimum.accumulate(np.where(last, place, size - 1)[:, ::-1], axis=1)[:, ::-1]
        ranks = (start + end) / 2.0 + 1.0
    out = np.empty(flat.shape)
    np.put_along_axis(out, order, np.broadcast_to(ranks, flat.shape), axis=1)
    return out


def _rhat(split: np.ndarray) -> np.ndarray:
    draws = split.shape[2]
    between = draws * np.var(split.mean(axis=2), axis=1, ddof=1)
    within = np.var(split, axis=2, ddof=1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a constant element: as arviz_stats
        return np.sqrt((between / within + draws - 1) / draws)


def _quantile_ess(split, whole, prob: float) -> np.ndarray:
    quantile = np.quantile(whole.reshape(whole.shape[0], -1), prob, axis=1)
    return _ess((split <= quantile[:, None, None]).astype(float))


def _autocov(split: np.ndarray) -> np.ndarray:
    """Each chain's autocovariance at every lag (as arviz_stats' ``autocov``)."""
    from scipy.fft import next_fast_len

    draws = split.shape[2]
    size = next_fast_len(2 * draws)
    centred = split - split.mean(axis=2, keepdims=True)
    spectrum = np.fft.rfft(centred, n=size, axis=2)
    spectrum *= np.conjugate(spectrum)
    return np.fft.irfft(spectrum, n=size, axis=2)[:, :, :draws] / draws


def _ess(split: np.ndarray) -> np.ndarray:
    """The ESS of each element's ``(chain, draw)`` draws by Geyer's initial positive and
    monotone sequences (arviz_stats' ``_ess``: the same sums, as arrays)."""
    elements, chains, draws = split.shape
    size = chains * draws
    out = np.full(elements, float(size))  # a constant element: its draws' number
    spread = split.reshape(elements, -1)
    varying = (spread.max(axis=1) - spread.min(axis=1)) >= np.finfo(float).resolution
    if not varying.any():
        return out
    split = split[varying]
    acov = _autocov(split)
    mean_var = acov[:, :, 0].mean(axis=1) * draws / (draws - 1.0)
    var_plus = mean_var * (draws - 1.0) / draws
    if chains > 1:
        var_plus = var_plus + np.var(split.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]
    rho[:, 0] = 1.0
    # Pair k is (rho[2k], rho[2k + 1]), pair 0 (1, rho[1]). arviz_stats reads pairs
    # 1, 2, ... while the one before summed above 0, at most ``most`` of them; J is the
    # last read (0: none).
    most = max((draws + 1) // 2 - 2, 0)
    sums = rho[:, 0 : 2 * most + 2 : 2] + rho[:, 1 : 2 * most + 2 : 2]  # pairs 0 .. most
    ends = np.concatenate([sums[:, 1:] <= 0.0, np.ones((len(rho), 1), dtype=bool)], axis=1)
    read = np.minimum(ends.argmax(axis=1) + 1, most)
    read = np.where(sums[:, 0] > 0.0, read, 0)
    tau = np.empty(len(rho))
    for j in np.unique(read):  # the elements that read J pairs, at once
        at = read == j
        if j == 0:
            tau[at] = 0.0  # -1 + rho[0]
            continue
        # pairs 0 .. J - 1, each clipped to the one before (Geyer's monotone sequence),
        # and pair J's first term where it is positive or the pair was kept
        kept = np.minimum.accumulate(sums[at, :j], axis=1).sum(axis=1)
        even = rho[at, 2 * j]
        tail = np.where((even > 0.0) | (sums[at, j] >= 0.0), even, 0.0)
        tau[at] = -1.0 + 2.0 * kept + tail
    tau = np.maximum(tau, 1.0 / np.log10(size))
    ess = size / tau
    out[varying] = ess
    return out
