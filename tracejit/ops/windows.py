"""Sliding windows over the last two dims (im2col) and their adjoint (col2im).

`unfold2d` gathers every kernel window of a padded [N, C, H, W] input into
[N, C, KH, KW, OH, OW]; `fold2d` adds windows back into [N, C, H, W]. With `ceil_mode`
the last window along a dim may run past the right padding (PyTorch's pools' rule: it
must start inside the input or the left padding); what it reads there is the fill value.
Each is the other's vjp, so convolutions and pools composed of them (nn/functional.py) have
gradients of every order, and traces see two primitives they can schedule and fuse
around.

The layout keeps the output positions innermost, as the input's pixels are: a kernel
offset (i, j) is one strided 2-D copy per image and channel (contiguous rows of OW at
stride 1), a convolution is `weight [O, C*KH*KW] @ windows [N, C*KH*KW, OH*OW]`, which
leaves its output in [N, O, OH, OW] order without a transpose, and a pool reduces over
(KH, KW) straight into [N, C, OH, OW]. Channels-last windows ([N, OH, OW, C, KH, KW])
cost 1.4-2x more per convolution, forward and backward (their copy moves 3-element
rows, and the product's output must be transposed back).
"""
from __future__ import annotations

import numpy as np

from .registry import INDEX, AVal, Loops, register
from .rules import aval_of

F = None  # tracejit.tensor.functional, bound by tracejit.ops
prange = range  # numba.prange where the loop bodies below are compiled


def out_size(size, k: int, s: int, p: int, d: int, ceil_mode: bool = False):
    """Number of window positions along one dim (PyTorch's formula; ceil mode adds a last
    partial window when it starts inside the input or the left padding)."""
    if not ceil_mode:
        return (size + 2 * p - d * (k - 1) - 1) // s + 1
    out = (size + 2 * p - d * (k - 1) - 1 + s - 1) // s + 1
    return out - 1 if (out - 1) * s >= size + p else out


def out_sizes(shape, kernel, stride, padding, dilation, ceil_mode: bool = False) -> tuple:
    """Window positions along each of the trailing len(kernel) dims of `shape`."""
    return tuple(out_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
                 zip(shape[len(shape) - len(kernel):], kernel, stride, padding, dilation))


def _check(name, a, kernel, stride, padding, dilation):
    if a.ndim != 4:
        raise RuntimeError(f"{name}: expected a 4-D input [N, C, H, W], got shape "
                           f"{list(a.shape)}")
    for what, v, low in (("kernel size", kernel, 1), ("stride", stride, 1),
                         ("padding", padding, 0), ("dilation", dilation, 1)):
        if any(x < low for x in v):
            raise RuntimeError(f"{name}: {what} must be >= {low}, got {list(v)}")


def _infer_unfold(x, kernel, stride, padding, dilation, value=0.0, ceil_mode=False):
    a = aval_of(x)
    _check("unfold2d", a, kernel, stride, padding, dilation)
    n, c, h, w = a.shape
    oh, ow = out_sizes(a.shape, kernel, stride, padding, dilation, ceil_mode)
    _check_size(h, w, oh, ow, kernel, padding)
    return AVal((n, c) + tuple(kernel) + (oh, ow), a.dtype)


