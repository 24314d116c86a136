"""Sweeps on dask.distributed: the same SBC ranks, byte for byte, serially, on two workers,
and after a worker is killed mid-sweep; one clear line without the extra."""

import os
import threading
import time

import numpy as np
import pandas as pd
import pytest

from bayes_eval import InputError, sweep
from bayes_eval.sbc import sbc

distributed = pytest.importorskip("distributed")

DESIGN = pd.DataFrame(
    dict(
        task=[f"t{i}" for i in range(5)],
        method="end_to_end",
        successes=[0, 1, 3, 2, 5],
        trials=[5, 1, 8, 4, 5],
    )
)
RUN = dict(simulations=10, draws=39, tune=200, seed=11)


def _bytes(result) -> bytes:
    return result.ranks.to_csv(index=False).encode()


@pytest.fixture(scope="module")
def serial():
    return sbc(DESIGN, "end_to_end_pooled", **RUN)


def test_two_workers_give_the_serial_ranks_byte_for_byte(serial):
    assert serial.ranks.shape == (RUN["simulations"], 2 + len(DESIGN))
    on_two = sbc(DESIGN, "end_to_end_pooled", workers=2, **RUN)
    assert _bytes(on_two) == _bytes(serial)
    pd.testing.assert_series_equal(on_two.p_values, serial.p_values)


def _finished(client) -> tuple[int, dict]:
    """Replicates held in memory, and what each worker is running now."""

    def count(dask_scheduler):
        return sum(
            ts.state == "memory" and "replicate" in ts.key
            for ts in dask_scheduler.tasks.values()
            if isinstance(ts.key, str)
        )

    return client.run_on_scheduler(count), client.processing()


def test_a_worker_killed_mid_sweep_costs_only_its_replicates(serial):
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, silence_logs=50) as cluster,
        distributed.Client(cluster) as client,
    ):
        out = {}
        sweep_thread = threading.Thread(
            target=lambda: out.update(
                result=sbc(DESIGN, "end_to_end_pooled", scheduler=cluster.scheduler_address, **RUN)
            )
        )
        sweep_thread.start()
        deadline = time.monotonic() + 120
        killed = None
        while killed is None and time.monotonic() < deadline:
            done, running = _finished(client)
            busy = [worker for worker, keys in running.items() if keys]
            if done >= 2 and busy:
                killed = busy[0]
                try:
                    client.run(os._exit, 1, workers=[killed], wait=False)
                except Exception:  # the worker's connection closes as it dies
                    pass
            time.sleep(0.05)
        sweep_thread.join(timeout=300)
        assert killed is not None, "the sweep ended before a worker could be killed"
        assert done < RUN["simulations"]
    assert _bytes(out["result"]) == _bytes(serial)


def test_the_sweep_keeps_index_order_and_seeds_by_index():
    def draw(index, shared):
        return float(sweep.replicate_rng(shared, index).random())

    serial = sweep.run_sweep(draw, 6, 3)
    assert serial == [float(np.random.default_rng([3, i]).random()) for i in range(6)]


def test_workers_without_dask_or_with_a_scheduler_too_are_one_line(monkeypatch):
    with pytest.raises(InputError, match="give one"):
        sweep.run_sweep(abs, 2, workers=2, scheduler="tcp://127.0.0.1:1")
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    with pytest.raises(InputError, match=r"pip install 'bayes_eval\[distributed\]'"):
        sweep.run_sweep(abs, 2, workers=2)
