"""Tensor operations: `tj.exp(x)`, `x.exp()`, `x + y`, reductions, shape ops, indexing.

Each operation is defined once here, as a function over the op table's
primitives (composites such as softmax need no rules of their own); the same
functions are installed as `Tensor` methods at the bottom of this module.
"""
from __future__ import annotations

import builtins
import math
import sys
from collections import namedtuple

import numpy as np

from ..core import dtypes as dt
from . import node as _node
from .composite import composite
from ..core.modes import STATE
from ..ops import OPS, bind_frontend
from ..ops.indexing import Slot
from ..core.symbolic import SymInt
from ..ops.rules import normalize_dim, normalize_dims
from .dispatch import apply, apply_inplace, binary as _binary_fast, unary as _unary_fast
from .tensor import FreshTensor, Tensor, _make

_FAST = (Tensor, float, int, bool)


def _operand(x):
    """A Tensor or Python scalar from whatever the user passed (numpy values, lists)."""
    t = type(x)
    if t in _FAST or isinstance(x, (Tensor, SymInt)):
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (np.ndarray, list, tuple)):
        return tensor(x)
    raise TypeError(f"unsupported operand type {type(x).__name__}; expected a Tensor or a number")


def _shape_arg(shape) -> tuple:
    """Accept f(2, 3), f((2, 3)) and f([2, 3]); ints from 0-d tensors are read;
    symbolic sizes (while tracing) stay symbolic."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(s if isinstance(s, SymInt) else int(s) for s in shape)


# ---- elementwise ---------------------------------------------------------------------------
def add(input, other, *, alpha=1):
    """input + alpha * other, broadcasting; `tj.add(x, y)` or `x + y`."""
    if alpha != 1:
        other = mul(other, alpha)
    if isinstance(input, Tensor):
        return _binary_fast(OPS.add, input, _operand(other))
    return apply(OPS.add, _operand(input), _operand(other))


def sub(input, other, *, alpha=1):
    if alpha != 1:
        other = mul(other, alpha)
    return apply(OPS.sub, _operand(input), _operand(other))


def mul(input, other):
    if isinstance(input, Tensor):
        return _binary_fast(OPS.mul, input, _operand(other))
    return apply(OPS.mul, _operand(input), _operand(other))


def div(input, other, *, rounding_mode=None):
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        if _integral(input) and _integral(other):  # PyTorch keeps the integer dtype
            q = floor_divide(input, other)
            inexact = remainder(input, other) != 0
            return where(inexact & ((_operand(input) < 0) != (_operand(other) < 0)), q + 1, q)
        q = div(input, other)
        return where(q < 0, neg(floor(neg(q))), floor(q)) if q.is_floating_point() else q
    if rounding_mode is not None:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or "
                           f"'floor' but found '{rounding_mode}'")
    return apply(OPS.div, _operand(input), _operand(other))


def _integral(x) -> bool:
    """An integer tensor or a Python int (not a bool)."""
    if isinstance(x, Tensor):
        return x.dtype.category == 1
    return isinstance(x, (int, SymInt)) and not isinstance(x, bool)


def floor_divide(input, other):
    return apply(OPS.floor_divide, _operand(input), _operand(other))


def remainder(input, other):
    return apply(OPS.remainder, _operand(input), _operand(other))


def pow(input, exponent):
    """PyTorch's three overloads name three nodes: PowBackward0 (Tensor ** Scalar),
    PowBackward1 (Tensor ** Tensor), PowBackward2 (Scalar ** Tensor)."""
    exponent = _operand(exponent)
    if not isinstance(input, Tensor):
        return _node.rename(apply(OPS.pow, _operand(input), exponent), OPS.pow,
                            "PowBackward2", False)
    out = _binary_fast(OPS.pow, input, exponent)
    return _node.rename(out, OPS.pow, "PowBackward1") if isinstance(exponent, Tensor) else out


def maximum(input, other):
    return apply(OPS.maximum, input, _operand(other))


def minimum(input, other):
    return apply(OPS.minimum, input, _operand(other))


def where(condition, input=None, other=None):
    """Elements of input where condition holds, else of other (both broadcast)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    return apply(OPS.where, _operand(condition), _operand(input), _operand(other))


def clamp(input, min=None, max=None):
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_by_tensors(input, min, max)
    return apply(OPS.clamp, input, min=min, max=max)


def _clamp_by_tensors(input, min, max):
    """clamp with tensor bounds, with PyTorch's gradients: the input's where it lies
    within the bounds (both included), a bound's where it replaced the input; with
    min > max every element is max. A NaN bound gives NaN; a NaN input stays NaN, with no
    gradient."""
    out = where(isnan(input), detach(input), input) if input.is_floating_point() else input
    if min is not None:
        out = where((out < min) | (isnan(min) if isinstance(min, Tensor) else False), min, out)
    if max is not None:
        out = where((out > max) | (isnan(max) if isinstance(max, Tensor) else False), max, out)
    return out


def require_floating(name: str, input) -> None:
    """The error PyTorch gives an op that has no kernel for integers and bools."""
    if not input.is_floating_point():
        raise NotImplementedError(f"{name}: not implemented for {input.dtype.name} tensors; "
                                  f"convert the input to a floating-point dtype first")


