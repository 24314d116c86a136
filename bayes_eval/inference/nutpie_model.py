"""A PyMC model as nutpie samples it, compiled once per machine and model structure.

nutpie samples a model through two C functions: its log density with the gradient, and its
expand function (the deterministics of each draw). nutpie's own ``compile_pymc_model``
compiles them in every process, around the model's data, which numba cannot keep on disk.
Here the same PyTensor graphs are called from C functions that read the data through a
pointer at run time, so that the compiled code holds no data and is kept in the disk cache
(``kernel_cache``). nutpie then samples them natively, as it samples its own
(``CompiledPyMCModel``).

The graphs hold no size of the table either: the free variables are cut from nutpie's
point at sizes read from the data (``_graphs``), and the models that take their design
as data (``hierarchical``, ``ecr_pooled`` and the end-to-end pooled models:
``bayes_eval.pooled.models``) compile once per structure, whatever the numbers of agents,
tasks, milestones and trials. Those whose graphs still hold their design as constants
(``joint``, ``crossed``, runs in clusters) compile once per design.

A structure compiled before on the machine is known by a key of its graphs before PyTensor
compiles them (``structure_key``), recorded beside its callbacks: its callbacks are loaded
without PyTensor's compile of the graphs (about 1 s of a warm fit) or their ``graph_key``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from dataclasses import dataclass

import numpy as np

from bayes_eval.inference.kernel_cache import (
    all_cached,
    cached_callbacks,
    graph_key,
    read_structure,
    remember_structure,
)
from bayes_eval.messages import progress

__all__ = ["CachedModel"]

LOGP_SOURCE = """
def logp_callback(dim, x_, out_, logp_, user_data_):
    try:
        x = numba.carray(x_, (dim,))
        out = numba.carray(out_, (dim,))
        meta = numba.carray(user_data_, ({size},), np.int64)
{arrays}
        value, grad = graph(x{arguments})
        numba.carray(logp_, (1,))[0] = value
        out[:] = grad
        if not np.all(np.isfinite(out)):
            return 3
        if not np.isfinite(value):
            return 4
    except Exception:
        return 1
    return 0
"""

EXPAND_SOURCE = """
def expand_callback(dim, expanded, x_, out_, user_data_):
    try:
        x = numba.carray(x_, (dim,))
        out = numba.carray(out_, (expanded,))
        meta = numba.carray(user_data_, ({size},), np.int64)
{arrays}
        (values,) = graph(x{arguments})
        out[:] = values
    except Exception:
        return -2
    return 0
