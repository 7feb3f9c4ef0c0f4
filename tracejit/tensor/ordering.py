"""Sorting, scans, scatters and the statistics built on them: `tj.sort`, `tj.topk`,
`tj.cumsum`, `tj.scatter_add`, `tj.index_add`, `tj.unique`, `tj.quantile`, `tj.multinomial`...

Values are picked with `gather` from the index primitives of ops/sorting.py (so their
gradient is scattered back into the selected positions) and scatters are ops/scatter.py's
primitives or sums of `scatter_add`: indices stay operands, so a trace reads them as data.
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple
from types import SimpleNamespace

import numpy as np

from ..core import dtypes as dt
from .composite import composite
from ..ops import OPS
from ..ops.indexing import Slot
from ..ops.rules import broadcast_shapes, normalize_dim
from . import functional as F
from .creation import full, ones, rand, randn
from .dispatch import apply
from .tensor import Tensor, _make


def _pair(name: str, first: str = "values", second: str = "indices"):
    return namedtuple(name, [first, second])


# PyTorch's torch.return_types: named pairs of values and indices
return_types = SimpleNamespace(**{n: _pair(n) for n in (
    "sort", "topk", "kthvalue", "median", "nanmedian", "cummax", "cummin", "mode")},
    aminmax=_pair("aminmax", "min", "max"))


def _broadcast(*xs) -> tuple:
    """The broadcast shape of tensors and numbers (RuntimeError if they do not broadcast)."""
    try:
        return broadcast_shapes("broadcast", *(tuple(x.shape) if isinstance(x, Tensor) else ()
                                                for x in xs))
    except ValueError as err:
        raise RuntimeError(str(err)) from None


def _dim(dim, axis, default=None):
    """PyTorch's `axis=` alias of `dim=`."""
    if axis is not None:
        if dim is not None and dim != default:
            raise TypeError("got both dim and its alias axis")
        return axis
    return default if dim is None else dim


def _int64(value) -> Tensor:
    return _make(np.asarray(value, np.int64))


def _take(input, d, idx, keepdim=True):
    values = F.gather(input, d, idx)
    return values if keepdim else F.squeeze(values, d)


_sorted_values = composite("SortBackward0", "input")(_take)
_topk_values = composite("TopkBackward0", "input")(_take)
_kth_values = composite("KthvalueBackward0", "input")(_take)
_median_values = composite("MedianBackward1", "input")(_take)
_cummax_values = composite("CummaxBackward0", "input")(_take)
_cummin_values = composite("CumminBackward0", "input")(_take)


# ---- sorting -------------------------------------------------------------------------------
def argsort(input, dim=-1, descending=False, stable=False, *, axis=None):
    """Indices that sort `input` along `dim` (NaN after +inf; ties keep their order).

    >>> tj.argsort(tj.tensor([3.0, 1.0, 2.0]))   # tensor([1, 2, 0])
    """
    d = normalize_dim(_dim(dim, axis, -1), input.ndim, "argsort")
    return apply(OPS.argsort, input, dim=d, descending=bool(descending))


def sort(input, dim=-1, descending=False, stable=False, *, axis=None):
    """(values, indices) of `input` sorted along `dim`, as torch.sort (stable).

    >>> tj.sort(tj.tensor([3.0, 1.0, 2.0]), descending=True).values   # [3., 2., 1.]
    """
    d = normalize_dim(_dim(dim, axis, -1), input.ndim, "sort")
    idx = apply(OPS.argsort, input, dim=d, descending=bool(descending))
    if input.ndim == 0:
        return return_types.sort(F.clone(input), idx)
    return return_types.sort(_sorted_values(input, d, idx), idx)


def msort(input):
    """`input` sorted along its first dimension."""
    return sort(input, 0).values


