"""Eager ops on CUDA tensors: the device step of eager dispatch (dispatch.py).

An elementwise op runs as a kernel: the one-op region of the op table's entry, planned
and rendered for CUDA like a fused region; a 2-D float matmul runs the tiled kernel;
reductions over the last dimension or everything run as row kernels; expand, gather,
scatter_add and sum_to as strided kernels (backends/cuda/indexing.py). Every other op copies its
operands to the host, runs its numpy implementation and copies the result back:
correct, slow, and counted (`tj.cuda.stats()["host_round_trips"]`).

Views of CUDA tensors (reshape, slicing, transpose, ...) are copies so far. Without
in-place updates a copy cannot be told from a view, so an in-place op on a CUDA tensor
that is such a copy, or whose copy is still alive, raises instead of updating one and
not the other (an optimiser's update after backward() is fine: the transposed weights
the forward made are gone by then).
"""
from __future__ import annotations

import weakref
from collections import Counter

import numpy as np

from ..core import dtypes
from ..backends.cuda import memory
from ..codegen.plan import Unsupported, one_op_region, plan_elementwise
from ..core.float_errors import quiet, restore
from ..core.lazy import lazy
from ..ops import OPS
from ..ops.registry import COMPARE, ELEMENTWISE, REDUCE
from ..ops.rules import aval_of
from ..ops.scalar import MAX, MEAN, MIN, SUM
from . import dispatch as _dispatch  # (it imports this module: read at call time)
from .tensor import Tensor, _make

# the device's kernels (they import numba-cuda: loaded with the first device tensor's op)
cuda_kernels = lazy("tracejit.backends.cuda.kernels")
indexing = lazy("tracejit.backends.cuda.indexing")

STATS = {"kernels": Counter(), "host": Counter()}
_KERNELS: dict = {}
class _Views:
    """The copies standing for views of CUDA tensors, and their bases, by identity and
    held weakly (a WeakSet would compare tensors with `==`, which is elementwise)."""

    def __init__(self):
        self._copies: dict = {}  # id(copy) -> (weakref to the copy, id of its root base)
        self._bases: dict = {}   # id(root base) -> {id(copy)}

    def add(self, copy, base) -> None:
        root = self._copies.get(id(base), (None, id(base)))[1]
        key = id(copy)

        def gone(_, key=key, root=root):
            self._copies.pop(key, None)
            self._bases.get(root, set()).discard(key)
        self._copies[key] = (weakref.ref(copy, gone), root)
        self._bases.setdefault(root, set()).add(key)

    def is_copy(self, t) -> bool:
        entry = self._copies.get(id(t))
        return entry is not None and entry[0]() is t

    def has_live_copies(self, t) -> bool:
        return any(self._copies.get(k, (lambda: None, None))[0]() is not None
                   for k in self._bases.get(id(t), ()))


VIEWS = _Views()  # views of CUDA tensors are copies so far: see the module docstring


def _tensors(args):

    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _tensors(a)


def on_device(args) -> bool:
    return any(memory.is_device_array(t._data) for t in _tensors(args))


def check_same_device(op, args) -> None:
    devices = {str(t.device) for t in _tensors(args) if not (t.device.type == "cpu" and
                                                             t._data.ndim == 0)}
    if len(devices) > 1:
        a, b = sorted(devices, reverse=True)[:2]
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                           f"least two devices, {a} and {b}! (in {op.name})")


def _host(x):

    if isinstance(x, Tensor):
        return _make(memory.to_host(x._data)) if memory.is_device_array(x._data) else x
    if isinstance(x, (list, tuple)):
        return type(x)(_host(v) for v in x)
    return x


