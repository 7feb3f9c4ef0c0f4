"""Tensor behaviour: creation, dtypes, views, indexing, in-place ops, conversion, printing."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch


# ---- creation ------------------------------------------------------------------------------
def test_tensor_infers_pytorch_default_dtypes():
    assert tj.tensor([1.0, 2.0]).dtype is tj.float32
    assert tj.tensor([1, 2]).dtype is tj.int64
    assert tj.tensor([True]).dtype is tj.bool
    assert tj.tensor(np.zeros(2)).dtype is tj.float64  # numpy arrays keep their dtype


def test_creation_functions_shapes_and_dtypes():
    assert tj.zeros(2, 3).shape == (2, 3)
    assert tj.ones((4,)).dtype is tj.float32
    assert tj.full((2,), 7).dtype is tj.int64
    assert tj.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert tj.arange(0, 1, 0.25).dtype is tj.float32
    assert tj.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert tj.eye(3).numpy().trace() == 3
    assert tj.empty(2, 2).shape == (2, 2)
    x = tj.randn(3, 4, dtype=tj.float64)
    assert tj.zeros_like(x).dtype is tj.float64
    assert tj.ones_like(x).shape == (3, 4)
    assert tj.full_like(x, 2.0).numpy().min() == 2.0
    assert tj.rand_like(x).shape == (3, 4)
    assert tj.randn_like(x).dtype is tj.float64
    r = tj.randint(0, 10, (100,))
    assert r.dtype is tj.int64 and 0 <= r.min().item() and r.max().item() < 10


def test_manual_seed_makes_random_ops_repeatable():
    tj.manual_seed(7)
    a = tj.randn(5)
    tj.manual_seed(7)
    b = tj.randn(5)
    assert tj.equal(a, b)
    assert not tj.equal(tj.randn(5), tj.randn(5))


def test_from_numpy_shares_memory_both_ways():
    a = np.zeros(3, np.float32)
    t = tj.from_numpy(a)
    a[0] = 5
    assert t[0].item() == 5
    t[1] = 7
    assert a[1] == 7
    assert t.numpy() is a


def test_unsupported_numpy_dtype_is_a_clear_error():
    with pytest.raises(TypeError, match="not supported"):
        tj.from_numpy(np.zeros(2, np.complex64))


def test_requires_grad_on_integer_tensor_is_an_error():
    with pytest.raises(RuntimeError, match="floating point"):
        tj.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        tj.arange(3).requires_grad_()


def test_cuda_device_is_reported_unavailable_clearly():
    assert not tj.cuda.is_available()
    with pytest.raises(RuntimeError, match="CUDA"):
        tj.zeros(2, device="cuda")
    assert tj.zeros(2).device == "cpu"
    assert str(tj.zeros(2).device) == "cpu"


# ---- attributes and conversion -------------------------------------------------------------
def test_attributes():
    x = tj.randn(2, 3, requires_grad=True)
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 6
    assert x.size() == (2, 3) and x.size(1) == 3 and x.size(-1) == 3
    assert x.is_leaf and x.grad is None and x.grad_fn is None
    assert x.T.shape == (3, 2)
    y = x * 2
    assert not y.is_leaf
    assert y.data.requires_grad is False
    assert repr(x.shape) == "tracejit.Size([2, 3])"


def test_item_tolist_and_python_conversions():
    t = tj.tensor([[1.5, 2.0]])
    assert t.tolist() == [[1.5, 2.0]]
    assert t[0, 0].item() == 1.5
    assert float(t[0, 1]) == 2.0 and int(t[0, 0]) == 1
    assert bool(tj.tensor([1]))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(tj.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="2 elements"):
        tj.tensor([1.0, 2.0]).item()


def test_numpy_refuses_tensors_that_require_grad():
    x = tj.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        x.numpy()
    assert x.detach().numpy().tolist() == [1.0, 1.0]


def test_to_and_dtype_shortcuts():
    x = tj.tensor([1.7, -2.2])
    assert x.to(tj.float64).dtype is tj.float64
    assert x.double().dtype is tj.float64
    assert x.half().dtype is tj.float16
    assert x.long().tolist() == [1, -2]
    assert x.int().dtype is tj.int32
    assert x.bool().tolist() == [True, True]
    assert x.to("cpu") is x
    assert x.float() is x


def test_repr_matches_pytorch_style():
    assert repr(tj.tensor([1.0, 2.0], requires_grad=True)) == \
        "tensor([1., 2.], requires_grad=True)"
    assert repr(tj.tensor([1.5, -2.25])) == "tensor([ 1.5000, -2.2500])"
    assert repr(tj.tensor([1, 20])) == "tensor([ 1, 20])"
    assert repr(tj.tensor([1.0], dtype=tj.float64)) == "tensor([1.], dtype=tracejit.float64)"
    x = tj.tensor([2.0], requires_grad=True)
    assert repr(x * x) == "tensor([4.], grad_fn=<MulBackward0>)"
    assert repr(tj.tensor(3.5)) == "tensor(3.5000)"


# ---- broadcasting and shape errors --------------------------------------------------------
def test_broadcasting():
    a = tj.ones(3, 1)
    b = tj.arange(4).float()
    assert (a + b).shape == (3, 4)
    assert (a * b).sum().item() == 18


def test_non_broadcastable_shapes_name_op_and_shapes():
    with pytest.raises(ValueError, match=r"add: shapes \(3,\) and \(4,\) do not broadcast"):
        tj.ones(3) + tj.ones(4)


def test_matmul_shape_error_names_both_shapes():
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) cannot be "
                                         r"multiplied \(3 != 4\)"):
        tj.ones(2, 3) @ tj.ones(4, 5)


def test_matmul_family():
    a, b = tj.randn(2, 3), tj.randn(3, 4)
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-6)
    assert tj.mm(a, b).shape == (2, 4)
    assert tj.bmm(tj.randn(5, 2, 3), tj.randn(5, 3, 4)).shape == (5, 2, 4)
    assert tj.matmul(tj.randn(3), tj.randn(3)).shape == ()
    assert tj.matmul(tj.randn(7, 2, 3), tj.randn(3)).shape == (7, 2)
    with pytest.raises(RuntimeError, match="mm: expected 2-D"):
        tj.mm(tj.randn(3), b)


# ---- reductions ----------------------------------------------------------------------------
def test_reductions_with_dim_and_keepdim():
    x = tj.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    assert x.sum().item() == 21
    assert x.sum(0).tolist() == [5, 7, 9]
    assert x.sum(1, keepdim=True).shape == (2, 1)
    assert x.sum((0, 1)).item() == 21
    assert x.mean(-1).tolist() == [3, 4]
    assert x.prod(1).tolist() == [15, 48]
    assert x.max().item() == 6 and x.min().item() == 1
    values, indices = x.max(1)
    assert values.tolist() == [5, 6] and indices.tolist() == [1, 2]
    m = x.min(dim=0, keepdim=True)
    assert m.values.shape == (1, 3) and m.indices.tolist() == [[0, 1, 0]]
    assert x.argmax().item() == 5 and x.argmin(1).tolist() == [0, 1]
    np.testing.assert_allclose(x.var().item(), np.var(x.numpy(), ddof=1), rtol=1e-6)
    np.testing.assert_allclose(x.std(1, unbiased=False).numpy(), np.std(x.numpy(), 1),
                               rtol=1e-6)
    np.testing.assert_allclose(x.norm().item(), np.linalg.norm(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(x.logsumexp(1).numpy(),
                               np.log(np.exp(x.numpy()).sum(1)), rtol=1e-6)
    assert tj.maximum(x, tj.tensor(4.0)).min().item() == 4


def test_mean_of_integers_is_an_error():
    with pytest.raises(RuntimeError, match="floating point"):
        tj.arange(4).mean()


def test_softmax_and_log_softmax_are_stable():
    x = tj.tensor([[1000.0, 1001.0, 1002.0]])
    p = x.softmax(-1)
    np.testing.assert_allclose(p.sum().item(), 1.0, rtol=1e-6)
    assert np.isfinite(x.log_softmax(1).numpy()).all()


def test_reduction_dim_out_of_range():
    with pytest.raises(IndexError, match="dimension out of range"):
        tj.ones(2, 3).sum(2)


# ---- shape ops -----------------------------------------------------------------------------
def test_shape_ops():
    x = tj.arange(24).reshape(2, 3, 4)
    assert x.view(6, -1).shape == (6, 4)
    assert x.flatten().shape == (24,) and x.flatten(1).shape == (2, 12)
    assert x.transpose(0, 2).shape == (4, 3, 2)
    assert x.permute(2, 0, 1).shape == (4, 2, 3)
    assert x.unsqueeze(1).shape == (2, 1, 3, 4)
    assert x[:, :1].squeeze().shape == (2, 4)
    assert x[:, :1].squeeze(1).shape == (2, 4)
    assert tj.ones(3, 1).expand(3, 5).shape == (3, 5)
    assert tj.ones(3, 1).expand(-1, 5).shape == (3, 5)
    assert tj.ones(1, 2).expand_as(tj.ones(4, 2)).shape == (4, 2)
    assert tj.tensor([1, 2]).repeat(2, 2).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]
    parts = tj.arange(10).split(4)
    assert [p.tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [p.shape[0] for p in tj.arange(10).split([3, 7])] == [3, 7]
    assert [p.tolist() for p in tj.arange(6).chunk(3)] == [[0, 1], [2, 3], [4, 5]]
    assert tj.cat([tj.ones(2, 3), tj.zeros(1, 3)]).shape == (3, 3)
    assert tj.stack([tj.ones(2), tj.zeros(2)], 1).tolist() == [[1, 0], [1, 0]]
    assert tj.ones(2, 3).t().shape == (3, 2)
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        x.reshape(5, 5)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        tj.stack([tj.ones(2), tj.ones(3)])


def test_views_share_memory_and_version_counter():
    x = tj.zeros(2, 3)
    v = x.view(6)
    v[0] = 1.0
    assert x[0, 0].item() == 1.0
    assert x._version == v._version == 1
    t = x.t()
    t.add_(1)
    assert x.sum().item() == 7
    assert x._version == 2


# ---- indexing ------------------------------------------------------------------------------
def test_indexing_matches_numpy():
    a = np.arange(60).reshape(3, 4, 5)
    x = tj.from_numpy(a)
    cases = [1, -1, (0, 2), slice(1, None), (slice(None), 1), (Ellipsis, 2), (None, 0),
             (1, None, slice(None, None, 2)), (np.array([0, 2]),), ([0, 2], slice(1, 3)),
             (a[:, 0, 0] > 10,), (slice(None), [3, 1, 3])]
    for idx in cases:
        np.testing.assert_array_equal(x[idx].numpy(), a[idx], err_msg=str(idx))
    np.testing.assert_array_equal(x[tj.tensor([2, 0])].numpy(), a[[2, 0]])
    mask = x > 30
    np.testing.assert_array_equal(x[mask].numpy(), a[a > 30])


def test_setitem_matches_numpy():
    a = np.zeros((3, 4), np.float32)
    x = tj.zeros(3, 4)
    for idx, v in [((0, 1), 5.0), (slice(1, 3), 2.0), ((slice(None), 2), np.arange(3.0)),
                   (np.array([0, 2]), -1.0)]:
        a[idx] = v
        x[idx] = v if not isinstance(v, np.ndarray) else tj.tensor(v)
    np.testing.assert_array_equal(x.numpy(), a)
    x[x < 0] = 9.0
    assert (x == 9).sum().item() == 8


def test_index_out_of_range_is_an_index_error():
    with pytest.raises(IndexError):
        tj.zeros(3)[5]


# ---- in-place ops --------------------------------------------------------------------------
def test_inplace_ops_bump_version_and_return_self():
    x = tj.ones(3)
    assert x._version == 0
    y = x.add_(1)
    assert y is x and x._version == 1
    x.mul_(3).sub_(1).div_(5)
    assert x.tolist() == [1.0, 1.0, 1.0] and x._version == 4
    x.zero_()
    x.fill_(2.5)
    x.clamp_(0, 1)
    assert x.tolist() == [1.0, 1.0, 1.0]
    x.copy_(tj.tensor([1.0, 2.0, 3.0]))
    x += 1
    assert x.tolist() == [2.0, 3.0, 4.0] and x._version == 9


def test_inplace_dtype_and_shape_rules():
    x = tj.tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.add_(1.5)
    y = tj.ones(3, 1)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        y.add_(tj.ones(3, 4))
    f = tj.ones(2, dtype=tj.float32)
    f.add_(tj.ones(2, dtype=tj.float64))  # a lower-or-equal category casts, like PyTorch
    assert f.dtype is tj.float32


def test_inplace_on_a_leaf_that_requires_grad_is_an_error():
    w = tj.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.add_(1)
    with tj.no_grad():
        w.add_(1)
    assert w.tolist() == [2.0, 2.0]


def test_detach_shares_data_and_version():
    x = tj.ones(2, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    d[0] = 5
    assert x[0].item() == 5
    assert x._version == 1


def test_random_creation_draws_from_a_given_generator():
    a = tj.randn(4, generator=tj.Generator().manual_seed(3))
    b = tj.randn(4, generator=tj.Generator().manual_seed(3))
    assert tj.equal(a, b)
    g = tj.Generator().manual_seed(3)
    first, second = tj.rand(3, generator=g), tj.rand(3, generator=g)
    assert not tj.equal(first, second)  # the generator advances
    tj.manual_seed(0)
    tj.randn(4, generator=tj.Generator().manual_seed(3))
    after = tj.randn(2)
    tj.manual_seed(0)
    assert tj.equal(after, tj.randn(2))  # the global generator was not used


def test_a_trace_draws_from_its_generator_on_every_call():
    g = tj.Generator().manual_seed(1)
    f = tj.trace(lambda x: x + tj.randn(3, generator=g), (tj.zeros(3),), backend="numba")
    g.manual_seed(7)
    got = [f(tj.zeros(3)) for _ in range(2)]
    g.manual_seed(7)
    want = [tj.randn(3, generator=g) for _ in range(2)]
    for a, b in zip(got, want):
        assert tj.allclose(a, b)


@requires_torch
def test_full_with_a_tensor_value_takes_its_kind_as_pytorch_does():
    import torch

    for value in (16777217, True, 1.5):
        for dtype in (None, "float64") if isinstance(value, float) else (None,):
            tv = tj.tensor(value, dtype=getattr(tj, dtype) if dtype else None)
            pv = torch.tensor(value, dtype=getattr(torch, dtype) if dtype else None)
            got, want = tj.full((3,), tv), torch.full((3,), pv)
            assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
            assert got.numpy().tolist() == want.numpy().tolist()


def _fills(lib, name):
    m = lib.tensor([[True, False, True], [False, False, True]])
    x = (lib.arange(6).reshape(2, 3) - 2).to(getattr(lib, name))
    outs = [x.masked_fill(m, -1.0), x.masked_fill(m, 2), x.masked_fill(m, 2.7),
            x.masked_fill(m, lib.tensor(1.25)), lib.where(m, x, 3.0), lib.where(m, -0.3, x),
            lib.clamp(x, 0.3, 2), lib.clamp(x, 2, 0.5), x.clamp(min=-1.5),
            lib.where(m, 1.5, -2.5), lib.where(m, 1, 2.5)]  # (two numbers: the default dtype)
    return [(str(o.dtype).split(".")[-1], o.double().numpy().tolist()) for o in outs]


@requires_torch
@pytest.mark.parametrize("name", ["bfloat16", "float16", "float32", "int32", "int64", "bool"])
def test_fills_wheres_and_clamps_with_python_numbers_keep_pytorchs_dtypes(name):
    # masked_fill keeps the input's dtype (a float into an integer tensor truncated); a
    # Python number beside a bfloat16 tensor is bfloat16 in where and clamp
    import torch

    assert _fills(tj, name) == _fills(torch, name)


def test_a_masked_fill_of_an_integer_tensor_with_a_number_it_cannot_hold_is_refused():
    x = tj.arange(3)
    with pytest.raises(RuntimeError, match="cannot be converted to type int64"):
        x.masked_fill(x > 0, float("inf"))
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(x > 0, tj.tensor([1, 2, 3]))
