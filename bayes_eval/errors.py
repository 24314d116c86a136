"""The one exception type for bad input (the CLI prints it as one line and exits 2), and
the escaping that keeps text quoted from the user's files from acting on a terminal."""

__all__ = ["InputError", "escape_controls"]


class InputError(ValueError):
    """Malformed evidence, spec or argument; the message names file, row, column and rule.

    The message is kept on one line whatever it quotes: a character that would break or
    hide it (a newline or carriage return inside a quoted cell, a tab, a zero-width
    space) is written as its escape, ``\\n``, ``\\r``, ``\\t``, ``\\u200b``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(escape_controls(str(message)))


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every character that is not printable (control characters such as
    ESC and BEL, line breaks, zero-width and direction marks) written as its Python
    escape (``\\x1b``, ``\\x07``, ``\\u202e``), except those in ``keep``."""
    if text.isprintable() and not keep:
        return text
    return "".join(
        c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii")
        for c in text
    )
