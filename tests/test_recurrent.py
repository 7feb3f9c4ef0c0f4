"""A recurrent layer's steps as one op (ops/recurrent.py: rnn_scan and its adjoint): the
numpy implementation, the loop bodies uncompiled and compiled (with `gemm` into numpy's
BLAS, backends/numba_blas.py), nn.RNN/LSTM/GRU against PyTorch, traced programs that
serve every sequence length, the ONNX export as a Loop, and the refused second
derivative."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import numba_loops
from tracejit.ops import OPS, looplang
from tracejit.ops import recurrent as R

MODES = ("LSTM", "GRU", "RNN_TANH", "RNN_RELU")


def _inputs(mode, dtype=np.float64, steps=5, batch=3, hidden=4, seed=0):
    rng = np.random.default_rng(seed)
    width = R.GATES[mode] * hidden

    def draw(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(dtype)
    return (draw(steps, batch, width), draw(batch, hidden), draw(batch, hidden),
            draw(width, hidden, scale=0.5), draw(width))


def _history_grad(mode, dtype=np.float64, **kw):
    xg, h0, c0, w, b = _inputs(mode, dtype, **kw)
    s = OPS.rnn_scan.impl(xg, h0, c0, w, b, mode=mode)
    gs = np.random.default_rng(9).standard_normal(s.shape).astype(dtype)
    return gs, s, w


@pytest.mark.parametrize("mode", MODES)
def test_the_uncompiled_bodies_agree_with_impl(mode):
    """The loop bodies as plain Python are the ops' second definition."""
    args = _inputs(mode)
    want = OPS.rnn_scan.impl(*args, mode=mode)
    outs, body_args = OPS.rnn_scan.loops.args(*args, mode=mode)
    R.rnn_scan_loops(*body_args)
    np.testing.assert_allclose(outs[0], want, rtol=1e-12, atol=1e-14)
    gs, s, w = _history_grad(mode)
    want = OPS.rnn_scan_backward.impl(gs, s, w, mode=mode)
    outs, body_args = OPS.rnn_scan_backward.loops.args(gs, s, w, mode=mode)
    R.rnn_scan_backward_loops(*body_args)
    np.testing.assert_allclose(outs[0], want, rtol=1e-12, atol=1e-14)


def test_the_bodies_step_aside_for_mixed_or_integer_dtypes():
    xg, h0, c0, w, b = _inputs("LSTM")
    assert OPS.rnn_scan.loops.args(xg.astype(np.float32), h0, c0, w, b, mode="LSTM") is None
    assert OPS.rnn_scan.loops.args(*(a.astype(np.int64) for a in (xg, h0, c0, w, b)),
                                   mode="LSTM") is None
    # impl still computes them, in the promoted dtype
    s = OPS.rnn_scan.impl(xg.astype(np.float32), h0, c0, w, b, mode="LSTM")
    assert s.dtype == np.float64


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
def test_looplang_gemm_is_a_product_into_out(trans_b, beta):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4) if trans_b else (4, 5))
    out = rng.standard_normal((3, 5))
    want = a @ (b.T if trans_b else b) + beta * out
    looplang.gemm(a, b, out, trans_b, beta)
    np.testing.assert_allclose(out, want, rtol=1e-13)


@pytest.mark.compile
def test_compiled_gemm_calls_blas_and_falls_back_to_loops():
    import numba

    from tracejit.backends import numba_blas  # noqa: F401 (gives gemm its compiled meaning)

    @numba.njit
    def product(a, b, out, trans_b, beta):
        looplang.gemm(a, b, out, trans_b, beta)

    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64, np.int64):
        big = (rng.standard_normal((7, 12)) * 3).astype(dtype)
        cases = [(big[:, :5], big[:5, 6:11].T.copy().T, False),  # row-strided views
                 (big[:, ::2][:, :4], big[1:5, 1:6], False),     # a column stride: loops
                 (big[:3, :6], big[:4, :6], True),
                 (big[:3, :0], big[:0, :2], False)]              # k = 0: out = beta * out
        for a, b, trans_b in cases:
            for beta in (0.0, 1.0):
                out = np.ones((a.shape[0], b.shape[0] if trans_b else b.shape[1]), dtype)
                want = (a @ (b.T if trans_b else b) + beta * out).astype(dtype)
                product(a, b, out, trans_b, dtype(beta))
                np.testing.assert_allclose(out, want, rtol=1e-5)