def _kernel_operands(op, args, out_dtype):
    """The operands for a one-op kernel, or None when the op needs the host: mixed
    dtypes (numpy's promotion rounds where a kernel would not), or a Python number next
    to a tensor of another dtype than the result's."""

    values = args[1:] if op.dtype_rule == "where" else args  # where's condition: bool
    if op.dtype_rule == "where" and not (isinstance(args[0], Tensor) and
                                         args[0].dtype.name == "bool"):
        return None
    dtypes = {a.dtype for a in values if isinstance(a, Tensor)}
    if len(dtypes) != 1:
        return None
    dtype = dtypes.pop()
    scalars = [a for a in values if not isinstance(a, Tensor)]
    numbers = all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scalars)
    if op.dtype_rule == COMPARE:  # a comparison: a number of the tensor's kind is exact
        fits = numbers and (dtype.category == 2 or all(type(s) is int for s in scalars))
    else:
        fits = numbers and dtype is out_dtype and (  # an int next to an int tensor: exact
            dtype.category == 2 or (dtype.category == 1 and all(
                type(s) is int and np.iinfo(dtype.np).min <= s <= np.iinfo(dtype.np).max
                for s in scalars)))
    if scalars and not fits:
        return None
    operands = []
    for a in args:
        if isinstance(a, Tensor):
            if a.device.type == "cpu":  # a 0-d CPU tensor next to CUDA ones
                return None
            operands.append(a._data)
        else:
            operands.append(a)
    return operands


def compute(op, args, attrs):
    """The device array of `op` on arguments some of which are CUDA tensors."""
    check_same_device(op, args)
    if op.kind is ELEMENTWISE and op.expr is not None and (
            callable(op.expr) or not (set(attrs) - {"dtype"})):
        try:
            region = one_op_region(op, [a._data if isinstance(a, Tensor) else a
                                        for a in args], attrs)
            out_dtype = region.outputs[0].dtype
            operands = _kernel_operands(op, args, out_dtype)
            if operands is not None:
                kernel = _kernel(region)
                out_shape = tuple(region.outputs[0].shape)
                shape = np.broadcast_shapes(out_shape, *[tuple(o.shape) for o in operands
                                                         if hasattr(o, "shape")])
                arrays = [o for o in operands if hasattr(o, "shape")]
                STATS["kernels"][op.name] += 1
                return kernel.run(arrays, [], [out_shape], shape)[0]
        except Unsupported:
            pass
    if op.kind is REDUCE and op.monoid in (SUM, MEAN, MAX, MIN) and "dim" in attrs and \
            isinstance(args[0], Tensor) and args[0].dtype.name in ("float32", "float64"):
        out = _device_reduce(op, args[0], attrs)
        if out is not None:
            return out
    if op in _ANY_ALL and isinstance(args[0], Tensor):
        out = _device_any_all(op, args[0], attrs)
        if out is not None:
            return out
    if op is OPS.sum_to and isinstance(args[0], Tensor):
        out = _device_column_sum(op, args[0], attrs)
        if out is not None:
            return out
    if op in _INDEX_OPS and all(isinstance(a, Tensor) and memory.is_device_array(a._data)
                                for a in args):
        out = getattr(indexing, _INDEX_OPS[op])(*[a._data for a in args], **attrs)
        if out is not None:
            STATS["kernels"][op.name] += 1
            return out
    if op in _DEVICE_VIEWS and isinstance(args[0], Tensor):
        out = _device_view(op, args, attrs)
        if out is not None:
            return out
    if op is OPS.matmul:
        a, b = args
        if a._data.ndim == 2 and b._data.ndim == 2 and a.dtype is b.dtype and \
                a.dtype.name in ("float32", "float64"):
            STATS["kernels"]["matmul"] += 1
            return cuda_kernels.matmul(a._data, b._data)
    return _round_trip(op, args, attrs)


# shape ops a device array does itself: reshapes of contiguous arrays, 2-D transposes
_DEVICE_VIEWS = frozenset({OPS.reshape, OPS.squeeze, OPS.unsqueeze, OPS.detach,
                           OPS.transpose, OPS.permute})
_ANY_ALL = frozenset({OPS.any, OPS.all})
# broadcasting and index ops as kernels over strided memory (backends/cuda/indexing.py)
_INDEX_OPS = {OPS.expand: "expand", OPS.gather: "gather", OPS.scatter_add: "scatter_add",
              OPS.sum_to: "sum_to", OPS.getitem: "getitem", OPS.index_scatter: "index_scatter",
              OPS.cat: "cat"}


