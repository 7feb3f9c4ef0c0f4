"""Compiled graphs on CUDA: traced and scripted programs whose inputs are CUDA tensors run
their fused kernels and compiled backward on the device, against CPU eager."""
from __future__ import annotations

import numpy as np

import tracejit as tj
from tracejit import nn
from tracejit.tensor.device import STATS


def _kernels() -> dict:
    return dict(STATS["kernels"])


def _grads(module):
    return [p.grad.cpu().numpy() for p in module.parameters()]


def test_a_traced_training_loss_runs_fused_and_backward_on_the_device():
    tj.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
    lossf = nn.CrossEntropyLoss()
    x, y = tj.randn(5, 6), tj.randint(0, 3, (5,))
    want = lossf(model(x), y)
    want.backward()
    want_grads = _grads(model)
    model.zero_grad()
    model.cuda()
    traced = tj.trace(lambda a, b: lossf(model(a), b), (x.cuda(), y.cuda()))
    traced(x.cuda(), y.cuda()).backward()  # (the first call records)
    model.zero_grad()
    before, trips = _kernels(), dict(tj.cuda.stats()["host_round_trips"])
    got = traced(x.cuda(), y.cuda())
    assert got.device.type == "cuda"
    got.backward()
    after = _kernels()
    # every value stays on the device: no op copied through the host
    assert tj.cuda.stats()["host_round_trips"] == trips
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for g, h in zip(_grads(model), want_grads):
        np.testing.assert_allclose(g, h, rtol=1e-4, atol=1e-6)
    assert traced.stats["backward_kernels"] == 2 and traced.stats["backward_replays"] == 0
    fused = {k: after.get(k, 0) - before.get(k, 0) for k in after if k.startswith("fused")}
    assert fused.get("fused[elementwise]", 0) > 0 and fused.get("fused[row]", 0) > 0
    # another batch size: the same trace
    x2, y2 = tj.randn(9, 6), tj.randint(0, 3, (9,))
    np.testing.assert_allclose(traced(x2.cuda(), y2.cuda()).item(),
                               lossf(model.cpu()(x2), y2).item(), rtol=1e-5)
    assert traced.stats["compiles"] == 1
    assert "cuda.jit" in traced.code  # the kernels' CUDA source


def test_a_scripted_branch_and_loop_on_cuda_tensors():
    @tj.script
    def f(x, n: int):
        h = x
        for i in range(n):
            if h.sum() > 0:
                h = (h * 0.5 - 1).tanh()
            else:
                h = h + i
        return h

    for shape, n in (((3, 4), 3), ((2, 5), 0), ((4, 1), 5)):
        x = tj.randn(*shape)
        for sign in (1, -1):
            got = f((x.abs() * sign).cuda(), n)
            assert got.device.type == "cuda"
            np.testing.assert_allclose(got.cpu().numpy(), f(x.abs() * sign, n).numpy(),
                                       rtol=1e-5, atol=1e-6)
    assert any(tr.backend == "cuda" for tr in f.traces)


def test_a_traced_softmax_loss_forward_and_backward_on_the_device():
    def loss(x, g):
        return (x.softmax(-1) * g).sum()

    g = tj.randn(7)
    xs = [tj.randn(3, 7).requires_grad_(), tj.randn(5, 7).requires_grad_()]
    traced = tj.trace(loss, (xs[0].detach().cuda().requires_grad_(), g.cuda()))
    trips = dict(tj.cuda.stats()["host_round_trips"])
    for x in xs:
        want = loss(x, g)
        want.backward()
        dx = x.detach().cuda().requires_grad_()
        got = traced(dx, g.cuda())
        got.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(dx.grad.cpu().numpy(), x.grad.numpy(), rtol=1e-4,
                                   atol=1e-6)
    assert traced.stats["compiles"] == 1
    assert tj.cuda.stats()["host_round_trips"] == trips


def _rnn_loss(cell, xs, h):
    for t in range(xs.shape[0]):
        h = cell(xs[t], h)
    return (h * h).mean()


def test_a_variable_length_rnn_with_a_traced_cell_on_the_device():
    tj.manual_seed(1)
    cell = nn.RNNCell(3, 4)
    want_grads = []
    for n in (2, 4):
        xs = tj.randn(n, 2, 3, generator=tj.Generator().manual_seed(n))
        cell.zero_grad()
        _rnn_loss(cell, xs, tj.zeros(2, 4)).backward()
        want_grads.append(_grads(cell))
    cell.cuda()
    step = tj.trace(cell, (tj.randn(2, 3).cuda(), tj.zeros(2, 4).cuda()))
    compiles = []
    for n, want in zip((2, 4), want_grads):
        xs = tj.randn(n, 2, 3, generator=tj.Generator().manual_seed(n))
        cell.zero_grad()
        loss = _rnn_loss(step, xs.cuda(), tj.zeros(2, 4).cuda())
        assert loss.device.type == "cuda"
        loss.backward()
        for g, h in zip(_grads(cell), want):
            np.testing.assert_allclose(g, h, rtol=1e-4, atol=1e-6)
        compiles.append(step.stats["compiles"])
    # two traces (the first step's state needs no gradient, the later ones' do), and a
    # longer sequence needs no other
    assert compiles == [2, 2] and step.stats["backward_replays"] == 0


