"""What the package reads: evidence tables, run files, Inspect logs and side tables.

``table`` holds ``Evidence``, the normalised table every model reads, and the contract a
table must keep (one located line per broken rule); ``runs`` and ``columnar`` read one row
per run (CSV, JSON Lines, Parquet), ``inspect_logs`` Inspect AI's logs, and ``covariates``
the side tables of agents and tasks that explain abilities and difficulties; ``pairs``
holds the rows a model reads per (agent, task) (``PairRows``). It imports
only the package's base modules (``constants``, ``errors``, ``files``).
"""
