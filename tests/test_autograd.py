"""Eager autograd: graph introspection, backward/grad, hooks, grad mode, Function,
in-place checks, anomaly detection, deep graphs and the errors users meet."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch


# ---- graph introspection -------------------------------------------------------------------
def test_grad_fn_names_and_next_functions():
    x = tj.randn(3, requires_grad=True)
    w = tj.randn(3, requires_grad=True)
    y = (x * w + 1).mean()
    assert y.grad_fn.name() == "MeanBackward0"
    assert type(y.grad_fn).__name__ == "MeanBackward0"
    (add, _), = y.grad_fn.next_functions
    assert add.name() == "AddBackward0"
    (mul, _), scalar = add.next_functions  # the scalar 1 is (None, 0), as in PyTorch
    assert mul.name() == "MulBackward0" and scalar == (None, 0)
    (ax, nx), (aw, nw) = mul.next_functions
    assert ax.name() == "AccumulateGrad" and ax.variable is x and nx == 0
    assert aw.variable is w
    assert tj.randn(2).exp().grad_fn is None


def test_next_functions_mark_inputs_that_do_not_require_grad():
    x = tj.randn(3, requires_grad=True)
    c = tj.randn(3)
    assert (x * c).grad_fn.next_functions[1] == (None, 0)


# ---- backward ------------------------------------------------------------------------------
def test_backward_accumulates_into_leaves():
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]


def test_backward_with_explicit_gradient():
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    (x * x).backward(tj.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 40.0]


def test_backward_of_non_scalar_without_gradient_mentions_scalar_outputs():
    x = tj.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()


def test_second_backward_without_retain_graph_mentions_retain_graph():
    x = tj.ones(2, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = tj.ones(2, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2 * np.e, rtol=1e-6)


def test_autograd_backward_several_tensors():
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    a, b = x * 2, x * x
    tj.autograd.backward([a, b], [tj.ones(2), tj.tensor([1.0, 0.5])])
    assert x.grad.tolist() == [4.0, 4.0]


def test_backward_on_tensor_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tj.ones(2).sum().backward()


def test_gradients_reduce_over_broadcast_dimensions():
    x = tj.randn(3, 1, requires_grad=True)
    b = tj.randn(4, requires_grad=True)
    s = tj.tensor(2.0, requires_grad=True)
    ((x + b) * s).sum().backward()
    assert x.grad.shape == (3, 1) and b.grad.shape == (4,) and s.grad.shape == ()
    assert x.grad.tolist() == [[8.0]] * 3
    np.testing.assert_allclose(b.grad.numpy(), 6.0)


def test_gradient_dtype_follows_the_input():
    x = tj.ones(2, dtype=tj.float32, requires_grad=True)
    y = tj.ones(2, dtype=tj.float64, requires_grad=True)
    (x * y).sum().backward()
    assert x.grad.dtype is tj.float32 and y.grad.dtype is tj.float64


# ---- autograd.grad -------------------------------------------------------------------------
def test_grad_returns_without_accumulating():
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    (g,) = tj.autograd.grad((x ** 2).sum(), x)
    assert g.tolist() == [2.0, 4.0] and x.grad is None


def test_grad_with_grad_outputs_and_several_outputs_and_inputs():
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    y = tj.tensor([3.0], requires_grad=True)
    a, b = x * y, x + y
    gx, gy = tj.autograd.grad([a, b], [x, y], [tj.ones(2), tj.tensor([1.0, 2.0])])
    assert gx.tolist() == [4.0, 5.0] and gy.tolist() == [3.0 + 3.0]


def test_grad_of_non_leaf_input():
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    (gh,) = tj.autograd.grad(y, h)
    assert gh.tolist() == [6.0, 12.0]


def test_grad_allow_unused():
    x = tj.ones(2, requires_grad=True)
    z = tj.ones(2, requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        tj.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = tj.autograd.grad(y, [x, z], allow_unused=True)
    assert gz is None and gx.tolist() == [2.0, 2.0]


def test_higher_order_gradients():
    x = tj.tensor([2.0, -1.0], requires_grad=True)
    y = (x ** 3).sum()
    (g,) = tj.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    (h,) = tj.autograd.grad(g.sum(), x, create_graph=True)
    np.testing.assert_allclose(h.detach().numpy(), 6 * x.detach().numpy())
    (t,) = tj.autograd.grad(h.sum(), x)
    np.testing.assert_allclose(t.numpy(), [6.0, 6.0])


def test_backward_with_create_graph_gives_differentiable_grad():
    x = tj.tensor(1.5, requires_grad=True)
    (x.sin() * x).backward(create_graph=True)
    g = x.grad
    assert g.grad_fn is not None
    (gg,) = tj.autograd.grad(g, x)
    expected = 2 * np.cos(1.5) - 1.5 * np.sin(1.5)
    np.testing.assert_allclose(gg.item(), expected, rtol=1e-5)


def test_hessian_vector_product_of_a_tiny_mlp():
    tj.manual_seed(1)
    w = tj.randn(3, 3, dtype=tj.float64, requires_grad=True)
    x = tj.randn(5, 3, dtype=tj.float64)
    v = tj.randn(3, 3, dtype=tj.float64)

    def loss_grad(w_):
        loss = (x @ w_).tanh().pow(2).sum()
        (g,) = tj.autograd.grad(loss, w_, create_graph=True)
        return (g * v).sum()

    assert tj.autograd.gradcheck(loss_grad, (w,))


# ---- hooks ---------------------------------------------------------------------------------
def test_tensor_hooks_see_and_replace_gradients():
    x = tj.ones(2, requires_grad=True)
    seen = []
    h = x * 2
    handle = h.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    x.register_hook(lambda g: g + 1)
    h.sum().backward()
    assert seen == [[1.0, 1.0]]
    assert x.grad.tolist() == [21.0, 21.0]
    handle.remove()
    x.grad = None
    h2 = x * 2
    h2.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_removed_hook_does_not_run():
    x = tj.ones(2, requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    handle.remove()
    (x * 2).sum().backward()
    assert calls == []


def test_retain_grad_keeps_non_leaf_gradients():
    x = tj.ones(2, requires_grad=True)
    h = x * 3
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    assert h.grad.tolist() == [6.0, 6.0]
    m = x * 4
    (m * 1).sum().backward()
    assert m.grad is None


def test_hook_on_tensor_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tj.ones(1).register_hook(lambda g: g)


# ---- grad mode -----------------------------------------------------------------------------
def test_no_grad_enable_grad_set_grad_enabled():
    x = tj.ones(2, requires_grad=True)
    with tj.no_grad():
        assert not tj.is_grad_enabled()
        assert not (x * 2).requires_grad
        with tj.enable_grad():
            assert (x * 2).requires_grad
    assert tj.is_grad_enabled()
    with tj.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert tj.is_grad_enabled()
    tj.set_grad_enabled(False)
    assert not tj.is_grad_enabled()
    tj.set_grad_enabled(True)


def test_grad_mode_decorators():
    x = tj.ones(2, requires_grad=True)

    @tj.no_grad()
    def f(t):
        return t * 2

    @tj.set_grad_enabled(False)
    def g(t):
        return t * 2

    assert tj.is_grad_enabled()  # decorating does not change the mode
    assert not f(x).requires_grad and not g(x).requires_grad
    assert tj.is_grad_enabled()


# ---- custom Function -----------------------------------------------------------------------
class ScaledSquare(tj.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, y):
        ctx.save_for_backward(x, y)
        ctx.scale = scale
        ctx.seen_needs = ctx.needs_input_grad
        return x * x * scale + y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * 2 * x * ctx.scale, None, grad


def test_function_forward_backward_with_non_tensor_argument():
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    y = tj.tensor([0.5, 0.5])
    out = ScaledSquare.apply(x, 3.0, y)
    assert out.grad_fn.name() == "ScaledSquareBackward"
    assert out.grad_fn.ctx.seen_needs == (True, False, False)
    out.sum().backward()
    assert x.grad.tolist() == [6.0, 12.0]


def test_function_mark_non_differentiable_and_gradcheck():
    class SortWithIndex(tj.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = tj.from_numpy(np.argsort(x.detach().numpy()))
            ctx.save_for_backward(idx)
            ctx.mark_non_differentiable(idx)
            return x[idx], idx

        @staticmethod
        def backward(ctx, g, g_idx):
            (idx,) = ctx.saved_tensors
            out = tj.zeros_like(g)
            out[idx] = g
            return out

    x = tj.tensor([3.0, 1.0, 2.0], dtype=tj.float64, requires_grad=True)
    values, idx = SortWithIndex.apply(x)
    assert not idx.requires_grad and values.requires_grad
    assert tj.autograd.gradcheck(lambda t: SortWithIndex.apply(t)[0], (x,))


def test_function_wrong_number_of_gradients_is_an_error():
    class Bad(tj.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    x = tj.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


def test_function_double_backward_through_tracejit_ops():
    class Cube(tj.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    x = tj.tensor(2.0, requires_grad=True)
    (g,) = tj.autograd.grad(Cube.apply(x), x, create_graph=True)
    (gg,) = tj.autograd.grad(g, x)
    assert g.item() == 12.0 and gg.item() == 12.0


# ---- in-place and saved tensors ------------------------------------------------------------
def test_modifying_a_saved_tensor_in_place_names_op_and_versions():
    x = tj.ones(3, requires_grad=True)
    h = x * 2
    y = h.exp()  # exp saves its output
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"'exp'.*version 1; expected version 0"):
        y.sum().backward()
    z = x * 2
    w = z * z  # mul saves its inputs
    z.mul_(3)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*'mul'"):
        w.sum().backward()


def test_inplace_on_non_leaf_is_differentiated():
    x = tj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 2
    h.mul_(x)  # h = 2x^2, the old h is saved for x's gradient
    h.exp_()
    h.sum().backward()
    expected = 4 * x.detach().numpy() * np.exp(2 * x.detach().numpy() ** 2)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_inplace_with_itself_as_argument_is_refused_like_pytorch():
    x = tj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 2
    h.mul_(h)  # the argument h is saved, then overwritten by this very op
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()


def test_multiplying_by_a_constant_does_not_save_the_tensor():
    x = tj.ones(3, requires_grad=True)
    h = x * 1
    y = h * 3  # only the scalar is needed for the gradient
    h.add_(1)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_setitem_gradients_for_target_and_value():
    x = tj.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    v = tj.tensor([10.0, 20.0], requires_grad=True)
    h = x * 1
    h[1:3] = v * v
    (h * tj.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 0.0, 4.0]
    assert v.grad.tolist() == [2 * 10.0 * 2, 2 * 20.0 * 3]


def test_getitem_gradient_accumulates_repeated_indices():
    x = tj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[tj.tensor([0, 2, 2])].sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 2.0]
    x.grad = None
    x[x > 1.5].sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


def test_inplace_through_a_view_updates_the_base_history():
    x = tj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a = x * 1
    a[0:2].mul_(tj.tensor([5.0, 7.0]))
    (a * a).sum().backward()
    assert a.grad_fn.name() == "CopySlices"
    assert x.grad.tolist() == [2 * 25 * 1.0, 2 * 49 * 2.0, 2 * 3.0]


def test_augmented_index_assignment():
    x = tj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a = x * 2
    a[1] += x[0] * 10
    a.sum().backward()
    assert a.tolist() == [2.0, 14.0, 6.0]
    assert x.grad.tolist() == [12.0, 2.0, 2.0]


# ---- gradcheck and anomaly detection -------------------------------------------------------
def test_gradcheck_passes_for_composites_and_fails_for_a_wrong_rule():
    x = tj.randn(4, 3, dtype=tj.float64, requires_grad=True)
    assert tj.autograd.gradcheck(lambda t: t.softmax(1) * t.log_softmax(0), (x,))
    assert tj.autograd.gradcheck(lambda t: t.var(0) + t.std(1).sum() + t.norm(), (x,))
    assert tj.autograd.gradcheck(lambda t: t.logsumexp(1), (x,))

    class WrongExp(tj.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.exp()

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(tj.autograd.GradcheckError, match="Jacobian mismatch"):
        tj.autograd.gradcheck(WrongExp.apply, (x,))
    assert not tj.autograd.gradcheck(WrongExp.apply, (x,), raise_exception=False)


def test_detect_anomaly_names_the_forward_op_and_its_line():
    x = tj.tensor([0.0, 1.0], requires_grad=True)
    with tj.autograd.detect_anomaly():
        y = x.sqrt()  # d/dx sqrt at 0 is inf; times 0 below gives nan
        z = (y * 0).sum()
        with pytest.raises(RuntimeError, match=r"SqrtBackward0.*'sqrt'.*test_autograd.py:\d+"):
            z.backward()


# ---- engine properties ---------------------------------------------------------------------
def test_a_100000_op_chain_backpropagates_without_recursion():
    x = tj.tensor([1.0], requires_grad=True)
    h = x
    for _ in range(100_000):
        h = h + 1e-6
    h.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_saved_tensors_are_freed_after_backward():
    x = tj.randn(1000, requires_grad=True)
    h = x * 2
    y = h.exp()
    ref = weakref.ref(y.grad_fn)
    out_saved = y.grad_fn.out_data
    assert out_saved is not None
    y.sum().backward()
    assert ref().out_data is None and ref().saved is None
    del out_saved, y, h
    gc.collect()


def test_diamond_graph_accumulates_both_paths():
    x = tj.tensor(3.0, requires_grad=True)
    a = x * 2
    b = a * a + a.exp()
    b.backward()
    np.testing.assert_allclose(x.grad.item(), 2 * (2 * 6.0 + np.exp(6.0)), rtol=1e-6)


# ---- PyTorch as oracle ---------------------------------------------------------------------
@requires_torch
def test_random_composite_programs_match_pytorch():
    import torch

    rng = np.random.default_rng(0)
    for _trial in range(20):
        a = rng.standard_normal((4, 5))
        b = rng.standard_normal((5,))
        idx = rng.integers(0, 4, 6)

        def program(lib, x, y, index):
            h = lib.tanh(x * y + 1) @ y
            h = h.softmax(0) * h.sigmoid() + (x ** 2).mean(1) - x[index].sum(1)[:4]
            z = x.clone()
            z[1] = z[1] * 3
            return (h.exp() / (1 + h.abs())).sum() + z.var(0).sum() + x.max(1)[0].sum()

        tx, ty = (torch.tensor(v, requires_grad=True) for v in (a, b))
        jx, jy = (tj.tensor(v, requires_grad=True) for v in (a, b))
        tout = program(torch, tx, ty, torch.tensor(idx))
        jout = program(tj, jx, jy, tj.tensor(idx))
        tout.backward()
        jout.backward()
        np.testing.assert_allclose(jout.item(), tout.item(), rtol=1e-10)
        np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(jy.grad.numpy(), ty.grad.numpy(), rtol=1e-9, atol=1e-12)


@requires_torch
def test_inplace_view_semantics_match_pytorch():
    import torch

    def program(lib, x):
        a = x * 1
        v = a[1:]
        v.mul_(2)
        a[0] = a[0] + v.sum()
        b = a.t()
        b[0, 1] = 3.0
        return (a * a).sum()

    data = np.arange(6.0).reshape(2, 3)
    tx = torch.tensor(data, requires_grad=True)
    jx = tj.tensor(data, requires_grad=True)
    program(torch, tx).backward()
    program(tj, jx).backward()
    np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy())


def test_summed_gradients_are_not_shared_between_leaves():
    a = tj.randn(3, requires_grad=True)
    b = tj.randn(3, requires_grad=True)
    s = a + b                       # two uses of s: the engine sums their gradients,
    (s * 2 + s * 3).sum().backward()  # then AddBackward hands that sum to both leaves
    np.testing.assert_allclose(a.grad.numpy(), np.full(3, 5.0))
    a.grad.add_(1)
    np.testing.assert_allclose(b.grad.numpy(), np.full(3, 5.0))
    (s * 2 + s * 3).sum().backward()  # accumulating again keeps them apart
    np.testing.assert_allclose(a.grad.numpy(), np.full(3, 11.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(3, 10.0))


def test_grad_accumulates_in_place_like_pytorch():
    w = tj.ones(2, 2, requires_grad=True)
    (w * 3).sum().backward()
    g = w.grad
    (w * 3).sum().backward()
    assert w.grad is g
    np.testing.assert_allclose(g.numpy(), np.full((2, 2), 6.0))


def test_a_hook_keeping_a_summed_gradient_sees_it_unchanged():
    kept = []
    a = tj.randn(3, requires_grad=True)
    s = a * 1
    s.register_hook(lambda g: kept.append(g))
    (s * 2 + s * 3 + s * 4).sum().backward()
    np.testing.assert_allclose(kept[0].numpy(), np.full(3, 9.0))
    np.testing.assert_allclose(a.grad.numpy(), np.full(3, 9.0))


def test_grad_to_an_intermediate_leaves_the_graph_beyond_it_intact():
    x = tj.randn(3, requires_grad=True)
    h = x.exp()
    (gh,) = tj.autograd.grad((h * 2).sum(), h)  # runs (and frees) only what leads to h
    assert np.allclose(gh.numpy(), 2.0)
    (h * 3).sum().backward()  # exp's node did not run, so it still has what it saved
    assert np.allclose(x.grad.numpy(), 3 * np.exp(x.detach().numpy()), rtol=1e-6)


def _stale_sibling_view(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = x * 0
    whole, head = out[...], out[:2]      # views made before the writes
    inner = whole[...]
    inner[0] = x[0] * 2                  # through a view of a view
    whole[1] = x[1] * 3                  # through a sibling made before that write
    out[2] = x[2] * 4                    # into the base
    (head * 5).sum().backward(retain_graph=True)
    first = x.grad.detach().clone() if lib is tj else x.grad.clone()
    x.grad = None
    (whole * out).sum().backward()
    return first, x.grad


@requires_torch
def test_a_view_made_before_a_write_through_another_view_differentiates_the_new_value():
    import torch

    for mine, theirs in zip(_stale_sibling_view(tj), _stale_sibling_view(torch)):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy())


@requires_torch
def test_live_views_among_many_dead_ones_all_differentiate_the_new_value():
    # the base keeps weak references to its views and drops the dead ones in sweeps:
    # live views made before, between and after hundreds of short-lived ones are each
    # given the new history by a write through one of them
    import torch

    grads = []
    for lib in (torch, tj):
        x = lib.tensor(np.arange(1.0, 7.0), requires_grad=True)
        out = x * 1
        live = []
        for i in range(300):
            v = out[i % 6:]                  # dies at once
            if i % 97 == 0:
                live.append(v)
        live[0][0] = x[5] * 7                # a write through the first live view
        loss = sum((v * (k + 2)).sum() for k, v in enumerate(live))
        (g,) = lib.autograd.grad(loss, x)
        grads.append(np.asarray(g.detach().numpy(), np.float64))
    np.testing.assert_allclose(grads[1], grads[0])


def test_views_made_by_threads_at_once_all_differentiate_a_later_write():
    # appends to a base's list of views race with its sweeps: none may be lost
    import sys
    import threading

    x = tj.arange(1.0, 7.0, requires_grad=True)
    out = x * 1
    kept, starts = [], []
    lock = threading.Lock()

    def make(seed):
        for i in range(2000):
            v = out[(i + seed) % 6:]
            if i % 37 == 0:
                with lock:
                    kept.append(v)
                    starts.append((i + seed) % 6)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=make, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    out[0] = x[5] * 7                    # into the base: every live view is rewritten
    (got,) = tj.autograd.grad(sum(v.sum() for v in kept), x)
    (want,) = tj.autograd.grad(sum(out[s:].sum() for s in starts), x)  # made after it
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_view_made_under_no_grad_gets_no_history_from_a_later_write():
    a = tj.ones(4, requires_grad=True)
    b = a * 1
    with tj.no_grad():
        v = b[:2]
    b.mul_(2)
    assert not v.requires_grad and v.grad_fn is None
    assert v.numpy().tolist() == [2.0, 2.0]  # it still shares the memory


@requires_torch
def test_a_view_used_after_two_writes_into_its_base_differentiates_the_last_value():
    # views are re-derived from their base when next used (not at each write): the
    # fast paths of unary and binary ops, a backward root and requires_grad see it too
    import torch

    g = np.array([0.5, -1.5], np.float32)
    grads = []
    for lib in (torch, tj):
        x = lib.ones(3, 2, requires_grad=True)
        o = x * 1.0
        first = o[0]
        for _ in range(2):
            o[1] = o[1] + first * 2.0
        o[0] = o[0] * 3.0
        (first.neg() * lib.tensor(g)).sum().backward()
        z = lib.zeros(2)
        v = z[0:1]
        z.copy_(x[0] * 1.0)
        assert v.requires_grad
        v.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)
