"""The command line: ``bayes-eval`` and its commands.

``main`` parses the arguments and dispatches to one module per command (``fit``,
``check``, ``calibrate``, ``simulate``, ``report``, ``plan``, ``horizon``, ``example``),
each a thin translation of flags into calls of the library (``bayes_eval.run``,
``bayes_eval.report``, ...); ``options`` holds the flags several commands share, and
``terminal`` what they print. Library errors become one line and exit status 2, with the
library's parameter names read as flags. Nothing else in the package imports it.
"""
