"""A PyMC model as nutpie samples it, its two C functions built once per machine and model
structure.

nutpie samples a model through two C functions: its log density with the gradient, and its
expand function (the deterministics of each draw). nutpie's own ``compile_pymc_model`` has
numba compile them from PyTensor's graphs, operation by operation (20 to 80 s on 2 cores,
in every process). Here the same graphs are written out as C (``native.writer``), two functions
that read the model's data through a pointer at run time, compiled by the system's C
compiler in about a second and kept in the disk cache (``native.library``). nutpie then samples
them natively, as it samples its own (``CompiledPyMCModel``).

The graphs hold no size of the table either: the free variables are cut from nutpie's
point at sizes read from the data (``_graphs``), and the models that take their design
as data (``hierarchical``, ``ecr_pooled`` and the end-to-end pooled models:
``bayes_eval.pooled.models``) compile once per structure, whatever the numbers of agents,
tasks, milestones and trials. Those whose graphs still hold their design as constants
(``joint``, ``crossed``, runs in clusters) compile once per design.

A structure compiled before on the machine is known by a key of its graphs before PyTensor
rewrites them (``structure_key``), recorded beside its libraries: they are loaded without
rewriting the graphs or writing their C again.

Where the C route cannot be taken (no C compiler, or an operation ``native.writer`` does not
write), ``NotNative`` says why, and the caller compiles with nutpie's own numba
(``engines.nutpie_compiled``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bayes_eval.inference.native import c_code, library, operations, writer
from bayes_eval.inference.native.c_code import Unsupported
from bayes_eval.messages import progress

__all__ = ["CachedModel", "NotNative", "structure_key"]

# The callbacks, by what they compute, and the C function each library exports.
CALLBACKS = {"log density": writer.LOGP_NAME, "deterministics": writer.EXPAND_NAME}


class NotNative(Exception):
    """The model's callbacks cannot be built as C here (the message says why)."""


