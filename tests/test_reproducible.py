"""Same seed, same bytes: a pooled fit writes the same ``posterior.nc`` in a fresh process
with an empty PyTensor compile cache, in one whose cache the first has filled, in one
that has already fitted other tables and models (the same structure among them, so its
compiled model is reused with other counts), in this test process, and on a dask worker.

Each context runs the same fits: ``end_to_end_pooled`` on a sparse end-to-end table and
``hierarchical`` on a ragged milestone table. The files are compared byte for byte.
"""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import bayes_eval

SAMPLER = {"draws": 150, "tune": 150, "chains": 2}
SEED = 11
# Sparse and ragged: one trial per cell, an agent with no success, a cell never run.
END_TO_END = pd.DataFrame(
    dict(
        agent=["a"] * 4 + ["b"] * 3,
        task=["t0", "t1", "t2", "t3", "t0", "t1", "t3"],
        method="end_to_end",
        successes=[1, 0, 1, 1, 0, 0, 0],
        trials=[1, 1, 2, 3, 1, 1, 2],
    )
)
# Tasks of 2 and 3 milestones, a milestone no run passed.
MILESTONES = pd.DataFrame(
    dict(
        task=["t0", "t0", "t1", "t1", "t1", "t2", "t2"],
        method="milestone",
        step=[1, 2, 1, 2, 3, 1, 2],
        successes=[3, 1, 2, 0, 1, 4, 4],
        trials=[4, 4, 3, 3, 3, 5, 5],
    )
)
FITS = {"end_to_end_pooled": END_TO_END, "hierarchical": MILESTONES}


def fit_one(model: str) -> bayes_eval.Posterior:
    """The fit every context makes of ``model``."""
    return bayes_eval.fit(FITS[model], model, seed=SEED, sampler=SAMPLER, log=None)


def write_fits(folder: Path, warm_up: bool = False) -> None:
    """Write each model's fit to ``folder/MODEL.nc``; with ``warm_up``, first fit other
    tables and models, one of the same structure as ``END_TO_END`` with other counts."""
    if warm_up:
        other = END_TO_END.assign(successes=[0, 1, 0, 2, 1, 0, 1])
        bayes_eval.fit(other, "end_to_end_pooled", seed=3, sampler=SAMPLER, log=None)
        bayes_eval.fit(MILESTONES.iloc[:5], "hierarchical", seed=3, sampler=SAMPLER, log=None)
    folder.mkdir(parents=True, exist_ok=True)
    for model in reversed(FITS) if warm_up else FITS:
        fit_one(model).to_netcdf(folder / f"{model}.nc")


def _in_a_new_process(folder: Path, compile_dir: Path, warm_up: bool = False) -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r});"
        "from pathlib import Path; from test_reproducible import write_fits;"
        f"write_fits(Path({str(folder)!r}), warm_up={warm_up})"
    )
    env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={compile_dir}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_fit_writes_the_same_bytes_wherever_it_runs(tmp_path, dask_scheduler):
    distributed = pytest.importorskip("distributed")
    compile_dir = tmp_path / "pytensor"  # empty: the first process compiles every kernel
    contexts = {
        "fresh process, empty compile cache": tmp_path / "cold",
        "fresh process, the compile cache filled": tmp_path / "warm",
        "a process that fitted other tables first": tmp_path / "after",
        "this test process": tmp_path / "here",
        "a dask worker": tmp_path / "worker",
    }
    _in_a_new_process(contexts["fresh process, empty compile cache"], compile_dir)
    _in_a_new_process(contexts["fresh process, the compile cache filled"], compile_dir)
    _in_a_new_process(contexts["a process that fitted other tables first"], compile_dir, True)
    write_fits(contexts["this test process"])
    folder = contexts["a dask worker"]
    folder.mkdir()
    with distributed.Client(dask_scheduler) as client:
        for model, table in FITS.items():
            on_worker = client.submit(
                bayes_eval.fit, table, model, seed=SEED, sampler=SAMPLER, log=None, pure=False
            )
            on_worker.result().to_netcdf(folder / f"{model}.nc")
    for model in FITS:
        reference = (contexts["fresh process, empty compile cache"] / f"{model}.nc").read_bytes()
        differ = [
            name
            for name, where in contexts.items()
            if (where / f"{model}.nc").read_bytes() != reference
        ]
        assert not differ, f"{model}: posterior.nc differs from a fresh process's in {differ}"