def _check_size(h, w, oh, ow, kernel, padding):
    if (isinstance(oh, int) and oh < 1) or (isinstance(ow, int) and ow < 1):
        raise RuntimeError(f"unfold2d: input of spatial size {[h, w]} with padding "
                           f"{list(padding)} is smaller than the (dilated) kernel "
                           f"{list(kernel)}: the output would be {[oh, ow]}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _offsets(kernel, stride, padding, dilation, size, out):
    """Per kernel offset (i, j): the output rows and columns whose window point lies
    inside the input, and where they read it: (i, j, rows, cols, input rows, input
    cols), each a slice; offsets that read padding only are left out."""
    spans = []
    for k, s, p, d, n, o in zip(kernel, stride, padding, dilation, size, out):
        per = []
        for i in range(k):
            lo = max(0, _ceil_div(p - i * d, s))
            hi = min(o, (n - 1 + p - i * d) // s + 1)
            start = lo * s + i * d - p
            per.append((i, slice(lo, hi), slice(start, start + (hi - lo - 1) * s + 1, s))
                       if hi > lo else None)
        spans.append(per)
    return [(a[0], b[0], a[1], b[1], a[2], b[2]) for a in spans[0] if a
            for b in spans[1] if b]


def _fill(value, dtype):
    """The padding value in the input's dtype (-inf pads an integer max-pool with the
    type's lowest value, not an overflowed cast)."""
    if dtype.kind in "iu" and not np.isfinite(value):
        info = np.iinfo(dtype)
        return info.min if value < 0 else info.max
    return value


def _unfold(x, kernel, stride, padding, dilation, value=0.0, ceil_mode=False):
    n, c, h, w = x.shape
    oh, ow = out_sizes(x.shape, kernel, stride, padding, dilation, ceil_mode)
    _check_size(h, w, oh, ow, kernel, padding)
    shape = (n, c) + tuple(kernel) + (oh, ow)
    floor = out_sizes(x.shape, kernel, stride, padding, dilation)
    out = np.full(shape, _fill(value, x.dtype), x.dtype) if any(padding) or \
        floor != (oh, ow) else np.empty(shape, x.dtype)
    for i, j, rows, cols, in_rows, in_cols in _offsets(kernel, stride, padding, dilation,
                                                       (h, w), (oh, ow)):
        out[:, :, i, j, rows, cols] = x[:, :, in_rows, in_cols]
    return out


def _fold(g, shape, kernel, stride, padding, dilation, ceil_mode=False):
    out = np.zeros(shape, g.dtype)
    oh, ow = g.shape[4], g.shape[5]
    for i, j, rows, cols, in_rows, in_cols in _offsets(kernel, stride, padding, dilation,
                                                       shape[2:], (oh, ow)):
        out[:, :, in_rows, in_cols] += g[:, :, i, j, rows, cols]
    return out


# ---- the same two ops as loop nests (compiled by the CPU backend; ops/registry.Loops) --
# One pass over the output, each (image, channel) plane an iteration that may run on its
# own thread. The sums of fold2d add each element's windows in the order _fold does, so
# both give the same bits. (A test per column, not a range of columns worked out per
# offset: Numba compiles the loop with the test 3-6x faster.)

def unfold2d_loops(x, out, kh, kw, sh, sw, ph, pw, dh, dw, fill):
    n_, c_, h_, w_ = x.shape
    oh_, ow_ = out.shape[4], out.shape[5]
    for nc in prange(n_ * c_):
        n = nc // c_
        c = nc - n * c_
        for i in range(kh):
            for j in range(kw):
                for oh in range(oh_):
                    h = oh * sh + i * dh - ph
                    if h < 0 or h >= h_:
                        for ow in range(ow_):
                            out[n, c, i, j, oh, ow] = fill
                        continue
                    for ow in range(ow_):
                        w = ow * sw + j * dw - pw
                        out[n, c, i, j, oh, ow] = x[n, c, h, w] if w >= 0 and w < w_ \
                            else fill


def fold2d_loops(g, out, kh, kw, sh, sw, ph, pw, dh, dw):
    n_, c_, h_, w_ = out.shape
    oh_, ow_ = g.shape[4], g.shape[5]
    for nc in prange(n_ * c_):
        n = nc // c_
        c = nc - n * c_
        for h in range(h_):
            for w in range(w_):
                out[n, c, h, w] = 0
        for i in range(kh):
            for j in range(kw):
                for oh in range(oh_):
                    h = oh * sh + i * dh - ph
                    if h < 0 or h >= h_:
                        continue
                    for ow in range(ow_):
                        w = ow * sw + j * dw - pw
                        if w >= 0 and w < w_:
                            out[n, c, h, w] += g[n, c, i, j, oh, ow]


_LOOP_DTYPES = frozenset(np.dtype(n).type for n in  # (type: dtype.name costs 2 us)
                          "float32 float64 int8 int16 int32 int64 uint8".split())


def _unfold_args(x, kernel, stride, padding, dilation, value=0.0, ceil_mode=False):
    if x.dtype.type not in _LOOP_DTYPES:
        return None
    n, c, h, w = x.shape
    oh, ow = out_sizes(x.shape, kernel, stride, padding, dilation, ceil_mode)
    _check_size(h, w, oh, ow, kernel, padding)
    out = np.empty((n, c) + tuple(kernel) + (oh, ow), x.dtype)
    return (out,), (np.ascontiguousarray(x), out, *kernel, *stride, *padding, *dilation,
                    x.dtype.type(_fill(value, x.dtype)))


def _fold_args(g, shape, kernel, stride, padding, dilation, ceil_mode=False):
    if g.dtype.type not in _LOOP_DTYPES:
        return None
    out = np.empty(shape, g.dtype)
    return (out,), (np.ascontiguousarray(g), out, *kernel, *stride, *padding, *dilation)


def _infer_fold(g, shape, kernel, stride, padding, dilation, ceil_mode=False):
    a = aval_of(g)
    want = tuple(shape[:2]) + tuple(kernel) + out_sizes(shape, kernel, stride, padding,
                                                        dilation, ceil_mode)
    if a.ndim != 6 or any(isinstance(x, int) and isinstance(y, int) and x != y
                          for x, y in zip(a.shape, want)):
        raise RuntimeError(f"fold2d: expected windows {list(want)} [N, C, KH, KW, OH, OW] "
                           f"for an output of shape {list(shape)}, got {list(a.shape)}")
    return AVal(tuple(shape), a.dtype)


register("unfold2d", INDEX, _unfold, _infer_unfold,
         lambda g, out, x, kernel, stride, padding, dilation, value=0.0, ceil_mode=False: (
             F.fold2d(g, tuple(x.shape), kernel, stride, padding, dilation, ceil_mode),),
         saves=(), grad_name="Im2ColBackward0", loops=Loops(unfold2d_loops, _unfold_args))
register("fold2d", INDEX, _fold, _infer_fold,
         lambda g, out, w, shape, kernel, stride, padding, dilation, ceil_mode=False: (
             F.unfold2d(g, kernel, stride, padding, dilation, ceil_mode=ceil_mode),),
         saves=(), grad_name="Col2ImBackward0", loops=Loops(fold2d_loops, _fold_args))
