"""Checks that refit or compare with a known truth: the milestone assumption,
calibration against end-to-end ground truth, simulation-based calibration and
simulation studies.

They sit above ``fit`` (they call it) and below ``outputs`` and ``cli``.
"""
