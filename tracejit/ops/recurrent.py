"""A recurrent layer's time loop as one primitive (`rnn_scan`) and its adjoint.

`rnn_scan(xg, h0, c0, w_hh, b_hh, mode)` runs the recurrence of one layer in one
direction over the whole sequence, given the input's projection `xg = x @ w_ih.T + b_ih`
for every step ([T, B, G*H], one product over the sequence, made by nn/rnn.py). Each
step multiplies the state by `w_hh` and applies the cell's gates (PyTorch's formulas and
gate order; `mode` is "LSTM", "GRU", "RNN_TANH" or "RNN_RELU"). Its result is the
layer's whole history `S` [T+1, B, W]: row 0 the initial state, row t+1 the state after
step t, each row [h | c | i f g o] for an LSTM (W = 6H), [h | r z n | hn] for a GRU
(hn: the state's part of the new gate, W = 5H), [h] for the plain cells. The layer's
outputs are slices of it; the gate columns are what the adjoint reads (and it takes
gradients for them too: every column of S is an output).

`rnn_scan_backward(gS, S, w_hh, mode)` runs the steps backwards: its rows 1..T are the
gradients of each step's gate pre-activations, [dxg | dgh] (one block when they are
equal, as for all but the GRU, whose new gate scales the state's part by r), and row 0
the initial state's gradients [dh0 | dc0]. The vjp of `rnn_scan` turns them into the
inputs' gradients, the weight's as one product over the sequence.

Both run as loop nests when compiled (the state's product is a `gemm` per step, each
gate a pass over the batch), and as numpy per step elsewhere. Higher-order gradients of a layer are
refused with an error (rnn_scan_backward's vjp raises).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes as dt
from .looplang import gemm
from .registry import INDEX, OPS, AVal, Loops, register
from .rules import aval_of

F = None  # tracejit.tensor.functional, bound by tracejit.ops

MODES = {"RNN_TANH": 0, "RNN_RELU": 1, "LSTM": 2, "GRU": 3}
GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def state_width(mode: str, hidden: int) -> int:
    """Columns of a row of S."""
    return {"LSTM": 6, "GRU": 5}.get(mode, 1) * hidden


def grad_width(mode: str, hidden: int) -> int:
    """Columns of a row of rnn_scan_backward's result."""
    return 2 * GATES[mode] * hidden if mode == "GRU" else GATES[mode] * hidden


def _sigmoid_np(x):
    e = np.exp(-np.abs(x))
    s = 1 / (1 + e)
    return np.where(x >= 0, s, e * s)


def _scan(xg, h0, c0, w_hh, b_hh, mode):
    steps, batch, _ = xg.shape
    hidden = h0.shape[-1]
    dtype = np.result_type(xg, h0, w_hh)
    xg, w_hh, b_hh = xg.astype(dtype, copy=False), w_hh.astype(dtype, copy=False), \
        b_hh.astype(dtype, copy=False)
    s = np.zeros((steps + 1, batch, state_width(mode, hidden)), dtype)
    s[0, :, :hidden] = h0
    if mode == "LSTM":
        s[0, :, hidden:2 * hidden] = c0
    H = hidden
    with np.errstate(over="ignore"):
        for t in range(steps):
            h = s[t, :, :H]
            gh = h @ w_hh.T + b_hh
            if mode == "LSTM":
                pre = xg[t] + gh
                i, f, o = (_sigmoid_np(pre[:, k * H:(k + 1) * H]) for k in (0, 1, 3))
                g = np.tanh(pre[:, 2 * H:3 * H])
                c = f * s[t, :, H:2 * H] + i * g
                s[t + 1, :, :H] = o * np.tanh(c)
                s[t + 1, :, H:2 * H] = c
                for k, gate in enumerate((i, f, g, o)):
                    s[t + 1, :, (2 + k) * H:(3 + k) * H] = gate
            elif mode == "GRU":
                r = _sigmoid_np(xg[t, :, :H] + gh[:, :H])
                z = _sigmoid_np(xg[t, :, H:2 * H] + gh[:, H:2 * H])
                hn = gh[:, 2 * H:]
                n = np.tanh(xg[t, :, 2 * H:] + r * hn)
                s[t + 1, :, :H] = (1 - z) * n + z * h
                s[t + 1, :, H:2 * H], s[t + 1, :, 2 * H:3 * H] = r, z
                s[t + 1, :, 3 * H:4 * H], s[t + 1, :, 4 * H:] = n, hn
            else:
                pre = xg[t] + gh
                s[t + 1] = np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)
    return s


