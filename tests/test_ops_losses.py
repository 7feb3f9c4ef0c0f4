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


# ---- losses and distances ----------------------------------------------------------------

def _signs(*shape):
    return np.where(RNG.random(shape) < 0.5, -1.0, 1.0)


def _nnf(lib):
    return lib.nn.functional


LOSSES = [
    ("l1", lambda lib, x, y: _nnf(lib).l1_loss(x, y), randn(3, 4), randn(3, 4)),
    ("l1-none", lambda lib, x, y: _nnf(lib).l1_loss(x, y, reduction="none"), randn(3, 4),
     randn(3, 4)),
    ("mse-weight", lambda lib, x, y: _nnf(lib).mse_loss(
        x, y, reduction="sum", weight=lib.tensor([[1.0, 2.0, 0.5, 0.0]] * 3,
                                                 dtype=lib.float64)),
     randn(3, 4), randn(3, 4)),
    ("huber", lambda lib, x, y: _nnf(lib).huber_loss(x, y, delta=0.7), randn(3, 4),
     randn(3, 4)),
    ("huber-sum", lambda lib, x, y: _nnf(lib).huber_loss(x, y, "sum", 2.0), randn(5),
     randn(5)),
    ("kl-batchmean", lambda lib, x, y: _nnf(lib).kl_div(x.log_softmax(1), y.softmax(1),
                                                        reduction="batchmean"),
     randn(3, 4), randn(3, 4)),
    ("kl-log-target", lambda lib, x, y: _nnf(lib).kl_div(x, y, reduction="sum",
                                                         log_target=True), randn(3, 4),
     randn(3, 4)),
    ("kl-zero-target", lambda lib, x, y: _nnf(lib).kl_div(x, y.relu(), reduction="none"),
     randn(3, 4), randn(3, 4)),
    ("margin-ranking", lambda lib, a, b, t: _nnf(lib).margin_ranking_loss(a, b, t, 0.3),
     randn(6), randn(6), _signs(6)),
    ("hinge-embedding", lambda lib, x, t: _nnf(lib).hinge_embedding_loss(
        x, t, 0.5, reduction="none"), randn(3, 4), _signs(3, 4)),
    ("soft-margin", lambda lib, x, t: _nnf(lib).soft_margin_loss(x, t.detach()),
     randn(3, 4), _signs(3, 4)),
    ("multilabel-soft-margin", lambda lib, x, t: _nnf(lib).multilabel_soft_margin_loss(
        x, t, lib.tensor([0.5, 1.0, 2.0, 1.5], dtype=lib.float64), reduction="none"),
     randn(3, 4), (_signs(3, 4) > 0).astype(np.float64)),
    ("cosine-embedding", lambda lib, a, b, t: _nnf(lib).cosine_embedding_loss(a, b, t, 0.1),
     randn(5, 3), randn(5, 3), _signs(5)),
    ("triplet", lambda lib, a, p, n: _nnf(lib).triplet_margin_loss(a, p, n, 0.5, p=1.5,
                                                                   swap=True),
     randn(4, 3), randn(4, 3), randn(4, 3)),
    ("poisson-log", lambda lib, x, t: _nnf(lib).poisson_nll_loss(x, t, full=True),
     randn(3, 4), np.abs(randn(3, 4)) * 3),
    ("poisson-rate", lambda lib, x, t: _nnf(lib).poisson_nll_loss(
        x.abs(), t, log_input=False, reduction="sum"), randn(3, 4), np.abs(randn(3, 4))),
    ("gaussian", lambda lib, x, t, v: _nnf(lib).gaussian_nll_loss(x, t, v.abs(), full=True),
     randn(3, 4), randn(3, 4), randn(3, 4)),
    ("gaussian-one-var", lambda lib, x, t, v: _nnf(lib).gaussian_nll_loss(
        x, t, v.abs() * 1e-8, reduction="none"), randn(3, 4), randn(3, 4), randn(3)),
    ("multi-margin", lambda lib, x, t: _nnf(lib).multi_margin_loss(x, t), randn(4, 5),
     np.array([0, 4, 2, 2])),
    ("multi-margin-p2", lambda lib, x, t: _nnf(lib).multi_margin_loss(
        x, t, p=2, margin=0.5, weight=lib.tensor([1.0, 2.0, 0.5, 1.0, 3.0],
                                                 dtype=lib.float64), reduction="none"),
     randn(4, 5), np.array([0, 4, 2, 2])),
    ("pairwise-distance", lambda lib, a, b: _nnf(lib).pairwise_distance(a, b, 3.0,
                                                                        keepdim=True),
     randn(4, 3), randn(4, 3)),
    ("cosine-similarity", lambda lib, a, b: _nnf(lib).cosine_similarity(a, b, dim=-2),
     randn(1, 2, 3), randn(2, 1, 3)),
    ("bce-logits-pos-weight", lambda lib, x, t: _nnf(lib).binary_cross_entropy_with_logits(
        x, t, pos_weight=lib.tensor([1.0, 2.0, 0.5, 3.0], dtype=lib.float64)),
     randn(3, 4) * 10, RNG.random((3, 4))),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(fn, arrays, id=name)
                                        for name, fn, *arrays in LOSSES])
