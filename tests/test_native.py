"""The pooled models' log densities as C (``bayes_eval.inference.native``): each operation
written against PyTensor's own evaluation of it, and every shipped pooled model's C
functions against PyMC's own ``logp``, ``dlogp`` and deterministics, at 100 random
points, on the shipped examples and on sparse, ragged tables."""

import ctypes

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval.inference import engines, nutpie_model
from bayes_eval.inference.native import c_code, library, writer
from bayes_eval.resources import shipped_datasets

LOGP = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, *[ctypes.c_void_p] * 4)
EXPAND = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, *[ctypes.c_void_p] * 3)


def _reference_mode():
    """PyTensor's Python implementation of every operation (numpy and scipy), with only
    the rewrites it needs: the reference the C is held to."""
    from pytensor.compile.mode import Mode

    return Mode(linker="py", optimizer="fast_compile")


def _address(library, name):
    return ctypes.cast(getattr(library, name), ctypes.c_void_p).value


def _expand(point, data, outputs, rewrite=True):
    """``outputs`` (any shapes) of the vector ``point`` and shared ``data``, flattened into
    one vector, as C (an expand function) and as PyTensor evaluates them: two functions
    of ``x``."""
    import pytensor
    import pytensor.tensor as pt
    from pytensor.graph.fg import FunctionGraph

    flat = pt.concatenate([pt.as_tensor(o).ravel().astype("float64") for o in outputs])
    inputs = [point, *data]
    if rewrite:
        graph = writer.rewritten(inputs, [flat])
    else:
        graph = FunctionGraph(inputs, [flat], clone=True)
    values = [np.require(d.get_value(), requirements="C") for d in data]
    source = writer.c_source(graph, list(range(len(data))), [v.ndim for v in values], "x")
    (loaded,), _ = library.libraries([source])
    function = EXPAND(_address(loaded, writer.EXPAND_NAME))
    table = nutpie_model._pointers(values)
    reference = pytensor.function([point], flat, mode=_reference_mode(), on_unused_input="ignore")

    def native(x, values=values):  # the arrays the table points to, kept alive
        expected = reference(x)
        out = np.full(expected.size, np.nan)
        status = function(x.size, out.size, x.ctypes.data, out.ctypes.data, table.ctypes.data)
        return status, out

    return native, reference


@pytest.mark.parametrize("rewrite", [False, True])
def test_each_operation_gives_what_pytensor_gives(rewrite):
    """Indexing (negative and stepped slices, integer and boolean arrays with repeats,
    increments and assignments), joins and splits, reshapes, reductions over some axes,
    broadcasting, dot products and the scalar functions of the models (log-gamma,
    digamma, softplus, sigmoid, switches, comparisons), each written as C and compared,
    element by element, with PyTensor's own evaluation at random points; with and without
    PyTensor's rewrites (which fuse the scalar functions into one loop)."""
    import pytensor
    import pytensor.tensor as pt

    rng = np.random.default_rng(0)
    index = pytensor.shared(np.array([2, 0, 2, -1, 4], dtype=np.int32), name="index")
    mask = pytensor.shared(np.array([True, False, True, True, False, True]), name="mask")
    matrix = pytensor.shared(rng.normal(size=(3, 4)), name="matrix")
    counts = pytensor.shared(np.array([0, 3, 7, 1, 10, 2], dtype=np.int64), name="counts")
    x = pt.dvector("x")
    six = x[:6]
    outputs = [
        six[::-2],
        six[-4:-1],
        six[5:0:-2],
        six[index],
        six[mask],
        pt.inc_subtensor(six[index], 1.5),  # repeats add up
        pt.set_subtensor(six[mask], x[6]),
        pt.inc_subtensor(six[1:5:2], x[6:8]),
        pt.concatenate([six, x[6:8], six[:1]]),
        *pt.split(six, [2, 4], n_splits=2),
        six.reshape((2, 3)).T.ravel(),
        pt.dot(matrix, x[:4]),
        pt.dot(x[:3], matrix),
        (matrix * x[:4]).sum(axis=0),
        (matrix + x[:4]).max(axis=1),
        pt.all(matrix > x[0]),
        pt.gammaln(pt.exp(six) + counts),
        pt.digamma(pt.exp(six)),
        pt.softplus(10 * six),
        pt.sigmoid(six),
        pt.switch(pt.eq(counts, 0), pt.log1p(-pt.sigmoid(six)), pt.log(pt.sigmoid(six))),
        pt.logaddexp(six, x[6]),
        pt.logsumexp(matrix * x[:4], axis=1),
        pt.outer(x[:3], x[3:5]).sum(),
        pt.cumsum(six),
        pt.cumprod(matrix * x[:4], axis=1),
        pt.cumsum(matrix, axis=0)[index[:2]],
        pt.inc_subtensor(pt.zeros((6, 2))[index.reshape((1, 5))], x[:2]),
        pt.maximum(six, 0.1) ** 1.5,
        pt.alloc(x[0], 3, 2),
        pt.cast(counts, "float64") / (1 + pt.abs(six)),
    ]
    native, reference = _expand(x, [index, mask, matrix, counts], outputs, rewrite)
    for _ in range(20):
        point = rng.normal(size=8)
        status, out = native(point)
        assert status == 0
        np.testing.assert_allclose(out, reference(point), rtol=1e-12, atol=1e-14)


