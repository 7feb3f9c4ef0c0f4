"""Script graphs as IR: golden dumps of nested regions, the dump command, passes inside
regions (loop-invariant code motion, dead code, CSE scopes), the verifier, explain()."""
from __future__ import annotations

import textwrap

import pytest

import tracejit as tj
from tracejit.ir.graph import IF, LOOP
from tracejit.ir.verifier import VerificationError, verify


def all_ops(graph) -> list:
    """The ops of a graph and of every region in it, fused kernels included."""
    return [op for n in graph.nodes for op in [n.op] + [o for r in n.regions
                                                         for o in all_ops(r)]]


def nested(x, w, n: int):
    for i in range(n):
        if (x @ w).sum() > 0:
            x = (x @ w.t()).tanh()
        else:
            x = x * 0.5 + i
    return x


GOLDEN = """\
# graph nested  [after: fuse · 2 + 8 in regions nodes]
graph(%x: f32[B,T], %w: f32[T,T], %n: i64[]) -> (f32[B,T]):
  u0 := size(%n)
  %0: f32[B,T] = loop(%x, %w) {index=u1, range=0:u0}
    body(%x_1: f32[B,T], %w_1: f32[T,T]):
      %1: f32[B,T] = matmul(%x_1, %w_1)
      %2: f32[] = sum(%1) {dim=None, keepdim=False}
      %3: b8[] = gt(%2, 0)
      %4: f32[B,T] = if(%3, %x_1, %w_1)
        then(%x_2: f32[B,T], %w_2: f32[T,T]):
          %5: f32[T,T] = transpose(%w_2) {dim0=0, dim1=1}
          %6: f32[B,T] = matmul(%x_2, %5)
          %7: f32[B,T] = tanh(%6)
          yield %7
        else(%x_3: f32[B,T], %w_3: f32[T,T]):
          %8: f32[B,T] = fused[elementwise](%x_3) {
              %r0: f32[B,T] = mul(%in0, 0.5)
              %r1: f32[B,T] = add(%r0, u1)
              yield %r1 }
          yield %8
      yield %4
  return %0"""


def test_golden_dump_of_a_loop_holding_a_branch():
    sf = tj.script(nested, backend="interpret")
    sf(tj.randn(3, 4), tj.randn(4, 4), 3)
    assert str(sf.graph) == GOLDEN
    sf(tj.randn(5, 4), tj.randn(4, 4), 7)  # other sizes and counts: the same graph
    assert sf.stats["compiles"] == 1


def test_every_stage_is_verified_over_nested_regions():
    sf = tj.script(nested, backend="interpret")
    sf(tj.randn(3, 4), tj.randn(4, 4), 2)
    names = [name for name, _, _ in sf.traces[0].stages]
    assert names == ["script", "dce", "cse", "fold_constants", "simplify", "hoist_invariants",
                     "dce", "fuse"]
    for _, graph, _ in sf.traces[0].stages:
        verify(graph)


def test_the_dump_command_scripts_and_shows_every_stage(tmp_path, capsys):
    from tracejit.cli import main

    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent('''
        def f(x, n: int):
            for i in range(n):
                if x.sum() > 0:
                    x = x * 0.5
            return x
    '''))
    assert main(["dump", f"{path}:f", "--script", "--input", "f32[4]", "--input", "3",
                 "--stages"]) == 0
    out = capsys.readouterr().out
    for stage in ("script", "cse", "hoist_invariants", "fuse"):  # a stage or "no change"
        assert f"[after: {stage} ·" in out or f"# after {stage}: no change" in out
    assert "loop(" in out and "if(" in out and "then(" in out


def rnn_steps(x, h, w, u):
    for t in range(x.shape[0]):
        h = (x[t] @ w.t() + h @ u.t()).tanh()
    return h


def test_loop_invariant_ops_move_in_front_of_the_loop():
    sf = tj.script(rnn_steps)
    w, u, h = tj.randn(4, 3), tj.randn(4, 4), tj.zeros(4)
    for n in (3, 6):
        x = tj.randn(n, 3)
        assert tj.allclose(sf(x, h, w, u), rnn_steps(x, h, w, u), atol=1e-6)
    loop = next(n for n in sf.graph.nodes if n.op == LOOP)
    assert [n.op for n in sf.graph.nodes].count("transpose") == 2
    assert not any(n.op == "transpose" for n in loop.regions[-1].walk())
    assert any("invariant op(s)" in note for note in sf.graph.notes)
    assert "moved in front of it" in sf.explain()


def indexed_in_loop(x, idx, n: int):
    s = x[0] * 0
    for _ in range(n):
        s = s + x[idx] + tj.rand(3)
    return s


