"""Expert best-of-N bits and golden-solution bounds (Phuong et al. 2024): point values.

Neither is a posterior. Best-of-N charges ``log2(i (i + 1))`` bits for an expert's
choice of the ``i``-th action and reads ``2^-bits`` as a success probability (known to
be poorly related to the true rate); the golden solution's ``exp(sum logprob)`` is a
lower bound on ``P`` only.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["best_of_n_runs", "golden_runs", "step_bits", "unguided_bits"]

GROUP = ["agent", "task", "milestone", "run"]


def step_bits(chosen_index):
    """Bits charged for choosing the ``chosen_index``-th (1-based) action: ``log2(i (i + 1))``."""
    i = np.asarray(chosen_index, dtype=float)
    if np.any(i < 1):
        raise ValueError("chosen_index is 1-based")
    return np.log2(i) + np.log2(i + 1)


def unguided_bits(rate: float) -> int:
    """Phuong et al.'s cost of an unguided milestone solved at ``rate``: ``ceil(-log2 rate)``."""
    if not 0 < rate <= 1:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    return math.ceil(-math.log2(rate) - 1e-12)


def best_of_n_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per expert-guided run: total ``bits``, ``log_p = -bits ln 2`` and ``p = 2^-bits``.

    ``rows`` are normalised ``expert_best_of_n`` evidence rows.
    """
    runs = rows.assign(bits=step_bits(rows["chosen_index"])).groupby(GROUP, sort=False)
    out = runs.agg(bits=("bits", "sum"), steps=("step", "size")).reset_index()
    out["log_p"] = -out["bits"] * math.log(2)
    out["p"] = np.exp2(-out["bits"])
    return out


def golden_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per golden solution: ``log_p = sum logprob`` (a lower bound on ``log P``) and ``bits``."""
    runs = rows.groupby(GROUP, sort=False)
    out = runs.agg(log_p=("logprob", "sum"), steps=("step", "size")).reset_index()
    out["bits"] = -out["log_p"] / math.log(2)
    out["p"] = np.exp(out["log_p"])
    return out
