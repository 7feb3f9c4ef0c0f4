"""Lists of tensors as values of script graphs: a list that a loop or a branch on a
tensor builds has a length known only when the program runs.

A Python list becomes a list value the first time such a loop or branch carries it
(`value_of`); from then on the recorder knows the list object by its value, and the
helpers record `append`, `len`, indexing, `tj.stack`/`tj.cat` of it, and iteration
over it, as list nodes. Lists that no such loop touches stay Python lists: their
length is fixed when the function is compiled, and everything on them is unrolled.
"""
from __future__ import annotations

from ..ir.graph import LIST, LIST_APPEND, LIST_GET, LIST_LEN, LIST_STACK, ListType, Value
from ..ir.symbolic import SymInt
from ..tensor.dispatch import user_frame
from ..tensor.tensor import Tensor
from . import control_flow as cf


def is_tracked(rec, obj) -> bool:
    return type(obj) is list and id(obj) in rec.lists


def value_of(rec, xs: list) -> Value:
    """The list value behind the Python list `xs` (a `list` node of its elements when it
    has none yet)."""
    v = rec.lists.get(id(xs))
    if v is not None:
        return v
    if not all(isinstance(t, Tensor) for t in xs):
        raise cf.ScriptError(f"{user_frame()}: a list that a loop or a branch on a tensor "
                          "builds must hold tensors only")
    elem = None
    for t in xs:
        elem = _elem(rec, t, elem)
    node = rec._add(LIST, [rec.value_of(t) for t in xs], {}, [(ListType(elem), ())],
                    user_frame())
    bind(rec, xs, node.output)
    return node.output


def bind(rec, xs: list, v: Value) -> None:
    rec.lists[id(xs)] = v
    rec.keep[id(xs)] = xs


def _elem(rec, t: Tensor, elem):
    v = rec.value_of(t)
    mine = (v.dtype, tuple(v.shape))
    if elem is None:
        return mine
    from ..ir.passes.rewrite import same_dim

    if elem[0] is not mine[0] or len(elem[1]) != len(mine[1]) or not all(
            same_dim(a, b) for a, b in zip(elem[1], mine[1])):
        from ..ir.printer import format_type

        raise cf.ScriptError(f"{user_frame()}: a list built in a loop or branch holds one type "
                          f"of tensor; {format_type(Value(*elem), {})} and "
                          f"{format_type(v, {})} were added")
    return elem


def append(rec, xs: list, t) -> None:
    if not isinstance(t, Tensor):
        raise cf.ScriptError(f"{user_frame()}: only tensors can be appended to a list that a "
                          f"loop or a branch on a tensor builds (got {type(t).__name__})")
    v = value_of(rec, xs)
    ltype = v.dtype
    elem = _elem(rec, t, ltype.elem)
    if ltype.elem is None:
        ltype.elem = elem
    node = rec._add(LIST_APPEND, [v, rec.value_of(t)], {}, [(ltype, ())], user_frame())
    xs.append(t)
    bind(rec, xs, node.output)


def length(rec, xs: list) -> SymInt:
    sym = rec.new_symbol(len(xs))
    rec._add(LIST_LEN, [value_of(rec, xs)], {"symbol": sym.source()}, [], user_frame())
    return sym


def get(rec, xs: list, index):
    if isinstance(index, slice):
        raise cf.ScriptError(f"{user_frame()}: slicing a list that a loop or a branch on a "
                          "tensor builds is not supported by tj.script; index it")
    v = value_of(rec, xs)
    if v.dtype.elem is None:
        raise cf.ScriptError(f"{user_frame()}: indexing a list that has no element when the "
                          "function is compiled")
    n = len(xs)
    hint = int(index.hint if isinstance(index, SymInt) else index)
    if not -n <= hint < n:
        raise IndexError("list index out of range")
    t = xs[hint]
    dtype, shape = v.dtype.elem
    node = rec._add(LIST_GET, [v], {"index": index}, [(dtype, shape)], user_frame())
    out = _fresh(t)
    rec.bind(out, node.output)
    return out


def combine(rec, how: str, xs: list, dim: int):
    """`tj.stack(xs, dim)` / `tj.cat(xs, dim)` of a list value: its length is a size the
    program binds when it runs."""
    from ..tensor import functional as T

    v = value_of(rec, xs)
    if v.dtype.elem is None:
        raise cf.ScriptError(f"{user_frame()}: tj.{how} of a list that has no element when "
                          "the function is compiled")
    dtype, shape = v.dtype.elem
    sym = rec.new_symbol(len(xs))
    ndim = len(shape) + (how == "stack")
    d = dim + ndim if dim < 0 else dim
    if how == "stack":
        out_shape = shape[:d] + (sym,) + shape[d:]
    else:
        out_shape = shape[:d] + (sym * shape[d],) + shape[d + 1:]
    with cf.suspended():
        result = (T.stack if how == "stack" else T.cat)(list(xs), d)
    node = rec._add(LIST_STACK, [v], {"how": how, "dim": d, "symbol": sym.source()},
                    [(dtype, out_shape)], user_frame())
    rec.bind(result, node.output)
    return result


def _fresh(t: Tensor) -> Tensor:
    return cf._alias(t)
