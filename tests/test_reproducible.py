"""Same seed, same bytes: a pooled fit writes the same ``posterior.nc`` in a fresh process
with an empty PyTensor compile cache; in one whose cache the first has filled and that
has already fitted other tables (one of the same structure, so its compiled model is
reused with other counts, and one of another); in this test process; and on a dask
worker. The files are compared byte for byte.
"""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import bayes_eval

MODEL = "end_to_end_pooled"
SAMPLER = {"draws": 150, "tune": 150, "chains": 2}
SEED = 11
# Sparse and ragged: one trial per cell, an agent with no success, a cell never run.
TABLE = pd.DataFrame(
    dict(
        agent=["a"] * 4 + ["b"] * 3,
        task=["t0", "t1", "t2", "t3", "t0", "t1", "t3"],
        method="end_to_end",
        successes=[1, 0, 1, 1, 0, 0, 0],
        trials=[1, 1, 2, 3, 1, 1, 2],
    )
)


def write_fit(path: Path, warm_up: bool = False) -> None:
    """Write the fit of ``TABLE`` to ``path``; with ``warm_up``, first fit the same
    structure with other counts and a table of another structure."""
    if warm_up:
        for other in (TABLE.assign(successes=[0, 1, 0, 2, 1, 0, 1]), TABLE.iloc[:5]):
            bayes_eval.fit(other, MODEL, seed=3, sampler=SAMPLER)
    bayes_eval.fit(TABLE, MODEL, seed=SEED, sampler=SAMPLER).to_netcdf(path)


def _in_a_new_process(path: Path, compile_dir: Path, warm_up: bool = False) -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r});"
        "from pathlib import Path; from test_reproducible import write_fit;"
        f"write_fit(Path({str(path)!r}), warm_up={warm_up})"
    )
    env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={compile_dir}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_fit_writes_the_same_bytes_wherever_it_runs(tmp_path, dask_scheduler):
    distributed = pytest.importorskip("distributed")
    compile_dir = tmp_path / "pytensor"  # empty: the first process compiles every kernel
    files = {
        "fresh process, empty compile cache": tmp_path / "cold.nc",
        "the compile cache filled, other tables fitted first": tmp_path / "after.nc",
        "this test process": tmp_path / "here.nc",
        "a dask worker": tmp_path / "worker.nc",
    }
    _in_a_new_process(files["fresh process, empty compile cache"], compile_dir)
    key = "the compile cache filled, other tables fitted first"
    _in_a_new_process(files[key], compile_dir, warm_up=True)
    write_fit(files["this test process"])
    with distributed.Client(dask_scheduler) as client:
        on_worker = client.submit(
            bayes_eval.fit, TABLE, MODEL, seed=SEED, sampler=SAMPLER, pure=False
        )
        on_worker.result().to_netcdf(files["a dask worker"])
    reference = files["fresh process, empty compile cache"].read_bytes()
    differ = [name for name, path in files.items() if path.read_bytes() != reference]
    assert not differ, f"posterior.nc differs from a fresh process's in {differ}"
