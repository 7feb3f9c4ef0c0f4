"""Scatter primitives: `scatter` (write src at index along dim) and `scatter_reduce` (combine
by product, max or min). Sums and means are composites of `scatter_add` (indexing.py).

The index is an operand, so a trace reads it as data: the same trace serves other indices.
"""
from __future__ import annotations

import numpy as np

from .registry import INDEX, OPS, register
from .rules import aval_of

F = None  # tracejit.tensor.functional, bound by tracejit.ops


def positions(index, dim) -> tuple:
    """The numpy index of the elements `index` names along dim (its own positions along
    the other dims)."""
    pos = list(np.indices(index.shape, sparse=True))
    pos[dim] = index
    return tuple(pos)


def _check_index(x, index, dim):
    size = x.shape[dim] if x.ndim else 1
    if index.size and (index.min() < -size or index.max() >= size):
        bad = index[(index < -size) | (index >= size)].reshape(-1)[0]
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _scatter(x, index, src, dim):
    out = np.array(x, copy=True)
    if x.ndim == 0:
        if index.size:
            out[...] = src if np.ndim(src) == 0 else np.reshape(src, -1)[-1]
        return out
    _check_index(x, index, dim)
    out[positions(index, dim)] = src
    return out


_IDENTITY = {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _start(reduce, dtype):
    if reduce == "prod":
        return 1
    if dtype.kind == "b":
        return reduce == "amin"
    if dtype.kind in "fV":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce(x, index, src, dim, reduce, include_self=True):
    out = np.array(x, copy=True)
    if x.ndim == 0:
        out, index, src = out.reshape(1), index.reshape(-1), np.reshape(src, -1)
        dim = 0
    _check_index(out, index, dim)
    pos = positions(index, dim)
    if not include_self:
        out[pos] = _start(reduce, x.dtype)
    _IDENTITY[reduce].at(out, pos, src)
    return out.reshape(x.shape)


def _infer_scatter(x, index, src, dim, **attrs):
    a, i = aval_of(x), aval_of(index)
    if i.ndim != a.ndim and not (i.ndim <= 1 and a.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self "
                           "tensor")
    if i.dtype.category != 1:
        raise RuntimeError(f"scatter(): Expected dtype int64 for index, found "
                           f"{i.dtype.name}")
    s = aval_of(src)
    if s.ndim and s.dtype is not a.dtype:
        raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype, found "
                           f"{a.dtype.name} and {s.dtype.name}")
    return a


def _scatter_vjp(g, out, x, index, src, dim):
    grad_src = F.gather(g, dim, index) if getattr(src, "requires_grad", False) else None
    return F.scatter_raw(g, index, 0, dim), None, grad_src


def _scatter_reduce_vjp(g, out, x, index, src, dim, reduce, include_self=True):
    """Gradients of each element that took part in a position's result: for amax/amin
    shared evenly between the values equal to it (as PyTorch), for prod the product of
    the others (exact with one zero)."""
    ones = F.apply(OPS.full, shape=tuple(index.shape), value=1, dtype=g.dtype)
    hit = F.scatter_add_raw(ones, index, dim, tuple(x.shape)) > 0  # positions written to
    own = ~hit if not include_self else None  # positions whose result is x's alone
    if reduce == "prod":
        zero_src, zero_x = src == 0, x == 0
        if include_self:
            zeros = F.scatter_add_raw(F.cast(zero_src, g.dtype), index, dim, tuple(x.shape)) + \
                F.cast(zero_x, g.dtype)
            nonzero = F.scatter_reduce_raw(F.where(zero_x, 1, x), index,
                                           F.where(zero_src, 1, src), dim, "prod", True)
        else:
            zeros = F.scatter_add_raw(F.cast(zero_src, g.dtype), index, dim, tuple(x.shape))
            nonzero = F.scatter_reduce_raw(x, index, F.where(zero_src, 1, src), dim, "prod",
                                           False)

        def grad_of(v, zero, at):
            return F.where(zero, F.where(at(zeros) == 1, at(nonzero), 0),
                           at(out) / F.where(zero, 1, v))
        same = lambda t: t  # noqa: E731
        picked = lambda t: F.gather(t, dim, index)  # noqa: E731
        grad_x = g * grad_of(x, zero_x, same)
        if not include_self:
            grad_x = F.where(own, g, 0)
        grad_src = F.gather(g, dim, index) * grad_of(src, zero_src, picked)
        return grad_x, None, grad_src
    src_hit = F.cast(src == F.gather(out, dim, index), g.dtype)
    x_hit = F.cast(x == out, g.dtype)
    if not include_self:
        x_hit = F.cast(own, g.dtype)
    count = F.scatter_add_raw(src_hit, index, dim, tuple(x.shape)) + x_hit
    share = g / F.where(count == 0, 1, count)
    return share * x_hit, None, F.gather(share, dim, index) * src_hit


register("scatter", INDEX, _scatter, _infer_scatter, _scatter_vjp, saves=(1, 2), arity=3,
         checks_indices=True, grad_inputs=(0, 2))
register("scatter_reduce", INDEX, _scatter_reduce, _infer_scatter, _scatter_reduce_vjp,
         saves=(0, 1, 2), save_out=True, arity=3, checks_indices=True, grad_inputs=(0, 2))
