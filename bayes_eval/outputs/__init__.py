"""What a run leaves behind: the run folder, the HTML report and its figures.

``runfolder`` writes a run's files all at once or not at all; ``report`` writes the
verdicts and the HTML report from a fit; ``plots`` draws the figures (matplotlib and
arviz-plots, imported only here). It imports the layers below it and never fits a model:
the report is given the fit and what its checks found (``bayes_eval.checks.fitted``).
"""
