"""Each pass on small graphs: the structure it leaves, and the same numbers as before."""
from __future__ import annotations

import numpy as np

import tracejit as tj
from tracejit.capture.interpreter import Interpreter
from tracejit.ir import verify
from tracejit.ir.passes import cse, dce, fold_constants, fuse, simplify


def recorded(fn, *args):
    return tj.trace(fn, args).traces[0].recorded


def run(graph, *args):
    return [t.detach().numpy() for t in Interpreter(graph).run(list(args),
                                                              _sizes(graph, args))]


def _sizes(graph, args):
    from tracejit.core.symbolic import SymInt

    sizes = {}
    for v, a in zip(graph.inputs, args):
        for dim, s in zip(v.shape, a.shape):
            if isinstance(s, SymInt) is False and hasattr(dim, "source"):
                sizes[dim.source()] = s
    return sizes


def ops(graph):
    return [n.op for n in graph.nodes]


def same_numbers(before, after, *args):
    for a, b in zip(run(before, *args), run(after, *args)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_dce_removes_unused_values_but_keeps_guards_random_ops_and_updates():
    def f(x, buf):
        unused = x.exp() * 3  # noqa: F841
        tj.randn(2)           # drawn but unused: still advances the generator
        buf.add_(1)
        if x.sum() > 0:
            return x * 2
        return x

    g = recorded(f, tj.ones(2), tj.zeros(2))
    out = dce(g)
    verify(out)
    assert "exp" not in ops(out) and "randn" in ops(out) and "guard" in ops(out)
    assert len(out.mutations) == 1 and out.made_by == "dce"


def test_cse_merges_repeated_pure_ops_not_random_ones():
    def f(x):
        a = (x * 2).tanh()
        b = (x * 2).tanh()
        return a + b + tj.rand(2) + tj.rand(2)

    g = recorded(f, tj.ones(2))
    out = cse(g)
    assert ops(out).count("tanh") == 1 and ops(out).count("mul") == 1
    assert ops(out).count("rand") == 2


def test_cse_keeps_ops_recorded_under_different_grad_modes():
    def f(x):
        a = x * 2
        with tj.no_grad():
            b = x * 2  # the same op, but autograd does not record it
        return a, b

    out = cse(recorded(f, tj.ones(3, requires_grad=True)))
    assert ops(out).count("mul") == 2
    traced = tj.trace(f, (tj.ones(3, requires_grad=True),), backend="interpret")
    a, b = traced(tj.ones(3, requires_grad=True))
    assert a.requires_grad and not b.requires_grad


def test_cse_keeps_ops_that_differ_in_attributes():
    def f(x):
        return x.sum(0) + x.sum(1)

    out = cse(recorded(f, tj.ones(3, 3)))
    assert ops(out).count("sum") == 2
    same_numbers(recorded(f, tj.ones(3, 3)), out, tj.arange(9.0).reshape(3, 3))


def test_constant_folding_precomputes_known_subexpressions():
    def f(x):
        k = (tj.arange(4.0) * 2 + 1).exp()
        return x * k

    g = recorded(f, tj.ones(4))
    out = fold_constants(g)
    verify(out)
    assert ops(out) == ["constant", "constant", "constant", "constant", "mul"]
    out = dce(out)
    assert ops(out) == ["constant", "mul"]
    same_numbers(g, out, tj.arange(4.0))


def test_simplify_removes_identities_but_not_returned_values():
    def f(x):
        y = ((x * 1 + 0) / 1) ** 1
        z = (-y).neg()
        return z.reshape(z.shape).to(tj.float32) * 3, x + 0

    g = recorded(f, tj.ones(2, 3))
    out = dce(simplify(g))
    verify(out)
    assert ops(out) == ["mul", "add"]  # `x + 0` is returned: it stays a new tensor
    same_numbers(g, out, tj.arange(6.0).reshape(2, 3))


def test_simplify_keeps_ops_that_broadcast_or_promote():
    def f(x):
        return x + tj.zeros(3, 1), tj.ones(2, dtype=tj.int64) * 1.0

    out = simplify(recorded(f, tj.ones(3)))
    assert "add" in ops(out) and "mul" in ops(out)


def test_simplify_computes_a_transposed_product_as_the_product_of_transposes():
    def f(x, w):
        return (x.t() @ w).t() * 2    # a weight gradient's shape: comes out row-major

    g = recorded(f, tj.ones(4, 3), tj.ones(4, 5))
    out = dce(simplify(g))
    verify(out)
    assert ops(out) == ["transpose", "matmul", "mul"]  # w.t() @ x: the x.t().t() cancels
    same_numbers(g, out, tj.randn(4, 3), tj.randn(4, 5))
    x, w = tj.randn(4, 3), tj.randn(4, 5)
    assert run(out, x, w)[0].flags.c_contiguous


def test_simplify_keeps_a_transposed_product_that_is_used_twice():
    def f(x, w):
        p = x @ w
        return p.t() * 2, p * 3

    out = dce(simplify(recorded(f, tj.ones(4, 3), tj.ones(3, 4))))
    assert ops(out).count("matmul") == 1


def test_simplify_makes_a_weight_multiplied_by_at_every_step_row_major_once():
    def f(xs, w):
        wt = w.t()
        return [x @ wt for x in xs]  # a recurrent layer's W.t(), once per step

    xs = [tj.randn(2, 3) for _ in range(3)]
    g = recorded(f, xs, tj.randn(4, 3))
    out = dce(simplify(g))
    verify(out)
    assert ops(out).count("clone") == 1 and ops(out).count("transpose") == 1
    clone = next(n for n in out.nodes if n.op == "clone")
    assert clone.attrs == {"contiguous": True}
    assert all(n.inputs[1] is clone.outputs[0] for n in out.nodes if n.op == "matmul")
    args = [tj.randn(2, 3) for _ in range(3)] + [tj.randn(4, 3)]
    same_numbers(g, out, *args)

    one = dce(simplify(recorded(lambda x, w: x @ w.t(), tj.randn(2, 3), tj.randn(4, 3))))
    assert "clone" not in ops(one)  # one product: read the transposed view as it is


def test_simplify_sums_products_over_steps_as_one_product_of_stacked_rows():
    def f(hs, gs):  # a weight's gradient summed over time steps: sum_t h_t^T @ g_t
        total = hs[0].t() @ gs[0]
        for h, g in zip(hs[1:], gs[1:]):
            total = total + h.t() @ g
        return total * 2

    hs = [tj.randn(2, 3) for _ in range(4)]
    gs = [tj.randn(2, 5) for _ in range(4)]
    g = recorded(f, hs, gs)
    out = dce(simplify(g))
    verify(out)
    assert ops(out).count("matmul") == 1 and ops(out).count("add") == 0
    assert ops(out).count("cat") == 2 and ops(out).count("transpose") == 1
    args = [tj.randn(2, 3) for _ in range(4)] + [tj.randn(2, 5) for _ in range(4)]
    for a, b in zip(run(g, *args), run(out, *args)):  # the same sums in another order
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    def used_twice(hs, gs):  # a partial sum read elsewhere: the chain stays
        a = hs[0].t() @ gs[0]
        total = a + hs[1].t() @ gs[1] + hs[2].t() @ gs[2]
        return total * 2, a

    kept = dce(simplify(recorded(used_twice, hs[:3], gs[:3])))
    assert ops(kept).count("matmul") == 3


def test_simplify_sees_through_a_row_major_copy_of_a_transpose():
    def f(xs, w):
        wt = w.t()
        outs = [x @ wt for x in xs]
        return outs, wt.t() * 2  # transpose(clone(transpose(w))) is w

    xs = [tj.randn(2, 3) for _ in range(2)]
    out = dce(simplify(simplify(recorded(f, xs, tj.randn(4, 3)))))
    verify(out)
    mul = next(n for n in out.nodes if n.op == "mul")
    assert mul.inputs[0] is out.inputs[-1]


def test_fuse_groups_elementwise_chains_with_broadcasting():
    def f(x, b):
        return ((x + b).tanh() * 0.5 + 1).sigmoid()

    g = recorded(f, tj.ones(4, 3), tj.ones(3))
    out = fuse(g)
    verify(out)
    assert ops(out) == ["fused"]
    assert [n.op for n in out.nodes[0].regions[0].nodes] == ["add", "tanh", "mul", "add",
                                                             "sigmoid"]
    same_numbers(g, out, tj.randn(5, 3), tj.randn(3))


def test_fuse_pulls_an_elementwise_chain_into_its_reduction():
    def f(x):
        return ((x - 1) * (x - 1)).sum(1)

    g = recorded(f, tj.ones(4, 3))
    out = fuse(cse(g))  # the pipeline merges the two (x - 1) first
    assert ops(out) == ["fused"] and out.nodes[0].attrs["kind"] == "row"
    same_numbers(g, out, tj.randn(6, 3))


def test_softmax_and_layer_norm_become_one_row_kernel():
    g = recorded(lambda x: x.softmax(-1), tj.ones(3, 4))
    out = dce(fuse(g))
    assert ops(out) == ["fused"] and out.nodes[0].attrs["kind"] == "row"
    same_numbers(g, out, tj.randn(5, 4))
    ln = recorded(lambda x, w, b: tj.nn.functional.layer_norm(x, (4,), w, b), tj.ones(3, 4),
                  tj.ones(4), tj.zeros(4))
    out = dce(fuse(cse(ln)))
    assert ops(out) == ["fused"] and out.nodes[0].attrs["kind"] == "row"
    same_numbers(ln, out, tj.randn(6, 4), tj.randn(4), tj.randn(4))


def test_fuse_explains_unfused_neighbours():
    def f(x, w):
        return (x @ w).relu().sum() * 2

    out = fuse(recorded(f, tj.ones(2, 3), tj.ones(3, 4)))
    notes = "\n".join(out.notes)
    assert "matmul -> relu not fused: matmul is a linalg op" in notes


def test_fuse_never_creates_a_cycle():
    def f(x):
        a = x.exp()
        m = a.amax()          # a reduction between two elementwise ops of one chain
        return (a - m).exp() + a

    g = recorded(f, tj.ones(5))
    out = fuse(g)
    verify(out)
    same_numbers(g, out, tj.randn(7))
    assert "exp -> sub not fused: the group would depend on itself through an op outside " \
           "it" in out.notes


def test_pipeline_keeps_traced_results_equal_to_eager():
    def f(x, w):
        h = (x @ w + 1).tanh()
        h = h * 1 + tj.zeros(1)
        return h.softmax(-1).log().mean(0), (h * h).sum()

    x, w = tj.randn(4, 3), tj.randn(3, 5)
    tf = tj.trace(f, (x, w))
    for n in (4, 9):
        xx = tj.randn(n, 3)
        for a, b in zip(tf(xx, w), f(xx, w)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert [name for name, _, _ in tf.traces[0].stages] == [
        "trace", "dce", "cse", "fold_constants", "simplify", "hoist_invariants", "dce", "fuse"]


def test_passes_log(monkeypatch, capsys):
    monkeypatch.setenv("TRACEJIT_LOG", "passes")
    tj.trace(lambda x: x.exp() * 2, (tj.ones(2),))
    err = capsys.readouterr().err
    assert "[tracejit:passes] after dce" in err and "[tracejit:passes] after fuse" in err


def test_fuse_never_joins_a_group_that_depends_on_it_through_another_group():
    def f(y):
        h2 = -((y * 2).tanh() + 1)
        h3 = y.sigmoid()
        h5 = h2[:, :1] * h3 + h2   # h3's group reads h2's group through a slice
        h6 = (h2 * 0.75 + h3) * 0.75 + h3  # ... and h2's chain reads h3
        return h5, h3.detach() * h6

    g = recorded(f, tj.ones(5, 3))
    out = fuse(g)
    verify(out)
    same_numbers(g, out, tj.randn(4, 3))


def test_cse_tells_folded_constants_of_one_shape_apart():
    def f(x):
        return x * (tj.arange(2.0) + 1) + x * (tj.arange(2.0) * 3)

    g = recorded(f, tj.ones(2))
    folded = dce(fold_constants(g))
    assert ops(folded).count("constant") == 2
    same_numbers(g, cse(folded), tj.tensor([1.0, -2.0]))


def test_one_effect_rule_decides_what_each_pass_may_do():
    from tracejit.ir.effects import CHECK, INDICES, RANDOM_DRAW, effects, foldable, \
        mergeable, movable

    def f(x, i):
        if bool(x.sum() > 0):  # a value guard
            x = x + 1
        return x[i] + tj.rand(2), tj.nonzero(x)

    g = tj.trace(f, (tj.ones(3), tj.tensor([0, 2]))).graph
    kinds = {n.op: effects(n) for n in g.nodes}
    assert CHECK in kinds["guard"] and not mergeable(next(n for n in g.nodes
                                                          if n.op == "guard"))
    assert RANDOM_DRAW in kinds["rand"]
    assert INDICES in kinds["getitem"]
    add = next(n for n in g.nodes if n.op == "add")
    assert mergeable(add) and foldable(add) and movable(add)
    getitem = next(n for n in g.nodes if n.op == "getitem")
    assert mergeable(getitem) and not movable(getitem)  # the same check twice is one
    rand = next(n for n in g.nodes if n.op == "rand")
    assert not (mergeable(rand) or foldable(rand) or movable(rand))


def test_a_sum_of_products_as_long_as_a_long_loop_is_still_one_product():
    def f(hs, gs):
        total = hs[0].t() @ gs[0]
        for h, g in zip(hs[1:], gs[1:]):
            total = total + h.t() @ g
        return total * 2

    n = 1500  # deeper than Python's recursion limit
    hs, gs = [tj.randn(2, 3) for _ in range(n)], [tj.randn(2, 4) for _ in range(n)]
    g = dce(simplify(recorded(f, hs, gs)))
    assert ops(g).count("matmul") == 1 and ops(g).count("add") == 0

    def shared(hs, w):  # one weight for every term: stacking it n times would cost n copies
        total = hs[0] @ w
        for h in hs[1:]:
            total = total + h @ w
        return total * 2

    kept = dce(simplify(recorded(shared, hs[:4], tj.randn(3, 4))))
    assert ops(kept).count("matmul") == 4


def test_symbols_are_renamed_in_one_pass_by_whole_names():
    from tracejit.core.symbolic import rename_symbols

    # s1 inside s12 is not s1; a name that is itself a symbol is not renamed again
    assert rename_symbols("s1 * s12 + (s2 // 2)", {"s1": "B", "s12": "s1", "s2": "x.shape[0]"}) \
        == "B * s1 + (x.shape[0] // 2)"
    assert rename_symbols("u3 - 1", {}) == "u3 - 1"
