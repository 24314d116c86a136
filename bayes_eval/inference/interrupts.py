"""Interrupts that stop everything at once.

SIGINT (Ctrl-C) and SIGTERM raise ``Interrupted`` while ``raising()`` is active. It is not
a ``KeyboardInterrupt``: samplers catch that one and return the draws made so far (nutpie
does), which the package would then diagnose and refit. ``Interrupted`` passes through
them, so a fit stops, nothing is retried and nothing is written. ``deferred()`` holds
the signals back for the few system calls that must not be cut in two (swapping a
finished run folder into place); a signal that arrives meanwhile is delivered after.
A signal that lands while a finaliser (``__del__``) runs would be swallowed by Python
and printed as "Exception ignored"; ``raising()`` sends it again a millisecond later
(by SIGALRM), so that it reaches the code that stops the command. A signal that lands
while a module is being imported waits, the same way, until the import is done: raised
inside a compiled extension's initialiser (jaxlib's, imported by matplotlib on a fit's
first figure), it aborts the whole process.

Standard library only: the command line installs the handlers before it imports the
rest of the package.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

__all__ = ["Interrupted", "deferred", "raising"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):  # noqa: N818 (it is a signal, like KeyboardInterrupt)
    """SIGINT or SIGTERM arrived; ``exit_status`` is the shell's ``128 + signal``."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _raise(signum, frame):
    if _importing(frame):
        _send_again(signum, 0.01)
        return
    raise Interrupted(signum)


def _importing(frame) -> bool:
    """Whether a module is being imported on the stack that ends in ``frame``."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _send_again(signum: int, seconds: float) -> None:
    """Deliver ``signum`` again after ``seconds``, by SIGALRM (``raising()`` restores the
    SIGALRM handler it found when it ends)."""
    signal.signal(signal.SIGALRM, lambda _, frame: _raise(signum, frame))
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def raising():
    """Within the block, SIGINT and SIGTERM raise ``Interrupted`` (main thread only;
    elsewhere the block runs with the handlers it finds)."""
    if not _main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _raise) for signum in SIGNALS}
    hook = sys.unraisablehook
    alarm = signal.getsignal(signal.SIGALRM)

    def send_again(unraisable):
        """An ``Interrupted`` from a finaliser comes again a millisecond later, from a
        timer, after the finaliser (raised at once, it would land in this hook and be
        swallowed again); anything else goes to the hook found."""
        if isinstance(unraisable.exc_value, Interrupted):
            _send_again(unraisable.exc_value.signum, 1e-3)
        else:
            hook(unraisable)

    sys.unraisablehook = send_again
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, alarm)
        if sys.unraisablehook is send_again:  # unless the block put its own in place
            sys.unraisablehook = hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferred():
    """Within the block, SIGINT and SIGTERM wait; they are delivered when it ends."""
    if not _main_thread():
        yield
        return
    # SIGALRM too: it carries a signal sent again by ``raising()``
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (*SIGNALS, signal.SIGALRM))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