def topk(input, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (smallest) elements along `dim`, largest first.

    >>> logits = tj.randn(2, 100)
    >>> v, i = logits.topk(5)      # keep the 5 most likely tokens of each row
    """
    d = normalize_dim(dim, input.ndim, "topk")
    k = int(k)
    if not 0 <= k <= (input.shape[d] if input.ndim else 1):
        raise RuntimeError(f"topk(): selected index k out of range (k={k}, but the dimension "
                           f"has size {input.shape[d] if input.ndim else 1})")
    idx = apply(OPS.topk, input, k=k, dim=d, largest=bool(largest))
    if input.ndim == 0:
        return return_types.topk(F.clone(input) if k else F.reshape(input, ()), idx)
    return return_types.topk(_topk_values(input, d, idx), idx)


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices) of the k-th smallest element along `dim` (k counts from 1)."""
    d = normalize_dim(dim, input.ndim, "kthvalue")
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d} "
                           f"(expected k in [1, {n}], got {k})")
    if input.ndim == 0:
        return return_types.kthvalue(F.clone(input), _int64(0))
    order = apply(OPS.argsort, input, dim=d, descending=False)
    idx = F.narrow(order, d, k - 1, 1)
    out = _kth_values(input, d, idx, keepdim)
    return return_types.kthvalue(out, idx if keepdim else F.squeeze(idx, d))


def _median(name, input, dim, keepdim, ignore_nan):
    """The lower median along dim: position (n - 1) // 2 of the sorted slice, or, with
    NaNs, the first NaN (median) or the lower median of the others (nanmedian)."""
    pair = getattr(return_types, name)
    if dim is None:
        flat = F.reshape(input, (-1,))
        if flat.shape[0] == 0:
            return F.reshape(F.sum(flat) * math.nan, ()) if input.is_floating_point() else \
                F.reshape(F.sum(flat), ())
        return F.reshape(_median(name, flat, 0, False, ignore_nan).values, ())
    d = normalize_dim(dim, input.ndim, name)
    if input.ndim == 0:
        return pair(F.clone(input), _int64(0))
    if input.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    order = apply(OPS.argsort, input, dim=d, descending=False)
    n = input.shape[d]
    if input.is_floating_point():
        valid = F.sum(F.logical_not(F.isnan(input)), d, keepdim=True)
        if ignore_nan:
            pos = F.clamp(F.floor_divide(valid - 1, 2), 0)
        else:
            pos = F.where(valid < n, valid, (n - 1) // 2)
    else:
        shape = tuple(1 if k == d else s for k, s in enumerate(input.shape))
        pos = full(shape, (n - 1) // 2, dtype=dt.int64)
    idx = F.gather(order, d, pos)
    out = _median_values(input, d, idx, keepdim)
    return pair(out, idx if keepdim else F.squeeze(idx, d))


def median(input, dim=None, keepdim=False, *, axis=None):
    """The lower median of all elements, or (values, indices) along `dim`; NaN if the
    slice holds one."""
    return _median("median", input, _dim(dim, axis), keepdim, False)


def nanmedian(input, dim=None, keepdim=False, *, axis=None):
    """median ignoring NaNs (NaN only where a slice is all NaN)."""
    return _median("nanmedian", input, _dim(dim, axis), keepdim, True)


# ---- scans ---------------------------------------------------------------------------------
def _scan_input(name, input, dim, axis, dtype):
    if dtype is not None:
        input = F.cast(input, dtype)
    return input, normalize_dim(_dim(dim, axis), input.ndim, name)


def cumsum(input, dim=None, *, dtype=None, axis=None):
    """Running sums along `dim`; integers and bools sum in int64 unless `dtype=` says.

    >>> tj.cumsum(tj.tensor([1, 2, 3]), 0)   # tensor([1, 3, 6])
    """
    input, d = _scan_input("cumsum", input, dim, axis, dtype)
    out = apply(OPS.cumsum, input, dim=d)
    return out if dtype is None else F.cast(out, dtype)


def cumprod(input, dim=None, *, dtype=None, axis=None):
    """Running products along `dim` (its gradient is exact where the input holds zeros)."""
    input, d = _scan_input("cumprod", input, dim, axis, dtype)
    out = apply(OPS.cumprod, input, dim=d)
    return out if dtype is None else F.cast(out, dtype)


def _cumulative_extreme(name, op, values, input, dim, axis):
    pair = getattr(return_types, name)
    d = normalize_dim(_dim(dim, axis), input.ndim, name)
    idx = apply(op, input, dim=d)
    if input.ndim == 0:
        return pair(F.clone(input), idx)
    return pair(values(input, d, idx), idx)


def cummax(input, dim=None, *, axis=None):
    """(values, indices) of the running maximum along `dim` (the last position of a tie;
    NaN, once seen, is the maximum)."""
    return _cumulative_extreme("cummax", OPS.argcummax, _cummax_values, input, dim, axis)


def cummin(input, dim=None, *, axis=None):
    return _cumulative_extreme("cummin", OPS.argcummin, _cummin_values, input, dim, axis)


@composite("LogcumsumexpBackward0", "input")
def logcumsumexp(input, dim=None, *, axis=None):
    """log(cumsum(exp(input))) along `dim`, computed with the slice's maximum shifted out."""
    d = normalize_dim(_dim(dim, axis), input.ndim, "logcumsumexp")
    F.require_floating("logcumsumexp", input)
    if input.ndim == 0:
        return F.clone(input)
    m = F.amax(input, d, keepdim=True).detach() if input.shape[d] else F.sum(input, d, True)
    m = F.where(F.isfinite(m), m, 0.0)
    return F.log(cumsum(F.exp(input - m), d)) + m


# ---- scatter and gather --------------------------------------------------------------------
def _index_part(src, index):
    """src cut to index's shape (PyTorch reads only that part of a larger src)."""
    if tuple(src.shape) == tuple(index.shape) or src.ndim != index.ndim:
        return src
    return F.getitem_raw(src, tuple(slice(0, s) for s in index.shape), ())


def _check_scatter(name, input, index, src=None):
    if index.dtype.category != 1:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index, but found "
                           f"{index.dtype.name}")
    if isinstance(src, Tensor) and src.dtype is not input.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype, but found "
                           f"{input.dtype.name} and {src.dtype.name}")
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise RuntimeError(f"{name}(): Index tensor must have the same number of dimensions as "
                           f"self tensor ({input.ndim}), found {index.ndim}")
    if isinstance(src, Tensor) and src.ndim != index.ndim and index.numel():
        raise RuntimeError(f"{name}(): Index tensor must have the same number of dimensions as "
                           f"src tensor ({src.ndim}), found {index.ndim}")


