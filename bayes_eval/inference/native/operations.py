"""Each PyTensor operation a model's graph holds, written as C: a loop, a view, or a check.

Every function takes the writer (``writer._Writer``: its variables, buffers and lines) and
one node of the graph, and writes the C that computes the node's outputs from its inputs.
``OPERATIONS`` names them by the class of the operation; the writer calls them.
"""

from __future__ import annotations

import numpy as np

from bayes_eval.inference.native.c_code import Unsupported, Var, ctype, literal, loops, offset, size


def inline_graph(w, node) -> None:
    """An operation defined by a graph of its own (``logsumexp``): its graph, inline."""
    from pytensor.graph.basic import Constant

    inner_graph = node.op.fgraph  # shared by every use of the operation
    for inner, outer in zip(inner_graph.inputs, node.inputs, strict=True):
        w.vars[inner] = w.var(outer)
    for inner in inner_graph.toposort():
        w.node(inner)
    for outer, inner in zip(node.outputs, inner_graph.outputs, strict=True):
        if isinstance(inner, Constant) and inner not in w.vars:
            w.constant(inner)
        w.vars[outer] = w.var(inner)


def scalar(w, node) -> None:
    """A scalar operation on scalars."""
    outputs = [w.new(o) for o in node.outputs]
    inames = [w.scalar(i) for i in node.inputs]
    nodename = f"n{len(w.vars)}"
    code = w.scalar_code(node.op, node, nodename, inames, [o.name for o in outputs])
    w.emit("{", code, "}")


def elemwise(w, node) -> None:
    from pytensor.scalar.basic import get_scalar_type

    op = node.op
    ndim = node.outputs[0].type.ndim
    inputs = [w.var(i) for i in node.inputs]
    shape = [f"be_e{d}" for d in range(ndim)]
    w.emit("{")
    for d in range(ndim):
        w.emit(f"int64_t be_e{d} = 1;")
        for v in inputs:
            w.emit(
                f"if ({v.name}_s[{d}] != 1) {{ if (be_e{d} == 1) be_e{d} = {v.name}_s[{d}]; "
                f"else if (be_e{d} != {v.name}_s[{d}]) FAIL; }}"
            )
    outputs = []
    for o in node.outputs:
        v = w.new(o)
        for d in range(ndim):
            w.emit(f"{v.name}_s[{d}] = {shape[d]};")
        w.alloc(v, w.contiguous(v))
        outputs.append(v)
    scalar_inputs = [get_scalar_type(i.type.dtype).make_variable() for i in node.inputs]
    scalar_node = op.scalar_op.make_node(*scalar_inputs)
    nodename = f"n{len(w.vars)}"
    inames = [f"be_a{k}" for k in range(len(inputs))]
    onames = [f"be_o{k}" for k in range(len(outputs))]
    code = w.scalar_code(op.scalar_op, scalar_node, nodename, inames, onames)
    body = [
        f"{ctype(i.type.dtype)} be_a{k} = {v.name}[{offset(v, ndim, broadcast=True)}];"
        for k, (i, v) in enumerate(zip(scalar_inputs, inputs, strict=True))
    ]
    body += [f"{ctype(o.type.dtype)} be_o{k};" for k, o in enumerate(scalar_node.outputs)]
    body += ["{", code, "}"]
    body += [f"{v.name}[{offset(v, ndim)}] = ({v.ctype}) be_o{k};" for k, v in enumerate(outputs)]
    w.emit(*loops(shape, body))
    w.emit("}")


def reduction(w, node) -> None:
    from pytensor.scalar.basic import get_scalar_type

    op = node.op
    x = w.var(node.inputs[0])
    axes = sorted(range(x.ndim) if op.axis is None else op.axis)
    kept = [d for d in range(x.ndim) if d not in axes]
    identity = op.scalar_op.identity
    acc = node.outputs[0].type.dtype
    if identity is None or (np.isinf(float(identity)) and not acc.startswith("float")):
        raise Unsupported(f"a reduction of {acc} without a finite identity ({op.scalar_op})")
    out = w.new(node.outputs[0])
    for k, d in enumerate(kept):
        w.emit(f"{out.name}_s[{k}] = {x.name}_s[{d}];")
    size = w.contiguous(out)
    w.alloc(out, size)
    w.emit(f"for (int64_t i = 0; i < {size}; i++) {out.name}[i] = {literal(identity, acc)};")
    scalar_node = op.scalar_op.make_node(
        get_scalar_type(acc).make_variable(), get_scalar_type(acc).make_variable()
    )
    nodename = f"n{len(w.vars)}"
    code = w.scalar_code(op.scalar_op, scalar_node, nodename, ["be_r", "be_x"], ["be_y"])
    target = " + ".join(f"i{d} * {out.name}_t[{k}]" for k, d in enumerate(kept)) or "0"
    shape = [f"{x.name}_s[{d}]" for d in range(x.ndim)]
    body = [
        f"{out.ctype} be_r = {out.name}[{target}];",
        f"{out.ctype} be_x = ({out.ctype}) {x.name}[{offset(x, x.ndim)}];",
        f"{out.ctype} be_y;",
        "{",
        code,
        "}",
        f"{out.name}[{target}] = be_y;",
    ]
    w.emit("{", *loops(shape, body), "}")


