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
