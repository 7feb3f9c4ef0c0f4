"""Sliding windows over the last two dims (im2col) and their adjoint (col2im).

`unfold2d` gathers every kernel window of a padded [N, C, H, W] input into
[N, OH, OW, C, KH, KW] (channels-last windows, so a convolution is one reshape and
one matmul away); `fold2d` adds windows back into [N, C, H, W]. Each is the other's
vjp, so convolutions and pools composed of them (nn/functional.py) have gradients
of every order, and traces see two primitives they can schedule and fuse around.
"""
from __future__ import annotations

import numpy as np

from .registry import INDEX, AVal, register
from .rules import aval_of

F = None  # tracejit.tensor.functional, bound by tracejit.ops


def out_size(size, k: int, s: int, p: int, d: int):
    """Number of window positions along one dim (PyTorch's formula, floor mode)."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _check(name, a, kernel, stride, padding, dilation):
    if a.ndim != 4:
        raise RuntimeError(f"{name}: expected a 4-D input [N, C, H, W], got shape "
                           f"{list(a.shape)}")
    for what, v, low in (("kernel size", kernel, 1), ("stride", stride, 1),
                         ("padding", padding, 0), ("dilation", dilation, 1)):
        if any(x < low for x in v):
            raise RuntimeError(f"{name}: {what} must be >= {low}, got {list(v)}")


def _infer_unfold(x, kernel, stride, padding, dilation, value=0.0):
    a = aval_of(x)
    _check("unfold2d", a, kernel, stride, padding, dilation)
    n, c, h, w = a.shape
    oh = out_size(h, kernel[0], stride[0], padding[0], dilation[0])
    ow = out_size(w, kernel[1], stride[1], padding[1], dilation[1])
    _check_size(h, w, oh, ow, kernel, padding)
    return AVal((n, oh, ow, c) + tuple(kernel), a.dtype)


def _check_size(h, w, oh, ow, kernel, padding):
    if (isinstance(oh, int) and oh < 1) or (isinstance(ow, int) and ow < 1):
        raise RuntimeError(f"unfold2d: input of spatial size {[h, w]} with padding "
                           f"{list(padding)} is smaller than the (dilated) kernel "
                           f"{list(kernel)}: the output would be {[oh, ow]}")


def _unfold(x, kernel, stride, padding, dilation, value=0.0):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)
    n, c, h, w = x.shape
    oh, ow = out_size(h, kh, sh, 0, dh), out_size(w, kw, sw, 0, dw)
    _check_size(h - 2 * ph, w - 2 * pw, oh, ow, kernel, padding)
    sn, sc, sy, sx = x.strides
    view = np.lib.stride_tricks.as_strided(
        x, (n, oh, ow, c, kh, kw), (sn, sy * sh, sx * sw, sc, sy * dh, sx * dw),
        writeable=False)
    return np.ascontiguousarray(view)


def _fold(g, shape, kernel, stride, padding, dilation):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = shape
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), g.dtype)
    oh, ow = g.shape[1], g.shape[2]
    windows = g.transpose(0, 3, 4, 5, 1, 2)  # [N, C, KH, KW, OH, OW]
    for i in range(kh):
        for j in range(kw):
            y, x = i * dh, j * dw
            out[:, :, y:y + sh * (oh - 1) + 1:sh, x:x + sw * (ow - 1) + 1:sw] += \
                windows[:, :, i, j]
    return out[:, :, ph:ph + h, pw:pw + w] if ph or pw else out


def _infer_fold(g, shape, kernel, stride, padding, dilation):
    a = aval_of(g)
    n, c, h, w = shape
    want = (n, out_size(h, kernel[0], stride[0], padding[0], dilation[0]),
            out_size(w, kernel[1], stride[1], padding[1], dilation[1]), c) + tuple(kernel)
    if a.ndim != 6 or any(isinstance(x, int) and isinstance(y, int) and x != y
                          for x, y in zip(a.shape, want)):
        raise RuntimeError(f"fold2d: expected windows {list(want)} [N, OH, OW, C, KH, KW] "
                           f"for an output of shape {list(shape)}, got {list(a.shape)}")
    return AVal(tuple(shape), a.dtype)


register("unfold2d", INDEX, _unfold, _infer_unfold,
         lambda g, out, x, kernel, stride, padding, dilation, value=0.0: (
             F.fold2d(g, tuple(x.shape), kernel, stride, padding, dilation),),
         saves=(), grad_name="Im2ColBackward0")
register("fold2d", INDEX, _fold, _infer_fold,
         lambda g, out, w, shape, kernel, stride, padding, dilation: (
             F.unfold2d(g, kernel, stride, padding, dilation),),
         saves=(), grad_name="Col2ImBackward0")
