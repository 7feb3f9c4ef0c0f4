"""Loop-invariant code motion: a loop body's pure ops whose operands do not change from
one iteration to the next (a weight's transpose in a recurrent step) move in front of
the loop, which passes their results in as invariants.

Not moved: ops that may raise (an index out of range must raise only if the loop
runs), random ops (each iteration draws its own numbers), and ops whose sizes depend
on the iteration (the index, carried sizes, sizes bound inside the body).
"""
from __future__ import annotations

from ..effects import movable
from ..graph import IF, LOOP, Graph, Value, symbols_bound, symbols_in_values
from .rewrite import Builder


def hoist_invariants(graph: Graph) -> Graph:
    if not graph.has_control_flow():
        return graph
    b = Builder(graph, "hoist_invariants")
    for node in graph.nodes:
        if node.op == IF:
            new = b.copy(node)
            new.regions = [hoist_invariants(r) for r in node.regions]
        elif node.op == LOOP:
            _hoist_from(b, node)
        else:
            b.copy(node)
    return b.finish()


def _bound_inside(region: Graph) -> set:
    """Symbols a region (or a region inside it) binds while it runs."""
    out: set = set()
    for n in region.walk():
        out |= symbols_bound(n)
        if isinstance(n.attrs.get("index"), str):
            out.add(n.attrs["index"])
    return out


def _hoist_from(b: Builder, node) -> None:
    regions = [hoist_invariants(r) for r in node.regions]
    body = regions[-1]
    k = node.attrs["n_carried"]
    varying = _bound_inside(body) | {node.attrs.get("index")} | set(
        node.attrs.get("carried_sizes") or ())
    invariant = set(body.inputs[k:])
    moved, moved_ids, hoisted = [], set(), set()
    for n in body.nodes:
        reads = [x for x in n.inputs if isinstance(x, Value)]
        sizes = symbols_in_values((n.inputs, tuple(n.attrs.values()), [v.shape for v in n.outputs]))
        if movable(n) and all(x in invariant or x in hoisted for x in reads) and \
                not sizes & varying:
            moved.append(n)
            moved_ids.add(id(n))
            hoisted.update(n.outputs)
    if not moved:
        new = b.copy(node)
        new.regions = regions
        return
    outer = {arg: b.get(x) for arg, x in zip(body.inputs[k:], node.inputs[k:])}
    for n in moved:  # in front of the loop, on the values the loop was given
        new = b.emit(n.op, [outer.get(x, x) if isinstance(x, Value) else x
                            for x in n.inputs], n.attrs,
                     [(v.dtype, v.shape) for v in n.outputs], n)
        outer.update(zip(n.outputs, new.outputs))
    used = {x for n in body.nodes if id(n) not in moved_ids for x in n.inputs} | set(
        body.outputs)
    needed = [v for n in moved for v in n.outputs if v in used]
    new_regions = [_with_invariants(r, needed, moved_ids if r is body else ())
                   for r in regions]
    new = b.emit(LOOP, [b.get(x) for x in node.inputs] + [outer[v] for v in needed],
                 node.attrs, [(v.dtype, v.shape) for v in node.outputs], node)
    new.regions = new_regions
    b.map.update(zip(node.outputs, new.outputs))
    b.passes_on(new, node.inputs)
    b.graph.notes.append(f"loop at {node.source}: {len(moved)} invariant op(s) "
                         f"({', '.join(sorted({n.op for n in moved}))}) moved in front of it")


def _with_invariants(region: Graph, needed: list, drop_ids) -> Graph:
    """`region` taking `needed` as extra block arguments, without the moved nodes."""
    rb = Builder(region, "hoist_invariants")
    for v in needed:
        arg = Value(v.dtype, v.shape, None, "inv")
        rb.graph.inputs.append(arg)
        rb.graph.input_kinds.append("arg")
        rb.map[v] = arg
    for n in region.nodes:
        if id(n) not in drop_ids:
            rb.copy(n)
    return rb.finish()