def _lerp_operands(name: str, input, end, weight) -> tuple:
    """end and weight, checked as PyTorch checks them: of input's dtype (a 0-d weight
    may differ, as a number)."""
    require_floating(name, input)
    for what, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype is not input.dtype and (what == "end" or t.ndim):
            raise RuntimeError(f"expected dtype {input.dtype.name} for `{what}` but got dtype "
                               f"{t.dtype.name}")
    return _operand(end), _operand(weight)


def lerp(input, end, weight):
    """input + weight * (end - input), elementwise; `weight` a number or a tensor, all
    three broadcast.

    >>> tj.lerp(tj.zeros(3), tj.ones(3), 0.25)   # tensor([0.25, 0.25, 0.25])
    """
    out = apply(OPS.lerp, input, *_lerp_operands("lerp", input, end, weight))
    return _node.rename(out, OPS.lerp, "LerpBackward1") if isinstance(weight, Tensor) else out


def lerp_(self, end, weight):
    return apply_inplace(OPS.lerp, self, *_lerp_operands("lerp_", self, end, weight))


def leaky_relu(input, negative_slope: float = 0.01):
    """input where it is > 0, else input * negative_slope (nn.functional.leaky_relu)."""
    require_floating("leaky_relu", input)
    return apply(OPS.leaky_relu, input, negative_slope=negative_slope)


def leaky_relu_(input, negative_slope: float = 0.01):
    require_floating("leaky_relu_", input)
    return apply_inplace(OPS.leaky_relu, input, negative_slope=negative_slope)


def _unary(op):
    def fn(input):
        return _unary_fast(op, input)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"Elementwise {op.name} (op table entry `{op.name}`)."
    return fn


neg = _unary(OPS.neg)
abs = _unary(OPS.abs)
exp = _unary(OPS.exp)
log = _unary(OPS.log)
log1p = _unary(OPS.log1p)
sqrt = _unary(OPS.sqrt)
rsqrt = _unary(OPS.rsqrt)
sin = _unary(OPS.sin)
cos = _unary(OPS.cos)
tanh = _unary(OPS.tanh)
sigmoid = _unary(OPS.sigmoid)
relu = _unary(OPS.relu)
erf = _unary(OPS.erf)
sign = _unary(OPS.sign)
floor = _unary(OPS.floor)
logical_not = _unary(OPS.logical_not)
isnan = _unary(OPS.isnan)
isfinite = _unary(OPS.isfinite)
clone = _unary(OPS.clone)


def square(input):
    return mul(input, input)


def _binary(op):
    def fn(input, other):
        if isinstance(input, Tensor):
            return _binary_fast(op, input, _operand(other))
        return apply(op, _operand(input), _operand(other))
    fn.__name__ = fn.__qualname__ = op.name
    return fn


tanh_backward = _binary(OPS.tanh_backward)
binary_cross_entropy = _binary(OPS.binary_cross_entropy)  # elementwise, unreduced
sigmoid_backward = _binary(OPS.sigmoid_backward)
threshold_backward = _binary(OPS.threshold_backward)
lt, le, gt, ge, eq, ne = (_binary(OPS[n]) for n in ("lt", "le", "gt", "ge", "eq", "ne"))
logical_and, logical_or, logical_xor = (_binary(OPS[n]) for n in
                                        ("logical_and", "logical_or", "logical_xor"))
less, less_equal, greater, greater_equal, equal_elementwise, not_equal = lt, le, gt, ge, eq, ne


def cast(input, dtype) -> Tensor:
    """input converted to `dtype` (differentiable between floating dtypes)."""
    dtype = dt.as_dtype(dtype)
    if input.dtype is dtype:
        return input
    return apply(OPS.cast, input, dtype=dtype)


def equal(input, other) -> bool:
    """True if both tensors have the same shape and elements (a tensor read: guarded
    when tracing)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(all(eq(input, other)))


def allclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False) -> bool:
    return bool(all(isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def isclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False) -> Tensor:
    """|input - other| <= atol + rtol * |other|, elementwise (equal infinities are close;
    NaNs only with equal_nan), written in tracejit ops so that tracing records it."""
    other = _operand(other) if isinstance(other, Tensor) else other
    close = logical_or(eq(input, other), le(abs(sub(input, other)),
                                            add(mul(abs(other) if isinstance(other, Tensor)
                                                    else builtins.abs(other), rtol), atol)))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(input), isnan(other) if isinstance(
            other, Tensor) else math.isnan(other)))
    return close


# ---- reductions ----------------------------------------------------------------------------
_OVER_DIMS = {OPS.sum: "SumBackward1", OPS.mean: "MeanBackward1"}  # PyTorch's dim overloads


def _reduce(op, input, dim, keepdim):
    out = apply(op, input, dim=normalize_dims(dim, input.ndim, op.name), keepdim=keepdim)
    if dim is not None and op in _OVER_DIMS:
        _node.rename(out, op, _OVER_DIMS[op])
    return out


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim` (int, tuple or None for all); ints and bools sum to int64."""
    if dtype is not None:
        input = cast(input, dtype)
    return _reduce(OPS.sum, input, dim, keepdim)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = cast(input, dtype)
    if not input.is_floating_point():
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be a "
                           f"floating point dtype, got {input.dtype.name}")
    return _reduce(OPS.mean, input, dim, keepdim)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = cast(input, dtype)
    return _reduce(OPS.prod, input, dim, keepdim)