def test_loss_matches_pytorch(fn, arrays):
    assert_matches(fn, *arrays)


MODULES = [
    ("L1Loss", {}, 2), ("HuberLoss", {"reduction": "sum", "delta": 0.5}, 2),
    ("KLDivLoss", {"reduction": "batchmean"}, 2), ("MarginRankingLoss", {"margin": 0.2}, 3),
    ("HingeEmbeddingLoss", {"margin": 2.0}, 2), ("SoftMarginLoss", {}, 2),
    ("CosineEmbeddingLoss", {"margin": 0.3}, 3), ("TripletMarginLoss", {"margin": 0.7}, 3),
    ("PoissonNLLLoss", {"log_input": False}, 2), ("GaussianNLLLoss", {"full": True}, 3),
    ("CosineSimilarity", {"dim": 0}, 2), ("PairwiseDistance", {"p": 1.0}, 2),
]


@pytest.mark.parametrize("name,kwargs,n", MODULES, ids=[m[0] for m in MODULES])
def test_loss_module_matches_pytorch(name, kwargs, n):
    import torch

    arrays = [np.abs(randn(4, 3)) for _ in range(n)]
    if name in ("MarginRankingLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss"):
        arrays[-1] = _signs(*(4, 3) if name != "CosineEmbeddingLoss" else (4,))
    got = getattr(tj.nn, name)(**kwargs)(*[tj.tensor(a) for a in arrays])
    want = getattr(torch.nn, name)(**kwargs)(*[torch.tensor(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), want.numpy(), 1e-6, 1e-7)


def test_weighted_loss_modules_keep_their_weight_as_a_buffer():
    w = tj.tensor([1.0, 2.0, 3.0])
    for module in (tj.nn.MultiLabelSoftMarginLoss(w), tj.nn.MultiMarginLoss(weight=w)):
        assert list(module.state_dict()) == ["weight"]


@pytest.mark.parametrize("call,error", [
    (lambda F: F.l1_loss(tj.randn(2, 3), tj.randn(4)), RuntimeError),
    (lambda F: F.huber_loss(tj.randn(3), tj.randn(3), delta=0.0), RuntimeError),
    (lambda F: F.kl_div(tj.randn(3), tj.randn(3), reduction="avg"), ValueError),
    (lambda F: F.gaussian_nll_loss(tj.randn(3, 2), tj.randn(3, 2), tj.ones(2, 3)),
     ValueError),
    (lambda F: F.gaussian_nll_loss(tj.randn(3), tj.randn(3), -tj.ones(3)), ValueError),
    (lambda F: F.multi_margin_loss(tj.randn(2, 3), tj.tensor([0, 1]), p=3), ValueError),
    (lambda F: F.triplet_margin_loss(tj.randn(2, 3), tj.randn(2, 3), tj.randn(2, 3),
                                     margin=0.0), ValueError),
])
def test_loss_errors_are_pytorchs(call, error):
    with pytest.raises(error):
        call(tj.nn.functional)


def test_losses_trace_as_eager():
    x, y = tj.tensor(randn(3, 4)), tj.tensor(randn(3, 4))

    def f(x, y):
        F = tj.nn.functional
        return F.huber_loss(x, y) + F.soft_margin_loss(x, y.sign()) + \
            F.cosine_similarity(x, y).sum()

    traced = tj.trace(f, (x, y), backend="interpret")
    np.testing.assert_allclose(traced(x, y).numpy(), f(x, y).numpy(), 1e-12)


# ---- normalisation ------------------------------------------------------------------------

NORMS = [
    ("group-norm", lambda lib, x, w, b: _nnf(lib).group_norm(x, 2, w, b), randn(3, 4, 5),
     randn(4), randn(4)),
    ("group-norm-4d", lambda lib, x: _nnf(lib).group_norm(x, 4), randn(2, 4, 3, 3)),
    ("instance-norm", lambda lib, x, w, b: _nnf(lib).instance_norm(x, weight=w, bias=b),
     randn(2, 3, 5), randn(3), randn(3)),
    ("rms-norm", lambda lib, x, w: _nnf(lib).rms_norm(x, (3, 4), w), randn(2, 3, 4),
     randn(3, 4)),
    ("rms-norm-default-eps", lambda lib, x: _nnf(lib).rms_norm(x, (4,)), randn(2, 4) * 1e-5),
    ("local-response-norm", lambda lib, x: _nnf(lib).local_response_norm(x, 3, 0.1, 0.5, 2.0),
     randn(2, 5, 4)),
    ("local-response-norm-even", lambda lib, x: _nnf(lib).local_response_norm(x, 4),
     randn(2, 6, 3, 3)),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(fn, arrays, id=name)
                                        for name, fn, *arrays in NORMS])
