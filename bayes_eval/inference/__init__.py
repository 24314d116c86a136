"""Running the samplers: engines, the diagnostics gate, the retry loop and sweeps.

``engines`` compiles and samples a PyMC model (nutpie, or numpyro on JAX) and caches
compiled models; ``diagnostics`` reads R-hat, ESS, divergences and E-BFMI; ``retry``
refits a model that fails them; ``sweep`` runs many fits serially or on a dask cluster;
``interrupts`` defers Ctrl-C while files are written. It knows no model: it imports only
the base modules.
"""
