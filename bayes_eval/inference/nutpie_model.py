"""A PyMC model as nutpie samples it, compiled once per machine and model structure.

nutpie samples a model through two C functions: its log density with the gradient, and its
expand function (the deterministics of each draw). nutpie's own ``compile_pymc_model``
compiles them in every process, around the model's data, which numba cannot keep on disk.
Here the same PyTensor graphs are called from C functions that read the data through a
pointer at run time, so that the compiled code holds no data and is kept in the disk cache
(``kernel_cache``). nutpie then samples them natively, as it samples its own
(``CompiledPyMCModel``).

The graphs hold no size of the table either: the free variables are cut from nutpie's
point at sizes read from the data (``_functions``), and the models that take their design
as data (``hierarchical``, ``ecr_pooled`` and the end-to-end pooled models:
``bayes_eval.pooled.models``) compile once per structure, whatever the numbers of agents,
tasks, milestones and trials. Those whose graphs still hold their design as constants
(``joint``, ``crossed``, runs in clusters) compile once per design.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from bayes_eval.inference.kernel_cache import cached_callbacks, graph_key
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
        them but free of the table's sizes (``_functions``), each kernel compiled anew
        inside them, and nutpie's initial points (jittered); ``notice`` says what a
        compile costs."""
        import numba
        import pytensor
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
        with pytensor.config.change_flags(numba__cache=False):
            logp, expand = _functions(model)
        shape_info = _layout(model)
        names, slices, shapes = (part[: len(model.free_RVs)] for part in shape_info)
        initial_point = compile_pymc._rv_dict_to_flat_array_wrapper(
            initial_point, names=names, shapes=shapes
        )
        reparameterized = [
            model.rvs_to_values[var].name
            for var in model.free_RVs
            if model.rvs_to_transforms.get(var)
        ]
        progress(f"compile: the model's graphs built in {time.perf_counter() - start:.1f} s")
        shared = list(dict.fromkeys((*logp.get_shared(), *expand.get_shared())))
        data = [np.require(var.get_value(), requirements="C") for var in shared]
        pointer = numba.types.CPointer(numba.types.double)
        count = numba.types.uint64
        functions = []
        for what, function, source, arguments in (
            ("log density", logp, LOGP_SOURCE, (count, pointer, pointer, pointer)),
            ("deterministics", expand, EXPAND_SOURCE, (count, count, pointer, pointer)),
        ):
            inputs = [shared.index(var) for var in function.get_shared()]
            text = _source(source, inputs, data)
            py_func = _function(text, function.vm.jit_fn)
            signature = numba.types.int64(*arguments, numba.types.voidptr)
            functions.append((py_func, signature, graph_key(function, text), what))
        callbacks = cached_callbacks(functions, notice)
        dims, coords = compile_pymc._prepare_dims_and_coords(model, shape_info, reparameterized)
        template = compile_pymc.CompiledPyMCModel(
            _n_dim=slices[-1].stop,
            dims=dims,
            _coords=coords,
            _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
            compiled_logp_func=callbacks[0],
            compiled_expand_func=callbacks[1],
            initial_point_func=initial_point,
            shared_data=dict(enumerate(data)),  # kept alive while nutpie samples
            shared_var_keys={},
            user_data=_pointers(data),
            n_expanded=shape_info[1][-1].stop,
            shape_info=shape_info,
            logp_func=logp,
            expand_func=expand,
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


def _functions(model):
    """The PyTensor functions nutpie calls, as ``nutpie.compile_pymc._make_functions``
    makes them, except that the free variables are cut from the point nutpie passes at
    sizes read from the model's data, never at constant positions: the graphs then hold
    no size of the table, and one compiled model serves every table of its structure.

    Returns the log density with its gradient, and the expand function (the free
    variables, then the deterministics, flat and joined), each of the point.
    """
    import pytensor.tensor as pt
    from pymc.pytensorf import compile as compile_pymc
    from pytensor.graph import clone_replace, rewrite_graph

    free = model.free_RVs
    values = [model.rvs_to_values[var] for var in free]
    rewrites = ["canonicalize", "stabilize"]
    if not model.check_bounds:
        rewrites.append("local_remove_check_parameter")
    logp = rewrite_graph(model.logp(), include=rewrites)
    grad = pt.concatenate([pt.grad(logp, value).ravel() for value in values])
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
    logp, grad = clone_replace([logp, grad], replacements)
    names = {var.name for var in values}
    remaining = [var for var in model.unobserved_value_vars if var.name not in names]
    expanded = pt.concatenate(
        [replacements[v].ravel() for v in values] + [var.ravel() for var in remaining]
    )
    with model:
        logp_function = compile_pymc((point,), (logp, grad), mode="NUMBA")
        givens = list(replacements.items())
        expand_function = compile_pymc((point,), [expanded], givens=givens, mode="NUMBA")
    return logp_function, expand_function


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
