"""Agents x tasks: the crossed model and time horizons.

``model`` builds and fits the crossed model on PyMC (imported only when it is fitted),
with covariates read by ``bayes_eval.evidence.covariates``; ``linked`` is the model that
links end-to-end runs to milestone runs (``crossed_joint``), built on ``model``'s
abilities and difficulties and fitted by its fit; ``groups`` makes a fit's groups besides
the draws, ``likelihood`` its pointwise log-likelihood and ``prior`` its prior;
``horizon`` turns a fit into each agent's time horizon and the trend across release
dates. It imports ``pooled`` (the layout and the count data), ``results``, ``inference``,
``exact``, ``evidence`` and the base modules.
"""