def test_norm_matches_pytorch(fn, arrays):
    assert_matches(fn, *arrays)


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (2, 3, 5)),
                                       ("InstanceNorm2d", (2, 3, 4, 4)),
                                       ("InstanceNorm2d", (3, 4, 4))])
def test_instance_norm_modules_track_running_statistics_as_pytorch(cls, shape):
    import torch

    ours = getattr(tj.nn, cls)(3, affine=True, track_running_stats=True)
    theirs = getattr(torch.nn, cls)(3, affine=True, track_running_stats=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = randn(*shape, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_allclose(ours(tj.tensor(x)).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), 1e-5, 1e-6)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(),
                                   1e-5, 1e-7)
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(ours(tj.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), 1e-5, 1e-6)


def test_norm_modules_have_pytorchs_parameters():
    import torch

    pairs = [(tj.nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)),
             (tj.nn.RMSNorm([3, 4]), torch.nn.RMSNorm([3, 4])),
             (tj.nn.InstanceNorm2d(3), torch.nn.InstanceNorm2d(3)),
             (tj.nn.LocalResponseNorm(3), torch.nn.LocalResponseNorm(3))]
    for ours, theirs in pairs:
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    x = randn(2, 4, 3, 3, dtype=np.float32)
    np.testing.assert_allclose(tj.nn.GroupNorm(2, 4)(tj.tensor(x)).detach().numpy(),
                               torch.nn.GroupNorm(2, 4)(torch.tensor(x)).detach().numpy(),
                               1e-5, 1e-6)


def test_group_norm_errors_are_pytorchs():
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        tj.nn.functional.group_norm(tj.randn(2, 3, 4), 2)
    with pytest.raises(ValueError, match="num_channels must be divisible"):
        tj.nn.GroupNorm(2, 3)


def test_group_norm_of_bfloat16_with_float32_parameters_keeps_bfloat16():
    pytest.importorskip("ml_dtypes")
    out = tj.nn.GroupNorm(2, 4)(tj.randn(2, 4, 3).bfloat16())
    assert out.dtype is tj.bfloat16


def test_norms_trace_as_eager():
    x = tj.tensor(randn(2, 4, 3))

    def f(x):
        F = tj.nn.functional
        return F.group_norm(x, 2) + F.instance_norm(x) + F.local_response_norm(x, 3)

    traced = tj.trace(f, (x,), backend="interpret")
    np.testing.assert_allclose(traced(x).numpy(), f(x).numpy(), 1e-12)