def _scan_backward(gs, s, w_hh, mode):
    steps = s.shape[0] - 1
    batch = s.shape[1]
    H = w_hh.shape[1]
    gs = gs.astype(s.dtype, copy=False)
    w_hh = w_hh.astype(s.dtype, copy=False)
    d = np.zeros((steps + 1, batch, grad_width(mode, H)), s.dtype)
    dh = gs[steps, :, :H].copy()
    dc = gs[steps, :, H:2 * H].copy() if mode == "LSTM" else None
    for t in range(steps, 0, -1):
        row = s[t]
        if mode == "LSTM":
            c, i, f, g, o = (row[:, k * H:(k + 1) * H] for k in range(1, 6))
            gi, gf, gg, go = (gs[t, :, k * H:(k + 1) * H] for k in range(2, 6))
            tc = np.tanh(c)
            dc = dc + dh * o * (1 - tc * tc)
            d[t, :, :H] = (dc * g + gi) * i * (1 - i)
            d[t, :, H:2 * H] = (dc * s[t - 1, :, H:2 * H] + gf) * f * (1 - f)
            d[t, :, 2 * H:3 * H] = (dc * i + gg) * (1 - g * g)
            d[t, :, 3 * H:] = (dh * tc + go) * o * (1 - o)
            dh = d[t] @ w_hh + gs[t - 1, :, :H]
            dc = dc * f + gs[t - 1, :, H:2 * H]
        elif mode == "GRU":
            r, z, n, hn = (row[:, k * H:(k + 1) * H] for k in range(1, 5))
            gr, gz, gn, ghn = (gs[t, :, k * H:(k + 1) * H] for k in range(1, 5))
            dnp = (dh * (1 - z) + gn) * (1 - n * n)
            dr = (dnp * hn + gr) * r * (1 - r)
            dz = (dh * (s[t - 1, :, :H] - n) + gz) * z * (1 - z)
            d[t, :, :H], d[t, :, H:2 * H], d[t, :, 2 * H:3 * H] = dr, dz, dnp
            d[t, :, 3 * H:4 * H], d[t, :, 4 * H:5 * H] = dr, dz
            d[t, :, 5 * H:] = dnp * r + ghn
            dh = dh * z + d[t, :, 3 * H:] @ w_hh + gs[t - 1, :, :H]
        else:
            h = row[:, :H]
            d[t] = dh * (1 - h * h) if mode == "RNN_TANH" else dh * (h > 0)
            dh = d[t] @ w_hh + gs[t - 1, :, :H]
    d[0, :, :H] = dh
    if mode == "LSTM":
        d[0, :, H:2 * H] = dc
    return d


# ---- the same two ops as loop nests (compiled by the CPU backend; ops/registry.Loops) --
# The steps run in order; each is one `gemm` of the state by w_hh into `gh` and one pass
# over the batch and the hidden units. mode: 0 RNN_TANH, 1 RNN_RELU, 2 LSTM, 3 GRU.

def sigmoid(x, one):
    e = math.exp(-abs(x))
    s = one / (one + e)
    return s if x >= 0 else e * s