def scatter_raw(input, index, src, dim):
    """input with src (a tensor of index's shape, or a number) written at index along dim."""
    return apply(OPS.scatter, input, index, F._operand(src), dim=dim)


def scatter_reduce_raw(input, index, src, dim, reduce, include_self=True):
    return apply(OPS.scatter_reduce, input, index, src, dim=dim, reduce=reduce,
                 include_self=include_self)


_REDUCE_NAMES = {"add": "sum", "multiply": "prod"}


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """input with `src` (a tensor, or a number as `value`) written at `index` along `dim`:
    out[i][index[i][j]] = src[i][j] for dim=1. `reduce='add'|'multiply'` combines instead.

    >>> tj.zeros(3).scatter(0, tj.tensor([2, 0]), tj.tensor([5.0, 7.0]))   # [7., 0., 5.]
    """
    if src is None:
        src = value
    d = normalize_dim(dim, input.ndim, "scatter")
    _check_scatter("scatter", input, index, src)
    if reduce is not None:
        if reduce not in _REDUCE_NAMES:
            raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
        if not isinstance(src, Tensor):
            src = F.expand_to(F.cast(_make(np.asarray(src)), input.dtype), tuple(index.shape))
        return scatter_reduce(input, d, index, src, _REDUCE_NAMES[reduce])
    if input.ndim == 0:
        src = F.reshape(src, (-1,)) if isinstance(src, Tensor) else src
        return F.reshape(scatter(F.reshape(input, (1,)), 0, F.reshape(index, (-1,)), src), ())
    if isinstance(src, Tensor):
        src = _index_part(src, index)
    return scatter_raw(input, index, src, d)


