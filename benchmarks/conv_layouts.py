"""A convolution's window layouts, measured before choosing one: today's windows
[N, C, KH, KW, OH, OW] (`ops/windows.py`, weight @ windows per image) against channels-last
windows [N, OH, OW, KH, KW, C] cut from an NHWC input (windows @ weight^T, one product over
the batch), per convolution: im2col, the forward product, the input gradient's product,
col2im, the weight gradient's product. Shapes of benchmarks/models (ResNet-8, the
super-resolution CNN, the MNIST CNN), float32, 1 thread, stride 1, medians of 30.

Run: OPENBLAS_NUM_THREADS=1 python benchmarks/conv_layouts.py
"""
from __future__ import annotations

import time

import numpy as np
from numba import njit


@njit
def unfold_nchw(x, out, kh, kw, ph, pw):
    n_, c_, h_, w_ = x.shape
    oh_, ow_ = out.shape[4], out.shape[5]
    for n in range(n_):
        for c in range(c_):
            for i in range(kh):
                for j in range(kw):
                    for oh in range(oh_):
                        h = oh + i - ph
                        for ow in range(ow_):
                            w = ow + j - pw
                            inside = h >= 0 and h < h_ and w >= 0 and w < w_
                            out[n, c, i, j, oh, ow] = x[n, c, h, w] if inside else 0.0


@njit
def fold_nchw(g, out, kh, kw, ph, pw):
    n_, c_, h_, w_ = out.shape
    oh_, ow_ = g.shape[4], g.shape[5]
    out[...] = 0
    for n in range(n_):
        for c in range(c_):
            for i in range(kh):
                for j in range(kw):
                    for oh in range(oh_):
                        h = oh + i - ph
                        if h < 0 or h >= h_:
                            continue
                        for ow in range(ow_):
                            w = ow + j - pw
                            if w >= 0 and w < w_:
                                out[n, c, h, w] += g[n, c, i, j, oh, ow]


@njit
def unfold_nhwc(x, out, kh, kw, ph, pw):
    n_, h_, w_, c_ = x.shape
    oh_, ow_ = out.shape[1], out.shape[2]
    for n in range(n_):
        for oh in range(oh_):
            for ow in range(ow_):
                for i in range(kh):
                    h = oh + i - ph
                    for j in range(kw):
                        w = ow + j - pw
                        if h >= 0 and h < h_ and w >= 0 and w < w_:
                            for c in range(c_):
                                out[n, oh, ow, i, j, c] = x[n, h, w, c]
                        else:
                            for c in range(c_):
                                out[n, oh, ow, i, j, c] = 0.0


@njit
def fold_nhwc(g, out, kh, kw, ph, pw):
    n_, h_, w_, c_ = out.shape
    oh_, ow_ = g.shape[1], g.shape[2]
    out[...] = 0
    for n in range(n_):
        for i in range(kh):
            for j in range(kw):
                for oh in range(oh_):
                    h = oh + i - ph
                    if h < 0 or h >= h_:
                        continue
                    for ow in range(ow_):
                        w = ow + j - pw
                        if w >= 0 and w < w_:
                            for c in range(c_):
                                out[n, h, w, c] += g[n, oh, ow, i, j, c]


def median_us(fn, reps: int = 30) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def compare(name, n, c, size, o, k, p) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    x_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    weight = rng.standard_normal((o, c, k, k)).astype(np.float32)
    kk, pp = c * k * k, size * size
    w_first = weight.reshape(o, kk)
    w_last = np.ascontiguousarray(weight.transpose(0, 2, 3, 1)).reshape(o, kk)
    g = rng.standard_normal((n, o, size, size)).astype(np.float32)
    g_first = g.reshape(n, o, pp)
    g_last = np.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(n * pp, o)
    win_first = np.empty((n, c, k, k, size, size), np.float32)
    win_last = np.empty((n, size, size, k, k, c), np.float32)
    dx, dx_last = np.empty_like(x), np.empty_like(x_last)
    first = [
        median_us(lambda: unfold_nchw(x, win_first, k, k, p, p)),
        median_us(lambda: np.matmul(w_first, win_first.reshape(n, kk, pp))),
        median_us(lambda: np.matmul(w_first.T, g_first)),
        median_us(lambda: fold_nchw(win_first, dx, k, k, p, p)),
        median_us(lambda: np.einsum("nop,nkp->ok", g_first, win_first.reshape(n, kk, pp),
                                    optimize=True))]
    last = [
        median_us(lambda: unfold_nhwc(x_last, win_last, k, k, p, p)),
        median_us(lambda: win_last.reshape(n * pp, kk) @ w_last.T),
        median_us(lambda: g_last @ w_last),
        median_us(lambda: fold_nhwc(win_last, dx_last, k, k, p, p)),
        median_us(lambda: g_last.T @ win_last.reshape(n * pp, kk))]
    y_first = np.matmul(w_first, win_first.reshape(n, kk, pp)).reshape(n, o, size, size)
    y_last = (win_last.reshape(n * pp, kk) @ w_last.T).reshape(n, size, size, o)
    np.testing.assert_allclose(y_first, y_last.transpose(0, 3, 1, 2), rtol=1e-3, atol=1e-3)
    print(f"{name:34s} | {sum(first):8.0f} | {sum(last):8.0f} | "
          + " ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(first, last)))


def main() -> None:
    print(f"{'convolution':34s} | {'NCHW us':>8s} | {'NHWC us':>8s} | im2col, forward, input "
          f"grad, col2im, weight grad (NCHW/NHWC)")
    compare("ResNet stage 1 [8,16,32,32] 16->16", 8, 16, 32, 16, 3, 1)
    compare("ResNet stage 2 [8,32,16,16] 32->32", 8, 32, 16, 32, 3, 1)
    compare("ResNet stage 3 [8,64,8,8] 64->64", 8, 64, 8, 64, 3, 1)
    compare("super-res conv2 [4,64,32,32] ->64", 4, 64, 32, 64, 3, 1)
    compare("super-res conv3 [4,64,32,32] ->32", 4, 64, 32, 32, 3, 1)
    compare("MNIST conv2 [64,10,12,12] ->20 5x5", 64, 10, 12, 20, 5, 0)


if __name__ == "__main__":
    main()
