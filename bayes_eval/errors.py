"""The one exception type for bad input: the CLI prints it as one line and exits 2."""


class InputError(ValueError):
    """Malformed evidence, spec or argument; the message names file, row, column and rule.

    The message is kept on one line whatever it quotes: a character that would break or
    hide it (a newline or carriage return inside a quoted cell, a tab, a zero-width
    space) is written as its escape, ``\\n``, ``\\r``, ``\\t``, ``\\u200b``.
    """

    def __init__(self, message: str) -> None:
        super().__init__("".join(c if c.isprintable() else _escape(c) for c in str(message)))


def _escape(character: str) -> str:
    return character.encode("unicode_escape").decode("ascii")
