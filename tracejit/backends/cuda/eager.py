"""Ops on device arrays, one at a time: what eager dispatch (tensor/device.py) and a CUDA
host program (host.py) call for an op that is not part of a fused region.

An elementwise op runs as a kernel: the one-op region of the op table's entry, planned
and rendered for CUDA like a fused region; a 2-D float matmul runs the tiled kernel;
reductions over the last dimension or everything run as row kernels; expand, gather,
scatter_add, sum_to, getitem, index_scatter and cat as strided kernels (indexing.py).
Every other op copies its operands to the host, runs its numpy implementation and copies
the result back: correct, slow, and counted (`tj.cuda.stats()["host_round_trips"]`).

Operands are device arrays, numpy arrays (a 0-d CPU tensor's, next to device ones) and
Python numbers; the result is a device array.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ...codegen.plan import Unsupported, one_op_region, plan_elementwise
from ...core import dtypes
from ...core.float_errors import quiet, restore
from ...core.lazy import lazy
from ...ops import OPS
from ...ops.registry import COMPARE, ELEMENTWISE, REDUCE, AVal
from ...ops.rules import aval_of, compute_dtype
from ...ops.scalar import MAX, MEAN, MIN, SUM
from . import memory

# the device's kernels (they import numba-cuda: loaded with the first device op)
cuda_kernels = lazy("tracejit.backends.cuda.kernels")
indexing = lazy("tracejit.backends.cuda.indexing")

STATS = {"kernels": Counter(), "host": Counter()}
_KERNELS: dict = {}


def is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, np.generic)


def _dtype(a) -> dtypes.dtype:
    return dtypes.from_numpy_dtype(a.dtype)


def _aval(x) -> AVal:
    return AVal(tuple(x.shape), _dtype(x)) if is_array(x) else aval_of(x)


def compute(op, args, attrs):
    """The device array of `op` on `args` (some of them device arrays)."""
    if op.kind is ELEMENTWISE and op.expr is not None and (
            callable(op.expr) or not (set(attrs) - {"dtype"})):
        try:
            region = one_op_region(op, list(args), attrs)
            out_dtype = region.outputs[0].dtype
            operands = _kernel_operands(op, args, out_dtype)
            if operands is not None:
                kernel = _kernel(region)
                out_shape = tuple(region.outputs[0].shape)
                arrays = [o for o in operands if is_array(o)]
                shape = np.broadcast_shapes(out_shape, *[tuple(o.shape) for o in arrays])
                STATS["kernels"][op.name] += 1
                return kernel.run(arrays, [], [out_shape], shape)[0]
        except Unsupported:
            pass
    first = args[0] if args else None
    on_device = first is not None and memory.is_device_array(first)
    if op.kind is REDUCE and op.monoid in (SUM, MEAN, MAX, MIN) and "dim" in attrs and \
            on_device and first.dtype.name in ("float16", "float32", "float64"):
        out = _reduce(op, first, attrs)
        if out is not None:
            return out
    if (op is OPS.any or op is OPS.all) and on_device:
        out = _any_all(op, first, attrs)
        if out is not None:
            return out
    if op is OPS.sum_to and on_device:
        out = _column_sum(op, first, attrs)
        if out is not None:
            return out
    if op in _INDEX_OPS and all(memory.is_device_array(a) for a in args):
        out = getattr(indexing, _INDEX_OPS[op])(*args, **attrs)
        if out is not None:
            STATS["kernels"][op.name] += 1
            return out
    if op in _DEVICE_VIEWS and on_device:
        out = _view(op, args, attrs)
        if out is not None:
            return out
    if op is OPS.matmul:
        a, b = args
        if memory.is_device_array(a) and memory.is_device_array(b) and a.ndim == 2 and \
                b.ndim == 2 and a.dtype == b.dtype and a.dtype.name in ("float16", "float32",
                                                                        "float64"):
            STATS["kernels"]["matmul"] += 1
            return cuda_kernels.matmul(a, b)
    return round_trip(op, args, attrs)


def _kernel_operands(op, args, out_dtype):
    """The operands for a one-op kernel, or None when the op needs the host: mixed
    dtypes (numpy's promotion rounds where a kernel would not), or a Python number next
    to an array of another dtype than the result's."""
    values = args[1:] if op.dtype_rule == "where" else args  # where's condition: bool
    if op.dtype_rule == "where" and not (is_array(args[0]) and args[0].dtype == np.bool_):
        return None
    kinds = {_dtype(a) for a in values if is_array(a)}
    if len(kinds) != 1:
        return None
    dtype = kinds.pop()
    scalars = [a for a in values if not is_array(a)]
    numbers = all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scalars)
    if op.dtype_rule == COMPARE:  # a comparison: a number of the array's kind is exact
        fits = numbers and (dtype.category == 2 or all(type(s) is int for s in scalars))
    else:
        fits = numbers and dtype is out_dtype and (  # an int next to an int array: exact
            dtype.category == 2 or (dtype.category == 1 and all(
                type(s) is int and np.iinfo(dtype.np).min <= s <= np.iinfo(dtype.np).max
                for s in scalars)))
    if scalars and not fits:
        return None
    if any(isinstance(a, np.ndarray) for a in args):  # a 0-d CPU tensor next to CUDA ones
        return None
    return list(args)


