"""Attention against PyTorch with copied weights: F.scaled_dot_product_attention (masks,
causal, scale, grouped heads, dropout, eager, traced and scripted), nn.MultiheadAttention,
the Transformer layers and stacks, a word-level transformer language model trained for a
few steps; and copy.deepcopy of tensors and modules."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn
from conftest import requires_torch

F = nn.functional
RNG = np.random.default_rng(0)


def data(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def as_torch(*arrays, grad=True):
    import torch

    return [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]


def as_tj(*arrays, grad=True):
    return [tj.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]


def assert_close(got, want, atol=1e-10, rtol=1e-7):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=atol,
                               rtol=rtol)


def load_from_torch(jm, tm):
    """PyTorch's state dict into the tracejit module through numpy, key for key."""
    assert list(jm.state_dict()) == list(tm.state_dict())
    jm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})


# ---- F.scaled_dot_product_attention ----------------------------------------------------------

SDPA_CASES = {
    "plain": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), {}),
    "3-d": ((2, 3, 4), (2, 5, 4), (2, 5, 6), {}),
    "broadcast batch": ((2, 3, 4), (3, 2, 5, 4), (3, 2, 5, 4), {}),
    "causal": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), {"is_causal": True}),
    "scale": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), {"scale": 0.3}),
    "bool mask": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), {"attn_mask": (3, 5)}),
    "bool mask per batch": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4),
                            {"attn_mask": (2, 1, 3, 5)}),
    "float mask": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), {"attn_mask": "float"}),
    "grouped heads": ((1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), {"enable_gqa": True}),
}


def _sdpa_args(case):
    q, k, v, kw = SDPA_CASES[case]
    kw = dict(kw)
    mask = kw.get("attn_mask")
    if isinstance(mask, tuple):
        kw["attn_mask"] = RNG.random(mask) > 0.3
    elif mask == "float":
        kw["attn_mask"] = data(q[-2], k[-2])
    return (data(*q), data(*k), data(*v)), kw


@requires_torch
@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_values_and_gradients_match_pytorch(case):
    import torch

    (q, k, v), kw = _sdpa_args(case)
    mask = kw.pop("attn_mask", None)
    tq, tk, tv = as_torch(q, k, v)
    jq, jk, jv = as_tj(q, k, v)
    want = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if mask is None else torch.tensor(mask), **kw)
    got = F.scaled_dot_product_attention(
        jq, jk, jv, attn_mask=None if mask is None else tj.tensor(mask), **kw)
    assert_close(got, want)
    cot = data(*want.shape)
    want.backward(torch.tensor(cot))
    got.backward(tj.tensor(cot))
    for a, b in ((jq, tq), (jk, tk), (jv, tv)):
        assert_close(a.grad, b.grad)


@requires_torch
def test_sdpa_a_fully_masked_row_gives_zeros_and_finite_gradients_as_pytorch():
    import torch

    q, k, v = data(1, 2, 3, 4), data(1, 2, 5, 4), data(1, 2, 5, 4)
    bool_mask = np.ones((3, 5), bool)
    bool_mask[1] = False
    float_mask = np.where(bool_mask, 0.0, -np.inf)
    for mask in (bool_mask, float_mask):
        tq, tk, tv = as_torch(q, k, v)
        jq, jk, jv = as_tj(q, k, v)
        want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, torch.tensor(mask))
        got = F.scaled_dot_product_attention(jq, jk, jv, tj.tensor(mask))
        assert_close(got, want)
        assert not got[:, :, 1].detach().numpy().any()
        want.sum().backward()
        got.sum().backward()
        for a, b in ((jq, tq), (jk, tk), (jv, tv)):
            assert np.isfinite(a.grad.numpy()).all()
            assert_close(a.grad, b.grad)


