"""matmul with numpy's 1-D and batch-broadcasting semantics."""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes as dt
from ..core.errors import ShapeError
from .registry import AVal, LINALG, register
from .rules import aval_of, broadcast_shapes, elementwise_dtypes

F = None  # tracejit.tensor.functional, bound by tracejit.ops


def _infer_matmul(a, b):
    x, y = aval_of(a), aval_of(b)
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                           f"{tuple(x.shape)} and {tuple(y.shape)}")
    xs = (1,) + tuple(x.shape) if x.ndim == 1 else tuple(x.shape)
    ys = tuple(y.shape) + (1,) if y.ndim == 1 else tuple(y.shape)
    if xs[-1] != ys[-2]:
        raise ShapeError(f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} cannot be "
                         f"multiplied ({xs[-1]} != {ys[-2]})")
    batch = broadcast_shapes("matmul", xs[:-2], ys[:-2])
    shape = batch + ((xs[-2],) if x.ndim > 1 else ()) + ((ys[-1],) if y.ndim > 1 else ())
    if x.dtype is not y.dtype:
        raise RuntimeError(_dtype_message(x.dtype.np, y.dtype.np))
    return AVal(shape, elementwise_dtypes("promote", (x, y))[1])


_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "bool": "bool", "int8": "signed char", "uint8": "unsigned char"}


def _dtype_message(a, b) -> str:
    """PyTorch's words for a product of two dtypes (it does not promote matmul operands)."""
    return (f"expected m1 and m2 to have the same dtype, but got: "
            f"{_C_NAMES.get(np.dtype(a).name, a)} != {_C_NAMES.get(np.dtype(b).name, b)}")


def _matmul(a, b):
    if a.dtype is not b.dtype and a.dtype != b.dtype:
        raise RuntimeError(_dtype_message(a.dtype, b.dtype))
    if a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] == 1 and b.shape[-2] == 1 and \
            a.shape[-2] > 1 and b.shape[-1] > 1:
        # an outer product (a weight's gradient from one row): one product per element,
        # the same numbers as matmul's, and numpy's broadcasting multiply is several times
        # faster than its matmul for it
        return np.multiply(a, b)
    if a.dtype.itemsize == 2 and a.dtype.kind in "fV":  # float16 / bfloat16: accumulate in
        return dt.rounded_from_float32(_matmul(dt.as_float32(a), dt.as_float32(b)),  # f32
                                       a.dtype)
    if a.ndim == 2 and b.ndim == 2 and 2 <= a.shape[0] <= _FEW_ROWS and \
            b.shape[0] >= _WIDE and b.shape[1] >= _WIDE and b.flags.f_contiguous and \
            not b.flags.c_contiguous and a.dtype.kind == "f":
        # a few rows times a transposed weight (`x @ W.t()`, a linear layer at a small
        # batch): OpenBLAS's sgemm with B transposed is 1.5-3x slower at these shapes than
        # the same product as (W @ x^T)^T (16x128 @ 128x128: 14.1 against 9.3 us; 16x512
        # @ 512x512: 123 against 64 us), including the copy back to row-major
        return np.ascontiguousarray(np.matmul(b.T, a.T).T)
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous:
        # a batch of matrices times one matrix (a linear layer over [T, B, F]): one
        # product of the rows, where numpy's matmul makes one per matrix of the batch
        # ([16, 8, 64] @ [64, 1000]: 860 us so, against one [128, 64] product)
        rows = math.prod(a.shape[:-1])  # (not -1: a size of 0 leaves it undecided)
        return _matmul(a.reshape(rows, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[-1:])
    return np.matmul(a, b)


_FEW_ROWS, _WIDE = 48, 128  # where that product was measured faster (_matmul)


def _matmul_vjp(g, out, a, b):
    need_a, need_b = a.requires_grad, b.requires_grad
    if a.ndim == 1 and b.ndim == 1:
        return (g * b if need_a else None, g * a if need_b else None)
    if a.ndim == 1:
        ga = F.squeeze(F.matmul(F.unsqueeze(g, -2), F.transpose(b, -1, -2)), -2) if need_a else None
        gb = F.matmul(F.unsqueeze(a, -1), F.unsqueeze(g, -2)) if need_b else None
        return ga, gb
    if b.ndim == 1:
        ga = F.matmul(F.unsqueeze(g, -1), F.unsqueeze(b, 0)) if need_a else None
        gb = F.matmul(F.transpose(a, -1, -2), F.unsqueeze(g, -1)) if need_b else None
        return ga, (F.squeeze(gb, -1) if gb is not None else None)
    if need_a and a.ndim == 2 and b.ndim > 2:
        # one matrix shared by a batch on the left (a convolution's weight times its
        # windows): its gradient sums g_n b_n^T, computed as the transpose of the sum of
        # b_n g_n^T. OpenBLAS is up to 2x faster with the windows' long side as the
        # product's rows ([16, 1024] @ [1024, 144] per image: 143 against 72 us as
        # [144, 1024] @ [1024, 16])
        ga = F.transpose(F.sum_to(F.matmul(b, F.transpose(g, -1, -2)),
                                  (b.shape[-2], g.shape[-2])), 0, 1)
    else:
        ga = F.matmul(g, F.transpose(b, -1, -2)) if need_a else None
    if need_b and b.ndim == 2 and a.ndim > 2:
        # one matrix shared by a batch: its gradient sums the batch's products, which is
        # one product of the rows stacked (no [batch, K, N] temporary to reduce)
        rows = math.prod(a.shape[:-1])  # (not -1: a size of 0 leaves it undecided)
        rows_a = F.reshape(a, (rows, a.shape[-1]))
        rows_g = F.reshape(g, (rows, g.shape[-1]))
        return ga, F.matmul(F.transpose(rows_a, -1, -2), rows_g)
    gb = F.matmul(F.transpose(a, -1, -2), g) if need_b else None
    return ga, gb


register("matmul", LINALG, _matmul, _infer_matmul, _matmul_vjp, saves=(0, 1), arity=2,
         save_when={0: (1,), 1: (0,)}, grad_name="MmBackward0", autocast="low")
