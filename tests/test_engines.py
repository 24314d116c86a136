"""The MCMC engines: numpyro (JAX) against nutpie on the same tables, within Monte Carlo
error; auto's choice and its reason; one clear line where the JAX extra is missing."""

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval import InputError
from bayes_eval.cli.main import main
from bayes_eval.inference import engines
from bayes_eval.inference.engines import AUTO_JAX_CELLS
from bayes_eval.resources import shipped_datasets, shipped_dir

pytest.importorskip("numpyro")


def _within_mcse(first, second, limit=3.0):
    """Every pair's upper bounds differ by at most ``limit`` combined MCSE."""
    a, b = first.summary(), second.summary()
    assert list(a["task"]) == list(b["task"]) and list(a["agent"]) == list(b["agent"])
    z = (a["upper"] - b["upper"]).abs() / np.hypot(a["upper_mcse"], b["upper_mcse"])
    assert z.max() <= limit, z.max()
    assert a["diagnostics_ok"].all() and b["diagnostics_ok"].all()
    return z


def _both(table, model, sampler):
    return [
        bayes_eval.fit(table, model, sampler={**sampler, "engine": e})
        for e in ("nutpie", "numpyro")
    ]


@pytest.mark.slow  # the default run compares the engines on a sparse table (below)
def test_numpyro_and_nutpie_agree_on_the_shipped_pooled_example():
    nutpie, numpyro = _both(
        shipped_datasets()["example_pooled"], "hierarchical", {"draws": 1000, "chains": 4}
    )
    _within_mcse(nutpie, numpyro)
    provenance = numpyro.summary()["provenance"].iloc[0]
    assert "numpyro (cpu) 4 chains x 1000 draws" in provenance


def test_numpyro_on_a_sparse_ragged_table():
    """One trial per cell, cells never run, agents with no success: the same bounds."""
    rng = np.random.default_rng(5)
    rows = [
        dict(agent=f"a{a}", task=f"t{t}", successes=int(rng.random() < rate), trials=1)
        for a, rate in enumerate((0.0, 0.3, 0.6))
        for t in range(12)
        if rng.random() < 0.7
    ]
    table = pd.DataFrame(rows).assign(method="end_to_end")
    assert table.groupby("agent")["successes"].sum().min() == 0
    _within_mcse(*_both(table, "end_to_end_pooled", {"draws": 1000, "chains": 4}))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["end_to_end_pooled", "joint", "crossed", "crossed_milestones"])
def test_numpyro_and_nutpie_agree_on_every_pooled_model(model):
    _within_mcse(*_both(shipped_datasets()["example_pooled"], model, {}))


def test_engines_named_run_where_asked():
    assert engines.choose_engine("nutpie", 10**6) == engines.Engine("nutpie", "cpu")
    assert engines.choose_engine("pymc", 10) == engines.Engine("pymc", "cpu")
    assert engines.choose_engine("numpyro", 10).name == "numpyro"


def test_auto_chooses_and_says_why(monkeypatch):
    chosen = engines.choose_engine("auto", 10**6)
    assert (chosen.name, chosen.device) == ("nutpie", "cpu")  # no GPU on a test machine
    assert "no GPU" in chosen.reason
    monkeypatch.setattr(engines, "_jax_device", lambda: "gpu: NVIDIA H100")
    small = engines.choose_engine("auto", AUTO_JAX_CELLS - 1)
    large = engines.choose_engine("auto", AUTO_JAX_CELLS)
    assert small.name == "nutpie" and "compile time" in small.reason
    assert (large.name, large.device) == ("numpyro", "gpu: NVIDIA H100")
    assert "a GPU" in large.reason
    monkeypatch.setattr(engines, "_jax_installed", lambda: False)
    assert "pip install 'bayes_eval[jax]'" in engines.choose_engine("auto", 10**6).reason


def test_auto_names_its_reason_in_the_provenance():
    table = pd.DataFrame(dict(task=["t1", "t2"], method="end_to_end", successes=[1, 0]))
    post = bayes_eval.fit(
        table.assign(trials=3),
        "end_to_end_pooled",
        sampler={"engine": "auto", "draws": 200, "tune": 200},
    )
    assert "engine chosen by auto: no GPU" in post.summary()["provenance"].iloc[0]


