"""Whole-graph autodiff: a traced call on the numba backend is one autograd node whose
backward is a traced, optimised and compiled graph, with the same gradients as eager."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn


def grads_of(fn, args, diff):
    for a in diff:
        a.grad = None
    fn(*args).backward()
    return [a.grad.clone() for a in diff]


PROGRAMS = {
    "softmax": (lambda x, w, b: ((x @ w + b).tanh() * 2).softmax(-1).sum(), [(4, 3), (3, 5),
                                                                              (5,)]),
    "layer_norm": (lambda x, w, b: nn.functional.layer_norm(x * 2, (5,), w, b).pow(2).mean(),
                   [(4, 5), (5,), (5,)]),
    "broadcast": (lambda x, w, b: ((x - b) * w).sigmoid().sum() + (x * x).sum(-1).mean(),
                  [(4, 5), (5,), (4, 1)]),
    "log_softmax": (lambda x, w, b: (x @ w).log_softmax(-1).mean() * b.sum(), [(4, 3), (3, 5),
                                                                               (2,)]),
}


@pytest.mark.compile
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_compiled_backward_matches_eager_for_new_sizes(name):
    fn, shapes = PROGRAMS[name]
    example = [tj.randn(*s, requires_grad=True) for s in shapes]
    traced = tj.trace(fn, tuple(example), backend="numba")
    for batch in (6, 9):
        args = [tj.randn(*((batch,) + s[1:] if len(s) == 2 and s[0] == 4 else s),
                         requires_grad=True) for s in shapes]
        out = traced(*args)
        assert out.grad_fn.name() == "TracedCallBackward"
        got = grads_of(traced, args, args)
        want = grads_of(fn, args, args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-5, atol=2e-6)
    assert traced.stats["compiles"] == 1
    assert traced.stats["backward_kernels"] == 2 and traced.stats["backward_replays"] == 0
    bg = traced.backward_graph
    assert bg is not None and "fused" in str(bg) and "f32[B," in str(bg)


@pytest.mark.compile
def test_compiled_backward_of_a_module_updates_parameters_like_eager():
    tj.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    traced = tj.trace(model, (tj.randn(2, 4),), backend="numba")
    x, y = tj.randn(16, 4), tj.randint(0, 3, (16,))
    nn.functional.cross_entropy(traced(x), y).backward()
    compiled = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    for a, p in zip(compiled, model.parameters()):
        np.testing.assert_allclose(a.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.compile
def test_double_backward_through_a_compiled_call_replays_exactly():
    def f(x):
        return (x.tanh() * x).sum()

    traced = tj.trace(f, (tj.randn(3, requires_grad=True),), backend="numba")
    x = tj.tensor([0.3, -1.2, 2.0], requires_grad=True)
    (g,) = tj.autograd.grad(traced(x), x, create_graph=True)
    (h,) = tj.autograd.grad(g.sum(), x)
    (g2,) = tj.autograd.grad(f(x), x, create_graph=True)
    (h2,) = tj.autograd.grad(g2.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), g2.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(h.numpy(), h2.numpy(), rtol=1e-6)
    assert traced.stats["backward_replays"] == 1


@pytest.mark.compile
def test_traces_that_update_inputs_without_gradients_get_a_compiled_backward():
    # a BatchNorm's running statistics: the graph returns the new values, which are
    # written into the inputs after the call, as eager's in-place updates
    def f(x, buf):
        buf.add_(1)
        return (x * buf).sum()

    traced = tj.trace(f, (tj.ones(2, requires_grad=True), tj.zeros(2)), backend="numba")
    x, buf = tj.ones(2, requires_grad=True), tj.zeros(2)
    version = buf._version
    out = traced(x, buf)
    assert type(out.grad_fn).__name__ == "TracedCallBackward"
    out.backward()
    assert x.grad.tolist() == [1.0, 1.0] and buf.tolist() == [1.0, 1.0]
    assert buf._version > version


@pytest.mark.compile
def test_an_update_that_carries_a_gradient_keeps_eager_autograd():
    def f(x, buf):
        buf.copy_(x * 2)  # buf now has a history through x
        return buf.sum()

    traced = tj.trace(f, (tj.ones(2, requires_grad=True), tj.zeros(2)), backend="numba")
    x, buf = tj.ones(2, requires_grad=True), tj.zeros(2)
    out = traced(x, buf)
    out.backward()
    assert x.grad.tolist() == [2.0, 2.0] and buf.requires_grad and buf.tolist() == [2.0, 2.0]


def test_modifying_an_input_before_backward_is_an_error_as_in_eager():
    traced = tj.trace(lambda x, w: (x * w).sum(), (tj.ones(3), tj.ones(3, requires_grad=True)),
                      backend="numba")
    x, w = tj.ones(3), tj.ones(3, requires_grad=True)
    out = traced(x, w)
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


@pytest.mark.compile
def test_second_backward_needs_retain_graph():
    traced = tj.trace(lambda x: (x * x).sum(), (tj.ones(3, requires_grad=True),),
                      backend="numba")
    x = tj.ones(3, requires_grad=True)
    out = traced(x)
    out.backward(retain_graph=True)
    out.backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0]
    out = traced(x)
    out.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        out.backward()


@pytest.mark.compile
@pytest.mark.parametrize("n", [3, 70_000])  # small gradients are copied, large ones kept
def test_leaf_gradients_never_alias_each_other_or_the_incoming_gradient(n):
    traced = tj.trace(lambda x, y: (x + y) * 1.5, (tj.ones(3, requires_grad=True),
                                                   tj.ones(3, requires_grad=True)),
                      backend="numba")
    x, y = tj.ones(n, requires_grad=True), tj.ones(n, requires_grad=True)
    g = tj.arange(float(n))
    traced(x, y).backward(g)
    x.grad.mul_(10)
    np.testing.assert_allclose(y.grad.numpy(), 1.5 * np.arange(n))
    np.testing.assert_allclose(g.numpy(), np.arange(n))
    np.testing.assert_allclose(x.grad.numpy(), 15 * np.arange(n))


def test_the_backward_reads_a_returned_value_instead_of_recomputing_it():
    def f(x, w):
        return (x @ w).tanh()

    t = tj.trace(f, (tj.randn(3, 4, requires_grad=True), tj.randn(4, 5, requires_grad=True)),
                 backend="numba")
    x, w = tj.randn(6, 4, requires_grad=True), tj.randn(4, 5, requires_grad=True)
    t(x, w).sum().backward()
    bg = t.backward_graph
    assert "tanh_backward" in str(bg) and "= tanh(" not in str(bg)  # tanh' from the output
    assert len(bg.inputs) == 2 + 1 + 1   # x, w, the output gradient, the saved output
    gx = x.grad.clone()
    x.grad = None
    f(x, w).sum().backward()
    np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_changing_a_returned_value_in_place_before_backward_is_an_error():
    t = tj.trace(lambda x: x.tanh(), (tj.randn(3, requires_grad=True),), backend="numba")
    x = tj.randn(4, requires_grad=True)
    y = t(x)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation: an output"):
        y.sum().backward()


def _lstm_step(cell):
    def step(x, h, c):
        h2, c2 = cell(x, (h, c))
        return (h2 * c2).sum()
    return step


MODELS = {  # name: (build, example input shapes, loss from the output)
    "mlp": (lambda: nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 4), nn.Tanh()),
            [(3, 6)]),
    "layer_norm": (lambda: nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU()),
                   [(3, 6)]),
    "softmax_head": (lambda: nn.Sequential(nn.Linear(6, 5), nn.Sigmoid(), nn.Softmax(-1)),
                     [(3, 6)]),
    "gru_cell": (lambda: nn.GRUCell(6, 7), [(3, 6), (3, 7)]),
    "embedding": (lambda: nn.Sequential(nn.Embedding(10, 6), nn.Linear(6, 3)), None),
}


@pytest.mark.compile
@pytest.mark.parametrize("name", list(MODELS))
def test_traced_modules_train_like_eager_on_new_batch_sizes(name):
    tj.manual_seed(0)
    build, shapes = MODELS[name]
    model = build()

    def inputs(batch):
        if shapes is None:  # token ids
            return [tj.randint(0, 10, (batch, 4))]
        return [tj.randn(*((batch,) + s[1:]), requires_grad=True) for s in shapes]

    traced = tj.trace(model, tuple(inputs(3)), backend="numba")
    for batch in (5, 64, 1):
        xs = inputs(batch)
        for mode in ("traced", "eager"):
            model.zero_grad()
            for x in xs:
                x.grad = None
            out = (traced if mode == "traced" else model)(*xs)
            (out * out).sum().backward()
            grads = [p.grad.clone() for p in model.parameters()] + [
                x.grad.clone() for x in xs if x.requires_grad]
            if mode == "traced":
                got, value = grads, out.detach().clone()
        np.testing.assert_allclose(value.numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-6)
        for g, w in zip(got, grads):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
    # one trace serves batch 1 too (a size of 1 decides nothing when it broadcasts only
    # against 1s); every call after the tracing one ran the compiled backward
    assert traced.stats["compiles"] == 1
    assert traced.stats["backward_kernels"] == 3 and traced.stats["backward_replays"] == 0
    # what the backward decided about sizes, the forward trace's guards already imply
    assert all(bt.fwd_guards is None for tr in traced.traces for bt in tr.backwards)


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_one_trace_serves_batches_1_3_17_64_of_an_mlp_loss(backend):
    tj.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                          nn.Linear(16, 5))

    def loss_fn(x, y):
        return nn.functional.cross_entropy(model(x), y)

    traced = tj.trace(loss_fn, (tj.randn(8, 12), tj.randint(0, 5, (8,))), backend=backend)
    for batch in (1, 3, 17, 64, 1):
        x, y = tj.randn(batch, 12), tj.randint(0, 5, (batch,))
        results = []
        for fn in (traced, loss_fn):
            model.zero_grad()
            loss = fn(x, y)
            loss.backward()
            results.append([loss.detach().clone()] + [p.grad.clone() for p in
                                                       model.parameters()])
        for got, want in zip(*results):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert traced.stats["compiles"] == 1 and traced.stats["guard_failures"] == 0
    assert len(traced.traces) == 1
    # on numba, one compiled backward for every batch size (the interpreter replays)
    assert len(traced.traces[0].backwards) == (backend == "numba")


@pytest.mark.compile
def test_a_traced_lstm_step_trains_like_eager():
    tj.manual_seed(0)
    cell = nn.LSTMCell(5, 6)
    step = _lstm_step(cell)
    traced = tj.trace(step, (tj.randn(2, 5), tj.randn(2, 6, requires_grad=True), tj.randn(2, 6)),
                      backend="numba")
    x, h, c = tj.randn(9, 5), tj.randn(9, 6, requires_grad=True), tj.randn(9, 6)
    traced(x, h, c).backward()
    got = [p.grad.clone() for p in cell.parameters()] + [h.grad.clone()]
    cell.zero_grad()
    h.grad = None
    step(x, h, c).backward()
    for g, w in zip(got, [p.grad for p in cell.parameters()] + [h.grad]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
    assert traced.stats["backward_kernels"] == 1


class _Double(tj.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_a_custom_function_with_gradients_makes_the_call_run_eagerly():
    def f(x):
        return _Double.apply(x.tanh()).sum()

    with pytest.warns(RuntimeWarning, match="autograd.Function _Double"):
        t = tj.trace(f, (tj.randn(3, requires_grad=True),), backend="numba")
    x = tj.randn(5, requires_grad=True)
    t(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh(x.detach().numpy()) ** 2),
                               rtol=1e-5)
    assert not t.traces


@pytest.mark.compile
def test_sizes_only_the_backward_decides_are_guarded_before_its_forward_part_runs(
        monkeypatch):
    """A vjp rule that decides on sizes (here: mul's, made to compare the rows of its
    first input with the last size of its second) specialises the compiled backward —
    and its forward part — to that answer; a call with the other answer gets its own."""
    from tracejit.ops import OPS

    rule = OPS.mul.vjp
    decisions = []

    def deciding_rule(g, out, x, y):
        if hasattr(x, "shape") and hasattr(y, "shape") and x.ndim == 2 and y.ndim == 1:
            decisions.append(x.shape[0] == y.shape[-1])
        return rule(g, out, x, y)

    monkeypatch.setattr(OPS.mul, "vjp", deciding_rule)

    def f(x, w):
        return (x * w).tanh().sum()

    t = tj.trace(f, (tj.randn(3, 4, requires_grad=True), tj.randn(4, requires_grad=True)),
                 backend="numba")
    for rows in (4, 6, 4, 6, 8):     # rows == len(w) and rows != len(w) alternate
        x, w = tj.randn(rows, 4, requires_grad=True), tj.randn(4, requires_grad=True)
        t(x, w).backward()
        gx, gw = x.grad.clone(), w.grad.clone()
        x.grad = w.grad = None
        f(x, w).backward()
        np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gw.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert len(t.traces[0].backwards) == 2  # one per answer to rows == len(w)
    assert all(bt.fwd_guards.n_relations == 1 for bt in t.traces[0].backwards)
    assert t.stats["backward_kernels"] == 5 and t.stats["compiles"] == 1


@pytest.mark.compile
def test_explain_reports_the_compiled_backward_and_its_fusion_decisions():
    m = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16))
    t = tj.trace(m, (tj.randn(3, 8, requires_grad=True),), backend="numba")
    t(tj.randn(5, 8, requires_grad=True)).sum().backward()
    report = t.explain()
    assert "compiled backward 1: autodiff (" in report and "-> fuse (" in report
    assert "a sum over all rows is complete only when its row kernel ends" in report
    assert "size guards the backward added" not in report  # none beyond the forward's


@pytest.mark.compile
def test_an_input_the_output_does_not_depend_on_gets_no_gradient():
    t = tj.trace(lambda x, unused: (x * x).sum(),
                 (tj.randn(3, requires_grad=True), tj.randn(3, requires_grad=True)),
                 backend="numba")
    x, unused = tj.randn(5, requires_grad=True), tj.randn(5, requires_grad=True)
    t(x, unused).backward()
    assert unused.grad is None and t.stats["backward_kernels"] == 1
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)


@pytest.mark.compile
def test_the_backward_reads_saved_values_where_they_meet_a_discontinuous_op():
    """amax's mask `x == max` and abs'(x - min) must see the forward's x to the last bit;
    x recomputed (in another kernel, or in another pass of one) could miss the tie and
    send the gradient elsewhere."""
    F = nn.functional

    def f(a):
        x = (F.gelu(a) * F.gelu(a) + 1).log()
        return (x - x.amin(-1, keepdim=True)).abs() + x.amax(-1, keepdim=True)

    rng = np.random.default_rng(0)

    def tensor(rows):
        return tj.from_numpy(rng.standard_normal((rows, 4)).astype(np.float32)
                             ).requires_grad_()

    t = tj.trace(f, (tensor(3),), backend="numba")
    x = tensor(4)
    g = tj.from_numpy(rng.standard_normal((4, 4)).astype(np.float32))
    t(x).backward(g)
    got = x.grad.clone()
    x.grad = None
    f(x).backward(g)
    np.testing.assert_allclose(got.numpy(), x.grad.numpy(), rtol=1e-4, atol=1e-5)
    bg = t.backward_graph
    assert sum(v.dtype is tj.bool for v in bg.inputs) >= 1  # a mask, saved by the forward


@pytest.mark.compile
def test_two_outer_products_of_one_row_gradient_are_two_kernels():
    """A one-row step (an RNN cell at batch 1): both weight gradients are outer products
    of the same [1, N] gradient with inputs of different lengths. Products with an inner
    size of 1 become broadcasting multiplies, which must not share one kernel."""
    def step(x, w, h, u):
        return tj.tanh(x @ w + h @ u)

    args = [tj.randn(1, 5), tj.randn(5, 6), tj.randn(1, 7), tj.randn(7, 6)]
    args = [a.requires_grad_() for a in args]
    traced = tj.trace(step, tuple(args), backend="numba")
    expected = [g.numpy() for g in tj.autograd.grad(step(*args).sum(), args)]
    got = tj.autograd.grad(traced(*args).sum(), args)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=1e-5)
    fused = [n for n in traced.backward_graph.nodes if n.op == "fused"]
    assert not any(n.op == "matmul" and n.inputs[0].shape[-1] == 1
                   for n in traced.backward_graph.nodes)  # the outer products multiply
    assert len(fused) == 2, traced.backward_graph
