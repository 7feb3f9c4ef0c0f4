"""Pooling, convolution options, padding and resampling against PyTorch: max/avg pools
in 1-3 dims (ceil_mode, return_indices, count_include_pad, divisor_override, integer
inputs), adaptive pools, max_unpool2d, conv1d/2d/3d (unbatched, padding='same'),
transposed convolutions, unfold/fold, F.pad's modes, F.interpolate's modes; values,
dtypes and gradients, eagerly and traced; the errors PyTorch raises; the layers."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch
from tracejit.tensor import functional as TF

RNG = np.random.default_rng(27)


def f32(*shape):
    return RNG.uniform(-2.0, 2.0, shape).astype(np.float32)


def ints(*shape):
    return RNG.integers(-20, 20, shape).astype(np.int64)


def _nnf(m):
    return m.nn.functional


def with_nan(a):
    a = a.copy()
    a.flat[::7] = np.nan
    a.flat[3::11] = -np.inf
    return a


# (id, call(lib, *inputs), inputs): `lib` is torch or tracejit; float inputs are
# differentiated; a call may return a tuple (values, int64 indices)
CASES = [
    ("max_pool2d-indices", lambda m, x: _nnf(m).max_pool2d(x, 3, 2, 1, return_indices=True),
     [f32(2, 3, 7, 8)]),
    ("max_pool2d-ceil", lambda m, x: _nnf(m).max_pool2d(x, 3, 2, ceil_mode=True),
     [f32(2, 3, 8, 6)]),
    ("max_pool2d-ceil-padding-dilation-indices", lambda m, x: _nnf(m).max_pool2d(
        x, (2, 3), (2, 1), (1, 1), (2, 1), ceil_mode=True, return_indices=True),
     [f32(1, 2, 6, 7)]),
    ("max_pool2d-nan-and-inf-indices", lambda m, x: _nnf(m).max_pool2d(
        x, 2, 1, 1, return_indices=True), [with_nan(f32(1, 2, 5, 5))]),
    ("max_pool2d-unbatched-int", lambda m, x: _nnf(m).max_pool2d(x, 2, ceil_mode=True,
                                                                 return_indices=True),
     [ints(3, 5, 5)]),
    ("max_pool1d-indices", lambda m, x: _nnf(m).max_pool1d(x, 3, 2, 1, ceil_mode=True,
                                                           return_indices=True),
     [f32(2, 3, 8)]),
    ("max_pool3d-indices", lambda m, x: _nnf(m).max_pool3d(x, 2, (1, 2, 2), 1,
                                                           return_indices=True),
     [f32(1, 2, 3, 4, 5)]),
    ("max_unpool2d", lambda m, x: _nnf(m).max_unpool2d(
        *_nnf(m).max_pool2d(x, 2, return_indices=True), 2), [f32(2, 2, 4, 6)]),
    ("max_unpool2d-overlapping", lambda m, x: _nnf(m).max_unpool2d(
        *_nnf(m).max_pool2d(x, 3, 1, return_indices=True), 3, 1), [f32(1, 2, 5, 5)]),
    ("adaptive_max_pool2d-indices", lambda m, x: _nnf(m).adaptive_max_pool2d(
        x, (3, 4), return_indices=True), [f32(2, 3, 7, 9)]),
    ("avg_pool2d-ceil", lambda m, x: _nnf(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True),
     [f32(2, 3, 8, 7)]),
    ("avg_pool2d-exclude-padding", lambda m, x: _nnf(m).avg_pool2d(
        x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [f32(2, 3, 8, 7)]),
    ("avg_pool2d-divisor", lambda m, x: _nnf(m).avg_pool2d(x, 2, divisor_override=3),
     [f32(1, 2, 4, 6)]),
    ("avg_pool2d-int64", lambda m, x: _nnf(m).avg_pool2d(x, 3, 2, 1), [ints(1, 2, 6, 6)]),
    ("avg_pool1d", lambda m, x: _nnf(m).avg_pool1d(x, 3, 2, 1, True, False),
     [f32(2, 3, 9)]),
    ("avg_pool3d", lambda m, x: _nnf(m).avg_pool3d(x, 2, 2, 1, ceil_mode=True),
     [f32(1, 2, 3, 4, 5)]),
    ("adaptive_avg_pool1d", lambda m, x: _nnf(m).adaptive_avg_pool1d(x, 4), [f32(2, 3, 9)]),
    ("conv1d-unbatched", lambda m, x, w: _nnf(m).conv1d(x, w, padding=1), [f32(3, 7),
                                                                            f32(4, 3, 3)]),
    ("conv2d-unbatched-strided", lambda m, x, w, b: _nnf(m).conv2d(x, w, b, 2, 1),
     [f32(3, 6, 7), f32(4, 3, 3, 3), f32(4)]),
    ("conv2d-same-even-kernel", lambda m, x, w: _nnf(m).conv2d(x, w, padding="same"),
     [f32(2, 3, 6, 7), f32(4, 3, 2, 4)]),
    ("conv1d-same-dilated", lambda m, x, w: _nnf(m).conv1d(x, w, padding="same", dilation=3),
     [f32(2, 2, 9), f32(3, 2, 4)]),
    ("conv3d-groups", lambda m, x, w, b: _nnf(m).conv3d(x, w, b, (1, 2, 1), 1, (2, 1, 1), 2),
     [f32(2, 4, 5, 6, 5), f32(4, 2, 2, 3, 2), f32(4)]),
    ("conv_transpose1d", lambda m, x, w: _nnf(m).conv_transpose1d(x, w, stride=3, padding=1),
     [f32(2, 3, 5), f32(3, 2, 4)]),
    ("conv_transpose2d-groups-output-padding", lambda m, x, w, b: _nnf(m).conv_transpose2d(
        x, w, b, 2, 1, 1, 2), [f32(2, 4, 4, 5), f32(4, 3, 3, 2), f32(6)]),
    ("conv_transpose2d-dilation", lambda m, x, w: _nnf(m).conv_transpose2d(
        x, w, stride=1, output_padding=1, dilation=2), [f32(3, 4, 5), f32(3, 2, 2, 3)]),
    ("conv_transpose3d", lambda m, x, w: _nnf(m).conv_transpose3d(x, w, stride=2, padding=1,
                                                                  output_padding=1),
     [f32(1, 2, 3, 3, 4), f32(2, 3, 3, 2, 3)]),
    ("unfold", lambda m, x: _nnf(m).unfold(x, (2, 3), 2, 1, (1, 2)), [f32(2, 3, 6, 7)]),
    ("fold", lambda m, x: _nnf(m).fold(x, (5, 6), 2, padding=1, stride=2), [f32(2, 8, 12)]),
    ("pad-constant-negative", lambda m, x: _nnf(m).pad(x, (2, -1, -2, 1), "constant", 1.5),
     [f32(2, 5, 6)]),
    ("pad-reflect", lambda m, x: _nnf(m).pad(x, (2, 1, 0, 3), mode="reflect"),
     [f32(2, 3, 5, 6)]),
    ("pad-replicate-negative", lambda m, x: _nnf(m).pad(x, (-1, 3), mode="replicate"),
     [f32(2, 3, 6)]),
    ("pad-circular", lambda m, x: _nnf(m).pad(x, (2, -1, 3, 1), mode="circular"),
     [f32(1, 2, 5, 6)]),
    ("pad-reflect-int", lambda m, x: _nnf(m).pad(x, (1, 2), mode="reflect"), [ints(2, 5)]),
    ("interpolate-nearest", lambda m, x: _nnf(m).interpolate(x, scale_factor=1.7),
     [f32(2, 3, 5, 6)]),
    ("interpolate-nearest-exact", lambda m, x: _nnf(m).interpolate(
        x, size=(7, 4), mode="nearest-exact"), [f32(2, 3, 5, 6)]),
    ("interpolate-linear", lambda m, x: _nnf(m).interpolate(
        x, scale_factor=2.5, mode="linear", recompute_scale_factor=True), [f32(2, 3, 5)]),
    ("interpolate-bilinear", lambda m, x: _nnf(m).interpolate(
        x, scale_factor=(1.5, 0.6), mode="bilinear"), [f32(2, 3, 5, 6)]),
    ("interpolate-bilinear-align-corners", lambda m, x: _nnf(m).interpolate(
        x, size=(9, 4), mode="bilinear", align_corners=True), [f32(2, 3, 5, 6)]),
    ("interpolate-bicubic", lambda m, x: _nnf(m).interpolate(x, size=(8, 9), mode="bicubic"),
     [f32(1, 2, 5, 6)]),
    ("interpolate-trilinear", lambda m, x: _nnf(m).interpolate(
        x, scale_factor=1.5, mode="trilinear", align_corners=True), [f32(1, 2, 3, 4, 3)]),
    ("interpolate-area", lambda m, x: _nnf(m).interpolate(x, size=(3, 4), mode="area"),
     [f32(2, 3, 7, 9)]),
]


def _to(lib, a: np.ndarray):
    t = lib.tensor(a)
    return t.requires_grad_() if a.dtype.kind == "f" else t


def _outputs(out) -> list:
    return list(out) if isinstance(out, tuple) else [out]


def _forward_backward(lib, fn, arrays, seed: int):
    """(outputs as numpy, their dtype names, input gradients) of fn at arrays."""
    xs = [_to(lib, a) for a in arrays]
    outs = _outputs(fn(lib, *xs))
    values = [o.detach().numpy() for o in outs]
    dtypes = [str(o.dtype).split(".")[-1] for o in outs]
    grads = []
    if outs[0].requires_grad:
        cot = np.random.default_rng(seed).uniform(-1, 1, values[0].shape).astype(np.float32)
        (outs[0] * lib.tensor(cot)).sum().backward()
        grads = [x.grad.numpy() for x in xs if x.requires_grad]
    return values, dtypes, grads


def _check_same(got, want):
    for g, w in zip(got[0], want[0]):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert got[1] == want[1]
    assert len(got[2]) == len(want[2])
    for g, w in zip(got[2], want[2]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@requires_torch
@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_eager_values_dtypes_and_gradients_match_pytorch(name, fn, arrays):
    import torch

    _check_same(_forward_backward(tj, fn, arrays, len(name)),
                _forward_backward(torch, fn, arrays, len(name)))


@requires_torch
@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_traced_values_and_gradients_match_pytorch(name, fn, arrays):
    import torch

    traced = tj.trace(lambda *xs: fn(tj, *xs), tuple(tj.tensor(a) for a in arrays))
    _check_same(_forward_backward(tj, lambda m, *xs: traced(*xs), arrays, len(name)),
                _forward_backward(torch, fn, arrays, len(name)))
    assert traced.stats["eager_fallbacks"] == 0


def _windows_by_loops(x, kernel, stride, padding, value):
    """Ceil-mode windows [N, C, KH, KW, OH, OW] by loops over every output position."""
    from tracejit.ops.windows import out_size

    n, c, h, w = x.shape
    oh, ow = (out_size(s, k, st, p, 1, True) for s, k, st, p in zip((h, w), kernel, stride,
                                                                     padding))
    out = np.empty((n, c) + tuple(kernel) + (oh, ow), x.dtype)
    for a in range(oh):
        for b in range(ow):
            for i in range(kernel[0]):
                for j in range(kernel[1]):
                    y, z = a * stride[0] + i - padding[0], b * stride[1] + j - padding[1]
                    inside = 0 <= y < h and 0 <= z < w
                    out[:, :, i, j, a, b] = x[:, :, y, z] if inside else value
    return out


def test_ceil_mode_windows_read_the_fill_past_the_input_and_fold_back():
    x = f32(1, 2, 6, 7)
    args = ((3, 2), (2, 3), (1, 0), (1, 1))
    got = TF.unfold2d(tj.tensor(x), *args, value=-5.0, ceil_mode=True)
    want = _windows_by_loops(x, args[0], args[1], args[2], -5.0)
    assert tuple(got.shape) == want.shape == (1, 2, 3, 2, 4, 3)
    np.testing.assert_array_equal(got.numpy(), want)
    g = f32(*want.shape)  # fold2d is unfold2d's adjoint: <unfold(x), g> = <x, fold(g)>
    folded = TF.fold2d(tj.tensor(g), x.shape, *args, ceil_mode=True).numpy()
    inner = (TF.unfold2d(tj.tensor(x), *args, ceil_mode=True).numpy() * g).sum()
    np.testing.assert_allclose(inner, (x * folded).sum(), rtol=1e-5)


@pytest.mark.parametrize("size,k,s,p,want", [(8, 3, 2, 0, 4), (7, 3, 2, 0, 3), (6, 2, 2, 1, 4),
                                             (5, 2, 2, 1, 3)])
def test_ceil_mode_keeps_a_last_window_only_if_it_starts_inside(size, k, s, p, want):
    from tracejit.ops.windows import out_size

    assert out_size(size, k, s, p, 1, ceil_mode=True) == want


ERRORS = [
    ("pad-odd-length", lambda m: _nnf(m).pad(m.ones(2, 3), (1, 2, 3)), RuntimeError),
    ("pad-too-long", lambda m: _nnf(m).pad(m.ones(3), (1, 1, 1, 1)), RuntimeError),
    ("pad-reflect-too-wide", lambda m: _nnf(m).pad(m.ones(1, 2, 3), (3, 0), "reflect"),
     RuntimeError),
    ("pad-reflect-1d-input", lambda m: _nnf(m).pad(m.ones(3), (1, 1), "reflect"),
     NotImplementedError),
    ("pad-unknown-mode", lambda m: _nnf(m).pad(m.ones(1, 2, 3), (1, 1), "mirror"),
     NotImplementedError),
    ("pad-crop-below-zero", lambda m: _nnf(m).pad(m.ones(2, 3), (-2, -2)), RuntimeError),
    ("avg_pool2d-divisor-zero", lambda m: _nnf(m).avg_pool2d(m.ones(1, 1, 4, 4), 2,
                                                             divisor_override=0),
     RuntimeError),
    ("max_pool2d-pad-over-half", lambda m: _nnf(m).max_pool2d(m.ones(1, 1, 4, 4), 2, 1, 2),
     RuntimeError),
    ("max_pool2d-empty-plane", lambda m: _nnf(m).max_pool2d(m.ones(1, 1, 0, 4), 1),
     RuntimeError),
    ("max_pool2d-2d-input", lambda m: _nnf(m).max_pool2d(m.ones(4, 4), 2), RuntimeError),
    ("conv2d-negative-dilation", lambda m: _nnf(m).conv2d(m.ones(1, 1, 4, 4),
                                                          m.ones(1, 1, 2, 2), dilation=-1),
     RuntimeError),
    ("conv2d-weight-dtype", lambda m: _nnf(m).conv2d(m.ones(1, 1, 4, 4),
                                                     m.ones(1, 1, 2, 2, dtype=m.float64)),
     RuntimeError),
    ("conv2d-same-strided", lambda m: _nnf(m).conv2d(m.ones(1, 1, 4, 4), m.ones(1, 1, 2, 2),
                                                     stride=2, padding="same"),
     RuntimeError),
    ("Conv2d-unknown-padding-mode", lambda m: m.nn.Conv2d(1, 1, 2, padding_mode="mirror"),
     ValueError),
    ("ConvTranspose2d-reflect", lambda m: m.nn.ConvTranspose2d(1, 1, 2,
                                                              padding_mode="reflect"),
     ValueError),
    ("conv1d-2d-weight", lambda m: _nnf(m).conv1d(m.ones(1, 1, 4), m.ones(1, 1)),
     RuntimeError),
    ("conv_transpose2d-output-padding", lambda m: _nnf(m).conv_transpose2d(
        m.ones(1, 1, 3, 3), m.ones(1, 1, 2, 2), stride=2, output_padding=2), RuntimeError),
    ("fold-block-count", lambda m: _nnf(m).fold(m.ones(1, 4, 5), (3, 3), 2), RuntimeError),
    ("interpolate-size-and-scale", lambda m: _nnf(m).interpolate(
        m.ones(1, 1, 4), size=3, scale_factor=2.0), ValueError),
    ("interpolate-align-corners-nearest", lambda m: _nnf(m).interpolate(
        m.ones(1, 1, 4), size=3, align_corners=True), ValueError),
    ("interpolate-bilinear-3d-input", lambda m: _nnf(m).interpolate(
        m.ones(1, 1, 4), size=3, mode="bilinear"), NotImplementedError),
    ("adaptive_avg_pool2d-2d-input", lambda m: _nnf(m).adaptive_avg_pool2d(m.ones(2, 2),
                                                                           (2, 2)),
     ValueError),
]


@requires_torch
@pytest.mark.parametrize("name,call,error", ERRORS, ids=[e[0] for e in ERRORS])
def test_raises_what_pytorch_raises(name, call, error):
    import torch

    with pytest.raises(error):
        call(torch)
    with pytest.raises(error):
        call(tj)


# (layer name, constructor arguments, input shape, forward's keyword arguments)
LAYERS = [
    ("Conv3d", (4, 6, 3), {"padding": "same"}, (2, 4, 4, 5, 6), {}),
    ("Conv1d", (4, 6, 3), {"padding": 2, "padding_mode": "reflect"}, (2, 4, 7), {}),
    ("Conv2d", (4, 6, (2, 3)), {"padding": "same", "padding_mode": "circular",
                                "dilation": (3, 1)}, (2, 4, 7, 6), {}),
    ("Conv3d", (2, 4, 3), {"padding": (1, 0, 2), "padding_mode": "replicate", "stride": 2},
     (1, 2, 4, 5, 6), {}),
    ("ConvTranspose1d", (4, 6, 3), {"stride": 2}, (2, 4, 7), {}),
    ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "groups": 2}, (2, 4, 6, 7),
     {"output_size": (12, 14)}),
    ("ConvTranspose3d", (4, 2, 3), {"stride": 2, "output_padding": 1}, (1, 4, 3, 4, 5), {}),
    ("MaxPool1d", (3,), {"stride": 2, "ceil_mode": True, "return_indices": True}, (2, 4, 9),
     {}),
    ("MaxPool3d", (2,), {"ceil_mode": True}, (1, 2, 3, 5, 4), {}),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 4, 9),
     {}),
    ("AvgPool3d", (2,), {"divisor_override": 3}, (1, 2, 4, 5, 6), {}),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 4, 8), {}),
    ("AdaptiveMaxPool2d", ((2, 3),), {"return_indices": True}, (2, 4, 6, 7), {}),
    ("ReflectionPad1d", (2,), {}, (2, 4, 5), {}),
    ("ReflectionPad2d", ((1, 2, 3, 0),), {}, (2, 4, 6, 7), {}),
    ("ReplicationPad1d", ((3, 1),), {}, (2, 4, 5), {}),
    ("ReplicationPad2d", (2,), {}, (2, 4, 6, 7), {}),
    ("ZeroPad2d", ((1, -1, 2, 0),), {}, (2, 4, 6, 7), {}),
    ("ConstantPad1d", (2, 3.5), {}, (2, 4, 5), {}),
    ("ConstantPad2d", ((1, 0, 2, 1), -1.0), {}, (2, 4, 6, 7), {}),
    ("CircularPad2d", (2,), {}, (2, 4, 6, 7), {}),
    ("Upsample", (), {"scale_factor": 2, "mode": "bilinear"}, (2, 4, 6, 7), {}),
    ("UpsamplingNearest2d", (), {"size": (9, 3)}, (2, 4, 6, 7), {}),
    ("UpsamplingBilinear2d", (), {"scale_factor": 1.5}, (2, 4, 6, 7), {}),
    ("Unfold", ((2, 3),), {"padding": 1, "stride": 2}, (2, 4, 6, 7), {}),
    ("Fold", ((4, 5), (2, 2)), {}, (2, 8, 12), {}),
]


@requires_torch
@pytest.mark.parametrize("name,args,kwargs,shape,call", LAYERS,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(LAYERS)])
def test_layers_match_pytorchs_parameters_outputs_and_repr(name, args, kwargs, shape, call):
    import torch

    theirs, ours = getattr(torch.nn, name)(*args, **kwargs), getattr(tj.nn, name)(*args,
                                                                                  **kwargs)
    assert [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in ours.state_dict().items()]
    ours.load_state_dict({k: tj.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = f32(*shape)
    want, got = _outputs(theirs(torch.tensor(x), **call)), _outputs(ours(tj.tensor(x), **call))
    for w, g in zip(want, got):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    assert repr(ours) == repr(theirs)


@pytest.mark.compile
def test_a_compiled_ceil_mode_max_pool_gives_pytorchs_values_indices_and_gradient():
    torch = pytest.importorskip("torch")
    x = f32(2, 3, 7, 8)
    traced = tj.trace(lambda a: tj.nn.functional.max_pool2d(
        a * 2, 3, 2, 1, ceil_mode=True, return_indices=True), (tj.tensor(x),), backend="numba")
    ours = tj.tensor(x).requires_grad_()
    out, where = traced(ours)
    out.sum().backward()
    theirs = torch.tensor(x, requires_grad=True)
    want, want_where = torch.nn.functional.max_pool2d(theirs * 2, 3, 2, 1, ceil_mode=True,
                                                      return_indices=True)
    want.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(where.numpy(), want_where.numpy())
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6)
    assert traced.stats["eager_fallbacks"] == 0