def dimshuffle(w, node) -> None:
    x = w.var(node.inputs[0])
    v = w.new(node.outputs[0])
    w.emit(f"{v.name} = {x.name};")
    for k, entry in enumerate(node.op.new_order):
        if entry == "x":
            w.emit(f"{v.name}_s[{k}] = 1; {v.name}_t[{k}] = 0;")
        else:
            w.emit(f"{v.name}_s[{k}] = {x.name}_s[{entry}]; {v.name}_t[{k}] = {x.name}_t[{entry}];")


def same_view(w, node) -> None:
    w.view(node.outputs[0], w.var(node.inputs[0]))


def specify_shape(w, node) -> None:
    from pytensor.graph.basic import Constant

    x = w.var(node.inputs[0])
    for d, extent in enumerate(node.inputs[1:]):
        if isinstance(extent, Constant) and extent.data is None:
            continue
        if not hasattr(extent.type, "dtype"):
            continue
        w.emit(f"if ({x.name}_s[{d}] != {w.scalar(extent)}) FAIL;")
    w.view(node.outputs[0], x)


def assertion(w, node) -> None:
    x = w.var(node.inputs[0])
    for condition in node.inputs[1:]:
        w.emit(*_all_true(w, condition))
    w.view(node.outputs[0], x)


def _all_true(w, condition) -> list[str]:
    """Lines that fail unless every element of ``condition`` is true."""
    from pytensor.graph.basic import Constant

    if isinstance(condition, Constant):
        return [] if np.all(condition.data) else ["FAIL;"]
    c = w.var(condition)
    if c.ndim <= 0:
        return [f"if (!({w.scalar(condition)})) FAIL;"]
    shape = [f"{c.name}_s[{d}]" for d in range(c.ndim)]
    return ["{", *loops(shape, [f"if (!{c.name}[{offset(c, c.ndim)}]) FAIL;"]), "}"]


def scalar_from_tensor(w, node) -> None:
    v = w.new(node.outputs[0])
    w.emit(f"{v.name} = ({v.ctype}) {w.scalar(node.inputs[0])};")


def tensor_from_scalar(w, node) -> None:
    v = w.new(node.outputs[0])
    w.alloc(v, "1")
    w.emit(f"{v.name}[0] = ({v.ctype}) {w.scalar(node.inputs[0])};")


def shape_i(w, node) -> None:
    x = w.var(node.inputs[0])
    v = w.new(node.outputs[0])
    w.alloc(v, "1")
    w.emit(f"{v.name}[0] = {x.name}_s[{node.op.i}];")


def shape(w, node) -> None:
    x = w.var(node.inputs[0])
    v = w.new_buffer(node.outputs[0], [str(x.ndim)])
    for d in range(x.ndim):
        w.emit(f"{v.name}[{d}] = {x.name}_s[{d}];")


def make_vector(w, node) -> None:
    v = w.new_buffer(node.outputs[0], [str(len(node.inputs))])
    for k, item in enumerate(node.inputs):
        w.emit(f"{v.name}[{k}] = ({v.ctype}) {w.scalar(item)};")


def alloc(w, node) -> None:
    value, *shape = node.inputs
    v = w.new_buffer(node.outputs[0], [w.scalar(s) for s in shape])
    _fill(w, v, w.var(value), "=")


def alloc_empty(w, node) -> None:
    v = w.new_buffer(node.outputs[0], [w.scalar(s) for s in node.inputs])
    w.emit(f"memset({v.name}, 0, sizeof({v.ctype}) * (size_t)({size(v)}));")