def test_sdpa_rejects_an_explicit_mask_with_is_causal_and_mismatched_inputs():
    q = tj.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tj.ones(3, 3, dtype=tj.bool),
                                       is_causal=True)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match="attn_mask dtype to be bool or float"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tj.ones(3, 3, dtype=tj.int64))
    with pytest.raises(RuntimeError, match="at least 2 dimensional"):
        F.scaled_dot_product_attention(tj.randn(4), tj.randn(4), tj.randn(4))
    with pytest.raises(RuntimeError, match="must divide the number of heads"):
        F.scaled_dot_product_attention(tj.randn(1, 4, 3, 4), tj.randn(1, 3, 5, 4),
                                       tj.randn(1, 3, 5, 4), enable_gqa=True)


def test_sdpa_dropout_is_reproducible_under_manual_seed_and_scales_the_kept_weights():
    q, k, v = tj.randn(2, 2, 4, 8), tj.randn(2, 2, 6, 8), tj.eye(6).expand(2, 2, 6, 6)

    def weights(seed):
        tj.manual_seed(seed)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()

    a, b, c = weights(3), weights(3), weights(4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    full = F.scaled_dot_product_attention(q, k, v).numpy()  # v = I: the weights themselves
    kept = a != 0
    assert 0.2 < kept.mean() < 0.8
    np.testing.assert_allclose(a[kept], 2 * full[kept], rtol=1e-6)


def test_sdpa_dropout_gradient_follows_the_same_mask():
    q = tj.randn(1, 2, 3, 4, requires_grad=True)
    k, v = tj.randn(1, 2, 5, 4), tj.eye(5).expand(1, 2, 5, 5)
    tj.manual_seed(1)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all()
    # the product with v = I is the dropped weights: a weight dropped everywhere in a
    # row leaves that row's gradient zero, otherwise the row has gradient
    dropped_rows = ~out.detach().numpy().any(-1)
    assert not q.grad.numpy()[dropped_rows].any()


def _masked_attention(q, k, v, m):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


def test_sdpa_traced_fuses_the_masked_softmax_into_one_row_kernel():
    q, k, v = tj.randn(2, 2, 4, 8, requires_grad=True), tj.randn(2, 2, 5, 8), tj.randn(2, 2, 5, 8)
    m = tj.rand(4, 5) > 0.3
    traced = tj.trace(_masked_attention, (q, k, v, m))
    fused = [n for n in traced.graph.nodes if n.op == "fused"]
    assert len(fused) == 1
    dump = str(traced.graph)
    assert "fused[row]" in dump
    for op in ("where(", "amax(", "exp(", "sum(", "div("):
        assert op in dump.split("fused[row]")[1], op
    q2 = q.detach().clone().requires_grad_()
    got, want = traced(q2, k, v, m), _masked_attention(q, k, v, m)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(q2.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert traced.stats["eager_fallbacks"] == 0


@pytest.mark.compile
def test_sdpa_traced_on_numba_matches_eager():
    q, k, v = tj.randn(1, 2, 3, 4, requires_grad=True), tj.randn(1, 2, 5, 4), tj.randn(1, 2, 5, 4)
    m = tj.rand(3, 5) > 0.3
    m[0] = False  # a row with every key masked: zeros
    traced = tj.trace(_masked_attention, (q, k, v, m), backend="numba")
    q2 = q.detach().clone().requires_grad_()
    got, want = traced(q2, k, v, m), _masked_attention(q, k, v, m)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(q2.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


@tj.script
def scripted_attention(q, k, v, causal: bool):
    if causal:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v)


def test_sdpa_scripted_matches_eager():
    q, k, v = tj.randn(2, 2, 4, 8), tj.randn(2, 2, 4, 8), tj.randn(2, 2, 4, 8)
    for causal in (True, False):
        got = scripted_attention(q, k, v, causal)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


# ---- nn.MultiheadAttention -------------------------------------------------------------------

MHA_CASES = {
    "self, seq first": dict(),
    "batch first": dict(batch_first=True),
    "kdim and vdim": dict(kdim=6, vdim=5),
    "bias kv, zero attn": dict(add_bias_kv=True, add_zero_attn=True),
    "no bias": dict(bias=False),
}
MASKS = ["none", "bool", "float", "3-d", "key padding", "both"]


def _mha_inputs(cfg, self_attention, batched=True):
    e, n, l_q, l_kv = 8, 2, 3, 4
    kd, vd = cfg.get("kdim", e), cfg.get("vdim", e)

    def shaped(length, dim):
        if not batched:
            return data(length, dim)
        return data(n, length, dim) if cfg.get("batch_first") else data(length, n, dim)

    if self_attention:
        x = shaped(l_q, e)
        return x, x, x, l_q
    return shaped(l_q, e), shaped(l_kv, kd), shaped(l_kv, vd), l_kv


def _masks(kind, l_q, l_kv, n=2, heads=2):
    out = {}
    if kind in ("bool", "both"):
        out["attn_mask"] = RNG.random((l_q, l_kv)) > 0.7
    if kind == "float":
        out["attn_mask"] = data(l_q, l_kv)
    if kind == "3-d":
        out["attn_mask"] = data(n * heads, l_q, l_kv)
    if kind in ("key padding", "both"):
        pad = RNG.random((n, l_kv)) > 0.7
        pad[:, 0] = False  # every query keeps a key (a fully masked row is its own test)
        out["key_padding_mask"] = pad
    if kind == "both":
        out["attn_mask"][:, 0] = False
    return out


@requires_torch
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_attention_matches_pytorch(case, mask, need_weights, average):
    import torch

    cfg = MHA_CASES[case]
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64, **cfg)
    jm = nn.MultiheadAttention(8, 2, dtype=tj.float64, **cfg)
    load_from_torch(jm, tm)
    q, k, v, l_kv = _mha_inputs(cfg, self_attention="kdim" not in cfg)
    masks = _masks(mask, 3, l_kv)
    if "kdim" not in cfg:  # self-attention passes one tensor three times
        (tq,), (jq,) = as_torch(q), as_tj(q)
        targs, jargs = (tq, tq, tq), (jq, jq, jq)
    else:
        targs, jargs = as_torch(q, k, v), as_tj(q, k, v)
    kw = dict(need_weights=need_weights, average_attn_weights=average)
    want = tm(*targs, **kw, **{n: torch.tensor(m) for n, m in masks.items()})
    got = jm(*jargs, **kw, **{n: tj.tensor(m) for n, m in masks.items()})
    assert_close(got[0], want[0])
    assert (got[1] is None) == (want[1] is None)
    if want[1] is not None:
        assert_close(got[1], want[1])
    cot = data(*want[0].shape)
    want[0].backward(torch.tensor(cot))
    got[0].backward(tj.tensor(cot))
    for a, b in zip(jargs, targs):
        assert_close(a.grad, b.grad)
    for p, tp in zip(jm.parameters(), tm.parameters()):
        assert_close(p.grad, tp.grad)


@requires_torch
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_unbatched_matches_pytorch(need_weights):
    import torch

    tm = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=6, dtype=torch.float64)
    jm = nn.MultiheadAttention(8, 2, kdim=6, vdim=6, dtype=tj.float64)
    load_from_torch(jm, tm)
    q, k, v, _ = _mha_inputs({"kdim": 6, "vdim": 6}, False, batched=False)
    mask = data(2, 3, 4)
    want = tm(*as_torch(q, k, v), attn_mask=torch.tensor(mask), need_weights=need_weights)
    got = jm(*as_tj(q, k, v), attn_mask=tj.tensor(mask), need_weights=need_weights)
    assert_close(got[0], want[0])
    if need_weights:
        assert_close(got[1], want[1])