def test_a_scripted_per_sample_rnn_on_the_device():
    tj.manual_seed(2)

    class PerSample(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.RNN(3, 4)

        def forward(self, x, lengths):
            outs = []
            for i in range(x.shape[0]):
                n = int(lengths[i])
                out, h = self.rnn(x[i, :n].unsqueeze(1))
                outs.append(h[0, 0])
            return tj.stack(outs).sum()

    model = PerSample()
    x, lengths = tj.randn(2, 3, 3), tj.tensor([3, 1])
    want = model(x, lengths)
    want.backward()
    want_grads = _grads(model)
    model.zero_grad()
    model.cuda()
    scripted = tj.script(model)
    for call in range(2):  # the first call records, the second runs the program
        model.zero_grad()
        trips = dict(tj.cuda.stats()["host_round_trips"])
        got = scripted(x.cuda(), lengths.cuda())
        got.backward()
        if call:  # slicing, the steps, the stack and their gradients: all on the device
            assert tj.cuda.stats()["host_round_trips"] == trips
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5, atol=1e-6)
        for g, h in zip(_grads(model), want_grads):
            np.testing.assert_allclose(g, h, rtol=1e-4, atol=1e-6)
    assert scripted.stats["compiles"] == 1


def test_scripted_code_under_cuda_autocast_follows_eager_s_lists():
    import tracejit.nn.functional as F

    def ops(x, w, y):
        h = x @ w
        return (h, F.log_softmax(h, -1), F.softmax(h, -1), F.layer_norm(h, (5,)), h.sum(),
                h.exp(), F.cross_entropy(h, y), F.mse_loss(h, h * 2))

    x, w, y = tj.randn(4, 8).cuda(), tj.randn(8, 5).cuda(), tj.randint(0, 5, (4,)).cuda()
    with tj.autocast("cuda", dtype=tj.float16):
        want = ops(x, w, y)
        scripted = tj.script(ops, backend="interpret")
        scripted(x, w, y)
        got = scripted(x, w, y)
    assert [g.dtype for g in got] == [e.dtype for e in want]
    assert want[0].dtype == tj.float16 and want[1].dtype == tj.float32
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.cpu().numpy().astype(np.float64),
                                   e.cpu().numpy().astype(np.float64), rtol=2e-3, atol=2e-3)


def test_a_traced_graph_on_the_device_runs_as_one_host_program():
    """Forward and compiled backward on CUDA tensors run as generated functions over
    device arrays: no op goes through eager dispatch (tensor/device.py) per call."""
    import importlib

    device = importlib.import_module("tracejit.tensor.device")

    tj.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    x = tj.randn(3, 4)
    want = (model(x) * 2).sum()
    want.backward()
    want_grads = _grads(model)
    model.zero_grad()
    model.cuda()

    def loss(a):
        return (model(a) * 2).sum()

    traced = tj.trace(loss, (x.cuda(),))
    traced(x.cuda()).backward()  # (the first call records the backward)
    with tj.no_grad():  # (and the first without gradients records its own trace)
        traced(x.cuda())
    model.zero_grad()
    assert "# host program of" in traced.code and "fused" in traced.code
    calls = []
    real = device.compute
    device.compute = lambda op, args, attrs: calls.append(op.name) or real(op, args, attrs)
    try:
        got = traced(x.cuda())
        got.backward()
        with tj.no_grad():
            plain = traced(x.cuda())
    finally:
        device.compute = real
    # (the backward's seed, ones like the loss, is made eagerly; so are the gradients'
    # first values in .grad, clones)
    assert [c for c in calls if c not in ("full", "ones", "clone")] == [], calls
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    np.testing.assert_allclose(plain.item(), want.item(), rtol=1e-5)
    for g, h in zip(_grads(model), want_grads):
        np.testing.assert_allclose(g, h, rtol=1e-4, atol=1e-6)
    # a batch size the capture did not see: the same program
    x2 = tj.randn(6, 4)
    with tj.no_grad():
        np.testing.assert_allclose(traced(x2.cuda()).item(),
                                   (model.cpu()(x2) * 2).sum().item(), rtol=1e-5)
    assert traced.stats["compiles"] == 2  # one with gradients, one without


def test_a_row_region_output_smaller_than_its_frame_keeps_its_shape_on_the_device():
    """A per-channel [1, C, 1] value computed in a row region over [B, C, N], and a [N]
    value the same in every row: the shapes and values eager gives."""
    def norm(x):
        m = x.sum(2, keepdim=True).sum(0, keepdim=True) / 512
        c = x - m
        v = (c * c).sum(2, keepdim=True).sum(0, keepdim=True) / 512
        return c * (v + 1e-5).rsqrt(), m.sum() * 1, m.reshape(16), m * 2

    def scaled(x, y):
        s = y * y + 1
        h = x / s
        return (h - h.mean(-1, keepdim=True)) * s, s * 2

    for fn, args in ((norm, (tj.randn(8, 16, 64),)), (scaled, (tj.randn(3, 5), tj.randn(5)))):
        traced = tj.trace(fn, tuple(a.cuda() for a in args), backend="cuda")
        for got, want in zip(traced(*(a.cuda() for a in args)), fn(*args)):
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=2e-5, atol=2e-5)
