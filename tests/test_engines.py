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

SMALL_SAMPLER = {"draws": 1000, "tune": 500, "chains": 4}


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


def test_the_compile_cache_evicts_the_files_used_least_recently(tmp_path, monkeypatch):
    """Three libraries of 100, 200 and 300 bytes and a structure record of 50, used in that
    order (file times 1 to 4): to hold 400 bytes the first two libraries go, the last one
    and the record stay; a file another process is writing is left alone."""
    import os

    from bayes_eval.inference.native.library import cache_dir, evict

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = cache_dir()
    folder.mkdir(parents=True)
    files = (("a.so", 100), ("b.so", 200), ("c.so", 300), ("s.structure.json", 50))
    for used, (name, size) in enumerate(files, start=1):
        (folder / name).write_bytes(b"x" * size)
        os.utime(folder / name, (used, used))
    (folder / "a.so.tmp.0123").write_bytes(b"x" * 1000)
    evict(400)
    assert sorted(path.name for path in folder.iterdir()) == [
        "a.so.tmp.0123",
        "c.so",
        "s.structure.json",
    ]
    evict(400)  # within the limit: nothing more goes
    assert len(list(folder.iterdir())) == 3


def test_the_log_density_callback_reads_ragged_data_through_its_pointer_table():
    """The C function nutpie calls reads each data array (an integer vector, a float
    matrix, a float scalar) through the pointer table: a graph of the point and those
    arrays, written as C and compiled, gives the value and gradient numpy gives."""
    import ctypes

    import pytensor
    import pytensor.tensor as pt

    from bayes_eval.inference.native import library, writer
    from bayes_eval.inference.nutpie_model import _pointers

    data = [np.array([3, 1, 4], dtype=np.int64), np.arange(6.0).reshape(2, 3) + 1, np.array(2.5)]
    shared = [pytensor.shared(value, name=f"d{i}") for i, value in enumerate(data)]
    point = pt.dvector("point")
    counts, matrix, scale = shared
    value = scale * (point.sum() + counts.sum()) + matrix[1, 2]
    graph = writer.rewritten([point, *shared], [value, point * matrix[0, 0]])
    source = writer.c_source(graph, [0, 1, 2], [d.ndim for d in data], "log density")
    (loaded,), _ = library.libraries([source])
    function = getattr(loaded, writer.LOGP_NAME)
    function.restype = ctypes.c_int64
    function.argtypes = [ctypes.c_uint64, *[ctypes.c_void_p] * 4]
    table = _pointers(data)
    x, out, result = np.array([0.5, -1.0]), np.zeros(2), np.zeros(1)
    status = function(2, x.ctypes.data, out.ctypes.data, result.ctypes.data, table.ctypes.data)
    assert status == 0
    assert result[0] == 2.5 * (-0.5 + 8) + 6.0
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


def test_a_damaged_structure_record_only_costs_the_work_it_saves(tmp_path, monkeypatch):
    """A structure record that cannot be read, names data the graphs do not have, or
    lacks its libraries' keys, is passed over: the graphs are rewritten and written as C
    again, the libraries still load from the cache, and the draws are the same bytes; so
    is a load that fails after the record was read (the cache's files removed
    meanwhile)."""
    import io
    import json

    from bayes_eval.inference.native.library import cache_dir
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
        '{"log density": {"data": ["nothing"]}, "deterministics": {"data": []}}',
        json.dumps({what: {"data": entry["data"]} for what, entry in whole.items()}),
        json.dumps({what: {**entry, "library": 7} for what, entry in whole.items()}),
    ):
        record.write_text(damage)
        drawn, said = fit()
        assert "a structure compiled before" not in said
        assert "deterministics: cache hit" in said
        assert np.array_equal(drawn, first)
    # the record is whole again (the compile wrote it); a load that fails after it
    from bayes_eval.inference.native import library

    load, calls = library.load, []

    def failing_once(keys):
        calls.append(len(calls))
        return None if len(calls) == 1 else load(keys)  # the files went meanwhile

    monkeypatch.setattr(library, "load", failing_once)
    drawn, said = fit()
    assert len(calls) == 1 and "a structure compiled before" not in said
    assert "deterministics: cache hit" in said and np.array_equal(drawn, first)


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


def test_without_a_c_compiler_nutpie_compiles_the_model_itself(tmp_path):
    """Where no C compiler runs (``CC`` names one that does not exist), a pooled fit says
    why and has nutpie compile the model itself (numba, in the process); its fit passes the
    diagnostics and its bounds agree with the C route's within Monte Carlo error."""
    import json
    import os
    import subprocess
    import sys

    table = pd.DataFrame(
        dict(task=[f"t{i}" for i in range(6)], method="end_to_end", trials=12)
    ).assign(successes=[0, 1, 3, 6, 2, 0])
    path = tmp_path / "table.csv"
    table.to_csv(path, index=False)
    code = (
        "import json, sys, bayes_eval\n"
        "from bayes_eval.messages import showing_progress\n"
        "with showing_progress(sys.stderr):\n"
        "    p = bayes_eval.fit(\n"
        f"        sys.argv[1], 'end_to_end_pooled', seed=3, sampler={SMALL_SAMPLER}\n"
        "    )\n"
        "s = p.summary()\n"
        "print(json.dumps(dict(ok=bool(p.diagnostics.ok), upper=s['upper'].tolist(),"
        " mcse=s['upper_mcse'].tolist())))\n"
    )
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc"), "XDG_CACHE_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "does not run" in done.stderr and "compiling with nutpie's own compiler" in done.stderr
    numba = json.loads(done.stdout)
    native = bayes_eval.fit(str(path), "end_to_end_pooled", seed=3, sampler=SMALL_SAMPLER)
    assert numba["ok"] and native.diagnostics.ok
    summary = native.summary()
    z = np.abs(np.subtract(numba["upper"], summary["upper"])) / np.hypot(
        numba["mcse"], summary["upper_mcse"]
    )
    assert z.max() <= 4.0, z
