"""Algebraic simplification: x+0, x-0, x*1, x/1, x**1, -(-x), casts and reshapes that
change nothing, transposes that cancel, a transposed product computed as the product
of transposes (so it is stored row-major), a transposed matrix that several products
multiply by made row-major once, sums over dimensions of size 1 as reshapes and
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
        if op.involution and p is not None and p.op == "clone" and isinstance(
                p.inputs[0], Value):  # transpose(row-major copy of transpose(x)): x
            q = producers.get(p.inputs[0])
            if q is not None and q.op == node.op and q.attrs == node.attrs:
                p = q
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


def _shared_transposed_weight(b: Builder, node, users) -> Value | None:
    """A transposed matrix that two or more products take as their right operand (a
    recurrent layer's `W.t()`, once per time step): a row-major copy made once, which
    every product then reads. BLAS multiplies by a transposed operand 2-3x slower at a
    small batch (OpenBLAS sgemm, [8, 64] @ [64, 256]: 13 us against 4 us)."""
    out = node.outputs[0]
    if not _swaps_last_two(node) or len(out.shape) != 2:
        return None
    products = [u for u in users.get(out, ()) if u is not None and u.op == "matmul" and
                u.inputs[1] is out and u.inputs[0] is not out]
    if len(products) < 2:
        return None
    view = b.copy(node).outputs[0]
    return b.emit("clone", [view], {"contiguous": True}, [(out.dtype, out.shape)],
                  node).outputs[0]


def _terms(v: Value, producers_old: dict, users) -> list[Value]:
    """The values an add chain ending at v sums, left to right (v itself when its
    producer is not an add of two values of its own shape); inner adds must have no other
    use. Iterative: a chain may be as long as a program's loop."""
    def inner_add(x) -> bool:
        p = producers_old.get(x)
        return p is not None and p.op == "add" and all(
            isinstance(y, Value) and tuple(y.shape) == tuple(v.shape) and y.dtype == v.dtype
            for y in p.inputs)

    if not inner_add(v):
        return [v]
    out, stack = [], list(reversed(producers_old[v].inputs))
    while stack:
        x = stack.pop()
        if inner_add(x) and len(users.get(x, ())) == 1:
            stack.extend(reversed(producers_old[x].inputs))
        else:
            out.append(x)
    return out


def _is_chain_root(node, users) -> bool:
    """An add whose result is not summed further by a single-use add of its shape."""
    out = node.outputs[0]
    uses = users.get(out, ())
    return not (len(uses) == 1 and uses[0] is not None and uses[0].op == "add" and
                tuple(uses[0].outputs[0].shape) == tuple(out.shape))


def _summed_products(b: Builder, node, producers_old, users, stacks: dict) -> Value | None:
    """A sum of three or more matrix products of the same shape, each used only by the
    sum (a weight's gradient summed over the time steps of a recurrent layer,
    h_t^T @ g_t): one product of the operands stacked, A^T @ G over every step's rows,
    as PyTorch's recurrent backward computes it. One large product instead of T small
    ones and T-1 additions; the sum's rounding differs from the chain's (a different
    order of the same additions)."""
    if node.op != "add" or len(node.outputs[0].shape) != 2 or \
            not _is_chain_root(node, users):
        return None
    terms = _terms(node.outputs[0], producers_old, users)
    if len(terms) < 3:
        return None
    lefts, rights = [], []
    for t in terms:
        mm = producers_old.get(t)
        if mm is None or mm.op != "matmul" or len(users.get(t, ())) != 1 or not all(
                isinstance(x, Value) and len(x.shape) == 2 for x in mm.inputs):
            return None
        lefts.append(mm.inputs[0])
        rights.append(mm.inputs[1])
    if len(set(map(id, lefts))) < len(lefts) or len(set(map(id, rights))) < len(rights):
        return None  # a shared operand would be stacked once per use
    out = node.outputs[0]

    def stack(values: list, dim: int) -> Value:
        key = (tuple(values), dim)
        if key not in stacks:
            shape = list(values[0].shape)
            shape[dim] = sum_dims([v.shape[dim] for v in values])
            stacks[key] = b.emit("cat", values, {"dim": dim}, [(out.dtype, tuple(shape))],
                                 node).outputs[0]
        return stacks[key]

    left_t = [producers_old.get(x) for x in lefts]
    if all(p is not None and _swaps_last_two(p) for p in left_t):
        # h_t^T: the rows stacked, then transposed (a view BLAS reads as such)
        left = _transpose(b, stack([b.get(p.inputs[0]) for p in left_t], 0), {}, node)
    else:
        left = stack([b.get(x) for x in lefts], 1)
    right = stack([b.get(x) for x in rights], 0)
    return b.emit("matmul", [left, right], {}, [(out.dtype, out.shape)], node).outputs[0]


def sum_dims(sizes: list):
    """The sum of sizes that may be symbols."""
    total = sizes[0]
    for d in sizes[1:]:
        total = total + d
    return total


def simplify(graph: Graph) -> Graph:
    b = Builder(graph, "simplify", recurse=simplify)
    producers: dict = {}
    users = graph.users()
    for v in graph.outputs:  # a returned value has a use beyond its nodes
        users.setdefault(v, []).append(None)
    producers_old = {v: n for n in graph.nodes for v in n.outputs}
    stacks: dict = {}  # (values, dim) -> their cat, made once (_summed_products)
    returned = set(graph.outputs)  # a returned value stays a new tensor, as in eager
    for node in graph.nodes:
        inputs = [b.get(x) for x in node.inputs]
        if node.outputs and not node.regions and node.outputs[0] not in returned:
            target = _forward(node, inputs, producers)
            if target is None:
                target = _product_transposed(b, node, inputs, producers, users)
            if target is None:
                target = _sum_to_nothing(b, node, inputs) or _outer_product(b, node, inputs)
            if target is None:
                target = _shared_transposed_weight(b, node, users)
            if target is None:
                target = _summed_products(b, node, producers_old, users, stacks)
            if target is not None:
                b.map[node.outputs[0]] = target
                continue
        new = b.copy(node)
        for v in new.outputs:
            producers[v] = new
    return b.finish()