def _fill(w, target: Var, value: Var, how: str) -> None:
    """``target how value`` elementwise, ``value`` broadcast against ``target`` (its
    dimensions aligned at the end); a mismatch fails."""
    lead = target.ndim - value.ndim
    if lead < 0:
        raise Unsupported("a value with more dimensions than its target")
    for d in range(value.ndim):
        w.emit(
            f"if ({value.name}_s[{d}] != 1 && {value.name}_s[{d}] != "
            f"{target.name}_s[{d + lead}]) FAIL;"
        )
    terms = [
        f"i{d + lead} * ({value.name}_s[{d}] == 1 ? 0 : {value.name}_t[{d}])"
        for d in range(value.ndim)
    ]
    source = f"{value.name}[{' + '.join(terms) or '0'}]"
    shape = [f"{target.name}_s[{d}]" for d in range(target.ndim)]
    line = f"{target.name}[{offset(target, target.ndim)}] {how} ({target.ctype}) {source};"
    w.emit("{", *loops(shape, [line]), "}")


def _copy(w, variable, x: Var) -> Var:
    """``variable`` a contiguous copy of ``x``."""
    v = w.new_buffer(variable, [f"{x.name}_s[{d}]" for d in range(x.ndim)])
    _fill(w, v, x, "=")
    return v


def join(w, node) -> None:
    parts = [w.var(p) for p in node.inputs]
    ndim = node.outputs[0].type.ndim
    axis = int(node.op.axis) % ndim
    first = parts[0]
    shape = [f"{first.name}_s[{d}]" for d in range(ndim)]
    shape[axis] = " + ".join(f"{p.name}_s[{axis}]" for p in parts)
    for p in parts[1:]:
        for d in range(ndim):
            if d != axis:
                w.emit(f"if ({p.name}_s[{d}] != {first.name}_s[{d}]) FAIL;")
    v = w.new_buffer(node.outputs[0], shape)
    w.emit("{", "int64_t be_at = 0;")
    for p in parts:
        w.emit("{", f"{v.ctype}* be_base = {v.name} + be_at * {v.name}_t[{axis}];")
        pshape = [f"{p.name}_s[{d}]" for d in range(ndim)]
        target = " + ".join(f"i{d} * {v.name}_t[{d}]" for d in range(ndim))
        line = f"be_base[{target}] = ({v.ctype}) {p.name}[{offset(p, ndim)}];"
        w.emit(*loops(pshape, [line]), f"be_at += {p.name}_s[{axis}];", "}")
    w.emit("}")


def split(w, node) -> None:
    x, splits = node.inputs
    x = w.var(x)
    axis = int(node.op.axis) % x.ndim
    sizes = w.var(splits)
    count = len(node.outputs)
    w.emit(
        f"if ({sizes.name}_s[0] != {count}) FAIL;",
        "{",
        "int64_t be_total = 0;",
        f"for (int k = 0; k < {count}; k++) {{ if ({sizes.name}[k * {sizes.name}_t[0]] < 0) "
        f"FAIL; be_total += {sizes.name}[k * {sizes.name}_t[0]]; }}",
        f"if (be_total != {x.name}_s[{axis}]) FAIL;",
        "}",
    )
    start = "0"
    for k, output in enumerate(node.outputs):
        part = f"{sizes.name}[{k} * {sizes.name}_t[0]]"
        v = w.view(output, x, f"{x.name} + ({start}) * {x.name}_t[{axis}]")
        w.emit(f"{v.name}_s[{axis}] = {part};")
        start = f"{start} + {part}"


def reshape(w, node) -> None:
    x = w.var(node.inputs[0])
    shape = w.var(node.inputs[1])
    ndim = node.outputs[0].type.ndim
    if x.ndim > 1:  # a contiguous copy, whose elements are in the order reshaped
        x = _copy(w, node.inputs[0].clone(), x)
    stride = f"{x.name}_t[0]" if x.ndim == 1 else "1"
    v = w.new(node.outputs[0])
    total = size(x)
    w.emit(f"{v.name} = {x.name};", "{", "int64_t be_known = 1; int be_free = -1;")
    for d in range(ndim):
        extent = f"{shape.name}[{d} * {shape.name}_t[0]]"
        w.emit(
            f"{v.name}_s[{d}] = {extent};",
            f"if ({extent} == -1) {{ if (be_free >= 0) FAIL; be_free = {d}; }} "
            f"else be_known *= {extent};",
        )
    if ndim:
        w.emit(
            f"if (be_free >= 0) {{ if (be_known == 0) FAIL; "
            f"{v.name}_s[be_free] = ({total}) / be_known; be_known *= {v.name}_s[be_free]; }}",
        )
    w.emit(f"if (be_known != ({total})) FAIL;", "}")
    if ndim:
        w.emit(f"{v.name}_t[{ndim - 1}] = {stride};")
        for d in range(ndim - 2, -1, -1):
            w.emit(f"{v.name}_t[{d}] = {v.name}_t[{d + 1}] * {v.name}_s[{d + 1}];")


