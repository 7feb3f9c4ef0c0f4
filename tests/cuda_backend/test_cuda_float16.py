"""float16 kernels on the CUDA device (the autocast dtype on GPUs), on the simulator: fused
regions and eager elementwise ops run as kernels in float32 registers rounded to float16
after each op, so they give the CPU's eager bits, with no copy through the host."""
from __future__ import annotations

import numpy as np

import tracejit as tj
from tracejit import nn
from tracejit.tensor.device import STATS


def chain(x, b):
    return ((x + b).tanh() * 0.5 + 1).sigmoid() - (x * x).exp() / (b.abs() + 1.3)


def _host_trips() -> int:
    return sum(STATS["host"].values())


def test_a_traced_float16_region_is_one_kernel_with_eagers_bits():
    x, b = tj.randn(5, 7).to(tj.float16), tj.randn(7).to(tj.float16)
    want = chain(x, b).numpy()
    traced = tj.trace(chain, (x.cuda(), b.cuda()), backend="cuda")
    kernels, trips = STATS["kernels"]["fused[elementwise]"], _host_trips()
    got = traced(x.cuda(), b.cuda())
    assert got.dtype is tj.float16 and got.is_cuda
    assert STATS["kernels"]["fused[elementwise]"] == kernels + 1 and _host_trips() == trips
    np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_eager_float16_ops_on_the_device_give_the_cpus_values():
    x = tj.randn(4, 6).to(tj.float16)
    y = tj.randn(6).to(tj.float16)
    trips = _host_trips()
    for fn in (lambda a, c: a * 3 + c, lambda a, c: (a - c).tanh(), lambda a, c: a / (c.abs()
               + 1), lambda a, c: a.sigmoid() * 2.5, lambda a, c: (a > c).to(tj.float16) + a):
        got = fn(x.cuda(), y.cuda())
        want = fn(x, y)
        assert got.dtype is want.dtype and got.is_cuda
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    assert _host_trips() == trips


def test_float16_meets_float32_as_eager_promotes():
    x, y = tj.randn(3, 4).to(tj.float16), tj.randn(3, 4)
    traced = tj.trace(lambda a, c: (a * 2 + c).relu(), (x.cuda(), y.cuda()), backend="cuda")
    got = traced(x.cuda(), y.cuda())
    want = (x * 2 + y).relu()
    assert got.dtype is tj.float32 is want.dtype
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_a_traced_layer_under_cuda_autocast_runs_its_epilogue_in_float16():
    layer = nn.Linear(8, 6).cuda()
    x = tj.randn(4, 8).cuda()

    def step(x):
        return nn.functional.gelu(layer(x)) * 0.5 + 1

    with tj.autocast("cuda", dtype=tj.float16):
        want = step(x)
        traced = tj.trace(step, (x,), backend="cuda")
        kernels = STATS["kernels"]["fused[elementwise]"]
        got = traced(x)
    # bias, GELU and the affine tail: one float16 kernel (the float16 matmul itself still
    # goes through the host: the tiled kernel is float32's)
    assert STATS["kernels"]["fused[elementwise]"] == kernels + 1
    assert want.dtype is tj.float16 and got.dtype is tj.float16
    np.testing.assert_allclose(got.detach().cpu().numpy().astype(np.float32),
                               want.detach().cpu().numpy().astype(np.float32), rtol=2e-3,
                               atol=2e-3)


def test_float16_row_kernels_accumulate_in_float32_on_the_device():
    """A traced softmax and a row norm of float16 values, and eager float16 sums over the
    last dimension: row kernels on the device (float16 loads in float32 registers, sums
    accumulated in float32 and rounded once), near the float32 result rounded to float16."""
    def rows(x, g):
        return x.softmax(-1) * g, (x * x).mean(-1, keepdim=True).sqrt()

    x, g = (tj.randn(6, 33) * 3).to(tj.float16), tj.randn(33).to(tj.float16)
    want = [w.to(tj.float16).numpy().astype(np.float32)
            for w in rows(x.to(tj.float32), g.to(tj.float32))]
    traced = tj.trace(rows, (x.cuda(), g.cuda()), backend="cuda")
    traced(x.cuda(), g.cuda())
    kernels, trips = STATS["kernels"]["fused[row]"], _host_trips()
    got = traced(x.cuda(), g.cuda())
    assert STATS["kernels"]["fused[row]"] > kernels and _host_trips() == trips
    for a, w in zip(got, want):
        assert a.dtype is tj.float16 and a.is_cuda
        np.testing.assert_allclose(a.cpu().numpy().astype(np.float32), w, rtol=2e-3,
                                   atol=2e-3)
    for reduce in (lambda a: a.sum(-1), lambda a: a.amax(-1), lambda a: a.mean()):
        got = reduce(x.cuda())
        assert got.dtype is tj.float16 and _host_trips() == trips
        np.testing.assert_allclose(got.cpu().numpy().astype(np.float32),
                                   reduce(x.to(tj.float32)).numpy(), rtol=2e-3, atol=2e-2)


def test_a_float16_matmul_on_the_device_accumulates_in_float32():
    a, b = tj.randn(5, 37).to(tj.float16), tj.randn(37, 6).to(tj.float16)
    trips = _host_trips()
    got = a.cuda() @ b.cuda()
    assert got.dtype is tj.float16 and got.is_cuda and _host_trips() == trips
    want = (a.to(tj.float32) @ b.to(tj.float32)).to(tj.float16).numpy().astype(np.float32)
    np.testing.assert_allclose(got.cpu().numpy().astype(np.float32), want, rtol=2e-3,
                               atol=2e-3)
