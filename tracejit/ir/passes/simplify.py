"""Algebraic simplification: x+0, x-0, x*1, x/1, x**1, -(-x), casts and reshapes that
change nothing, transposes that cancel, a transposed product computed as the product
of transposes (so it is stored row-major), sums over dimensions of size 1 as reshapes and
products with an inner size of 1 as broadcasting multiplies. A rewrite applies only when
the result has exactly the type of the value it is replaced by (no broadcasting or
promotion lost)."""
from __future__ import annotations

from ...ops import OPS
from ..graph import Graph, Value
from .rewrite import Builder, same_dim, same_type

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


def _swaps_last_two(node) -> bool:
    r = len(node.outputs[0].shape)
    return node.op == "transpose" and r >= 2 and \
        {node.attrs["dim0"], node.attrs["dim1"]} == {r - 2, r - 1}


def _transpose(b: Builder, v: Value, producers: dict, like) -> Value:
    """v with its last two dimensions swapped: the input of a transpose that did the
    swap, else a new transpose node."""
    p = producers.get(v)
    if p is not None and _swaps_last_two(p):
        return p.inputs[0]
    r = len(v.shape)
    shape = v.shape[:-2] + (v.shape[-1], v.shape[-2])
    new = b.emit("transpose", [v], {"dim0": r - 2, "dim1": r - 1}, [(v.dtype, shape)], like)
    producers[new.outputs[0]] = new
    return new.outputs[0]


def _product_transposed(b: Builder, node, inputs, producers, users) -> Value | None:
    """transpose(matmul(a, b)) -> matmul(transpose(b), transpose(a)) when the product has
    no other use: the result comes out row-major instead of as a transposed view, which
    every later pass over it (an optimiser update, an accumulation) would read strided."""
    if not _swaps_last_two(node) or len(users.get(node.inputs[0], ())) != 1:
        return None
    mm = producers.get(inputs[0])
    if mm is None or mm.op != "matmul" or any(
            not isinstance(x, Value) or len(x.shape) < 2 for x in mm.inputs):
        return None
    x, y = mm.inputs
    out = node.outputs[0]
    new = b.emit("matmul", [_transpose(b, y, producers, node), _transpose(b, x, producers, node)],
                 {}, [(out.dtype, out.shape)], node)
    producers[new.outputs[0]] = new
    return new.outputs[0]


def _sum_to_nothing(b: Builder, node, inputs) -> Value | None:
    """sum_to that sums only dimensions of size 1 (a [1, N] gradient to a [N] bias):
    a reshape, not a reduction kernel."""
    if node.op != "sum_to" or not isinstance(inputs[0], Value):
        return None
    x, shape = inputs[0], tuple(node.attrs["shape"])
    lead = len(x.shape) - len(shape)
    if lead < 0 or any(not (type(d) is int and d == 1) for d in x.shape[:lead]) or \
            not all(same_dim(d, s) for d, s in zip(x.shape[lead:], shape)):
        return None
    out = node.outputs[0]
    return b.emit("reshape", [x], {"shape": shape}, [(out.dtype, out.shape)],
                  node).outputs[0]


def _outer_product(b: Builder, node, inputs) -> Value | None:
    """matmul of [..., M, 1] by [..., 1, N]: one product per element and nothing to sum,
    so a broadcasting multiply (the same numbers), which fuses into an elementwise kernel
    where a matrix product would be a library call."""
    if node.op != "matmul" or not all(isinstance(x, Value) and len(x.shape) >= 2
                                      for x in inputs):
        return None
    x, y = inputs
    if not (type(x.shape[-1]) is int and x.shape[-1] == 1 and type(y.shape[-2]) is int and
            y.shape[-2] == 1):
        return None
    out = node.outputs[0]
    return b.emit("mul", [x, y], {}, [(out.dtype, out.shape)], node).outputs[0]


def simplify(graph: Graph) -> Graph:
    b = Builder(graph, "simplify", recurse=simplify)
    producers: dict = {}
    users = graph.users()
    returned = set(graph.outputs)  # a returned value stays a new tensor, as in eager
    for node in graph.nodes:
        inputs = [b.get(x) for x in node.inputs]
        if node.outputs and not node.regions and node.outputs[0] not in returned:
            target = _forward(node, inputs, producers)
            if target is None:
                target = _product_transposed(b, node, inputs, producers, users)
            if target is None:
                target = _sum_to_nothing(b, node, inputs) or _outer_product(b, node, inputs)
            if target is not None:
                b.map[node.outputs[0]] = target
                continue
        new = b.copy(node)
        for v in new.outputs:
            producers[v] = new
    return b.finish()

