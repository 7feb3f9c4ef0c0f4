"""Dead-code elimination: drop nodes nothing observable depends on.

Observable: graph outputs, updates of inputs (mutations), guards (they decide
whether the trace may run at all), random ops (they advance the generator,
so a traced call draws the same numbers as the eager program) and indexing by
tensors (an index out of range raises in eager even when the result is unused);
in script graphs also `raise`, bindings of sizes something reads, and branches and loops
holding any of these. Regions are cleaned the same way (what they yield is live); which
sizes are read is known for the whole graph, regions included. A loop stops carrying a
value nothing after it reads and that inside it only feeds itself."""
from __future__ import annotations

import dataclasses

from ...ops.indexing import Slot
from ..effects import CHECK, INDICES, RANDOM_DRAW, effects
from ..graph import (BIND, CONTROL, LIST_GET, LIST_LEN, LIST_STACK, LOOP, Graph,
                     Value, symbols_bound, symbols_in_values)
from .rewrite import Builder
from ..walk import copy_node


_BINDERS = (BIND, LIST_LEN, LIST_STACK, LIST_GET)  # nodes that bind size symbols


def _has_effect(node, used: set) -> bool:
    found = effects(node)
    if CHECK in found:
        return True
    if node.op in _BINDERS and symbols_bound(node) & used:
        return True  # a size later nodes read
    if node.op in CONTROL:
        if node.attrs.get("sizes") or node.attrs.get("carried_sizes") or \
                node.attrs.get("binds"):
            return True  # it binds sizes later nodes may read
        return any(_has_effect(n, used) for r in node.regions for n in r.nodes)
    if RANDOM_DRAW in found:
        return True
    if INDICES not in found:
        return False
    if "index" not in node.attrs:  # gather, scatter_add: an index input
        return True
    return any(isinstance(i, Slot) for i in node.attrs["index"])  # tensors in the index


def _symbols(x, found: set) -> None:
    found |= symbols_in_values(x)


def used_symbols(graph: Graph, found: set | None = None) -> set:
    """Every size symbol a graph (and its regions) reads: in operands, attributes, types
    and yielded sizes; a binding node's own result types do not count as reads of it."""
    found = set() if found is None else found
    for v in graph.inputs + [v for v in graph.outputs if isinstance(v, Value)]:
        _symbols(tuple(v.shape), found)
    if graph.size_outputs:
        _symbols(tuple(graph.size_outputs), found)
    for n in graph.nodes:
        _symbols((tuple(n.inputs), tuple(n.attrs.values())), found)
        if n.op not in _BINDERS:
            for v in n.outputs:
                _symbols(tuple(v.shape), found)
        for r in n.regions:
            used_symbols(r, found)
    return found


def dce(graph: Graph) -> Graph:
    return _dce(graph, used_symbols(graph))


def _dce(graph: Graph, used: set) -> Graph:
    live_values = {v for v in graph.outputs if isinstance(v, Value)}
    live_values |= {v for _, v in graph.mutations}
    live_nodes = set()
    pruned = {}  # id(loop) -> its carried positions nothing reads
    for node in reversed(graph.nodes):
        if _has_effect(node, used) or any(v in live_values for v in node.outputs):
            live_nodes.add(id(node))
            dead = _dead_carried(node, live_values, used) if node.op == LOOP else ()
            if dead:
                pruned[id(node)] = dead
            live_values.update(x for i, x in enumerate(node.inputs)
                               if isinstance(x, Value) and i not in dead)
    b = Builder(graph, "dce", recurse=lambda region: _dce(region, used))
    for node in graph.nodes:
        if id(node) in pruned:
            _copy_pruned(b, node, pruned[id(node)], used)
        elif id(node) in live_nodes:
            b.copy(node)
    return b.finish()


def _live_reads(region: Graph, live_outputs: list, used: set) -> set:
    """The values of `region` that its live part reads (or yields), with `live_outputs`
    the yielded values still needed."""
    live = set(live_outputs)
    for node in reversed(region.nodes):
        if _has_effect(node, used) or any(v in live for v in node.outputs):
            live.update(x for x in node.inputs if isinstance(x, Value))
    return live


def _dead_carried(node, live_after: set, used: set) -> frozenset:
    """A loop's carried positions whose final value nothing after the loop reads and
    whose value inside the loop only feeds itself (a list of every step's state that is
    never read): the loop need not carry them."""
    k = node.attrs["n_carried"]
    body = node.regions[-1]
    cond = node.regions[0] if node.attrs.get("has_cond") else None
    dead = {j for j in range(k) if node.outputs[j] not in live_after}
    if cond is not None and dead:
        reads = _live_reads(cond, cond.outputs, used)
        dead = {j for j in dead if cond.inputs[j] not in reads}
    while True:
        reads = _live_reads(body, [v for i, v in enumerate(body.outputs) if i not in dead],
                            used)
        still = {j for j in dead if body.inputs[j] not in reads}
        if still == dead:
            break
        dead = still
    # and the invariants nothing in the loop reads (an operand of a hoisted op)
    cond_reads = _live_reads(cond, cond.outputs, used) if cond is not None else set()
    dead |= {j for j in range(k, len(node.inputs))
             if body.inputs[j] not in reads and (cond is None or cond.inputs[j] not in cond_reads)}
    return frozenset(dead)


def _copy_pruned(b: Builder, node, dead: frozenset, used: set) -> None:
    """Copy a loop without its dead carried positions (inputs, block arguments, yields
    and results)."""
    def without(region: Graph, outputs: list) -> Graph:
        kept = dataclasses.replace(region, outputs=outputs)
        clean = _dce(kept, used)
        clean.inputs = [v for i, v in enumerate(clean.inputs) if i not in dead]
        clean.input_kinds = [x for i, x in enumerate(clean.input_kinds) if i not in dead]
        return clean

    body = node.regions[-1]
    regions = [without(body, [v for i, v in enumerate(body.outputs) if i not in dead])]
    if node.attrs.get("has_cond"):
        regions.insert(0, without(node.regions[0], node.regions[0].outputs))
    k = node.attrs["n_carried"]
    attrs = dict(node.attrs, n_carried=k - sum(1 for j in dead if j < k))
    keep = [i for i in range(len(node.inputs)) if i not in dead]
    new = copy_node(b.graph, node, b.get, inputs=[b.get(node.inputs[i]) for i in keep],
                    attrs=attrs, regions=regions,
                    outputs=[v for i, v in enumerate(node.outputs) if i not in dead])
    b.map.update(zip([v for i, v in enumerate(node.outputs) if i not in dead], new.outputs))
    b.passes_on(new, [node.inputs[i] for i in keep])
    carried = sum(1 for j in dead if j < k)
    b.graph.notes.append(f"loop at {node.source}: {carried} carried value(s) and "
                         f"{len(dead) - carried} invariant(s) nothing reads dropped")
