"""Gradients through scripted loops on the numba backend: a loop whose body is compiled
segments is one autograd node (capture/loops.py) whose backward runs each iteration's
compiled backward in reverse; checked against eager, including lists built by the loop,
create_graph, in-place changes and a second backward."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.capture.loops import ScriptLoopBackward
from tracejit.testing.differential import Call, compare, outcome

pytestmark = pytest.mark.compile  # scripted loops' tapes run compiled steps


@pytest.fixture(autouse=True)
def numba_backend(monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")


def rg(t):
    return t.requires_grad_()


def agree(fn, *calls: Call, create_graph=False):
    sf = tj.script(fn)
    for call in calls:
        expected = outcome(fn, *call.fresh(), create_graph=create_graph)
        got = outcome(sf, *call.fresh(), create_graph=create_graph)
        diff = compare(expected, got)
        assert diff is None, f"{call.args}: {diff}"
    assert sf.stats["compiles"] == 1, sf.explain()
    assert sf.stats["eager_fallbacks"] == 0, sf.explain()
    return sf


def rnn(x, w, u, b):
    h = tj.zeros(1, u.shape[0])
    for t in range(x.shape[0]):
        h = tj.tanh(x[t] @ w + h @ u + b)
    return h


def weights(n_in=3, hidden=4, seed=0):
    g = tj.Generator().manual_seed(seed)
    return (rg(tj.randn(n_in, hidden, generator=g) * 0.5),
            rg(tj.randn(hidden, hidden, generator=g) * 0.5), rg(tj.randn(hidden, generator=g)))


def test_a_recurrence_is_one_autograd_node_with_eager_s_gradients():
    w, u, b = weights()
    calls = [Call(rg(tj.randn(n, 1, 3)), w, u, b) for n in (5, 2, 9)]
    sf = agree(rnn, *calls)
    out = sf(rg(tj.randn(6, 1, 3)), w, u, b)
    assert isinstance(out.grad_fn, ScriptLoopBackward)
    before = sf.stats["backward_kernels"]
    out.sum().backward()
    assert sf.stats["backward_kernels"] - before == 6  # each iteration's compiled backward
    assert sf.stats["backward_replays"] == 0


def test_a_recurrence_under_create_graph():
    w, u, b = weights(seed=1)
    agree(rnn, *[Call(rg(tj.randn(n, 1, 3)), w, u, b) for n in (4, 3)], create_graph=True)


def states(x, w, u):
    h = tj.zeros(1, u.shape[0])
    outs = []
    for t in range(x.shape[0]):
        h = tj.tanh(x[t] @ w + h @ u)
        outs.append(h * 2)
    return tj.stack(outs).sum(0) + h


def test_tensors_the_loop_appends_carry_their_gradients_out():
    w, u, _ = weights(seed=2)
    agree(states, *[Call(rg(tj.randn(n, 1, 3)), w, u) for n in (5, 1, 7)])


def decay(x, w):
    while x.abs().sum() > 1.0:
        x = x * w
    return x


def test_a_while_loop_on_a_tensor_condition():
    agree(decay, *[Call(rg(tj.full((3,), v)), rg(tj.tensor([0.5, 0.7, 0.6])))
                   for v in (4.0, 0.1, 20.0)])


def test_an_in_place_change_of_what_the_loop_let_out_is_caught():
    w, u, b = weights(seed=3)
    sf = tj.script(rnn)
    sf(tj.randn(3, 1, 3), w, u, b)  # records
    out = sf(tj.randn(4, 1, 3), w, u, b)
    assert isinstance(out.grad_fn, ScriptLoopBackward)
    loss = (out * out).sum()  # mul saves out: PyTorch's check fires at the mul first
    out.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_second_backward_needs_retain_graph():
    w, u, b = weights(seed=4)
    sf = tj.script(rnn)
    sf(tj.randn(3, 1, 3), w, u, b)
    out = sf(tj.randn(4, 1, 3), w, u, b).sum()
    out.backward(retain_graph=True)
    first = w.grad.numpy().copy()
    out.backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * first, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_a_loop_that_reads_no_gradient_records_nothing():
    w, u, b = (t.detach() for t in weights(seed=5))
    sf = tj.script(rnn)
    sf(tj.randn(3, 1, 3), w, u, b)
    out = sf(tj.randn(4, 1, 3), w, u, b)
    assert out.grad_fn is None and not out.requires_grad


def rnn_batch(x, h, w, u, b):
    for t in range(x.shape[0]):
        h = tj.tanh(x[t] @ w + h @ u + b)
    return h


def test_weight_gradients_summed_once_over_the_steps_of_a_batch():
    # the weights' gradients (h^T g per step) and the bias's (a sum over rows per step)
    # are summed as one product of the stacked factors at the end of the loop
    w, u, b = weights(seed=6)
    calls = [Call(rg(tj.randn(n, 3, 3)), rg(tj.randn(3, 4)), w, u, b) for n in (4, 1, 6)]
    agree(rnn_batch, *calls)


def accumulate(x, w):
    s = w * 0
    for t in range(x.shape[0]):
        w = w * 0.9 + x[t].t() @ x[t]  # w is carried: its gradient is needed at each step
        s = s + (w @ w).sum(0)
    return s


def test_a_carried_matrix_gets_its_gradient_step_by_step():
    agree(accumulate, *[Call(rg(tj.randn(n, 2, 3)), rg(tj.randn(3, 3))) for n in (3, 5)])


def shrink(x, w):
    while (x * x).sum() > 1.0:
        x = tj.tanh(x @ w) * 0.5
    return x


def test_a_while_loop_whose_body_is_a_segment():
    w = rg(tj.randn(3, 3))
    sf = agree(shrink, *[Call(rg(tj.full((2, 3), v)), w) for v in (3.0, 0.1, 9.0)])
    out = sf(rg(tj.full((2, 3), 5.0)), w)
    assert isinstance(out.grad_fn, ScriptLoopBackward)


def test_a_hook_on_what_the_loop_lets_out_sees_and_changes_its_gradient():
    w, u, b = weights(seed=7)
    sf = tj.script(rnn)
    x = rg(tj.randn(4, 1, 3))
    sf(x, w, u, b)  # records
    seen = []
    out = sf(x, w, u, b)
    out.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
    out.sum().backward()
    scripted = w.grad.numpy().copy()
    w.grad = None
    (rnn(x, w, u, b).sum() * 2).backward()
    assert len(seen) == 1 and np.allclose(seen[0], 1.0)
    np.testing.assert_allclose(scripted, w.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_an_in_place_change_of_an_input_the_loop_read_is_caught():
    w, u, b = weights(seed=8)
    sf = tj.script(rnn)
    x = tj.randn(4, 1, 3)  # needs no gradient, but the weights' gradients read it
    sf(x, w, u, b)
    out = sf(x, w, u, b)
    x.mul_(2)
    with pytest.raises(RuntimeError, match="read by a scripted loop"):
        out.sum().backward()
