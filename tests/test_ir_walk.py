"""ir/walk.py: the one copier. A copy shares no node, value or region with its source,
sizes map everywhere in it (regions included), and every pass's copy of a fused node
owns its region."""
from __future__ import annotations

import textwrap

import numpy as np

import tracejit as tj
from tracejit.core.symbolic import SymInt, plain_symbol
from tracejit.ir.parser import parse_graph
from tracejit.ir.passes import cse, dce
from tracejit.ir.printer import format_graph
from tracejit.ir.walk import clone_graph, copy_node, subgraph, substitution

FUSED_TEXT = textwrap.dedent("""
    graph(%x: f32[B, 4], %y: f32[4]) -> (f32[B, 4], f32[B, 4]):
      %0: f32[B, 4] = fused[elementwise](%x, %y) {
          %r0: f32[B, 4] = exp(%in0)
          %r1: f32[B, 4] = add(%r0, %in1)
          yield %r1 }
      %1: f32[B, 4] = mul(%0, 2)
      return %0, %1""").strip()


def _objects(g) -> set:
    out = {id(g)} | {id(v) for v in g.inputs}
    for n in g.nodes:
        out |= {id(n)} | {id(v) for v in n.outputs}
        for r in n.regions:
            out |= _objects(r)
    return out


def _body(g) -> str:
    return format_graph(g).split("\n", 1)[1]


def test_a_clone_prints_as_its_source_and_shares_nothing():
    g = parse_graph(FUSED_TEXT)
    c = clone_graph(g)
    assert format_graph(c) == format_graph(g)
    assert not _objects(c) & _objects(g)
    c.nodes[0].regions[0].nodes[0].op = "log"  # a rewrite of the copy stays in the copy
    assert "exp(%in0)" in format_graph(g)


def test_sizes_map_into_regions_too():
    g = parse_graph(FUSED_TEXT, hints={"B": 3})
    sym = plain_symbol(g.inputs[0].shape[0])
    c = clone_graph(g, substitution({sym: SymInt.symbol("s9", 5, None) + 1}))
    region = c.nodes[0].regions[0]
    assert all(str(v.shape[0]) == str(c.nodes[0].outputs[0].shape[0])
               for n in region.nodes for v in n.outputs)
    assert plain_symbol(region.nodes[0].outputs[0].shape[0]) is None  # s9 + 1 now
    assert "s9" in region.nodes[0].outputs[0].shape[0].source()


def test_a_pass_copies_a_fused_region_rather_than_sharing_it():
    g = parse_graph(FUSED_TEXT)
    for run in (dce, cse):
        after = run(g)
        assert format_graph(after).endswith(format_graph(g).split("\n", 1)[1])
        assert after.nodes[0].regions[0] is not g.nodes[0].regions[0]


def test_copy_node_keeps_what_it_is_not_told_to_change():
    g = parse_graph(FUSED_TEXT)
    dst = parse_graph("graph(%x: f32[B, 4], %y: f32[4]) -> ():\n  return")
    mapping = dict(zip(g.inputs, dst.inputs))
    node = g.nodes[0]
    node.grad_mode, node.source = False, "model.py:7"
    new = copy_node(dst, node, lambda x: mapping.get(x, x))
    assert (new.op, new.attrs, new.source, new.grad_mode) == (
        "fused", node.attrs, "model.py:7", False)
    assert new.inputs == dst.inputs and new.regions[0] is not node.regions[0]
    half = copy_node(dst, g.nodes[1], lambda x: x, op="add", outputs=[])
    assert half.op == "add" and half.outputs == []


def test_a_subgraph_runs_as_its_piece_of_the_source():
    x = tj.randn(3, 4)
    f = tj.trace(lambda a: (a.exp() * 2).sum(1), (x,))
    g = f.graph
    sub = subgraph(g, "piece", g.inputs, g.nodes, g.outputs, made_by="test")
    from tracejit.capture.interpreter import Interpreter
    out = Interpreter(sub, "interpret").run([x], {plain_symbol(g.inputs[0].shape[0]): 3},
                                            record=False)
    np.testing.assert_allclose(out[0].numpy(), f(x).numpy(), rtol=1e-6)
    assert not _objects(sub) & _objects(g)
