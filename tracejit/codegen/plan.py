"""Kernel plans: a fused region's kernel as data, without any device's syntax.

An elementwise region becomes an `ElementwisePlan`: a loop space of some rank, the inputs
each read at its own broadcast index, one scalar `Statement` per op (the op table's
scalar expression, ops/scalar.py, with its operands), and the outputs, each stored at its
own index (an output smaller than the loop space only where the loop is at its first
position along the dimensions it does not span). A renderer turns a plan into a kernel: the CPU one
into Numba loops over `prange`, the CUDA one into a grid-stride loop.

Names in a plan are the kernel's: inputs `i0, i1, ...` read into `a0, a1, ...`, size
parameters `z0, z1, ...`, statement results `r0, r1, ...`, outputs `o0, o1, ...`; a loop
dimension `d` is the index `i{d}_`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Value
from ..core.symbolic import SymInt, hint_of
from ..ops import OPS
from ..ops.registry import ELEMENTWISE, REDUCE, SHAPE, AVal
from ..ops.rules import compute_dtype
from ..ops.scalar import Call, Const, Expr, IDENTITY, Monoid, Ref, X, Y
from ..core import dtypes as dt
from ..core.lazy import lazy

fuse = lazy("tracejit.ir.passes.fuse")  # (the passes load with the first trace)


class Unsupported(Exception):
    """The region is outside what the kernel plans describe (it is interpreted instead)."""


@dataclass(frozen=True)
class Statement:
    """`target = dtype(expr)`, `expr`'s operands X, Y, ... being `args`: one op's scalar
    expression (ops/scalar.py; each renderer spells it with its own table)."""
    op: str           # the op table's name
    target: str
    dtype: str        # the result's dtype name
    expr: Expr        # the op's element expression, its attributes applied
    args: tuple       # operands: Ref (a name the kernel holds: an earlier value, an
                      # input, a size parameter) or Const (a number)

    @property
    def calls(self) -> bool:
        """Whether it calls a math function (worth keeping rather than recomputing)."""
        return self.expr.calls_math


@dataclass(frozen=True)
class Access:
    """An array a kernel reads or writes: per dimension of the array, the loop dimension
    that indexes it, or None where its size is a literal 1 (read at 0)."""
    param: str        # i0 / o0
    local: str        # a0 for inputs; the stored value's name for outputs
    dtype: str
    dims: tuple
    first_only: tuple = ()  # outputs: loop dimensions that must be 0 for the store


@dataclass(frozen=True)
class ElementwisePlan:
    rank: int
    inputs: tuple     # Access per region input
    outputs: tuple    # Access per region output
    sizes: tuple      # size parameter names (z0, ...)
    body: tuple       # Statements in order
    flat: bool        # every output spans the whole loop space: a 1-D variant exists

    @property
    def params(self) -> list:
        return [a.param for a in self.outputs] + [a.param for a in self.inputs] + list(
            self.sizes)


def size_params(region: Graph) -> list:
    """The distinct size expressions (SymInt sources) a region uses as numbers; each
    becomes a kernel parameter z0, z1, ... evaluated per call."""
    seen: dict = {}
    for node in region.nodes:
        for x in node.inputs:
            if isinstance(x, SymInt):
                seen.setdefault(x.source(), f"z{len(seen)}")
    return list(seen.items())


def value_names(region: Graph) -> dict:
    """Kernel variable names: inputs a0, a1, ...; sizes used as numbers z0, z1, ..."""
    names: dict = {v: f"a{i}" for i, v in enumerate(region.inputs)}
    names.update({("size", src): z for src, z in size_params(region)})
    return names


def literal(x, names: dict) -> Expr:
    """An operand that is not a value: a size parameter (by its name) or a number."""
    if isinstance(x, SymInt):
        name = names.get(("size", x.source()))
        if name is None:
            raise Unsupported(f"size {x.source()} is not a kernel parameter")
        return Ref(name)
    if isinstance(x, (bool, int, float)):
        return Const(x)
    raise Unsupported(f"operand {x!r}")


def _numbers_only(expr: Expr, names: dict) -> Expr:
    """An op's expression with its attributes' sizes as kernel parameters."""
    if isinstance(expr, Const) and isinstance(expr.value, SymInt):
        return literal(expr.value, names)
    if isinstance(expr, Const) and not isinstance(expr.value, (bool, int, float)):
        raise Unsupported(f"operand {expr.value!r}")
    if isinstance(expr, Call):
        return Call(expr.fn, tuple(_numbers_only(a, names) for a in expr.args))
    return expr


def statement(k: int, node, names: dict) -> list:
    """The statement `rK` of one elementwise node, after a cast of each operand whose
    dtype is not the op's compute dtype (a float32 value times a float64 0-dim tensor
    computes in float32, as eager's promotion says); records its name in `names`."""
    op = OPS[node.op] if node.op in OPS else None
    if op is None or op.expr is None or not (
            op.kind == ELEMENTWISE or (op.kind == SHAPE and op.expr == IDENTITY)):
        raise Unsupported(f"{node.op} is not an elementwise op with a scalar expression")
    expr = op.scalar(node.attrs)
    ct = compute_dtype(op, [AVal(x.shape, x.dtype) if isinstance(x, Value) else hint_of(x)
                            for x in node.inputs],
                       {key: hint_of(v) for key, v in node.attrs.items()}) \
        if op.kind == ELEMENTWISE else None
    casts, args = [], []
    for i, x in enumerate(node.inputs):
        if not isinstance(x, Value):
            args.append(literal(x, names))
        elif ct is not None and x.dtype != ct and not (op.dtype_rule == "where" and i == 0):
            casts.append(Statement("to", f"r{k}_{i}", ct.name, X, (Ref(names[x]),)))
            args.append(Ref(f"r{k}_{i}"))
        else:
            args.append(Ref(names[x]))
    out = node.outputs[0]
    names[out] = f"r{k}"
    return casts + [Statement(op.name, f"r{k}", out.dtype.name, _numbers_only(expr, names),
                              tuple(args))]


