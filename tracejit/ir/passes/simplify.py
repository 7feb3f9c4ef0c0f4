"""Algebraic simplification: x+0, x-0, x*1, x/1, x**1, -(-x), casts and reshapes that
change nothing, transposes that cancel. A rewrite applies only when the result has
exactly the type of the value it is replaced by (no broadcasting or promotion lost)."""
from __future__ import annotations

from ...ops import OPS
from ..graph import Graph, Value
from .rewrite import Builder, same_type

def _is_scalar(c, value) -> bool:
    return value is not None and not isinstance(c, Value) and type(c) in (int, float) and \
        c == value


def _forward(node, inputs, producers):
    """The value `node` can be replaced by, or None (rules: the op table's algebraic
    facts: identities, involutions and no-ops)."""
    if node.op not in OPS:
        return None
    op, out = OPS[node.op], node.outputs[0]
    candidate = None
    if len(inputs) == 2:
        if _is_scalar(inputs[1], op.right_identity):
            candidate = inputs[0]
        elif _is_scalar(inputs[0], op.left_identity):
            candidate = inputs[1]
    elif len(inputs) == 1 and isinstance(inputs[0], Value):
        p = producers.get(inputs[0])
        if op.involution and p is not None and p.op == node.op and p.attrs == node.attrs:
            candidate = p.inputs[0]
        elif op.noop == "same_type" or (callable(op.noop) and op.noop(node.attrs)):
            candidate = inputs[0]
    if isinstance(candidate, Value) and same_type(candidate, out):
        return candidate
    return None


def simplify(graph: Graph) -> Graph:
    b = Builder(graph, "simplify")
    producers: dict = {}
    returned = set(graph.outputs)  # a returned value stays a new tensor, as in eager
    for node in graph.nodes:
        inputs = [b.get(x) for x in node.inputs]
        if node.outputs and not node.regions and node.outputs[0] not in returned:
            target = _forward(node, inputs, producers)
            if target is not None:
                b.map[node.outputs[0]] = target
                continue
        new = b.copy(node)
        for v in new.outputs:
            producers[v] = new
    return b.finish()