# ---- layers: identity, bilinear, bags of embeddings, channel and alpha dropout --------

def test_bilinear_matches_pytorch():
    assert_matches(lambda lib, a, b, w, bias: _nnf(lib).bilinear(a, b, w, bias),
                   randn(2, 3, 4), randn(2, 3, 5), randn(6, 4, 5), randn(6))


def test_bilinear_module_has_pytorchs_parameters():
    import torch

    ours, theirs = tj.nn.Bilinear(3, 4, 5), torch.nn.Bilinear(3, 4, 5)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert float(ours.weight.abs().max()) <= 1 / np.sqrt(3)


BAGS = [
    ("sum-offsets", dict(mode="sum"), np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 2])),
    ("mean-offsets", dict(mode="mean"), np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 2])),
    ("max-offsets", dict(mode="max"), np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 2])),
    ("mean-2d", dict(mode="mean"), np.array([[1, 2], [4, 5], [0, 0]]), None),
    ("last-offset", dict(mode="sum", include_last_offset=True), np.array([1, 2, 4, 5]),
     np.array([0, 1, 4])),
    ("padding", dict(mode="mean", padding_idx=2), np.array([1, 2, 2, 5, 2]),
     np.array([0, 3, 4])),
]


@pytest.mark.parametrize("kwargs,idx,offsets", [pytest.param(*b[1:], id=b[0]) for b in BAGS])
def test_embedding_bag_matches_pytorch(kwargs, idx, offsets):
    def bag(lib, w):
        off = None if offsets is None else lib.tensor(offsets)
        return _nnf(lib).embedding_bag(lib.tensor(idx), w, off, **kwargs)

    assert_matches(bag, randn(6, 3))


def test_embedding_bag_per_sample_weights_match_pytorch():
    assert_matches(lambda lib, w, s: _nnf(lib).embedding_bag(
        lib.tensor([0, 3, 3, 1]), w, lib.tensor([0, 1]), mode="sum", per_sample_weights=s),
        randn(4, 2), randn(4))


def test_embedding_bag_module_matches_pytorch():
    import torch

    ours = tj.nn.EmbeddingBag(5, 3, mode="max", padding_idx=0)
    theirs = torch.nn.EmbeddingBag(5, 3, mode="max", padding_idx=0)
    assert float(ours.weight[0].abs().sum()) == 0
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
    idx, offsets = [1, 0, 2, 4, 3], [0, 2]
    np.testing.assert_allclose(ours(tj.tensor(idx), tj.tensor(offsets)).detach().numpy(),
                               theirs(torch.tensor(idx), torch.tensor(offsets)).detach().numpy())


def test_identity_unflatten_and_softmax2d_match_pytorch():
    import torch

    x = randn(2, 3, 4, 5)
    assert tj.nn.Identity(7, any=1)(tj.tensor(x)).shape == (2, 3, 4, 5)
    assert tuple(tj.nn.Unflatten(1, (3, 1))(tj.tensor(x)).shape) == \
        tuple(torch.nn.Unflatten(1, (3, 1))(torch.tensor(x)).shape)
    np.testing.assert_allclose(tj.nn.Softmax2d()(tj.tensor(x)).numpy(),
                               torch.nn.Softmax2d()(torch.tensor(x)).numpy(), 1e-12)
    with pytest.raises(ValueError):
        tj.nn.Softmax2d()(tj.randn(2, 3))


@pytest.mark.parametrize("fn,shape", [("dropout1d", (4, 6, 50)), ("dropout1d", (6, 50)),
                                      ("dropout3d", (4, 6, 2, 5, 5)),
                                      ("feature_alpha_dropout", (4, 6, 50))])
