"""Outputs stay distinct tensors: a graph output that a pass turned into a graph input
(`x * 1.0` simplified to `x`) or into another output (two equal products merged by CSE)
gets a copy, so the caller never receives an alias eager execution would not return."""
from __future__ import annotations

from ...ops import OPS
from ..graph import Graph
from .rewrite import Builder


def copy_aliased_outputs(graph: Graph, visible: int | None = None) -> Graph:
    """`graph` with a `clone` for each of its first `visible` outputs (all by default)
    that is an input or repeats an earlier output; the same graph if there is none."""
    visible = len(graph.outputs) if visible is None else visible
    inputs, seen, aliased = set(graph.inputs), set(), []
    for k, v in enumerate(graph.outputs[:visible]):
        if v in inputs or v in seen:
            aliased.append(k)
        seen.add(v)
    if not aliased:
        return graph
    b = Builder(graph, "copy_aliased_outputs")
    for node in graph.nodes:
        b.copy(node)
    out = b.finish()
    template = graph.nodes[-1] if graph.nodes else None
    for k in aliased:
        v = out.outputs[k]
        node = out.add_node(OPS.clone.name, [v], {}, [(v.dtype, v.shape)],
                            template.source if template else "")
        out.outputs[k] = node.output
    return out
