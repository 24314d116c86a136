"""The exact models: closed-form Beta posteriors and the products of Beta factors.

``builders`` turns one (agent, task)'s rows into an ``Estimate`` per exact model;
``products`` summarises products of Beta factors to a stated tolerance, on ``factors``
(one Beta), ``saddlepoint`` and ``grid`` (the FFT convolution); ``expert`` reads expert
best-of-N and golden-solution rows. Nothing here imports PyMC. It imports ``specs``,
``evidence`` and the base modules only.
"""
