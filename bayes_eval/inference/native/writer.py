"""A PyTensor graph as one C function: the source of nutpie's two callbacks.

nutpie samples a model through two C functions, its log density with the gradient and its
expand function (``nutpie_model``). PyTensor's numba backend compiles each operation of a
graph as a function of its own (about 500 for ``hierarchical``), which takes numba 20 to
80 s on 2 cores. Here the same graph, rewritten by PyTensor as its C backend rewrites it
(fusion into ``Composite`` operations included; nothing in place), is written out as one C
function, each operation a loop or a view, each scalar operation in the C code PyTensor
itself gives it (``ScalarOp.c_code``); a C compiler builds it in a second
(``library``). The graph stays the model's one definition: nothing here knows a model.

Every variable of a graph is a strided view ``(pointer, shape, strides)``; an operation's
result is a new buffer, freed when the function returns, or a view of its input. Sizes
are read at run time (from the point and the data), so one function serves every table of
a structure whose graphs hold no size. An operation outside the set written here raises
``Unsupported``, and the caller compiles the graph with nutpie's own numba instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bayes_eval.inference.native import operations
from bayes_eval.inference.native.c_code import PREAMBLE, Unsupported, Var, ctype, literal

__all__ = ["EXPAND_NAME", "LOGP_NAME", "c_source", "rewritten"]

# Callbacks' signatures and what they return, as nutpie's numba callbacks did: 0, or an
# error code (the log density: 1 for an error, 3 for a non-finite gradient, 4 for a
# non-finite value; the expand function: -2).
LOGP_NAME, EXPAND_NAME = "bayes_eval_logp", "bayes_eval_expand"


def rewritten(inputs, outputs):
    """``outputs`` as a function of ``inputs``, rewritten as PyTensor's C backend rewrites a
    graph (canonical forms, stable forms, fusion of elementwise operations into
    ``Composite``), with nothing done in place and no BLAS calls; a ``FunctionGraph``."""
    from pytensor.compile.mode import get_mode
    from pytensor.graph.fg import FunctionGraph

    graph = FunctionGraph(inputs, outputs, clone=True)
    get_mode("C").excluding("inplace", "BlasOpt").optimizer.rewrite(graph)
    return graph


@dataclass
class _Function:
    """The parts of one C function as it is written."""

    declarations: list = field(default_factory=list)
    body: list = field(default_factory=list)
    buffers: int = 0


def c_source(graph, data_at: list[int], data_ndims: list[int], kind: str) -> str:
    """The C source of nutpie's callback ``kind`` (``"log density"``: outputs the value and
    the gradient; ``"deterministics"``: one vector) computing ``graph`` (``rewritten``;
    inputs: the point, then the model's data in the order of ``data_at``).

    ``data_at`` gives each data input's position in the callbacks' pointer table, whose
    arrays have ``data_ndims`` dimensions (``nutpie_model._pointers``: each array's
    address, then its shape).
    """
    return _Writer(graph, data_at, data_ndims, kind).source()


class _Writer:
    def __init__(self, graph, data_at, data_ndims, kind):
        self.graph = graph
        self.kind = kind
        self.data_at = data_at
        self.offsets = np.cumsum([0] + [1 + n for n in data_ndims]).tolist()
        self.vars: dict = {}
        self.support: dict[str, None] = {}
        self.constants: list[str] = []
        self.f = _Function()

    # ------------------------------------------------------------------ variables

    def var(self, variable) -> Var:
        if variable not in self.vars:
            raise Unsupported(f"variable {variable} used before it is computed")
        return self.vars[variable]

    def new(self, variable) -> Var:
        """Declare ``variable``'s C storage (a scalar, or a tensor's pointer, shape and
        strides)."""
        from pytensor.scalar.basic import ScalarType
        from pytensor.tensor.type import TensorType

        name = f"v{len(self.vars)}"
        if isinstance(variable.type, ScalarType):
            v = Var(name, ctype(variable.type.dtype), -1)
            self.f.declarations.append(f"{v.ctype} {name} = 0;")
        elif isinstance(variable.type, TensorType):
            v = Var(name, ctype(variable.type.dtype), variable.type.ndim)
            self.f.declarations.append(f"{v.ctype}* {name} = NULL;")
            if v.ndim:
                self.f.declarations.append(
                    f"int64_t {name}_s[{v.ndim}] = {{0}}; int64_t {name}_t[{v.ndim}] = {{0}};"
                )
            else:
                self.f.declarations.append(f"{v.ctype} {name}_b = 0;")
        else:
            raise Unsupported(f"a variable of type {variable.type}")
        self.vars[variable] = v
        return v

    def scalar(self, variable) -> str:
        """A C expression of the value of a scalar, a 0-d tensor or a constant."""
        from pytensor.graph.basic import Constant

        if isinstance(variable, Constant):
            return literal(np.asarray(variable.data).item(), variable.type.dtype)
        v = self.var(variable)
        return v.name if v.ndim == -1 else f"{v.name}[0]"

    def alloc(self, v: Var, size: str) -> None:
        """``v`` a new contiguous buffer of ``size`` elements (freed on return); a 0-d
        tensor lives in the function's frame."""
        if v.ndim == 0:
            self.emit(f"{v.name} = &{v.name}_b;")
            return
        index = self.f.buffers
        self.f.buffers += 1
        self.emit(
            f"be_heap[{index}] = malloc(sizeof({v.ctype}) * (size_t)({size} > 0 ? {size} : 1));",
            f"if (!be_heap[{index}]) FAIL;",
            f"{v.name} = ({v.ctype}*) be_heap[{index}];",
        )

    def contiguous(self, v: Var) -> str:
        """Set ``v``'s strides to C order from its shape; return its size."""
        if v.ndim == 0:
            return "1"
        self.emit(f"{v.name}_t[{v.ndim - 1}] = 1;")
        for d in range(v.ndim - 2, -1, -1):
            self.emit(f"{v.name}_t[{d}] = {v.name}_t[{d + 1}] * {v.name}_s[{d + 1}];")
        return "*".join(f"{v.name}_s[{d}]" for d in range(v.ndim))

    def new_buffer(self, variable, shape: list[str]) -> Var:
        """``variable`` a new contiguous buffer of ``shape`` (C expressions)."""
        v = self.new(variable)
        for d, extent in enumerate(shape):
            self.emit(f"{v.name}_s[{d}] = {extent};")
        self.alloc(v, self.contiguous(v))
        return v

    def view(self, variable, of: Var, pointer: str | None = None) -> Var:
        """``variable`` a view of ``of`` (same shape and strides)."""
        v = self.new(variable)
        self.emit(f"{v.name} = {pointer or of.name};")
        for d in range(v.ndim):
            self.emit(f"{v.name}_s[{d}] = {of.name}_s[{d}]; {v.name}_t[{d}] = {of.name}_t[{d}];")
        return v

    def emit(self, *lines: str) -> None:
        self.f.body.extend(lines)

    # ------------------------------------------------------------------ the function

    def source(self) -> str:
        inputs = self.graph.inputs
        point = self.new(inputs[0])
        self.emit(f"{point.name} = (npy_float64*) x;", f"{point.name}_s[0] = (int64_t) dim;")
        self.emit(f"{point.name}_t[0] = 1;")
        for variable, at in zip(inputs[1:], self.data_at, strict=True):
            self.data_input(variable, at)
        for node in self.graph.toposort():
            self.node(node)
        for output in self.graph.outputs:
            if output not in self.vars:  # a constant output
                self.constant(output)
        outputs = [self.var(o) for o in self.graph.outputs]
        if self.kind == "log density":
            signature = (
                f"int64_t {LOGP_NAME}(uint64_t dim, const double* x, double* out, "
                "double* logp, const int64_t* meta)"
            )
            value, grad = outputs
            self.write_vector(grad, "out", "dim")
            self.emit(f"*logp = (double) {self.scalar(self.graph.outputs[0])};")
            self.emit(
                "for (uint64_t i = 0; i < dim; i++) if (!isfinite(out[i])) "
                "{ be_status = 3; goto done; }",
                "if (!isfinite(*logp)) { be_status = 4; goto done; }",
            )
            failure = "1"
        else:
            signature = (
                f"int64_t {EXPAND_NAME}(uint64_t dim, uint64_t expanded, const double* x, "
                "double* out, const int64_t* meta)"
            )
            self.write_vector(outputs[0], "out", "expanded")
            failure = "-2"
        heap = max(self.f.buffers, 1)
        lines = [
            PREAMBLE,
            *self.support,
            *self.constants,
            f"{signature} {{",
            f"#define FAIL {{ be_status = {failure}; goto done; }}",
            "int64_t be_status = 0;",
            f"void* be_heap[{heap}] = {{0}};",
            "(void) meta;",
            *self.f.declarations,
            *self.f.body,
            "done:",
            f"for (int k = 0; k < {heap}; k++) free(be_heap[k]);",
            "return be_status;",
            "#undef FAIL",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def data_input(self, variable, at: int) -> None:
        v = self.new(variable)
        start = self.offsets[at]
        self.emit(f"{v.name} = ({v.ctype}*)(intptr_t) meta[{start}];")
        if v.ndim == -1:
            raise Unsupported("scalar data")
        for d in range(v.ndim):
            self.emit(f"{v.name}_s[{d}] = meta[{start + 1 + d}];")
        self.contiguous(v)

    def write_vector(self, v: Var, out: str, size: str) -> None:
        """Copy the vector ``v`` into the callback's buffer ``out`` of ``size``."""
        if v.ndim != 1:
            raise Unsupported("an output that is not a vector")
        self.emit(
            f"if ((uint64_t) {v.name}_s[0] != {size}) FAIL;",
            f"for (int64_t i = 0; i < {v.name}_s[0]; i++) "
            f"{out}[i] = (double) {v.name}[i * {v.name}_t[0]];",
        )

    # ------------------------------------------------------------------ operations

    def node(self, node) -> None:
        from pytensor.graph.basic import Constant

        for variable in node.inputs:
            if isinstance(variable, Constant) and variable not in self.vars:
                self.constant(variable)
        name = type(node.op).__name__
        write = operations.OPERATIONS.get(name)
        if write is None:
            from pytensor.compile.builders import OpFromGraph
            from pytensor.scalar.basic import ScalarOp

            if isinstance(node.op, ScalarOp):
                write = operations.scalar
            elif isinstance(node.op, OpFromGraph):
                write = operations.inline_graph
            else:
                raise Unsupported(f"operation {name}")
        write(self, node)

    def constant(self, variable) -> None:
        from pytensor.scalar.basic import ScalarType
        from pytensor.tensor.type import TensorType

        if isinstance(variable.type, ScalarType):
            v = self.new(variable)
            self.emit(
                f"{v.name} = {literal(np.asarray(variable.data).item(), variable.type.dtype)};"
            )
            return
        if not isinstance(variable.type, TensorType):
            return  # NoneConst and the like: read by the operation itself
        data = np.asarray(variable.data)
        v = self.new(variable)
        dtype = variable.type.dtype
        name = f"c{len(self.constants)}"
        values = ", ".join(literal(x, dtype) for x in data.ravel().tolist()) or "0"
        self.constants.append(f"static const {v.ctype} {name}[] = {{{values}}};")
        self.emit(f"{v.name} = ({v.ctype}*) {name};")
        for d, extent in enumerate(data.shape):
            self.emit(f"{v.name}_s[{d}] = {extent};")
        self.contiguous(v)

    def scalar_code(self, op, scalar_node, nodename, inames, onames) -> str:
        """``op``'s C code (PyTensor's own), its support code kept once."""
        for code in (op.c_support_code(), op.c_support_code_apply(scalar_node, nodename)):
            if code and code.strip():
                self.support.setdefault(code.strip())
        try:
            code = op.c_code(scalar_node, nodename, inames, onames, {"fail": "FAIL", "id": 0})
        except (NotImplementedError, AttributeError, TypeError) as exc:
            raise Unsupported(f"scalar operation {op}: {exc}") from None
        if "Py" in code:
            raise Unsupported(f"scalar operation {op} calls Python")
        return code