"""


@dataclass(frozen=True)
class CachedModel:
    """A PyMC model's nutpie callbacks, loaded from the disk cache, and what nutpie needs
    around them; ``with_data`` gives the model nutpie samples.

    Attributes
    ----------
    template : nutpie.compile_pymc.CompiledPyMCModel
        The model with the built model's data.
    names : tuple of str
        The names of the data variables, in the order of the callbacks' pointer table.
    """

    template: object
    names: tuple

    @classmethod
    def compile(cls, model, notice: str) -> CachedModel:
        """``model``'s callbacks, with graphs as nutpie's ``compile_pymc_model`` makes
        them but free of the table's sizes (``_graphs``), each kernel compiled anew
        inside them, and nutpie's initial points (jittered); ``notice`` says what a
        compile costs.

        A structure met before on this machine (``structure_key``) loads its callbacks
        without compiling its graphs in PyTensor; another is compiled by PyTensor
        first, which names its callbacks in the cache (``graph_key``)."""
        from nutpie import compile_pymc
        from pymc.initial_point import make_initial_point_fn

        start = time.perf_counter()
        initial_point = compile_pymc._wrap_with_lock(
            make_initial_point_fn(
                model=model,
                default_strategy="support_point",
                jitter_rvs=set(model.free_RVs),
                return_transformed=True,
            )
        )
        point, graphs = _graphs(model)
        shape_info = _layout(model)
        structure = structure_key(model, point, graphs)
        found = _known(structure, graphs) if structure else None
        callbacks = None
        if found:
            seconds = time.perf_counter() - start
            progress(
                f"compile: the model's graphs built in {seconds:.1f} s, a structure compiled "
                "before on this machine"
            )
            # evicted or damaged since: compiled below
            with contextlib.suppress(Exception):
                callbacks = cached_callbacks([f[:4] for f in found[2]], notice)
        if callbacks is None:
            found = _compiled(model, point, graphs)
            progress(f"compile: the model's graphs built in {time.perf_counter() - start:.1f} s")
            callbacks = cached_callbacks([f[:4] for f in found[2]], notice)
            if structure and all(key for _, _, key, _, _ in found[2]):
                remember_structure(structure, _record(found[2]))
        shared, data, _ = found
        logp, expand = callbacks
        names, slices, shapes = (part[: len(model.free_RVs)] for part in shape_info)
        reparameterized = [
            model.rvs_to_values[var].name
            for var in model.free_RVs
            if model.rvs_to_transforms.get(var)
        ]
        dims, coords = compile_pymc._prepare_dims_and_coords(model, shape_info, reparameterized)
        template = compile_pymc.CompiledPyMCModel(
            _n_dim=slices[-1].stop,
            dims=dims,
            _coords=coords,
            _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
            compiled_logp_func=logp,
            compiled_expand_func=expand,
            initial_point_func=compile_pymc._rv_dict_to_flat_array_wrapper(
                initial_point, names=names, shapes=shapes
            ),
            shared_data=dict(enumerate(data)),  # kept alive while nutpie samples
            shared_var_keys={},
            user_data=_pointers(data),
            n_expanded=shape_info[1][-1].stop,
            shape_info=shape_info,
            logp_func=None,  # nutpie samples through the callbacks alone
            expand_func=None,
            # the sampled coordinates of transformed variables stay out of the posterior
            reparameterized_names=reparameterized,
        )
        return cls(template, tuple(var.name for var in shared))

    def with_data(self, **updates):
        """The model nutpie samples, with its data variables set to ``updates`` where
        given by name (each as the built model's dtype and number of dimensions)."""
        data = list(self.template.shared_data.values())
        for name, value in updates.items():
            at = [i for i, known in enumerate(self.names) if known == name]
            if len(at) != 1:
                raise KeyError(f"{len(at)} data variables named {name!r}, not 1")
            (at,) = at
            value = np.require(value, dtype=data[at].dtype, requirements="C")
            if value.ndim != data[at].ndim:
                raise ValueError(f"{name} has {value.ndim} dimensions, not {data[at].ndim}")
            data[at] = value
        return dataclasses.replace(
            self.template, shared_data=dict(enumerate(data)), user_data=_pointers(data)
        )


def _graphs(model):
    """The graphs nutpie calls, as ``nutpie.compile_pymc._make_functions`` builds them,
    except that the free variables are cut from the point nutpie passes at sizes read
    from the model's data, never at constant positions: the graphs then hold no size of
    the table, and one compiled model serves every table of its structure.

    Returns the point and, by callback, the outputs: ``log density`` (the log density
    and its gradient) and ``deterministics`` (the free variables, then the
    deterministics, flat and joined), each a graph of the point and the model's data.
    """
    import pytensor.tensor as pt
    from pytensor.graph import clone_replace, rewrite_graph

    free = model.free_RVs
    values = [model.rvs_to_values[var] for var in free]
    rewrites = ["canonicalize", "stabilize"]
    if not model.check_bounds:
        rewrites.append("local_remove_check_parameter")
    logp = rewrite_graph(model.logp(), include=rewrites)
    grad = pt.concatenate([part.ravel() for part in pt.grad(logp, values)])
    point = pt.dvector("_unconstrained_point")
    start, replacements = 0, {}
    for var, value in zip(free, values, strict=True):
        transform = model.rvs_to_transforms.get(var)
        shape = (transform.forward(var, *var.owner.inputs) if transform else var).shape
        # the shape from the model's sizes (data), not from a draw of the variable
        shape = rewrite_graph(pt.as_tensor(shape), include=["canonicalize", "ShapeOpt"])
        stop = start + pt.prod(shape)
        replacements[value] = point[start:stop].reshape(shape).astype(var.dtype)
        start = stop
    names = {var.name for var in values}
    remaining = [var for var in model.unobserved_value_vars if var.name not in names]
    expanded = pt.concatenate(
        [replacements[v].ravel() for v in values] + [var.ravel() for var in remaining]
    )
    outputs = clone_replace([logp, grad, expanded], replacements)
    return point, {"log density": outputs[:2], "deterministics": outputs[2:]}


def structure_key(model, point, graphs) -> str | None:
    """A key of ``graphs`` before PyTensor compiles them: every operation (pickled: its
    type and parameters, which is what PyTensor's own equality of operations compares;
    an operation defined by a graph of its own, such as ``logaddexp``, by that graph, in
    the same way), how they connect, the types of the data and the constants' values,
    with the versions of PyTensor, PyMC, nutpie and the compiler stack and the flags that
    steer PyTensor's rewrites. The same key gives the same compiled graphs, so the
    callbacks named by ``graph_key`` of a structure compiled before can be loaded without
    compiling the graphs again (``remember_structure``). ``None`` where the graphs have an
    input other than the point and the model's data, or an operation that cannot be
    pickled."""
    import pickle
    import sys

    import llvmlite
    import numba
    import nutpie
    import pymc
    import pytensor

    config = pytensor.config
    digest = hashlib.sha256()

    def add(*parts):
        digest.update(pickle.dumps(parts, protocol=5))

    add(sys.version, *(m.__version__ for m in (pytensor, pymc, nutpie, numba, llvmlite, np)))
    add(config.floatX, config.numba__fastmath, config.optimizer_excluding)
    add(config.optimizer_including, config.optimizer_requiring, model.check_bounds)
    add(LOGP_SOURCE, EXPAND_SOURCE)
    try:
        for what, outputs in graphs.items():
            _add_graph(add, outputs, {point: "point"})
            add(what)
    except (_Unkeyed, pickle.PicklingError, TypeError, AttributeError):
        return None
    return digest.hexdigest()[:40]


class _Unkeyed(Exception):
    """A graph ``structure_key`` cannot key."""


def _add_graph(add, outputs, named) -> None:
    """Add the graph of ``outputs`` to a key through ``add``: its inputs (those in
    ``named`` by their names there, constants by value, data by name and type), each
    operation and what it reads, and which variables are the outputs."""
    from pytensor.compile.builders import OpFromGraph
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import graph_inputs, io_toposort

    inputs = list(graph_inputs(outputs))
    ids = {}
    for var in inputs:
        ids[var] = len(ids)
        if var in named:
            add("input", named[var], var.type)
        elif isinstance(var, Constant):
            add("constant", var.type, var.data)
        elif isinstance(var, SharedVariable):
            add("data", var.name, var.type)
        else:
            raise _Unkeyed(var)
    for node in io_toposort(inputs, outputs):
        op = node.op
        if isinstance(op, OpFromGraph):
            # its public state, and its graph as a graph; the private attributes are
            # caches of gradients and connections made as it is used
            state = vars(op)
            public = {k: v for k, v in state.items() if not k.startswith("_") and k != "fgraph"}
            add(type(op), public, state.get("_init_kwargs"))
            inner = op.fgraph
            _add_graph(add, list(inner.outputs), {var: i for i, var in enumerate(inner.inputs)})
        else:
            add(op)
        add([ids[var] for var in node.inputs], [var.type for var in node.outputs])
        ids.update((var, len(ids)) for var in node.outputs)
    add([ids[var] for var in outputs])


def _compiled(model, point, graphs):
    """``graphs`` compiled by PyTensor: ``_callbacks`` of their numba functions, each
    named by ``graph_key``."""
    import pytensor
    from pymc.pytensorf import compile as compile_pymc

    with model, pytensor.config.change_flags(numba__cache=False):
        functions = {
            what: compile_pymc((point,), outputs, mode="NUMBA") for what, outputs in graphs.items()
        }
    variables = {what: function.get_shared() for what, function in functions.items()}
    jitted = {what: function.vm.jit_fn for what, function in functions.items()}
    return _callbacks(variables, jitted, lambda what, text: graph_key(functions[what], text))


def _known(structure, graphs):
    """``_callbacks`` of a structure compiled before, whose callbacks are all in the
    cache (only ever loaded: they call no graph); ``None`` otherwise."""
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.traversal import graph_inputs

    record = read_structure(structure)
    if record is None:
        return None
    shared = {}
    for outputs in graphs.values():
        for var in graph_inputs(outputs):
            if isinstance(var, SharedVariable):
                shared.setdefault(var.name, set()).add(var)
    try:
        variables = {what: [shared[name] for name in record[what]] for what in graphs}
        keys = {what: record["keys"][what] for what in graphs}
    except (KeyError, TypeError):
        return None
    if any(len(found) != 1 for names in variables.values() for found in names):
        return None
    if not all(isinstance(key, str) for key in keys.values()):
        return None
    variables = {what: [next(iter(found)) for found in names] for what, names in variables.items()}
    found = _callbacks(variables, dict.fromkeys(graphs), lambda what, text: keys[what])
    return found if all_cached([f[:4] for f in found[2]]) else None


def _callbacks(variables, graphs, key_of):
    """The data variables of the callbacks (first seen, first), their arrays, and per
    callback ``(py_func, signature, key, what, variables)``: ``py_func`` reads
    ``variables[what]`` from the pointer table and calls ``graphs[what]``; ``key_of(what,
    source)`` names it in the cache."""
    import numba

    shared = list(dict.fromkeys(var for names in variables.values() for var in names))
    data = [np.require(var.get_value(), requirements="C") for var in shared]
    pointer, count = numba.types.CPointer(numba.types.double), numba.types.uint64
    arguments = {
        "log density": (LOGP_SOURCE, (count, pointer, pointer, pointer)),
        "deterministics": (EXPAND_SOURCE, (count, count, pointer, pointer)),
    }
    functions = []
    for what, inputs in variables.items():
        source, types = arguments[what]
        text = _source(source, [shared.index(var) for var in inputs], data)
        signature = numba.types.int64(*types, numba.types.voidptr)
        function = _function(text, graphs[what])
        functions.append((function, signature, key_of(what, text), what, inputs))
    return shared, data, functions


def _record(functions) -> dict:
    """What ``_known`` needs of a compiled structure: each callback's data variables by
    name, in order, and its key."""
    record = {what: [var.name for var in inputs] for *_, what, inputs in functions}
    return record | {"keys": {what: key for _, _, key, what, _ in functions}}


def _layout(model):
    """The names, slices and shapes of the free variables and then the deterministics in
    the expand function's output, at the model's data (nutpie's ``shape_info``)."""
    from nutpie.compile_pymc import _compute_shapes

    shapes = _compute_shapes(model)
    values = [model.rvs_to_values[var].name for var in model.free_RVs]
    names = values + [
        var.name for var in model.unobserved_value_vars if var.name not in set(values)
    ]
    sizes = np.cumsum([0] + [int(np.prod(shapes[name])) for name in names])
    slices = [slice(int(a), int(b)) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    return names, slices, [tuple(int(d) for d in shapes[name]) for name in names]


def _source(template, inputs, data) -> str:
    """A callback's source: the data arrays at positions ``inputs`` of ``data`` read from
    the pointer table (``_pointers``)."""
    offsets = np.cumsum([0] + [1 + value.ndim for value in data])
    lines, arguments = [], ""
    for i, at in enumerate(inputs):
        start, ndim = int(offsets[at]), data[at].ndim
        shape = "".join(f"meta[{start + 1 + d}], " for d in range(ndim))
        dtype = f"np.{data[at].dtype.name}"
        pointer = f"address_as_void_pointer(meta[{start}])"
        lines.append(f"        d{i} = numba.carray({pointer}, ({shape}), {dtype})")
        arguments += f", d{i}"
    size = int(offsets[-1])
    return template.format(size=size, arrays="\n".join(lines), arguments=arguments)


def _function(text, graph):
    """The callback function defined by ``text``, calling ``graph``."""
    import numba
    from nutpie.compile_pymc import address_as_void_pointer

    # numba rebuilds a loaded function's environment from its module's name
    namespace = {"__name__": __name__, "numba": numba, "np": np, "graph": graph}
    namespace["address_as_void_pointer"] = address_as_void_pointer
    exec(compile(text, "<bayes_eval callback>", "exec"), namespace)  # noqa: S102
    (name,) = (n for n in namespace if n.endswith("_callback"))
    return namespace[name]


def _pointers(data) -> np.ndarray:
    """The callbacks' pointer table: each data array's address, then its shape."""
    table = []
    for value in data:
        table += [value.ctypes.data, *value.shape]
    return np.array(table, dtype=np.int64)
