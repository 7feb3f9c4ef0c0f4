"""Guards on the Python objects a compiled function reads (helper functions, the contents
of containers, module attributes), and the compiled backward's agreement with eager
autograd (hooks, random draws, inputs without a gradient path, autocast lists).

Every test compares a compiled function against the same function run eagerly (or
against PyTorch), after changing what the compiled one read.
"""
import functools
import types
import warnings

import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit import nn

from conftest import requires_torch

BACKENDS = ["interpret", "numba"]


def _compile(mode, fn, example, backend):
    if mode == "trace":
        return tj.trace(fn, example, backend=backend)
    s = tj.script(fn, backend=backend)
    s(*example)
    return s


def _same(got, want):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


# ---- helper functions: replacing one is a guard miss, never the old code --------------------
def _helper(x):
    return x.cos()


def _calls_helper(x):
    return _helper(x) * 2


@pytest.mark.parametrize("mode", ["trace", "script"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_helper_replaced_after_compiling_is_called_anew(mode, backend):
    global _helper
    x = tj.randn(5)
    old = _helper
    try:
        compiled = _compile(mode, _calls_helper, (x,), backend)
        _same(compiled(x), _calls_helper(x))
        _helper = lambda x: x.sin()  # noqa: E731
        _same(compiled(x), _calls_helper(x))
        assert compiled.stats["compiles"] == 2
        _helper = old  # back to the first: its trace fits again
        _same(compiled(x), _calls_helper(x))
    finally:
        _helper = old


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_helper_in_a_closure_cell_replaced_after_compiling(backend):
    def make():
        act = tj.tanh

        def f(x):
            return act(x) + 1

        def swap(fn):
            nonlocal act
            act = fn
        return f, swap

    f, swap = make()
    x = tj.randn(4, 3)
    traced = tj.trace(f, (x,), backend=backend)
    swap(lambda t: t.relu())
    _same(traced(x), f(x))


def test_a_helper_reached_through_a_module_of_the_user_is_guarded():
    helpers = types.ModuleType("user_helpers")
    helpers.act = lambda t: t.exp()
    helpers.SCALE = 2.0

    def f(x):
        return helpers.act(x) * helpers.SCALE

    x = tj.randn(3)
    traced = tj.trace(f, (x,))
    helpers.act = lambda t: t.neg()
    _same(traced(x), f(x))
    helpers.SCALE = -1.5
    _same(traced(x), f(x))


def test_a_mutable_default_changed_in_place_is_seen():
    def f(x, scales=[2.0]):  # noqa: B006 — the point of the test
        return x * scales[0]

    x = tj.randn(3)
    traced = tj.trace(f, (x,))
    f.__defaults__[0][0] = 5.0
    _same(traced(x), f(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_function_kept_as_a_module_attribute_or_forward_replaced(backend):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.act = tj.tanh

        def forward(self, x):
            return self.act(self.lin(x))

    m = Block()
    x = tj.randn(2, 4)
    traced = tj.trace(m, (x,), backend=backend)
    m.act = tj.sigmoid
    _same(traced(x), m(x))
    Block.forward = lambda self, x: self.lin(x) * 3
    _same(traced(x), m(x))


# ---- containers: the scalars (and objects) they hold, read at every call ---------------------
@pytest.mark.parametrize("mode", ["trace", "script"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scalar_in_a_closure_list_changed_after_compiling(mode, backend):
    scale = [3.0]

    def f(x):
        return (x * scale[0]).tanh()

    x = tj.randn(6)
    compiled = _compile(mode, f, (x,), backend)
    scale[0] = 0.5
    _same(compiled(x), f(x))
    scale[0] = 3  # an int: the same value, another type (integer tensors promote otherwise)
    xi = tj.arange(4)
    assert compiled(xi).dtype == f(xi).dtype


def test_nested_containers_in_globals_and_module_attributes():
    cfg = {"a": {"b": 2.0}, "sizes": (1, [4.0])}

    def f(x):
        return x * cfg["a"]["b"] + cfg["sizes"][1][0]

    x = tj.randn(3)
    traced = tj.trace(f, (x,))
    cfg["a"]["b"] = 5.0
    _same(traced(x), f(x))
    cfg["sizes"][1][0] = -1.0
    _same(traced(x), f(x))

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.factors = [1.0, 2.0]

        def forward(self, x):
            return x * self.factors[1]

    m = Scaled()
    tm = tj.trace(m, (x,))
    m.factors[1] = 7.0
    _same(tm(x), m(x))


def test_a_list_of_weights_that_grows_is_seen():
    ws = [tj.randn(3, 3), tj.randn(3, 3)]

    def f(x):
        for w in ws:
            x = (x @ w).tanh()
        return x

    x = tj.randn(2, 3)
    traced = tj.trace(f, (x,))
    ws.append(tj.randn(3, 3))
    _same(traced(x), f(x))
    ws[0] = tj.randn(3, 3)
    _same(traced(x), f(x))


def test_an_unchanged_container_keeps_its_trace():
    table = {"k": [1.0, float("nan")], "w": tj.randn(3)}

    def f(x):
        return x * table["k"][0] + table["w"]

    x = tj.randn(3)
    traced = tj.trace(f, (x,))
    for _ in range(3):
        _same(traced(x), f(x))
    assert traced.stats["compiles"] == 1
    assert any("holds" in str(g) for g in traced.guards)


# ---- objects of the user's, sets, numpy values, class attributes: what they hold is guarded -
class _Config:
    def __init__(self):
        self.scale, self.inner = 2.0, types.SimpleNamespace(shift=0.5)


CONFIG = _Config()
FLAGS = {1, 2}
NP_SCALE = np.float32(2.0)
TABLE = np.array([1.0, 2.0, 3.0], np.float32)


def _reads_config(x):
    return x * CONFIG.scale + CONFIG.inner.shift


def _reads_set(x):
    return x * len(FLAGS) + (1.0 if 3 in FLAGS else 0.0)


def _reads_numpy(x):
    return x * NP_SCALE + TABLE.sum()


class _Scaled(nn.Module):
    scale = 2.0  # read as self.scale: a class attribute

    def forward(self, x):
        return x * self.scale


def _rebind(name, value):
    globals()[name] = value


_CHANGES = {  # what a user changes after compiling -> the function that reads it
    "object attribute": (_reads_config, lambda m: setattr(CONFIG, "scale", 3.0)),
    "nested object attribute": (_reads_config, lambda m: setattr(CONFIG.inner, "shift", -1.0)),
    "object rebound": (_reads_config, lambda m: _rebind("CONFIG", _Config())),
    "set changed in place": (_reads_set, lambda m: FLAGS.add(3)),
    "numpy scalar rebound": (_reads_numpy, lambda m: _rebind("NP_SCALE", np.float32(4.0))),
    "numpy array written": (_reads_numpy, lambda m: TABLE.__setitem__(0, 9.0)),
    "class attribute changed": (None, lambda m: setattr(_Scaled, "scale", 3.0)),
    "class attribute shadowed": (None, lambda m: setattr(m, "scale", 4.0)),
}


@pytest.mark.parametrize("mode", ["trace", "script"])
@pytest.mark.parametrize("change", sorted(_CHANGES))
def test_what_an_outside_object_holds_changed_after_compiling_is_seen(change, mode):
    global CONFIG, FLAGS, NP_SCALE, TABLE
    CONFIG, FLAGS, NP_SCALE = _Config(), {1, 2}, np.float32(2.0)
    TABLE = np.array([1.0, 2.0, 3.0], np.float32)
    _Scaled.scale = 2.0
    fn, act = _CHANGES[change]
    fn = fn or _Scaled()
    x = tj.randn(3)
    compiled = _compile(mode, fn, (x,), "interpret")
    _same(compiled(x), fn(x))
    act(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(compiled(x), fn(x))  # a guard miss: compiled again, never the old value
    _same(compiled(x), fn(x))
    assert compiled.stats["guard_failures"] >= 1
    _Scaled.scale = 2.0


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_a_config_object_passed_as_an_argument_is_guarded_by_what_it_holds(mode):
    import argparse

    def f(x, cfg):
        return x * cfg.lr

    args = argparse.Namespace(lr=2.0)
    x = tj.randn(3)
    compiled = _compile(mode, f, (x, args), "interpret")
    args.lr = 3.0  # changed in place: the same object
    _same(compiled(x, args), f(x, args))
    assert any("holds Namespace" in str(g) for g in compiled.guards)


def test_objects_of_installed_packages_are_not_followed():
    # the test runner's assertion helpers (installed in site-packages) hold state that
    # changes at every call: following them would compile every call anew
    from tracejit.capture.pyvalues import _library

    assert _library("_pytest.assertion") and _library("numpy") and _library("json")
    assert not _library(__name__)


# ---- hooks inside the compiled function: refused, naming the line --------------------------
def _hooked(x):
    h = x * 2
    h.register_hook(lambda g: g * 10)
    return (h * h).sum()


def _retains(x):
    h = x.exp()
    h.retain_grad()
    return h, h.sum()


@pytest.mark.parametrize("mode", ["trace", "script"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hook_on_an_intermediate_runs_eagerly_with_a_reason(mode, backend):
    x = tj.randn(4, requires_grad=True)
    _hooked(x).backward()
    want = x.grad.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = _compile(mode, _hooked, (x.detach().requires_grad_(),), backend)
        for _ in range(2):
            x.grad = None
            compiled(x).backward()
            _same(x.grad, want)
    messages = " ".join(str(w.message) for w in caught)
    assert "register_hook()" in messages and "test_guards.py:" in messages


def test_retain_grad_inside_a_trace_runs_eagerly():
    x = tj.randn(4, requires_grad=True)
    with pytest.warns(RuntimeWarning, match=r"retain_grad\(\).*test_guards.py:"):
        traced = tj.trace(_retains, (x,), backend="numba")
    h, s = traced(x)
    s.backward()
    _same(h.grad, tj.ones(4))


# ---- random numbers: the first compiled call draws what eager draws -------------------------
def _noisy(x, w):
    return (F.dropout((x @ w).tanh(), 0.5, True) * tj.randn(8)).sum()


@pytest.mark.compile
def test_the_first_compiled_call_with_gradients_draws_what_eager_draws(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))  # a cold backward cache
    w = tj.randn(8, 8, requires_grad=True)
    x = tj.randn(4, 8)
    traced = tj.trace(_noisy, (x, w), backend="numba")
    runs = []
    for fn in (_noisy, traced):
        tj.manual_seed(0)
        steps = []
        for _ in range(2):
            w.grad = None
            loss = fn(x, w)
            loss.backward()
            steps.append((loss.item(), w.grad.numpy().copy()))
        steps.append(tj.randn(1).item())  # where the generator is afterwards
        runs.append(steps)
    assert not traced.traces[0].backwards[0].loaded
    (eager, compiled) = runs
    for (le, ge), (lc, gc) in zip(eager[:2], compiled[:2]):
        np.testing.assert_allclose(lc, le, rtol=1e-5)
        np.testing.assert_allclose(gc, ge, rtol=1e-4, atol=1e-4)  # tanh: the kernels' form
    assert eager[2] == compiled[2]


@pytest.mark.compile
def test_a_replayed_backward_redraws_the_forward_s_random_numbers():
    w = tj.randn(8, 8, requires_grad=True)
    x = tj.randn(4, 8)
    traced = tj.trace(_noisy, (x, w), backend="numba")
    got = []
    for fn in (_noisy, traced):
        tj.manual_seed(3)
        loss = fn(x, w)
        (g,) = tj.autograd.grad(loss, [w], create_graph=True)  # replays the forward
        got.append((loss.item(), g.detach().numpy().copy(), tj.randn(1).item()))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-5)
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-4, atol=1e-4)
    assert got[1][2] == got[0][2]


_W_LOOP = tj.randn(4, 4)


def _dropout_loop(x, n: int):
    for _ in range(n):
        x = F.dropout((x @ _W_LOOP).tanh(), 0.5, True)
    return x.sum()


@pytest.mark.compile
@pytest.mark.parametrize("create_graph", [False, True])
def test_a_scripted_loop_s_replayed_backward_redraws_its_random_numbers(create_graph):
    scripted = tj.script(_dropout_loop, backend="numba")
    x = tj.randn(3, 4)
    _W_LOOP.requires_grad_()
    try:
        scripted(x, 3)
        runs = []
        for fn in (_dropout_loop, scripted):
            tj.manual_seed(5)
            steps = []
            for _ in range(2):
                loss = fn(x, 3)
                (g,) = tj.autograd.grad(loss, [_W_LOOP], create_graph=create_graph)
                steps.append((loss.item(), g.detach().numpy().copy()))
            runs.append((steps, tj.randn(1).item()))
        (eager, e_next), (compiled, c_next) = runs
        for (le, ge), (lc, gc) in zip(eager, compiled):
            np.testing.assert_allclose(lc, le, rtol=1e-4)
            np.testing.assert_allclose(gc, ge, rtol=1e-4, atol=1e-4)
        assert e_next == c_next
    finally:
        _W_LOOP.requires_grad_(False)


# ---- inputs without a gradient path keep .grad None ----------------------------------------
@pytest.mark.parametrize("mode", ["trace", "script"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parameter_feeding_only_an_unused_output_keeps_grad_none(mode, backend):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.node = nn.Linear(4, 4)
            self.edge = nn.Linear(4, 4)

        def forward(self, x):
            return self.node(x), self.edge(x).tanh()

    net = Net()
    x = tj.randn(3, 4)
    compiled = tj.trace(net, (x,), backend=backend) if mode == "trace" else \
        tj.script(net, backend=backend)
    for _ in range(2):
        net.zero_grad(set_to_none=True)
        h, y = compiled(x)
        y.sum().backward()
        assert net.node.weight.grad is None and net.node.bias.grad is None
        got = net.edge.weight.grad.numpy().copy()
        net.zero_grad(set_to_none=True)
        net(x)[1].sum().backward()
        np.testing.assert_allclose(got, net.edge.weight.grad.numpy(), rtol=1e-5)
    # both outputs used: both get gradients, as in eager
    net.zero_grad(set_to_none=True)
    h, y = compiled(x)
    (h.sum() + y.sum()).backward()
    assert net.node.weight.grad is not None


# ---- autocast: compiled code follows eager's per-op lists -----------------------------------
def _amp_ops(x, w, y):
    h = x @ w
    return (F.cross_entropy(h, y), F.log_softmax(h, -1), F.softmax(h, -1),
            F.layer_norm(h, (5,)), F.mse_loss(h, h * 2), h.sum(), h.exp(),
            F.nll_loss(F.log_softmax(h, -1), y), F.binary_cross_entropy_with_logits(h, h.sigmoid()))


@requires_torch
@pytest.mark.parametrize("mode", ["trace", "script"])
@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_compiled_autocast_dtypes_match_eager_and_pytorch(mode, low):
    import torch

    x, w, y = tj.randn(4, 8), tj.randn(8, 5, requires_grad=True), tj.randint(0, 5, (4,))
    with tj.autocast("cpu", dtype=getattr(tj, low)):
        want = _amp_ops(x, w, y)
        compiled = _compile(mode, _amp_ops, (x, w, y), "interpret")
        got = compiled(x, w, y)
    tx, tw, ty = (torch.from_numpy(t.detach().numpy()) for t in (x, w, y))
    with torch.autocast("cpu", dtype=getattr(torch, low)):
        th = tx @ tw
        torch_out = (torch.nn.functional.cross_entropy(th, ty),
                     torch.nn.functional.log_softmax(th, -1),
                     torch.nn.functional.softmax(th, -1),
                     torch.nn.functional.layer_norm(th, (5,)),
                     torch.nn.functional.mse_loss(th, th * 2), th.sum(), th.exp(),
                     torch.nn.functional.nll_loss(torch.nn.functional.log_softmax(th, -1), ty),
                     torch.nn.functional.binary_cross_entropy_with_logits(th, th.sigmoid()))
    assert [g.dtype.name for g in got] == [e.dtype.name for e in want] == \
        [str(t.dtype).replace("torch.", "") for t in torch_out]
    # the float32 loss's gradient stays finite under a large loss scale (float16 would not)
    (got[0] * 65536.0).backward()
    assert np.isfinite(w.grad.numpy()).all()


_W_NODE, _W_EDGE = tj.randn(4, 4), tj.randn(4, 4)


def _two_chains(x, n: int):
    h = x
    y = x
    for _ in range(n):
        h = (h @ _W_NODE).tanh()
        y = (y @ _W_EDGE).tanh()
    return h, y


@pytest.mark.parametrize("create_graph", [False, True])
def test_a_weight_of_a_scripted_loop_feeding_only_an_unused_output_keeps_grad_none(
        create_graph):
    scripted = tj.script(_two_chains, backend="numba")
    x = tj.randn(3, 4)
    for w in (_W_NODE, _W_EDGE):
        w.requires_grad_()
    try:
        want = tj.autograd.grad(_two_chains(x, 3)[1].sum(), [_W_NODE, _W_EDGE],
                                allow_unused=True)
        for _ in range(2):
            got = tj.autograd.grad(scripted(x, 3)[1].sum(), [_W_NODE, _W_EDGE],
                                   allow_unused=True, create_graph=create_graph)
            assert want[0] is None and got[0] is None
            _same(got[1], want[1])
    finally:
        for w in (_W_NODE, _W_EDGE):
            w.requires_grad_(False)


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_a_method_forward_calls_replaced_on_the_class(mode):
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return self.shape_of(x) * self.scale

        def shape_of(self, x):
            return x.tanh()

    m = Head()
    x = tj.randn(3)
    compiled = tj.trace(m, (x,)) if mode == "trace" else tj.script(m)
    _same(compiled(x), m(x))
    Head.shape_of = lambda self, x: x.exp()
    _same(compiled(x), m(x))


def test_explain_names_the_helper_and_the_container():
    x = tj.randn(3)
    traced = tj.trace(_calls_helper, (x,))
    report = traced.explain()
    assert "global _helper" in report and "the function _helper" in report
    scale = [3.0]
    traced = tj.trace(lambda t: t * scale[0], (x,))
    assert "closure variable scale of" in traced.explain()
    assert "holds [3.0]" in traced.explain()


_SCALE = [2.0]
_INNER = tj.trace(lambda t: t * _SCALE[0], (tj.randn(3),))
_PART = functools.partial(lambda t, s: t * s, s=2.0)


def _calls_callables(x):
    return _INNER(x).tanh() + _PART(x)


def test_traced_functions_and_partials_read_from_outside_are_guarded():
    global _INNER, _PART
    x = tj.randn(3)
    old = _INNER, _PART
    try:
        traced = tj.trace(_calls_callables, (x,))
        _SCALE[0] = 5.0  # read by the inlined traced function
        _same(traced(x), _calls_callables(x))
        _PART.keywords["s"] = 7.0
        _same(traced(x), _calls_callables(x))
        _INNER = tj.trace(lambda t: t.exp(), (tj.randn(3),))
        _same(traced(x), _calls_callables(x))
        _PART = functools.partial(lambda t, s: t - s, s=2.0)
        _same(traced(x), _calls_callables(x))
    finally:
        _INNER, _PART = old
        _SCALE[0] = 2.0


S_ZERO = 0.0
L_ZERO = [0.0]


def _over_s_zero(x):
    return x / S_ZERO


def _over_l_zero(x):
    return x / L_ZERO[0]


@pytest.mark.parametrize("fn", [_over_s_zero, _over_l_zero])
def test_minus_zero_is_another_value_than_zero(fn):
    """`x / 0.0` is inf and `x / -0.0` is -inf: a guard that compared with `==` reused the
    trace of one for the other."""
    global S_ZERO
    x = tj.ones(3)
    t = tj.trace(fn, (x,))
    try:
        with np.errstate(all="ignore"):
            assert (t(x).numpy() == np.inf).all()
            S_ZERO, L_ZERO[0] = -0.0, -0.0
            assert (t(x).numpy() == -np.inf).all() and (fn(x).numpy() == -np.inf).all()
    finally:
        S_ZERO, L_ZERO[0] = 0.0, 0.0


def test_a_float_argument_of_minus_zero_and_nan():
    t = tj.trace(lambda x, s: x / s, (tj.ones(2), 0.0))
    with np.errstate(all="ignore"):
        assert (t(tj.ones(2), 0.0).numpy() == np.inf).all()
        assert (t(tj.ones(2), -0.0).numpy() == -np.inf).all()
        nan = float("nan")
        t(tj.ones(2), nan)
        traces = len(t.traces)
        assert np.isnan(t(tj.ones(2), nan).numpy()).all()
        assert len(t.traces) == traces  # NaN is the same value as NaN: no new trace per call