# ------------------------------------------------------------------ indexing


def _indices(w, node, first: int):
    from pytensor.tensor.subtensor import indices_from_subtensor

    return indices_from_subtensor(node.inputs[first:], node.op.idx_list)


def _basic_view(w, v: Var, x: Var, indices) -> None:
    """``v`` the view of ``x`` that the basic ``indices`` (slices and integers) give."""
    pointer = f"be_p{v.name}"
    w.emit(f"{x.ctype}* {pointer} = {x.name};")
    k = 0
    for d in range(x.ndim):
        index = indices[d] if d < len(indices) else slice(None)
        if isinstance(index, slice):
            parts = []
            for part in (index.start, index.stop):
                parts += ["0", "0"] if part is None else ["1", w.scalar(part)]
            step = "1" if index.step is None else w.scalar(index.step)
            w.emit(
                "{",
                "int64_t be_first;",
                f"int64_t be_step = {step};",
                "if (be_step == 0) FAIL;",
                f"int64_t be_len = be_slice({x.name}_s[{d}], {', '.join(parts)}, be_step, "
                "&be_first);",
                f"{pointer} += be_first * {x.name}_t[{d}];",
                f"{v.name}_s[{k}] = be_len; {v.name}_t[{k}] = be_step * {x.name}_t[{d}];",
                "}",
            )
            k += 1
        else:
            w.emit(
                "{",
                f"int64_t be_i = {w.scalar(index)};",
                f"if (be_i < 0) be_i += {x.name}_s[{d}];",
                f"if (be_i < 0 || be_i >= {x.name}_s[{d}]) FAIL;",
                f"{pointer} += be_i * {x.name}_t[{d}];",
                "}",
            )
    w.emit(f"{v.name} = {pointer};")


def subtensor(w, node) -> None:
    x = w.var(node.inputs[0])
    v = w.new(node.outputs[0])
    w.emit("{")
    _basic_view(w, v, x, _indices(w, node, 1))
    w.emit("}")


def inc_subtensor(w, node) -> None:
    x = w.var(node.inputs[0])
    y = w.var(node.inputs[1])
    indices = _indices(w, node, 2)
    out = _copy(w, node.outputs[0], x)
    ndim = sum(isinstance(i, slice) for i in indices) + x.ndim - len(indices)
    target = Var(f"be_w{out.name}", out.ctype, ndim)
    w.emit("{", f"{out.ctype}* {target.name};")
    if ndim:
        w.emit(f"int64_t {target.name}_s[{ndim}]; int64_t {target.name}_t[{ndim}];")
    _basic_view(w, target, out, indices)
    _fill(w, target, y, "=" if node.op.set_instead_of_inc else "+=")
    w.emit("}")


def _advanced_index(w, node, first: int):
    """The one index array of an advanced indexing on the first dimension (the
    pattern the models' graphs hold: integers of any shape, or a boolean vector);
    Unsupported otherwise."""
    indices = _indices(w, node, first)
    if len(indices) != 1 or isinstance(indices[0], slice) or indices[0].type.ndim == 0:
        raise Unsupported("advanced indexing other than by one array on the first axis")
    index = indices[0]
    mask = index.type.dtype == "bool"
    if mask and index.type.ndim != 1:
        raise Unsupported("advanced indexing by a boolean array that is not a vector")
    return w.var(index), mask


