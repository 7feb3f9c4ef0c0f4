"""expand, gather, scatter_add and sum_to on CUDA tensors run as strided kernels
(backends/cuda/indexing.py), against the CPU's results, with no copy through the host; indices
out of range raise the CPU's error."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.tensor import functional as F


def trips() -> dict:
    return dict(tj.cuda.stats()["host_round_trips"])


@pytest.mark.parametrize("shape,to", [((3, 1), (2, 3, 4)), ((), (2, 3)), ((1, 4), (3, 4)),
                                      ((2, 3), (2, 3)), ((5,), (2, 1, 5))])
def test_expand(shape, to):
    x = tj.randn(*shape)
    before = trips()
    got = x.cuda().expand(*to)
    assert got.device.type == "cuda"
    np.testing.assert_array_equal(got.cpu().numpy(), x.expand(*to).numpy())
    assert trips() == before


def test_expand_of_a_transposed_matrix():
    x = tj.randn(3, 1)
    gx = x.cuda().t()  # a Fortran-ordered view of the device array
    before = trips()
    np.testing.assert_array_equal(gx.expand(4, 3).cpu().numpy(), x.t().expand(4, 3).numpy())
    assert trips() == before


@pytest.mark.parametrize("dim", [0, 1])
def test_gather_with_a_shorter_and_a_negative_index(dim):
    x = tj.randn(4, 5)
    index = tj.tensor([[0, 3, -1], [2, 2, 1]]) if dim == 1 else tj.tensor([[0, 3], [-2, 1]])
    before = trips()
    got = tj.gather(x.cuda(), dim, index.cuda())
    np.testing.assert_array_equal(got.cpu().numpy(), tj.gather(x, dim, index).numpy())
    assert trips() == before


def test_gather_out_of_range_raises_the_cpu_error():
    x, index = tj.randn(2, 3), tj.tensor([[0, 3]])
    with pytest.raises(IndexError) as cpu:
        tj.gather(x, 1, index)
    with pytest.raises(IndexError) as dev:
        tj.gather(x.cuda(), 1, index.cuda())
    assert str(dev.value) == str(cpu.value)


def test_scatter_add_sums_repeated_indices():
    src = tj.randn(3, 4)
    index = tj.tensor([[0, 1, 0, 2], [2, 2, 2, 0], [1, 0, 1, 1]])
    before = trips()
    got = F.scatter_add_raw(src.cuda(), index.cuda(), 1, (3, 3))
    np.testing.assert_allclose(got.cpu().numpy(), F.scatter_add_raw(src, index, 1, (3, 3)).numpy(),
                               rtol=1e-6, atol=1e-6)
    assert trips() == before
    with pytest.raises(IndexError):
        F.scatter_add_raw(src.cuda(), (index * 3).cuda(), 1, (3, 3))


@pytest.mark.parametrize("shape,to", [((4, 3), (3,)), ((2, 1, 5), (1, 5)), ((4, 3), (4, 1)),
                                      ((3, 2), ()), ((2, 3), (2, 3)), ((2, 3, 4), (3, 1))])
def test_sum_to(shape, to):
    x = tj.randn(*shape)
    before = trips()
    got = F.sum_to(x.cuda(), to)
    np.testing.assert_allclose(got.cpu().numpy(), F.sum_to(x, to).numpy(), rtol=1e-5,
                               atol=1e-6)
    assert tuple(got.shape) == tuple(to)
    assert trips() == before


def test_cross_entropy_and_its_gradient_stay_on_the_device():
    logits, target = tj.randn(5, 3), tj.tensor([0, 2, 1, 2, 0])
    want = tj.nn.functional.cross_entropy(logits.requires_grad_(), target)
    want.backward()
    g = logits.detach().cuda().requires_grad_()
    before = trips()
    got = tj.nn.functional.cross_entropy(g, target.cuda())
    got.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    np.testing.assert_allclose(g.grad.cpu().numpy(), logits.grad.numpy(), rtol=1e-5,
                               atol=1e-6)
    assert trips() == before


@pytest.mark.parametrize("index", [(1,), (slice(1, 3),), (Ellipsis, 2), (-1, slice(None, None, 2)),
                                   (None, 0), (slice(None), slice(2, 0, -1)), (0, 1)])
def test_basic_indexing_and_its_gradient(index):
    x = tj.randn(3, 4)
    want = x.clone().requires_grad_()
    w = want[index]
    (w * w).sum().backward()
    g = x.cuda().requires_grad_()
    before = trips()
    got = g[index]
    (got * got).sum().backward()
    np.testing.assert_array_equal(got.detach().cpu().numpy(), w.detach().numpy())
    np.testing.assert_allclose(g.grad.cpu().numpy(), want.grad.numpy(), rtol=1e-6)
    assert trips() == before


def test_an_index_out_of_range_raises_numpy_s_error():
    x = tj.randn(3, 4)
    with pytest.raises(IndexError) as cpu:
        x[5]
    with pytest.raises(IndexError) as dev:
        x.cuda()[5]
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack(dim):
    a, b = tj.randn(2, 3), tj.randn(2, 3)
    before = trips()
    np.testing.assert_array_equal(tj.cat([a.cuda(), b.cuda()], dim).cpu().numpy(),
                                  tj.cat([a, b], dim).numpy())
    np.testing.assert_array_equal(tj.stack([a.cuda(), b.cuda()], dim).cpu().numpy(),
                                  tj.stack([a, b], dim).numpy())
    assert trips() == before