def scatter_add(input, dim, index, src):
    """input + src summed into the positions `index` names along `dim` (duplicates add):
    the message passing of graph networks. Differentiable in input and src.

    >>> tj.zeros(3).scatter_add(0, tj.tensor([0, 0, 2]), tj.ones(3))   # [2., 0., 1.]
    """
    d = normalize_dim(dim, input.ndim, "scatter_add")
    _check_scatter("scatter_add", input, index, src)
    if input.ndim == 0:
        return F.reshape(scatter_add(F.reshape(input, (1,)), 0, F.reshape(index, (-1,)),
                                     F.reshape(src, (-1,))), ())
    src = _index_part(src, index)
    return input + F.cast(F.scatter_add_raw(src, index, d, tuple(input.shape)), input.dtype)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Combine src into input at index along dim by `reduce` ('sum', 'prod', 'mean',
    'amax', 'amin'); include_self=False leaves input's own values out where src lands."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = normalize_dim(dim, input.ndim, "scatter_reduce")
    _check_scatter("scatter_reduce", input, index, src)
    src = _index_part(src, index)
    if input.ndim == 0:
        return F.reshape(scatter_reduce(F.reshape(input, (1,)), 0, F.reshape(index, (-1,)),
                                        F.reshape(src, (-1,)), reduce,
                                        include_self=include_self), ())
    if reduce in ("prod", "amax", "amin"):
        return scatter_reduce_raw(input, index, src, d, reduce, bool(include_self))
    shape = tuple(input.shape)
    hit = F.scatter_add_raw(ones(tuple(index.shape), dtype=input.dtype,
                                 device=input.device.type), index, d, shape) \
        if not include_self or reduce == "mean" else None
    base = input if include_self else F.where(hit > 0, False if input.dtype is dt.bool_ else 0,
                                              input)
    added = F.scatter_add_raw(src, index, d, shape)
    if input.dtype is dt.bool_:  # a sum of bools is their logical or
        return F.logical_or(base, added)
    total = base + F.cast(added, input.dtype)
    if reduce == "sum":
        return total
    count = hit + (1 if include_self else 0)
    if input.is_floating_point():
        return F.where(count > 0, total / F.where(count > 0, count, 1), input)
    return F.where(count > 0, F.floor_divide(total, F.where(count > 0, count, 1)), input)


def _full_index(index, d, like_shape):
    """A 1-d index along dim d made the index of every element of a tensor of like_shape."""
    shape = [1] * len(like_shape)
    shape[d] = index.shape[0]
    return F.expand_to(F.reshape(index, tuple(shape)), tuple(like_shape))


def _check_index_op(name, input, dim, index, source=None):
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector, got a "
                         f"{index.ndim}-d tensor")
    if index.dtype.category != 1:
        raise IndexError(f"{name}(): Expected dtype int32/int64 for index, got "
                         f"{index.dtype.name}")
    d = normalize_dim(dim, input.ndim, name)
    if isinstance(source, Tensor):
        if source.dtype is not input.dtype:
            raise RuntimeError(f"{name}(): self ({input.dtype.name}) and source "
                               f"({source.dtype.name}) must have the same scalar type")
        n = index.numel()
        want = list(input.shape)
        if want:
            want[d] = n
        if list(source.shape) != want and not (source.numel() == n == input.numel() <= 1):
            raise RuntimeError(f"{name}(): source of shape {list(source.shape)} does not match "
                               f"self of shape {list(input.shape)} with {n} indices along "
                               f"dim {d} (expected {want})")
    return d


def index_add(input, dim, index, source, *, alpha=1):
    """input + alpha * source added at the rows `index` names along `dim` (duplicates
    add); differentiable in input and source.

    >>> tj.zeros(3, 2).index_add(0, tj.tensor([0, 2, 0]), tj.ones(3, 2))
    """
    d = _check_index_op("index_add", input, dim, index, source)
    if input.ndim == 0:
        return F.reshape(index_add(F.reshape(input, (1,)), 0, F.reshape(index, (-1,)),
                                   F.reshape(source, (-1,)), alpha=alpha), ())
    index = F.reshape(index, (-1,))
    source = F.reshape(source, tuple(input.shape[:d]) + (index.shape[0],)
                       + tuple(input.shape[d + 1:]))
    if alpha != 1:
        source = source * alpha
    full = _full_index(F.cast(index, dt.int64), d, tuple(source.shape))
    return input + F.cast(F.scatter_add_raw(source, full, d, tuple(input.shape)), input.dtype)


def _row_template(d):
    return (slice(None),) * d + (Slot(0),)


def index_copy(input, dim, index, source):
    """input with its rows `index` along `dim` replaced by source's rows."""
    d = _check_index_op("index_copy", input, dim, index, source)
    if input.ndim == 0:
        return F.reshape(source, ()).clone() if index.numel() else F.clone(input)
    return F.setitem_raw(input, source, _row_template(d), (F.reshape(index, (-1,)),))


