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
from ..ir.printer import format_type
from ..core.symbolic import SymInt, hint_of, is_dynamic, same_dim
from ..core.diagnostics import user_frame
from ..tensor.tensor import Tensor
from . import control_flow as cf
from ..tensor import functional as T


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
    """The element type of a list holding `elem`-typed elements and now `t`: sizes that
    differ between elements (a step's active rows) become a symbol of their own, which
    every read of an element binds from that element."""
    v = rec.value_of(t)
    mine = (v.dtype, tuple(v.shape))
    if elem is None:
        return mine
    if elem[0] is not mine[0] or len(elem[1]) != len(mine[1]):
        raise cf.ScriptError(f"{user_frame()}: a list built in a loop or branch holds "
                             f"tensors of one dtype and rank; {format_type(Value(*elem), {})}"
                             f" and {format_type(v, {})} were added")
    shape = tuple(a if same_size(a, b) or _varying(rec, a) else _new_varying(rec, b)
                  for a, b in zip(elem[1], mine[1]))
    return elem[0], shape


def same_size(a, b) -> bool:
    """Whether two elements' sizes are one: the same size, or sizes of the inputs (or
    constants) equal in this call, guarded equal as a branch's two paths' are (a size
    from data that differs by name is a size of its own per element)."""
    if same_dim(a, b):
        return True
    if is_dynamic(a) or is_dynamic(b) or hint_of(a) != hint_of(b):
        return False
    # the comparison records the guard (not an assert: `python -O` would drop it)
    return bool(a == b) if isinstance(a, SymInt) else bool(b == a)


def _varying(rec, size) -> bool:
    """A list's own symbol for a size that varies between its elements (never bound)."""
    return isinstance(size, SymInt) and size.source() in rec.varying_symbols


def _new_varying(rec, like) -> SymInt:
    sym = rec.new_symbol(int(hint_of(like)))
    rec.varying_symbols.add(sym.source())
    return sym


def append(rec, xs: list, t) -> None:
    if not isinstance(t, Tensor):
        raise cf.ScriptError(f"{user_frame()}: only tensors can be appended to a list that a "
                          f"loop or a branch on a tensor builds (got {type(t).__name__})")
    v = value_of(rec, xs)
    ltype = v.dtype
    ltype.elem = _elem(rec, t, ltype.elem)
    node = rec._add(LIST_APPEND, [v, rec.value_of(t)], {}, [(ltype, ())], user_frame())
    xs.append(t)
    bind(rec, xs, node.output)


def refuse_store(rec, xs, where: str) -> None:
    """`xs[i] = v` (or `xs[i] += v`): a list value's elements are fixed once appended."""
    if is_tracked(rec, xs):
        raise cf.ScriptError(f"{where}: item assignment to a list that a loop or a branch on a "
                             "tensor builds is not supported by tj.script; compute the "
                             "element before appending it, or build a new list")


def length(rec, xs: list) -> SymInt:
    sym = rec.new_symbol(len(xs))
    rec.nonneg.add(sym.source())
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
    # a size of the elements that a loop body bound differs from element to element:
    # the element read gets a fresh symbol, bound from its own shape
    binds = [(d, rec.new_symbol(t._data.shape[d])) for d, size in enumerate(shape)
             if is_dynamic(size)]
    rec.nonneg.update(sym.source() for _, sym in binds)
    shape = tuple(dict(binds).get(d, size) for d, size in enumerate(shape))
    node = rec._add(LIST_GET, [v], {"index": index,
                                    "binds": [(d, sym.source()) for d, sym in binds]},
                    [(dtype, shape)], user_frame())
    out = cf._alias(t)  # a name of its own for the element read
    rec.bind(out, node.output, cf._passed(rec, t, None))  # (an input: that tensor itself)
    return out


def combine(rec, how: str, xs: list, dim: int):
    """`tj.stack(xs, dim)` / `tj.cat(xs, dim)` of a list value: its length is a size the
    program binds when it runs."""
    v = value_of(rec, xs)
    if v.dtype.elem is None:
        raise cf.ScriptError(f"{user_frame()}: tj.{how} of a list that has no element when "
                          "the function is compiled")
    dtype, shape = v.dtype.elem
    ndim = len(shape) + (how == "stack")
    d = dim + ndim if dim < 0 else dim
    with cf.suspended():
        result = (T.stack if how == "stack" else T.cat)(list(xs), d)
    # the symbol is bound to the joined dimension: the list's length for stack, the sum of
    # the elements' sizes for cat (which may differ from element to element)
    sym = rec.new_symbol(result._data.shape[d])
    rec.nonneg.add(sym.source())
    if how == "stack":
        out_shape = shape[:d] + (sym,) + shape[d:]
    else:
        out_shape = shape[:d] + (sym,) + shape[d + 1:]
    binds = [(k, rec.new_symbol(result._data.shape[k])) for k, size in enumerate(out_shape)
             if k != d and is_dynamic(size)]  # sizes the elements' own reads bound
    rec.nonneg.update(b.source() for _, b in binds)
    out_shape = tuple(dict(binds).get(k, size) for k, size in enumerate(out_shape))
    node = rec._add(LIST_STACK, [v], {"how": how, "dim": d, "symbol": sym.source(),
                                      "binds": [(k, b.source()) for k, b in binds]},
                    [(dtype, out_shape)], user_frame())
    rec.bind(result, node.output)
    return result