def rnn_scan_loops(xg, h0, c0, w_hh_t, b_hh, s, gh, row, hs, cs, tmp, mode, one):
    steps, batch, _ = xg.shape
    H = h0.shape[1]
    width = s.shape[2]
    for b in range(batch):
        for j in range(width):
            s[0, b, j] = 0
        for j in range(H):
            s[0, b, j] = h0[b, j]
            hs[b, j] = h0[b, j]
            cs[b, j] = c0[b, j]
            if mode == 2:
                s[0, b, H + j] = c0[b, j]
    # Each pass writes one array (a step's row of gates goes to `row`, then into s): LLVM
    # vectorises a pass whose writes it can tell apart from its reads, and a pass writing
    # two columns of one array, or reading what it writes at another offset, runs 6x
    # slower.
    for t in range(steps):
        gemm(hs, w_hh_t, gh, False, 0.0)
        if mode == 2:
            for k in range(4):
                for b in range(batch):
                    for j in range(H):
                        x = xg[t, b, k * H + j] + (gh[b, k * H + j] + b_hh[k * H + j])
                        row[b, (2 + k) * H + j] = math.tanh(x) if k == 2 else sigmoid(x, one)
            for b in range(batch):
                for j in range(H):
                    cs[b, j] = row[b, 3 * H + j] * cs[b, j] + row[b, 2 * H + j] * \
                        row[b, 4 * H + j]
            for b in range(batch):
                for j in range(H):
                    hs[b, j] = row[b, 5 * H + j] * math.tanh(cs[b, j])
            for b in range(batch):
                for j in range(H):
                    row[b, H + j] = cs[b, j]
        elif mode == 3:
            for k in range(2):
                for b in range(batch):
                    for j in range(H):
                        row[b, (1 + k) * H + j] = sigmoid(
                            xg[t, b, k * H + j] + (gh[b, k * H + j] + b_hh[k * H + j]), one)
            for b in range(batch):
                for j in range(H):
                    row[b, 4 * H + j] = gh[b, 2 * H + j] + b_hh[2 * H + j]
            for b in range(batch):
                for j in range(H):
                    tmp[b, j] = math.tanh(xg[t, b, 2 * H + j] + row[b, H + j] * row[b, 4 * H + j])
            for b in range(batch):
                for j in range(H):
                    hs[b, j] = (one - row[b, 2 * H + j]) * tmp[b, j] + row[b, 2 * H + j] * \
                        hs[b, j]
            for b in range(batch):
                for j in range(H):
                    row[b, 3 * H + j] = tmp[b, j]
        else:
            for b in range(batch):
                for j in range(H):
                    pre = xg[t, b, j] + (gh[b, j] + b_hh[j])
                    if mode == 0:
                        hs[b, j] = math.tanh(pre)
                    else:
                        hs[b, j] = pre if pre > 0 else pre - pre
        for b in range(batch):
            for j in range(H):
                row[b, j] = hs[b, j]
        for b in range(batch):
            for j in range(width):
                s[t + 1, b, j] = row[b, j]