@dataclass(frozen=True)
class NativeFunction:
    """A C function of a loaded library, as nutpie takes it (its ``address``); it keeps the
    library loaded."""

    address: int
    library: object


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
    def compile(cls, model, notice: str, unstored: tuple = ()) -> CachedModel:
        """``model``'s callbacks, from graphs as nutpie's ``compile_pymc_model`` makes them
        but free of the table's sizes (``_graphs``), written as C and compiled (or loaded
        from the cache), and nutpie's initial points (jittered); ``notice`` says what a
        compile costs. The free variables named in ``unstored`` are sampled but not kept in
        nutpie's trace (a crossed fit's departures, which every reader draws again: 323
        of the 5,046-pair table's 345 MB of draws while it samples).

        A structure met before on this machine (``structure_key``) loads its libraries
        without rewriting its graphs.

        Raises
        ------
        NotNative
            No C compiler, or an operation the C writer does not know.
        """
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
        point, graphs = _graphs(model, unstored)
        every = _layout(model)
        shape_info = _kept(every, unstored)
        shared = _data_variables(graphs)
        try:
            structure = structure_key(model, point, graphs)
            loaded = _known(structure, shared, graphs) if structure else None
            if loaded is not None:
                progress(
                    f"compile: the model's graphs built in {time.perf_counter() - start:.1f} s, "
                    "a structure compiled before on this machine"
                )
                progress(f"compile: {' and '.join(graphs)}: cache hit, loaded")
            else:
                loaded = _built(point, graphs, shared, notice, start)
                if structure:
                    library.remember_structure(structure, loaded[1])
        except (Unsupported, library.NoCompiler) as exc:
            raise NotNative(str(exc)) from None
        libraries = loaded[0]
        functions = {
            what: NativeFunction(_address(loaded, CALLBACKS[what]), loaded)
            for what, loaded in zip(graphs, libraries, strict=True)
        }
        data = [np.require(var.get_value(), requirements="C") for var in shared]
        names, slices, shapes = (part[: len(model.free_RVs)] for part in every)
        reparameterized = [
            model.rvs_to_values[var].name
            for var in model.free_RVs
            if model.rvs_to_transforms.get(var) and model.rvs_to_values[var].name not in unstored
        ]
        dims, coords = compile_pymc._prepare_dims_and_coords(model, every, reparameterized)
        template = compile_pymc.CompiledPyMCModel(
            _n_dim=slices[-1].stop,
            dims=dims,
            _coords=coords,
            _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
            compiled_logp_func=functions["log density"],
            compiled_expand_func=functions["deterministics"],
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


def _graphs(model, unstored: tuple = ()):
    """The graphs nutpie calls, as ``nutpie.compile_pymc._make_functions`` builds them,
    except that the free variables are cut from the point nutpie passes at sizes read
    from the model's data, never at constant positions: the graphs then hold no size of
    the table, and one compiled model serves every table of its structure.

    Returns the point and, by callback, the outputs: ``log density`` (the log density
    and its gradient) and ``deterministics`` (the free variables, then the
    deterministics, flat and joined, those named in ``unstored`` left out), each a graph
    of the point and the model's data.
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
        [replacements[v].ravel() for v in values if v.name not in unstored]
        + [var.ravel() for var in remaining if var.name not in unstored]
    )
    outputs = clone_replace([logp, grad, expanded], replacements)
    return point, {"log density": outputs[:2], "deterministics": outputs[2:]}


def structure_key(model, point, graphs) -> str | None:
    """A key of ``graphs`` before PyTensor rewrites them: every operation (pickled: its
    type and parameters, which is what PyTensor's own equality of operations compares;
    an operation defined by a graph of its own, such as ``logaddexp``, by that graph, in
    the same way), how they connect, the types of the data and the constants' values,
    with the versions of PyTensor, PyMC, nutpie and numpy, the C writer's source, the C
    compiler and the flags that steer PyTensor's rewrites. The same key gives the same C,
    so the libraries a structure compiled before recorded (``native.library.remember_structure``)
    can be loaded without rewriting the graphs again. ``None`` where the graphs have an
    input other than the point and the model's data, or an operation that cannot be
    pickled.

    Raises
    ------
    library.NoCompiler
        No C compiler.
    """
    import pickle
    import sys

    import nutpie
    import pymc
    import pytensor

    config = pytensor.config
    digest = hashlib.sha256()

    def add(*parts):
        digest.update(pickle.dumps(parts, protocol=5))

    add(sys.version, *(m.__version__ for m in (pytensor, pymc, nutpie, np)))
    add(config.floatX, config.optimizer_excluding, config.optimizer_including)
    add(config.optimizer_requiring, model.check_bounds)
    add(*(Path(m.__file__).read_text() for m in (writer, operations, c_code)))
    add(library.compiler(), library.FLAGS)
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


def _data_variables(graphs) -> list:
    """The model's data variables the graphs read, in the order first read: the order of
    the callbacks' pointer table."""
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.traversal import graph_inputs

    found = {}
    for outputs in graphs.values():
        for var in graph_inputs(outputs):
            if isinstance(var, SharedVariable):
                found.setdefault(var, None)
    return list(found)


def _reads(graphs, shared) -> dict:
    """Per graph, its data variables in the pointer table's order."""
    from pytensor.graph.traversal import graph_inputs

    reads = {}
    for what, outputs in graphs.items():
        inputs = set(graph_inputs(outputs))
        reads[what] = [var for var in shared if var in inputs]
    return reads


def _built(point, graphs, shared, notice: str, start: float):
    """Each graph rewritten, written as C and compiled (or loaded where its C is in the
    cache); the libraries and the record of the structure (``_known`` reads it)."""
    ndims = [var.type.ndim for var in shared]
    sources, record = [], {}
    for what, inputs in _reads(graphs, shared).items():
        rewritten = writer.rewritten([point, *inputs], graphs[what])
        at = [shared.index(var) for var in inputs]
        sources.append(writer.c_source(rewritten, at, ndims, what))
        record[what] = {"data": [var.name for var in inputs]}
    progress(f"compile: the model's graphs built in {time.perf_counter() - start:.1f} s")
    names = " and ".join(graphs)
    began = time.perf_counter()

    def compiling(count):
        progress(f"compile: {names}: cache miss, compiling (C; {notice}) ...")

    libraries, compiled = library.libraries(sources, compiling)
    seconds = time.perf_counter() - began
    if compiled:
        progress(
            f"compile: {names}: compiled and cached in {seconds:.1f} s ({library.cache_dir()})"
        )
    else:
        progress(f"compile: {names}: cache hit, loaded in {seconds:.1f} s")
    for entry, source in zip(record.values(), sources, strict=True):
        entry["library"] = library.library_key(source)
    return libraries, record


def _known(structure, shared, graphs):
    """The libraries of a structure compiled before, and its record, where the record
    names the graphs' own data (by name, each name once) and its libraries load from the
    cache; ``None`` otherwise."""
    record = library.read_structure(structure)
    names = [var.name for var in shared]
    if record is None or len(set(names)) != len(names):
        return None
    expected = {
        what: [var.name for var in inputs] for what, inputs in _reads(graphs, shared).items()
    }
    try:
        if {what: record[what]["data"] for what in graphs} != expected:
            return None
        keys = [record[what]["library"] for what in graphs]
    except (KeyError, TypeError):
        return None
    if not all(isinstance(key, str) for key in keys):
        return None
    libraries = library.load(keys)
    return None if libraries is None else (libraries, record)


def _address(loaded, name: str) -> int:
    """The address of the function ``name`` of the loaded library ``loaded``."""
    import ctypes

    return ctypes.cast(getattr(loaded, name), ctypes.c_void_p).value


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


def _kept(layout, unstored: tuple):
    """``layout`` (``_layout``) of the expand function's output without the variables
    named in ``unstored``, its slices closed up."""
    names, _, shapes = layout
    kept = [
        (name, shape) for name, shape in zip(names, shapes, strict=True) if name not in unstored
    ]
    names, shapes = [name for name, _ in kept], [shape for _, shape in kept]
    sizes = np.cumsum([0] + [int(np.prod(shape)) for shape in shapes])
    slices = [slice(int(a), int(b)) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    return names, slices, shapes


def _pointers(data) -> np.ndarray:
    """The callbacks' pointer table: each data array's address, then its shape."""
    table = []
    for value in data:
        table += [value.ctypes.data, *value.shape]
    return np.array(table, dtype=np.int64)
