"""Shape primitives: views (reshape, permute, expand, ...), sum_to, cat and clone.

Views alias their input's memory (`view=True`), so in-place writes through
them reach the base tensor, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from .registry import AVal, ELEMENTWISE, REDUCE, SHAPE, register
from .scalar import IDENTITY, SUM
from .rules import aval_of, broadcast_shapes, elementwise_dtypes

F = None  # tracejit.tensor.functional, bound by tracejit.ops


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _infer_reshape(x, shape):
    a = aval_of(x)
    if _numel(shape) != _numel(a.shape):
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size "
                           f"{_numel(a.shape)}")
    return AVal(tuple(shape), a.dtype)


def _infer_permute(x, dims):
    a = aval_of(x)
    if sorted(dims) != list(range(a.ndim)):
        raise RuntimeError(f"permute: dims {list(dims)} are not a permutation of the "
                           f"{a.ndim} dimensions of a tensor of shape {list(a.shape)}")
    return AVal(tuple(a.shape[d] for d in dims), a.dtype)


def _infer_transpose(x, dim0, dim1):
    a = aval_of(x)
    s = list(a.shape)
    s[dim0], s[dim1] = s[dim1], s[dim0]
    return AVal(tuple(s), a.dtype)


def _infer_expand(x, shape):
    a = aval_of(x)
    if len(shape) < a.ndim or broadcast_shapes("expand", a.shape, shape) != tuple(shape):
        raise RuntimeError(f"expand: the expanded size {list(shape)} must match the existing "
                           f"size {list(a.shape)} at non-singleton dimensions")
    return AVal(tuple(shape), a.dtype)


def _infer_squeeze(x, dims):
    a = aval_of(x)
    return AVal(tuple(s for i, s in enumerate(a.shape) if i not in dims), a.dtype)


def _infer_unsqueeze(x, dim):
    a = aval_of(x)
    s = list(a.shape)
    s.insert(dim, 1)
    return AVal(tuple(s), a.dtype)


def _sum_to(x, shape):
    """Sum a broadcast result back down to `shape` (the reverse of broadcasting)."""
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) if lead > 0 else ()
    axes += tuple(lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1) \
        if lead >= 0 else ()
    if axes and x.dtype.itemsize == 2 and x.dtype.kind not in "biu":  # f16/bf16: f32 sums
        r = np.sum(x, axis=axes, keepdims=True, dtype=np.float32).astype(x.dtype)
    else:
        r = np.sum(x, axis=axes, keepdims=True) if axes else x
    return r.reshape(shape)


def _infer_sum_to(x, shape):
    a = aval_of(x)
    target = tuple(shape)
    while len(target) > a.ndim and target[0] == 1:  # numpy setitem drops leading ones
        target = target[1:]
    if broadcast_shapes("sum_to", a.shape, target) != tuple(a.shape):
        raise RuntimeError(f"sum_to: shape {list(a.shape)} cannot be summed to {list(shape)}")
    return AVal(tuple(shape), a.dtype)


def _cat(*xs, dim):
    return np.concatenate(xs, axis=dim)


def _infer_cat(*xs, dim):
    avals = [aval_of(x) for x in xs]
    first = avals[0]
    total = 0
    for a in avals:
        if a.ndim != first.ndim or any(s != t for i, (s, t) in enumerate(zip(a.shape, first.shape))
                                       if i != dim):
            raise RuntimeError(f"cat: sizes of tensors must match except in dimension {dim}; "
                               f"got shapes {[list(b.shape) for b in avals]}")
        total += a.shape[dim]
    s = list(first.shape)
    s[dim] = total
    return AVal(tuple(s), elementwise_dtypes("promote", avals)[1])


def _cat_vjp(g, out, *xs, dim):
    grads, start = [], 0
    for x in xs:
        n = x.shape[dim]
        grads.append(F.narrow(g, dim, start, n))
        start += n
    return tuple(grads)


def _same(x, *a, **k):
    return aval_of(x)


def _view_dtype(x, dtype):
    return x.view(dtype.np)


def _infer_view_dtype(x, dtype):
    """PyTorch's bitcast rule: the same shape between dtypes of one size; else the last
    dimension (which must be contiguous) rescaled by the ratio of the sizes."""
    a = aval_of(x)
    old, new = a.dtype.itemsize, dtype.itemsize
    if old == new:
        return AVal(a.shape, dtype)
    what = f"to view {a.dtype.name} as {dtype.name} (different element sizes)"
    if not a.shape:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    last = a.shape[-1]
    if new > old and last * old % new:
        raise RuntimeError(f"self.size(-1) must be divisible by {new // old} {what}, but got "
                           f"{last}")
    return AVal(a.shape[:-1] + (last * old // new,), dtype)


register("reshape", SHAPE, lambda x, shape: x.reshape(shape), _infer_reshape,
         lambda g, out, x, shape: (F.reshape(g, tuple(x.shape)),), view=True,
         grad_name="ViewBackward0", noop="same_type")
register("view_dtype", SHAPE, _view_dtype, _infer_view_dtype, view=True)
register("permute", SHAPE, lambda x, dims: x.transpose(dims), _infer_permute,
         lambda g, out, x, dims: (F.permute(g, tuple(np.argsort(dims).tolist())),), view=True,
         grad_name="PermuteBackward0", noop=lambda attrs: attrs["dims"] == tuple(
             range(len(attrs["dims"]))))
register("transpose", SHAPE, lambda x, dim0, dim1: x.swapaxes(dim0, dim1),
         _infer_transpose,
         lambda g, out, x, dim0, dim1: (F.transpose(g, dim0, dim1),), view=True,
         involution=True)
register("expand", SHAPE, lambda x, shape: np.broadcast_to(x, shape), _infer_expand,
         lambda g, out, x, shape: (F.sum_to(g, tuple(x.shape)),), view=True, expr=IDENTITY,
         noop="same_type")
register("squeeze", SHAPE, lambda x, dims: x.squeeze(axis=dims), _infer_squeeze,
         lambda g, out, x, dims: (F.reshape(g, tuple(x.shape)),), view=True)
register("unsqueeze", SHAPE, lambda x, dim: np.expand_dims(x, dim), _infer_unsqueeze,
         lambda g, out, x, dim: (F.squeeze(g, dim),), view=True)
register("sum_to", REDUCE, _sum_to, _infer_sum_to,
         lambda g, out, x, shape: (F.expand_to(g, tuple(x.shape)),), monoid=SUM)
register("cat", SHAPE, _cat, _infer_cat, _cat_vjp, arity=-1)
register("detach", SHAPE, lambda x: x.view(), _same, view=True, expr=IDENTITY)
register("clone", ELEMENTWISE, lambda x, contiguous=False: np.array(
    x, copy=True, order="C" if contiguous else "K"), lambda x, contiguous=False: _same(x),
    lambda g, out, x, contiguous=False: (g,), expr=IDENTITY, dtype_rule="cast")