def rnn_scan_backward_loops(gs, s, w_hh, d, dhs, dcs, nh, tmp, drow, mode, one):
    # dhs, dcs: the gradients flowing into a step from the later ones (passes as in
    # rnn_scan_loops, one array written by each)
    steps = s.shape[0] - 1
    batch = s.shape[1]
    H = w_hh.shape[1]
    at = 3 * H if mode == 3 else 0  # where the state's part of a row of d starts
    width = w_hh.shape[0]
    for b in range(batch):
        for j in range(d.shape[2]):
            d[0, b, j] = 0
        for j in range(H):
            dhs[b, j] = gs[steps, b, j]
            dcs[b, j] = gs[steps, b, H + j] if mode == 2 else 0
    for t in range(steps, 0, -1):
        if mode == 2:
            for b in range(batch):
                for j in range(H):
                    tmp[b, j] = math.tanh(s[t, b, H + j])
            for b in range(batch):
                for j in range(H):
                    o = s[t, b, 5 * H + j]
                    dcs[b, j] = dcs[b, j] + dhs[b, j] * o * (one - tmp[b, j] * tmp[b, j])
            for b in range(batch):
                for j in range(H):
                    i = s[t, b, 2 * H + j]
                    drow[b, j] = (dcs[b, j] * s[t, b, 4 * H + j] + gs[t, b, 2 * H + j]) * i * \
                        (one - i)
            for b in range(batch):
                for j in range(H):
                    f = s[t, b, 3 * H + j]
                    drow[b, H + j] = (dcs[b, j] * s[t - 1, b, H + j] + gs[t, b, 3 * H + j]) * \
                        f * (one - f)
            for b in range(batch):
                for j in range(H):
                    g = s[t, b, 4 * H + j]
                    drow[b, 2 * H + j] = (dcs[b, j] * s[t, b, 2 * H + j] + gs[t, b, 4 * H + j]) \
                        * (one - g * g)
            for b in range(batch):
                for j in range(H):
                    o = s[t, b, 5 * H + j]
                    drow[b, 3 * H + j] = (dhs[b, j] * tmp[b, j] + gs[t, b, 5 * H + j]) * o * \
                        (one - o)
            for b in range(batch):
                for j in range(H):
                    dcs[b, j] = dcs[b, j] * s[t, b, 3 * H + j] + gs[t - 1, b, H + j]
        elif mode == 3:
            for b in range(batch):
                for j in range(H):
                    z = s[t, b, 2 * H + j]
                    n = s[t, b, 3 * H + j]
                    tmp[b, j] = (dhs[b, j] * (one - z) + gs[t, b, 3 * H + j]) * (one - n * n)
            for k in range(2):  # r's gradient in both blocks of the row
                for b in range(batch):
                    for j in range(H):
                        r = s[t, b, H + j]
                        drow[b, 3 * k * H + j] = (tmp[b, j] * s[t, b, 4 * H + j] +
                                                  gs[t, b, H + j]) * r * (one - r)
            for k in range(2):  # z's
                for b in range(batch):
                    for j in range(H):
                        z = s[t, b, 2 * H + j]
                        drow[b, (3 * k + 1) * H + j] = (
                            dhs[b, j] * (s[t - 1, b, j] - s[t, b, 3 * H + j]) +
                            gs[t, b, 2 * H + j]) * z * (one - z)
            for b in range(batch):
                for j in range(H):
                    drow[b, 2 * H + j] = tmp[b, j]
            for b in range(batch):
                for j in range(H):
                    drow[b, 5 * H + j] = tmp[b, j] * s[t, b, H + j] + gs[t, b, 4 * H + j]
        else:
            for b in range(batch):
                for j in range(H):
                    h = s[t, b, j]
                    if mode == 0:
                        drow[b, j] = dhs[b, j] * (one - h * h)
                    else:
                        drow[b, j] = dhs[b, j] if h > 0 else dhs[b, j] - dhs[b, j]
        for b in range(batch):
            for j in range(d.shape[2]):
                d[t, b, j] = drow[b, j]
        gemm(drow[:, at:at + width], w_hh, nh, False, 0.0)
        for b in range(batch):
            for j in range(H):
                carry = dhs[b, j] * s[t, b, 2 * H + j] if mode == 3 else dhs[b, j] - dhs[b, j]
                dhs[b, j] = carry + nh[b, j] + gs[t - 1, b, j]
    for b in range(batch):
        for j in range(H):
            d[0, b, j] = dhs[b, j]
            if mode == 2:
                d[0, b, H + j] = dcs[b, j]


_LOOP_DTYPES = (np.float32, np.float64)  # dtype types (dtype.name costs 2 us)


def _scan_args(xg, h0, c0, w_hh, b_hh, mode):
    dtype = xg.dtype
    if dtype.type not in _LOOP_DTYPES or any(a.dtype != dtype for a in (h0, c0, w_hh, b_hh)):
        return None
    steps, batch, width = xg.shape
    hidden = h0.shape[-1]
    s = np.empty((steps + 1, batch, state_width(mode, hidden)), dtype)
    gh = np.empty((batch, width), dtype)
    row = np.empty((batch, s.shape[2]), dtype)
    hs, cs, tmp = (np.empty((batch, hidden), dtype) for _ in range(3))
    c = np.ascontiguousarray
    # w_hh transposed once ([H, G*H]): OpenBLAS multiplies by a transposed operand
    # 1.5-3x slower at these shapes
    return (s,), (c(xg), c(h0), c(c0), c(w_hh.T), c(b_hh), s, gh, row, hs, cs, tmp, MODES[mode],
                  dtype.type(1))


