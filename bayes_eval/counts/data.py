"""A model's counts as its data: successes and failures, each a ``pm.Data``, shared by the
pooled and crossed models."""

from __future__ import annotations

__all__ = ["count_data", "count_data_vars"]


def count_data(name, successes, trials) -> dict:
    """A model's data (``pm.Data`` by name) for ``successes`` of ``trials``: the successes
    as ``name``, the failures as ``name_failures``.

    Failures are data, never ``n - k`` in the graph: PyTensor's canonicaliser rewrites
    ``b + (n - k)`` as ``(b + n) - k``, which rounds a Beta shape below 1e-16 (the
    failure shape of a task mean near 1) to exactly 0, and the gradient to NaN.
    """
    return {name: successes, f"{name}_failures": trials - successes}


def count_data_vars(pm, name, successes, trials, dims=None):
    """The successes and failures of ``count_data`` as ``pm.Data``."""
    data = count_data(name, successes, trials)
    return tuple(pm.Data(key, value, dims=dims) for key, value in data.items())