@requires_torch
def test_multihead_attention_keys_all_padded_nan_with_weights_zeros_without_as_pytorch():
    import torch

    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    jm = nn.MultiheadAttention(8, 2, batch_first=True, dtype=tj.float64)
    load_from_torch(jm, tm)
    x = data(2, 3, 8)
    pad = np.zeros((2, 3), bool)
    pad[0] = True
    for need_weights in (True, False):
        (tx,), (jx,) = as_torch(x, grad=False), as_tj(x, grad=False)
        want = tm(tx, tx, tx, key_padding_mask=torch.tensor(pad), need_weights=need_weights)
        got = jm(jx, jx, jx, key_padding_mask=tj.tensor(pad), need_weights=need_weights)
        np.testing.assert_array_equal(np.isnan(got[0].detach().numpy()),
                                      np.isnan(want[0].detach().numpy()))
        assert np.isnan(got[0][0].detach().numpy()).all() == need_weights
        assert_close(got[0][1], want[0][1])


@requires_torch
@pytest.mark.parametrize("kw", [dict(), dict(kdim=6, vdim=5), dict(add_bias_kv=True),
                                dict(bias=False)])
def test_multihead_attention_parameters_are_pytorchs(kw):
    import torch

    tm, jm = torch.nn.MultiheadAttention(8, 2, **kw), nn.MultiheadAttention(8, 2, **kw)
    assert [(n, tuple(p.shape)) for n, p in jm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert list(jm.state_dict()) == list(tm.state_dict())


def test_multihead_attention_rejects_bad_sizes():
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="greater than 0"):
        nn.MultiheadAttention(0, 2)
    mha = nn.MultiheadAttention(8, 2)
    x = tj.randn(3, 2, 8)
    with pytest.raises(RuntimeError, match="attn_mask"):
        mha(x, x, x, attn_mask=tj.zeros(4, 4))
    with pytest.raises(AssertionError, match="only bool and floating types"):
        mha(x, x, x, attn_mask=tj.zeros(3, 3, dtype=tj.int64))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        mha(x, x, x, is_causal=True)


