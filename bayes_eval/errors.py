"""The one exception type for bad input: the CLI prints it as one line and exits 2."""


class InputError(ValueError):
    """Malformed evidence, spec or argument; the message names file, row, column and rule."""
