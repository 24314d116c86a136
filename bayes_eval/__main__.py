"""``python -m bayes_eval`` runs the command line."""

import sys

from bayes_eval.cli.main import main

sys.exit(main())
