"""Sample inputs and independent numpy references for every op-table entry.

The parametrised op tests (test_ops.py) read this; test_every_op_has_samples
fails when an op is added to the table without its line here.
"""
from __future__ import annotations

import math

import numpy as np

from tracejit.core import dtypes as dt
from tracejit.ops.indexing import Slot

RNG = np.random.default_rng(1234)


def f(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape)


def pos(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def away_from_zero(*shape):
    """Values with |x| in [0.3, 2] so kinks (relu, abs, sign) are not probed."""
    return RNG.uniform(0.3, 2.0, shape) * RNG.choice([-1.0, 1.0], shape)


def ints(*shape, high=4):
    return RNG.integers(0, high, shape).astype(np.int64)


class S:
    """One sample: positional inputs (arrays or Python scalars) and attributes."""

    def __init__(self, *args, **attrs):
        self.args, self.attrs = args, attrs

    def __repr__(self):
        return "S(" + ", ".join(getattr(a, "shape", repr(a)).__str__() for a in self.args) + ")"


def _unfold_ref(x, kernel, stride, padding, dilation, value=0.0):
    """Windows by loops over every output position and kernel offset."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, c, kh, kw, oh, ow))
    for a in range(oh):
        for b in range(ow):
            for i in range(kh):
                for j in range(kw):
                    y, z = a * sh + i * dh - ph, b * sw + j * dw - pw
                    inside = 0 <= y < h and 0 <= z < w
                    out[:, :, i, j, a, b] = x[:, :, y, z] if inside else value
    return out


def _fold_ref(g, shape, kernel, stride, padding, dilation):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    out = np.zeros(shape)
    oh, ow = g.shape[4:]
    for a in range(oh):
        for b in range(ow):
            for i in range(kh):
                for j in range(kw):
                    y, z = a * sh + i * dh - ph, b * sw + j * dw - pw
                    if 0 <= y < shape[2] and 0 <= z < shape[3]:
                        out[:, :, y, z] += g[:, :, i, j, a, b]
    return out


def _sum_to_ref(x, shape):
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead))) if lead > 0 else x
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
    return x.sum(axis=axes, keepdims=True).reshape(shape)


def _erf_ref(x):
    return np.vectorize(math.erf)(x)


def _scatter_into(x, idx, src, dim, combine, include_self=True):
    """x with each src element combined into the position idx names along dim, by loops."""
    out, seen = x.copy(), set()
    for pos in np.ndindex(idx.shape):
        target = list(pos)
        target[dim] = int(idx[pos])
        target = tuple(target)
        value = src if np.ndim(src) == 0 else src[pos]
        if not include_self and target not in seen:
            out[target] = value
        else:
            out[target] = combine(out[target], value)
        seen.add(target)
    return out


def _scatter_ref(g, idx, dim, shape):
    out = np.zeros(shape)
    it = np.nditer(idx, flags=["multi_index"])
    for v in it:
        pos = list(it.multi_index)
        pos[dim] = int(v)
        out[tuple(pos)] += g[it.multi_index]
    return out


_I = np.array([0, 2, 2])  # repeated on purpose: gradients must accumulate

# name: (samples, reference, differentiable input positions)
def _cells_ref(xg, h0, c0, w_hh, b_hh, mode, gh_extra=None, lib=np):
    """rnn_scan's history by PyTorch's cell formulas, row by row (numpy arrays, or
    tracejit tensors with lib=tracejit); gh_extra is added to each step's state product."""
    def sig(v):
        return 1 / (1 + lib.exp(-v))
    steps, hidden = xg.shape[0], h0.shape[1]
    H = hidden
    cat = (lambda xs: lib.cat(xs, 1)) if lib is not np else (lambda xs: np.concatenate(xs, 1))
    h, c = h0, c0
    zeros = h0 * 0
    first = {"LSTM": [h0, c0] + [zeros] * 4, "GRU": [h0] + [zeros] * 4}.get(mode, [h0])
    rows = [cat(first)]
    for t in range(steps):
        gh = h @ w_hh.T + b_hh
        if gh_extra is not None:
            gh = gh + gh_extra[t]
        pre = xg[t] + gh
        if mode == "LSTM":
            i, f, o = sig(pre[:, :H]), sig(pre[:, H:2 * H]), sig(pre[:, 3 * H:])
            g = lib.tanh(pre[:, 2 * H:3 * H])
            c = f * c + i * g
            h = o * lib.tanh(c)
            rows.append(cat([h, c, i, f, g, o]))
        elif mode == "GRU":
            r, z = sig(pre[:, :H]), sig(pre[:, H:2 * H])
            hn = gh[:, 2 * H:]
            n = lib.tanh(xg[t][:, 2 * H:] + r * hn)
            h = (1 - z) * n + z * h
            rows.append(cat([h, r, z, n, hn]))
        else:
            h = lib.tanh(pre) if mode == "RNN_TANH" else lib.relu(pre) if lib is not np \
                else np.maximum(pre, 0)
            rows.append(h)
    return lib.stack(rows, 0)


_RNN_INPUTS: dict = {}  # id of a history sample -> the inputs that made it


def _rnn_case(mode, steps=3, batch=2, hidden=2):
    gates = {"LSTM": 4, "GRU": 3}.get(mode, 1)
    args = (f(steps, batch, gates * hidden), f(batch, hidden), f(batch, hidden),
            f(gates * hidden, hidden, low=-1, high=1), f(gates * hidden))
    return S(*args, mode=mode)


def _rnn_backward_case(mode):
    fwd = _rnn_case(mode)
    history = _cells_ref(*fwd.args, mode)
    _RNN_INPUTS[id(history)] = fwd.args
    return S(f(*history.shape), history, fwd.args[3], mode=mode)


def _rnn_backward_ref(gs, history, w_hh, mode):
    """The gradients rnn_scan_backward returns, by tracejit's autograd of the cells."""
    import tracejit as tj

    xg, h0, c0, _, b_hh = (tj.tensor(a, requires_grad=True) for a in _RNN_INPUTS[id(history)])
    extra = tj.zeros(xg.shape, dtype=xg.dtype, requires_grad=True)
    out = _cells_ref(xg, h0, c0, tj.tensor(w_hh), b_hh, mode, extra, lib=tj)
    (out * tj.tensor(gs)).sum().backward()
    H = w_hh.shape[1]
    width = {"GRU": 6}.get(mode, {"LSTM": 4}.get(mode, 1)) * H
    d = np.zeros((history.shape[0], history.shape[1], width))
    d[1:, :, :xg.shape[2]] = xg.grad.numpy()
    if mode == "GRU":
        d[1:, :, 3 * H:] = extra.grad.numpy()
    d[0, :, :H] = h0.grad.numpy()
    if mode == "LSTM":
        d[0, :, H:2 * H] = c0.grad.numpy()
    return d


SAMPLES = {
    "neg": ([S(f(3, 4))], lambda x: -x, [0]),
    "abs": ([S(away_from_zero(3, 4))], np.abs, [0]),
    "exp": ([S(f(3, 4))], lambda x: np.e ** x, [0]),
    "log": ([S(pos(3, 4))], np.log, [0]),
    "log1p": ([S(pos(5))], lambda x: np.log(1 + x), [0]),
    "sqrt": ([S(pos(5))], lambda x: x ** 0.5, [0]),
    "rsqrt": ([S(pos(5))], lambda x: 1 / x ** 0.5, [0]),
    "sin": ([S(f(5))], np.sin, [0]),
    "cos": ([S(f(5))], np.cos, [0]),
    "tanh": ([S(f(3, 4))], lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1), [0]),
    "sigmoid": ([S(f(3, 4))], lambda x: 1 / (1 + np.exp(-x)), [0]),
    "relu": ([S(away_from_zero(3, 4))], lambda x: np.where(x > 0, x, 0), [0]),
    "erf": ([S(f(6))], _erf_ref, [0]),
    "sign": ([S(away_from_zero(5))], lambda x: np.where(x > 0, 1.0, -1.0), [0]),
    "floor": ([S(f(5) * 3 + 0.5)], lambda x: x - np.mod(x, 1), [0]),
    "logical_not": ([S(f(5) > 0)], lambda x: ~x, []),
    "isnan": ([S(np.array([1.0, np.nan, np.inf]))], lambda x: x != x, []),
    "isfinite": ([S(np.array([1.0, np.nan, -np.inf]))], lambda x: np.abs(x) < np.inf, []),
    "isinf": ([S(np.array([1.0, np.nan, np.inf, -np.inf]))], lambda x: np.abs(x) == np.inf, []),
    "leaky_relu": ([S(away_from_zero(3, 4), negative_slope=0.2), S(away_from_zero(5))],
                   lambda x, negative_slope=0.01: np.where(x > 0, 1.0, negative_slope) * x, [0]),
    "clamp": ([S(f(3, 4), min=-0.5, max=0.7), S(f(5), min=0.1), S(f(5), max=0.2)],
              lambda x, min=None, max=None: np.minimum(np.maximum(x, -np.inf if min is None
                                                                  else min),
                                                       np.inf if max is None else max), [0]),
    "cast": ([S(f(4), dtype=None)], lambda x, dtype: x.astype(dtype.np), [0]),
    "add": ([S(f(3, 4), f(4)), S(f(2, 1, 3), f(4, 1)), S(f(3), 2.5)], lambda x, y: x + y, [0, 1]),
    "sub": ([S(f(3, 4), f(3, 1)), S(1.5, f(3))], lambda x, y: x - y, [0, 1]),
    "mul": ([S(f(3, 4), f(4)), S(f(3), 3.0)], lambda x, y: x * y, [0, 1]),
    "div": ([S(f(3, 4), pos(3, 4)), S(f(3), 4.0)], lambda x, y: x / y, [0, 1]),
    "pow": ([S(pos(3, 4), f(3, 4)), S(pos(4), 3.0), S(2.0, f(3))], lambda x, y: np.exp(
        y * np.log(x)), [0, 1]),
    "maximum": ([S(f(3, 4), f(4))], lambda x, y: np.where(x > y, x, y), [0, 1]),
    "minimum": ([S(f(3, 4), f(4))], lambda x, y: np.where(x < y, x, y), [0, 1]),
    "tan": ([S(f(3, 4, low=-1.2, high=1.2))], lambda x: np.sin(x) / np.cos(x), [0]),
    "asin": ([S(f(5, low=-0.9, high=0.9))], np.arcsin, [0]),
    "acos": ([S(f(5, low=-0.9, high=0.9))], np.arccos, [0]),
    "atan": ([S(f(5))], np.arctan, [0]),
    "sinh": ([S(f(5))], lambda x: (np.exp(x) - np.exp(-x)) / 2, [0]),
    "cosh": ([S(f(5))], lambda x: (np.exp(x) + np.exp(-x)) / 2, [0]),
    "asinh": ([S(f(5))], lambda x: np.log(x + np.sqrt(x * x + 1)), [0]),
    "acosh": ([S(f(5, low=1.2, high=3.0))], lambda x: np.log(x + np.sqrt(x * x - 1)), [0]),
    "atanh": ([S(f(5, low=-0.9, high=0.9))], lambda x: 0.5 * np.log((1 + x) / (1 - x)), [0]),
    "exp2": ([S(f(5))], lambda x: 2.0 ** x, [0]),
    "expm1": ([S(f(5))], lambda x: np.exp(x) - 1, [0]),
    "log2": ([S(pos(5))], lambda x: np.log(x) / np.log(2), [0]),
    "log10": ([S(pos(5))], lambda x: np.log(x) / np.log(10), [0]),
    "trunc": ([S(np.array([-2.75, -1.25, -0.25, 0.25, 1.75, 3.25]))],
              lambda x: np.sign(x) * np.floor(np.abs(x)), [0]),
    "ceil": ([S(f(5) * 3 + 0.5)], lambda x: -np.floor(-x), [0]),
    "round": ([S(np.array([-2.5, -1.25, -0.5, 0.5, 1.5, 2.75, 3.2]))],  # ties to even
              lambda x: np.array([-2.0, -1.0, -0.0, 0.0, 2.0, 3.0, 3.0]), []),
    "signbit": ([S(np.array([-1.5, -0.0, 0.0, 2.0, -np.inf]))],
                lambda x: np.array([True, True, False, False, True]), []),
    "copysign": ([S(away_from_zero(3, 4), away_from_zero(4)), S(f(5), 2.0)],
                 lambda x, y: np.abs(x) * np.where(np.asarray(y) < 0, -1.0, 1.0), [0, 1]),
    "fmod": ([S(f(3, 4) * 3, away_from_zero(4)), S(f(5) * 3, 0.75)],
             lambda x, y: x - np.asarray(y) * np.trunc(x / np.asarray(y)), [0, 1]),
    "hypot": ([S(f(3, 4), away_from_zero(4))], lambda x, y: np.sqrt(x * x + y * y), [0, 1]),
    "logaddexp": ([S(f(3, 4), f(4)), S(f(4), f(4))],
                  lambda x, y: np.log(np.exp(x) + np.exp(y)), [0, 1]),
    "floor_divide": ([S(ints(5, high=20), ints(5, high=3) + 1)], lambda x, y: (x - x % y) // y,
                     []),
    "remainder": ([S(ints(5, high=20), ints(5, high=3) + 1)], lambda x, y: x - (x // y) * y, []),
    "lt": ([S(f(3, 4), f(4))], lambda x, y: x < y, []),
    "le": ([S(f(3, 4), 0.0)], lambda x, y: x <= y, []),
    "gt": ([S(f(3, 4), f(3, 4))], lambda x, y: x > y, []),
    "ge": ([S(f(3), f(3))], lambda x, y: x >= y, []),
    "eq": ([S(ints(6), ints(6))], lambda x, y: x == y, []),
    "ne": ([S(ints(6), ints(6))], lambda x, y: x != y, []),
    "logical_and": ([S(f(6) > 0, f(6) > 0)], lambda x, y: x & y, []),
    "logical_or": ([S(f(6) > 0, f(6) > 0)], lambda x, y: x | y, []),
    "logical_xor": ([S(f(6) > 0, f(6) > 0)], lambda x, y: x ^ y, []),
    "binary_cross_entropy": ([S(RNG.uniform(0.1, 0.9, (3, 4)), RNG.uniform(0.0, 1.0, (3, 4)))],
                             lambda x, t: -(t * np.log(x) + (1 - t) * np.log(1 - x)), [0, 1]),
    "lerp": ([S(f(3, 4), f(4), f(3, 1)), S(f(5), f(5), 0.75), S(f(5), f(5), -0.25)],
             lambda x, y, w: x + np.asarray(w) * (y - x), [0, 1, 2]),
    "tanh_backward": ([S(f(3, 4), f(3, 4))], lambda g, y: g - g * y * y, [0, 1]),
    "sigmoid_backward": ([S(f(3, 4), f(3, 4))], lambda g, y: g * y - g * y * y, [0, 1]),
    "threshold_backward": ([S(f(3, 4), away_from_zero(3, 4))], lambda g, y: g * (y > 0), [0]),
    "elu": ([S(away_from_zero(3, 4)), S(away_from_zero(5), alpha=0.5, scale=2.0, input_scale=0.5)],
            lambda x, alpha=1.0, scale=1.0, input_scale=1.0: np.where(
                x > 0, x * scale, (np.exp(x * input_scale) - 1) * alpha * scale), [0]),
    "hardtanh": ([S(f(3, 4) * 2, min_val=-1.0, max_val=1.0), S(f(5), min_val=-0.5, max_val=2.5)],
                 lambda x, min_val=-1.0, max_val=1.0: np.minimum(np.maximum(x, min_val),
                                                                 max_val), [0]),
    "hardswish": ([S(f(3, 4) * 2.5)], lambda x: x * np.clip(x + 3, 0, 6) / 6, [0]),
    "hardsigmoid": ([S(f(3, 4) * 2.5)], lambda x: np.clip(x / 6 + 0.5, 0, 1), [0]),
    "softplus": ([S(f(3, 4)), S(f(5) * 10, beta=2.0, threshold=5.0)],
                 lambda x, beta=1.0, threshold=20.0: np.where(
                     x * beta > threshold, x, np.log(1 + np.exp(x * beta)) / beta), [0]),
    "logsigmoid": ([S(f(3, 4) * 5)], lambda x: -np.log(1 + np.exp(-x)), [0]),
    "softshrink": ([S(away_from_zero(3, 4)), S(f(5) * 3, lambd=1.1)],
                   lambda x, lambd=0.5: np.sign(x) * np.maximum(np.abs(x) - lambd, 0), [0]),
    "hardshrink": ([S(away_from_zero(3, 4)), S(f(5) * 3, lambd=1.1)],
                   lambda x, lambd=0.5: np.where(np.abs(x) > lambd, x, 0), [0]),
    "threshold": ([S(f(3, 4), threshold=0.1, value=-2.0)],
                  lambda x, threshold=0.0, value=0.0: np.where(x > threshold, x, value), [0]),
    "bitwise_not": ([S(np.array([-3, 0, 7, 2 ** 40]))], lambda x: -x - 1, []),
    "bitwise_and": ([S(ints(6, high=100), ints(6, high=100)), S(np.array([-6, 5]), 3)],
                    lambda x, y: x & y, []),
    "bitwise_or": ([S(ints(6, high=100), ints(6, high=100))], lambda x, y: x | y, []),
    "bitwise_xor": ([S(ints(6, high=100), ints(6, high=100))], lambda x, y: x ^ y, []),
    "bitwise_left_shift": ([S(np.array([-9, -1, 3, 5, 7]), np.array([-1, 63, 2, 64, 0]))],
                           lambda x, y: np.array([0, -2 ** 63, 12, 0, 7]), []),
    "bitwise_right_shift": ([S(np.array([-9, -1, 300, 5, 7]), np.array([-1, 63, 2, 64, 0]))],
                            lambda x, y: np.array([-1, -1, 75, 0, 7]), []),
    "nan_to_num": ([S(np.array([1.5, np.nan, np.inf, -np.inf]), nan=0.5, posinf=9.0,
                      neginf=-8.0)], lambda x, nan, posinf, neginf: np.array(
                          [1.5, nan, posinf, neginf]), []),
    "erfc": ([S(f(6))], lambda x: 1 - _erf_ref(x), [0]),
    "sinc": ([S(away_from_zero(3, 4)), S(np.array([0.25, 0.5, -1.5]))],
             lambda x: np.where(x == 0, 1.0, np.sin(np.pi * x) / (np.pi * np.where(
                 x == 0, 1.0, x))), [0]),
    "heaviside": ([S(np.array([-1.5, 0.0, 2.0, np.nan]), np.array([0.25, 0.5, 0.75, 1.0]))],
                  lambda x, v: np.array([0.0, 0.5, 1.0, 0.0]), []),
    "fmax": ([S(f(3, 4), f(4))],
             lambda x, y: np.where(np.isnan(y) | (x > y), x, y), [0, 1]),
    "fmin": ([S(f(3, 4), f(4))], lambda x, y: np.where(np.isnan(y) | (x < y), x, y), [0, 1]),
    "xlogy": ([S(f(3, 4), pos(4))], lambda x, y: x * np.log(y), [0, 1]),
    "logaddexp2": ([S(f(3, 4), f(4)), S(f(4), f(4))],
                   lambda x, y: np.log2(2.0 ** x + 2.0 ** y), [0, 1]),
    "lgamma": ([S(np.array([0.25, 1.5, 3.0, 7.5, -0.5, -2.5]))],
               lambda x: np.vectorize(math.lgamma)(x), [0]),
    "digamma": ([S(np.array([0.25, 1.0, 1.5, 3.0, 12.5, -0.5, -2.25]))],
                lambda x: np.array([-4.2274535333762655, -0.5772156649015328,
                                    0.036489973978576194, 0.922784335098467,
                                    2.4851956512749123, 0.03648997397857639,
                                    4.158583564657972]), [0]),  # (PyTorch's values)
    "trigamma": ([S(np.array([0.25, 1.0, 3.0, 12.5, -0.5]))],
                 lambda x: np.array([17.19732915341456, math.pi ** 2 / 6, 0.39493406693194577,
                                     0.08328522460170883, 8.934802200117687]), []),
    "erfinv": ([S(np.array([-0.999, -0.5, 0.0, 0.25, 0.9, 0.9999]))],
               lambda x: np.array([-2.326753765513524, -0.4769362762044699, 0.0,
                                   0.22531205501217808, 1.1630871536766743,
                                   2.7510639057120607]), [0]),
    "where": ([S(f(3, 4) > 0, f(3, 4), f(4))], lambda c, x, y: np.choose(c.astype(int),
                                                                          [np.broadcast_to(
                                                                              y, c.shape),
                                                                           x]), [1, 2]),
    "sum": ([S(f(3, 4), dim=None, keepdim=False), S(f(3, 4, 2), dim=(0, 2), keepdim=True),
             S(f(3, 4), dim=(1,), keepdim=False)],
            lambda x, dim, keepdim: np.add.reduce(x, axis=dim, keepdims=keepdim), [0]),
    "mean": ([S(f(3, 4), dim=(1,), keepdim=False), S(f(3, 4), dim=None, keepdim=True)],
             lambda x, dim, keepdim: np.add.reduce(x, axis=dim, keepdims=keepdim)
             / (x.size / np.add.reduce(x, axis=dim, keepdims=keepdim).size), [0]),
    "prod": ([S(pos(3, 4), dim=(1,), keepdim=False), S(pos(5), dim=None, keepdim=False),
              S(np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.2, 0.7, 2.0]]), dim=(1,),
                keepdim=True)],
             lambda x, dim, keepdim: np.multiply.reduce(x, axis=dim, keepdims=keepdim), [0]),
    "amax": ([S(f(3, 4), dim=(1,), keepdim=False), S(f(3, 4), dim=None, keepdim=False)],
             lambda x, dim, keepdim: np.maximum.reduce(x, axis=dim, keepdims=keepdim), [0]),
    "amin": ([S(f(3, 4), dim=(0,), keepdim=True)],
             lambda x, dim, keepdim: np.minimum.reduce(x, axis=dim, keepdims=keepdim), [0]),
    "argmax": ([S(f(3, 4), dim=(1,), keepdim=False), S(f(3, 4), dim=None, keepdim=False)],
               lambda x, dim, keepdim: np.argsort(x.reshape(-1) if dim is None else x,
                                                  axis=-1 if dim is None else dim[0]).take(
                   -1, axis=-1 if dim is None else dim[0]), []),
    "argmin": ([S(f(3, 4), dim=(0,), keepdim=False)],
               lambda x, dim, keepdim: np.argsort(x, axis=0)[0], []),
    "any": ([S(f(3, 4) > 1, dim=(1,), keepdim=False)],
            lambda x, dim, keepdim: np.logical_or.reduce(x, axis=dim[0]), []),
    "all": ([S(f(3, 4) > -1.5, dim=None, keepdim=False)],
            lambda x, dim, keepdim: np.logical_and.reduce(x.reshape(-1)), []),
    "reshape": ([S(f(3, 4), shape=(2, 6)), S(f(4), shape=(2, 1, 2))],
                lambda x, shape: np.ascontiguousarray(x).reshape(shape), [0]),
    "permute": ([S(f(2, 3, 4), dims=(2, 0, 1))], lambda x, dims: np.moveaxis(x, dims,
                                                                             range(3)) * 0 +
                np.einsum("abc->cab", x), [0]),
    "transpose": ([S(f(2, 3, 4), dim0=0, dim1=2)], lambda x, dim0, dim1: np.einsum("abc->cba", x),
                  [0]),
    "expand": ([S(f(3, 1), shape=(2, 3, 4))], lambda x, shape: x + np.zeros(shape), [0]),
    "squeeze": ([S(f(3, 1, 4, 1), dims=(1, 3))], lambda x, dims: x.reshape(3, 4), [0]),
    "unsqueeze": ([S(f(3, 4), dim=1)], lambda x, dim: x.reshape(3, 1, 4), [0]),
    "sum_to": ([S(f(2, 3, 4), shape=(3, 1)), S(f(3, 4), shape=(1, 4))], _sum_to_ref, [0]),
    "cat": ([S(f(2, 3), f(4, 3), dim=0), S(f(2, 1), f(2, 3), f(2, 2), dim=1)],
            lambda *xs, dim: np.concatenate(xs, dim), [0, 1]),
    "clone": ([S(f(3, 4))], lambda x: x + 0, [0]),
    "detach": ([S(f(3, 4))], lambda x: x + 0, []),
    "view_dtype": ([S(f(3, 4), dtype=dt.int64), S(f(2, 4), dtype=dt.float32)],
                   lambda x, dtype: np.frombuffer(np.ascontiguousarray(x).tobytes(), dtype.np)
                   .reshape(x.shape[:-1] + (-1,)), []),
    "getitem": ([S(f(4, 5), index=(slice(1, 3), 2)), S(f(4, 5), index=(None, Ellipsis, 1)),
                 S(f(4, 5), _I, index=(Slot(0),)), S(f(4, 5), _I, _I, index=(Slot(0), Slot(1)))],
                lambda x, *idx, index: x[tuple(idx[i.k] if isinstance(i, Slot) else i
                                               for i in index)], [0]),
    "index_scatter": ([S(f(3, 5), _I, shape=(4, 5), index=(Slot(0),)),
                       S(f(2), shape=(4, 5), index=(slice(1, 3), 2))],
                      lambda g, *idx, shape, index: _scatter_ref(
                          g, np.broadcast_to(idx[0][:, None], g.shape), 0, shape)
                      if idx else np.pad(g[:, None], ((1, 1), (2, 2))), [0]),
    "setitem": ([S(f(4, 5), f(5), index=(slice(1, 3),)), S(f(4, 5), 0.5, index=(0, 1)),
                 S(f(4, 5), f(2, 5), np.array([0, 3]), index=(Slot(0),))],
                lambda x, v, *idx, index: _setitem_ref(x, v, idx, index), [0, 1]),
    "nonzero": ([S(np.array([[0.0, 1.5], [2.0, 0.0]]))], lambda x: np.array([[0, 1], [1, 0]]),
                []),
    "gather": ([S(f(3, 4), ints(3, 2), dim=1)], lambda x, idx, dim: np.array(
        [[x[i, idx[i, j]] for j in range(2)] for i in range(3)]), [0]),
    "scatter_add": ([S(f(3, 2), ints(3, 2), dim=1, shape=(3, 4))],
                    lambda g, idx, dim, shape: _scatter_ref(g, idx, dim, shape), [0]),
    "argsort": ([S(f(3, 4), dim=1), S(f(3, 4), dim=0, descending=True)],
                lambda x, dim, descending=False: np.argsort(-x if descending else x, axis=dim,
                                                            kind="stable"), []),
    "topk": ([S(f(3, 6), k=2, dim=1), S(f(5, 2), k=3, dim=0, largest=False)],
             lambda x, k, dim, largest=True: np.take(np.argsort(-x if largest else x, axis=dim,
                                                                kind="stable"), range(k),
                                                     axis=dim), []),
    "cumsum": ([S(f(3, 4), dim=1), S(f(4, 2), dim=0)],
               lambda x, dim: np.array([[x[:i + 1, j].sum() if dim == 0 else x[j, :i + 1].sum()
                                         for i in range(x.shape[dim])]
                                        for j in range(x.shape[1 - dim])]).T
               if dim == 0 else np.array([[x[j, :i + 1].sum() for i in range(x.shape[1])]
                                          for j in range(x.shape[0])]), [0]),
    "cumprod": ([S(f(3, 4), dim=1), S(np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 1.5, 0.0, 2.0]]),
                                       dim=1)],
                lambda x, dim: np.array([[np.prod(x[j, :i + 1]) for i in range(x.shape[1])]
                                         for j in range(x.shape[0])]), [0]),
    "argcummax": ([S(np.array([[1.0, 3.0, 2.0, 3.0, 0.0]]), dim=1)],
                  lambda x, dim: np.array([[0, 1, 1, 3, 3]]), []),
    "argcummin": ([S(np.array([[1.0, 3.0, 1.0, -1.0, 0.0]]), dim=1)],
                  lambda x, dim: np.array([[0, 0, 2, 3, 3]]), []),
    "searchsorted": ([S(np.array([1.0, 3.0, 5.0]), np.array([0.0, 3.0, 6.0])),
                      S(np.array([1.0, 3.0, 5.0]), np.array([0.0, 3.0, 6.0]), right=True)],
                     lambda s, v, right=False: np.array([sum(b < x or (right and b == x)
                                                             for b in s) for x in v]), []),
    "unique_values": ([S(np.array([3.0, 1.0, 3.0, -2.0]))],
                      lambda x: np.array(sorted(set(x.tolist()))), []),
    "bincount": ([S(np.array([1, 1, 3])), S(np.array([0, 2]), np.array([0.5, 1.5]),
                                             minlength=4)],
                 lambda x, *w, minlength=0: np.array(
                     [sum(w[0][k] if w else 1 for k, v in enumerate(x) if v == b)
                      for b in range(max(minlength, x.max() + 1))]), []),
    "repeat_index": ([S(np.array([2, 0, 1]))], lambda r: np.array([0, 0, 2]), []),
    "scatter": ([S(f(3, 4), np.array([[0, 2], [1, 3], [3, 0]]), f(3, 2), dim=1),
                 S(f(2, 3), np.array([[1, 0, 1]]), 2.5, dim=0)],
                lambda x, i, s, dim: _scatter_into(x, i, s, dim, lambda old, new: new),
                [0, 2]),
    "scatter_reduce": ([S(f(3, 4), np.array([[0, 2], [1, 3], [3, 0]]), f(3, 2), dim=1,
                          reduce="amax"),
                        S(f(3, 4), np.array([[0, 0], [1, 1], [3, 0]]), f(3, 2), dim=1,
                          reduce="prod", include_self=False)],
                       lambda x, i, s, dim, reduce, include_self=True: _scatter_into(
                           x, i, s, dim, max if reduce == "amax" else lambda a, b: a * b,
                           include_self), [0, 2]),
    "matmul": ([S(f(3, 4), f(4, 2)), S(f(4), f(4, 2)), S(f(3, 4), f(4)), S(f(4), f(4)),
                S(f(2, 3, 4), f(4, 5)), S(f(2, 1, 3, 4), f(5, 4, 2))],
               lambda a, b: np.einsum("...ij,...jk->...ik", a.reshape((1,) * (a.ndim == 1) +
                                                                      a.shape),
                                      b.reshape(b.shape + (1,) * (b.ndim == 1))).reshape(
                   np.matmul(a, b).shape), [0, 1]),
    "unfold2d": ([S(f(2, 3, 5, 6), kernel=(3, 2), stride=(1, 2), padding=(1, 0),
                    dilation=(1, 1)),
                  S(f(1, 2, 7, 7), kernel=(2, 2), stride=(2, 3), padding=(1, 1),
                    dilation=(2, 1), value=-1.5)], _unfold_ref, [0]),
    "fold2d": ([S(f(2, 3, 3, 2, 5, 3), shape=(2, 3, 5, 6), kernel=(3, 2), stride=(1, 2),
                  padding=(1, 0), dilation=(1, 1)),
                S(f(1, 2, 2, 2, 4, 3), shape=(1, 2, 7, 7), kernel=(2, 2), stride=(2, 3),
                  padding=(1, 1), dilation=(2, 1))], _fold_ref, [0]),
    "constant": ([S(value=np.arange(6.0).reshape(2, 3))], lambda value: value, []),
    "full": ([S(shape=(2, 3), value=1.5, dtype=None)],
             lambda shape, value, dtype: np.ones(shape) * value, []),
    "arange": ([S(start=1, end=7, step=2, dtype=None)],
               lambda start, end, step, dtype: np.array([1.0, 3.0, 5.0]), []),
    "eye": ([S(n=3, m=2, dtype=None)], lambda n, m, dtype: np.array([[1.0, 0], [0, 1], [0, 0]]),
            []),
    "linspace": ([S(start=0.0, end=1.0, steps=5, dtype=None)],
                 lambda start, end, steps, dtype: np.arange(5) / 4, []),
    "rand": ([S(shape=(3, 4), dtype=None)], None, []),
    "randn": ([S(shape=(3, 4), dtype=None)], None, []),
    "randint": ([S(low=0, high=5, shape=(3, 4), dtype=None)], None, []),
    "randperm": ([S(n=7, dtype=None)], None, []),
    "rnn_scan": ([_rnn_case(m) for m in ("LSTM", "GRU", "RNN_TANH", "RNN_RELU")],
                 _cells_ref, [0, 1, 2, 3, 4]),
    "rnn_scan_backward": ([_rnn_backward_case(m) for m in ("LSTM", "GRU", "RNN_TANH",
                                                            "RNN_RELU")],
                          _rnn_backward_ref, []),
}


def _setitem_ref(x, v, idx, index):
    out = x.copy()
    out[tuple(idx[i.k] if isinstance(i, Slot) else i for i in index)] = v
    return out
