"""Algebraic simplification: x+0, x-0, x*1, x/1, x**1, -(-x), casts and reshapes that
change nothing, transposes that cancel. A rewrite applies only when the result has
exactly the type of the value it is replaced by (no broadcasting or promotion lost)."""
from __future__ import annotations

from ..graph import Graph, Value
from .rewrite import Builder, same_type

_IDENTITY_RIGHT = {"add": 0, "sub": 0, "mul": 1, "div": 1, "pow": 1}
_IDENTITY_LEFT = {"add": 0, "mul": 1}


def _forward(node, inputs, producers):
    """The value `node` can be replaced by, or None."""
    out = node.outputs[0]
    op = node.op
    if op in _IDENTITY_RIGHT and len(inputs) == 2:
        x, c = inputs
        if not isinstance(c, Value) and type(c) in (int, float) and c == _IDENTITY_RIGHT[op] \
                and isinstance(x, Value) and same_type(x, out):
            return x
        c, x = inputs
        if op in _IDENTITY_LEFT and not isinstance(c, Value) and type(c) in (int, float) and \
                c == _IDENTITY_LEFT[op] and isinstance(x, Value) and same_type(x, out):
            return x
    if op == "neg":
        p = producers.get(inputs[0])
        if p is not None and p.op == "neg" and same_type(p.inputs[0], out):
            return p.inputs[0]
    if op in ("cast", "reshape", "expand") and isinstance(inputs[0], Value) and \
            same_type(inputs[0], out):
        return inputs[0]
    if op == "transpose":
        p = producers.get(inputs[0])
        if p is not None and p.op == "transpose" and {p.attrs["dim0"], p.attrs["dim1"]} == {
                node.attrs["dim0"], node.attrs["dim1"]} and same_type(p.inputs[0], out):
            return p.inputs[0]
    if op == "permute" and node.attrs["dims"] == tuple(range(len(out.shape))):
        return inputs[0] if same_type(inputs[0], out) else None
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

