"""Sorting, scans, scatters, contractions, diagonals and statistics against PyTorch: values,
dtypes, indices and gradients, eagerly and traced (indices are data: a trace serves other
index tensors); the errors PyTorch raises; seeded sampling."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

RNG = np.random.default_rng(2027)


def f32(*shape):
    return RNG.uniform(-2.0, 2.0, shape).astype(np.float32)


def ints(*shape, high=4):
    return RNG.integers(0, high, shape).astype(np.int64)


def with_nan():
    return np.array([[1.0, np.nan, -2.0, 3.0, np.inf], [0.5, -np.inf, 2.0, np.nan, -0.0]],
                    np.float32)


def with_zeros():
    return np.array([[2.0, 0.0, 3.0, 0.0, -1.5], [0.5, -2.0, 1.5, 0.0, 4.0],
                     [1.0, 2.0, -0.5, 3.0, 0.25]], np.float32)


def ties():
    return np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.0, 0.0, -1.0, 5.0, 5.0, 0.0]],
                    np.float32)


E = np.array([3, 0, 3, 1, 0])  # edges of a small graph: messages to these nodes


# (id, call(lib, *inputs), inputs): `lib` is torch or tracejit, which share these names;
# float inputs are differentiated, integer ones are indices
CASES = [
    ("sort", lambda m, x: m.sort(x), [f32(3, 5)]),
    ("sort-descending-dim0", lambda m, x: m.sort(x, 0, descending=True), [f32(4, 3)]),
    ("sort-nan", lambda m, x: m.sort(x), [with_nan()]),
    ("sort-nan-descending", lambda m, x: x.sort(descending=True), [with_nan()]),
    ("sort-stable-ties", lambda m, x: m.sort(x, stable=True, descending=True), [ties()]),
    ("sort-int", lambda m, x: m.sort(x, descending=True), [ints(3, 6, high=3)]),
    ("argsort", lambda m, x: m.argsort(x, dim=0), [f32(4, 3)]),
    ("msort", lambda m, x: m.msort(x), [f32(4, 3)]),
    ("topk", lambda m, x: m.topk(x, 3), [f32(4, 50)]),
    ("topk-smallest-dim0", lambda m, x: x.topk(2, dim=0, largest=False), [f32(6, 3)]),
    ("topk-nan", lambda m, x: m.topk(x, 2), [with_nan()]),
    ("topk-all", lambda m, x: m.topk(x, 5), [f32(2, 5)]),
    ("kthvalue", lambda m, x: m.kthvalue(x, 2, 1, keepdim=True), [f32(3, 5)]),
    ("median-dim", lambda m, x: m.median(x, 1), [f32(3, 6)]),
    ("median-all", lambda m, x: m.median(x), [f32(4, 5)]),
    ("median-nan", lambda m, x: m.median(x, -1), [with_nan()]),
    ("nanmedian-nan", lambda m, x: m.nanmedian(x, -1), [with_nan()]),
    ("cumsum", lambda m, x: m.cumsum(x, 1), [f32(3, 4)]),
    ("cumsum-int", lambda m, x: m.cumsum(x, 0), [ints(4, 2).astype(np.int32)]),
    ("cumsum-bool", lambda m, x: m.cumsum(x > 1, -1), [ints(3, 4)]),
    ("cumsum-dtype", lambda m, x: x.cumsum(0, dtype=m.float64), [f32(5)]),
    ("cumprod", lambda m, x: m.cumprod(x, 1), [f32(3, 4)]),
    ("cumprod-zeros", lambda m, x: m.cumprod(x, 1), [with_zeros()]),
    ("cumprod-zeros-dim0", lambda m, x: m.cumprod(x, 0), [with_zeros()]),
    ("cummax", lambda m, x: m.cummax(x, 1), [f32(3, 5)]),
    ("cummax-nan-ties", lambda m, x: m.cummax(x, 1), [with_nan()]),
    ("cummin", lambda m, x: m.cummin(x, 0), [ties()]),
    ("logcumsumexp", lambda m, x: m.logcumsumexp(x, 1), [f32(3, 4)]),
    ("scatter-src", lambda m, x, s: m.scatter(x, 1, m.tensor([[2, 0], [1, 3]]), s),
     [f32(2, 4), f32(2, 2)]),
    ("scatter-value", lambda m, x: x.scatter(0, m.tensor([[1, 0, 1]]), 2.5), [f32(2, 3)]),
    ("scatter-reduce-add", lambda m, x, s: m.scatter(  # PyTorch does not differentiate it
        x.detach(), 0, m.tensor([[1, 1, 0]]), s.detach(), reduce="add"), [f32(2, 3), f32(1, 3)]),
    ("scatter_add", lambda m, x, s, i: m.scatter_add(x, 0, i, s), [f32(4, 3), f32(5, 3),
                                                                   np.tile(E[:, None], 3)]),
    ("scatter_add-larger-src", lambda m, x, s: x.scatter_add(1, m.tensor([[0, 0]]),
                                                             s.detach()),
     [f32(2, 3), f32(2, 4)]),
    ("scatter_reduce-sum", lambda m, x, s, i: m.scatter_reduce(x, 0, i, s, "sum"),
     [f32(4), f32(5), E]),
    ("scatter_reduce-mean-no-self", lambda m, x, s, i: m.scatter_reduce(
        x, 0, i, s, "mean", include_self=False), [f32(4), f32(5), E]),
    ("scatter_reduce-amax", lambda m, x, s, i: m.scatter_reduce(x, 0, i, s, "amax"),
     [f32(4), f32(5), E]),
    ("scatter_reduce-amin-no-self", lambda m, x, s, i: m.scatter_reduce(
        x, 0, i, s, "amin", include_self=False), [f32(4), f32(5), E]),
    ("scatter_reduce-prod", lambda m, x, s, i: m.scatter_reduce(x, 0, i, s, "prod"),
     [f32(4), f32(5), E]),
    ("scatter_reduce-prod-zero", lambda m, x, s, i: m.scatter_reduce(x, 0, i, s, "prod"),
     [np.array([1.5, 2.0, 0.5, -1.0], np.float32),
      np.array([2.0, 0.0, 3.0, 0.5, 4.0], np.float32), E]),
    ("index_add", lambda m, x, s, i: m.index_add(x, 0, i, s), [f32(4, 2), f32(5, 2), E]),
    ("index_add-alpha-dim1", lambda m, x, s: x.index_add(1, m.tensor([2, 0, 2]), s,
                                                         alpha=-0.5), [f32(2, 3), f32(2, 3)]),
    ("index_add_-message-passing", lambda m, h, w, i: (h * 1).index_add_(0, i, h[i] * w),
     [f32(4, 3), f32(5, 3), E]),
    ("scatter_add_-message-passing", lambda m, h, i: m.zeros(4, 3).scatter_add_(
        0, i, h * 2), [f32(5, 3), np.tile(E[:, None], 3)]),
    ("index_copy", lambda m, x, s: m.index_copy(x, 0, m.tensor([2, 0]), s),
     [f32(3, 2), f32(2, 2)]),
    ("index_fill", lambda m, x: x.index_fill(1, m.tensor([0, 2]), -1.0), [f32(2, 3)]),
    ("masked_select", lambda m, x: m.masked_select(x, x > 0), [f32(3, 4)]),
    ("masked_scatter", lambda m, x, s: x.masked_scatter(x > 0, s), [f32(3, 4), f32(12)]),
    ("take", lambda m, x: m.take(x, m.tensor([[0, 5], [11, 5]])), [f32(3, 4)]),
    ("take_along_dim", lambda m, x: m.take_along_dim(x, m.argsort(x, 1), 1), [f32(3, 4)]),
    ("take_along_dim-flat", lambda m, x: m.take_along_dim(x, m.tensor([3, 0])), [f32(2, 2)]),
    ("einsum-matmul", lambda m, a, b: m.einsum("ij,jk->ik", a, b), [f32(2, 3), f32(3, 4)]),
    ("einsum-implicit", lambda m, a, b: m.einsum("ij,kj", a, b), [f32(2, 3), f32(4, 3)]),
    ("einsum-attention", lambda m, q, k: m.einsum("bhqd,bhkd->bhqk", q, k),
     [f32(2, 2, 3, 4), f32(2, 2, 5, 4)]),
    ("einsum-ellipsis", lambda m, a, b: m.einsum("...ij,...jk->...ik", a, b),
     [f32(2, 1, 2, 3), f32(4, 3, 2)]),
    ("einsum-trace", lambda m, a: m.einsum("ii", a), [f32(3, 3)]),
    ("einsum-diagonal", lambda m, a: m.einsum("bii->bi", a), [f32(2, 3, 3)]),
    ("einsum-outer-sum", lambda m, a, b: m.einsum("i,j->", a, b), [f32(3), f32(4)]),
    ("einsum-three", lambda m, a, b, c: m.einsum("ab,bc,cd->da", a, b, c),
     [f32(2, 3), f32(3, 4), f32(4, 2)]),
    ("einsum-list", lambda m, a: m.einsum("ij->ji", [a]), [f32(2, 3)]),
    ("tensordot", lambda m, a, b: m.tensordot(a, b, dims=([1, 0], [0, 2])),
     [f32(3, 2, 4), f32(2, 5, 3)]),
    ("kron", lambda m, a, b: m.kron(a, b), [f32(2, 3), f32(3, 2)]),
    ("cross", lambda m, a, b: m.cross(a, b, dim=1), [f32(2, 3), f32(2, 3)]),
    ("linalg.cross", lambda m, a, b: m.linalg.cross(a, b), [f32(4, 3), f32(1, 3)]),
    ("baddbmm", lambda m, x, a, b: m.baddbmm(x, a, b, beta=0.5, alpha=2.0),
     [f32(3, 1), f32(2, 3, 4), f32(2, 4, 2)]),
    ("addbmm", lambda m, x, a, b: m.addbmm(x, a, b), [f32(3, 2), f32(2, 3, 4), f32(2, 4, 2)]),
    ("addmv", lambda m, x, a, v: m.addmv(x, a, v, alpha=3), [f32(3), f32(3, 4), f32(4)]),
    ("addr", lambda m, x, a, b: m.addr(x, a, b), [f32(3, 2), f32(3), f32(2)]),
    ("diagonal", lambda m, x: m.diagonal(x, 1, 1, 2), [f32(2, 3, 4)]),
    ("diagonal-negative", lambda m, x: x.diagonal(-1), [f32(4, 3)]),
    ("diag-1d", lambda m, x: m.diag(x, -1), [f32(3)]),
    ("diag-2d", lambda m, x: m.diag(x, 2), [f32(3, 4)]),
    ("diag_embed", lambda m, x: m.diag_embed(x, 1, 0, 2), [f32(2, 3)]),
    ("diagflat", lambda m, x: m.diagflat(x), [f32(2, 2)]),
    ("repeat_interleave", lambda m, x: x.repeat_interleave(2, dim=1), [f32(2, 3)]),
    ("repeat_interleave-tensor", lambda m, x: m.repeat_interleave(x, m.tensor([1, 0, 3]), 0),
     [f32(3, 2)]),
    ("repeat_interleave-flat", lambda m, x: m.repeat_interleave(x, 3), [f32(2, 2)]),
    ("meshgrid-xy", lambda m, a, b: m.stack(m.meshgrid(a, b, indexing="xy")),
     [f32(3), f32(2)]),
    ("std_mean", lambda m, x: m.std_mean(x, 1), [f32(3, 4)]),
    ("var_mean-correction", lambda m, x: m.var_mean(x, 0, correction=0), [f32(3, 4)]),
    ("nansum", lambda m, x: m.nansum(x, 1), [with_nan()]),
    ("nanmean", lambda m, x: m.nanmean(x), [np.array([1.0, np.nan, 3.0], np.float32)]),
    ("aminmax", lambda m, x: m.aminmax(x, dim=0), [f32(3, 4)]),
    ("quantile", lambda m, x: m.quantile(x, 0.3, dim=1), [f32(3, 5)]),
    ("quantile-many", lambda m, x: m.quantile(x, m.tensor([0.0, 0.5, 0.9]),
                                              interpolation="midpoint"), [f32(7)]),
    ("nanquantile", lambda m, x: m.nanquantile(x, 0.5, dim=1), [with_nan()]),
]


def _to(lib, a: np.ndarray):
    t = lib.tensor(a)
    return t.requires_grad_() if a.dtype.kind == "f" else t


def _leaves(out) -> list:
    return list(out) if isinstance(out, tuple) else [out]


def _forward_backward(lib, fn, arrays):
    """(each output as numpy with its dtype name, input gradients) of fn at arrays, the
    gradients of sum(out * cotangent) over its float outputs."""
    xs = [_to(lib, a) for a in arrays]
    outs = _leaves(fn(lib, *xs))
    got = [(o.detach().numpy(), str(o.dtype).split(".")[-1]) for o in outs]
    diff = [o for o in outs if o.requires_grad]
    grads = []
    if diff:
        rng = np.random.default_rng(7)
        loss = sum((o * lib.tensor(rng.uniform(-1, 1, tuple(o.shape)).astype(
            o.detach().numpy().dtype))).sum() for o in diff)
        loss.backward()
        grads = [x.grad.numpy() if x.grad is not None else None for x in xs
                 if x.requires_grad]
    return got, grads


def _check_same(got, want):
    (g_outs, g_grads), (w_outs, w_grads) = got, want
    assert len(g_outs) == len(w_outs)
    for (g, gd), (w, wd) in zip(g_outs, w_outs):
        assert gd == wd and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert len(g_grads) == len(w_grads)
    for g, w in zip(g_grads, w_grads):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@requires_torch
@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_eager_values_indices_and_gradients_match_pytorch(name, fn, arrays):
    import torch

    _check_same(_forward_backward(tj, fn, arrays), _forward_backward(torch, fn, arrays))


@requires_torch
@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_traced_values_and_gradients_match_pytorch(name, fn, arrays):
    import torch

    traced = tj.trace(lambda *xs: fn(tj, *xs), tuple(tj.tensor(a) for a in arrays),
                      backend="interpret")
    _check_same(_forward_backward(tj, lambda m, *xs: traced(*xs), arrays),
                _forward_backward(torch, fn, arrays))
    assert traced.stats["eager_fallbacks"] == 0


# ---- indices are data: a trace serves other index tensors ---------------------------------
def _message_passing(h, w, src, dst):
    """One graph-network step: messages along edges src -> dst, summed at dst."""
    messages = h[src] * w
    return tj.zeros_like(h).index_add_(0, dst, messages).tanh().sum()


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_a_traced_message_passing_step_reads_new_edges_as_data(backend):
    h = tj.randn(5, 4, requires_grad=True)
    w = tj.randn(6, 4, requires_grad=True)
    edges = [(tj.tensor([0, 1, 2, 3, 4, 0]), tj.tensor([1, 2, 3, 4, 0, 2])),
             (tj.tensor([4, 4, 4, 1, 0, 2]), tj.tensor([0, 0, 3, 3, 3, 1]))]
    traced = tj.trace(_message_passing, (h, w) + edges[0], backend=backend)
    for src, dst in edges:
        loss = traced(h, w, src, dst)
        gh, gw = tj.autograd.grad(loss, (h, w))
        want = _message_passing(h, w, src, dst)
        wh, ww = tj.autograd.grad(want, (h, w))
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(gh.numpy(), wh.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gw.numpy(), ww.numpy(), rtol=1e-5, atol=1e-6)
    assert traced.stats["eager_fallbacks"] == 0


def test_a_traced_scatter_add_reads_new_indices_as_data():
    def f(x, index):
        return tj.zeros(3, 2).scatter_add(0, index, x)

    x = tj.ones(4, 2)
    traced = tj.trace(f, (x, tj.tensor([[0, 0], [1, 1], [2, 2], [0, 0]])), backend="interpret")
    index = tj.tensor([[2, 1], [2, 1], [0, 0], [2, 2]])
    np.testing.assert_array_equal(traced(x, index).numpy(), f(x, index).numpy())


@pytest.mark.compile
def test_top_k_sampling_traced_on_numba_matches_eager():
    def sample(logits):
        v, i = logits.topk(4)
        probs = tj.softmax(v / 0.7, -1)
        return i.gather(1, tj.multinomial(probs, 1))

    logits = tj.randn(3, 40)
    traced = tj.trace(sample, (logits,))
    tj.manual_seed(5)
    got = traced(logits)
    tj.manual_seed(5)
    want = sample(logits)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    top4 = np.argsort(-logits.numpy(), 1)[:, :4]
    assert all(got.numpy()[r, 0] in top4[r] for r in range(3))


# ---- cumprod's gradient with zeros, twice ----------------------------------------------
def test_cumprod_with_zeros_differentiates_twice_against_finite_differences():
    x = tj.tensor([[2.0, 0.0, 3.0, 0.0], [0.5, -2.0, 0.0, 1.5]], dtype=tj.float64,
                  requires_grad=True)
    assert tj.autograd.gradcheck(lambda t: tj.cumprod(t, 1), (x,))
    (g,) = tj.autograd.grad(tj.cumprod(x, 1).sum(), x, create_graph=True)
    (gg,) = tj.autograd.grad((g * g).sum(), x)
    eps, base = 1e-6, x.detach().numpy()

    def first(a):
        t = tj.tensor(a, requires_grad=True)
        return tj.autograd.grad(tj.cumprod(t, 1).sum(), t)[0].numpy()
    numeric = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        up, down = base.copy(), base.copy()
        up[idx] += eps
        down[idx] -= eps
        numeric[idx] = ((first(up) ** 2).sum() - (first(down) ** 2).sum()) / (2 * eps)
    np.testing.assert_allclose(gg.numpy(), numeric, rtol=1e-4, atol=1e-6)


# ---- counting, searching, sets -------------------------------------------------------------
@requires_torch
@pytest.mark.parametrize("call", [
    lambda m: m.unique(m.tensor([3, 1, 3, 0, 1, 3])),
    lambda m: m.unique(m.tensor([[2.0, 1.0], [2.0, -1.0]]), return_inverse=True,
                       return_counts=True),
    lambda m: m.unique(m.tensor([[1, 2], [0, 0], [1, 2]]), dim=0, return_counts=True),
    lambda m: m.searchsorted(m.tensor([1.0, 3.0, 5.0, 7.0]), m.tensor([[3.0, 6.0], [9.0, 0.0]])),
    lambda m: m.searchsorted(m.tensor([[1, 3, 5], [2, 4, 6]]), m.tensor([[3], [3]]),
                             side="right"),
    lambda m: m.bucketize(m.tensor([0.5, 3.0, 10.0]), m.tensor([1.0, 3.0, 5.0]), right=True),
    lambda m: m.bincount(m.tensor([1, 1, 4, 0])),
    lambda m: m.bincount(m.tensor([1, 1, 3]), m.tensor([0.5, 1.0, 2.0]), minlength=6),
    lambda m: m.count_nonzero(m.tensor([[0, 1, 2], [0, 0, 3]]), dim=1),
    lambda m: m.repeat_interleave(m.tensor([2, 0, 1])),
    lambda m: m.tril_indices(3, 4, 1),
    lambda m: m.triu_indices(4, 3, -1),
    lambda m: m.meshgrid(m.arange(3), m.arange(2)),
    lambda m: m.cumsum(m.tensor([True, True, False]), 0),
    lambda m: m.unique_consecutive(m.tensor([1, 1, 2, 2, 3, 1, 1]), return_counts=True,
                                   return_inverse=True),
], ids=["unique", "unique-inverse-counts", "unique-dim", "searchsorted",
        "searchsorted-2d-right", "bucketize", "bincount", "bincount-weights", "count_nonzero",
        "repeat_interleave-counts", "tril_indices", "triu_indices", "meshgrid", "cumsum-bool",
        "unique_consecutive"])
def test_counting_and_searching_match_pytorch(call):
    import torch

    got, want = _leaves(call(tj)), _leaves(call(torch))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), w.numpy())


@requires_torch
def test_sort_and_topk_return_named_pairs_and_nodes_named_as_pytorch():
    import torch

    def names(m):
        x = m.rand(2, 5, requires_grad=True)
        return [type(o.grad_fn).__name__ for o in (
            m.sort(x).values, m.topk(x, 2).values, m.kthvalue(x, 2).values,
            m.cumsum(x, 1), m.cumprod(x, 1), m.cummax(x, 1).values)]

    assert names(tj) == names(torch)
    out = tj.sort(tj.tensor([2.0, 1.0]))
    assert type(out).__name__ == "sort" and out.values.tolist() == [1.0, 2.0]
    assert out.indices.tolist() == [1, 0] and tj.topk(tj.ones(3), 1)._fields == (
        "values", "indices")
    assert tj.aminmax(tj.tensor([1.0, 3.0]))._fields == ("min", "max")


def test_axis_is_an_alias_of_dim():
    x = tj.tensor([[3.0, 1.0], [2.0, 4.0]])
    assert tj.cumsum(x, axis=0).tolist() == [[3.0, 1.0], [5.0, 5.0]]
    assert x.sort(axis=0).indices.tolist() == [[1, 0], [0, 1]]


# ---- random: seeded, with and without replacement -----------------------------------------
def test_multinomial_is_seeded_and_draws_without_replacement():
    probs = tj.tensor([[0.1, 0.0, 0.5, 0.4], [1.0, 1.0, 1.0, 1.0]])
    tj.manual_seed(3)
    a = tj.multinomial(probs, 3)
    tj.manual_seed(3)
    b = probs.multinomial(3)
    assert a.tolist() == b.tolist() and a.dtype == tj.int64
    for row in a.tolist():
        assert len(set(row)) == 3
    assert 1 not in a.tolist()[0]  # zero weight: never drawn


def test_multinomial_with_replacement_follows_the_weights():
    probs = tj.tensor([0.2, 0.0, 0.8])
    draws = tj.multinomial(probs, 4000, replacement=True).numpy()
    counts = np.bincount(draws, minlength=3) / 4000
    assert counts[1] == 0 and abs(counts[2] - 0.8) < 0.04


def test_normal_with_tensor_mean_and_std_and_normal_inplace():
    mean, std = tj.zeros(2000) + 3.0, tj.full((2000,), 0.5)
    x = tj.normal(mean, std).numpy()
    assert abs(x.mean() - 3.0) < 0.05 and abs(x.std() - 0.5) < 0.05
    y = tj.empty(3000).normal_(-1.0, 2.0).numpy()
    assert abs(y.mean() + 1.0) < 0.15 and abs(y.std() - 2.0) < 0.15
    b = tj.bernoulli(tj.full((4000,), 0.25)).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.04


# ---- the errors PyTorch raises ------------------------------------------------------------
ERRORS = [
    ("topk-k-too-large", lambda m: m.topk(m.ones(3), 4), RuntimeError),
    ("sort-dim", lambda m: m.sort(m.ones(3), 1), IndexError),
    ("kthvalue-k", lambda m: m.kthvalue(m.ones(3), 4), RuntimeError),
    ("cumsum-dim", lambda m: m.cumsum(m.ones(2, 2), 2), IndexError),
    ("scatter-index-dtype", lambda m: m.ones(3).scatter(0, m.tensor([0.0]), 1.0),
     RuntimeError),
    ("scatter-src-dtype", lambda m: m.ones(3).scatter(0, m.tensor([0]), m.ones(1,
                                                                             dtype=m.float64)),
     RuntimeError),
    ("scatter_add-rank", lambda m: m.ones(3, 2).scatter_add(0, m.tensor([0]), m.ones(1)),
     RuntimeError),
    ("scatter_reduce-name", lambda m: m.ones(3).scatter_reduce(0, m.tensor([0]), m.ones(1),
                                                               "average"), RuntimeError),
    ("index_add-2d-index", lambda m: m.ones(3).index_add(0, m.tensor([[0]]), m.ones(1)),
     IndexError),
    ("index_add-source-shape", lambda m: m.ones(3, 2).index_add(0, m.tensor([0]),
                                                                m.ones(1, 3)), RuntimeError),
    ("einsum-operands", lambda m: m.einsum("ij,jk", m.ones(2, 2)), RuntimeError),
    ("einsum-subscripts", lambda m: m.einsum("ijk", m.ones(2, 2)), RuntimeError),
    ("einsum-sizes", lambda m: m.einsum("ij,jk", m.ones(2, 3), m.ones(2, 2)), RuntimeError),
    ("cross-length", lambda m: m.linalg.cross(m.ones(2), m.ones(2)), RuntimeError),
    ("diag-3d", lambda m: m.diag(m.ones(2, 2, 2)), RuntimeError),
    ("diagonal-same-dims", lambda m: m.diagonal(m.ones(2, 2), 0, 1, 1), RuntimeError),
    ("bincount-negative", lambda m: m.bincount(m.tensor([-1, 2])), RuntimeError),
    ("bincount-2d", lambda m: m.bincount(m.ones(2, 2, dtype=m.int64)), RuntimeError),
    ("repeat_interleave-length", lambda m: m.repeat_interleave(m.ones(3), m.tensor([1, 2]),
                                                                0), RuntimeError),
    ("searchsorted-side", lambda m: m.searchsorted(m.ones(3), m.ones(2), side="middle"),
     RuntimeError),
    ("multinomial-negative", lambda m: m.multinomial(m.tensor([0.5, -0.1]), 1), RuntimeError),
    ("multinomial-too-many", lambda m: m.multinomial(m.ones(2), 3), RuntimeError),
    ("quantile-q", lambda m: m.quantile(m.ones(3), 1.5), RuntimeError),
    ("quantile-int", lambda m: m.quantile(m.ones(3, dtype=m.int64), 0.5), RuntimeError),
    ("masked_select-mask-dtype", lambda m: m.masked_select(m.ones(2), m.ones(2)),
     RuntimeError),
    ("meshgrid-indexing", lambda m: m.meshgrid(m.ones(2), indexing="ab"), RuntimeError),
    ("tensordot-sizes", lambda m: m.tensordot(m.ones(2, 3), m.ones(2, 3), 1), RuntimeError),
]


@requires_torch
@pytest.mark.parametrize("name,call,error", ERRORS, ids=[e[0] for e in ERRORS])
def test_raises_what_pytorch_raises(name, call, error):
    import torch

    with pytest.raises(error):
        call(torch)
    with pytest.raises(error):
        call(tj)