def index_fill(input, dim, index, value):
    """input with its rows `index` along `dim` set to `value`."""
    d = _check_index_op("index_fill", input, dim, index)
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    if input.ndim == 0:
        return F.where(_make(np.asarray(index.numel() > 0)), value, input)
    value = F.cast(value, input.dtype) if isinstance(value, Tensor) else value
    # a mask, so that a value tensor gets each filled position's gradient once
    mask = F.setitem_raw(full(tuple(input.shape), False, dtype=dt.bool_), True,
                         _row_template(d), (F.reshape(index, (-1,)),))
    return F.where(mask, value, input)


def masked_select(input, mask):
    """The elements of input where mask (broadcast with it) holds, as a 1-d tensor."""
    if mask.dtype is not dt.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got "
                           f"{mask.dtype.name}")
    shape = _broadcast(input, mask) or (1,)
    return F.getitem(F.expand_to(F.reshape(input, (1,) * (len(shape) - input.ndim)
                                           + tuple(input.shape)), shape),
                     F.expand_to(F.reshape(mask, (1,) * (len(shape) - mask.ndim)
                                           + tuple(mask.shape)), shape))


def masked_scatter(input, mask, source):
    """input with the positions where mask holds filled, in order, from source's elements."""
    if mask.dtype is not dt.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {mask.dtype.name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got {input.dtype.name} and {source.dtype.name}")
    shape = _broadcast(input, mask)
    mask = F.expand_to(mask, shape)
    flat = F.reshape(source, (-1,))
    order = F.clamp(cumsum(F.reshape(mask, (-1,)), 0) - 1, 0, builtins.max(flat.shape[0] - 1, 0))
    if flat.shape[0] == 0:
        return F.clone(F.expand_to(input, shape))
    picked = F.reshape(F.getitem_raw(flat, (Slot(0),), (order,)), shape)
    return F.where(mask, picked, input)


def take(input, index):
    """input's elements at the flat positions `index` (shaped as index)."""
    if index.dtype is not dt.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{index.dtype.name}")
    return F.getitem_raw(F.reshape(input, (-1,)), (Slot(0),), (index,))


def take_along_dim(input, indices, dim=None):
    """gather with broadcasting: input's values at `indices` along `dim` (flat without)."""
    if indices.dtype is not dt.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{indices.dtype.name}")
    if dim is None:
        return F.gather(F.reshape(input, (-1,)), 0, F.reshape(indices, (-1,)))
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {input.ndim} dimensions for input, "
                           f"and {indices.ndim} dimensions for indices")
    d = normalize_dim(dim, input.ndim, "take_along_dim")
    a, i = list(input.shape), list(indices.shape)
    a[d] = i[d] = 1
    try:
        common = broadcast_shapes("take_along_dim", tuple(a), tuple(i))
    except ValueError as err:
        raise RuntimeError(str(err)) from None
    ins, ids = list(common), list(common)
    ins[d], ids[d] = input.shape[d], indices.shape[d]
    return F.gather(F.expand_to(input, tuple(ins)), d, F.expand_to(indices, tuple(ids)))


