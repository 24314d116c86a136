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
import sys

from bayes_eval.errors import InputError

__all__ = ["replicate_rng", "run_sweep"]

DISTRIBUTED_INSTALL = "pip install 'bayes_eval[distributed]'"


def replicate_rng(seed: int, index: int):
    """The random generator of replicate ``index`` of a sweep seeded ``seed``."""
    import numpy as np

    return np.random.default_rng([seed, index])


def run_sweep(task, count: int, shared=None, *, workers=None, scheduler=None, log=sys.stderr):
    """``[task(i, shared) for i in range(count)]``, serially or on a dask cluster.

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
    log : file or None
        Where dask's progress bar draws, on a terminal only.

    Raises
    ------
    InputError
        Workers or a scheduler asked for without ``dask.distributed``, both at once, or a
        scheduler that cannot be reached.
    """
    if workers is None and scheduler is None:
        return [task(index, shared) for index in range(count)]
    if workers is not None and scheduler is not None:
        raise InputError("--workers and --scheduler: give one (a local cluster or a running one)")
    try:
        import distributed
    except ImportError:
        raise InputError(
            f"--workers/--scheduler need dask.distributed: {DISTRIBUTED_INSTALL}"
        ) from None
    with _client(distributed, workers, scheduler) as client:
        data = client.scatter(shared, broadcast=True) if shared is not None else None
        futures = client.map(task, range(count), [data] * count, pure=False)
        if log is not None and log.isatty():
            with contextlib.redirect_stdout(log):  # dask's bar draws on stdout
                distributed.progress(futures)
        return client.gather(futures)


@contextlib.contextmanager
def _client(distributed, workers, scheduler):
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except OSError as exc:
            raise InputError(f"--scheduler: cannot reach {scheduler} ({exc})") from None
        with client:
            yield client
        return
    if workers < 1:
        raise InputError(f"--workers: {workers} must be at least 1")
    cluster = distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, silence_logs=logging.ERROR
    )
    with cluster, distributed.Client(cluster) as client:
        yield client
