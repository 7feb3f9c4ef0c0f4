"""Dead-code elimination: drop nodes nothing observable depends on.

Observable: graph outputs, updates of inputs (mutations), guards (they decide
whether the trace may run at all), random ops (they advance the generator,
so a traced call draws the same numbers as the eager program) and indexing by
tensors (an index out of range raises in eager even when the result is unused);
in script graphs also `raise`, bindings of sizes something reads, and branches and loops
holding any of these. Regions are cleaned the same way (what they yield is live); which
sizes are read is known for the whole graph, regions included."""
from __future__ import annotations

from ...ops import OPS
from ...ops.indexing import Slot
from ...ops.registry import RANDOM
from ..graph import BIND, CONTROL, GUARD, LIST_GET, LIST_LEN, LIST_STACK, RAISE, Graph, Value
from ..symbolic import SymInt, map_leaves, symbols_in
from .rewrite import Builder


_BINDERS = (BIND, LIST_LEN, LIST_STACK, LIST_GET)  # nodes that bind size symbols


def _bound(node) -> set:
    a = node.attrs
    out = {a["symbol"]} if isinstance(a.get("symbol"), str) else set()
    return out | {b[-1] for b in a.get("binds") or ()}


def _has_effect(node, used: set) -> bool:
    if node.op in (GUARD, RAISE):
        return True
    if node.op in _BINDERS and _bound(node) & used:
        return True  # a size later nodes read
    if node.op in CONTROL:
        if node.attrs.get("sizes") or node.attrs.get("carried_sizes") or \
                node.attrs.get("binds"):
            return True  # it binds sizes later nodes may read
        return any(_has_effect(n, used) for r in node.regions for n in r.nodes)
    op = OPS[node.op] if node.op in OPS else None
    if op is None or not (op.kind == RANDOM or op.checks_indices):
        return False
    if op.kind == RANDOM or "index" not in node.attrs:  # gather, scatter_add: an index input
        return True
    return any(isinstance(i, Slot) for i in node.attrs["index"])  # tensors in the index


def _symbols(x, found: set) -> None:
    map_leaves(x, SymInt, lambda s: found.update(symbols_in(s.source())))


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
    for node in reversed(graph.nodes):
        if _has_effect(node, used) or any(v in live_values for v in node.outputs):
            live_nodes.add(id(node))
            live_values.update(x for x in node.inputs if isinstance(x, Value))
    b = Builder(graph, "dce", recurse=lambda region: _dce(region, used))
    for node in graph.nodes:
        if id(node) in live_nodes:
            b.copy(node)
    return b.finish()