@pytest.mark.compile
@pytest.mark.parametrize("mode", MODES)
def test_the_compiled_kernels_agree_with_impl(mode):
    for dtype, tol in ((np.float32, 2e-6), (np.float64, 1e-13)):
        args = _inputs(mode, dtype, steps=7, batch=5, hidden=9)
        kernel = numba_loops.loop_kernel(OPS.rnn_scan)
        want = OPS.rnn_scan.impl(*args, mode=mode)
        kernel(*args, mode=mode)
        tj.jit.wait_for_kernels()
        np.testing.assert_allclose(kernel(*args, mode=mode), want, rtol=tol, atol=tol)
        gs, s, w = _history_grad(mode, dtype, steps=7, batch=5, hidden=9)
        kernel = numba_loops.loop_kernel(OPS.rnn_scan_backward)
        want = OPS.rnn_scan_backward.impl(gs, s, w, mode=mode)
        kernel(gs, s, w, mode=mode)
        tj.jit.wait_for_kernels()
        np.testing.assert_allclose(kernel(gs, s, w, mode=mode), want, rtol=tol, atol=tol)
    for op in (OPS.rnn_scan, OPS.rnn_scan_backward):  # the kernels ran, not impl
        module = numba_loops.loop_kernel(op).module
        assert module.loops_serial.signatures or module.loops.signatures


def _pair(cls, torch, **kw):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, cls)(5, 4, **kw).double()
    ours = getattr(tj.nn, cls)(5, 4, **kw).double()
    ours.load_state_dict({k: tj.tensor(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})
    return theirs, ours


CONFIGS = [dict(), dict(num_layers=2), dict(bidirectional=True, num_layers=2),
           dict(bias=False), dict(batch_first=True)]


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("kw", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_layers_match_pytorch_with_gradients_of_outputs_and_states(cls, kw):
    torch = pytest.importorskip("torch")
    if cls == "RNN" and kw.get("bias") is False:
        kw = dict(kw, nonlinearity="relu")
    theirs, ours = _pair(cls, torch, **kw)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 3, 5))
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    batch = 6 if kw.get("batch_first") else 3
    h0 = rng.standard_normal((layers, batch, 4))
    c0 = rng.standard_normal((layers, batch, 4))
    tx, th, tc = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    jx, jh, jc = (tj.tensor(a, requires_grad=True) for a in (x, h0, c0))
    lstm = cls == "LSTM"
    t_out, t_state = theirs(tx, (th, tc) if lstm else th)
    j_out, j_state = ours(jx, (jh, jc) if lstm else jh)
    weights = rng.standard_normal(tuple(t_out.shape))

    def loss(lib, out, state):
        w = lib.tensor(weights)
        total = (out * w).sum() + (out ** 2).sum()
        return total + (state[0].sum() * 3 + (state[1] ** 2).sum() if lstm else
                        state.sum() * 3)
    loss(torch, t_out, t_state).backward()
    loss(tj, j_out, j_state).backward()
    np.testing.assert_allclose(j_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12,
                               atol=1e-13)
    for a, b in [(jx, tx), (jh, th)] + ([(jc, tc)] if lstm else []):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-11, atol=1e-12)
    ours_params = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(ours_params[name].grad.numpy(), p.grad.numpy(),
                                   rtol=1e-11, atol=1e-12, err_msg=name)


def test_a_layer_is_one_op_in_a_trace_and_serves_every_length():
    tj.manual_seed(0)
    layer = tj.nn.LSTM(3, 4, num_layers=2)

    def run(x):
        out, (h, c) = layer(x)
        return out.sum() + h.sum() + c.sum()

    traced = tj.trace(run, (tj.randn(5, 2, 3, requires_grad=True),))
    ops = [n.op for n in traced.graph.nodes]
    assert ops.count("rnn_scan") == 2, ops
    for steps, batch in ((5, 2), (9, 2), (1, 3), (17, 1)):
        x = tj.randn(steps, batch, 3, requires_grad=True)
        want = run(x)
        (want_grad,) = tj.autograd.grad(want, (x,))
        got = traced(x)
        (got_grad,) = tj.autograd.grad(got, (x,))
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-6)
    assert traced.stats["compiles"] == 1, traced.stats