def test_an_index_out_of_bounds_or_an_output_of_another_length_is_an_error():
    """What PyTensor refuses at run time, the C function refuses with its error status (an
    index past the end of the point), never reading outside an array; so it does where
    nutpie's buffer is not the output's length."""
    import pytensor
    import pytensor.tensor as pt

    index = pytensor.shared(np.array([0, 9], dtype=np.int64), name="index")
    x = pt.dvector("x")
    graph = writer.rewritten([x, index], [x[index]])
    source = writer.c_source(graph, [0], [1], "x")
    (loaded,), _ = library.libraries([source])
    function = EXPAND(_address(loaded, writer.EXPAND_NAME))
    values = [index.get_value()]
    table = nutpie_model._pointers(values)
    short, long, out = np.zeros(3), np.zeros(10), np.zeros(3)
    assert function(3, 2, short.ctypes.data, out.ctypes.data, table.ctypes.data) == -2
    assert function(10, 2, long.ctypes.data, out.ctypes.data, table.ctypes.data) == 0
    assert function(10, 3, long.ctypes.data, out.ctypes.data, table.ctypes.data) == -2


def test_an_operation_it_does_not_write_is_refused_by_name():
    import pytensor.tensor as pt

    x = pt.dvector("x")
    graph = writer.rewritten([x], [pt.sort(x)])
    with pytest.raises(c_code.Unsupported, match="SortOp"):
        writer.c_source(graph, [], [], "x")


# ---------------------------------------------------------------------------
# every shipped pooled model against PyMC's own log density
# ---------------------------------------------------------------------------


def _sparse_end_to_end(seed=1):
    """One run per cell, about a third of the cells missing, an agent with no success and
    tasks no agent solved; release dates, task lengths and families as METR's runs."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(5):
        for t in range(14):
            if rng.random() < 0.35:
                continue
            p = 0.0 if a == 0 or t % 5 == 0 else rng.beta(1, 2)
            rows.append(
                (
                    f"a{a}",
                    f"t{t}",
                    "end_to_end",
                    int(rng.random() < p),
                    1,
                    f"202{a}-06-01",
                    float(2 ** (t % 7)),
                    f"f{t % 4}",
                )
            )
    columns = ["agent", "task", "method", "successes", "trials", "release_date"]
    return pd.DataFrame(rows, columns=[*columns, "human_minutes", "task_family"])


def _sparse_milestones(seed=2, e2e=False):
    """Ragged milestone runs (1 to 4 milestones, 1 to 3 trials, zero-success cells, some
    pairs missing); with ``e2e``, one end-to-end run for about half the pairs."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(3):
        for t in range(8):
            if rng.random() < 0.2:
                continue
            steps = 1 + t % 4
            for m in range(1, steps + 1):
                n = int(rng.integers(1, 4))
                rows.append((f"a{a}", f"t{t}", "milestone", m, int(rng.binomial(n, 0.4)), n))
            if e2e and rng.random() < 0.5:
                rows.append((f"a{a}", f"t{t}", "end_to_end", None, int(rng.random() < 0.1), 1))
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])