def _is_one(size) -> bool:
    return isinstance(size, int) and size == 1


def _dims(v: Value, rank: int) -> tuple:
    """Per dimension of v (right-aligned in a rank-`rank` loop space): its loop
    dimension, or None for a literal 1."""
    if len(v.shape) > rank:
        raise Unsupported("an input has more dimensions than the outputs")
    offset = rank - len(v.shape)
    return tuple(None if _is_one(size) else offset + k for k, size in enumerate(v.shape))


def _first_only(v: Value, rank: int) -> tuple:
    """The loop dimensions output v does not span (it is stored where they are 0)."""
    offset = rank - len(v.shape)
    return tuple(range(offset)) + tuple(offset + k for k, size in enumerate(v.shape)
                                        if _is_one(size))


def plan_elementwise(region: Graph) -> ElementwisePlan:
    """The plan of an elementwise region: the loop space covers the largest value; a
    smaller output (a [B,1] next to [B,T]) is written at its own broadcast index."""
    if not region.outputs:
        raise Unsupported("no outputs")
    rank = max(len(v.shape) for v in region.outputs + region.inputs)
    flat = all(len(v.shape) == rank and not any(_is_one(d) for d in v.shape)
               for v in region.outputs)
    names = value_names(region)
    body = tuple(st for k, node in enumerate(region.nodes) for st in statement(k, node, names))
    inputs = tuple(Access(f"i{j}", f"a{j}", v.dtype.name, _dims(v, rank))
                   for j, v in enumerate(region.inputs))
    outputs = tuple(Access(f"o{j}", names[v], v.dtype.name, _dims(v, rank),
                           _first_only(v, rank)) for j, v in enumerate(region.outputs))
    return ElementwisePlan(rank, inputs, outputs, tuple(z for _, z in size_params(region)),
                           body, flat)


def one_op_region(op, inputs: list, attrs: dict | None = None) -> Graph:
    """The region of one elementwise op on concrete inputs (arrays with `.dtype`/`.shape`
    or Python scalars): how eager execution on a device runs an op as a kernel of the
    same description as a fused one."""
    attrs = attrs or {}
    region = Graph(f"{op.name}_kernel", made_by="eager")
    operands, avals = [], []
    for x in inputs:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            v = Value(dt.from_numpy_dtype(x.dtype), tuple(x.shape), None,
                      f"in{len(region.inputs)}")
            region.inputs.append(v)
            operands.append(v)
            avals.append(AVal(v.shape, v.dtype))
        else:
            operands.append(x)
            avals.append(x)
    out = op.infer(*avals, **attrs)
    node = region.add_node(op.name, operands, attrs, [(out.dtype, out.shape)])
    region.outputs = [node.outputs[0]]
    return region


# ---- row kernels ---------------------------------------------------------------------
#
# A row region (reductions over the last dimension, then per-element work with their
# results: softmax, layer norm) becomes a `RowPlan`: per row, the per-row inputs are read,
# then each reduction is one pass over the row that recomputes the elementwise ops it
# needs, then one output pass writes the per-element outputs and adds into the sums over
# rows (bias gradients); per-row outputs are stored last. How a pass accumulates (vector
# lanes, a float64 accumulator, a tree over a thread block) is the renderer's choice.



