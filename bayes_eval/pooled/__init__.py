"""The partially pooled models on PyMC (``end_to_end_pooled``, ``hierarchical``, ``joint``,
``ecr_pooled``).

``models`` builds each model on the layout of ``bayes_eval.counts`` (the evidence as flat
arrays, which parameters are sampled centred, clustered runs, a grader's terms); ``paths``
sums the joint model's paths; ``sampling`` fits a spec and returns a ``Posterior``;
``rates`` draws the marginalised rates back; ``likelihood`` gives each observed cell's
log-likelihood (ArviZ's ``log_likelihood`` group). PyMC is imported only when a model is
built. It imports ``counts``, ``results``, ``inference``, ``exact`` and the layers below
them.
"""