def amax(input, dim=None, keepdim=False):
    return _reduce(OPS.amax, input, dim, keepdim)


def amin(input, dim=None, keepdim=False):
    return _reduce(OPS.amin, input, dim, keepdim)


def argmax(input, dim=None, keepdim=False):
    return _reduce(OPS.argmax, input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _reduce(OPS.argmin, input, dim, keepdim)


def any(input, dim=None, keepdim=False):
    return _reduce(OPS.any, input, dim, keepdim)


def all(input, dim=None, keepdim=False):
    return _reduce(OPS.all, input, dim, keepdim)


MinMax = namedtuple("MinMax", ["values", "indices"])


def _picked(input, d, idx, keepdim):
    values = gather(input, d, idx)
    return values if keepdim else squeeze(values, d)


_max_values = composite("MaxBackward0", "input")(_picked)
_min_values = composite("MinBackward0", "input")(_picked)


def _extreme(reduce_op, arg_op, input, dim, keepdim, other):
    if isinstance(dim, Tensor) or other is not None:
        return (maximum if reduce_op is OPS.amax else minimum)(input, other if other is not None
                                                               else dim)
    if dim is None:  # PyTorch's max()/min() overload without dim
        return _node.rename(apply(reduce_op, input, dim=None, keepdim=False), reduce_op,
                            "MaxBackward1" if reduce_op is OPS.amax else "MinBackward1")
    d = normalize_dim(dim, input.ndim, reduce_op.name)
    if input.ndim == 0:
        return MinMax(input, _make(np.zeros((), np.int64)))
    idx = apply(arg_op, input, dim=(d,), keepdim=True)
    values = (_max_values if reduce_op is OPS.amax else _min_values)(input, d, idx, keepdim)
    if not keepdim:
        idx = squeeze(idx, d)
    return MinMax(values, idx)


def max(input, dim=None, keepdim=False, *, other=None):
    """max over all elements, or `(values, indices)` along `dim`, or max(a, b) elementwise."""
    return _extreme(OPS.amax, OPS.argmax, input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):
    return _extreme(OPS.amin, OPS.argmin, input, dim, keepdim, other)


def _count(input, dim) -> int:
    dims = normalize_dims(dim, input.ndim)
    n = 1
    for i, s in enumerate(input.shape):
        if dims is None or i in dims:
            n *= s
    return n


@composite("VarBackward0", "input")
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance with Bessel's correction by default (PyTorch's `correction=1`)."""
    if correction is None:
        correction = 0 if unbiased is False else 1
    centered = input - mean(input, dim, keepdim=True)
    return sum(centered * centered, dim, keepdim) / builtins.max(_count(input, dim) - correction,
                                                                  0)


@composite("StdBackward0", "input")
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return sqrt(var(input, dim, unbiased, keepdim, correction=correction))


@composite("LinalgVectorNormBackward0", "input", autocast="fp32 cuda")
def norm(input, p="fro", dim=None, keepdim=False):
    """Vector p-norm (2 by default) over `dim` or all elements."""
    if p in ("fro", 2, 2.0):
        return sqrt(sum(input * input, dim, keepdim))
    if p in (math.inf, float("inf")):
        return amax(abs(input), dim, keepdim)
    if p == 1:
        return sum(abs(input), dim, keepdim)
    return pow(sum(pow(abs(input), p), dim, keepdim), 1.0 / p)


@composite("LogsumexpBackward0", "input", autocast="fp32 cuda")
def logsumexp(input, dim, keepdim=False):
    m = amax(input, dim, keepdim=True).detach()
    m = where(isfinite(m), m, 0.0)
    out = log(sum(exp(input - m), dim, keepdim=True)) + m
    return out if keepdim else squeeze(out, dim)


@composite("SoftmaxBackward0", "input", autocast="fp32 cuda")
def softmax(input, dim, dtype=None):
    """exp(x) / sum(exp(x)) along `dim`, computed stably."""
    if dtype is not None:
        input = cast(input, dtype)
    e = exp(input - amax(input, dim, keepdim=True).detach())
    return e / sum(e, dim, keepdim=True)


@composite("LogSoftmaxBackward0", "input", autocast="fp32 cuda")
def log_softmax(input, dim, dtype=None):
    if dtype is not None:
        input = cast(input, dtype)
    shifted = input - amax(input, dim, keepdim=True).detach()
    return shifted - log(sum(exp(shifted), dim, keepdim=True))


# ---- shape ---------------------------------------------------------------------------------
def _infer_size(shape, numel):
    shape = list(shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        i = shape.index(-1)
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[i] = numel // known
    return tuple(shape)


def reshape(input, *shape):
    return apply(OPS.reshape, input, shape=_infer_size(_shape_arg(shape), input.numel()))


def view(input, *shape):
    if len(shape) == 1 and isinstance(shape[0], (dt.dtype, type, str, np.dtype)):
        return view_dtype(input, shape[0])  # (a numpy integer is a size, not a dtype)
    if not input._data.flags.c_contiguous and input.ndim > 1 and \
            not _viewable(input._data, shape):
        raise RuntimeError("view size is not compatible with input tensor's size and stride "
                           "(at least one dimension spans across two contiguous subspaces). "
                           "Use .reshape(...) instead.")
    return reshape(input, *shape)


def view_dtype(input, dtype):
    """The same memory read as `dtype` (a bitcast, not differentiable): between dtypes of
    one size the shape is kept, else the last dimension, which must be contiguous, is
    rescaled."""
    dtype = dt.as_dtype(dtype)
    if dtype is input.dtype:
        return input
    if dtype.itemsize != input.dtype.itemsize and input.ndim and input.shape[-1] != 1 and \
            input._data.strides[-1] != input.dtype.itemsize:
        raise RuntimeError(f"self.stride(-1) must be 1 to view {input.dtype.name} as "
                           f"{dtype.name} (different element sizes), but got "
                           f"{input._data.strides[-1] // input.dtype.itemsize}")
    return apply(OPS.view_dtype, detach(input), dtype=dtype)


def _viewable(array, shape) -> bool:
    """PyTorch's view rule on a strided array: the new shape can be read with strides
    alone (no copy), which is when numpy can set it in place."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        array.view().shape = tuple(d.hint if isinstance(d, SymInt) else int(d)
                                   for d in shape)
    except (AttributeError, ValueError, TypeError):
        return False
    return True


