"""What a fit returns: the ``Posterior`` (an ArviZ ``DataTree``), its summary table and
its posterior predictive draws and checks.

``posterior`` builds, saves and loads the result tree; ``summary`` turns it into the
one-row-per-(agent, task) table with bounds and their context; ``predictive`` replicates
every observed count and computes the mid-p checks. It imports ``inference`` (for the
diagnostics), ``exact``, ``specs``, ``evidence`` and the base modules.
"""