def test_channel_dropouts_drop_whole_channels(fn, shape):
    tj.manual_seed(0)
    x = tj.ones(*shape)
    kwargs = {"training": True} if fn == "feature_alpha_dropout" else {}
    out = getattr(tj.nn.functional, fn)(x, 0.5, **kwargs).numpy()
    per_channel = out.reshape(*shape[:-3 if fn == "dropout3d" else -1], -1)
    assert (per_channel == per_channel[..., :1]).all()  # one value per channel
    assert len(np.unique(per_channel[..., 0])) == 2


def test_alpha_dropout_keeps_mean_and_variance():
    tj.manual_seed(0)
    x = tj.randn(200_000)
    out = tj.nn.functional.alpha_dropout(x, 0.2, training=True)
    assert abs(float(out.mean())) < 0.02 and abs(float(out.std()) - 1) < 0.02
    assert tj.nn.AlphaDropout(0.2).eval()(x) is x
    assert tj.nn.functional.alpha_dropout(x, 0.2) is x  # training defaults to False


def test_dropout_modules_follow_train_and_eval():
    x = tj.ones(2, 3, 4)
    for module in (tj.nn.Dropout1d(0.5), tj.nn.Dropout3d(0.5), tj.nn.AlphaDropout(0.5),
                   tj.nn.FeatureAlphaDropout(0.5)):
        assert module.eval()(x) is x
    with pytest.raises(RuntimeError, match="dropout1d"):
        tj.nn.functional.dropout1d(tj.ones(2, 3, 4, 5))
    with pytest.raises(ValueError):
        tj.nn.Dropout1d(1.5)


# ---- nn.init ------------------------------------------------------------------------------

@pytest.mark.parametrize("nonlinearity,param", [("linear", None), ("conv3d", None),
                                                ("conv_transpose2d", None), ("sigmoid", None),
                                                ("tanh", None), ("relu", None),
                                                ("leaky_relu", None), ("leaky_relu", 0.2),
                                                ("selu", None)])
def test_calculate_gain_is_pytorchs(nonlinearity, param):
    import torch

    assert tj.nn.init.calculate_gain(nonlinearity, param) == \
        pytest.approx(torch.nn.init.calculate_gain(nonlinearity, param))


def test_calculate_gain_rejects_what_pytorch_rejects():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        tj.nn.init.calculate_gain("softsign")
    with pytest.raises(ValueError, match="not a valid number"):
        tj.nn.init.calculate_gain("leaky_relu", True)


@pytest.mark.parametrize("name,kwargs,std", [
    ("kaiming_normal_", {}, np.sqrt(2 / (32 * 9))),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, np.sqrt(2 / (64 * 9))),
    ("kaiming_uniform_", {"nonlinearity": "tanh"}, 5 / 3 / np.sqrt(32 * 9)),
    ("xavier_normal_", {"gain": 2.0}, 2 * np.sqrt(2 / (96 * 9))),
    ("xavier_uniform_", {}, np.sqrt(2 / (96 * 9))),
])
def test_fan_based_initialisers_have_pytorchs_spread(name, kwargs, std):
    w = tj.empty(64, 32, 3, 3)
    getattr(tj.nn.init, name)(w, **kwargs)
    assert abs(float(w.std()) / std - 1) < 0.03 and abs(float(w.mean())) < 0.05 * std


def test_kaiming_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        tj.nn.init.kaiming_normal_(tj.empty(3, 4), mode="fan_avg")


def test_trunc_normal_stays_in_its_bounds_with_pytorchs_mean():
    t = tj.empty(200, 100)
    tj.nn.init.trunc_normal_(t, 1.0, 2.0, -1.0, 2.0)
    values = t.numpy()
    assert values.min() >= -1.0 and values.max() <= 2.0
    assert abs(values.mean() - 0.5879) < 0.02  # the truncated distribution's mean


def test_orthogonal_gives_orthonormal_rows_or_columns_times_gain():
    wide, tall = tj.empty(3, 5), tj.empty(6, 2, 2)
    tj.nn.init.orthogonal_(wide)
    tj.nn.init.orthogonal_(tall, gain=2.0)
    np.testing.assert_allclose(wide.numpy() @ wide.numpy().T, np.eye(3), atol=1e-6)
    flat = tall.numpy().reshape(6, 4)
    np.testing.assert_allclose(flat.T @ flat, 4 * np.eye(4), atol=1e-5)


