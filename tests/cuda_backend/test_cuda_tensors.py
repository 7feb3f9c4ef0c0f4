"""CUDA tensors (on the simulator): creation and moves, PyTorch's device errors, eager ops
as kernels or counted host round trips, autograd and an optimiser step on the device,
all against the same program on the CPU."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn


def test_tensors_move_between_devices_and_say_where_they_are():
    assert tj.cuda.is_available() and tj.cuda.device_count() >= 1
    x = tj.tensor([1.0, 2.0, 3.0], device="cuda")
    assert x.device == "cuda:0" and x.is_cuda and str(x.device) == "cuda:0"
    assert "device='cuda:0'" in repr(x)
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy. "
                                        "Use Tensor.cpu()"):
        x.numpy()
    np.testing.assert_array_equal(x.cpu().numpy(), [1, 2, 3])
    assert x.sum().item() == 6.0 and x.tolist() == [1.0, 2.0, 3.0]
    y = tj.randn(2, 3).cuda()
    assert y.device.type == "cuda" and y.to("cpu").device == "cpu"
    assert tj.zeros(2, 2, device="cuda").is_cuda and tj.ones(3, device="cuda").is_cuda


def test_an_op_mixing_devices_names_both():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, "
                                           "but found at least two devices, cuda:0 and cpu"):
        tj.ones(3, device="cuda") + tj.ones(3)
    # a 0-dim CPU tensor goes with CUDA tensors, as in PyTorch
    np.testing.assert_allclose((tj.ones(3, device="cuda") * tj.tensor(2.0)).cpu().numpy(), 2)


def _pairs(*arrays):
    return [tj.from_numpy(a) for a in arrays], [tj.from_numpy(a).cuda() for a in arrays]


def test_elementwise_ops_run_as_kernels_and_equal_the_cpu():
    rng = np.random.default_rng(0)
    (x, b), (gx, gb) = _pairs(rng.standard_normal((4, 5)).astype(np.float32),
                              rng.standard_normal(5).astype(np.float32))
    before = tj.cuda.stats()["kernels"].get("tanh", 0)

    def f(x, b):
        return ((x + b).tanh() * 0.5 - x.exp() / (b.abs() + 1)).sigmoid()
    np.testing.assert_allclose(f(gx, gb).cpu().numpy(), f(x, b).numpy(), rtol=2e-6,
                               atol=1e-6)
    assert tj.cuda.stats()["kernels"]["tanh"] == before + 1
    np.testing.assert_array_equal((gx > gb).cpu().numpy(), (x > b).numpy())


def test_other_ops_copy_through_the_host_and_are_counted():
    x = tj.randn(3, 4)
    gx = x.cuda()
    before = dict(tj.cuda.stats()["host_round_trips"])
    np.testing.assert_allclose(gx.sum(0).cpu().numpy(), x.sum(0).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(gx.argmax(1).cpu().numpy(), x.argmax(1).numpy())
    after = tj.cuda.stats()["host_round_trips"]
    assert after["sum"] == before.get("sum", 0) + 1
    assert after["argmax"] == before.get("argmax", 0) + 1


def test_reshapes_and_2d_transposes_stay_on_the_device():
    x = tj.randn(3, 4)
    gx = x.cuda()
    trips = dict(tj.cuda.stats()["host_round_trips"])
    np.testing.assert_allclose(gx.reshape(2, 6).cpu().numpy(), x.reshape(2, 6).numpy())
    np.testing.assert_allclose(gx.t().cpu().numpy(), x.t().numpy())
    np.testing.assert_allclose(gx.unsqueeze(0).squeeze(0).cpu().numpy(), x.numpy())
    np.testing.assert_allclose((gx.t() * 2).cpu().numpy(), (x.t() * 2).numpy())
    assert tj.cuda.stats()["host_round_trips"] == trips


def test_matmul_runs_the_tiled_kernel():
    a, b = tj.randn(5, 7), tj.randn(7, 3)
    before = tj.cuda.stats()["kernels"].get("matmul", 0)
    np.testing.assert_allclose((a.cuda() @ b.cuda()).cpu().numpy(), (a @ b).numpy(),
                               rtol=1e-5, atol=1e-6)
    assert tj.cuda.stats()["kernels"]["matmul"] == before + 1


def test_gradients_on_the_device_equal_the_cpus():
    rng = np.random.default_rng(1)
    (x, w), (gx, gw) = _pairs(rng.standard_normal((4, 3)).astype(np.float32),
                              rng.standard_normal((3, 2)).astype(np.float32))
    for t in (x, w, gx, gw):
        t.requires_grad_()

    def loss(x, w):
        return ((x @ w).tanh() * x.sum(-1, keepdim=True)).sum()
    loss(x, w).backward()
    loss(gx, gw).backward()
    assert gx.grad.is_cuda and gw.grad.is_cuda
    np.testing.assert_allclose(gx.grad.cpu().numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.grad.cpu().numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)
    # a gradient through a move comes back to the source device
    h = tj.randn(3, requires_grad=True)
    (h.cuda() * 2).sum().backward()
    assert h.grad.device == "cpu"
    np.testing.assert_allclose(h.grad.numpy(), 2)


def test_a_model_trains_on_the_device_as_on_the_cpu():
    def run(device):
        tj.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
        model.to(device)
        opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = tj.from_numpy(np.random.default_rng(2).standard_normal((5, 4)).astype(
            np.float32)).to(device)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.cpu().detach().numpy() for p in model.parameters()], model
    cpu_losses, cpu_params, _ = run("cpu")
    gpu_losses, gpu_params, model = run("cuda")
    assert all(p.is_cuda for p in model.parameters())
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    for g, c in zip(gpu_params, cpu_params):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)


def test_in_place_ops_update_the_device_array_but_not_through_view_copies():
    x = tj.ones(4, device="cuda")
    with tj.no_grad():
        x.add_(2)
    np.testing.assert_array_equal(x.cpu().numpy(), 3)
    v = x.reshape(2, 2)   # a copy standing for a view
    with pytest.raises(NotImplementedError, match="views"):
        v.mul_(2)
    with pytest.raises(NotImplementedError, match="views"):
        x.mul_(2)         # its base too, while the copy lives: it would not see the update
    del v
    with tj.no_grad():
        x.mul_(2)         # no copy left to disagree with
    np.testing.assert_array_equal(x.cpu().numpy(), 6)
    w = tj.ones(2, device="cuda", requires_grad=True)
    with pytest.raises(NotImplementedError, match="record gradients"):
        w.add_(1)


def test_memory_allocated_counts_live_device_tensors():
    import gc

    gc.collect()
    base = tj.cuda.memory_allocated()
    x = tj.zeros(1000, device="cuda")
    assert tj.cuda.memory_allocated() >= base + 4000
    assert tj.cuda.max_memory_allocated() >= tj.cuda.memory_allocated()
    del x
    gc.collect()
    assert tj.cuda.memory_allocated() <= base
    tj.cuda.empty_cache()
    tj.cuda.synchronize()


def test_a_cpu_trace_called_with_cuda_tensors_traces_again_on_the_device():
    f = tj.trace(lambda x: (x * 2).tanh(), (tj.randn(3),))
    x = tj.randn(3)
    out = f(x.cuda())  # the CPU trace's guards refuse a device array: a new trace
    assert out.device.type == "cuda" and len(f.traces) == 2
    assert f.traces[1].backend == "cuda"
    np.testing.assert_allclose(out.cpu().numpy(), (x * 2).tanh().numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="all be on one device"):
        tj.trace(lambda a, b: a + b, (tj.randn(3).cuda(), tj.randn(3)))


def test_moves_reuse_one_autograd_function():
    from tracejit.tensor import function

    tj.randn(2, requires_grad=True).cuda()
    before = len(function._node_classes)
    for _ in range(3):
        x = tj.randn(2, requires_grad=True)
        assert x.cuda().cpu().grad_fn.name() == "ToCopyBackward"
    assert len(function._node_classes) == before


def test_reductions_over_the_last_dim_or_everything_run_as_row_kernels():
    x = tj.randn(5, 9)
    g = x.cuda()
    before = dict(tj.cuda.stats()["kernels"])
    trips = dict(tj.cuda.stats()["host_round_trips"])
    cases = [lambda t: t.sum(), lambda t: t.sum(-1), lambda t: t.mean(-1, keepdim=True),
             lambda t: t.amax(-1), lambda t: t.amin(), lambda t: t.mean()]
    for f in cases:
        got, want = f(g), f(x)
        assert got.device.type == "cuda" and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    after = tj.cuda.stats()["kernels"]
    assert sum(after.values()) - sum(before.values()) == len(cases)
    assert tj.cuda.stats()["host_round_trips"] == trips
    nan = tj.tensor([[1.0, float("nan"), 3.0]]).cuda()
    assert np.isnan(nan.amax(-1).cpu().numpy()).all()  # NaN propagates, as on the CPU


def test_comparisons_where_any_all_and_column_sums_stay_on_the_device():
    from tracejit.tensor import functional as F

    t, x = tj.tensor([0, 1, 2, -100]), tj.randn(4)
    big = tj.randn(6, 5, 7)
    cases = [(lambda a, b, c: a != -100), (lambda a, b, c: a < 2), (lambda a, b, c: b >= 0.5),
             (lambda a, b, c: tj.where(b > 0, b, b * 2)),
             (lambda a, b, c: tj.where(b > 0, b, 0.0)),
             (lambda a, b, c: F.sum_to(c, (7,))), (lambda a, b, c: (a == 1).any()),
             (lambda a, b, c: (c > -5).all()), (lambda a, b, c: tj.any(c > 1, -1))]
    trips = dict(tj.cuda.stats()["host_round_trips"])
    for f in cases:
        got, want = f(t.cuda(), x.cuda(), big.cuda()), f(t, x, big)
        assert got.device.type == "cuda"
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert tj.cuda.stats()["host_round_trips"] == trips


def test_a_square_matrix_transposes_on_the_device():
    # the transpose of a square matrix has the matrix's shape: decided by the dims
    x = tj.randn(4, 4)
    gx = x.cuda()
    np.testing.assert_array_equal(gx.t().cpu().numpy(), x.t().numpy())
    np.testing.assert_array_equal(gx.transpose(0, 1).cpu().numpy(), x.transpose(0, 1).numpy())
    np.testing.assert_array_equal(gx.transpose(1, 1).cpu().numpy(), x.numpy())
    np.testing.assert_array_equal(gx.permute(1, 0).cpu().numpy(), x.permute(1, 0).numpy())
    np.testing.assert_array_equal(gx.permute(0, 1).cpu().numpy(), x.numpy())
    h, u = tj.randn(2, 4), tj.randn(4, 4)
    np.testing.assert_allclose((h.cuda() @ u.cuda().t()).cpu().numpy(), (h @ u.t()).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["uint32", "uint64"])
def test_wide_unsigned_kernels_keep_the_full_range_on_the_device(name):
    d = getattr(tj, name)
    top = np.iinfo(d.np).max
    x = tj.tensor([top, top - 6, 5], dtype=d)
    traced = tj.trace(lambda a: (a * 3 + 1) // 2 - (a & 1), (x.cuda(),))
    got = traced(x.cuda())
    want = (x * 3 + 1) // 2 - (x & 1)
    assert got.is_cuda and got.dtype is d
    assert got.cpu().numpy().tolist() == want.numpy().tolist()


def test_like_factories_and_index_tables_are_made_on_the_input_s_device():
    x = tj.ones(2, 3, device="cuda")
    for make in (tj.zeros_like, tj.ones_like, tj.empty_like, tj.rand_like, tj.randn_like):
        assert make(x).is_cuda and not make(x, device="cpu").is_cuda
    assert tj.full_like(x, 2.0).is_cuda and tj.full_like(x, 2.0).sum().item() == 12.0
    assert tj.tril_indices(3, 3, device="cuda").is_cuda
    assert tj.triu_indices(3, 3, device="cuda").cpu().tolist() == [[0, 0, 0, 1, 1, 2],
                                                                   [0, 1, 2, 1, 2, 2]]


def test_ops_that_make_their_own_tensors_make_them_on_the_input_s_device():
    """diag_embed's mask, bernoulli's and rrelu's draws, scatter_reduce's counts were made
    on the CPU and met a device tensor (an error)."""
    x = tj.randn(3, device="cuda")
    for f in (lambda t: tj.diag(t), lambda t: tj.diag(t, 1), lambda t: tj.diag_embed(t, -1)):
        got, want = f(x), f(x.cpu())
        assert got.is_cuda
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy())
    assert tj.bernoulli(tj.full((4,), 0.5, device="cuda")).is_cuda
    windows = tj.arange(8.0, device="cuda").reshape(4, 2).unfold(0, 2, 1)
    assert windows.is_cuda and windows.cpu().tolist() == tj.arange(8.0).reshape(4, 2).unfold(
        0, 2, 1).tolist()
    assert tj.nn.functional.rrelu(tj.randn(4, device="cuda"), training=True).is_cuda
    index, src = tj.tensor([0, 2, 0]), tj.ones(3)
    for reduce in ("sum", "mean"):
        for include_self in (True, False):
            got = tj.zeros(4, device="cuda").scatter_reduce(0, index.cuda(), src.cuda(), reduce,
                                                            include_self=include_self)
            want = tj.zeros(4).scatter_reduce(0, index, src, reduce, include_self=include_self)
            assert got.is_cuda
            np.testing.assert_allclose(got.cpu().numpy(), want.numpy())