# ---- searching and counting ----------------------------------------------------------------
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Where each value of input would go in sorted_sequence (along its last dim) to keep
    it sorted: the first such place, or the last with right=True / side='right'."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    if sorter is not None:
        sorted_sequence = F.gather(sorted_sequence, -1, sorter)
    scalar = not isinstance(input, Tensor)
    values = F._operand(input) if not scalar else _make(np.asarray(input))
    if not isinstance(values, Tensor):
        values = _make(np.asarray(values))
    if values.dtype is not sorted_sequence.dtype:
        common = dt.result_type(values, sorted_sequence)
        values, sorted_sequence = F.cast(values, common), F.cast(sorted_sequence, common)
    return apply(OPS.searchsorted, sorted_sequence, values, right=bool(right),
                 out_int32=bool(out_int32))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among 1-d sorted `boundaries` (searchsorted's other order)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of input, sorted; with return_inverse each element's position
    among them (input's shape), with return_counts how often each occurs."""
    if dim is not None:
        return _unique_dim(input, normalize_dim(dim, input.ndim, "unique"), return_inverse,
                           return_counts)
    values = apply(OPS.unique_values, input)
    out = [values]
    if return_inverse or return_counts:
        inverse = apply(OPS.searchsorted, values, input, right=False, out_int32=False)
        if return_inverse:
            out.append(inverse)
        if return_counts:
            out.append(apply(OPS.bincount, F.reshape(inverse, (-1,)),
                             minlength=int(values.shape[0])))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_dim(input, d, return_inverse, return_counts):
    """unique slices along dim d (computed on the values: not differentiable)."""
    data = np.moveaxis(input.detach().numpy(), d, 0)
    flat = data.reshape(data.shape[0], int(np.prod(data.shape[1:])))
    if flat.shape[0] == 0 or flat.shape[1] == 0:  # no slices, or every slice empty (equal)
        n = flat.shape[0]
        keys, inverse, counts = flat[:builtins.min(n, 1)], np.zeros(n, np.int64), \
            np.array([n] if n else [], np.int64)
    else:
        keys, inverse, counts = np.unique(flat, axis=0, return_inverse=True,
                                          return_counts=True)
    values = np.moveaxis(keys.reshape(keys.shape[:1] + data.shape[1:]), 0, d)
    out = [_make(np.ascontiguousarray(values))]
    if return_inverse:
        out.append(_int64(inverse.reshape(-1)))
    if return_counts:
        out.append(_int64(counts))
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive values (slices along `dim`) once, of the flattened
    input without dim (computed on the values: not differentiable)."""
    data = input.detach().numpy()
    d = 0 if dim is None else normalize_dim(dim, input.ndim, "unique_consecutive")
    data = data.reshape(-1) if dim is None else np.moveaxis(data, d, 0)
    rows = data.reshape(data.shape[0], int(np.prod(data.shape[1:]))) if data.ndim else \
        data.reshape(1, 1)
    starts = np.ones(rows.shape[0], bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    kept = np.ascontiguousarray(np.moveaxis(data[starts], 0, d) if dim is not None
                                else data[starts])
    out = [_make(kept)]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        out.append(_int64(inverse.reshape(input.shape) if dim is None else inverse))
    if return_counts:
        out.append(_int64(np.diff(np.append(np.flatnonzero(starts), rows.shape[0]))))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(input, weights=None, minlength=0):
    """How often each value 0..max occurs in a 1-d int tensor (summing weights if given)."""
    if input.ndim != 1 or input.dtype.category != 1:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got a "
                           f"{input.ndim}-d {input.dtype.name} tensor")
    if minlength < 0:
        raise RuntimeError(f"minlength should be >= 0, got {minlength}")
    if input.numel() and int(F.amin(input)) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    args = (input,) if weights is None else (input, weights)
    return apply(OPS.bincount, *args, minlength=int(minlength))


def count_nonzero(input, dim=None):
    """How many elements are not zero, over all or along `dim` (an int or a tuple)."""
    return F.sum(F.ne(input, 0), dim)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (each slice along `dim`) repeated `repeats` times in place:
    [1, 2] -> [1, 1, 2, 2]. repeats: an int or a tensor of one count per element;
    `tj.repeat_interleave(counts)` alone gives each index counts[i] times."""
    if repeats is None:  # repeat_interleave(repeats): the indices
        return apply(OPS.repeat_index, input)
    if dim is None:
        input, d = F.reshape(input, (-1,)), 0
    else:
        d = normalize_dim(dim, input.ndim, "repeat_interleave")
    if input.ndim == 0:
        input = F.reshape(input, (1,))
    if isinstance(repeats, Tensor) and repeats.ndim == 1 and repeats.shape[0] != 1:
        if repeats.shape[0] != input.shape[d]:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {repeats.shape[0]} and input.size({d}) = "
                               f"{input.shape[d]}")
        if repeats.numel() and int(F.amin(repeats)) < 0:
            raise RuntimeError("repeats can not be negative")
        return F.index_select(input, d, apply(OPS.repeat_index, repeats))
    r = int(repeats)
    if r < 0:
        raise RuntimeError("repeats can not be negative")
    shape = tuple(input.shape)
    x = F.unsqueeze(input, d + 1)
    x = F.expand_to(x, shape[:d + 1] + (r,) + shape[d + 1:])
    return F.reshape(x, shape[:d] + (shape[d] * r,) + shape[d + 1:])


# ---- statistics ----------------------------------------------------------------------------
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over `dim` (Bessel's correction by default)."""
    if isinstance(dim, bool):  # var_mean(x, True): the unbiased flag
        dim, unbiased = None, dim
    return (F.var(input, dim, unbiased, keepdim, correction=correction),
            F.mean(input, dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over `dim`."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (F.std(input, dim, unbiased, keepdim, correction=correction),
            F.mean(input, dim, keepdim))


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum treating NaN as zero."""
    if input.is_floating_point():
        input = F.where(F.isnan(input), 0, input)
    return F.sum(input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean of the elements that are not NaN."""
    if dtype is not None:
        input = F.cast(input, dtype)
    if not input.is_floating_point():
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{input.dtype.name}")
    valid = F.logical_not(F.isnan(input))
    return nansum(input, dim, keepdim) / F.sum(valid, dim, keepdim)


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over all elements or along `dim`."""
    if dim is not None and input.ndim and input.shape[normalize_dim(dim, input.ndim)] == 0:
        raise IndexError(f"aminmax(): Expected reduction dim {dim} to have non-zero size.")
    if input.numel() == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if input.ndim == 0 and dim is not None:
        normalize_dim(dim, 0, "aminmax")
        return return_types.aminmax(F.clone(input), F.clone(input))
    out = (F.amin(input, dim, keepdim), F.amax(input, dim, keepdim))
    if dim is None and keepdim:
        out = tuple(F.reshape(o, (1,) * input.ndim) for o in out)
    return return_types.aminmax(*out)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, "
                         f"midpoint or nearest. Got {interpolation}")
    if not input.is_floating_point():
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    scalar_q = not isinstance(q, Tensor)
    qs = _make(np.asarray(q, input.dtype.np)) if scalar_q else q
    if qs.ndim > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if qs.dtype is not input.dtype:
        raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    qv = qs.detach().numpy().reshape(-1)
    if ((qv < 0) | (qv > 1)).any():
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    if dim is None:
        x, d = F.reshape(input, (-1,)), 0
    else:
        d = normalize_dim(dim, input.ndim, name)
        x = input if input.ndim else F.reshape(input, (1,))
    if x.shape[d] == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    values = sort(x, d).values
    n = x.shape[d]
    valid = F.sum(F.logical_not(F.isnan(x)), d, keepdim=True)
    last = (valid - 1) if ignore_nan else F.where(valid < n, n - 1, valid - 1)
    outs = []
    flat_q = F.reshape(qs, (-1,))
    for k in range(len(qv)):
        rank = F.clamp(F.cast(last, input.dtype), 0) * F.getitem_raw(flat_q, (k,), ())
        lo = F.floor(rank)
        frac = rank - lo
        hi = F.where(frac > 0, F.clamp(lo + 1, max=F.cast(F.clamp(last, 0), input.dtype)), lo)
        if interpolation == "lower":
            pos_lo, pos_hi, w = lo, lo, None
        elif interpolation == "higher":
            pos_lo = pos_hi = F.where(frac > 0, hi, lo)
            w = None
        elif interpolation == "nearest":
            near = F.where(frac > 0.5, hi, F.where(frac < 0.5, lo, F.where(
                F.remainder(lo, 2) == 0, lo, hi)))
            pos_lo = pos_hi = near
            w = None
        else:
            pos_lo, pos_hi, w = lo, hi, (0.5 if interpolation == "midpoint" else frac)
        a = F.gather(values, d, F.cast(pos_lo, dt.int64))
        out = a if w is None else F.lerp(a, F.gather(values, d, F.cast(pos_hi, dt.int64)), w)
        if not ignore_nan:
            out = F.where(valid < n, math.nan, out)
        else:
            out = F.where(valid == 0, math.nan, out)
        if not keepdim or input.ndim == 0:
            out = F.squeeze(out, d)
        elif dim is None:
            out = F.reshape(out, (1,) * input.ndim)
        outs.append(out)
    if scalar_q or qs.ndim == 0:
        return F.reshape(outs[0], ()) if input.ndim == 0 else outs[0]
    return F.stack(outs, 0)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles of input (over all, or along `dim`); q a number or a 1-d tensor
    (then the quantiles are stacked in front)."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaNs."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# ---- random --------------------------------------------------------------------------------
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples indices drawn from each row of non-negative weights `input` (1-d or
    2-d), with or without replacement, from tracejit's generator (`tj.manual_seed`).

    >>> tj.multinomial(tj.softmax(logits, -1), 1)    # the next token of each row
    """
    if input.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.ndim}")
    if not input.is_floating_point():
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype.name}")
    n = input.shape[-1]
    if num_samples <= 0:
        raise RuntimeError(f"cannot sample n_sample <= 0 samples (got {num_samples})")
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    probs = input.detach()
    data = probs.numpy()
    if (data < 0).any() or not np.isfinite(data).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (data.reshape(-1, n).sum(-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rows = tuple(probs.shape[:-1])
    if replacement:
        cdf = cumsum(probs, -1)
        u = rand(*rows, num_samples, dtype=probs.dtype) * F.narrow(cdf, -1, n - 1, 1)
        picked = searchsorted(cdf, u, right=True)
        return F.clamp(picked, max=n - 1)
    # without replacement: the k smallest of Exp(1) / p (exponential races; p = 0 never wins)
    race = -F.log1p(-rand(*rows, n, dtype=probs.dtype)) / probs
    return topk(race, num_samples, -1, largest=False).indices


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Samples of N(mean, std^2): mean and std tensors (broadcast) or numbers with `size`."""
    if size is not None:
        if isinstance(mean, Tensor) or isinstance(std, Tensor):
            raise RuntimeError("normal(): size is only accepted with a number mean and std")
        out = randn(*size, dtype=dtype, device=device) * std + mean
        return out.requires_grad_() if requires_grad else out
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        raise TypeError("normal(): expected a tensor mean or std, or a size")
    if isinstance(std, Tensor) and bool(F.any(std < 0)):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if not isinstance(std, Tensor) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    ref = mean if isinstance(mean, Tensor) else std
    shape = _broadcast(mean, std)
    noise = randn(*shape, dtype=ref.dtype)
    return noise * std + mean


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill self, in place, with samples of N(mean, std^2)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return F.copy_(self, randn(*self.shape, dtype=self.dtype) * std + mean)


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (or p), else 0, in input's dtype."""
    prob = input if p is None else p
    u = rand(*input.shape, dtype=input.dtype if input.is_floating_point() else dt.float32,
             device=input.device.type)
    out = F.cast(u < prob, input.dtype)
    if isinstance(prob, Tensor) and prob.requires_grad:
        out = out + prob * 0  # a zero gradient, as PyTorch's BernoulliBackward gives
    return out


# ---- in-place forms and Tensor methods -----------------------------------------------------
scatter_ = F.inplace_of(scatter)
scatter_add_ = F.inplace_of(scatter_add)
scatter_reduce_ = F.inplace_of(scatter_reduce)
index_add_ = F.inplace_of(index_add)
index_copy_ = F.inplace_of(index_copy)
index_fill_ = F.inplace_of(index_fill)
masked_scatter_ = F.inplace_of(masked_scatter)
cumsum_ = F.inplace_of(cumsum)
cumprod_ = F.inplace_of(cumprod)

__all__ = ["argsort", "sort", "msort", "topk", "kthvalue", "median", "nanmedian", "cumsum",
           "cumprod", "cummax", "cummin", "logcumsumexp", "scatter", "scatter_add",
           "scatter_reduce", "index_add", "index_copy", "index_fill", "masked_select",
           "masked_scatter", "take", "take_along_dim", "searchsorted", "bucketize", "unique",
           "unique_consecutive", "bincount", "count_nonzero", "repeat_interleave", "var_mean",
           "std_mean", "nansum", "nanmean", "aminmax", "quantile", "nanquantile",
           "multinomial", "normal", "bernoulli", "return_types"]
RULES = ["scatter_raw", "scatter_reduce_raw"]  # for the op table's gradient rules
_METHODS = [n for n in __all__ if n not in ("normal", "return_types", "searchsorted",
                                            "std_mean", "var_mean", "multinomial")] + [
    "scatter_", "scatter_add_", "scatter_reduce_", "index_add_", "index_copy_",
    "index_fill_", "masked_scatter_", "cumsum_", "cumprod_", "normal_", "multinomial"]


def _install_methods() -> None:
    for name in _METHODS:
        setattr(Tensor, name, globals()[name])


_install_methods()
