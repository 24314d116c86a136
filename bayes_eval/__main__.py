"""``python -m bayes_eval`` runs the command line."""

from bayes_eval.cli.main import command

command()
