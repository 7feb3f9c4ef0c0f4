"""Ops and options PyTorch programs reach for (tril/triu, roll, lerp, isinf, leaky_relu,
silu, binary_cross_entropy, smooth_l1_loss, pixel_shuffle, one_hot, normalize, view_as,
new_*, dropout2d, inference_mode), against PyTorch: values, dtypes and gradients, eagerly
and traced; the errors PyTorch raises; the elementwise ones fused into compiled kernels."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

RNG = np.random.default_rng(27)


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def probs(*shape):
    return RNG.uniform(0.05, 0.95, shape).astype(np.float32)


def ints(*shape, high=4):
    return RNG.integers(0, high, shape).astype(np.int64)


def special():
    return np.array([1.0, np.inf, -np.inf, np.nan, 0.0, -3.5], np.float32)


# (id, call(lib, *inputs), inputs): `lib` is torch or tracejit, which share these names;
# float inputs are differentiated
CASES = [
    ("tril", lambda m, x: m.tril(x), [f32(4, 5)]),
    ("tril-diagonal", lambda m, x: m.tril(x, 1), [f32(2, 3, 4)]),
    ("tril-method-negative", lambda m, x: x.tril(diagonal=-2), [f32(5, 3)]),
    ("tril-int32", lambda m, x: m.tril(x), [ints(3, 3).astype(np.int32)]),
    ("tril-bool", lambda m, x: m.tril(x > 0), [f32(3, 3)]),
    ("tril-nan", lambda m, x: m.tril(x * np.nan), [f32(3, 3)]),
    ("triu", lambda m, x: m.triu(x), [f32(4, 5)]),
    ("triu-diagonal", lambda m, x: x.triu(-1), [f32(2, 4, 3)]),
    ("triu-far", lambda m, x: m.triu(x, 7), [f32(3, 3)]),
    ("roll-flat", lambda m, x: m.roll(x, 2), [f32(3, 4)]),
    ("roll-dim", lambda m, x: m.roll(x, -1, 1), [f32(3, 4)]),
    ("roll-dims", lambda m, x: x.roll((5, -7), (0, -1)), [f32(3, 4, 2)]),
    ("roll-zero", lambda m, x: m.roll(x, 0, 0), [f32(3)]),
    ("roll-int", lambda m, x: m.roll(x, 1, 0), [ints(4, 2)]),
    ("lerp-scalar-low", lambda m, x, y: m.lerp(x, y, 0.3), [f32(3, 4), f32(3, 4)]),
    ("lerp-scalar-high", lambda m, x, y: x.lerp(y, 0.8), [f32(3, 4), f32(4)]),
    ("lerp-tensor", lambda m, x, y, w: m.lerp(x, y, w), [f32(3, 1), f32(4), f32(2, 1, 1)]),
    ("lerp-0d-weight", lambda m, x, y, w: m.lerp(x, y, w), [f32(3), f32(3), f32()]),
    ("isinf", lambda m, x: m.isinf(x), [special()]),
    ("isinf-method-int", lambda m, x: x.isinf(), [ints(4)]),
    ("leaky_relu", lambda m, x: m.nn.functional.leaky_relu(x), [f32(3, 4)]),
    ("leaky_relu-slope", lambda m, x: m.nn.functional.leaky_relu(x, 0.2), [f32(5)]),
    ("leaky_relu-negative-slope", lambda m, x: m.nn.functional.leaky_relu(x, -1.5), [f32(5)]),
    ("leaky_relu-inplace", lambda m, x: m.nn.functional.leaky_relu(x * 1, 0.1, inplace=True),
     [f32(3, 2)]),
    ("leaky_relu-special", lambda m, x: m.nn.functional.leaky_relu(x), [special()]),
    ("relu-inplace", lambda m, x: m.nn.functional.relu(x * 1, inplace=True), [f32(3, 2)]),
    ("silu", lambda m, x: m.nn.functional.silu(x), [f32(3, 4)]),
    ("silu-inplace", lambda m, x: m.nn.functional.silu(x * 1, inplace=True), [f32(3, 4)]),
    ("bce", lambda m, x, t: m.nn.functional.binary_cross_entropy(x, t), [probs(4, 3),
                                                                        probs(4, 3)]),
    ("bce-sum", lambda m, x, t: m.nn.functional.binary_cross_entropy(x, t, reduction="sum"),
     [probs(5), (probs(5) > 0.5).astype(np.float32)]),
    ("bce-none-weight", lambda m, x, t, w: m.nn.functional.binary_cross_entropy(
        x, t, w.detach(), reduction="none"), [probs(2, 3), probs(2, 3), probs(3)]),
    ("bce-saturated", lambda m, x, t: m.nn.functional.binary_cross_entropy(
        x, t, reduction="none"), [np.array([0, 1, 0, 1, 1e-30, 0.5], np.float32),
                                  np.array([0, 1, 1, 0, 0.2, 0.5], np.float32)]),
    ("bce-of-sigmoid", lambda m, z, t: m.nn.functional.binary_cross_entropy(
        m.sigmoid(z), t), [np.array([-3, -0.5, 0.2, 2, 20, 40], np.float32), probs(6)]),
    ("smooth_l1", lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y), [f32(4, 3), f32(4, 3)]),
    ("smooth_l1-beta", lambda m, x, y: m.nn.functional.smooth_l1_loss(
        x, y, reduction="none", beta=0.5), [f32(6), f32(6)]),
    ("smooth_l1-beta-0", lambda m, x, y: m.nn.functional.smooth_l1_loss(
        x, y, reduction="sum", beta=0.0), [f32(6), f32(6)]),
    ("smooth_l1-ties", lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y, reduction="none"),
     [np.array([0.0, 1.0, -1.0, 2.5], np.float32), np.zeros(4, np.float32)]),
    ("pixel_shuffle", lambda m, x: m.nn.functional.pixel_shuffle(x, 2), [f32(2, 8, 3, 2)]),
    ("pixel_shuffle-3d", lambda m, x: m.nn.functional.pixel_shuffle(x, 3), [f32(9, 2, 2)]),
    ("pixel_shuffle-5d", lambda m, x: m.nn.functional.pixel_shuffle(x, 2),
     [f32(2, 3, 4, 2, 1)]),
    ("pixel_unshuffle", lambda m, x: m.nn.functional.pixel_unshuffle(x, 2), [f32(2, 3, 4, 6)]),
    ("pixel-round-trip", lambda m, x: m.nn.functional.pixel_shuffle(
        m.nn.functional.pixel_unshuffle(x, 3), 3), [f32(1, 2, 6, 3)]),
    ("one_hot", lambda m, x: m.nn.functional.one_hot(x, 5), [ints(2, 3)]),
    ("one_hot-inferred", lambda m, x: m.nn.functional.one_hot(x), [ints(7)]),
    ("one_hot-0d", lambda m, x: m.nn.functional.one_hot(x[0], 4), [ints(2)]),
    ("normalize", lambda m, x: m.nn.functional.normalize(x), [f32(3, 4)]),
    ("normalize-p1-dim0", lambda m, x: m.nn.functional.normalize(x, 1.0, 0), [f32(3, 4)]),
    ("normalize-zero-rows", lambda m, x: m.nn.functional.normalize(x * m.tensor(
        [[0.0], [1.0], [1e-13]]), dim=-1), [f32(3, 4)]),
    ("view_as", lambda m, x, y: x.view_as(y.detach()), [f32(6), f32(2, 3)]),
    ("tensor-unfold", lambda m, x: x.unfold(1, 3, 2), [f32(2, 7, 3)]),
    ("tensor-unfold-last-overlapping", lambda m, x: x.unfold(-1, 2, 1), [f32(3, 5)]),
    ("tensor-unfold-first-whole", lambda m, x: x.unfold(0, 4, 3), [f32(4, 2)]),
    ("tensor-unfold-0d", lambda m, x: x[0].unfold(0, 1, 1), [f32(2)]),
    ("movedim", lambda m, x: m.movedim(x, (0, 1), (2, 0)), [f32(2, 3, 4)]),
    ("moveaxis-method", lambda m, x: x.moveaxis(-1, 0), [f32(2, 3, 4)]),
    ("sum-axis-keepdims", lambda m, x: x.sum(axis=1, keepdims=True), [f32(3, 4)]),
    ("cat-axis", lambda m, x: m.cat([x, x * 2], axis=1), [f32(2, 3)]),
    ("stack-axis", lambda m, x: m.stack([x, x * 2], axis=-1), [f32(2, 3)]),
    ("softmax-axis", lambda m, x: x.softmax(axis=0), [f32(3, 4)]),
    ("amax-axis", lambda m, x: m.amax(x, axis=-1, keepdims=True), [f32(3, 4)]),
    ("var-axis", lambda m, x: x.var(axis=0), [f32(5, 2)]),
    ("bitcast-round-trip", lambda m, x: (x.view(m.int32) & 0x7FFFFFFF).view(m.float32) * 2,
     [special()]),
    ("bitcast-wider", lambda m, x: x.view(m.float64), [f32(3, 4)]),
    ("bitcast-narrower", lambda m, x: x.view(m.uint8), [f32(2, 3)]),
    ("bitcast-uint32", lambda m, x: x.view(m.uint32) & 0x7FF, [f32(5)]),
]


def _to(lib, a: np.ndarray):
    t = lib.tensor(a)
    return t.requires_grad_() if a.dtype.kind == "f" else t


def _dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


def _forward_backward(lib, fn, arrays, cotangent=None):
    """(outputs as numpy, dtype name, input gradients) of fn at arrays."""
    xs = [_to(lib, a) for a in arrays]
    out = fn(lib, *xs)
    grads = []
    if out.requires_grad:
        seed = cotangent if cotangent is not None else np.ones(tuple(out.shape), np.float32)
        (out * lib.tensor(seed)).sum().backward()
        grads = [x.grad.numpy() if x.grad is not None else None for x in xs
                 if x.requires_grad]
    return out.detach().numpy(), _dtype_name(out), grads


def _check_same(got, want, rtol=1e-5, atol=1e-6):
    (g_out, g_dtype, g_grads), (w_out, w_dtype, w_grads) = got, want
    assert g_dtype == w_dtype
    assert g_out.shape == w_out.shape
    np.testing.assert_allclose(g_out, w_out, rtol=rtol, atol=atol)
    assert len(g_grads) == len(w_grads)
    for g, w in zip(g_grads, w_grads):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _cotangent(name, fn, arrays):
    with tj.no_grad():
        shape = tuple(fn(tj, *[tj.tensor(a) for a in arrays]).shape)
    return np.random.default_rng(len(name)).uniform(-1, 1, shape).astype(np.float32)


@requires_torch
@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_eager_values_dtypes_and_gradients_match_pytorch(name, fn, arrays):
    import torch

    seed = _cotangent(name, fn, arrays)
    _check_same(_forward_backward(tj, fn, arrays, seed),
                _forward_backward(torch, fn, arrays, seed))


@requires_torch
@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_traced_values_and_gradients_match_pytorch(name, fn, arrays):
    import torch

    traced = tj.trace(lambda *xs: fn(tj, *xs), tuple(tj.tensor(a) for a in arrays))
    seed = _cotangent(name, fn, arrays)
    _check_same(_forward_backward(tj, lambda m, *xs: traced(*xs), arrays, seed),
                _forward_backward(torch, fn, arrays, seed))
    assert traced.stats["eager_fallbacks"] == 0


def test_a_traced_tril_serves_other_batch_sizes():
    traced = tj.trace(lambda x: tj.tril(x) * 2, (tj.randn(2, 4, 4),))
    for batch in (1, 3, 5):
        x = tj.randn(batch, 4, 4)
        np.testing.assert_array_equal(traced(x).numpy(), np.tril(x.numpy()) * 2)


@requires_torch
def test_graph_nodes_are_named_as_pytorch_names_them():
    import torch

    def names(m):
        x = m.rand(1, 4, 2, 2, requires_grad=True)
        t = m.rand(1, 4, 2, 2)
        F = m.nn.functional
        return [type(o.grad_fn).__name__ for o in (
            m.tril(x), m.triu(x), m.roll(x, 1), m.lerp(x, t, 0.5), m.lerp(x, t, t),
            F.leaky_relu(x), F.silu(x), F.binary_cross_entropy(x, t),
            F.smooth_l1_loss(x, t), F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2))]

    assert names(tj) == names(torch)


# ---- the errors PyTorch raises ------------------------------------------------------------
def _nnf(m):
    return m.nn.functional


ERRORS = [
    ("tril-1d", lambda m: m.tril(m.ones(3)), RuntimeError),
    ("triu-0d", lambda m: m.triu(m.ones(())), RuntimeError),
    ("roll-shifts-and-dims-differ", lambda m: m.roll(m.ones(3, 3), (1, 2), 0), RuntimeError),
    ("roll-two-shifts-no-dims", lambda m: m.roll(m.ones(3, 3), (1, 2)), RuntimeError),
    ("roll-dim-out-of-range", lambda m: m.roll(m.ones(3, 3), 1, 2), IndexError),
    ("roll-0d-with-dim", lambda m: m.roll(m.ones(()), 1, 0), IndexError),
    ("lerp-end-dtype", lambda m: m.lerp(m.ones(3), m.ones(3, dtype=m.float64), 0.5),
     RuntimeError),
    ("lerp-weight-dtype", lambda m: m.lerp(m.ones(3), m.ones(3), m.ones(3, dtype=m.float64)),
     RuntimeError),
    ("lerp-integers", lambda m: m.lerp(m.ones(3, dtype=m.int64), m.ones(3, dtype=m.int64),
                                       0.5), NotImplementedError),
    ("lerp_-broadcast-into-smaller", lambda m: m.ones(3).lerp_(m.ones(2, 3), 0.5),
     RuntimeError),
    ("leaky_relu-integers", lambda m: _nnf(m).leaky_relu(m.ones(3, dtype=m.int64)),
     NotImplementedError),
    ("leaky_relu-inplace-leaf", lambda m: _nnf(m).leaky_relu(
        m.ones(3, requires_grad=True), inplace=True), RuntimeError),
    ("silu-integers", lambda m: _nnf(m).silu(m.ones(3, dtype=m.int64)), NotImplementedError),
    ("bce-target-shape", lambda m: _nnf(m).binary_cross_entropy(m.rand(3), m.rand(3, 1)),
     ValueError),
    ("bce-above-one", lambda m: _nnf(m).binary_cross_entropy(m.tensor([1.5]), m.rand(1)),
     RuntimeError),
    ("bce-nan", lambda m: _nnf(m).binary_cross_entropy(m.tensor([float("nan")]), m.rand(1)),
     RuntimeError),
    ("bce-target-dtype", lambda m: _nnf(m).binary_cross_entropy(m.rand(2), m.tensor([1, 0])),
     RuntimeError),
    ("bce-reduction", lambda m: _nnf(m).binary_cross_entropy(m.rand(2), m.rand(2),
                                                             reduction="bad"), ValueError),
    ("bce-weight-requires-grad", lambda m: _nnf(m).binary_cross_entropy(
        m.rand(2), m.rand(2), m.ones(2, requires_grad=True)), RuntimeError),
    ("smooth_l1-negative-beta", lambda m: _nnf(m).smooth_l1_loss(m.rand(2), m.rand(2),
                                                                 beta=-1.0), RuntimeError),
    ("smooth_l1-integers", lambda m: _nnf(m).smooth_l1_loss(
        m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64)), NotImplementedError),
    ("pixel_shuffle-channels", lambda m: _nnf(m).pixel_shuffle(m.ones(1, 5, 2, 2), 2),
     RuntimeError),
    ("pixel_shuffle-2d", lambda m: _nnf(m).pixel_shuffle(m.ones(4, 2), 2), RuntimeError),
    ("pixel_shuffle-factor-0", lambda m: _nnf(m).pixel_shuffle(m.ones(1, 4, 2, 2), 0),
     RuntimeError),
    ("pixel_unshuffle-height", lambda m: _nnf(m).pixel_unshuffle(m.ones(1, 1, 3, 4), 2),
     RuntimeError),
    ("pixel_unshuffle-width", lambda m: _nnf(m).pixel_unshuffle(m.ones(1, 1, 4, 3), 2),
     RuntimeError),
    ("one_hot-float", lambda m: _nnf(m).one_hot(m.ones(3)), RuntimeError),
    ("one_hot-int32", lambda m: _nnf(m).one_hot(m.ones(3, dtype=m.int32)), RuntimeError),
    ("one_hot-negative", lambda m: _nnf(m).one_hot(m.tensor([-1, 2])), RuntimeError),
    ("one_hot-too-large", lambda m: _nnf(m).one_hot(m.tensor([1, 2]), 2), RuntimeError),
    ("one_hot-empty-inferred", lambda m: _nnf(m).one_hot(m.ones(0, dtype=m.int64)),
     RuntimeError),
    ("normalize-integers", lambda m: _nnf(m).normalize(m.ones(2, 3, dtype=m.int64)),
     RuntimeError),
    ("normalize-dim", lambda m: _nnf(m).normalize(m.ones(3)), IndexError),
    ("dropout2d-p", lambda m: _nnf(m).dropout2d(m.ones(2, 3, 4, 4), 1.5), ValueError),
    ("view_as-non-contiguous", lambda m: m.ones(3, 4).t().view_as(m.ones(12)), RuntimeError),
    ("flip-dim-twice", lambda m: m.ones(2, 3).flip((0, -2)), RuntimeError),
    ("sum-dim-twice", lambda m: m.ones(2, 3).sum((1, 1)), RuntimeError),
    ("linspace-bool", lambda m: m.linspace(0, 1, 5, dtype=m.bool), NotImplementedError),
    ("unfold-size-too-large", lambda m: m.ones(3, 4).unfold(1, 5, 1), RuntimeError),
    ("unfold-step-zero", lambda m: m.ones(3, 4).unfold(1, 2, 0), RuntimeError),
    ("unfold-dim", lambda m: m.ones(3, 4).unfold(2, 2, 1), IndexError),
    ("movedim-repeated", lambda m: m.movedim(m.ones(2, 3), (0, 0), (0, 1)), RuntimeError),
    ("movedim-lengths", lambda m: m.movedim(m.ones(2, 3), (0, 1), (1,)), RuntimeError),
    ("sum-dim-and-axis", lambda m: m.ones(2, 3).sum(0, axis=0), TypeError),
    ("bitcast-0d", lambda m: m.tensor(1.0).view(m.uint8), RuntimeError),
    ("bitcast-stride", lambda m: m.ones(4, 6).t().view(m.float16), RuntimeError),
    ("bitcast-size", lambda m: m.ones(3, 3).view(m.float64), RuntimeError),
    ("uint16-with-int32", lambda m: m.ones(2, dtype=m.uint16) * m.ones(2, dtype=m.int32),
     RuntimeError),
    ("uint32-with-bool", lambda m: m.ones(2, dtype=m.uint32) * m.ones(2, dtype=m.bool),
     RuntimeError),
    ("uint64-with-uint8", lambda m: m.ones(2, dtype=m.uint64) * m.ones(2, dtype=m.uint8),
     RuntimeError),
]


@requires_torch
@pytest.mark.parametrize("name,call,error", ERRORS, ids=[e[0] for e in ERRORS])
def test_raises_what_pytorch_raises(name, call, error):
    import torch

    with pytest.raises(error):
        call(torch)
    with pytest.raises(error):
        call(tj)


@requires_torch
def test_one_hot_of_an_empty_tensor_with_classes_given_is_empty():
    import torch

    for m in (tj, torch):
        out = m.nn.functional.one_hot(m.ones(0, 2, dtype=m.int64), 3)
        assert tuple(out.shape) == (0, 2, 3) and _dtype_name(out) == "int64"


def test_inplace_leaky_relu_with_a_negative_slope_has_the_right_gradient():
    # PyTorch refuses this backward; here the input as it was is kept for it
    x = tj.tensor([-2.0, 3.0], requires_grad=True)
    y = x * 1
    tj.nn.functional.leaky_relu(y, -0.5, inplace=True).sum().backward()
    assert x.grad.tolist() == [-0.5, 1.0]


# ---- new_*, dropout2d, inference_mode ----------------------------------------------------
@requires_torch
@pytest.mark.parametrize("call", [
    lambda m, x: x.new_full((2, 3), 1.5),
    lambda m, x: x.new_full([4], 7, dtype=m.float64),
    lambda m, x: x.new_zeros(2, 3),
    lambda m, x: x.new_zeros((1, 2), dtype=m.int32),
    lambda m, x: x.new_ones([3]),
    lambda m, x: x.new_empty(2, 0).reshape(-1),
    lambda m, x: x.new_tensor([[1.5, 2.5]]),
    lambda m, x: x.new_tensor([True, False], dtype=m.bool),
], ids=["full", "full-dtype", "zeros", "zeros-dtype", "ones", "empty", "tensor", "tensor-bool"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_new_tensors_take_this_tensors_dtype_unless_given(call, dtype):
    import torch

    outs = [call(m, m.ones(2, dtype=getattr(m, dtype))) for m in (tj, torch)]
    assert _dtype_name(outs[0]) == _dtype_name(outs[1])
    np.testing.assert_array_equal(outs[0].numpy(), outs[1].numpy())
    assert not outs[0].requires_grad


def test_new_tensor_copies_without_history_and_new_full_can_require_grad():
    x = tj.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="detach"):
        y = x.new_tensor(x)
    assert not y.requires_grad and not np.shares_memory(y.numpy(), x.detach().numpy())
    assert x.new_full((2,), 3.0, requires_grad=True).requires_grad
    assert x.new_zeros(2).device == x.device


def test_dropout2d_zeroes_whole_channels_and_scales_the_rest():
    x = tj.ones(8, 16, 3, 5)
    out = tj.nn.functional.dropout2d(x, 0.25).numpy()
    per_channel = out.reshape(8, 16, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # each channel all one value
    assert set(np.unique(out).tolist()) <= {0.0, float(np.float32(1.0 / 0.75))}
    assert 0.1 < (per_channel[..., 0] == 0).mean() < 0.4
    assert tj.nn.functional.dropout2d(x, 0.25, training=False) is x
    assert not tj.nn.functional.dropout2d(x, 1.0).numpy().any()


def test_dropout2d_module_in_train_and_eval_and_inplace():
    m = tj.nn.Dropout2d(0.5, inplace=True)
    x = tj.ones(4, 6, 2, 2)
    out = m(x)
    assert out is x and set(np.unique(x.numpy())) <= {0.0, 2.0}
    m.eval()
    y = tj.randn(2, 3, 4, 4)
    assert m(y) is y


def test_dropout2d_gradient_flows_through_the_kept_channels():
    x = tj.randn(4, 6, 3, 3, requires_grad=True)
    out = tj.nn.functional.dropout2d(x, 0.5)
    out.sum().backward()
    kept = out.detach().numpy() != 0
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, 2.0, 0.0))


def test_dropout2d_warns_on_3d_input_as_pytorch_does():
    with pytest.warns(UserWarning, match="3D input"):
        out = tj.nn.functional.dropout2d(tj.ones(4, 8, 5), 0.5).numpy()
    assert np.all(out.min(-1) == out.max(-1))  # channels of [N, C, L]


def test_a_traced_dropout2d_draws_new_channels_every_call():
    traced = tj.trace(lambda x: tj.nn.functional.dropout2d(x, 0.5), (tj.ones(8, 8, 2, 2),))
    a, b = traced(tj.ones(8, 8, 2, 2)).numpy(), traced(tj.ones(8, 8, 2, 2)).numpy()
    assert not np.array_equal(a, b)


def test_inference_mode_records_no_history_and_restores_the_mode():
    x = tj.ones(2, requires_grad=True)
    with tj.inference_mode():
        assert tj.is_inference_mode_enabled() and not tj.is_grad_enabled()
        y = x * 2
        with tj.inference_mode(False):  # leaves it, recording again, as PyTorch's
            assert tj.is_grad_enabled() and not tj.is_inference_mode_enabled()
    assert not y.requires_grad and tj.is_grad_enabled() and not tj.is_inference_mode_enabled()
    with pytest.raises(KeyError):
        with tj.inference_mode():
            raise KeyError
    assert tj.is_grad_enabled() and not tj.is_inference_mode_enabled()


def test_inference_mode_as_a_decorator_with_and_without_a_call():
    @tj.inference_mode
    def bare(x):
        return x * 2, tj.is_inference_mode_enabled()

    @tj.inference_mode()
    def called(x):
        return x * 2

    x = tj.ones(2, requires_grad=True)
    y, inside = bare(x)
    assert inside and not y.requires_grad and not called(x).requires_grad
    assert tj.autograd.inference_mode is tj.inference_mode and tj.is_grad_enabled()


def test_a_traced_function_under_inference_mode_records_no_history():
    traced = tj.trace(lambda x: (x * 3).sum(), (tj.ones(3),))
    x = tj.ones(3, requires_grad=True)
    with tj.inference_mode():
        assert not traced(x).requires_grad
    assert traced(x).requires_grad


# ---- elementwise ops fuse into compiled kernels -------------------------------------------
# (a region Numba fails to compile would still give eager's numbers: make that fail)
compiled = pytest.mark.filterwarnings("error:tracejit. Numba could not compile")
FUSED = [
    ("leaky_relu", lambda x, y: tj.nn.functional.leaky_relu(x * 2, 0.1) + y),
    ("isinf", lambda x, y: tj.where(tj.isinf(x / y), 0.0, x) * 2),
    ("lerp", lambda x, y: tj.lerp(x, y, 0.75) * 2 + tj.lerp(x, y, y)),
    ("binary_cross_entropy", lambda x, y: tj.nn.functional.binary_cross_entropy(
        tj.sigmoid(x), tj.sigmoid(y), reduction="none") * 2),
    ("sigmoid", lambda x, y: tj.nn.functional.silu(x + y) * 2),  # silu: x * sigmoid(x)
    ("where", lambda x, y: tj.tril(x + y, 1) * 2),  # tril: where over a constant mask
    ("abs", lambda x, y: tj.nn.functional.smooth_l1_loss(x, y, reduction="none") * 2),
]


@pytest.mark.compile
@compiled
@pytest.mark.parametrize("op,fn", FUSED, ids=[f[0] for f in FUSED])
def test_elementwise_ops_fuse_into_a_compiled_kernel(op, fn):
    x, y = tj.randn(5, 6), tj.randn(5, 6)
    x._data[0, :3] = [np.inf, -np.inf, 0.0]  # special values through the kernels
    y._data[0, 2] = 0.0
    with np.errstate(all="ignore"):  # inf - inf, log(0): results, as in PyTorch
        traced = tj.trace(fn, (x, y), backend="numba")
        fused = [n for n in traced.graph.nodes if n.op == "fused"]
        assert any(op in [r.op for r in n.regions[0].nodes] for n in fused), str(traced.graph)
        want = fn(x, y).numpy()
        np.testing.assert_allclose(traced(x, y).numpy(), want, rtol=2e-6, atol=1e-6)
        x2, y2 = tj.randn(3, 6), tj.randn(3, 6)
        np.testing.assert_allclose(traced(x2, y2).numpy(), fn(x2, y2).numpy(), rtol=2e-6,
                                   atol=1e-6)


@pytest.mark.compile
@compiled
def test_a_compiled_bce_of_saturated_probabilities_has_pytorchs_finite_gradient():
    def loss(z, t):
        return tj.nn.functional.binary_cross_entropy(tj.sigmoid(z), t)

    z = tj.tensor([-40.0, 40.0, 0.5, -1.0])
    t = tj.tensor([1.0, 0.0, 0.5, 0.0])
    zt, ze = z.clone().requires_grad_(), z.clone().requires_grad_()
    with np.errstate(all="ignore"):  # log(0), clamped
        traced = tj.trace(loss, (z, t), backend="numba")
        got, want = traced(zt, t), loss(ze, t)
    got.backward()
    want.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    assert np.all(np.isfinite(zt.grad.numpy()))
    np.testing.assert_allclose(zt.grad.numpy(), ze.grad.numpy(), rtol=1e-5)


@requires_torch
def test_view_of_a_strided_tensor_follows_pytorch_s_rule():
    """view() works wherever the strides allow the new shape (PyTorch's rule, not
    "contiguous only") and shares memory; elsewhere it raises as PyTorch does."""
    import torch

    rng = np.random.default_rng(0)
    base = rng.standard_normal((2, 3, 4, 2)).astype(np.float32)
    views = [lambda t: t.transpose(0, 1), lambda t: t[:, :, :2], lambda t: t.permute(1, 0, 2, 3),
             lambda t: t[:, 1:], lambda t: t.transpose(2, 3)]
    shapes = [(-1,), (6, -1), (3, 2, 8), (3, 2, 4, 2), (2, 3, -1), (3, 16), (6, 4, 2)]
    checked = 0
    for make in views:
        x, xt = make(tj.tensor(base)), make(torch.tensor(base))
        for shape in shapes:
            try:
                want = xt.view(*shape)
            except RuntimeError:
                with pytest.raises(RuntimeError, match="view size is not compatible"):
                    x.view(*shape)
                continue
            got = x.view(*shape)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            checked += 1
    assert checked >= 6  # (and as many refused)
    x = tj.zeros(2, 3, 4)
    x[:, :, :2].view(6, 2)[0, 0] = 5.0  # the view writes into x
    assert float(x[0, 0, 0]) == 5.0


def test_shape_errors_are_runtime_errors_as_in_pytorch_and_value_errors_as_before():
    with pytest.raises(RuntimeError, match="broadcast"):
        tj.ones(2, 3) + tj.ones(4)
    with pytest.raises(ValueError, match="cannot be multiplied"):
        tj.ones(2, 3) @ tj.ones(4, 2)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        tj.ones(2, 3) @ tj.ones(4, 2)


def test_a_batch_of_matrices_times_one_matrix_with_an_empty_batch():
    """[B, M, K] @ [K, N] runs as one product of the rows; an empty batch still works
    (a reshape to (-1, K) cannot tell the rows of zero elements)."""
    for shape in [(0, 3, 4), (2, 0, 4), (2, 3, 4)]:
        a = tj.randn(*shape, requires_grad=True)
        w = tj.randn(4, 5, requires_grad=True)
        out = a @ w
        assert tuple(out.shape) == shape[:-1] + (5,)
        out.sum().backward()
        np.testing.assert_allclose(
            w.grad.numpy(), a.detach().numpy().reshape(-1, 4).T @ np.ones(
                (int(np.prod(shape[:-1])), 5), np.float32), rtol=1e-5, atol=1e-6)
        assert tuple(a.grad.shape) == shape


# ---- uint16/32/64: PyTorch's limited unsigned types -----------------------------------------
UNSIGNED = ["uint16", "uint32", "uint64"]


@requires_torch
@pytest.mark.parametrize("name", UNSIGNED)
def test_wide_unsigned_types_promote_and_reduce_as_pytorch(name):
    import torch

    def results(m):
        d = getattr(m, name)
        a = m.tensor([1, 2, 60000], dtype=d)
        outs = [a * 3, a * True, a * m.tensor(2), a + 1.5, a / 2, a * m.tensor(2.0), a.sum(),
                a.cumsum(0), a.prod(), a == 2, a & 6, a.bitwise_xor(a), m.cat([a, a]), a[1:],
                a.sort().values, m.tensor([-1, 5]).to(d), a.float(), m.full((2,), 7, dtype=d),
                m.zeros(2, dtype=d).view(m.int16 if name == "uint16" else m.float32),
                a.reshape(3, 1).expand(3, 2)]
        return [(o.numpy().tolist(), str(o.dtype).split(".")[-1]) for o in outs]

    assert results(tj) == results(torch)


@pytest.mark.parametrize("backend", ["interpret", pytest.param("numba", marks=pytest.mark.compile)])
@pytest.mark.parametrize("name", UNSIGNED)
def test_wide_unsigned_kernels_keep_the_full_range(name, backend):
    d = getattr(tj, name)
    top = np.iinfo(d.np).max
    x = tj.tensor([top, top - 6, 5], dtype=d)
    traced = tj.trace(lambda a: (a * 3 + 1) // 2 - (a & 1), (x,), backend=backend)
    got = traced(x)
    want = (x * 3 + 1) // 2 - (x & 1)
    assert got.dtype is d and got.numpy().tolist() == want.numpy().tolist()
    ref = ((x.numpy().astype(object) * 3 + 1) % (top + 1) // 2 - (x.numpy().astype(object) & 1))
    assert want.numpy().tolist() == [int(v) % (top + 1) for v in ref]
    assert traced.stats["eager_fallbacks"] == 0


def test_a_bitcast_shares_memory_and_is_not_differentiable():
    x = tj.zeros(4, requires_grad=True)
    bits = x.detach().view(tj.int32)
    bits[0] = 1  # the smallest subnormal
    assert x[0].item() == np.float32(1.4e-45) and bits.dtype is tj.int32
    y = x.view(tj.float16)
    assert tuple(y.shape) == (8,) and not y.requires_grad and y.grad_fn is None
    assert tj.ones(2).view("int32").numpy().tolist() == [1065353216] * 2
    assert tj.ones(2).view(np.int32).dtype is tj.int32
    # a numpy integer is a size (np.prod of a shape), not a dtype
    sized = tj.ones(2, 3, dtype=tj.float64).view(np.prod((2, 3)))
    assert tuple(sized.shape) == (6,) and sized.dtype is tj.float64


def test_upsample_is_interpolate_with_pytorchs_deprecation_warning():
    x = tj.tensor(f32(1, 2, 3, 3))
    with pytest.warns(UserWarning, match="upsample is deprecated"):
        y = tj.nn.functional.upsample(x, scale_factor=2, mode="bilinear", align_corners=False)
    want = tj.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    np.testing.assert_array_equal(y.numpy(), want.numpy())


def test_axis_and_keepdims_are_accepted_wherever_dim_and_keepdim_are():
    x = tj.tensor(f32(3, 4))
    np.testing.assert_array_equal(x.sum(axis=0).numpy(), x.sum(dim=0).numpy())
    np.testing.assert_array_equal(tj.amax(x, axis=1, keepdims=True).numpy(),
                                  tj.amax(x, 1, True).numpy())
    assert x.max(axis=1).indices.numpy().tolist() == x.max(1).indices.numpy().tolist()
    # a scripted list joined with axis= is still the list op scripting records
    sf = tj.script(_stack_rows)
    for n in (2, 5):
        xs = tj.tensor(f32(n, 3))
        np.testing.assert_allclose(sf(xs).numpy(), _stack_rows(xs).numpy())
    assert sf.stats["eager_fallbacks"] == 0


def _stack_rows(x):
    rows = []
    for t in range(x.shape[0]):
        rows.append(x[t] * 2)
    return tj.stack(rows, axis=1)
