"""The C text the writer is made of: the types, the preamble, literals, loops and offsets
(``writer`` assembles a function of them, ``operations`` writes each operation)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["PREAMBLE", "Unsupported", "Var", "ctype", "literal", "loops", "offset", "size"]

# C types of the dtypes a graph holds (PyTensor's scalar code names them npy_*).
C_TYPES = {
    "float64": "npy_float64",
    "float32": "npy_float32",
    "int64": "npy_int64",
    "int32": "npy_int32",
    "int16": "npy_int16",
    "int8": "npy_int8",
    "uint64": "npy_uint64",
    "uint32": "npy_uint32",
    "uint16": "npy_uint16",
    "uint8": "npy_uint8",
    "bool": "npy_bool",
}

PREAMBLE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef double npy_float64;
typedef float npy_float32;
typedef int64_t npy_int64;
typedef int32_t npy_int32;
typedef int16_t npy_int16;
typedef int8_t npy_int8;
typedef uint64_t npy_uint64;
typedef uint32_t npy_uint32;
typedef uint16_t npy_uint16;
typedef uint8_t npy_uint8;
typedef uint8_t npy_bool;
/* PyTensor's scalar code raises no Python error in a kernel */
#define KERNEL 1

/* Python's slice of a dimension of length n: the first index and the count */
static int64_t be_slice(int64_t n, int has_start, int64_t start, int has_stop, int64_t stop,
                        int64_t step, int64_t* first) {
    if (step > 0) {
        if (!has_start) start = 0;
        else if (start < 0) { start += n; if (start < 0) start = 0; }
        else if (start > n) start = n;
        if (!has_stop) stop = n;
        else if (stop < 0) { stop += n; if (stop < 0) stop = 0; }
        else if (stop > n) stop = n;
        *first = start;
        return stop > start ? (stop - start + step - 1) / step : 0;
    }
    if (!has_start) start = n - 1;
    else if (start < 0) { start += n; if (start < 0) start = -1; }
    else if (start >= n) start = n - 1;
    if (!has_stop) stop = -1;
    else if (stop < 0) { stop += n; if (stop < 0) stop = -1; }
    else if (stop >= n) stop = n - 1;
    *first = start;
    return start > stop ? (start - stop - step - 1) / (-step) : 0;
}
"""


class Unsupported(Exception):
    """A graph holds an operation this module does not write in C."""


@dataclass
class Var:
    name: str
    ctype: str
    ndim: int  # -1: a scalar (ScalarType)


def ctype(dtype: str) -> str:
    try:
        return C_TYPES[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype}") from None


def literal(value, dtype: str) -> str:
    """``value`` as a C literal of ``dtype``."""
    if dtype.startswith("float"):
        value = float(value)
        if math.isnan(value):
            return "NAN"
        if math.isinf(value):
            return "INFINITY" if value > 0 else "(-INFINITY)"
        return repr(value) if "e" in repr(value) or "." in repr(value) else f"{value!r}.0"
    if dtype == "bool":
        return "1" if value else "0"
    value = int(value)
    return f"INT64_C({value})" if dtype == "int64" else str(value)


def size(v: Var) -> str:
    return "*".join(f"{v.name}_s[{d}]" for d in range(v.ndim)) or "1"


def offset(v: Var, ndim: int, broadcast: bool = False) -> str:
    """The element at the loop indices ``i0 ...`` of a loop over ``ndim`` dimensions
    (``v`` has that many; with ``broadcast``, a dimension of length 1 is repeated)."""
    terms = []
    for d in range(v.ndim):
        stride = f"{v.name}_t[{d}]"
        if broadcast:
            stride = f"({v.name}_s[{d}] == 1 ? 0 : {stride})"
        terms.append(f"i{d + ndim - v.ndim} * {stride}")
    return " + ".join(terms) or "0"


def loops(shape: list[str], body: list[str]) -> list[str]:
    """Nested loops ``i0 ...`` over ``shape`` around ``body``."""
    lines = [
        f"for (int64_t i{d} = 0; i{d} < {extent}; i{d}++) {{" for d, extent in enumerate(shape)
    ]
    return lines + body + ["}"] * len(shape)
