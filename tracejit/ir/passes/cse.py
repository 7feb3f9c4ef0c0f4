"""Common-subexpression elimination: one node per (op, inputs, attributes).

Regions of branches and loops are closed graphs: each is deduplicated on its own
(what a region computes is never merged with a value outside it)."""
from __future__ import annotations

from ..effects import mergeable
from ..graph import GUARD, Graph, Value
from .rewrite import Builder, attrs_key, value_key


def cse(graph: Graph) -> Graph:
    b = Builder(graph, "cse", recurse=cse)
    seen: dict = {}
    for node in graph.nodes:
        if mergeable(node):
            inputs = [b.get(x) for x in node.inputs]
            key = (node.op, node.modes, tuple(id(x) if isinstance(x, Value) else
                                                  value_key(x) for x in inputs),
                   attrs_key(node.attrs))
            if key in seen:
                for old, new in zip(node.outputs, seen[key].outputs):
                    b.map[old] = new
                continue
            seen[key] = b.copy(node)
        elif node.op == GUARD:  # the same check of the same value twice: once is enough
            key = ("guard", id(b.get(node.inputs[0])), attrs_key(
                {k: v for k, v in node.attrs.items() if k != "expected"}),
                   value_key(node.attrs["expected"]))
            if key not in seen:
                seen[key] = b.copy(node)
        else:
            b.copy(node)
    return b.finish()
