"""The report's figures drawn in a process of their own while the rest is made.

A run folder's figures (ArviZ's and matplotlib's) took most of the time it took to write:
on METR's runs, the exact model's report spent about 3 of its 5 s importing matplotlib and
ArviZ's plots and drawing four figures that need only the summary and a few pairs' draws.
``Figures`` starts one drawing process (``python -m bayes_eval.outputs.drawing``) that
imports them at once; started before the fit (``bayes_eval.pipeline.run``), it is ready
when the fit is, each figure is sent to it as soon as its numbers are known, and
``Figures.drawn`` waits for them. The figures are the same bytes as drawn here; where only
one core is free, or the process cannot start or ends before its figures are drawn, or a
figure's function cannot be sent (one defined in no module), they are drawn in this
process.

A job travels as a pickle file in the figures' own temporary folder and one line on the
process's standard input (the drawing process reads nothing else); it answers one line
per figure, ``name`` and ``ok`` or what failed, so neither pipe ever fills.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

from bayes_eval.resources import PACKAGE, cores

__all__ = ["Figures"]

OK = "ok"
# One: on 2 cores a second drawing process gained nothing (METR's exact report took 4.6
# to 4.8 s either way), each one importing the plotting libraries again.
PROCESSES = 1


class Figures:
    """Figures by file name, drawn by ``draw`` and collected by ``drawn``; a context
    manager that stops its processes and removes its folder on leaving.

    Parameters
    ----------
    processes : int, optional
        How many processes draw, each figure sent to the one with the fewest (0: this
        process draws). By default one per core beyond this process's first, at most
        ``PROCESSES``, where this process has not imported ArviZ's plots already: one
        that has (a notebook, a sweep, a test session, any process that sampled with
        nutpie) draws at no cost of imports, which a new process would pay again.
    """

    def __init__(self, processes: int | None = None) -> None:
        if processes is None:
            processes = 0 if "arviz_plots" in sys.modules else min(PROCESSES, cores() - 1)
        self._folder = tempfile.TemporaryDirectory(prefix="bayes-eval-figures-")
        self._sent: list[str] = []
        self._workers = [worker for worker in (_start() for _ in range(processes)) if worker]
        self._waiting = [[] for _ in self._workers]  # per process, the figures it draws

    def __enter__(self) -> Figures:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def draw(self, name: str, function, *args, **kwargs) -> None:
        """Draw ``function(*args, path=..., **kwargs)`` (a function of
        ``bayes_eval.outputs.plots``) as the figure ``name``."""
        if name in self._sent:
            raise ValueError(f"figure {name} drawn twice")
        path = Path(self._folder.name) / name
        job = (function, args, kwargs, path)
        try:
            sent = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL) if self._workers else None
        except (pickle.PicklingError, AttributeError, TypeError):  # a function of no module
            sent = None
        if sent is None:
            function(*args, path=path, **kwargs)
            self._sent.append(name)
            return
        self._job(name).write_bytes(sent)
        self._sent.append(name)
        at = min(range(len(self._workers)), key=lambda n: len(self._waiting[n]))
        self._waiting[at].append(name)
        try:
            self._workers[at].stdin.write(f"{self._job(name)}\n")
            self._workers[at].stdin.flush()
        except BrokenPipeError:  # the process ended: drawn() draws its figures here
            pass

    def drawn(self) -> dict[str, bytes]:
        """Every figure drawn so far, by name, once all are done (PNG bytes).

        Raises
        ------
        RuntimeError
            A figure that failed: what failed.
        """
        for worker, waiting in zip(self._workers, self._waiting, strict=True):
            _wait(worker, waiting, self._job)
        folder = Path(self._folder.name)
        return {name: (folder / name).read_bytes() for name in self._sent}

    def close(self) -> None:
        """Stop the drawing processes (were they still drawing) and remove the folder."""
        for worker in self._workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            with contextlib.suppress(OSError):  # what it was sent last, were it gone
                worker.stdin.close()
            worker.stdout.close()
        self._workers = []
        self._folder.cleanup()

    def _job(self, name: str) -> Path:
        return Path(self._folder.name) / f"{name}.job"


def _wait(worker, waiting: list, job_of) -> None:
    """The answers of the drawing process ``worker`` to the figures ``waiting`` (names,
    emptied as they come); were it to end first (it could not start, or it crashed),
    those left are drawn here, from their jobs (``job_of(name)``)."""
    while waiting:
        line = worker.stdout.readline()
        if not line:
            for name in waiting:
                _draw_job(job_of(name))
            waiting.clear()
            return
        name, _, answer = line.rstrip("\n").partition("\t")
        waiting.remove(name)
        if answer != OK:
            raise RuntimeError(f"figure {name}: {answer}")


def _start():
    """The drawing process, or None where it cannot start (this process draws then)."""
    env = dict(os.environ)  # the same package as this process, wherever it was found
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(PACKAGE.parent), env.get("PYTHONPATH"))))
    try:
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "bayes_eval.outputs.drawing"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
    except OSError:
        return None


def _draw_job(job: Path) -> None:
    """Draw the figure of the pickled ``job`` (its function, arguments and path)."""
    with job.open("rb") as file:
        function, args, kwargs, path = pickle.load(file)
    function(*args, path=path, **kwargs)


def _serve() -> None:
    """The drawing process: import the plotting libraries, then draw each job named on
    standard input into its path, answering ``name<TAB>ok`` or what failed, until the
    input ends."""
    import matplotlib

    matplotlib.use("Agg")
    import arviz_plots  # noqa: F401 - imported before the first job, while the fit runs
    import matplotlib.pyplot  # noqa: F401

    import bayes_eval.outputs.plots  # noqa: F401

    for line in sys.stdin:
        job = Path(line.rstrip("\n"))
        name = job.name.removesuffix(".job")
        try:
            _draw_job(job)
            answer = OK
        except Exception as exc:  # said to the process that asked, which reports it
            answer = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"{name}\t{answer}", flush=True)


if __name__ == "__main__":
    try:
        _serve()
    except KeyboardInterrupt:  # the command was interrupted: its process reports it
        sys.exit(130)
