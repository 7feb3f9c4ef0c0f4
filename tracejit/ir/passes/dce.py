"""Dead-code elimination: drop nodes nothing observable depends on.

Observable: graph outputs, updates of inputs (mutations), guards (they decide
whether the trace may run at all), random ops (they advance the generator,
so a traced call draws the same numbers as the eager program) and indexing by
tensors (an index out of range raises in eager even when the result is unused);
in script graphs also `raise`, size bindings, and branches and loops holding any of
these. Regions are cleaned the same way (what they yield is live)."""
from __future__ import annotations

from ...ops import OPS
from ...ops.indexing import Slot
from ...ops.registry import RANDOM
from ..graph import BIND, CONTROL, GUARD, LIST_GET, LIST_LEN, LIST_STACK, RAISE, Graph, Value
from .rewrite import Builder


def _has_effect(node) -> bool:
    if node.op in (GUARD, RAISE, BIND, LIST_LEN):  # a bound size may be read later
        return True
    if node.op == LIST_STACK or (node.op == LIST_GET and node.attrs.get("binds")):
        return True  # it binds sizes too
    if node.op in CONTROL:
        if node.attrs.get("sizes") or node.attrs.get("carried_sizes") or \
                node.attrs.get("binds"):
            return True  # it binds sizes later nodes may read
        return any(_has_effect(n) for r in node.regions for n in r.nodes)
    op = OPS[node.op] if node.op in OPS else None
    if op is None or not (op.kind == RANDOM or op.checks_indices):
        return False
    if op.kind == RANDOM or "index" not in node.attrs:  # gather, scatter_add: an index input
        return True
    return any(isinstance(i, Slot) for i in node.attrs["index"])  # tensors in the index


def dce(graph: Graph) -> Graph:
    live_values = {v for v in graph.outputs if isinstance(v, Value)}
    live_values |= {v for _, v in graph.mutations}
    live_nodes = set()
    for node in reversed(graph.nodes):
        if _has_effect(node) or any(v in live_values for v in node.outputs):
            live_nodes.add(id(node))
            live_values.update(x for x in node.inputs if isinstance(x, Value))
    b = Builder(graph, "dce", recurse=dce)
    for node in graph.nodes:
        if id(node) in live_nodes:
            b.copy(node)
    return b.finish()