def test_ops_that_may_raise_or_draw_random_numbers_stay_in_the_loop():
    sf = tj.script(indexed_in_loop)
    sf(tj.randn(4, 3), tj.tensor(2), 2)
    body = next(n for n in sf.graph.nodes if n.op == LOOP).regions[-1]
    ops = all_ops(body)
    assert "getitem" in ops and "rand" in ops
    with pytest.raises(IndexError):
        sf(tj.randn(4, 3), tj.tensor(9), 1)
    sf(tj.randn(4, 3), tj.tensor(9), 0)  # no iteration: eager does not index either


def raise_in_branch(x):
    if x.sum() < 0:
        raise ValueError("negative sum")
    return x + 1


def test_dead_code_elimination_keeps_a_raise_inside_a_branch():
    sf = tj.script(raise_in_branch)
    sf(tj.ones(3))
    node = next(n for n in sf.graph.nodes if n.op == IF)
    assert [n.op for n in node.regions[0].nodes] == ["raise"]
    with pytest.raises(ValueError, match="negative sum"):
        sf(-tj.ones(3))


def same_expression_inside_and_outside(x):
    a = x.exp()
    if x.sum() > 0:
        b = x.exp() * 2
    else:
        b = x
    return a + b


def test_cse_does_not_merge_across_a_region_boundary():
    sf = tj.script(same_expression_inside_and_outside, backend="interpret")
    sf(tj.ones(3))
    node = next(n for n in sf.graph.nodes if n.op == IF)
    # the branch computes its own exp: a region reads only its block arguments
    assert "exp" in all_ops(node.regions[0])
    for v in (1.0, -1.0):
        x = tj.ones(3) * v
        assert tj.allclose(sf(x), same_expression_inside_and_outside(x))


def test_the_verifier_checks_region_types():
    sf = tj.script(same_expression_inside_and_outside, backend="interpret")
    sf(tj.ones(3))
    graph = sf.traces[0].recorded
    node = next(n for n in graph.nodes if n.op == IF)
    then = node.regions[0]
    then.outputs = list(then.inputs[:1]) * 2  # yields two values where the if defines one
    with pytest.raises(VerificationError, match="then region"):
        verify(graph)


def test_explain_covers_script_graphs():
    sf = tj.script(nested)
    sf(tj.randn(3, 4), tj.randn(4, 4), 2)
    report = sf.explain()
    assert "trace 1: script (" in report and "hoist_invariants (" in report
    assert "sizes from data" in report and "u0 = size(n)" in report


@pytest.mark.compile
def test_backward_graphs_of_a_script_graph_are_its_segments(monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    sf = tj.script(rnn_steps)
    w, u, h = tj.randn(4, 3, requires_grad=True), tj.randn(4, 4), tj.zeros(4)
    sf(tj.randn(3, 3), h, w, u)
    sf(tj.randn(5, 3), h, w, u).sum().backward()
    shown = sf.backward_graph  # every part's backward, each under a header
    assert list(shown) == sf.backward_graphs and len(shown) >= 1
    text = str(shown)
    assert text.count("# backward of ") == len(sf.backward_graphs)
    assert all(f"# graph {g.name}" in text for g in sf.backward_graphs)
    assert "gradients for: " in text and "test_script_ir.py:" in text
    assert any(n.op == "matmul" for g in sf.backward_graphs for n in g.nodes)
    assert sf.stats["backward_kernels"] > 0 and sf.stats["backward_replays"] == 0


def unused_stack(x):
    hs = []
    h = x[0] * 0
    for t in range(x.shape[0]):
        h = h + x[t]
        hs.append(h)
    tj.stack(hs)  # computed, never read: the stack and its length are dead code
    return h


def test_a_size_binding_nothing_reads_is_dead_code():
    sf = tj.script(unused_stack)
    for n in (3, 5):
        x = tj.randn(n, 2)
        assert tj.allclose(sf(x), unused_stack(x))
    assert "list_stack" not in all_ops(sf.graph)
    # and the loop no longer carries the list nothing reads, nor appends to it
    loop = next(n for n in sf.graph.nodes if n.op == LOOP)
    assert loop.attrs["n_carried"] == 1 and "list_append" not in all_ops(loop.regions[-1])
    assert any("carried value(s)" in note for note in sf.graph.notes)


def carried_list_read_later(x):
    hs = []
    h = x[0] * 0
    for t in range(x.shape[0]):
        h = h + x[t]
        hs.append(h * 2)
    return h, len(hs)


def test_a_carried_list_something_reads_stays():
    sf = tj.script(carried_list_read_later)
    for n in (3, 5):
        x = tj.randn(n, 2)
        got, want = sf(x), carried_list_read_later(x)
        assert tj.allclose(got[0], want[0]) and got[1] == want[1]
    loop = next(n for n in sf.graph.nodes if n.op == LOOP)
    assert loop.attrs["n_carried"] == 2 and "list_append" in all_ops(loop.regions[-1])