def test_eye_dirac_and_sparse_match_pytorch():
    import torch

    d, want = tj.empty(4, 2, 3, 3), torch.empty(4, 2, 3, 3)
    tj.nn.init.dirac_(d, groups=2)
    torch.nn.init.dirac_(want, groups=2)
    np.testing.assert_array_equal(d.numpy(), want.numpy())
    e = tj.nn.init.eye_(tj.empty(3, 5))
    np.testing.assert_array_equal(e.numpy(), np.eye(3, 5))
    s = tj.nn.init.sparse_(tj.empty(10, 4), 0.3)
    assert ((s.numpy() == 0).sum(0) == 3).all()
    with pytest.raises(ValueError):
        tj.nn.init.eye_(tj.empty(2, 2, 2))
    with pytest.raises(ValueError):
        tj.nn.init.dirac_(tj.empty(3, 2, 3), groups=2)


def test_initialisers_record_no_history():
    w = tj.nn.Parameter(tj.empty(4, 3))
    for init in (tj.nn.init.kaiming_normal_, tj.nn.init.orthogonal_, tj.nn.init.zeros_):
        assert init(w) is w and w.grad_fn is None and w.is_leaf


# ---- optimisers ---------------------------------------------------------------------------

def _optimise(lib, name, kwargs, steps=5):
    rng = np.random.default_rng(1)
    a, b, w0 = rng.standard_normal((6, 4)), rng.standard_normal(6), rng.standard_normal(4)
    w = lib.tensor(w0, requires_grad=True)
    a, b = lib.tensor(a), lib.tensor(b)
    opt = getattr(lib.optim, name)([w], **kwargs)

    def closure():
        opt.zero_grad()
        loss = ((a @ w - b) ** 2).sum() + (w ** 4).sum() * 0.1
        loss.backward()
        return loss

    for _ in range(steps):
        if name == "LBFGS":
            opt.step(closure)
        else:
            closure()
            opt.step()
    return w.detach().numpy()


@pytest.mark.parametrize("name,kwargs", [
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1)),
    ("LBFGS", dict(max_iter=5)),
    ("LBFGS", dict(lr=0.5, history_size=3, line_search_fn="strong_wolfe")),
])
def test_optimiser_steps_match_pytorch(name, kwargs):
    np.testing.assert_allclose(_optimise(tj, name, kwargs), _optimise(__import__("torch"),
                                                                       name, kwargs),
                               rtol=1e-10, atol=1e-12)


def test_lbfgs_needs_a_closure_and_a_known_line_search():
    w = tj.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="closure"):
        tj.optim.LBFGS([w]).step(None)
    with pytest.raises(RuntimeError, match="strong_wolfe"):
        tj.optim.LBFGS([w], line_search_fn="backtracking").step(lambda: (w * w).sum())


