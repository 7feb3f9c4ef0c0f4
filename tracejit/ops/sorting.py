"""Order primitives: sorting and top-k indices, scans (cumsum, cumprod, the running
extremes' indices), searchsorted, unique, bincount and the index of a repeat_interleave.

The index-valued ones have no gradient: sort, topk, cummax and friends pick their values
with `gather`, whose rule scatters the gradient back into the selected positions.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes as dt
from .registry import AVal, INDEX, SCAN, register
from .rules import aval_of

F = None  # tracejit.tensor.functional, bound by tracejit.ops


def sort_key(x: np.ndarray, descending: bool = False) -> np.ndarray:
    """Integers whose ascending order is PyTorch's order of x: NaN above +inf, -0.0 equal
    to 0.0; `descending` reverses it (so a stable sort of the keys keeps ties in place)."""
    if x.dtype.kind == "b":
        key = x.view(np.uint8)
    elif x.dtype.kind in "iu":
        key = x
    else:
        f = x.astype(np.float32) if x.dtype.itemsize == 2 else x
        f = np.where(np.isnan(f), f.dtype.type(np.nan), f) + f.dtype.type(0)
        bits = f.view(np.int32 if f.dtype.itemsize == 4 else np.int64)
        key = np.where(bits < 0, bits ^ np.iinfo(bits.dtype).max, bits)
    return ~key if descending else key


def _argsort(x, dim, descending=False):
    if x.ndim == 0:
        return np.zeros((), np.int64)
    return np.argsort(sort_key(x, descending), axis=dim, kind="stable").astype(np.int64)


def _topk(x, k, dim, largest=True):
    """The indices of the k largest (smallest) along dim, in order; ties by position."""
    if x.ndim == 0:
        return np.zeros((), np.int64)
    key = sort_key(x, largest)
    n = x.shape[dim]
    if k >= n // 4:
        return np.argsort(key, axis=dim, kind="stable")[_first(k, dim, x.ndim)].astype(np.int64)
    part = np.argpartition(key, k - 1, axis=dim)[_first(k, dim, x.ndim)]
    order = np.lexsort((part, np.take_along_axis(key, part, axis=dim)), axis=dim)
    return np.take_along_axis(part, order, axis=dim).astype(np.int64)


def _first(k, dim, ndim) -> tuple:
    return (slice(None),) * dim + (slice(0, k),)


def _infer_topk(x, k, dim, largest=True):
    a = aval_of(x)
    size = a.shape[dim] if a.ndim else 1
    if k < 0 or k > size:
        raise RuntimeError(f"topk: selected index k out of range (k={k}, but the dimension "
                           f"has size {size})")
    shape = list(a.shape)
    if a.ndim:
        shape[dim] = k
    return AVal(tuple(shape), dt.int64)


def _same_shape_int64(x, *a, **k):
    return AVal(aval_of(x).shape, dt.int64)


# ---- scans ---------------------------------------------------------------------------------
def _scan_dtype(d: dt.dtype) -> dt.dtype:
    return dt.int64 if d.category < 2 else d


def _scan(ufunc):
    def impl(x, dim):
        if x.ndim == 0:
            return x.astype(_scan_dtype(dt.from_numpy_dtype(x.dtype)).np)
        low = x.dtype.itemsize == 2 and x.dtype.kind not in "biu"  # float16/bfloat16
        acc = np.int64 if x.dtype.kind in "biu" else (np.float32 if low else None)
        out = ufunc.accumulate(x, axis=dim, dtype=acc)
        return out.astype(x.dtype) if low else out
    return impl


def _infer_scan(x, dim):
    a = aval_of(x)
    return AVal(a.shape, _scan_dtype(a.dtype))


def _reverse_cumsum(g, dim):
    """sum of g[j] over j >= i, along dim."""
    return F.flip(F.cumsum(F.flip(g, (dim,)), dim), (dim,))


def _cumprod_vjp(g, out, x, dim):
    """d/dx_i of sum_j g_j prod_{k<=j} x_k, exact with zeros (as PyTorch): before the first
    zero of a slice the usual out/x form, at the first zero the products of the others
    (the cumulative product with that zero read as one), after it nothing."""
    if x.ndim == 0:
        return (g,)
    zero = x == 0
    zeros_before = F.cumsum(zero, dim)  # zeros at or before i
    first_zero = zero & (zeros_before == 1)
    safe = F.where(zero, 1, x)
    before = _reverse_cumsum(g * out, dim) / safe
    at = _reverse_cumsum(g * F.cumprod(F.where(first_zero, 1, x), dim), dim)
    return (F.where(zeros_before == 0, before, F.where(first_zero, at, 0)),)


def _argcum(ufunc):
    """Index of the running max (min) along dim: the last position holding it, NaN being
    the extreme from its first appearance on (PyTorch's cummax/cummin)."""
    def impl(x, dim):
        if x.ndim == 0:
            return np.zeros((), np.int64)
        running = ufunc.accumulate(x, axis=dim)
        hit = (x == running) | (np.isnan(x) if x.dtype.kind == "f" else False)
        shape = [1] * x.ndim
        shape[dim] = x.shape[dim]
        positions = np.arange(x.shape[dim], dtype=np.int64).reshape(shape)
        return np.maximum.accumulate(np.where(hit, positions, 0), axis=dim)
    return impl


# ---- searching and counting ----------------------------------------------------------------
def _searchsorted(sorted_sequence, values, right=False, out_int32=False):
    side = "right" if right else "left"
    rtype = np.int32 if out_int32 else np.int64
    key_seq = sort_key(sorted_sequence)
    key_val = sort_key(values.astype(sorted_sequence.dtype) if values.dtype !=
                       sorted_sequence.dtype else values)
    if sorted_sequence.ndim == 1:
        return np.searchsorted(key_seq, key_val, side=side).astype(rtype)
    rows = int(np.prod(sorted_sequence.shape[:-1]))
    if rows == 0:
        return np.zeros(values.shape, rtype)
    rows_seq = key_seq.reshape(rows, key_seq.shape[-1])
    rows_val = key_val.reshape(rows, key_val.shape[-1])
    out = np.stack([np.searchsorted(s, v, side=side) for s, v in zip(rows_seq, rows_val)])
    return out.reshape(values.shape).astype(rtype)


def _infer_searchsorted(sorted_sequence, values, right=False, out_int32=False):
    s, v = aval_of(sorted_sequence), aval_of(values)
    if s.ndim != 1 and (s.ndim != v.ndim or tuple(s.shape[:-1]) != tuple(v.shape[:-1])):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           f"the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, but we got boundaries tensor {list(s.shape)} "
                           f"and input value tensor {list(v.shape)}")
    return AVal(v.shape, dt.int32 if out_int32 else dt.int64)