def view_as(input, other):
    return view(input, *other.shape)


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, 1)
    s = normalize_dim(start_dim, input.ndim)
    e = normalize_dim(end_dim, input.ndim)
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (-1,) + shape[e + 1:])


def unflatten(input, dim, sizes):
    d = normalize_dim(dim, input.ndim)
    shape = tuple(input.shape)
    return reshape(input, shape[:d] + tuple(sizes) + shape[d + 1:])


def permute(input, *dims):
    dims = tuple(normalize_dim(d, input.ndim, "permute") for d in _shape_arg(dims))
    return apply(OPS.permute, input, dims=dims)


def transpose(input, dim0, dim1):
    n = input.ndim
    d0, d1 = normalize_dim(dim0, n, "transpose"), normalize_dim(dim1, n, "transpose")
    if n < 2 and d0 == d1:
        return input
    if d0 > d1:  # one spelling per swap, so the simplifier sees transpose(transpose(x))
        d0, d1 = d1, d0
    return apply(OPS.transpose, input, dim0=d0, dim1=d1)


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input.ndim}D")
    if input.ndim < 2:
        return input
    return _node.rename(transpose(input, 0, 1), OPS.transpose, "TBackward0")


def unsqueeze(input, dim):
    return apply(OPS.unsqueeze, input, dim=normalize_dim(dim, input.ndim + 1, "unsqueeze"))


def squeeze(input, dim=None):
    shape = tuple(input.shape)
    if dim is None:
        dims = tuple(i for i, s in enumerate(shape) if s == 1)
    else:
        dims = tuple(d for d in normalize_dims(dim, input.ndim, "squeeze") or () if shape[d] == 1)
    if not dims:
        return apply(OPS.reshape, input, shape=shape)
    out = apply(OPS.squeeze, input, dims=dims)
    if dim is None:
        return out
    many = isinstance(dim, (tuple, list))
    return _node.rename(out, OPS.squeeze, "SqueezeBackward2" if many else "SqueezeBackward1")