@dataclass(frozen=True)
class Load:
    """`local = param[...]`: kind "element" (row r, column j), "column" (one value per
    column, a weight [N]: read as a 1-D array so the inner loop stays contiguous), "row"
    (one value per row), or "spilled" (a value an earlier pass kept in output `param`)."""
    local: str
    param: str
    kind: str


@dataclass(frozen=True)
class Store:
    """`param[r, j] = local` inside a pass (a value kept for a later pass)."""
    param: str
    local: str


@dataclass(frozen=True)
class Reciprocal:
    """`target = 1 / of`, once per row: a division by a per-row value becomes a multiply
    (as PyTorch's softmax does)."""
    target: str
    of: str
    dtype: str


@dataclass(frozen=True)
class Reduce:
    """One pass over the row: `body` (loads and statements) per column, accumulating
    `operand` by `monoid` into `target` of `dtype`; `prelude` runs once before the pass."""
    monoid: Monoid
    target: str
    dtype: str
    operand: str
    body: tuple
    prelude: tuple


@dataclass(frozen=True)
class RowPlan:
    outputs: tuple          # output params o0, ...
    inputs: tuple           # input params i0, ...
    sizes: tuple            # z0, ...
    row_loads: tuple        # Loads of the per-row inputs
    reductions: tuple       # Reduce passes in order
    prelude: tuple          # row statements and reciprocals before the output pass
    output_body: tuple      # the output pass's loads and statements (empty: no pass)
    element_stores: tuple   # (param, local) stored per element
    column_sums: tuple      # (param, local, float32): added into the sums over rows
    row_stores: tuple       # (param, local) stored per row
    exact: bool             # a value is compared with a recomputed one (amax's mask):
                            # no contraction of multiply-adds, which could change a bit
    dtypes: tuple = ()      # (param, dtype name) of every input and output

    @property
    def output_pass(self) -> bool:
        return bool(self.output_body or self.element_stores or self.column_sums)


def is_reduction(node) -> bool:
    """A reduction over the last dimension (one value per row)."""
    return node.op in OPS and OPS[node.op].kind == REDUCE and \
        OPS[node.op].monoid is not None and not fuse.column_sum(node)


def is_column_value(v) -> bool:
    """One value per column, the same for every row (a weight or bias of shape [N])."""
    return len(v.shape) >= 1 and all(isinstance(d, int) and d == 1 for d in v.shape[:-1]) \
        and not (isinstance(v.shape[-1], int) and v.shape[-1] == 1)


def is_row_value(v, reduced: set) -> bool:
    """One value per row (vs one per element of the row). A symbolic last size is per
    element (broadcast at run time when it is 1): comparing it with 1 would guard the
    program on it."""
    return v in reduced or not v.shape or (type(v.shape[-1]) is int and v.shape[-1] == 1)


def _inputs_of(nodes, values) -> set:
    used = {x for n in nodes for x in n.inputs if isinstance(x, Value)}
    return used | set(values)


def _spill_choice(reductions, per_element, cone, ready, also_needed=()):
    """(value, output index): the deepest per-element value the last reduction's pass
    computes that the output pass needs again, stored in an output of its dtype — when
    recomputing it costs more than the store and load (it calls a math function, as
    softmax's exponential does; a subtraction is cheaper to redo than to write out)."""
    if not reductions or not per_element:
        return None
    # the reductions' results are per-row values by the time the other passes run
    pending = {n.outputs[0] for n in reductions} - ready
    ready |= pending
    try:
        last_pass = {v for n in cone([reductions[-1].inputs[0]]) for v in n.outputs}
        needed = [v for n in cone([v for _, v in per_element] + list(also_needed))
                  for v in n.outputs]
        for value in reversed(needed):
            if value in last_pass and any(OPS[n.op].expr is not None and
                                          OPS[n.op].scalar(n.attrs).calls_math
                                          for n in cone([value]) if n.op in OPS):
                for j, out in per_element:
                    if out.dtype is value.dtype and tuple(map(str, out.shape)) == tuple(
                            map(str, value.shape)):
                        return value, j
        return None
    finally:
        ready -= pending