@pytest.mark.compile
def test_a_compiled_program_runs_the_loop_kernels_and_gives_eagers_gradients():
    tj.manual_seed(1)
    layer = tj.nn.GRU(6, 8, batch_first=True)
    x = tj.randn(3, 11, 6, requires_grad=True)

    def run(x):
        out, h = layer(x)
        return (out ** 2).mean() + h.mean()

    want = run(x)
    grads = tj.autograd.grad(want, (x,) + tuple(layer.parameters()))
    traced = tj.trace(run, (x,), backend="numba")
    for _ in range(3):  # the kernels compile in the background; then they run
        got = traced(x)
        tj.jit.wait_for_kernels()
    got = traced(x)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for a, b in zip(tj.autograd.grad(got, (x,) + tuple(layer.parameters())), grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    for op in (OPS.rnn_scan, OPS.rnn_scan_backward):
        module = numba_loops.loop_kernel(op).module
        assert module.loops_serial.signatures or module.loops.signatures


def test_the_second_derivative_of_a_layer_is_refused_with_an_error():
    layer = tj.nn.LSTM(2, 3)
    x = tj.randn(4, 1, 2, requires_grad=True)
    out, _ = layer(x)
    (g,) = tj.autograd.grad(out.sum(), (x,), create_graph=True)
    with pytest.raises(RuntimeError, match="cannot be differentiated again"):
        g.sum().backward()


def test_an_empty_sequence_is_refused_as_pytorch_refuses_it():
    for cls in (tj.nn.LSTM, tj.nn.GRU, tj.nn.RNN):
        with pytest.raises(RuntimeError, match="sequence length to be larger than 0"):
            cls(3, 4)(tj.zeros(0, 2, 3))


def test_bad_shapes_are_named():
    xg, h0, c0, w, b = _inputs("LSTM")
    from tracejit.tensor import functional as T

    with pytest.raises(RuntimeError, match="gates of a hidden size 4 are 16 wide"):
        T.rnn_scan(tj.tensor(xg[:, :, :12]), tj.tensor(h0), tj.tensor(c0), tj.tensor(w),
                   tj.tensor(b), "LSTM")


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_the_onnx_export_is_a_loop_over_a_dynamic_length(cls):
    ort = pytest.importorskip("onnxruntime")
    tj.manual_seed(2)
    layer = getattr(tj.nn, cls)(4, 5, num_layers=2)

    def run(x):
        return layer(x)[0]

    model = tj.onnx.export(run, (tj.randn(3, 2, 4),), input_names=["x"],
                           dynamic_axes={"x": {0: "steps", 1: "batch"}})
    assert sum(n.op_type == "Loop" for n in model.graph.node) == 2
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for steps, batch in ((3, 2), (7, 1), (1, 4)):
        x = tj.randn(steps, batch, 4)
        with tj.no_grad():
            want = run(x).numpy()
        got = session.run(None, {"x": x.numpy()})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.compile
def test_eager_ops_with_loop_nests_run_them_compiled_where_numba_is_the_backend(
        monkeypatch):
    """Eager execution runs an op's compiled loop nest (backends.eager_impl) where numba
    is the default backend: the same values as impl (the nests of windows give impl's
    bits), and the kernels are the ones compiled programs use."""
    from tracejit import backends

    layer = tj.nn.LSTM(3, 5, num_layers=2)
    conv = tj.nn.Conv2d(2, 3, 3, padding=1)
    x = tj.randn(6, 2, 3, requires_grad=True)
    img = tj.randn(2, 2, 7, 7, requires_grad=True)

    def run():
        out = (layer(x)[0] ** 2).sum() + (conv(img) ** 2).sum()
        grads = tj.autograd.grad(out, (x, img) + tuple(layer.parameters()))
        return [out.detach().numpy()] + [g.numpy() for g in grads]

    want = run()  # TRACEJIT_BACKEND=interpret in the tests: impl
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    monkeypatch.setattr(backends, "_LOOP_KERNEL", [])
    run()
    tj.jit.wait_for_kernels()  # compiled (in the background for a user; here at once)
    got = run()
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    for name in ("rnn_scan", "rnn_scan_backward", "unfold2d", "fold2d"):
        module = numba_loops.loop_kernel(OPS[name]).module
        assert module.loops_serial.signatures or module.loops.signatures, name
    monkeypatch.setenv("TRACEJIT_EAGER_KERNELS", "0")  # the opt-out
    monkeypatch.setattr(backends, "_LOOP_KERNEL", [])
    assert backends.eager_impl(OPS.rnn_scan) is OPS.rnn_scan.impl
