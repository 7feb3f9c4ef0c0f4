"""Indexing primitives: getitem, setitem, their gradients, gather and scatter_add.

An index is a template (ints, slices, None, Ellipsis and `Slot`s); tensors
used as indices are op inputs in the slots, so tracing sees them as values.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes as dt
from .registry import AVal, INDEX, Loops, register
from .rules import aval_of, broadcast_shapes
from ..core.symbolic import SymInt

F = None  # tracejit.tensor.functional, bound by tracejit.ops
prange = range  # numba.prange where the loop bodies below are compiled


class Slot:
    """Position k of the tensor indices among the op's inputs."""

    __slots__ = ("k",)

    def __init__(self, k: int):
        self.k = k

    def __repr__(self) -> str:
        return f"%idx{self.k}"

    def __eq__(self, other):
        return isinstance(other, Slot) and other.k == self.k

    def __hash__(self):
        return hash(("slot", self.k))


def build_index(index: tuple, arrays) -> tuple:
    """The numpy index of a template, with tensor slots filled from `arrays`."""
    if not arrays:
        return index
    return tuple(arrays[i.k] if type(i) is Slot else i for i in index)


def _is_int(i) -> bool:
    return type(i) is int or isinstance(i, SymInt)


def ints_first(index: tuple, ndim: int) -> tuple | None:
    """PyTorch selects at int indices before it indexes by tensors; numpy counts an int
    among the advanced indices, which moves the result's dims first when the int and a
    tensor are not adjacent (`x[0, :, ids]`). (The ints over the `ndim` dims, the index
    without them), or None when the index has no int beside a tensor."""
    if not any(type(i) is Slot for i in index) or not any(_is_int(i) for i in index):
        return None
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    ints = []
    for i in index:
        if i is Ellipsis:
            ints += [slice(None)] * (ndim - consumed)
        elif i is not None:
            ints.append(i if _is_int(i) else slice(None))
    return tuple(ints), tuple(i for i in index if not _is_int(i))


def _region(x, idx, index):
    """(a view of x, its index) as PyTorch applies `index`: ints first."""
    split = ints_first(index, x.ndim)
    if split is None:
        return x, build_index(index, idx)
    return x[split[0]], build_index(split[1], idx)


def _getitem(x, *idx, index):
    view, full = _region(x, idx, index)
    return view[full]


def _slice_length(d, sl: slice):
    """Length of `range(d)[sl]`; exact for symbolic d when the step is 1 (guards
    record which side of each bound the size falls)."""
    start, stop, step = sl.start, sl.stop, sl.step
    if step == -1 and start is None and stop is None:  # a reversal keeps every element
        return d
    if step not in (None, 1):
        return len(range(*sl.indices(int(d))))
    start = 0 if start is None else (max(d + start, 0) if start < 0 else min(start, d))
    stop = d if stop is None else (max(d + stop, 0) if stop < 0 else min(stop, d))
    return max(stop - start, 0)


def _infer_getitem(x, *idx, index):
    """Basic indexing symbolically; advanced (tensor) indices by numpy's placement rule."""
    a = aval_of(x)
    split = ints_first(index, a.ndim)
    if split is not None:
        return _infer_getitem(_infer_getitem(a, index=split[0]), *idx, index=split[1])
    items = list(index)
    n_consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if n_consumed > a.ndim:
        raise IndexError(f"getitem: too many indices for a tensor of dimension {a.ndim}")
    if Ellipsis in items:
        e = items.index(Ellipsis)
        items[e:e + 1] = [slice(None)] * (a.ndim - n_consumed)
    else:
        items += [slice(None)] * (a.ndim - n_consumed)
    out, adv_shapes, adv_pos, dim = [], [], None, 0
    for i in items:
        if i is None:
            out.append(1)
        elif isinstance(i, slice):
            out.append(_slice_length(a.shape[dim], i))
            dim += 1
        elif type(i) is Slot:
            ia = aval_of(idx[i.k])
            if ia.dtype.category == 0:
                raise IndexError("getitem: bool masks reach getitem as nonzero() indices")
            adv_pos = len(out) if adv_pos is None else adv_pos
            adv_shapes.append(tuple(ia.shape))
            out.append(None)
            dim += 1
        else:  # an int
            size = a.shape[dim]
            if not -size <= i < size:
                raise IndexError(f"getitem: index {i} is out of bounds for dimension {dim} "
                                 f"with size {size}")
            dim += 1
    if adv_shapes:
        positions = [k for k, v in enumerate(out) if v is None]
        adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
        rest = [v for v in out if v is not None]
        bshape = broadcast_shapes("getitem", *adv_shapes)
        if adjacent:
            out = rest[:positions[0]] + list(bshape) + rest[positions[0]:]
        else:
            out = list(bshape) + rest
    return AVal(tuple(out), a.dtype)


