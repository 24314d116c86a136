"""Agents x tasks: the crossed model, its covariates and time horizons.

``covariates`` reads what explains abilities and difficulties; ``model`` builds and fits
the crossed model on PyMC (imported only when it is fitted); ``horizon`` turns a fit into
each agent's time horizon and the trend across release dates.
"""