def _scan_backward_args(gs, s, w_hh, mode):
    dtype = s.dtype
    if dtype.type not in _LOOP_DTYPES or gs.dtype != dtype or w_hh.dtype != dtype:
        return None
    steps, batch = s.shape[0] - 1, s.shape[1]
    hidden = w_hh.shape[1]
    d = np.empty((steps + 1, batch, grad_width(mode, hidden)), dtype)
    scratch = [np.empty((batch, hidden), dtype) for _ in range(4)] + [
        np.empty((batch, d.shape[2]), dtype)]
    c = np.ascontiguousarray
    return (d,), (c(gs), c(s), c(w_hh), d, *scratch, MODES[mode], dtype.type(1))


# ---- shapes and gradients -------------------------------------------------------------

def _infer_scan(xg, h0, c0, w_hh, b_hh, mode):
    x, h, c, w, b = (aval_of(a) for a in (xg, h0, c0, w_hh, b_hh))
    if mode not in MODES:
        raise RuntimeError(f"rnn_scan: unknown mode {mode!r} (expected one of {list(MODES)})")
    hidden = h.shape[-1] if h.ndim == 2 else None
    gates = GATES[mode]
    if x.ndim != 3 or h.ndim != 2 or c.shape != h.shape or w.ndim != 2 or b.ndim != 1:
        raise RuntimeError(
            f"rnn_scan: expected xg [T, B, G*H], h0 and c0 [B, H], w_hh [G*H, H] and b_hh "
            f"[G*H]; got {list(x.shape)}, {list(h.shape)}, {list(c.shape)}, "
            f"{list(w.shape)} and {list(b.shape)}")
    want = (x.shape[2], gates * hidden, w.shape[0], b.shape[0])
    concrete = [v for v in want if isinstance(v, int)]
    if len(set(concrete)) > 1 or (isinstance(w.shape[1], int) and w.shape[1] != hidden):
        raise RuntimeError(
            f"rnn_scan ({mode}): the gates of a hidden size {hidden} are {gates * hidden} "
            f"wide; got xg {list(x.shape)}, w_hh {list(w.shape)}, b_hh {list(b.shape)}")
    dtype = dt.result_type(x, h, w)
    return AVal((x.shape[0] + 1, x.shape[1], state_width(mode, hidden)), dtype)


def _infer_scan_backward(gs, s, w_hh, mode):
    a, w = aval_of(s), aval_of(w_hh)
    return AVal((a.shape[0], a.shape[1], grad_width(mode, w.shape[1])), a.dtype)


def _scan_vjp(g, out, xg, h0, c0, w_hh, b_hh, mode):
    d = F.apply(OPS.rnn_scan_backward, g, out, w_hh, mode=mode)
    width = xg.shape[2]
    hidden = h0.shape[1]
    at = 3 * hidden if mode == "GRU" else 0
    dxg = d[1:, :, :width]
    dgh = d[1:, :, at:at + width] if at else dxg
    flat = dgh.reshape(-1, width)
    dw = F.matmul(flat.transpose(0, 1), out[:-1, :, :hidden].reshape(-1, hidden))
    db = flat.sum(0)
    dc0 = d[0, :, hidden:2 * hidden] if mode == "LSTM" else None
    return dxg, d[0, :, :hidden], dc0, dw, db


register(
    "rnn_scan", INDEX, _scan, _infer_scan, _scan_vjp, saves=(3,), save_out=True,
    grad_name="RnnScanBackward0", arity=5,
    loops=Loops(rnn_scan_loops, _scan_args, helpers=(sigmoid,)))
def _no_second_order(g, out, gs, s, w_hh, mode):
    raise RuntimeError(
        "the gradient of a recurrent layer (nn.RNN, nn.LSTM, nn.GRU) cannot be "
        "differentiated again yet: rnn_scan_backward has no gradient of its own (use the "
        "cells, nn.LSTMCell and the others, in a loop for higher-order gradients)")


register(
    "rnn_scan_backward", INDEX, _scan_backward, _infer_scan_backward, _no_second_order,
    arity=3,
    loops=Loops(rnn_scan_backward_loops, _scan_backward_args))