def _index_scatter(g, *idx, shape, index):
    """Zeros of `shape` with `g` added at `index` (duplicates accumulate)."""
    out = np.zeros(shape, g.dtype)
    view, full = _region(out, idx, index)
    if idx:
        np.add.at(view, full, g)
    else:
        out[full] = g
    return out


def _setitem(x, v, *idx, index):
    out = np.array(x, copy=True)
    view, full = _region(out, idx, index)
    view[full] = v
    return out


def _setitem_inplace(x, v, *idx, index):
    view, full = _region(x, idx, index)
    view[full] = v


def _infer_setitem(x, v, *idx, index):
    """The target's type; the index must select a valid region (its bounds are decisions
    on sizes, so a trace guards them as getitem's are)."""
    _infer_getitem(x, *idx, index=index)
    return aval_of(x)


def _infer_gather(x, index, dim):
    """PyTorch's rule: the index has the input's rank and is no longer than the input
    along the other dimensions (decisions on sizes: a trace guards them)."""
    a, i = aval_of(x), aval_of(index)
    if len(i.shape) != len(a.shape):
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    for d, (si, sx) in enumerate(zip(i.shape, a.shape)):
        if d != dim and si > sx:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(i.shape)} to be no larger than self {list(a.shape)} "
                               f"apart from dimension {dim}")
    return AVal(tuple(i.shape), a.dtype)


def _gather(x, index, dim):
    """PyTorch's gather: the index may be shorter than the input along the other dims."""
    _infer_gather(x, index, dim)
    part = tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(index.shape))
    return np.take_along_axis(x[part], index, axis=dim)


def _scatter_add(src, index, dim, shape):
    out = np.zeros(shape, src.dtype)
    pos = list(np.indices(index.shape, sparse=True))
    pos[dim] = index
    np.add.at(out, tuple(pos), src)
    return out


# ---- gather, scatter_add and an embedding's gradient as loop nests (ops/registry.Loops;
# the CPU backend compiles them): one pass each where numpy's take_along_axis builds
# index grids and np.add.at runs unbuffered element by element (a max-pool's backward
# spent more in np.add.at than in its convolutions). Each works on [A, D, B] views
# around the indexed dim, so one body serves every rank; elements are added in the
# order np.add.at adds them, so the bits are the same. Where an index is out of range
# (impl raises PyTorch's error) or the shapes are not the plain case, impl runs.

def gather_loops(x, index, out):
    a_, j_, b_ = index.shape
    d_ = x.shape[1]
    for a in prange(a_):
        for j in range(j_):
            for b in range(b_):
                k = index[a, j, b]
                out[a, j, b] = x[a, k + d_ if k < 0 else k, b]


def scatter_add_loops(src, index, out):
    a_, j_, b_ = index.shape
    d_ = out.shape[1]
    for a in prange(a_):
        for j in range(j_):
            for b in range(b_):
                k = index[a, j, b]
                out[a, k + d_ if k < 0 else k, b] += src[a, j, b]


def index_rows_add_loops(g, rows, out):
    v_, r_ = out.shape
    for m in range(rows.shape[0]):
        k = rows[m]
        if k < 0:
            k += v_
        for r in range(r_):
            out[k, r] += g[m, r]


_NUMBERS = frozenset((np.float32, np.float64, np.int32, np.int64))  # by type: dtype.name
# costs 2 us a call


def _around(shape, dim) -> tuple:
    """(A, D, B): the sizes before, at and after `dim`."""
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])  # (np.prod: 5 us)


def _in_range(index, size) -> bool:
    return index.size == 0 or (int(index.min()) >= -size and int(index.max()) < size)


