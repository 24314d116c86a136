"""Sweeps of independent replicates (SBC's simulations, a study's designs), serially in
this process or on a ``dask.distributed`` cluster.

Each replicate is a function of its index alone (its random numbers are seeded from the
sweep's seed and its index, never from the order in which replicates finish), so a sweep
gives the same results serially, on any number of workers, and after a worker dies: dask
runs the lost replicates again, and the results are gathered in index order, each once.

``workers=N`` starts a ``LocalCluster`` of N single-threaded worker processes for the
sweep; ``scheduler=ADDRESS`` joins a running cluster (``dask-jobqueue`` on SLURM, dask's
Helm chart or operator on Kubernetes, ``dask scheduler`` by hand). Neither: serial.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time

from bayes_eval.errors import InputError
from bayes_eval.messages import duration_text, progress, progress_shown

__all__ = ["place_arguments", "replicate_rng", "run_sweep"]

DISTRIBUTED_INSTALL = "pip install 'bayes_eval[distributed]'"


def place_arguments(parser) -> None:
    """``--workers N`` and ``--scheduler ADDRESS`` (one or neither) on a study's
    ``argparse`` parser: where its ``run_sweep`` runs."""
    place = parser.add_mutually_exclusive_group()
    place.add_argument("--workers", type=int, help="fit on a local dask cluster of N workers")
    place.add_argument("--scheduler", help="fit on a running dask cluster (tcp://host:8786)")


def replicate_rng(seed: int, index: int):
    """The random generator of replicate ``index`` of a sweep seeded ``seed``."""
    import numpy as np

    return np.random.default_rng([seed, index])


def run_sweep(
    task,
    count: int,
    shared=None,
    *,
    workers=None,
    scheduler=None,
    on_result=None,
    describe=None,
):
    """``[task(i, shared) for i in range(count)]``, serially or on a dask cluster; as
    each replicate finishes, a progress line names it, counts the replicates done and
    estimates the time left.

    Parameters
    ----------
    task : callable
        ``task(index, shared)``; a module-level function where it runs on a cluster.
    count : int
    shared : object, optional
        What every replicate reads; sent to each worker once.
    workers : int, optional
        Start a local cluster of this many worker processes.
    scheduler : str, optional
        The address of a running dask scheduler (``tcp://host:8786``).
    on_result : callable, optional
        ``on_result(index, result)``, called in this process as each replicate finishes
        (in the order they finish), to keep what a long sweep has done.
    describe : callable, optional
        ``describe(index)``, what replicate ``index`` is, for its progress line
        (default ``replicate INDEX + 1``).

    Returns
    -------
    list
        The results in index order.

    Raises
    ------
    InputError
        Workers or a scheduler asked for without ``dask.distributed``, both at once, or a
        scheduler that cannot be reached.
    """
    on_result = _reporting(count, describe, on_result)
    if workers is None and scheduler is None:
        results = []
        for index in range(count):
            results.append(task(index, shared))
            on_result(index, results[-1])
        return results
    if workers is not None and scheduler is not None:
        raise InputError("workers and scheduler: give one (a local cluster or a running one)")
    try:
        import distributed
    except ImportError:
        raise InputError(
            f"workers/scheduler: dask.distributed is not installed ({DISTRIBUTED_INSTALL})"
        ) from None
    with _client(distributed, workers, scheduler) as client:
        data = client.scatter(shared, broadcast=True) if shared is not None else None
        futures = client.map(
            _replicate,
            range(count),
            task=task,
            shared=data,
            own_stdout=scheduler is None,
            pure=False,
        )
        index = {future.key: i for i, future in enumerate(futures)}
        bar = None
        if progress_shown():
            bar = threading.Thread(target=_progress, args=(distributed, futures), daemon=True)
            bar.start()
        results = [None] * count
        for future, result in distributed.as_completed(futures, with_results=True):
            results[index[future.key]] = result
            on_result(index[future.key], result)
        if bar is not None:
            bar.join()
        return results


def _reporting(count: int, describe, on_result):
    """``on_result`` preceded by a progress line: the replicate done, how many of
    ``count`` are done, the time since the sweep began and, until the last, the time
    left at the rate so far (replicates on a cluster finish in parallel, and the rate
    counts them so)."""
    start = time.perf_counter()
    done = 0

    def report(index, result):
        nonlocal done
        done += 1
        elapsed = time.perf_counter() - start
        what = describe(index) if describe is not None else f"replicate {index + 1}"
        text = f"{what} done ({done} of {count}, {duration_text(elapsed)}"
        if done < count:
            text += f"; about {duration_text(elapsed / done * (count - done))} left"
        progress(text + ")")
        if on_result is not None:
            on_result(index, result)

    return report


def _replicate(index: int, task, shared, own_stdout: bool):
    """``task(index, shared)`` on a worker; a local cluster's workers write on this
    process's stdout, so there their stdout (the descriptor) goes to stderr instead, and
    nothing a worker prints gets into the results a command writes on stdout."""
    if own_stdout:
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return task(index, shared)


def _progress(distributed, futures):
    """Dask's progress bar, drawn on stderr (it draws on stdout) until the sweep ends."""
    with contextlib.redirect_stdout(sys.stderr):
        distributed.progress(futures)


@contextlib.contextmanager
def _client(distributed, workers, scheduler):
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except OSError as exc:
            raise InputError(f"scheduler: cannot reach {scheduler} ({exc})") from None
        with client:
            yield client
        return
    if workers < 1:
        raise InputError(f"workers: {workers} must be at least 1")
    # A replicate's failure reaches the caller through its future; what the cluster logs
    # besides (a restarted worker, the progress bar's feed cancelled at shutdown) is noise.
    cluster = distributed.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",  # its HTTP server on a free port, beside others
        scheduler_kwargs={"dashboard": False},
        silence_logs=logging.CRITICAL,
    )
    with cluster, distributed.Client(cluster) as client:
        yield client