# ---- the Transformer layers ------------------------------------------------------------------

LAYER_CASES = {
    "post-norm relu": dict(),
    "pre-norm gelu": dict(norm_first=True, activation="gelu"),
    "batch first, no bias": dict(batch_first=True, bias=False),
}


def _layer_args(kind):
    return dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, **LAYER_CASES[kind])


def _compare_modules(jm, tm, call, inputs, **tol):
    """call(module, lib, *inputs) on both: outputs, parameter and input gradients agree."""
    import torch

    j_inputs, t_inputs = as_tj(*inputs), as_torch(*inputs)
    want, got = call(tm, torch, *t_inputs), call(jm, tj, *j_inputs)
    assert_close(got, want, **tol)
    cot = data(*want.shape)
    want.backward(torch.tensor(cot))
    got.backward(tj.tensor(cot))
    for (name, p), (tname, tp) in zip(jm.named_parameters(), tm.named_parameters()):
        assert name == tname
        assert_close(p.grad, tp.grad, **tol)
    for a, b in zip(j_inputs, t_inputs):
        assert_close(a.grad, b.grad, **tol)


@requires_torch
@pytest.mark.parametrize("kind", list(LAYER_CASES))
def test_encoder_layer_matches_pytorch(kind):
    import torch

    args = _layer_args(kind)
    tm = torch.nn.TransformerEncoderLayer(**args, dtype=torch.float64)
    jm = nn.TransformerEncoderLayer(**args, dtype=tj.float64)
    load_from_torch(jm, tm)
    x = data(2, 4, 8) if args.get("batch_first") else data(4, 2, 8)
    pad = np.zeros((2, 4))
    pad[1, 3] = -np.inf
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=tj.float64).numpy()

    def call(m, lib, x):
        return m(x, src_mask=lib.tensor(mask), src_key_padding_mask=lib.tensor(pad))

    _compare_modules(jm, tm, call, [x])


