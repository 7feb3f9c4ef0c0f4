"""Reduction primitives over `dim` (None = all) with `keepdim`."""
from __future__ import annotations

import numpy as np

from ..core import dtypes as dt
from .registry import AVal, REDUCE, register
from .scalar import ALL, ANY, MAX, MEAN, MIN, PROD, SUM
from .rules import aval_of, reduced_shape

F = None  # tracejit.tensor.functional, bound by tracejit.ops


def _axis(dim):
    return dim if dim is None else tuple(dim)


def _accumulator(x):
    """The dtype a sum or product of x accumulates in: int64 for integers and bools,
    float32 for float16/bfloat16 (as PyTorch: partial sums of halves overflow and lose
    digits), else x's own."""
    kind = x.dtype.kind
    if kind in "biu":
        return np.int64
    return np.float32 if x.dtype.itemsize == 2 else None


def _low(x, r):
    """r rounded back to x's dtype when x is float16/bfloat16."""
    return r.astype(x.dtype) if x.dtype.itemsize == 2 and x.dtype.kind in "fV" else r


# The reductions call the ufuncs' own `reduce` (what np.sum, np.mean and np.amax call):
# floating-point warnings (NaN, 0/0 of an empty mean) then come from this module, where
# tracejit's filter keeps them quiet as PyTorch is, and never from numpy's own modules.

def _sum(x, dim=None, keepdim=False):
    return _low(x, np.add.reduce(x, axis=_axis(dim), keepdims=keepdim, dtype=_accumulator(x)))


def _mean(x, dim=None, keepdim=False):
    if x.dtype.kind not in "fV":
        return np.mean(x, axis=_axis(dim), keepdims=keepdim)
    acc = np.float32 if x.dtype.itemsize == 2 else None
    total = np.add.reduce(x, axis=_axis(dim), keepdims=keepdim, dtype=acc)
    return _low(x, np.true_divide(total, _count(x, dim), dtype=total.dtype))


def _prod(x, dim=None, keepdim=False):
    return _low(x, np.multiply.reduce(x, axis=_axis(dim), keepdims=keepdim,
                                      dtype=_accumulator(x)))


def _amax(x, dim=None, keepdim=False):
    _nonempty("amax", x, dim)
    return np.maximum.reduce(x, axis=_axis(dim), keepdims=keepdim)


def _amin(x, dim=None, keepdim=False):
    _nonempty("amin", x, dim)
    return np.minimum.reduce(x, axis=_axis(dim), keepdims=keepdim)


def _arg(name: str, np_fn):
    """argmax / argmin: the flat index over all elements, or the index along one dim."""
    def impl(x, dim=None, keepdim=False):
        _nonempty(name, x, dim)
        if dim is None:
            r = np_fn(x)
            return np.reshape(r, (1,) * x.ndim) if keepdim else np.asarray(r)
        return np_fn(x, axis=dim[0], keepdims=keepdim)
    return impl


def _nonempty(name, x, dim):
    if x.size == 0 and (dim is None or any(x.shape[d] == 0 for d in dim)):
        raise RuntimeError(f"{name}(): cannot reduce over a zero-size dimension of a tensor "
                           f"of shape {list(x.shape)}")


def _infer(kind):
    def infer(x, dim=None, keepdim=False):
        a = aval_of(x)
        shape = reduced_shape(a.shape, dim, keepdim)
        if kind == "sum":
            d = dt.int64 if a.dtype.category < 2 else a.dtype
        elif kind == "arg":
            d = dt.int64
        elif kind == "bool":
            d = dt.bool_
        else:
            d = a.dtype
        return AVal(shape, d)
    return infer


def _restore(g, x, dim, keepdim):
    """Bring a reduced gradient back to x's shape (unsqueeze the reduced dims, expand).
    A full reduction's 0-d gradient expands directly."""
    if not keepdim and dim is not None:
        g = F.reshape(g, reduced_shape(tuple(x.shape), dim, True))
    return F.expand_to(g, tuple(x.shape))


def _count(x, dim) -> int:
    n = 1
    for i, s in enumerate(x.shape):
        if dim is None or i in dim:
            n *= s
    return n


def _extreme_vjp(g, out, x, dim=None, keepdim=False):
    # the gradient is shared evenly between tied extremes, as PyTorch's amax/amin do
    o = _restore(out, x, dim, keepdim)
    mask = F.cast(x == o, g.dtype)
    return (_restore(g, x, dim, keepdim) * mask / F.sum(mask, dim, True),)


register("sum", REDUCE, _sum, _infer("sum"),
         lambda g, out, x, dim=None, keepdim=False: (_restore(g, x, dim, keepdim),), saves=(),
         monoid=SUM, autocast="fp32 cuda")
register("mean", REDUCE, _mean, _infer("same"),
         lambda g, out, x, dim=None, keepdim=False: (_restore(g, x, dim, keepdim)
                                                       / _count(x, dim),), saves=(), monoid=MEAN)
def _prod_vjp(g, out, x, dim=None, keepdim=False):
    """d prod / d x_i = product of the other elements, exact with zeros: one zero in a
    slice gets the product of the rest, every other element of it 0 (as PyTorch)."""
    zero = x == 0
    zeros = F.sum(zero, dim, True)
    safe = F.where(zero, 1, x)
    others = F.prod(safe, dim, True)
    grad = F.where(zeros == 0, others / safe, F.where((zeros == 1) & zero, others, 0))
    return (_restore(g, x, dim, keepdim) * grad,)


register("prod", REDUCE, _prod, _infer("sum"), _prod_vjp, saves=(0,), monoid=PROD,
         autocast="fp32")
register("amax", REDUCE, _amax, _infer("same"), _extreme_vjp, saves=(0,), save_out=True,
         monoid=MAX)
register("amin", REDUCE, _amin, _infer("same"), _extreme_vjp, saves=(0,), save_out=True,
         monoid=MIN)
register("argmax", REDUCE, _arg("argmax", np.argmax), _infer("arg"))
register("argmin", REDUCE, _arg("argmin", np.argmin), _infer("arg"))
register("any", REDUCE, lambda x, dim=None, keepdim=False: np.any(x, axis=_axis(dim),
                                                                  keepdims=keepdim),
         _infer("bool"), monoid=ANY)
register("all", REDUCE, lambda x, dim=None, keepdim=False: np.all(x, axis=_axis(dim),
                                                                  keepdims=keepdim),
         _infer("bool"), monoid=ALL)