def _positions(w, index: Var, mask: bool, length: str) -> list[str]:
    """Lines, opening a block, that set ``be_n`` (how many) and ``be_pos`` (a buffer of
    the positions on the first dimension, the index array's in C order, normalised and
    checked against ``length``)."""
    shape = [f"{index.name}_s[{d}]" for d in range(index.ndim)]
    item = f"{index.name}[{offset(index, index.ndim)}]"
    lines = ["{", f"int64_t be_n = {size(index)};"]
    if mask:
        lines += [
            f"if ({index.name}_s[0] != {length}) FAIL;",
            "be_n = 0;",
            *loops(shape, [f"if ({item}) be_n++;"]),
        ]
    lines += [
        "int64_t* be_pos = (int64_t*) malloc(sizeof(int64_t) * (size_t)(be_n > 0 ? be_n : 1));",
        "if (!be_pos) FAIL;",
        "int64_t be_j = 0;",
    ]
    if mask:
        body = [f"if ({item}) be_pos[be_j++] = i0;"]
    else:
        body = [
            f"int64_t be_i = (int64_t) {item};",
            f"if (be_i < 0) be_i += {length};",
            f"if (be_i < 0 || be_i >= {length}) {{ free(be_pos); FAIL; }}",
            "be_pos[be_j++] = be_i;",
        ]
    return lines + loops(shape, body)


def _result_shape(w, index: Var, mask: bool, x: Var) -> list[str]:
    """The shape of ``x`` indexed on its first dimension: the index array's (the count,
    for a mask), then ``x``'s others."""
    lead = ["be_n"] if mask else [f"{index.name}_s[{d}]" for d in range(index.ndim)]
    return lead + [f"{x.name}_s[{d}]" for d in range(1, x.ndim)]


def advanced_subtensor(w, node) -> None:
    x = w.var(node.inputs[0])
    index, mask = _advanced_index(w, node, 1)
    v = w.new(node.outputs[0])
    w.emit(*_positions(w, index, mask, f"{x.name}_s[0]"))
    for d, extent in enumerate(_result_shape(w, index, mask, x)):
        w.emit(f"{v.name}_s[{d}] = {extent};")
    _alloc_beside_positions(w, v, w.contiguous(v))
    rest = [f"{x.name}_s[{d}]" for d in range(1, x.ndim)]
    source = " + ".join(
        [f"be_pos[k] * {x.name}_t[0]"] + [f"i{d} * {x.name}_t[{d}]" for d in range(1, x.ndim)]
    )
    target = " + ".join(
        ["k * be_row"] + [f"i{d} * {v.name}_t[{v.ndim - x.ndim + d}]" for d in range(1, x.ndim)]
    )
    row = "1" if x.ndim == 1 else f"{v.name}_t[{v.ndim - x.ndim}]"
    line = f"{v.name}[{target}] = {x.name}[{source}];"
    w.emit(
        f"int64_t be_row = {row};",
        "for (int64_t k = 0; k < be_n; k++) {",
        *loops(["1", *rest], [line]),
        "}",
        "free(be_pos);",
        "}",
    )


def _alloc_beside_positions(w, v: Var, count: str) -> None:
    """``alloc`` inside the block holding ``be_pos``: freed on failure too."""
    index = w.f.buffers
    w.f.buffers += 1
    w.emit(
        f"be_heap[{index}] = malloc(sizeof({v.ctype}) * (size_t)({count} > 0 ? {count} : 1));",
        f"if (!be_heap[{index}]) {{ free(be_pos); FAIL; }}",
        f"{v.name} = ({v.ctype}*) be_heap[{index}];",
    )


def advanced_inc_subtensor(w, node) -> None:
    op = node.op
    if getattr(op, "ignore_duplicates", False) and not op.set_instead_of_inc:
        raise Unsupported("an increment that ignores duplicate indices")
    x = w.var(node.inputs[0])
    y = w.var(node.inputs[1])
    index, mask = _advanced_index(w, node, 2)
    out = _copy(w, node.outputs[0], x)
    w.emit(*_positions(w, index, mask, f"{x.name}_s[0]"))
    # y broadcast against the indexed shape, aligned at the end; the index's
    # dimensions run as one (k), x's others as i1 ...
    extents = _result_shape(w, index, mask, x)
    lead = len(extents) - y.ndim
    if lead < 0:
        raise Unsupported("an increment with more dimensions than its target")
    for d in range(y.ndim):
        w.emit(
            f"if ({y.name}_s[{d}] != 1 && {y.name}_s[{d}] != {extents[d + lead]}) "
            "{ free(be_pos); FAIL; }"
        )
    lead_dims = len(extents) - (x.ndim - 1)  # the index's dimensions in the result
    # k counts the index's elements in C order: its own coordinates, for y
    coordinates = []
    for d in range(lead_dims):
        inner = "*".join(extents[d + 1 : lead_dims]) or "1"
        coordinates.append(f"((k / ({inner})) % {extents[d]})")
    coordinates += [f"i{d}" for d in range(1, x.ndim)]
    source = " + ".join(
        f"{coordinates[d + lead]} * ({y.name}_s[{d}] == 1 ? 0 : {y.name}_t[{d}])"
        for d in range(y.ndim)
    )
    target = " + ".join(
        [f"be_pos[k] * {out.name}_t[0]"] + [f"i{d} * {out.name}_t[{d}]" for d in range(1, x.ndim)]
    )
    how = "=" if op.set_instead_of_inc else "+="
    line = f"{out.name}[{target}] {how} ({out.ctype}) {y.name}[{source or '0'}];"
    rest = [f"{x.name}_s[{d}]" for d in range(1, x.ndim)]
    w.emit(
        "for (int64_t k = 0; k < be_n; k++) {",
        *loops(["1", *rest], [line]),
        "}",
        "free(be_pos);",
        "}",
    )