# shape ops a device array does itself: reshapes of contiguous arrays, 2-D transposes
_DEVICE_VIEWS = frozenset({OPS.reshape, OPS.squeeze, OPS.unsqueeze, OPS.detach,
                           OPS.transpose, OPS.permute})
# broadcasting and index ops as kernels over strided memory (indexing.py)
_INDEX_OPS = {OPS.expand: "expand", OPS.gather: "gather", OPS.scatter_add: "scatter_add",
              OPS.sum_to: "sum_to", OPS.getitem: "getitem", OPS.index_scatter: "index_scatter",
              OPS.cat: "cat"}


def _view(op, args, attrs):
    """The op on the device array itself (no copy through the host), or None."""
    a = args[0]
    if op is OPS.detach:  # the same array, strided or not
        STATS["kernels"][op.name] += 1
        return a
    shape = tuple(op.infer(*[_aval(x) for x in args], **attrs).shape)
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


def _reduce(op, a, attrs):
    """A sum, mean, max or min over the last dimension or over everything as a one-op
    row kernel (one block per row, a tree reduction), or None (other dims: the host)."""
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
    shape = tuple(op.infer(_aval(a), **attrs).shape)
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


def _any_all(op, a, attrs):
    """any/all as kernels: a != 0 as float32, its max (any) or min (all), > 0.5."""
    nonzero = compute(OPS.ne, (a, 0), {})
    as_float = compute(OPS.cast, (nonzero,), {"dtype": dtypes.float32})
    extreme = _reduce(OPS.amax if op is OPS.any else OPS.amin, as_float, attrs)
    if extreme is None:
        return None
    return compute(OPS.gt, (extreme, 0.5), {})


def _column_sum(op, a, attrs):
    """`sum_to` [..., N] -> [N] (a bias's gradient) as a row kernel's sum over rows, or
    None (other targets: the host)."""
    shape = tuple(a.shape)
    target = tuple(attrs["shape"])
    if a.ndim < 2 or len(target) != 1 or target[0] != shape[-1] or shape[-1] == 1 or \
            a.size == 0 or not a.is_c_contiguous() or a.dtype.name not in ("float32",
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


def _host(x):
    if memory.is_device_array(x):
        return memory.to_host(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_host(v) for v in x)
    return x


def round_trip(op, args, attrs):
    """The op's numpy implementation on host copies of its operands (cast to its compute
    dtype, as eager dispatch casts), the result copied to the device."""
    STATS["host"][op.name] += 1
    host = [_host(a) for a in args]
    ct = compute_dtype(op, [_aval(a) if is_array(a) else a for a in host], attrs) \
        if op.kind is ELEMENTWISE else None
    if ct is not None:
        first = 1 if op.dtype_rule == "where" else 0  # where's condition keeps its dtype
        host = [a.astype(ct.np) if i >= first and isinstance(a, np.ndarray) and
                a.dtype != ct.np else a for i, a in enumerate(host)]
    token = quiet()  # inf and nan are results, as on the device (core/float_errors.py)
    try:
        out = np.asarray(op.impl(*host, **attrs))
    finally:
        restore(token)
    return memory.to_device(out)
