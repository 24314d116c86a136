"""Checks that refit or compare with a known truth: the milestone assumption,
calibration against end-to-end ground truth, simulation-based calibration, simulation
studies, and the comparison of fits by leave-one-cell-out predictive density.

They sit above ``fit`` (they call it) and below ``outputs`` and ``cli``.
"""
