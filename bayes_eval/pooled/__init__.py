"""The partially pooled models on PyMC (``end_to_end_pooled``, ``hierarchical``, ``joint``,
``ecr_pooled``).

``layout`` lays the evidence out as flat arrays and picks which parameters are sampled
centred; ``models`` builds each model; ``clusters`` marginalises clustered runs;
``sampling`` fits a spec and returns a ``Posterior``; ``rates`` draws the marginalised
rates back; ``likelihood`` gives each observed cell's log-likelihood (ArviZ's
``log_likelihood`` group). PyMC is imported only when a model is built. It imports ``results``,
``inference``, ``exact`` and the layers below them.
"""
