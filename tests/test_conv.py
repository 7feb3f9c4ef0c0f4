"""Convolutions and pools: PyTorch's tie rule for max pooling, initialisation, errors,
and traced CNNs (one compile for all batch sizes, gradients as eager)."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn
from conftest import requires_torch


@requires_torch
def test_max_pool_gives_a_tied_window_s_gradient_to_its_first_maximum():
    import torch

    x = np.array([[[[1.0, 1.0, 0.0, 2.0], [1.0, 0.0, 2.0, 2.0],
                    [0.0, 0.0, 3.0, 3.0], [0.0, 0.0, 3.0, 3.0]]]])  # ties in every window
    results = []
    for lib in (tj, torch):
        t = lib.tensor(x, requires_grad=True)
        lib.nn.functional.max_pool2d(lib.relu(t), 2, stride=1).sum().backward()
        results.append(t.grad.numpy())
    np.testing.assert_array_equal(*results)


@requires_torch
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_pools_with_padding_and_strides_match_pytorch(dtype):
    """Windows that overlap the padding: max pooling pads with the dtype's lowest value
    (an integer input must not overflow from -inf), average pooling with zeros."""
    import torch

    x = np.arange(-40, 37, dtype=dtype).reshape(1, 1, 7, 11)[:, :, :, ::-1].copy()
    for args in [(3, 2, 1), ((3, 2), (1, 3), (1, 1)), (2, 2, 1)]:
        want = torch.nn.functional.max_pool2d(torch.from_numpy(x), *args).numpy()
        got = nn.functional.max_pool2d(tj.tensor(x), *args).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    if dtype == "float32":
        x[0, 0, 2, 3] = x[0, 0, 5, 5] = np.nan  # a NaN is its windows' maximum
        t = tj.tensor(x, requires_grad=True)
        got = nn.functional.max_pool2d(t, 3, 2, 1)
        want = torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy()
        np.testing.assert_array_equal(got.detach().numpy(), want)
        p = torch.tensor(x, requires_grad=True)
        torch.nn.functional.max_pool2d(p, 3, 2, 1).sum().backward()
        got.sum().backward()
        assert np.isnan(want).sum() == 6 and t.grad.numpy()[0, 0, 2, 3] > 0
        np.testing.assert_array_equal(t.grad.numpy(), p.grad.numpy())
        for args in [(3, 2, 1), ((3, 2), (1, 3), (1, 1))]:
            want = torch.nn.functional.avg_pool2d(torch.from_numpy(x), *args).numpy()
            got = nn.functional.avg_pool2d(tj.tensor(x), *args).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-6)


@requires_torch
def test_conv_initialisation_follows_pytorch_bounds():
    import torch

    for make in (lambda m: m.Conv2d(6, 8, (3, 5), groups=2), lambda m: m.Conv1d(4, 16, 7)):
        j, t = make(nn), make(torch.nn)
        assert [(n, tuple(p.shape)) for n, p in j.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in t.named_parameters()]
        fan_in = int(np.prod(j.weight.shape[1:]))
        bound = 1 / np.sqrt(fan_in)
        for p in (j.weight, j.bias):
            v = p.detach().numpy()
            assert np.abs(v).max() <= bound + 1e-7
            assert np.abs(v).max() > 0.5 * bound  # spread over the range, not collapsed
    assert repr(nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)) == repr(
        torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False))


def test_conv_errors_name_what_was_expected():
    conv = nn.Conv2d(3, 4, 3)
    with pytest.raises(RuntimeError, match="expected input.*to have 3 channels, but got 5"):
        conv(tj.randn(1, 5, 6, 6))
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input"):
        conv(tj.randn(6, 6))
    with pytest.raises(RuntimeError, match="smaller than the"):
        conv(tj.randn(1, 3, 2, 6))
    with pytest.raises(RuntimeError, match="stride should be greater than zero"):
        nn.MaxPool2d(2, stride=0)(tj.randn(1, 1, 5, 5))
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        nn.MaxPool2d(2, padding=2)(tj.randn(1, 1, 5, 5))


def _cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_traced_cnn_matches_eager_for_other_batch_sizes(backend, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", backend)
    model = _cnn()
    lossf = nn.CrossEntropyLoss()

    def loss_of(x, y):
        return lossf(model(x), y)

    traced = tj.trace(loss_of, (tj.randn(4, 3, 8, 8), tj.randint(0, 4, (4,))))
    for batch in (4, 2, 7):
        x, y = tj.randn(batch, 3, 8, 8), tj.randint(0, 4, (batch,))
        state = {k: v.clone() for k, v in model.state_dict().items()}
        want = loss_of(x, y)
        want_grads = tj.autograd.grad(want, list(model.parameters()))
        eager_state = {k: v.clone() for k, v in model.state_dict().items()}
        model.load_state_dict(state)  # the same running statistics for the traced call
        got = traced(x, y)
        got_grads = tj.autograd.grad(got, list(model.parameters()))
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for g, h in zip(got_grads, want_grads):
            np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-4, atol=1e-6)
        for k, v in model.state_dict().items():
            np.testing.assert_allclose(v.numpy(), eager_state[k].numpy(), rtol=1e-5,
                                       atol=1e-7)
    assert traced.stats["compiles"] == 1, traced.explain()


def test_traced_cnn_fuses_around_the_convolution():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    model.eval()
    traced = tj.trace(model, (tj.randn(2, 3, 8, 8),))
    ops = [n.op for n in traced.graph.nodes]
    assert "unfold2d" in ops and "matmul" in ops and "fused" in ops
    # the bias add and the relu run in one kernel
    fused = [n for n in traced.graph.nodes if n.op == "fused"]
    inner = {m.op for f in fused for m in f.regions[0].nodes}
    assert {"add", "relu"} <= inner, inner
