"""Agents x tasks: the crossed model and time horizons.

``design`` is what the crossed model is built on (the layout, covariates and predicted
agents); ``model`` builds it on PyMC (imported only when it is fitted), with covariates
read by ``bayes_eval.evidence.covariates``, and ``sampling`` fits it; ``departures`` draws
its pairs' departures and rates back per posterior draw; ``linked`` is the model that
links end-to-end runs to milestone runs (``crossed_joint``), built on ``model``'s
abilities and difficulties and fitted by its fit; ``groups`` makes a fit's groups besides
the draws, ``likelihood`` its pointwise log-likelihood and ``prior`` its prior;
``horizon`` turns a fit into each agent's time horizon and the trend across release
dates. ``grader`` carries a
grader's error. It imports ``counts`` (the layout, the count data, clustered runs and the
grader's terms, shared with ``pooled``), ``results``, ``inference``, ``exact``,
``evidence`` and the base modules, never ``pooled``.
"""