def expand(input, *sizes):
    sizes = _shape_arg(sizes)
    lead = len(sizes) - input.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({input.ndim})")
    shape = tuple(input.shape)
    sizes = tuple(shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    return apply(OPS.expand, input, shape=sizes)


def expand_to(input, shape: tuple):
    """`expand` to a full target shape, without -1 handling (for gradient rules)."""
    if input.ndim == len(shape) and tuple(input.shape) == tuple(shape):  # ranks first
        return input
    return apply(OPS.expand, input, shape=shape)


def expand_as(input, other):
    return expand(input, tuple(other.shape))


def broadcast_to(input, shape):
    return expand(input, tuple(shape))


def sum_to(input, shape):
    """Sum a broadcast tensor back down to `shape` (used by gradients of broadcasting)."""
    shape = tuple(shape)
    if input.ndim == len(shape) and tuple(input.shape) == shape:  # ranks first (no guard)
        return input
    return apply(OPS.sum_to, input, shape=shape)


def sum_to_size(input, *size):
    return sum_to(input, _shape_arg(size))


def repeat(input, *repeats):
    """Tile like PyTorch's `repeat` (numpy's `tile`), through expand and reshape."""
    reps = _shape_arg(repeats)
    if len(reps) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    shape = (1,) * (len(reps) - input.ndim) + tuple(input.shape)
    x = reshape(input, tuple(v for s in shape for v in (1, s)))
    x = expand(x, tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return reshape(x, tuple(r * s for r, s in zip(reps, shape)))


def narrow(input, dim, start, length):
    d = normalize_dim(dim, input.ndim, "narrow")
    index = (slice(None),) * d + (slice(start, start + length),)
    return getitem_raw(input, index, ())


def _split_sizes(n, step) -> list:
    """The sizes of `split(step)` along a dim of size n: pieces of `step` and a shorter
    last one. Either may be a size while tracing: the number of pieces is then fixed by
    guarding the range of n it holds for (`(k-1)*step < n <= k*step`), and the sizes stay
    expressions, so the trace serves every n with as many pieces."""
    hn = n.hint if isinstance(n, SymInt) else n
    hstep = step.hint if isinstance(step, SymInt) else int(step)
    if hstep <= 0:
        raise RuntimeError(f"split expects split_size be non-negative and non-zero, "
                           f"but got split_size={hstep}")
    k = -(-hn // hstep)  # how many pieces, for the sizes seen
    if k == 0 and n == 0:  # an empty dim: one empty piece (the comparison is guarded)
        return [0]
    if not ((k - 1) * step < n and n <= k * step):  # records the guards; true as seen
        raise AssertionError("split: the number of pieces does not match the size")
    return [step] * (k - 1) + [n - (k - 1) * step]


def split(input, split_size_or_sections, dim=0):
    d = normalize_dim(dim, input.ndim, "split")
    n = input.shape[d]
    if isinstance(split_size_or_sections, (int, SymInt)):
        sizes = _split_sizes(n, split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got {sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(input, d, start, s))
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):
    n = input.shape[normalize_dim(dim, input.ndim, "chunk")]
    return split(input, builtins.max(1, -(-n // chunks)), dim)


def unbind(input, dim=0):
    d = normalize_dim(dim, input.ndim, "unbind")
    return tuple(getitem_raw(input, (slice(None),) * d + (i,), ()) for i in range(input.shape[d]))


def cat(tensors, dim=0):
    """Concatenate along an existing dim."""
    tensors = [_operand(t) for t in tensors]
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of Tensors")
    d = normalize_dim(dim, tensors[0].ndim, "cat")
    return apply(OPS.cat, *tensors, dim=d)


concat = cat


@composite("StackBackward0", "tensors")
def stack(tensors, dim=0):
    """Join tensors of equal shape along a new dim."""
    tensors = [_operand(t) for t in tensors]
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                           f"{[list(t.shape) for t in tensors]}")
    d = normalize_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([unsqueeze(t, d) for t in tensors], d)


def contiguous(input):
    """The tensor itself when its memory is C-contiguous, else a C-contiguous copy (a
    clone keeps the layout, as PyTorch's does)."""
    if input._data.flags.c_contiguous:
        return input
    return apply(OPS.clone, input, contiguous=True)


def flip(input, dims):
    dims = normalize_dims(dims, input.ndim, "flip") or ()
    return getitem_raw(input, tuple(slice(None, None, -1) if i in dims else slice(None)
                                    for i in range(input.ndim)), ())


def _triangle(name: str, input, diagonal: int, lower: bool):
    """input with the elements above (lower) or below (upper) the `diagonal`-th diagonal of
    its last two dimensions set to zero."""
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    rows, cols = (arange(n, device=input.device) for n in input.shape[-2:])
    offset = cols - unsqueeze(rows, 1)  # which diagonal each element is on
    keep = offset <= diagonal if lower else offset >= diagonal
    return where(keep, input, False if input.dtype is dt.bool_ else 0)


@composite("TrilBackward0", "input")
def tril(input, diagonal: int = 0):
    """The lower triangle of the last two dimensions (on and below the `diagonal`-th
    diagonal), the rest zero.

    >>> tj.tril(tj.ones(3, 3))      # causal attention masks
    """
    return _triangle("tril", input, diagonal, lower=True)


@composite("TriuBackward0", "input")
def triu(input, diagonal: int = 0):
    """The upper triangle of the last two dimensions (on and above the `diagonal`-th
    diagonal), the rest zero."""
    return _triangle("triu", input, diagonal, lower=False)


def tril_(self, diagonal: int = 0):
    return copy_(self, tril(self, diagonal))


def triu_(self, diagonal: int = 0):
    return copy_(self, triu(self, diagonal))


@composite("RollBackward0", "input")
def roll(input, shifts, dims=None):
    """Shift elements along `dims` by `shifts`, those pushed past the end coming back at
    the start; without dims, over the flattened tensor (its shape kept).

    >>> tj.roll(tj.arange(5), 2)    # tensor([3, 4, 0, 1, 2])
    """
    shifts = (shifts,) if isinstance(shifts, (int, SymInt)) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               f"dims:0")
        return reshape(roll(flatten(input), shifts, 0), tuple(input.shape))
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    if input.ndim == 0:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    out = input
    for shift, dim in zip(shifts, dims):
        d = normalize_dim(dim, input.ndim, "roll")
        n = input.shape[d]
        shift = shift % n if n else 0
        if shift:
            out = cat([narrow(out, d, n - shift, shift), narrow(out, d, 0, n - shift)], d)
    return clone(out) if out is input else out


def movedim(input, source, destination):
    """The dims `source` moved to the places `destination` names, the others keeping
    their order (a permute)."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    n = input.ndim
    src = [normalize_dim(d, n, "movedim") for d in src]
    dst = [normalize_dim(d, n, "movedim") for d in dst]
    for what, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) < len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{what}` ({dims})")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return permute(input, *order) if n else input


moveaxis = movedim


def unfold(input, dimension, size, step):
    """Tensor.unfold: every window of `size` elements along `dimension`, `step` apart,
    as a new last dim (the dim itself counts the windows).

    >>> tj.arange(5).unfold(0, 2, 2)    # tensor([[0, 1], [2, 3]])
    """
    d = normalize_dim(dimension, builtins.max(input.ndim, 1), "unfold")
    length = input.shape[d] if input.ndim else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if input.ndim == 0:
        return reshape(input, 1)
    count = (int(length) - size) // step + 1
    starts = np.arange(count, dtype=np.int64) * step
    index = _make((starts[:, None] + np.arange(size, dtype=np.int64)).reshape(-1))
    if input.is_cuda:
        index = index.to(input.device)
    shape = tuple(input.shape)
    windows = reshape(index_select(input, d, index), shape[:d] + (count, size) + shape[d + 1:])
    return movedim(windows, d + 1, -1)


# ---- matmul --------------------------------------------------------------------------------
def matmul(input, other):
    """Matrix product with numpy's 1-D and batch-broadcasting rules."""
    other = _operand(other)
    out = apply(OPS.matmul, input, other)
    if input.ndim == 1 and other.ndim == 1:
        return _node.rename(out, OPS.matmul, "DotBackward0")
    if input.ndim == 2 and other.ndim == 1:
        return _node.rename(out, OPS.matmul, "MvBackward0")
    return out


def unfold2d(input, kernel, stride, padding, dilation, value=0.0, ceil_mode=False):
    """Every kernel window of the padded [N, C, H, W] input: [N, C, KH, KW, OH, OW]
    (`ceil_mode`: with the pools' last partial windows, which read `value` past the
    input)."""
    if ceil_mode:
        return apply(OPS.unfold2d, input, kernel=tuple(kernel), stride=tuple(stride),
                     padding=tuple(padding), dilation=tuple(dilation), value=float(value),
                     ceil_mode=True)
    return apply(OPS.unfold2d, input, kernel=tuple(kernel), stride=tuple(stride),
                 padding=tuple(padding), dilation=tuple(dilation), value=float(value))


def rnn_scan(xg, h0, c0, w_hh, b_hh, mode):
    """One recurrent layer's steps over the projected input xg [T, B, G*H] (ops/recurrent.py):
    the history [T+1, B, W], row 0 the initial state, each row [h | c | gates...]."""
    return apply(OPS.rnn_scan, xg, h0, c0, w_hh, b_hh, mode=mode)


def fold2d(windows, shape, kernel, stride, padding, dilation, ceil_mode=False):
    """Sum windows [N, C, KH, KW, OH, OW] back into an [N, C, H, W] tensor (unfold2d's
    adjoint)."""
    if ceil_mode:
        return apply(OPS.fold2d, windows, shape=tuple(shape), kernel=tuple(kernel),
                     stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation),
                     ceil_mode=True)
    return apply(OPS.fold2d, windows, shape=tuple(shape), kernel=tuple(kernel),
                 stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation))


@composite("AddmmBackward0", "input", "mat1", "mat2", autocast="low")
def _addmm(input, mat1, mat2):
    return matmul(mat1, mat2) + input


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), for 2-D mat1 and mat2."""
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"addmm: expected 2-D matrices, got shapes {list(mat1.shape)} and "
                           f"{list(mat2.shape)}")
    if beta == 1 and alpha == 1:
        return _addmm(input, mat1, mat2)
    prod = matmul(mat1, mat2)
    return (prod if alpha == 1 else prod * alpha) + (input if beta == 1 else input * beta)


def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {list(input.shape)} and "
                           f"{list(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: expected 3-D tensors with equal batch size, got shapes "
                           f"{list(input.shape)} and {list(mat2.shape)}")
    return matmul(input, mat2)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError("1D tensors expected, but got {}D and {}D tensors".format(
            input.ndim, other.ndim))
    return matmul(input, other)


def outer(input, vec2):
    return mul(unsqueeze(input, 1), unsqueeze(vec2, 0))


# ---- indexing ------------------------------------------------------------------------------
def _index_template(index) -> tuple[tuple, tuple]:
    """Split a Python index into a template with Slots and the tensors that fill them."""
    if not isinstance(index, tuple):
        index = (index,)
    template, tensors = [], []
    for i in index:
        if i is None or i is Ellipsis or type(i) is int or type(i) is bool or \
                isinstance(i, SymInt):
            template.append(i)
        elif isinstance(i, slice):
            template.append(slice(*(v if v is None or isinstance(v, SymInt) else int(v)
                                    for v in (i.start, i.stop, i.step))))
        elif isinstance(i, Tensor) and i.ndim == 0 and i.dtype.category == 1:
            template.append(int(i))
        else:
            if not isinstance(i, Tensor):
                i = _operand(i if not isinstance(i, np.integer) else int(i))
                if not isinstance(i, Tensor):
                    template.append(i)
                    continue
            if i.dtype.category == 2:
                raise IndexError("tensors used as indices must be long, int or bool tensors")
            if i.dtype.category == 0:  # a bool mask selects its nonzero positions
                positions = nonzero(i)
                for k in range(i.ndim):
                    template.append(Slot(len(tensors)))
                    tensors.append(getitem_raw(positions, (slice(None), k), ()))
                continue
            template.append(Slot(len(tensors)))
            tensors.append(i)
    return tuple(template), tuple(tensors)


def getitem(input, index):
    """`x[index]`: ints, slices, None, Ellipsis, bool masks and integer tensors."""
    template, tensors = _index_template(index)
    out = apply(OPS.getitem, input, *tensors, index=template)
    if not tensors and out.grad_fn is not None:
        # PyTorch names the node by its last int or slice (one node per dim there)
        for part in reversed(index if type(index) is tuple else (index,)):
            if type(part) is int or type(part) is slice:
                if part != _ALL:
                    _node.rename(out, OPS.getitem, "SelectBackward0" if type(part) is int
                                 else "SliceBackward0")
                    break
    return out


_ALL = slice(None)


def getitem_raw(input, template, tensors):
    return apply(OPS.getitem, input, *tensors, index=template)


def setitem(input, index, value) -> None:
    """`x[index] = value`, in place (autograd sees a new version of x)."""
    template, tensors = _index_template(index)
    apply_inplace(OPS.setitem, input, _operand(value), *tensors, index=template)


def setitem_raw(input, value, template, tensors):
    """Out-of-place setitem (input with `value` written at the index)."""
    return apply(OPS.setitem, input, _operand(value), *tensors, index=template)


def index_scatter(grad, shape, template, tensors):
    return apply(OPS.index_scatter, grad, *tensors, shape=tuple(shape), index=template)


def gather(input, dim, index):
    """Values of `input` along `dim` at `index` (PyTorch's argument order)."""
    return apply(OPS.gather, input, index, dim=normalize_dim(dim, input.ndim, "gather"))


def scatter_add_raw(src, index, dim, shape):
    """Zeros of `shape` with `src` added at `index` along `dim` (gather's transpose)."""
    return apply(OPS.scatter_add, src, index, dim=dim, shape=tuple(shape))


def index_select(input, dim, index):
    d = normalize_dim(dim, input.ndim, "index_select")
    return getitem_raw(input, (slice(None),) * d + (Slot(0),), (index,))


def masked_fill(input, mask, value):
    """`input` with `value` where `mask` is true; the result keeps input's dtype (as
    PyTorch's: the value is cast, a float into an integer tensor truncated)."""
    d = input.dtype
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, "
                               f"but got tensor with {value.ndim} dimension(s).")
        if value.dtype is not d:
            value = value.to(d)
    elif isinstance(value, complex):  # (tracejit has no complex dtypes)
        raise RuntimeError(f"value cannot be converted to type {d.name} without overflow")
    elif d.category < 2 and not isinstance(value, bool if d.category == 0 else (int, SymInt)):
        # (a size a trace keeps symbolic stays so: an integer already)
        try:
            value = bool(value) if d.category == 0 else int(value)
        except (ValueError, OverflowError, TypeError):
            raise RuntimeError(f"value cannot be converted to type {d.name} without "
                               "overflow") from None
    return where(mask, value, input)


def nonzero(input, *, as_tuple=False):
    """Indices of nonzero elements, [count, ndim] (a tuple of columns with as_tuple)."""
    out = apply(OPS.nonzero, input)
    if as_tuple:
        return tuple(getitem_raw(out, (slice(None), k), ()) for k in range(input.ndim))
    return out


# ---- conversion ----------------------------------------------------------------------------
def to(input, *args, **kwargs):
    """`x.to(dtype)`, `x.to("cuda")`, `x.to(device, dtype)`, `x.to(other_tensor)`."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda") or \
                type(a).__name__ == "device":
            device = a
        else:
            dtype = a
    out = input if dtype is None else cast(input, dtype)
    if device is not None:
        check_device(device)
        out = to_device(out, str(device).split(":")[0])
    return out


def to_device(input, kind: str):
    """A copy of `input` on the device `kind` ("cpu" or "cuda"), or `input` if it is
    there; gradients flow back to the source device."""
    if input.device.type == kind:
        return input
    if STATE.capture is not None:
        STATE.capture.unsupported(f"moving a tensor to {kind}")
    return _to_copy().apply(input, kind)


_TO_COPY: list = []


def _to_copy():
    """The autograd Function of a move between devices (made once, on first use)."""
    if not _TO_COPY:
        class ToCopy(Function):
            @staticmethod
            def forward(ctx, x, kind):
                ctx.source = x.device.type
                data = memory.to_device(x._data) if kind == "cuda" else \
                    memory.to_host(x._data)
                return Tensor._make(data)

            @staticmethod
            def backward(ctx, g):
                return to_device(g, ctx.source), None
        _TO_COPY.append(ToCopy)
    return _TO_COPY[0]


def cuda(input, device=None):
    return to(input, "cuda")


def cpu(input):
    return to(input, "cpu")


def detach(input):
    return input.detach()


# ---- in-place ------------------------------------------------------------------------------
def _inplace(op):
    def fn(self, *args, **kwargs):
        return apply_inplace(op, self, *(_operand(a) for a in args), **kwargs)
    fn.__name__ = op.name + "_"
    return fn


def inplace_of(fn):
    """The in-place form of a composite `fn` (`x.fn_(...)`): its result written into the
    tensor, which autograd sees as one `copy_`."""
    def method(self, *args, **kwargs):
        return copy_(self, fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    method.__doc__ = f"In-place `{fn.__name__}`."
    return method


def add_(self, other, *, alpha=1):
    return apply_inplace(OPS.add, self, _operand(other if alpha == 1 else other * alpha))


def sub_(self, other, *, alpha=1):
    return apply_inplace(OPS.sub, self, _operand(other if alpha == 1 else other * alpha))


def zero_(self):
    return apply_inplace(OPS.mul, self, 0)


def fill_(self, value):
    return apply_inplace(OPS.setitem, self, _operand(value), index=(Ellipsis,))


def copy_(self, src):
    return apply_inplace(OPS.setitem, self, _operand(src), index=(Ellipsis,))


def clamp_(self, min=None, max=None):
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return copy_(self, clamp(self, min, max))
    return apply_inplace(OPS.clamp, self, min=min, max=max)


# ---- Tensor methods ------------------------------------------------------------------------
def _install_methods():
    T = Tensor
    for name in ("add sub mul div floor_divide remainder pow maximum minimum clamp neg abs exp "
                 "log log1p sqrt rsqrt sin cos tanh sigmoid relu erf sign floor logical_not "
                 "isnan isfinite clone square lt le gt ge eq ne logical_and logical_or "
                 "logical_xor sum mean prod amax amin argmax argmin any all max min var std "
                 "norm logsumexp softmax log_softmax reshape view flatten unflatten permute "
                 "transpose t unsqueeze squeeze expand expand_as broadcast_to sum_to_size repeat "
                 "narrow split chunk unbind contiguous flip matmul mm bmm dot outer gather "
                 "index_select masked_fill nonzero to cuda cpu add_ sub_ zero_ fill_ copy_ "
                 "clamp_ lerp lerp_ view_as tril triu tril_ triu_ roll movedim moveaxis unfold"
                 ).split():
        setattr(T, name, globals()[name])
    T.clip, T.clip_, T.absolute, T.multiply, T.divide, T.true_divide, T.subtract = (
        clamp, clamp_, abs, mul, div, div, sub)
    T.greater, T.less, T.greater_equal, T.less_equal, T.not_equal = gt, lt, ge, le, ne
    T.where = lambda self, condition, other: where(condition, self, other)
    T.type_as = lambda self, other: cast(self, other.dtype)
    T.float = lambda self: cast(self, dt.float32)
    T.double = lambda self: cast(self, dt.float64)
    T.half = lambda self: cast(self, dt.float16)
    T.bfloat16 = lambda self: cast(self, dt.bfloat16_dtype())
    T.long = lambda self: cast(self, dt.int64)
    T.int = lambda self: cast(self, dt.int32)
    T.bool = lambda self: cast(self, dt.bool_)
    for name in ("mul div neg exp log sqrt tanh sigmoid relu pow abs floor sin cos "
                 "log1p rsqrt sign").split():
        setattr(T, name + "_", _inplace(OPS[name]))
    T.__getitem__ = getitem
    T.__setitem__ = setitem

    def binary(op, reflected=False):
        if reflected and op is OPS.sub:  # PyTorch's rsub(Tensor, Scalar)
            def method(self, other):
                out = apply(op, other if type(other) in _FAST else _operand(other), self)
                return _node.rename(out, op, "RsubBackward1", False)
        elif reflected and op is OPS.pow:
            def method(self, other):
                return pow(other if type(other) in _FAST else _operand(other), self)
        elif reflected and op in (OPS.add, OPS.mul):  # commutative: x op 2, as PyTorch calls it
            def method(self, other):
                return _binary_fast(op, self, other if type(other) in _FAST else _operand(other))
        elif reflected:
            def method(self, other):
                return apply(op, other if type(other) in _FAST else _operand(other), self)
        else:
            def method(self, other):
                return _binary_fast(op, self, other if type(other) in _FAST else _operand(other))
        return method

    for name, op in (("add", OPS.add), ("sub", OPS.sub), ("mul", OPS.mul),
                     ("truediv", OPS.div), ("floordiv", OPS.floor_divide),
                     ("mod", OPS.remainder)):  # (& | ^ ~ << >>: tensor/elementwise.py)
        setattr(T, f"__{name}__", binary(op))
        setattr(T, f"__r{name}__", binary(op, reflected=True))
        setattr(T, f"__i{name}__", _inplace(op))
    for name in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(T, f"__{name}__", binary(OPS[name]))
    T.__pow__, T.__rpow__, T.__ipow__ = pow, binary(OPS.pow, True), _inplace(OPS.pow)
    T.__matmul__ = matmul
    T.__rmatmul__ = lambda self, other: matmul(_operand(other), self)
    T.__neg__ = neg
    T.__pos__ = lambda self: self
    T.__abs__ = abs


def _install_table_api() -> list:
    """The functions, methods and in-place methods the op table asks for (`OpDef.api`);
    returns the names of the functions made, for `tracejit`'s namespace."""
    made = []
    for op in OPS:
        if not op.api:
            continue
        if "function" in op.api and op.name not in globals():
            globals()[op.name] = (_unary if op.arity == 1 else _binary)(op)
            made.append(op.name)
        if "method" in op.api and not hasattr(Tensor, op.name):
            setattr(Tensor, op.name, globals()[op.name])
        if "inplace" in op.api and not hasattr(Tensor, op.name + "_"):
            setattr(Tensor, op.name + "_", _inplace(op))
    return made


_install_methods()
TABLE_FUNCTIONS = _install_table_api()
bind_frontend(sys.modules[__name__])
_node._F, _node._make, _node.FreshTensor = sys.modules[__name__], _make, FreshTensor

# sorting, scans, scatters and contractions are built on the functions above; the op table's
# rules reach the scans and scatters through this module too
from . import contraction as _contraction, ordering as _ordering  # noqa: E402
# (these modules import this one: the functions above are defined by now)
from ..backends.cuda import memory  # noqa: E402
from .creation import arange, check_device, tensor  # noqa: E402
from .function import Function  # noqa: E402

globals().update({n: getattr(_ordering, n) for n in _ordering.__all__ + _ordering.RULES})
globals().update({n: getattr(_contraction, n) for n in _contraction.__all__})