def plan_row(region: Graph) -> RowPlan:
    reduced = {n.outputs[0] for n in region.nodes if is_reduction(n)}
    summed = {n.outputs[0]: n.inputs[0] for n in region.nodes if fuse.column_sum(n)}
    row_inputs = [is_row_value(v, reduced) for v in region.inputs]
    names = value_names(region)
    index = {id(n): k for k, n in enumerate(region.nodes)}
    producer = {v: n for n in region.nodes for v in n.outputs}
    ready = {v for v, is_row in zip(region.inputs, row_inputs) if is_row}
    done: set = set()
    reciprocals: dict = {}  # row value -> name of its reciprocal, computed once per row
    pending: list = []      # reciprocals asked for by the pass being planned

    def cone(values) -> list:
        """The per-element nodes `values` need, in graph order."""
        need, stack = set(), [v for v in values if v not in ready]
        while stack:
            v = stack.pop()
            node = producer.get(v)
            if node is None or id(node) in need:
                continue
            need.add(id(node))
            stack += [x for x in node.inputs if isinstance(x, Value) and x not in ready]
        return [n for n in region.nodes if id(n) in need]

    def column_pass(values) -> list:
        body: list = [Load(f"a{i}", f"i{i}", "column" if is_column_value(v) else "element")
                      for i, v in enumerate(region.inputs)
                      if not row_inputs[i] and v in _inputs_of(cone(values), values)]
        for node in cone(values):
            divisor = node.inputs[1] if node.op == "div" and len(node.inputs) == 2 else None
            if isinstance(divisor, Value) and divisor in ready and \
                    node.outputs[0].dtype.category == 2 and isinstance(node.inputs[0], Value):
                if divisor not in reciprocals:
                    reciprocals[divisor] = f"inv_{names[divisor]}"
                    pending.append(Reciprocal(reciprocals[divisor], names[divisor],
                                              divisor.dtype.name))
                k = index[id(node)]
                names[node.outputs[0]] = f"r{k}"
                body.append(Statement("mul", f"r{k}", node.outputs[0].dtype.name, X * Y,
                                      (Ref(names[node.inputs[0]]),
                                       Ref(reciprocals[divisor]))))
                continue
            body += statement(index[id(node)], node, names)
        return body

    def ready_row_nodes() -> list:
        out = []
        for node in region.nodes:
            if id(node) in done or is_reduction(node):
                continue
            if is_row_value(node.outputs[0], reduced) and all(
                    not isinstance(x, Value) or x in ready for x in node.inputs):
                out += statement(index[id(node)], node, names)
                ready.add(node.outputs[0])
                done.add(id(node))
        return out

    per_element = [(j, v) for j, v in enumerate(region.outputs)
                   if not is_row_value(v, reduced) and v not in summed]
    reductions = [n for n in region.nodes if is_reduction(n)]
    spill = _spill_choice(reductions, per_element, cone, ready, list(summed.values()))
    passes = []
    for node in reductions:
        prelude = ready_row_nodes()
        x = node.inputs[0]
        body = column_pass([x])
        if spill is not None and node is reductions[-1]:
            # keep a value the output pass needs in the output buffer instead of recomputing
            value, j_out = spill
            body.append(Store(f"o{j_out}", names[value]))
        prelude += pending
        pending.clear()
        k = index[id(node)]
        passes.append(Reduce(OPS[node.op].monoid, f"r{k}", node.outputs[0].dtype.name,
                             names[x], tuple(body), tuple(prelude)))
        names[node.outputs[0]] = f"r{k}"
        ready.add(node.outputs[0])
        done.add(id(node))
    prelude = ready_row_nodes()
    body: list = []
    if per_element or summed:
        if spill is not None:
            value, j_out = spill
            body.append(Load(names[value], f"o{j_out}", "spilled"))
            ready.add(value)
        body += column_pass([v for _, v in per_element] + list(summed.values()))
        prelude += pending
        pending.clear()
    return RowPlan(
        outputs=tuple(f"o{j}" for j in range(len(region.outputs))),
        inputs=tuple(f"i{j}" for j in range(len(region.inputs))),
        sizes=tuple(z for _, z in size_params(region)),
        row_loads=tuple(Load(f"a{i}", f"i{i}", "row") for i, is_row in enumerate(row_inputs)
                        if is_row),
        reductions=tuple(passes), prelude=tuple(prelude), output_body=tuple(body),
        element_stores=tuple((f"o{j}", names[v]) for j, v in per_element),
        column_sums=tuple((f"o{j}", names[summed[v]], v.dtype.name == "float32")
                          for j, v in enumerate(region.outputs) if v in summed),
        row_stores=tuple((f"o{j}", names[v]) for j, v in enumerate(region.outputs)
                         if is_row_value(v, reduced) and v not in summed),
        exact=any(n.op in OPS and OPS[n.op].jumps for n in region.nodes),
        dtypes=tuple((f"i{j}", v.dtype.name) for j, v in enumerate(region.inputs)) + tuple(
            (f"o{j}", v.dtype.name) for j, v in enumerate(region.outputs)))
