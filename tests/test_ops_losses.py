"""Losses, normalisation layers and the training-program API (init, optimisers, data
utilities, device queries) against PyTorch: values, dtypes, gradients and errors."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

pytestmark = requires_torch

RNG = np.random.default_rng(0)


def randn(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _to(lib, a):
    if not isinstance(a, np.ndarray):
        return a
    return lib.tensor(a, requires_grad=a.dtype.kind == "f")


def assert_matches(fn, *arrays, atol=1e-6, rtol=1e-5):
    """fn(lib, *tensors) in tracejit and PyTorch: the same dtype, shape and values, and the
    same gradients of the floating inputs for a random cotangent."""
    import torch

    ours, theirs = [_to(tj, a) for a in arrays], [_to(torch, a) for a in arrays]
    got, want = fn(tj, *ours), fn(torch, *theirs)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol, atol)
    if not want.requires_grad:
        return
    cot = RNG.standard_normal(tuple(want.shape))
    want.backward(torch.tensor(cot, dtype=want.dtype))
    got.backward(tj.tensor(cot).to(got.dtype))
    for a, b in zip(ours, theirs):
        if isinstance(b, torch.Tensor) and b.requires_grad:  # an unused input: no gradient
            want_grad = np.zeros(b.shape) if b.grad is None else b.grad.numpy()
            got_grad = np.zeros(want_grad.shape) if a.grad is None else a.grad.numpy()
            np.testing.assert_allclose(got_grad, want_grad, rtol, atol)


# ---- cross_entropy ----------------------------------------------------------------------

TARGETS = {
    "indices": np.array([[0, 1, -100], [3, 3, 2], [1, -100, 0]]),
    "probabilities": np.abs(randn(3, 4, 3)) / 4,
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_smoothing_weights_and_ignored_targets(target, weighted, reduction,
                                                            smoothing):
    weight = np.abs(randn(4)) + 0.1
    assert_matches(lambda lib, x, t: lib.nn.functional.cross_entropy(
        x, t, lib.tensor(weight) if weighted else None, reduction=reduction,
        label_smoothing=smoothing), randn(3, 4, 3), TARGETS[target])


def test_cross_entropy_loss_module_passes_its_options():
    import torch

    x, t = randn(4, 5), np.array([1, 0, 4, -1])
    got = tj.nn.CrossEntropyLoss(ignore_index=-1, label_smoothing=0.1)(tj.tensor(x),
                                                                       tj.tensor(t))
    want = torch.nn.CrossEntropyLoss(ignore_index=-1, label_smoothing=0.1)(torch.tensor(x),
                                                                           torch.tensor(t))
    np.testing.assert_allclose(got.item(), want.item(), 1e-7)


def test_cross_entropy_rejects_smoothing_above_one():
    with pytest.raises(RuntimeError, match="label_smoothing"):
        tj.nn.functional.cross_entropy(tj.randn(2, 3), tj.tensor([0, 1]), label_smoothing=1.5)


# ---- fixes elsewhere --------------------------------------------------------------------

@pytest.mark.parametrize("index", ["[i, :, j]", "[0, :, j]", "[:, 1, :, j]", "[0, ..., j]",
                                   "[None, 0, :, j]", "[i, 0, :, j]", "[..., 0, j]"])
def test_int_and_tensor_indices_take_pytorchs_dims(index):
    """PyTorch selects at ints first; only separated tensor indices move to the front."""
    i, j = np.array([0, 1, 1]), np.array([2, 0, 3])
    assert_matches(lambda lib, x, i, j: eval("x" + index), randn(2, 3, 4, 5), i, j)


@pytest.mark.parametrize("index", ["[0, :, j]", "[i, :, j]"])
def test_int_and_tensor_indices_write_where_pytorch_does(index):
    import torch

    i, j, x = np.array([0, 1]), np.array([2, 0]), randn(2, 3, 4)
    ours, theirs = tj.tensor(x), torch.tensor(x)
    value = randn(2, 3) if index == "[i, :, j]" else randn(3, 2)
    exec(f"ours{index} = tj.tensor(value)", {"ours": ours, "tj": tj, "value": value,
                                             "i": tj.tensor(i), "j": tj.tensor(j)})
    exec(f"theirs{index} = torch.tensor(value)", {"theirs": theirs, "torch": torch,
                                                  "value": value, "i": torch.tensor(i),
                                                  "j": torch.tensor(j)})
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_int_and_tensor_indices_trace_as_eager():
    i, j = tj.tensor([0, 1, 1]), tj.tensor([2, 0, 3])
    x = tj.tensor(randn(2, 3, 4))
    traced = tj.trace(lambda x, j: x[0, :, j], (x, j), backend="interpret")
    np.testing.assert_array_equal(traced(x, j).numpy(), x[0, :, j].numpy())
    assert tuple(x[i, :, j].shape) == (3, 3)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("start,end,steps", [(0, 10, 4), (0.5, 7.3, 5), (10, 0, 7),
                                             (-7.9, 3.3, 6), (3, 3, 1)])
def test_integer_linspace_truncates_as_pytorch(dtype, start, end, steps):
    import torch

    got = tj.linspace(start, end, steps, dtype=getattr(tj, dtype))
    want = torch.linspace(start, end, steps, dtype=getattr(torch, dtype))
    assert got.tolist() == want.tolist() and got.dtype.name == dtype


def test_layer_norm_of_bfloat16_with_float32_parameters_keeps_bfloat16():
    import torch

    pytest.importorskip("ml_dtypes")
    x = randn(2, 4, dtype=np.float32)
    with tj.autocast("cpu", tj.bfloat16):
        got = tj.nn.LayerNorm(4)(tj.tensor(x).bfloat16())
    with torch.autocast("cpu", torch.bfloat16):
        want = torch.nn.LayerNorm(4)(torch.tensor(x).bfloat16())
    assert got.dtype is tj.bfloat16 and want.dtype is torch.bfloat16
    np.testing.assert_allclose(got.detach().float().numpy(), want.detach().float().numpy(),
                               atol=1e-2)


def test_layer_norm_rejects_float64_parameters_for_a_float32_input():
    with pytest.raises(RuntimeError, match="mixed dtype"):
        tj.nn.functional.layer_norm(tj.randn(2, 4), (4,), tj.ones(4, dtype=tj.float64))