def cumulative(w, node) -> None:
    """A cumulative sum or product along one axis."""
    if node.op.mode not in ("add", "mul"):
        raise Unsupported(f"a cumulative {node.op.mode}")
    x = w.var(node.inputs[0])
    out = _copy(w, node.outputs[0], x)
    axis = int(node.op.axis) % max(x.ndim, 1)
    how = "+=" if node.op.mode == "add" else "*="
    shape = [f"{out.name}_s[{d}]" for d in range(out.ndim)]
    at = offset(out, out.ndim)
    line = f"if (i{axis} > 0) {out.name}[{at}] {how} {out.name}[{at} - {out.name}_t[{axis}]];"
    w.emit("{", *loops(shape, [line]), "}")


def dot(w, node) -> None:
    a, b = (w.var(i) for i in node.inputs)
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise Unsupported("a dot product of other than vectors and matrices")
    inner_a = f"{a.name}_s[{a.ndim - 1}]"
    inner_b = f"{b.name}_s[0]"
    w.emit(f"if ({inner_a} != {inner_b}) FAIL;")
    shape = ([f"{a.name}_s[0]"] if a.ndim == 2 else []) + (
        [f"{b.name}_s[1]"] if b.ndim == 2 else []
    )
    v = w.new_buffer(node.outputs[0], shape)
    rows = "i0" if a.ndim == 2 else None
    cols = ("i1" if a.ndim == 2 else "i0") if b.ndim == 2 else None
    left = (f"{rows} * {a.name}_t[0] + " if rows else "") + f"j * {a.name}_t[{a.ndim - 1}]"
    right = f"j * {b.name}_t[0]" + (f" + {cols} * {b.name}_t[1]" if cols else "")
    target = offset(v, v.ndim)
    body = [
        f"{v.ctype} be_acc = 0;",
        f"for (int64_t j = 0; j < {inner_a}; j++) be_acc += {a.name}[{left}] * {b.name}[{right}];",
        f"{v.name}[{target}] = be_acc;",
    ]
    w.emit("{", *loops([f"{v.name}_s[{d}]" for d in range(v.ndim)], body), "}")


# The function that writes each operation, by the name of its class (CAReduce's and the
# views' subclasses under their own names).
OPERATIONS = {
    "Elemwise": elemwise,
    **dict.fromkeys(("CAReduce", "Sum", "Prod", "Max", "Min", "All", "Any"), reduction),
    "DimShuffle": dimshuffle,
    **dict.fromkeys(("ViewOp", "OutputGuard", "DeepCopyOp", "Identity"), same_view),
    "SpecifyShape": specify_shape,
    **dict.fromkeys(("Assert", "CheckParameterValue"), assertion),
    "ScalarFromTensor": scalar_from_tensor,
    "TensorFromScalar": tensor_from_scalar,
    "Shape_i": shape_i,
    "Shape": shape,
    "MakeVector": make_vector,
    "Alloc": alloc,
    "AllocEmpty": alloc_empty,
    "Join": join,
    "Split": split,
    "Reshape": reshape,
    "Subtensor": subtensor,
    "IncSubtensor": inc_subtensor,
    "AdvancedSubtensor": advanced_subtensor,
    "AdvancedIncSubtensor": advanced_inc_subtensor,
    "CumOp": cumulative,
    "Dot": dot,
}
