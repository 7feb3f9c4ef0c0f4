"""tj.trace: every way a program can be called differently after tracing gives the eager
answer (or the eager error); guards, trace trees, budget, autograd through traced calls."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn


@pytest.fixture(autouse=True, params=["interpret", "numba"])
def backend(request, monkeypatch):
    """Every behaviour holds on both backends: the interpreter (graph replayed through
    eager dispatch) and numba (host programs, kernels, the compiled backward)."""
    monkeypatch.setenv("TRACEJIT_BACKEND", request.param)
    return request.param


def same(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, tj.Tensor):
        return a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape) and \
            np.allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)
    return a == b


def check(traced, fn, *args):
    expected = fn(*args)
    got = traced(*args)
    assert same(got, expected), (got, expected)
    return got


# ---- trace-then-call-differently -----------------------------------------------------------
def test_branch_on_a_tensor_value_takes_the_other_path():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 100

    tf = tj.trace(f, (tj.ones(3),))
    check(tf, f, -tj.ones(3))
    check(tf, f, tj.ones(3) * 5)
    assert tf.stats["compiles"] == 2 and tf.stats["cache_hits"] == 1


def test_item_used_as_a_python_scalar():
    def f(x):
        s = x.max().item()
        return x / s

    tf = tj.trace(f, (tj.tensor([1.0, 2.0]),))
    check(tf, f, tj.tensor([1.0, 4.0]))
    check(tf, f, tj.tensor([3.0, 2.0]))


def test_loop_count_from_a_size():
    def f(x):
        out = x[0]
        for i in range(1, x.shape[0]):
            out = out + x[i]
        return out

    tf = tj.trace(f, (tj.randn(3, 2),))
    check(tf, f, tj.randn(3, 2))
    check(tf, f, tj.randn(5, 2))
    assert tf.stats["compiles"] == 2


def test_loop_count_from_a_tensor_value():
    def f(x, n):
        for _ in range(int(n)):
            x = x * 2
        return x

    tf = tj.trace(f, (tj.ones(2), tj.tensor(3)))
    check(tf, f, tj.ones(2), tj.tensor(3))
    check(tf, f, tj.ones(2), tj.tensor(1))


def test_while_loop_on_a_tensor_condition():
    def f(x):
        while x.sum() < 10:
            x = x * 2
        return x

    tf = tj.trace(f, (tj.ones(2),))
    check(tf, f, tj.ones(2) * 3)
    check(tf, f, tj.ones(2) * 20)


def test_non_tensor_arguments_are_guarded():
    def f(x, scale, mode):
        return x * scale if mode == "mul" else x + scale

    tf = tj.trace(f, (tj.ones(2), 2.0, "mul"))
    check(tf, f, tj.ones(2), 3.0, "mul")
    check(tf, f, tj.ones(2), 3.0, "add")
    check(tf, f, tj.ones(2), 3, "add")  # an int is not the float it equals


SCALE = 2.0


def scaled(x):
    return x * SCALE


def test_global_scalar_changed_after_tracing():
    global SCALE
    tf = tj.trace(scaled, (tj.ones(2),))
    SCALE = 5.0
    try:
        check(tf, scaled, tj.ones(2))
    finally:
        SCALE = 2.0
    assert any("global SCALE" in str(g) for g in tf.guards)


def test_closure_scalar_changed_after_tracing():
    k = 3.0

    def f(x):
        return x + k

    tf = tj.trace(f, (tj.ones(2),))
    k = 10.0
    check(tf, f, tj.ones(2))


class Scaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x) * self.scale


def test_module_attribute_scalar_changed_after_tracing():
    m = Scaler()
    tm = tj.trace(m, (tj.randn(4, 3),))
    x = tj.randn(4, 3)
    m.scale = -1.0
    check(tm, m, x)


def test_one_dimensional_size_change_reuses_the_trace():
    def f(x):
        return (x * x).sum() / x.shape[0]

    tf = tj.trace(f, (tj.randn(5),))
    for n in (2, 9, 100):
        check(tf, f, tj.randn(n))
    assert tf.stats["compiles"] == 1


def test_n_dimensional_size_changes_reuse_the_trace():
    def f(x, w):
        h = (x @ w).tanh()
        return h.reshape(h.shape[0], -1).softmax(-1).mean(0)

    w = tj.randn(4, 6)
    tf = tj.trace(f, (tj.randn(3, 5, 4), w))
    for shape in ((7, 5, 4), (2, 9, 4), (16, 2, 4)):
        check(tf, f, tj.randn(*shape), w)
    assert tf.stats["compiles"] == 1


def test_size_one_is_specialised_because_it_broadcasts():
    def f(x, y):
        return x + y

    tf = tj.trace(f, (tj.randn(3), tj.randn(3)))
    check(tf, f, tj.randn(3), tj.randn(1))
    check(tf, f, tj.randn(4), tj.randn(4))
    with pytest.raises(ValueError, match="do not broadcast"):
        tf(tj.randn(3), tj.randn(4))


def test_dtype_change_retraces():
    def f(x):
        return x / 2

    tf = tj.trace(f, (tj.ones(2),))
    got = check(tf, f, tj.tensor([1, 3]))
    assert got.dtype is tj.float32
    check(tf, f, tj.ones(2, dtype=tj.float64))
    assert tf.stats["compiles"] == 3


def test_random_ops_stay_random():
    def f(x):
        return x + tj.randn(x.shape[0])

    tf = tj.trace(f, (tj.zeros(4),))
    a, b = tf(tj.zeros(4)), tf(tj.zeros(4))
    assert not tj.equal(a, b)
    assert tf.stats["compiles"] == 1
    tj.manual_seed(3)
    a = tf(tj.zeros(6))
    tj.manual_seed(3)
    assert tj.equal(a, f(tj.zeros(6)))


def test_parameters_updated_by_an_optimiser_are_seen():
    tj.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    traced = tj.trace(model, (tj.randn(2, 3),))
    opt = tj.optim.SGD(model.parameters(), lr=0.5)
    x = tj.randn(8, 3)
    for _ in range(3):
        opt.zero_grad()
        loss = traced(x).pow(2).mean()
        loss.backward()
        opt.step()
        check(traced, model, x)
    assert traced.stats["compiles"] == 1
    assert [v.name for v in traced.graph.inputs] == [
        "input", "0.weight", "0.bias", "2.weight", "2.bias"]


def test_exception_on_the_other_path_is_raised():
    def f(x):
        if (x < 0).any():
            raise ValueError("negative input")
        return x.sqrt()

    tf = tj.trace(f, (tj.ones(3),))
    with pytest.raises(ValueError, match="negative input"):
        tf(-tj.ones(3))
    check(tf, f, tj.ones(3) * 4)


def test_in_place_updates_of_inputs_happen_as_in_eager():
    def f(x, buf):
        buf.mul_(0.5).add_(x)
        x[0] = 0.0
        return buf.sum()

    tf = tj.trace(f, (tj.ones(3), tj.ones(3)))
    x1, b1 = tj.tensor([1.0, 2.0, 3.0]), tj.tensor([4.0, 5.0, 6.0])
    x2, b2 = x1.clone(), b1.clone()
    assert same(tf(x1, b1), f(x2, b2))
    assert same(x1, x2) and same(b1, b2)
    assert len(tf.graph.mutations) == 2


def test_in_place_not_committed_when_a_guard_misses():
    def f(x):
        x.add_(1)
        if x.sum() > 10:
            return x * 0
        return x

    tf = tj.trace(f, (tj.ones(2),))
    x = tj.tensor([5.0, 5.0])
    out = tf(x)
    assert x.tolist() == [6.0, 6.0]  # added once, not twice
    assert out.tolist() == [0.0, 0.0]


def test_numpy_escape_is_guarded_by_value():
    def f(x):
        k = int(np.argmax(x.numpy()))
        return x * k

    tf = tj.trace(f, (tj.tensor([1.0, 5.0, 2.0]),))
    check(tf, f, tj.tensor([1.0, 5.0, 2.0]))
    check(tf, f, tj.tensor([9.0, 5.0, 2.0]))
    assert tf.stats["cache_hits"] == 1 and tf.stats["compiles"] == 2


def test_len_and_iteration_over_a_tensor():
    def f(x):
        return sum(row.sum() for row in x) / len(x)

    tf = tj.trace(f, (tj.randn(3, 2),))
    check(tf, f, tj.randn(3, 2))
    check(tf, f, tj.randn(4, 2))


def test_requires_grad_change_retraces():
    def f(x):
        return (x * 3).sum()

    tf = tj.trace(f, (tj.ones(2),))
    x = tj.ones(2, requires_grad=True)
    out = tf(x)
    assert out.requires_grad
    out.backward()
    assert x.grad.tolist() == [3.0, 3.0]
    assert tf.stats["compiles"] == 2


def test_captured_tensor_is_read_at_call_time():
    w = tj.tensor([1.0, 2.0])

    def f(x):
        return x * w

    tf = tj.trace(f, (tj.ones(2),))
    with tj.no_grad():
        w.mul_(10)
    check(tf, f, tj.ones(2))
    assert tf.graph.input_kinds == ["arg", "captured"]


def test_train_eval_switch_retraces():
    class M(nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x

    m = M()
    tm = tj.trace(m, (tj.ones(2),))
    m.eval()
    check(tm, m, tj.ones(2))
    assert tm.stats["compiles"] == 2


# ---- the recompile budget ------------------------------------------------------------------
def test_budget_exhausted_falls_back_to_eager_with_one_warning():
    def f(x):
        return x * x.sum().item()

    tf = tj.trace(f, (tj.ones(2),), budget=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(2, 10):
            check(tf, f, tj.ones(2) * k)
    budget = [w for w in caught if "budget" in str(w.message)]
    assert len(budget) == 1
    msg = str(budget[0].message)
    assert "read by item()" in msg and "test_trace.py" in msg
    assert budget[0].filename == __file__  # attributed to the caller's line
    assert tf.stats["compiles"] == 3 and tf.stats["eager_fallbacks"] == 6


# ---- autograd through traced calls ---------------------------------------------------------
def test_gradients_through_a_traced_call_equal_eager():
    tj.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 5), nn.Sigmoid(), nn.Linear(5, 2))
    traced = tj.trace(model, (tj.randn(4, 3),))
    x = tj.randn(6, 3, requires_grad=True)
    target = tj.tensor([0, 1, 1, 0, 1, 0])
    nn.CrossEntropyLoss()(traced(x), target).backward()
    traced_grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    nn.CrossEntropyLoss()(model(x), target).backward()
    eager_grads = [p.grad for p in model.parameters()] + [x.grad]
    assert all(same(a, b) for a, b in zip(traced_grads, eager_grads))


def test_double_backward_through_a_traced_call():
    def f(x):
        return (x ** 3).sum()

    tf = tj.trace(f, (tj.ones(2, requires_grad=True),))
    x = tj.tensor([1.0, 2.0], requires_grad=True)
    (g,) = tj.autograd.grad(tf(x), x, create_graph=True)
    (h,) = tj.autograd.grad(g.sum(), x)
    assert g.tolist() == [3.0, 12.0] and h.tolist() == [6.0, 12.0]


def test_hooks_on_inputs_and_outputs_of_a_traced_call():
    def f(x):
        return x * 2

    tf = tj.trace(f, (tj.ones(2, requires_grad=True),))
    x = tj.ones(2, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(("in", g.tolist())))
    y = tf(x)
    y.register_hook(lambda g: seen.append(("out", g.tolist())) or g * 10)
    y.sum().backward()
    assert seen == [("out", [1.0, 1.0]), ("in", [20.0, 20.0])]
    assert x.grad.tolist() == [20.0, 20.0]


# ---- graphs and guards are inspectable -----------------------------------------------------
def test_graph_for_returns_the_specialisation_those_inputs_take():
    def f(x):
        return x.relu() if x.mean() > 0 else x.tanh()

    tf = tj.trace(f, (tj.ones(2),))
    g_neg = tf.graph_for(-tj.ones(2))
    assert "tanh" in str(g_neg) and "relu" in str(tf.graph)
    assert tf.graph_for(tj.ones(3)) is tf.graph
    assert tf.stats["compiles"] == 2


def test_explain_lists_guards_with_source_lines_and_recompiles():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    tf = tj.trace(f, (tj.ones(2),))
    tf(-tj.ones(2))
    report = tf.explain()
    assert "value of bool() read == True" in report and "test_trace.py" in report
    assert "trace 2 recorded" in report and "expected True, saw False" in report


def test_trace_log_prints_recompiles_and_graphs(monkeypatch, capsys):
    monkeypatch.setenv("TRACEJIT_LOG", "recompiles,graph,guards")

    def f(x):
        return x.exp() if x.sum() > 0 else x

    tf = tj.trace(f, (tj.ones(2),))
    tf(-tj.ones(2))
    err = capsys.readouterr().err
    assert "[tracejit:recompiles]" in err and "[tracejit:graph]" in err
    assert "[tracejit:guards] f: guard failed" in err


def test_nested_tensor_arguments_and_outputs():
    def f(pair, d):
        a, b = pair
        return {"sum": a + b, "scaled": [d["x"] * 2, 3]}

    args = ((tj.ones(2), tj.ones(2)), {"x": tj.ones(3)})
    tf = tj.trace(f, args)
    out = tf((tj.zeros(2), tj.ones(2)), {"x": tj.ones(3) * 5})
    assert out["sum"].tolist() == [1.0, 1.0] and out["scaled"][0].tolist() == [10.0] * 3
    assert out["scaled"][1] == 3


def test_no_grad_regions_inside_a_traced_function_are_replayed():
    def f(x):
        with tj.no_grad():
            scale = x.abs().max() + 1
        return x / scale

    tf = tj.trace(f, (tj.ones(2, requires_grad=True),))
    x = tj.tensor([1.0, -3.0], requires_grad=True)
    tf(x).sum().backward()
    traced = x.grad.clone()
    x.grad = None
    f(x).sum().backward()
    assert same(traced, x.grad)


def test_calls_under_no_grad_use_their_own_trace():
    def f(x):
        return x * 2

    tf = tj.trace(f, (tj.ones(2, requires_grad=True),))
    with tj.no_grad():
        out = tf(tj.ones(2, requires_grad=True))
    assert not out.requires_grad
    assert tf(tj.ones(2, requires_grad=True)).requires_grad


def test_backward_inside_a_traced_function_runs_eagerly_with_a_warning():
    def step(x, w):
        loss = (x * w).sum()
        loss.backward()
        return loss

    w = tj.ones(2, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="backward"):
        tf = tj.trace(step, (tj.ones(2), w))
    w.grad = None
    tf(tj.tensor([1.0, 2.0]), w)
    assert w.grad.tolist() == [1.0, 2.0]


def test_an_untraceable_call_runs_its_side_effects_exactly_once():
    def f(x, w):
        x.add_(1)
        (x * w).sum().backward()
        return x

    w = tj.ones(2, requires_grad=True)
    x = tj.zeros(2)
    with pytest.warns(RuntimeWarning):
        tf = tj.trace(f, (x, w))
    assert x.tolist() == [1.0, 1.0] and w.grad.tolist() == [1.0, 1.0]
    tf(x, w)
    assert x.tolist() == [2.0, 2.0] and w.grad.tolist() == [3.0, 3.0]
    assert tf.stats["eager_fallbacks"] == 2


def test_writes_through_a_view_update_the_base_and_other_views():
    def f(x):
        v = x[1:]
        head = x[:2]
        v.mul_(10)
        return head * 1, x.sum()

    tf = tj.trace(f, (tj.arange(4.0),))
    for data in ([0.0, 1.0, 2.0, 3.0], [5.0, 6.0, 7.0, 8.0, 9.0]):
        a, b = tj.tensor(data), tj.tensor(data)
        assert same(tf(a), f(b)) and same(a, b)
    assert tf.stats["compiles"] == 1


def test_bool_mask_indexing_guards_the_count():
    def f(x):
        return x[x > 0].sum() + x[x > 0].shape[0]

    tf = tj.trace(f, (tj.tensor([1.0, -1.0, 2.0]),))
    check(tf, f, tj.tensor([3.0, -1.0, 2.0]))
    check(tf, f, tj.tensor([3.0, 1.0, 2.0]))
    assert tf.stats["compiles"] == 2


def test_slices_keep_sizes_symbolic():
    def f(x):
        return x[1:] - x[:-1]

    tf = tj.trace(f, (tj.arange(5.0),))
    check(tf, f, tj.arange(9.0) ** 2)
    assert tf.stats["compiles"] == 1
    assert "f32[B-1]" in str(tf.graph)


def test_an_in_place_update_through_a_reshape_view_is_traced_into_its_base():
    """A convolution's output is a reshape of its product; an in-place activation on it
    (nn.LeakyReLU(inplace=True), DCGAN's discriminator) writes every element of the
    base, so the trace records the base as the update reshaped instead of running
    eagerly."""
    rng = np.random.default_rng(0)
    w = tj.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)

    def f(x):
        y = tj.nn.functional.conv2d(x, w, padding=1)
        tj.nn.functional.leaky_relu(y, 0.2, inplace=True)
        base = x.reshape(-1) * 1.0
        view = base.view(x.shape)
        view.mul_(2.0)  # the base changes with it
        return (y ** 2).sum() + base.sum() + view.mean()

    first = tj.tensor(rng.standard_normal((2, 3, 5, 5)).astype(np.float32))
    traced = tj.trace(f, (first,))
    for x in (first, tj.tensor(rng.standard_normal((3, 3, 6, 4)).astype(np.float32))):
        want = f(x)
        (want_grad,) = tj.autograd.grad(want, (w,))
        got = traced(x)
        (got_grad,) = tj.autograd.grad(got, (w,))
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-5)
    assert traced.stats["eager_fallbacks"] == 0, traced.stats


def test_an_integer_tensor_filled_with_a_traced_size_keeps_one_trace_for_every_size():
    # masked_fill casts its value to the tensor's dtype: a size the trace keeps symbolic
    # is an integer already, and is not made a constant (with a guard per size)
    f = tj.trace(lambda x: x.masked_fill(x > 0, x.shape[0]), (tj.arange(4),))
    for n in (4, 6, 9):
        x = tj.arange(n) - 1
        assert f(x).tolist() == [-1, 0] + [n] * (n - 2)
    assert len(f.traces) == 1
