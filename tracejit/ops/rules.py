"""Shape and dtype rules shared by many entries of the op table.

Each raises a clear error naming the op and the offending shapes, which eager
dispatch reuses to explain a numpy failure.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as dt
from ..core.errors import ShapeError
from ..core.float_errors import quiet, restore
from ..core.symbolic import SymInt, is_dynamic, known_same
from .registry import AVal, COMPARE, ELEMENTWISE, FLOAT, LOGICAL


class Meta:
    """Shape/dtype stand-in for an input a backward rule needs only the type of."""

    __slots__ = ("shape", "dtype", "_rg")

    def __init__(self, shape, dtype, requires_grad=False):
        self.shape = shape
        self.dtype = dtype
        self._rg = requires_grad

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Meta({self.dtype.short}{list(self.shape)})"


_SCALAR_CATEGORY = {bool: 0, int: 1, float: 2}


def compute_dtype(op, operands, attrs=None):
    """The dtype an elementwise op computes in (PyTorch's promotion: a 0-dim tensor or a
    Python scalar decides only when its category is higher), or None when its operands
    are not cast. `operands`: values with `.dtype` (tracejit dtypes) and `.ndim`, or
    Python numbers; sizes count as ints. Eager dispatch's `_compute_dtype` is the same
    rule on arrays, kept apart for speed (tests/test_ops.py checks they agree)."""
    rule = op.dtype_rule
    if rule is LOGICAL or rule == "cast":
        return None
    operands = list(operands)
    if op.promote_attrs and attrs:
        operands += [attrs[k] for k in op.promote_attrs if attrs.get(k) is not None]
    if rule == "where":
        operands = operands[1:]
    values = [x for x in operands if hasattr(x, "dtype")]
    if not values:
        return None
    numbers = [1 if isinstance(x, SymInt) else _SCALAR_CATEGORY.get(
        type(x), 1 if isinstance(x, int) else 2) for x in operands if not hasattr(x, "dtype")]
    if len({x.dtype for x in values}) > 1 or any(c > 0 for c in numbers):
        ct = dt.result_type(*[int(0) if isinstance(x, SymInt) else x for x in operands])
    else:
        ct = values[0].dtype
    if rule is FLOAT and ct.category != 2:
        ct = dt.default_float
    return ct


def aval_of(x) -> AVal:
    """AVal of a tensor-like or a Python scalar (shape ())."""
    if isinstance(x, (bool, int, float)):
        return AVal((), dt.as_dtype(type(x)))
    if isinstance(x, SymInt):  # a size used as a number while tracing
        return AVal((), dt.int64)
    return AVal(tuple(x.shape), x.dtype)


def broadcast_shapes(op: str, *shapes) -> tuple:
    """numpy/PyTorch broadcasting of shapes; raises ValueError naming the op."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        present = [s[i] for s in shapes if len(s) >= -i and not (type(s[i]) is int and
                                                                  s[i] == 1)]
        if present and isinstance(present[0], SymInt) and all(known_same(d, present[0])
                                                               for d in present[1:]):
            # one symbolic size (as written, or held equal by the entry guards) meets only
            # 1s: it is the result whatever its value, so nothing is decided about it (it
            # may well be 1 in this call: a batch of one is served by the same trace)
            out.append(present[0])
            continue
        if len(present) > 1 and not any(is_dynamic(d) for d in present) and \
                all(d == present[0] for d in present[1:]):
            # equal sizes broadcast to themselves whatever their value: the guards say
            # they are equal, not that they differ from 1
            out.append(present[0])
            continue
        size = 1
        for s in shapes:
            if len(s) >= -i:
                d = s[i]
                if d == 1:
                    continue
                if size != 1 and d != size:
                    raise ShapeError(
                        f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} do not "
                        f"broadcast (size {size} vs {d} at dimension {i})")
                size = d
        out.append(size)
    return tuple(out)


def normalize_dim(dim: int, ndim: int, op: str = "") -> int:
    """A dim in range(-ndim, ndim) as a non-negative int (0-dim tensors accept 0/-1)."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op + ': ' if op else ''}dimension out of range "
                         f"(expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def normalize_dims(dim, ndim: int, op: str = "") -> tuple | None:
    """None (all dims) or a sorted tuple of non-negative dims; a dim named twice is
    PyTorch's error."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    listed = [normalize_dim(d, ndim, op) for d in dim]
    dims = tuple(sorted(set(listed)))
    if len(dims) < len(listed):
        twice = next(d for d in listed if listed.count(d) > 1)
        raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
    return dims if ndim else None


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if dims is None:
        dims = range(len(shape))
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def elementwise_dtypes(rule: str, inputs) -> tuple[dt.dtype, dt.dtype]:
    """(compute dtype, result dtype) of an elementwise op under PyTorch promotion."""
    ct = dt.result_type(*inputs)
    if rule == FLOAT:
        ct = dt.to_float(ct)
    elif rule == LOGICAL:
        return dt.bool_, dt.bool_
    return ct, (dt.bool_ if rule == COMPARE else ct)


def infer_elementwise(name: str, rule: str):
    """Shape rule of an elementwise op: broadcast shapes, promoted dtype."""
    def infer(*inputs, **attrs):
        shapes = [aval_of(x).shape for x in inputs]
        return AVal(broadcast_shapes(name, *shapes), elementwise_dtypes(rule, inputs)[1])
    return infer


def run_on_arrays(op, args: list, attrs: dict):
    """`op` on numpy arrays and Python numbers, as eager dispatch computes it on the
    tensors holding them (operands cast to the op's compute dtype, numpy's
    floating-point warnings silenced) but without tensors, autograd or devices: what the
    IR's passes and the kernels' op-by-op fallback run."""
    ct = compute_dtype(op, [AVal(a.shape, dt.from_numpy_dtype(a.dtype))
                            if isinstance(a, np.ndarray) else a for a in args],
                       attrs) if op.kind is ELEMENTWISE else None
    if ct is not None:
        first = 1 if op.dtype_rule == "where" else 0
        args = [a.astype(ct.np) if i >= first and isinstance(a, np.ndarray) and
                a.dtype != ct.np else a for i, a in enumerate(args)]
    token = quiet()
    try:
        out = op.impl(*args, **attrs)
    finally:
        restore(token)
    return np.asarray(out)