def _device_view(op, args, attrs):
    """The op on the device array itself (no copy through the host), or None."""

    a = args[0]._data
    shape = tuple(op.infer(*[aval_of(x) for x in args], **attrs).shape)
    if op is OPS.transpose or op is OPS.permute:
        if a.ndim != 2:
            return None  # Numba's device arrays transpose two dimensions only
        # (by the dims, not the shapes: a square matrix's transpose has its shape)
        swap = attrs["dim0"] % 2 != attrs["dim1"] % 2 if op is OPS.transpose else \
            tuple(d % 2 for d in attrs["dims"]) == (1, 0)
        STATS["kernels"][op.name] += 1
        return a.T if swap else a
    if not a.is_c_contiguous():
        return None
    STATS["kernels"][op.name] += 1
    return a if shape == tuple(a.shape) else a.reshape(shape)


def _device_reduce(op, x, attrs):
    """A sum, mean, max or min over the last dimension or over everything as a one-op
    row kernel (one block per row, a tree reduction), or None (other dims: the host)."""
    a = x._data
    dims = attrs.get("dim")  # (keepdim only changes the shape, from the shape rule)
    if a.size == 0 or not a.is_c_contiguous():
        return None
    if a.ndim == 0:
        rows = a.reshape(1, 1)
    elif dims is None or tuple(sorted(dims)) == tuple(range(a.ndim)):
        rows = a.reshape(1, a.size)
    elif tuple(dims) == (a.ndim - 1,):
        n = tuple(a.shape)[-1]
        rows = a.reshape(a.size // n, n)
    else:
        return None
    shape = tuple(op.infer(aval_of(x), **attrs).shape)
    region = one_op_region(op, [rows], {"dim": (1,), "keepdim": True})
    try:
        kernel = cuda_kernels.CudaRowKernel(region)  # (its module is cached by source)
        out = kernel.run([rows], [], tuple(rows.shape))[0]
    except Unsupported:
        return None
    STATS["kernels"][op.name] += 1
    try:
        return out.reshape(shape)
    except Exception:  # noqa: BLE001 — a device array that cannot be 0-d: one scalar copy
        return memory.to_device(out.copy_to_host().reshape(shape))


def _device_any_all(op, x, attrs):
    """any/all as kernels: x != 0 as float32, its max (any) or min (all), > 0.5."""

    nonzero = compute(OPS.ne, (x, 0), {})
    as_float = compute(OPS.cast, (_make(nonzero),), {"dtype": dtypes.float32})
    extreme = _device_reduce(OPS.amax if op is OPS.any else OPS.amin, _make(as_float),
                             attrs)
    if extreme is None:
        return None
    return compute(OPS.gt, (_make(extreme), 0.5), {})


def _device_column_sum(op, x, attrs):
    """`sum_to` [..., N] -> [N] (a bias's gradient) as a row kernel's sum over rows, or
    None (other targets: the host)."""
    a = x._data
    shape = tuple(a.shape)
    target = tuple(attrs["shape"])
    if a.ndim < 2 or len(target) != 1 or target[0] != shape[-1] or shape[-1] == 1 or \
            a.size == 0 or not a.is_c_contiguous() or x.dtype.name not in ("float32",
                                                                            "float64"):
        return None
    rows = a.reshape(a.size // shape[-1], shape[-1])
    try:
        kernel = cuda_kernels.CudaRowKernel(one_op_region(op, [rows], {"shape": target}))
        out = kernel.run([rows], [], tuple(rows.shape))[0]
    except Unsupported:
        return None
    STATS["kernels"][op.name] += 1
    return out


def _kernel(region):
    key = cuda_kernels.render_elementwise(plan_elementwise(region))
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = cuda_kernels.CudaRegionKernel(region)
    return kernel


def _round_trip(op, args, attrs):

    STATS["host"][op.name] += 1
    host = _host(list(args))
    token = quiet()  # inf and nan are results, as on the device (core/float_errors.py)
    try:
        out = np.asarray(op.impl(*_dispatch._arrays(op, host, attrs), **attrs))
    finally:
        restore(token)
    return memory.to_device(out)


def inplace_check(target) -> None:
    """An in-place update is refused on a copy standing for a view, and on a tensor such
    a copy of which is still alive: the two would disagree after it."""
    if VIEWS.is_copy(target) or VIEWS.has_live_copies(target):
        raise NotImplementedError(
            "an in-place update of a CUDA tensor that has views, or is one, is not supported "
            "yet: views of CUDA tensors are copies so far, and one of them would not see "
            "the update (use the out-of-place op)")
