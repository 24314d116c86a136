"""``bayes-eval``: the command line.

Errors are one line on stderr starting ``error:``; exit status 2 for bad input or
usage, 1 for a failed command; no traceback unless ``--debug``. The library's notes
(``bayes_eval.messages``) follow a command that succeeded, one ``note:`` line each; its
progress shows on stderr when that is a terminal (unless ``--quiet``). Each command is a module
of this folder: ``arguments(commands)`` adds its flags, ``run(args)`` translates them into
calls of the library and returns the exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import os
import signal
import sys
import traceback
import warnings

from bayes_eval.cli import (
    agents,
    backtest,
    calibrate,
    check,
    compare,
    example,
    fit,
    horizon,
    plan,
    report,
    simulate,
)
from bayes_eval.cli.options import Parser, as_flags
from bayes_eval.cli.terminal import show
from bayes_eval.errors import InputError
from bayes_eval.inference import interrupts
from bayes_eval.messages import collected, showing_progress

EPILOG = """\
start here:
  bayes-eval fit "$(bayes-eval example)"            fit the shipped example
  bayes-eval fit TABLE.csv --model joint --out RUN  fit your table, keep the run
  bayes-eval report RUN --threshold 0.05 --out REPORT
  bayes-eval COMMAND --help                         the options of one command

reference: the project's README and docs/ (models, evidence, outputs, verdicts)
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayes_eval")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="bayes-eval",
        description="How likely is an AI agent to succeed at a task, with a credible upper bound.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=Parser,
        help="what to do (bayes-eval COMMAND --help: its flags)",
    )
    for module in COMMAND_MODULES.values():
        module.arguments(commands)
    return parser


# The commands, in the order --help lists them.
COMMAND_MODULES = {
    "fit": fit,
    "check": check,
    "compare": compare,
    "compare-agents": agents,
    "calibrate": calibrate,
    "simulate": simulate,
    "report": report,
    "plan": plan,
    "horizon": horizon,
    "backtest": backtest,
    "example": example,
}
COMMANDS = {name: module.run for name, module in COMMAND_MODULES.items()}


def _drop_quietly(exc: BaseException) -> None:
    """Finalise what the interrupt cut off, without a word. An object whose constructor
    the signal stopped half-way (an HDF5 file being opened) fails in its ``__del__``, and
    Python prints that as "Exception ignored" with a traceback, after the command's own
    line: its frames are dropped here, and finalisers' errors from now on (at exit too)
    are not shown."""
    sys.unraisablehook = lambda unraisable: None
    exc.__traceback__ = None
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bayes-eval``; returns the exit status. With no arguments it prints
    the help."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        _parser().print_help()
        return 0
    stdout = sys.stdout
    sys.stdout = _Output(stdout)
    try:
        return _main(argv)
    finally:
        sys.stdout = stdout


def command() -> None:
    """The console script (and ``python -m bayes_eval``): ``main``, then the process ends
    at once. A command has written and closed everything it writes by then, and its
    sweeps' workers are stopped; what is skipped is Python's teardown of the modules it
    loaded, about 0.9 s after a fit (PyMC, PyTensor, xarray), which an interrupt would
    otherwise wait for too."""
    status = main()
    for stream in (sys.stdout, sys.stderr):  # None where the stream was closed
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    os._exit(status)


def _main(argv: list[str]) -> int:
    debug = "--debug" in argv
    with interrupts.raising(), warnings.catch_warnings(), collected() as notes:
        if not debug:  # a warning is for the developer; the user gets notes and errors
            warnings.simplefilter("ignore")
        try:
            args = _parser().parse_args(argv)
            with _progress(args):
                status = COMMANDS[args.command](args)
            sys.stdout.flush()  # a full device or a closed pipe is met here, not at exit
            for text in notes:
                show(f"note: {text}", file=sys.stderr)
            return status
        except interrupts.Interrupted as exc:  # stop at once: no retry, no partial output
            if debug:
                traceback.print_exc()
            show(f"interrupted ({exc})", file=sys.stderr)
            if not debug:
                _drop_quietly(exc)
            return exc.exit_status
        except BrokenPipeError:  # `| head`: stop quietly, as standard tools do
            _discard_output()
            return 128 + signal.SIGPIPE
        except InputError as exc:
            if debug:
                traceback.print_exc()
            show(f"error: {as_flags(str(exc))}", file=sys.stderr)
            return 2
        except OSError as exc:  # a file or standard output that cannot be written
            if debug:
                traceback.print_exc()
            where = f"{exc.filename}: " if exc.filename else ""
            show(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
            _discard_output()
            return 2
        except Exception as exc:  # a failed fit: say so in one line
            if debug:
                traceback.print_exc()
            command = next((a for a in argv if not a.startswith("-")), "bayes-eval")
            show(f"error: {command} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1


class _Output:
    """``sys.stdout`` while a command runs: a write that fails (standard output closed, a
    full device) raises an ``OSError`` that says so; a closed pipe stays a
    ``BrokenPipeError``."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        if self.stream is None:  # started with standard output closed (`>&-`)
            raise OSError(errno.EBADF, "cannot write standard output (it is closed)")
        return self._failing_as_output(self.stream.write, text)

    def flush(self) -> None:
        if self.stream is not None:
            self._failing_as_output(self.stream.flush)

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()

    def __getattr__(self, name):
        return getattr(self.stream, name)

    @staticmethod
    def _failing_as_output(method, *args):
        try:
            return method(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write standard output ({exc.strerror})") from None


def _discard_output() -> None:
    """Send what standard output still buffers to ``/dev/null``, so that Python's flush
    at exit does not fail again and print a traceback."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _progress(args):
    """Progress on stderr where it is a terminal and the command is not ``--quiet``."""
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        return contextlib.nullcontext()
    return showing_progress(sys.stderr)


if __name__ == "__main__":
    command()