@requires_torch
@pytest.mark.parametrize("kind", list(LAYER_CASES))
def test_decoder_layer_matches_pytorch(kind):
    import torch

    args = _layer_args(kind)
    tm = torch.nn.TransformerDecoderLayer(**args, dtype=torch.float64)
    jm = nn.TransformerDecoderLayer(**args, dtype=tj.float64)
    load_from_torch(jm, tm)
    tgt, mem = (data(2, 3, 8), data(2, 5, 8)) if args.get("batch_first") else \
        (data(3, 2, 8), data(5, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=tj.float64).numpy()
    mem_pad = np.zeros((2, 5), bool)
    mem_pad[0, 4] = True

    def call(m, lib, t, s):
        return m(t, s, tgt_mask=lib.tensor(mask), memory_key_padding_mask=lib.tensor(mem_pad))

    _compare_modules(jm, tm, call, [tgt, mem])


@requires_torch
def test_transformer_matches_pytorch_key_for_key():
    import torch

    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=16, dropout=0.0)
    tm = torch.nn.Transformer(**kw, dtype=torch.float64)
    jm = nn.Transformer(**kw, dtype=tj.float64)
    load_from_torch(jm, tm)
    src, tgt = data(5, 2, 8), data(3, 2, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=tj.float64).numpy()

    def call(m, lib, s, t):
        return m(s, t, tgt_mask=lib.tensor(mask))

    _compare_modules(jm, tm, call, [src, tgt])
    # the layers are copies of one another: their own parameters, equal at first
    layers = jm.encoder.layers
    assert layers[0].linear1.weight is not layers[1].linear1.weight
    assert len(list(jm.parameters())) == len(list(tm.parameters()))


def test_transformer_rejects_mismatched_batches_and_features():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                           dim_feedforward=16)
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        model(tj.randn(5, 2, 8), tj.randn(3, 3, 8))
    with pytest.raises(RuntimeError, match="feature number"):
        model(tj.randn(5, 2, 8), tj.randn(3, 2, 6))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


@requires_torch
def test_an_activation_module_is_a_submodule_and_a_callable_is_used_as_is():
    import torch

    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=nn.GELU())
    assert isinstance(layer.activation, nn.GELU)
    tm = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=lambda x: x * 2)
    jm = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=lambda x: x * 2)
    load_from_torch(jm, tm)
    x = data(3, 2, 8, dtype=np.float32)
    assert_close(jm(tj.tensor(x)), tm(torch.tensor(x)), atol=1e-5, rtol=1e-5)


@requires_torch
def test_square_subsequent_mask_is_pytorchs():
    import torch

    want = torch.nn.Transformer.generate_square_subsequent_mask(4)
    got = nn.Transformer.generate_square_subsequent_mask(4)
    assert got.dtype is tj.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_encoder_traced_matches_eager_and_takes_part_in_autograd():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    x = tj.randn(2, 4, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    traced = tj.trace(enc, (x, mask))
    np.testing.assert_allclose(traced(x, mask).detach().numpy(),
                               enc(x, mask).detach().numpy(), rtol=1e-5, atol=1e-5)
    traced(x, mask).sum().backward()
    got = [p.grad.numpy().copy() for p in enc.parameters()]
    enc.zero_grad()
    enc(x, mask).sum().backward()
    for g, p in zip(got, enc.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_encoder_and_attention_script_once_for_every_sequence_length():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                           batch_first=True), 2)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    scripted_enc, scripted_mha = tj.script(enc), tj.script(mha)
    for n in (4, 3):
        x, mask = tj.randn(2, n, 8), nn.Transformer.generate_square_subsequent_mask(n)
        np.testing.assert_allclose(scripted_enc(x, mask).detach().numpy(),
                                   enc(x, mask).detach().numpy(), rtol=1e-5, atol=1e-6)
        got, want = scripted_mha(x, x, x), mha(x, x, x)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    assert scripted_enc.stats["compiles"] == scripted_mha.stats["compiles"] == 1


# ---- a word-level transformer language model (PyTorch's examples/word_language_model) ------

