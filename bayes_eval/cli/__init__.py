"""The command line: ``bayes-eval`` and its commands.

A thin translation of flags into calls of the library, and of the library's errors into
one line and exit status 2. Nothing below imports it.
"""