def test_lbfgs_returns_the_first_loss_and_counts_evaluations():
    w = tj.tensor([3.0, -2.0], requires_grad=True)
    opt = tj.optim.LBFGS([w], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((w - 1.0) ** 2).sum()
        loss.backward()
        return loss

    assert float(opt.step(closure)) == pytest.approx(13.0)
    np.testing.assert_allclose(w.detach().numpy(), [1.0, 1.0], atol=1e-6)
    assert opt.state[w]["func_evals"] >= 2


# ---- data utilities -----------------------------------------------------------------------

def test_random_sampler_without_replacement_repeats_whole_permutations():
    tj.manual_seed(0)
    drawn = list(tj.utils.data.RandomSampler(range(5), num_samples=12))
    assert len(drawn) == 12 and sorted(drawn[:5]) == sorted(drawn[5:10]) == list(range(5))
    assert len(set(drawn[10:])) == 2
    assert sorted(tj.utils.data.RandomSampler(range(7))) == list(range(7))


def test_random_sampler_with_replacement_draws_num_samples():
    sampler = tj.utils.data.RandomSampler(range(3), replacement=True, num_samples=50,
                                          generator=tj.Generator().manual_seed(1))
    drawn = list(sampler)
    assert len(sampler) == 50 and len(drawn) == 50 and set(drawn) <= {0, 1, 2}
    assert len(set(drawn)) == 3


def test_random_sampler_checks_its_arguments_as_pytorch():
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        tj.utils.data.RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        tj.utils.data.RandomSampler(range(3), num_samples=0)


def test_subset_and_random_split_partition_a_dataset():
    data = tj.utils.data.TensorDataset(tj.arange(10))
    sub = tj.utils.data.Subset(data, [4, 1, 7])
    assert len(sub) == 3 and int(sub[1][0]) == 1
    parts = tj.utils.data.random_split(data, [0.33, 0.33, 0.34],
                                       generator=tj.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [4, 3, 3]  # the remainder goes to the first
    values = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
    assert values == list(range(10))
    assert [len(p) for p in tj.utils.data.random_split(data, [6, 4])] == [6, 4]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        tj.utils.data.random_split(data, [6, 5])
    loader = tj.utils.data.DataLoader(parts[0], batch_size=2, shuffle=True)
    assert sum(len(b[0]) for b in loader) == 4


# ---- constructors, device queries, DataParallel -------------------------------------------

def test_typed_tensor_constructors_match_pytorch():
    import torch

    for name in ("FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor"):
        ours, theirs = getattr(tj, name), getattr(torch, name)
        assert ours([1.7, 0.0, -2.5]).tolist() == theirs([1.7, 0.0, -2.5]).tolist()
        assert str(ours([1, 0]).dtype).split(".")[-1] == str(theirs([1, 0]).dtype).split(".")[-1]
        assert tuple(ours(2, 3).shape) == (2, 3) and tuple(ours().shape) == (0,)
    assert isinstance(tj.zeros(2), tj.FloatTensor)
    assert not isinstance(tj.zeros(2), tj.LongTensor)
    assert isinstance(tj.tensor([1, 2]), tj.LongTensor)


def test_tensors_answer_pytorchs_device_queries():
    x = tj.zeros(2)
    assert x.is_cpu and not x.is_cuda
    assert not any(getattr(x, q) for q in ("is_xpu", "is_mps", "is_meta", "is_sparse",
                                           "is_quantized", "is_mkldnn", "is_nested"))


def test_accelerator_is_cuda_when_there_is_one():
    acc = tj.accelerator
    assert acc.is_available() == tj.cuda.is_available()
    if acc.is_available():
        assert acc.current_accelerator() == tj.device("cuda") and acc.device_count() >= 1
    else:
        assert acc.current_accelerator() is None and acc.device_count() == 0
        assert acc.current_device_index() == -1
        acc.synchronize()  # nothing to wait for
    assert acc.memory_allocated() >= 0 and tj.cuda.memory_reserved() >= 0


def test_cuda_streams_need_cuda():
    if tj.cuda.is_available():
        pytest.skip("CUDA (or its simulator) is here: tests/cuda_backend covers streams")
    with pytest.raises(RuntimeError, match="need CUDA"):
        tj.cuda.Stream()
    with pytest.raises(RuntimeError, match="need CUDA"):
        tj.cuda.Event(enable_timing=True)
    assert tj.cuda.memory_reserved() == 0 and tj.cuda.max_memory_reserved() >= 0


def test_data_parallel_wraps_its_module_as_pytorch():
    import torch

    ours = tj.nn.DataParallel(tj.nn.Linear(3, 2))
    theirs = torch.nn.DataParallel(torch.nn.Linear(3, 2))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert isinstance(ours.module, tj.nn.Linear)
    x = tj.randn(4, 3)
    np.testing.assert_allclose(ours(x).detach().numpy(), ours.module(x).detach().numpy())
    ours(x).sum().backward()
    assert ours.module.weight.grad is not None
    assert tj.nn.parallel.DataParallel is tj.nn.DataParallel


def test_linspace_from_a_float32_tensor_computes_in_double():
    import torch

    got = tj.linspace(tj.tensor(4.3), -3, 50, dtype=tj.float64).numpy()
    want = torch.linspace(torch.tensor(4.3), -3, 50, dtype=torch.float64).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