def _bincount(x, *weights, minlength=0):
    w = weights[0] if weights else None
    out = np.bincount(x.reshape(-1), None if w is None else w.reshape(-1), minlength=minlength)
    if w is None:
        return out.astype(np.int64)
    return out.astype(w.dtype if w.dtype.kind == "f" else np.float64)


def _infer_bincount(x, *weights, minlength=0):
    w = aval_of(weights[0]) if weights else None
    d = dt.int64 if w is None else (w.dtype if w.dtype.category == 2 else dt.float64)
    return AVal((None,), d)


def _repeat_index(repeats):
    """The positions a repeat_interleave of `repeats` reads: i repeated repeats[i] times."""
    return np.repeat(np.arange(len(repeats), dtype=np.int64), repeats)


register("argsort", INDEX, _argsort, _same_shape_int64)
register("topk", INDEX, _topk, _infer_topk)
register("cumsum", SCAN, _scan(np.add), _infer_scan,
         lambda g, out, x, dim: (_reverse_cumsum(g, dim) if x.ndim else g,), saves=())
register("cumprod", SCAN, _scan(np.multiply), _infer_scan, _cumprod_vjp, saves=(0,),
         save_out=True)
register("argcummax", INDEX, _argcum(np.maximum), _same_shape_int64)
register("argcummin", INDEX, _argcum(np.minimum), _same_shape_int64)
register("searchsorted", INDEX, _searchsorted, _infer_searchsorted, arity=2)
register("unique_values", INDEX, lambda x: np.unique(x.reshape(-1)),
         lambda x: AVal((None,), aval_of(x).dtype), data_dependent=True)
register("bincount", INDEX, _bincount, _infer_bincount, arity=-1, data_dependent=True)
register("repeat_index", INDEX, _repeat_index, lambda r: AVal((None,), dt.int64),
         data_dependent=True)
