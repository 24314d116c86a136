"""Sweeps on dask.distributed: the same SBC ranks, byte for byte, serially, on two workers,
and after a worker is killed mid-sweep; one clear line without the extra."""

import os
import threading
import time

import numpy as np
import pandas as pd
import pytest

from bayes_eval import InputError
from bayes_eval.checks.sbc import sbc
from bayes_eval.inference import sweep

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


# an SBC on a cluster; the studies' and holdout's sweeps keep the cluster's serial numbers
@pytest.mark.slow
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


@pytest.mark.slow  # an SBC on a cluster, a worker killed
def test_a_worker_killed_mid_sweep_costs_only_its_replicates(serial):
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=50
        ) as cluster,
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


def _square(index, shared):
    return index * index + shared


def test_each_result_is_handed_over_once_as_it_finishes(dask_scheduler):
    for place in ({}, {"scheduler": dask_scheduler}):
        seen = []
        results = sweep.run_sweep(
            _square, 7, 1, on_result=lambda i, r, seen=seen: seen.append((i, r)), **place
        )
        assert results == [i * i + 1 for i in range(7)]
        assert sorted(seen) == list(enumerate(results))


def _noisy(index, shared):
    print(f"replicate {index} says hello")
    return index


def test_what_a_local_worker_prints_stays_off_stdout(capfd):
    """A local cluster's workers share this process's stdout, where a command writes its
    results (``--format csv``); what they print goes to stderr."""
    assert sweep.run_sweep(_noisy, 3, workers=1) == [0, 1, 2]
    out, err = capfd.readouterr()
    assert "says hello" not in out
    assert "replicate 2 says hello" in err


def test_the_simulation_studies_give_the_serial_results_on_a_cluster(dask_scheduler):
    from bayes_eval.checks.simulate import paths_study, variance_sweep

    variance = dict(replications=5000, seed=4)
    serial = variance_sweep([1, 3], 0.01, [5, 20], **variance)
    assert len(serial) == 4
    pd.testing.assert_frame_equal(
        variance_sweep([1, 3], 0.01, [5, 20], scheduler=dask_scheduler, **variance), serial
    )
    paths = dict(strengths=(0.0, 0.3), models=("mats2024",), tasks=6, seed=2)
    serial = paths_study(**paths)
    assert list(serial["strength"]) == [0.0, 0.3]
    pd.testing.assert_frame_equal(paths_study(scheduler=dask_scheduler, **paths), serial)
