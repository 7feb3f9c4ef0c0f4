"""Host programs: a graph run as one generated function over arrays gives what the
interpreter gives, for every size, and steps aside for what it cannot run."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn
from tracejit.backends.host import HostProgram, host_program, returns_views, static_broadcast
from tracejit.backends.guards import GuardMiss
from tracejit.capture.interpreter import Interpreter
from tracejit.tensor.tensor import Tensor

pytestmark = pytest.mark.filterwarnings("error:tracejit. Numba could not compile")


def graph_of(fn, *example):
    return tj.trace(fn, example, backend="numba").graph


def interpret(graph, args):
    env = {sym: args[i].shape[d] for i, d, sym in graph.size_bindings()}
    return [t.numpy() for t in Interpreter(graph).run(list(args), env, record=False)]


PROGRAMS = {
    "mlp": (lambda x, w, b: (x @ w.t() + b).relu().softmax(-1), [(4, 6), (5, 6), (5,)]),
    "layer_norm": (lambda x, w, b: nn.functional.layer_norm(x, (6,), w, b) * 2,
                   [(4, 6), (6,), (6,)]),
    "reductions": (lambda x, w, b: (x.sum(0) * w[0] + b[0], x.mean(), (x * x).sum(-1)),
                   [(4, 6), (6, 6), (6, 6)]),
    "views": (lambda x, w, b: (x.reshape(-1) * 2).reshape(x.shape[0], 3, 2).permute(2, 0, 1)
              .sum(0) + b[:3], [(4, 6), (1,), (6,)]),
}


@pytest.mark.compile
@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value")
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("batch", [4, 1, 7, 0])
def test_host_program_equals_the_interpreter_for_every_batch(name, batch):
    fn, shapes = PROGRAMS[name]
    graph = graph_of(fn, *[tj.randn(*s) for s in shapes])
    program = HostProgram(graph, Tensor._make)
    args = [tj.randn(*((batch,) + s[1:] if k == 0 else s)) for k, s in enumerate(shapes)]
    got = [t.numpy() for t in program.run(args)]
    want = interpret(graph, args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


def test_source_is_straight_line_code_with_kernel_calls():
    fn, shapes = PROGRAMS["mlp"]
    program = HostProgram(graph_of(fn, *[tj.randn(*s) for s in shapes]), Tensor._make)
    src = program.source
    assert src.startswith("def program(t0, t1, t2):")
    assert "# matmul" in src and ".run([" in src and "s0 = v0.shape[0]" in src
    assert "for " not in src and "while " not in src


def test_promotion_is_decided_once_like_eager_dispatch():
    def f(x, i):
        return x * 2 + i   # float32 tensor + int64 tensor computes in float32

    graph = tj.trace(f, (tj.ones(3), tj.arange(3))).traces[0].recorded  # not fused
    program = HostProgram(graph, Tensor._make)
    x, i = tj.randn(5), tj.arange(5)
    out = program.run([x, i])[0]
    assert out.dtype is tj.float32 and ".astype(" in program.source
    np.testing.assert_allclose(out.numpy(), f(x, i).numpy(), rtol=1e-6)


def test_value_guards_raise_a_guard_miss():
    def f(x):
        return x * 2 if x.sum() > 0 else x * 3

    graph = tj.trace(f, (tj.ones(3),)).traces[0].graph
    program = HostProgram(graph, Tensor._make)
    np.testing.assert_allclose(program.run([tj.ones(4)])[0].numpy(), np.full(4, 2.0))
    with pytest.raises(GuardMiss):
        program.run([-tj.ones(4)])


def test_returned_inputs_and_repeated_outputs_keep_their_identity():
    def f(x, y):
        z = x + y
        return x, z, z

    traced = tj.trace(f, (tj.ones(2), tj.ones(2)), backend="numba")
    assert len(traced.graph.outputs) == 1  # the input returned is not a graph output
    x, y = tj.ones(2), tj.ones(2)
    a, b, c = traced(x, y)
    assert a is x and b is c


def test_what_it_cannot_run_is_left_to_the_interpreter():
    def update(x, buf):
        buf.add_(x)
        return buf * 2

    g = tj.trace(update, (tj.ones(2), tj.zeros(2))).traces[0].graph
    assert host_program(g, Tensor._make) is None                       # updates an input in place
    assert returns_views(graph_of(lambda x: x.t(), tj.ones(2, 3)))
    assert not returns_views(graph_of(lambda x: x.t() * 2, tj.ones(2, 3)))


@pytest.mark.compile
def test_traced_calls_without_gradients_run_the_host_program():
    f = tj.trace(lambda x, w: (x @ w).tanh().sum(-1), (tj.randn(3, 4), tj.randn(4, 5)),
                 backend="numba")
    x, w = tj.randn(8, 4), tj.randn(4, 5)
    out = f(x, w)
    assert f.traces[0]._program is not None
    np.testing.assert_allclose(out.numpy(), (x @ w).tanh().sum(-1).numpy(), rtol=1e-5,
                               atol=1e-6)
    view = tj.trace(lambda x: x.t(), (tj.randn(2, 3),), backend="numba")
    y = tj.randn(2, 3)
    v = view(y)
    assert view.traces[0]._program is None
    y.add_(1)  # the view shares the version counter, as in eager
    assert v._version == y._version


def test_static_broadcast_decides_only_what_the_types_decide():
    from tracejit.core.symbolic import SymInt

    class Rec:  # sizes that would record guards if compared
        def add_shape_guard(self, *a):
            raise AssertionError("a comparison recorded a guard")

    b = SymInt.symbol("s0", 4, Rec())
    c = SymInt.symbol("s1", 4, Rec())
    assert static_broadcast([(b, 3), (3,)]) == (b, 3)
    assert static_broadcast([(b, 1), (1, 5)]) == (b, 5)
    assert static_broadcast([(b, 3), (c, 3)]) is None