def word_language_model(lib, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
    """PyTorch's example TransformerModel, written against `lib` (torch or tracejit)."""
    nn_, F_ = lib.nn, lib.nn.functional

    class PositionalEncoding(nn_.Module):
        def __init__(self, d_model, dropout=0.1, max_len=64):
            super().__init__()
            self.dropout = nn_.Dropout(p=dropout)
            pe = lib.zeros(max_len, d_model)
            position = lib.arange(0, max_len, dtype=lib.float32).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2).float() *
                               (-math.log(10000.0) / d_model))
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn_.Transformer):
        # as the example, but the layers take `dropout` too (the example leaves them at
        # 0.1) and one decoder layer is built (the example builds six, then replaces
        # `decoder` with the output Linear)
        def __init__(self):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                             num_encoder_layers=nlayers, num_decoder_layers=1,
                             dropout=dropout)
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn_.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn_.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return lib.log(lib.tril(lib.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn_.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn_.init.zeros_(self.decoder.bias)
            nn_.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = self._generate_square_subsequent_mask(len(src))
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F_.log_softmax(output, dim=-1)

    return TransformerModel()


def _lm_batches(steps=3, seq=5, batch=2, ntoken=20):
    rng = np.random.default_rng(1)
    return [(rng.integers(0, ntoken, (seq, batch)), rng.integers(0, ntoken, (seq * batch,)))
            for _ in range(steps)]


def _train_lm(lib, model, step_fn, batches):
    opt = lib.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = step_fn(lib.tensor(x), lib.tensor(y))
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        losses.append(loss.item())
    return losses


@requires_torch
@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_word_language_model_trains_as_pytorchs(traced):
    import torch

    torch.manual_seed(0)
    sizes = dict(ntoken=20, ninp=8, nhead=2, nhid=16, nlayers=2, dropout=0.0)
    tm, jm = word_language_model(torch, **sizes), word_language_model(tj, **sizes)
    load_from_torch(jm, tm)

    def step(lib, model):
        def loss(x, y):
            return lib.nn.functional.nll_loss(model(x).view(-1, 20), y)
        return loss

    batches = _lm_batches()
    want = _train_lm(torch, tm, step(torch, tm), batches)
    jstep = step(tj, jm)
    if traced:
        jstep = tj.trace(jstep, (tj.tensor(batches[0][0]), tj.tensor(batches[0][1])))
    got = _train_lm(tj, jm, jstep, batches)
    if traced:  # the first call makes the model's mask: one guard miss, then the trace runs
        assert jstep.stats["eager_fallbacks"] == 0 and jstep.stats["cache_hits"] == 2
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[-1] < got[0]
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(jm.state_dict()[name].numpy(), p.detach().numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


# ---- copy.deepcopy ----------------------------------------------------------------------------

def test_deepcopy_of_a_leaf_copies_values_requires_grad_and_grad():
    t = tj.randn(3, requires_grad=True)
    (t * 2).sum().backward()
    c = copy.deepcopy(t)
    assert c.requires_grad and c.is_leaf and c is not t
    assert tj.equal(c, t) and tj.equal(c.grad, t.grad) and c.grad is not t.grad
    with tj.no_grad():
        c.add_(1)
        c.grad.zero_()
    assert not tj.equal(c, t) and t.grad.numpy().all()


def test_deepcopy_of_a_parameter_is_a_parameter_without_its_grad_as_pytorch():
    p = nn.Parameter(tj.randn(2, 2))
    p.sum().backward()
    c = copy.deepcopy(p)
    assert type(c) is nn.Parameter and c.requires_grad and c.grad is None
    frozen = copy.deepcopy(nn.Parameter(tj.randn(2), requires_grad=False))
    assert not frozen.requires_grad


def test_deepcopy_keeps_views_of_one_memory_sharing_the_copy():
    base = tj.arange(6.0).reshape(2, 3)
    row = base[1]
    b2, r2 = copy.deepcopy([base, row])
    b2[1, 0] = 100.0
    assert r2[0].item() == 100.0 and base[1, 0].item() == 3.0


def test_deepcopy_of_a_non_leaf_raises_and_pickling_stays_refused():
    import pickle

    y = tj.randn(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(y)
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(tj.randn(2))


def test_deepcopy_of_a_module_is_independent_and_keeps_tied_weights_tied():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 4)
            self.out = nn.Linear(4, 5, bias=False)
            self.out.weight = self.emb.weight
            self.register_buffer("count", tj.zeros(1))

    m = Tied()
    c = copy.deepcopy(m)
    assert c.out.weight is c.emb.weight and c.emb.weight is not m.emb.weight
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in m.named_parameters()]
    with tj.no_grad():
        c.emb.weight.add_(1)
        c.count.add_(1)
    assert not tj.equal(c.emb.weight, m.emb.weight) and m.count.item() == 0
    x = tj.tensor([1, 2])
    assert c.out(c.emb(x)).shape == (2, 5)


def test_deepcopy_inside_a_trace_runs_eagerly():
    def double_a_copy(x):
        return copy.deepcopy(x) * 2

    with pytest.warns(RuntimeWarning, match="copy.deepcopy of a tensor"):
        traced = tj.trace(double_a_copy, (tj.randn(3),))
    out = traced(tj.ones(3))
    assert tj.equal(out, tj.full((3,), 2.0)) and traced.stats["compiles"] == 0


# ---- nn.Module API the Transformer family leans on --------------------------------------------

def test_register_buffer_again_sets_its_persistence_anew():
    m = nn.Linear(2, 2)
    m.register_buffer("steps", tj.zeros(1), persistent=False)
    assert "steps" not in m.state_dict() and [n for n, _ in m.named_buffers()] == ["steps"]
    m.register_buffer("steps", tj.zeros(1))
    assert "steps" in m.state_dict()
    with pytest.raises(TypeError, match="tracejit.Tensor or None"):
        m.register_buffer("steps", [0.0])


def test_get_submodule_parameter_and_buffer_by_dotted_path():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                           dim_feedforward=16)
    layer = model.get_submodule("encoder.layers.1")
    assert layer is model.encoder.layers[1] and model.get_submodule("") is model
    assert model.get_parameter("encoder.layers.1.linear1.weight") is layer.linear1.weight
    bn = nn.Sequential(nn.BatchNorm1d(3))
    assert bn.get_buffer("0.running_mean") is bn[0].running_mean
    with pytest.raises(AttributeError, match="no attribute `layer`"):
        model.get_submodule("encoder.layer.1")
    with pytest.raises(AttributeError, match="no parameter `weights`"):
        model.get_parameter("encoder.norm.weights")


def test_numbered_containers_delete_insert_and_pop_renumbering_as_pytorch():
    a, b, c = nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 2)
    lst = nn.ModuleList([a, b, c])
    del lst[0]
    assert list(lst._modules) == ["0", "1"] and lst[0] is b
    assert lst.pop() is c and len(lst) == 1
    lst += [c]
    assert list(lst) == [b, c] and list(lst + nn.ModuleList([a])) == [b, c, a]
    lst.insert(0, a)
    assert list(lst._modules.items()) == [("0", a), ("1", b), ("2", c)]
    del lst[1:]
    assert list(lst) == [a]
    seq = nn.Sequential(a, b).extend([c])
    seq.insert(1, nn.Identity())
    assert [type(m).__name__ for m in seq] == ["Linear", "Identity", "ReLU", "Linear"]
    assert seq.pop(1).__class__ is nn.Identity and list(seq._modules) == ["0", "1", "2"]
    del seq[-1]
    assert seq(tj.ones(2, 1)).shape == (2, 1)
    with pytest.raises(IndexError):
        del seq[5]


def test_module_dict_update_and_pop():
    heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
    heads.update({"b": nn.Linear(2, 3)})
    heads.update([("c", nn.Identity())])
    assert list(heads.keys()) == ["a", "b", "c"]
    assert isinstance(heads.pop("c"), nn.Identity) and "c" not in heads


def test_identity_returns_its_input_and_ignores_arguments():
    x = tj.randn(2)
    assert nn.Identity(54, unused="x")(x) is x
