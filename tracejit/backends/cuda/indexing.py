"""Index and broadcast ops on the device: expand, gather, scatter_add and the general
sum_to, as kernels over flat memory with element strides, so that a compiled graph's
loss (cross-entropy's gather, its backward's scatter_add, a mean's expanded gradient, a
broadcast bias's summed one) keeps its values on the device.

Each kernel is a grid-stride loop over the flat positions of its iteration space (the
output, or the index): a position is unravelled into coordinates, and the coordinates
dotted with the operand's element strides give the element it reads or writes. Operands
must be contiguous (C or Fortran order, so a 2-D transpose is fine); anything else, and
other dtypes than the kernels cover, is left to the host round trip (None).

Indices follow the CPU implementations exactly (numpy's): a negative index counts from
the end, and one outside [-size, size) raises numpy's IndexError, found on the device
and reported after the kernel (one scalar copied back).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda  # the simulator swaps this name in kernels' globals

from . import memory
from .device import launch_config

_FLOATS = ("float32", "float64")


def _flat(a):
    """(1-D view of a contiguous device array, its element strides), or None."""
    shape = tuple(a.shape)
    if a.is_c_contiguous():
        flat = a.reshape(a.size) if a.ndim != 1 else a
        strides = _c_strides(shape)
    elif a.ndim == 2 and a.is_f_contiguous():
        flat = a.T.reshape(a.size)
        strides = (1, shape[0])
    else:
        return None
    return flat, strides


def _c_strides(shape: tuple) -> tuple:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _launch(n: int):
    return launch_config(max(n, 1))


@cuda.jit(device=True)
def position(i, shape, strides, base):
    """base + the coordinates of flat position i over `shape`, dotted with `strides`."""
    nd = len(shape)
    pos = base
    rem = i
    for k in range(nd):
        d = nd - 1 - k
        pos += (rem % shape[d]) * strides[d]
        rem //= shape[d]
    return pos


@cuda.jit(device=True)
def position_at(i, shape, strides, dim, k):
    """As `position` (from 0), with the coordinate along `dim` replaced by k."""
    nd = len(shape)
    pos = 0
    rem = i
    for j in range(nd):
        d = nd - 1 - j
        c = rem % shape[d]
        rem //= shape[d]
        pos += (k if d == dim else c) * strides[d]
    return pos


@cuda.jit(device=True)
def wrapped(k, size):
    """An index counted from the end when negative (numpy's), or -1 when outside
    [-size, size)."""
    if k < 0:
        k += size
    return k if 0 <= k < size else -1


@functools.lru_cache(maxsize=None)
def _kernels():
    @cuda.jit
    def take(out, src, shape, strides, offset):
        # out[i] = src[offset + i's coordinates over `shape` dotted with `strides`]
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < out.size:
            out[i] = src[position(i, shape, strides, offset)]
            i += step

    @cuda.jit
    def put(out, src, shape, strides, offset):
        # out[offset + i's coordinates over `shape` dotted with `strides`] = src[i]
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < src.size:
            out[position(i, shape, strides, offset)] = src[i]
            i += step

    @cuda.jit
    def gather(out, src, index, shape, src_strides, dim, size, error):
        # out[c] = src[c with c[dim] = index[c]], c over the index's shape
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < out.size:
            k = wrapped(index[i], size)
            if k < 0:
                error[0] = 1
                error[1] = index[i]
                k = 0
            out[i] = src[position_at(i, shape, src_strides, dim, k)]
            i += step

    @cuda.jit
    def scatter_add(out, src, index, shape, out_strides, src_strides, dim, size, error):
        # out[c with c[dim] = index[c]] += src[c], c over the index's shape
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < index.size:
            k = wrapped(index[i], size)
            if k < 0:
                error[0] = 1
                error[1] = index[i]
            else:
                cuda.atomic.add(out, position_at(i, shape, out_strides, dim, k),
                                src[position(i, shape, src_strides, 0)])
            i += step

    @cuda.jit
    def sum_over(out, src, kept, kept_strides, reduced, reduced_strides, count):
        # out[o] = sum over r of src[o's offset + r's offset] (float64 partial sums)
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < out.size:
            base = position(i, kept, kept_strides, 0)
            acc = 0.0
            for r in range(count):
                acc += src[position(r, reduced, reduced_strides, base)]
            out[i] = acc
            i += step

    @cuda.jit
    def fill_zero(out):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < out.size:
            out[i] = 0
            i += step

    return {"take": take, "put": put, "gather": gather, "scatter_add": scatter_add,
            "sum_over": sum_over, "fill_zero": fill_zero}


def _tuple(x) -> tuple:
    return tuple(int(v) for v in x) or (1,)  # a 0-d operand: one element at offset 0


def expand(a, shape: tuple):
    """`a` broadcast to `shape` as a new device array, or None."""
    shape = tuple(shape)
    got = _flat(a)
    if got is None or a.dtype.name not in _FLOATS + ("int64", "int32", "bool"):
        return None
    flat, strides = got
    lead = len(shape) - a.ndim
    src_shape = (1,) * lead + tuple(a.shape)
    src_strides = (0,) * lead + strides
    bstrides = tuple(0 if s == 1 and n != 1 else st
                     for s, n, st in zip(src_shape, shape, src_strides))
    out = memory.empty(shape, a.dtype)
    n = math.prod(shape)
    if n:
        blocks, threads = _launch(n)
        _kernels()["take"][blocks, threads](out.reshape(n), flat, _tuple(shape),
                                            _tuple(bstrides) if shape else (0,), 0)
    return out


def _check_index(error, size: int, dim: int) -> None:
    err = error.copy_to_host()
    if err[0]:
        raise IndexError(f"index {int(err[1])} is out of bounds for axis {dim} with size "
                         f"{size}")


def gather(x, index, dim: int):
    """PyTorch's gather on device arrays (the index no longer than x off `dim`), or None."""
    gx, gi = _flat(x), _flat(index)
    if gx is None or gi is None or not index.is_c_contiguous() or \
            x.dtype.name not in _FLOATS + ("int64",) or index.dtype.name != "int64":
        return None
    (flat, strides), (iflat, _) = gx, gi
    shape = tuple(index.shape)
    out = memory.empty(shape, x.dtype)
    n = math.prod(shape)
    error = cuda.to_device(np.zeros(2, np.int64))
    if n:
        blocks, threads = _launch(n)
        _kernels()["gather"][blocks, threads](out.reshape(n), flat, iflat, _tuple(shape),
                                              _tuple(strides), dim, int(x.shape[dim]),
                                              error)
        _check_index(error, int(x.shape[dim]), dim)
    return out


def scatter_add(src, index, dim: int, shape: tuple):
    """zeros(shape) with src added at index along dim (atomically), or None."""
    gs, gi = _flat(src), _flat(index)
    shape = tuple(shape)
    if gs is None or gi is None or not index.is_c_contiguous() or \
            src.dtype.name not in _FLOATS or index.dtype.name != "int64":
        return None
    (sflat, sstrides), (iflat, _) = gs, gi
    out = zeros(shape, src.dtype)
    n = math.prod(shape)
    k = _kernels()
    m = int(index.size)
    error = cuda.to_device(np.zeros(2, np.int64))
    if m and n:
        blocks, threads = _launch(m)
        k["scatter_add"][blocks, threads](out.reshape(n), sflat, iflat,
                                          _tuple(index.shape), _tuple(_c_strides(shape)),
                                          _tuple(sstrides), dim, int(shape[dim]), error)
        _check_index(error, int(shape[dim]), dim)
    return out


def zeros(shape: tuple, dtype):
    """A device array of zeros made on the device."""
    out = memory.empty(tuple(shape), dtype)
    n = math.prod(tuple(shape))
    if n:
        blocks, threads = _launch(n)
        _kernels()["fill_zero"][blocks, threads](out.reshape(n))
    return out


def sum_to(x, shape: tuple, dtype=None):
    """x summed down to `shape` (the reverse of broadcasting), in `dtype` (x's by
    default; the sums are float64), or None."""
    got = _flat(x)
    shape = tuple(shape)
    if got is None or x.dtype.name not in _FLOATS or len(shape) > x.ndim:
        return None
    flat, strides = got
    xs = tuple(int(s) for s in x.shape)
    lead = x.ndim - len(shape)
    target = (1,) * lead + shape
    kept = [(s, st) for s, t, st in zip(xs, target, strides) if not (t == 1 and s != 1)]
    reduced = [(s, st) for s, t, st in zip(xs, target, strides) if t == 1 and s != 1]
    out = memory.empty(shape, x.dtype if dtype is None else dtype)
    n = math.prod(shape)
    count = math.prod(s for s, _ in reduced)
    if n:
        blocks, threads = _launch(n)
        _kernels()["sum_over"][blocks, threads](
            out.reshape(n), flat, _tuple(s for s, _ in kept), _tuple(st for _, st in kept)
            if kept else (0,), _tuple(s for s, _ in reduced),
            _tuple(st for _, st in reduced) if reduced else (0,), count)
    return out


def _basic(shape: tuple, strides: tuple, index):
    """(offset, shape, element strides) of `x[index]` for an index of ints, slices,
    Ellipsis and None (numpy's basic indexing), or None for any other index."""
    index = index if isinstance(index, tuple) else (index,)
    real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1 or real > len(shape):
        return None
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (len(shape) - real) + index[at + 1:]
    offset, out_shape, out_strides, d = 0, [], [], 0
    for i in index:
        if i is None:
            out_shape.append(1)
            out_strides.append(0)
        elif isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            size = shape[d]
            k = int(i) + size if i < 0 else int(i)
            if not 0 <= k < size:
                return None  # the host path raises the CPU's error
            offset += k * strides[d]
            d += 1
        elif type(i) is slice and all(v is None or isinstance(v, (int, np.integer))
                                      for v in (i.start, i.stop, i.step)):
            start, stop, step = i.indices(shape[d])
            n = len(range(start, stop, step))
            offset += start * strides[d] if n else 0
            out_shape.append(n)
            out_strides.append(strides[d] * step)
            d += 1
        else:
            return None
    out_shape += shape[d:]
    out_strides += strides[d:]
    return offset, tuple(out_shape), tuple(out_strides)


def getitem(x, *idx, index):
    """x[index] for basic indices (ints, slices, Ellipsis, None) as a new device array,
    or None (tensor indices: the host)."""
    got = _flat(x)
    if idx or got is None:
        return None
    flat, strides = got
    view = _basic(tuple(int(s) for s in x.shape), strides, index)
    if view is None:
        return None
    offset, shape, vstrides = view
    out = memory.empty(shape, x.dtype)
    n = math.prod(shape)
    if n:
        blocks, threads = _launch(n)
        _kernels()["take"][blocks, threads](out.reshape(n), flat, _tuple(shape),
                                            _tuple(vstrides) if shape else (0,), offset)
    return out


def index_scatter(g, *idx, shape, index):
    """zeros(shape) with g written at a basic index (getitem's gradient), or None."""
    shape = tuple(shape)
    view = _basic(shape, _c_strides(shape), index)
    if idx or view is None or g.dtype.name not in _FLOATS:
        return None
    offset, vshape, vstrides = view
    if tuple(g.shape) != vshape:
        g = expand(g, vshape)  # numpy broadcasts the value to the indexed region
        if g is None:
            return None
    got = _flat(g)
    if got is None:
        return None
    out = zeros(shape, g.dtype)
    n = math.prod(vshape)
    if n:
        blocks, threads = _launch(n)
        _kernels()["put"][blocks, threads](out.reshape(math.prod(shape)), got[0],
                                           _tuple(vshape), _tuple(vstrides) if vshape
                                           else (0,), offset)
    return out


def cat(*xs, dim: int):
    """The arrays joined along dim (shapes checked by the op's rule), or None."""
    got = [_flat(x) for x in xs]
    if any(g is None for g in got) or len({x.dtype for x in xs}) != 1:
        return None
    shape = list(int(s) for s in xs[0].shape)
    shape[dim] = sum(int(x.shape[dim]) for x in xs)
    shape = tuple(shape)
    out = memory.empty(shape, xs[0].dtype)
    strides = _c_strides(shape)
    flat_out = out.reshape(math.prod(shape)) if math.prod(shape) else None
    at = 0
    for x, (flat, _) in zip(xs, got):
        n = int(x.size)
        if n:
            blocks, threads = _launch(n)
            _kernels()["put"][blocks, threads](flat_out, flat, _tuple(x.shape),
                                               _tuple(strides), at * strides[dim])
        at += int(x.shape[dim])
    return out