def _plain_case(dtype, index, dim, shape) -> bool:
    """What the gather and scatter bodies handle: numbers, an int64 index in range, of
    the input's (the output's) `shape` off `dim`."""
    return dtype.type in _NUMBERS and index.dtype == np.int64 and \
        len(shape) == index.ndim and _in_range(index, shape[dim]) and \
        all(i == s for d, (i, s) in enumerate(zip(index.shape, shape)) if d != dim)


def _gather_args(x, index, dim):
    if not _plain_case(x.dtype, index, dim, x.shape):
        return None
    out = np.empty(index.shape, x.dtype)
    a, d, b = _around(x.shape, dim)
    j = index.shape[dim]
    return (out,), (np.ascontiguousarray(x).reshape(a, d, b),
                    np.ascontiguousarray(index).reshape(a, j, b), out.reshape(a, j, b))


def _scatter_add_args(src, index, dim, shape):
    shape = tuple(shape)
    if src.shape != index.shape or not _plain_case(src.dtype, index, dim, shape):
        return None
    out = np.zeros(shape, src.dtype)
    a, d, b = _around(shape, dim)
    j = index.shape[dim]
    return (out,), (np.ascontiguousarray(src).reshape(a, j, b),
                    np.ascontiguousarray(index).reshape(a, j, b), out.reshape(a, d, b))


def _index_scatter_args(g, *idx, shape, index):
    """Only `x[rows]` (an embedding's lookup): rows of an integer tensor, added."""
    if len(idx) != 1 or tuple(index) != (Slot(0),) or g.dtype.type not in _NUMBERS:
        return None
    rows, shape = idx[0], tuple(shape)
    if rows.dtype.kind not in "iu" or rows.dtype == np.uint64 or \
            g.shape != rows.shape + shape[1:] or not _in_range(rows, shape[0]):
        return None
    out = np.zeros(shape, g.dtype)
    width = math.prod(shape[1:])
    return (out,), (np.ascontiguousarray(g).reshape(rows.size, width),
                    np.ascontiguousarray(rows, np.int64).reshape(-1),
                    out.reshape(shape[0], width))


def _slot_inputs(n):
    return (None,) * n


register("getitem", INDEX, _getitem, _infer_getitem,
         lambda g, out, x, *idx, index: (F.index_scatter(g, tuple(x.shape), index, idx),)
         + _slot_inputs(len(idx)),
         saves=tuple(range(1, 64)), view=True, grad_name="IndexBackward0", arity=-1,
         checks_indices=True, grad_inputs=(0,))
register("index_scatter", INDEX, _index_scatter,
         lambda g, *idx, shape, index: AVal(tuple(shape), aval_of(g).dtype),
         lambda g, out, x, *idx, shape, index: (F.getitem_raw(g, index, idx),)
         + _slot_inputs(len(idx)),
         saves=tuple(range(1, 64)), arity=-1, checks_indices=True, grad_inputs=(0,),
         loops=Loops(index_rows_add_loops, _index_scatter_args))
register("setitem", INDEX, _setitem, _infer_setitem,
         lambda g, out, x, v, *idx, index: (
             F.setitem_raw(g, 0, index, idx), F.getitem_raw(g, index, idx))
         + _slot_inputs(len(idx)),
         saves=tuple(range(2, 64)), inplace=_setitem_inplace, grad_name="IndexPutBackward0",
         arity=-1, checks_indices=True, grad_inputs=(0, 1))
register("nonzero", INDEX, lambda x: np.argwhere(x).astype(np.int64),
         lambda x: AVal((None, aval_of(x).ndim), dt.int64), data_dependent=True)
register("gather", INDEX, _gather, _infer_gather,
         lambda g, out, x, index, dim: (F.scatter_add_raw(g, index, dim, tuple(x.shape)), None),
         saves=(1,), arity=2, checks_indices=True, grad_inputs=(0,),
         loops=Loops(gather_loops, _gather_args))
register("scatter_add", INDEX, _scatter_add,
         lambda src, index, dim, shape: AVal(tuple(shape), aval_of(src).dtype),
         lambda g, out, src, index, dim, shape: (F.gather(g, dim, index), None),
         saves=(1,), arity=2, checks_indices=True, grad_inputs=(0,),
         loops=Loops(scatter_add_loops, _scatter_add_args))