def _clustered(milestones=0, seed=3):
    """Runs in clusters of 3 (a per-cluster Beta-Binomial in the models)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(6):
        for step in range(1, milestones + 1) if milestones else [None]:
            for c in range(3):
                for success in rng.random(3) < rng.beta(1, 2):
                    method = "milestone" if step else "end_to_end"
                    rows.append(("a", f"t{t}", method, step, int(success), f"c{c}"))
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "success", "cluster"])


def _table(name):
    data = shipped_datasets()
    if name in data:
        return bayes_eval.load_evidence(data[name], sum_duplicates=True)
    made = {
        "sparse end-to-end": lambda: _sparse_end_to_end(),
        "sparse milestones": lambda: _sparse_milestones(),
        "sparse joint": lambda: _sparse_milestones(e2e=True),
        "clustered end-to-end": lambda: _clustered(),
        "clustered milestones": lambda: _clustered(milestones=3),
    }[name]()
    return bayes_eval.load_evidence(made, keep_columns=True)


CASES = [
    ("example_pooled", "end_to_end_pooled", {}),
    ("example_pooled", "end_to_end_shared", {}),
    ("example_pooled", "end_to_end_zero_inflated", {}),
    ("example_pooled", "hierarchical", {}),
    ("example_pooled", "joint", {}),
    ("example_evidence", "ecr_pooled", {}),
    ("example_pooled", "crossed", {}),
    ("example_pooled", "crossed_milestones", {}),
    ("example_pooled", "crossed_joint", {}),
    ("sparse end-to-end", "end_to_end_pooled", {}),
    ("sparse end-to-end", "end_to_end_shared", {}),
    ("sparse end-to-end", "end_to_end_zero_inflated", {}),
    ("sparse end-to-end", "crossed", {}),
    ("sparse end-to-end", "time_horizon", {"predict": ["new,release_date=2026-01-01"]}),
    ("sparse milestones", "hierarchical", {}),
    ("sparse milestones", "crossed_milestones", {}),
    ("sparse joint", "joint", {}),
    ("sparse joint", "crossed_joint", {}),
    ("clustered end-to-end", "end_to_end_pooled", {}),
    ("clustered milestones", "hierarchical", {}),
    ("clustered end-to-end", "crossed", {}),
]


class _Built(Exception):
    """Stops a fit once its PyMC model is built."""


def _model_of(table, model, options, monkeypatch):
    """The PyMC model a fit of ``table`` samples (the fit stops there)."""
    built = []

    def capture(cls, pymc_model, notice, unstored=()):
        built.append(pymc_model)
        raise _Built

    engines._COMPILED.clear()
    monkeypatch.setattr(nutpie_model.CachedModel, "compile", classmethod(capture))
    with pytest.raises(_Built):
        bayes_eval.fit(table, model, **options)
    monkeypatch.undo()
    return built[0]


def _rounding(function, point, names, rng, times=4):
    """How far rounding alone moves ``function`` (of a point dict) near ``point``: the
    largest change under relative perturbations of 1e-15 of the point (about five units
    in the last place). Where a model's arithmetic cancels (log-gamma of a concentration
    of 1e12, whose last place is 1e-4, less another), no implementation agrees with
    another closer than this."""
    base = np.asarray(function(point))
    change = np.zeros_like(base, dtype=float)
    for _ in range(times):
        moved = {
            name: point[name] * (1 + 1e-15 * rng.standard_normal(np.shape(point[name])))
            for name in names
        }
        change = np.maximum(change, np.abs(np.asarray(function(moved)) - base))
    return change


@pytest.mark.parametrize(
    ("table", "model", "options"), CASES, ids=[f"{m}-{t}" for t, m, _ in CASES]
)
def test_the_c_log_density_is_pymcs_at_random_points(table, model, options, monkeypatch):
    """At 100 random points of the unconstrained parameters (standard normal), the C
    functions nutpie samples give PyMC's own log density (with the transforms' Jacobians)
    and its gradient within 1e-9 relative, and the deterministics (every parameter on its
    own scale, and the model's deterministics) within 1e-12; where PyMC refuses a point
    (a parameter outside its support), the C function returns its error status. Where
    the arithmetic itself is ill-conditioned at a point (``_rounding``: PyMC's own value
    moves by more under five units of rounding of the point), the tolerance is ten times
    that movement; the test counts such points and requires most points to be ordinary."""
    from pymc.logprob.utils import ParameterValueError

    pymc_model = _model_of(_table(table), model, options, monkeypatch)
    compiled = nutpie_model.CachedModel.compile(pymc_model, "").template
    logp = LOGP(compiled.compiled_logp_func.address)
    expand = EXPAND(compiled.compiled_expand_func.address)
    table_pointer = compiled.user_data.ctypes.data
    mode = _reference_mode()
    value = pymc_model.compile_logp(jacobian=True, mode=mode)
    gradient = pymc_model.compile_dlogp(jacobian=True, mode=mode)
    values = pymc_model.value_vars
    names = [v.name for v in values]
    start = pymc_model.initial_point()
    sizes = [np.size(start[name]) for name in names]
    assert sum(sizes) == compiled.n_dim
    import pytensor

    # the sampled values, then every variable on its own scale and the deterministics
    wanted = [*values, *[v for v in pymc_model.unobserved_value_vars if v.name not in names]]
    deterministics = pytensor.function(
        values, [v.ravel() for v in wanted], mode=mode, on_unused_input="ignore"
    )
    rng = np.random.default_rng(7)
    refused = ill_conditioned = 0
    for _ in range(100):
        x = rng.standard_normal(compiled.n_dim)
        parts = np.split(x, np.cumsum(sizes)[:-1])
        point = {
            name: part.reshape(np.shape(start[name]))
            for name, part in zip(names, parts, strict=True)
        }
        out, result = np.zeros(compiled.n_dim), np.zeros(1)
        status = logp(
            compiled.n_dim, x.ctypes.data, out.ctypes.data, result.ctypes.data, table_pointer
        )
        try:
            expected = value(point)
        except ParameterValueError:
            refused += 1
            assert status == 1
            continue
        assert status == 0
        expected_gradient = gradient(point)
        scale = np.max(np.abs(expected_gradient))
        tolerance = 1e-9 * abs(expected)
        gradient_tolerance = 1e-9 * np.maximum(np.abs(expected_gradient), scale)
        if abs(result[0] - expected) > tolerance or np.any(
            np.abs(out - expected_gradient) > gradient_tolerance
        ):
            ill_conditioned += 1
            tolerance = max(tolerance, 10 * _rounding(value, point, names, rng))
            gradient_tolerance = np.maximum(
                gradient_tolerance, 10 * _rounding(gradient, point, names, rng)
            )
        assert abs(result[0] - expected) <= tolerance
        assert np.all(np.abs(out - expected_gradient) <= gradient_tolerance)
        flat = np.concatenate(deterministics(*[point[name] for name in names]))
        got = np.zeros(compiled.n_expanded)
        assert expand(compiled.n_dim, got.size, x.ctypes.data, got.ctypes.data, table_pointer) == 0
        np.testing.assert_allclose(got, flat, rtol=1e-12, atol=1e-300)
    assert refused + ill_conditioned <= 20


def test_a_free_variable_left_out_of_the_trace_is_sampled_all_the_same():
    """The free variables named ``unstored`` (a crossed fit's departures, which its readers
    draw again) are sampled but not kept in nutpie's trace: every other draw is the same
    number as in a trace that keeps them, at the same seed."""
    import pymc as pm

    from bayes_eval.inference.engines import Engine, sample
    from bayes_eval.settings import SamplerSettings

    with pm.Model(coords={"pair": range(30)}) as model:
        scale = pm.LogNormal("scale", 0.0, 1.0)
        z = pm.Normal("z", 0.0, 1.0, dims="pair")
        rate = pm.Deterministic("rate", pm.math.sigmoid(scale * z - 1.0), dims="pair")
        pm.Binomial("k", n=5, p=rate, observed=np.arange(30) % 6)
    settings = SamplerSettings("nutpie", draws=200, tune=200, chains=2)
    nutpie = Engine("nutpie", "cpu")
    kept = sample(model, nutpie, settings, 1, ("left out",))["posterior"]
    left = sample(model, nutpie, settings, 1, ("left out",), ("z",))["posterior"]
    assert "z" in kept.data_vars and "z" not in left.data_vars
    assert set(left.data_vars) == set(kept.data_vars) - {"z"} and {"scale", "rate"} <= set(left)
    for name in left.data_vars:
        np.testing.assert_array_equal(left[name].values, kept[name].values)