def test_numpyro_without_the_extra_is_one_line_on_how_to_install(monkeypatch, capsys):
    monkeypatch.setattr(engines, "_jax_installed", lambda: False)
    with pytest.raises(InputError, match=r"pip install 'bayes_eval\[jax\]'"):
        engines.choose_engine("numpyro", 10)
    path = shipped_datasets()["example_pooled"]
    code = main(["fit", str(path), "--model", "hierarchical", "--engine", "numpyro"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: engine numpyro needs JAX")


@pytest.mark.slow  # compiles with JAX twice; numpyro keeps its sparse-table check (above)
def test_jax_keeps_its_compilations_in_the_users_cache_folder(tmp_path):
    """A fresh process with XDG_CACHE_HOME set: the numpyro fit's compiled programs land
    in XDG_CACHE_HOME/bayes_eval/jax, and a second process, loading them, draws the same
    bytes (on the CPU; a GPU promises Monte Carlo error only)."""
    import os
    import subprocess
    import sys

    code = (
        "import bayes_eval, hashlib;"
        "p = bayes_eval.fit(bayes_eval.resources.shipped_datasets()['example_pooled'],"
        " 'end_to_end_pooled', sampler={'engine': 'numpyro', 'draws': 100, 'tune': 100,"
        " 'chains': 2});"
        "print(hashlib.sha256(p.draws['p_task'].values.tobytes()).hexdigest())"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    first, second = (
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    )
    assert any((tmp_path / "bayes_eval" / "jax").iterdir())
    assert first == second


def test_the_compile_cache_evicts_the_models_used_least_recently(tmp_path, monkeypatch):
    """Three models of 100, 200 and 300 bytes, used in that order (file times 1, 2, 3):
    to hold 400 bytes the first two go, the last stays; a file another process is
    writing is left alone."""
    import os

    from bayes_eval.inference.kernel_cache import cache_dir, evict

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = cache_dir()
    folder.mkdir(parents=True)
    for used, (key, size) in enumerate((("a", 100), ("b", 200), ("c", 300)), start=1):
        for name, part in ((f"{key}-py313.nbi", 10), (f"{key}-py313.1.nbc", size - 10)):
            (folder / name).write_bytes(b"x" * part)
            os.utime(folder / name, (used, used))
    (folder / "a-py313.1.nbc.tmp.0123").write_bytes(b"x" * 1000)
    evict(400)
    assert sorted(path.name for path in folder.iterdir()) == [
        "a-py313.1.nbc.tmp.0123",
        "c-py313.1.nbc",
        "c-py313.nbi",
    ]
    evict(400)  # within the limit: nothing more goes
    assert len(list(folder.iterdir())) == 3


def test_the_log_density_callback_reads_ragged_data_through_its_pointer_table():
    """The C function nutpie calls reads each data array (an integer vector, a float
    matrix, a float scalar) through the pointer table: a stand-in graph that returns a
    value and gradient from them gives, through the C function, what numpy gives."""
    import ctypes

    import numba

    from bayes_eval.inference.nutpie_model import LOGP_SOURCE, _function, _pointers, _source

    @numba.njit
    def graph(x, counts, matrix, scale):
        return scale * (x.sum() + counts.sum()) + matrix[1, 2], x * matrix[0, 0]

    data = [np.array([3, 1, 4], dtype=np.int64), np.arange(6.0).reshape(2, 3) + 1, np.array(2.5)]
    text = _source(LOGP_SOURCE, [0, 1, 2], data)
    pointer = numba.types.CPointer(numba.types.double)
    signature = numba.types.int64(
        numba.types.uint64, pointer, pointer, pointer, numba.types.voidptr
    )
    callback = numba.cfunc(signature)(_function(text, graph))
    table = _pointers(data)
    x, out, value = np.array([0.5, -1.0]), np.zeros(2), np.zeros(1)
    as_double = ctypes.POINTER(ctypes.c_double)
    status = callback.ctypes(
        2,
        x.ctypes.data_as(as_double),
        out.ctypes.data_as(as_double),
        value.ctypes.data_as(as_double),
        table.ctypes.data_as(ctypes.c_void_p),
    )
    assert status == 0
    assert value[0] == 2.5 * (-0.5 + 8) + 6.0
    assert np.array_equal(out, x * 1.0)


def _structure(table, model, monkeypatch):
    """The structure key of ``model``'s graphs on ``table`` (the fit stops there)."""
    from bayes_eval.inference import nutpie_model

    keys, key_of = [], nutpie_model.structure_key

    class Stop(Exception):
        pass

    def stop(model, point, graphs):
        keys.append(key_of(model, point, graphs))
        raise Stop

    engines._COMPILED.clear()
    monkeypatch.setattr(nutpie_model, "structure_key", stop)
    with pytest.raises(Stop):
        bayes_eval.fit(table, model, seed=1)
    monkeypatch.undo()
    return keys[0]


def test_the_structure_key_ignores_sizes_and_counts_but_not_priors_or_forms(tmp_path, monkeypatch):
    """Two milestone tables of other agents, tasks, milestones, trials and counts give
    ``hierarchical`` the same structure key; another prior (a constant of the graph) and
    task means sampled in another form (every task centred) give other keys."""
    rng = np.random.default_rng(4)

    def table(agents, tasks, milestones, trials):
        rows = [
            (a, f"t{t}", "milestone", m, trials, rng.binomial(trials, 0.6))
            for a in agents
            for t in range(tasks)
            for m in range(1, milestones + 1)
        ]
        return pd.DataFrame(
            rows, columns=["agent", "task", "method", "step", "trials", "successes"]
        )

    small = table(["a"], 5, 3, 10)
    large = table(["a", "b", "c"], 12, 4, 25)
    many = table(["a"], 5, 6, 2000)  # every task mean centred (informative counts)
    key = _structure(small, "hierarchical", monkeypatch)
    assert key is not None
    assert _structure(large, "hierarchical", monkeypatch) == key
    spec = tmp_path / "wider.toml"  # hierarchical with a wider task-mean prior
    text = (shipped_dir("models") / "hierarchical.toml").read_text()
    text = text.replace('name = "hierarchical"', 'name = "wider"', 1)
    spec.write_text(text.replace("alpha = 1.0\nbeta = 1.0", "alpha = 0.5\nbeta = 0.5", 1))
    assert _structure(small, str(spec), monkeypatch) != key
    assert _structure(many, "hierarchical", monkeypatch) != key


def test_a_damaged_structure_record_only_costs_the_compile_it_saves(tmp_path, monkeypatch):
    """A structure record that cannot be read, names data the graphs do not have, or
    lacks its keys, is passed over: PyTensor compiles the graphs, the callbacks still
    load from the cache, and the draws are the same bytes; so is a load that fails after
    the record was read (the cache's files removed meanwhile)."""
    import io
    import json

    from bayes_eval.inference.kernel_cache import cache_dir
    from bayes_eval.messages import showing_progress

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    table = pd.DataFrame(
        dict(task=[f"t{i}" for i in range(5)], method="end_to_end", trials=10)
    ).assign(successes=[0, 3, 5, 10, 2])
    sampler = {"draws": 200, "tune": 200, "chains": 2}

    def fit():
        engines._COMPILED.clear()
        stream = io.StringIO()
        with showing_progress(stream):
            fitted = bayes_eval.fit(table, "end_to_end_pooled", seed=2, sampler=sampler)
        said = stream.getvalue()
        return fitted.tree["posterior"]["p_task"].values, said

    first, _ = fit()
    (record,) = cache_dir().glob("*.structure.json")
    known, said = fit()
    assert "a structure compiled before" in said and np.array_equal(known, first)
    whole = json.loads(record.read_text())
    for damage in (
        "{not json",
        '{"log density": ["nothing"], "deterministics": [], "keys": {}}',
        json.dumps({**whole, "keys": {}}),
        json.dumps({**whole, "keys": {what: 7 for what in whole["keys"]}}),
    ):
        record.write_text(damage)
        drawn, said = fit()
        assert "a structure compiled before" not in said
        assert "deterministics: cache hit" in said
        assert np.array_equal(drawn, first)
    # the record is whole again (the compile wrote it); a load that fails after it
    from bayes_eval.inference import nutpie_model

    load, calls = nutpie_model.cached_callbacks, []

    def failing_once(functions, notice):
        calls.append(len(calls))
        if len(calls) == 1:
            raise OSError("the cache's files went while they were read")
        return load(functions, notice)

    monkeypatch.setattr(nutpie_model, "cached_callbacks", failing_once)
    drawn, said = fit()
    assert len(calls) == 2 and "a structure compiled before" in said
    assert np.array_equal(drawn, first)


def test_an_operation_defined_by_a_graph_is_keyed_by_that_graph():
    """``logaddexp`` is an operation with a graph of its own, which caches its gradient
    and connections as it is used: its graph keys the same before and after a gradient
    is taken, and another graph (its arguments swapped) keys differently."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayes_eval.inference.nutpie_model import structure_key

    point = pt.dvector("point")
    total = pt.logaddexp(point, 1.0).sum()
    key = structure_key(pm.Model(), point, {"log density": [total]})
    assert key is not None
    pt.grad(total, point)
    assert structure_key(pm.Model(), point, {"log density": [total]}) == key
    swapped = pt.logaddexp(1.0, point).sum()
    assert structure_key(pm.Model(), point, {"log density": [swapped]}) != key
