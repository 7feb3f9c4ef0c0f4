"""Copying nodes and graphs, regions included: the one copier every pass and sub-graph
maker uses (a pass's Builder, autodiff's sub-graphs, fusion's regions, a script segment).

A copy never shares a region with its source: regions are cloned with it, so that a
rewrite of one graph (a segment's sizes, a pass over a branch) cannot reach another.
`sizes`, where given, maps every size of the copy (operands, attributes, result shapes,
and the same inside its regions), e.g. a loop index replaced by an input's size.
"""
from __future__ import annotations

from ..core.symbolic import SymInt, map_leaves
from .graph import Graph
from .values import Node, Value


def substitution(mapping: dict):
    """A `sizes` function replacing symbols by size expressions ({'i': s9000 - 2})."""
    return lambda x: map_leaves(x, SymInt, lambda s: s.substitute(mapping))


def copy_node(graph: Graph, node: Node, get, *, op: str | None = None, inputs=None,
              attrs=None, outputs=None, regions=None, sizes=None) -> Node:
    """Append a copy of `node` to `graph` and return it: its operands through `get` (old
    value -> new), its op, attributes, source line, grad mode and regions (cloned), each
    of which the keywords may replace; `outputs` is the subset of its results it keeps."""
    sizes = sizes or _same
    inputs = [get(x) for x in node.inputs] if inputs is None else inputs
    inputs = [x if isinstance(x, Value) else sizes(x) for x in inputs]
    attrs = node.attrs if attrs is None else attrs
    if sizes is not _same:
        attrs = {k: sizes(v) for k, v in attrs.items()}
    kept = node.outputs if outputs is None else outputs
    new = graph.add_node(op or node.op, inputs, attrs,
                         [(v.dtype, sizes(tuple(v.shape))) for v in kept], node.source)
    new.modes = node.modes
    new.regions = [clone_graph(r, sizes) for r in node.regions] if regions is None \
        else list(regions)
    return new


def clone_graph(src: Graph, sizes=None, **changes) -> Graph:
    """A deep copy of `src`: new inputs, nodes, values and regions; `changes` replace the
    graph's own fields (name, made_by, ...)."""
    sizes = sizes or _same
    g = Graph(changes.pop("name", src.name), made_by=changes.pop("made_by", src.made_by),
              symbols=dict(src.symbols), input_kinds=list(src.input_kinds),
              notes=list(src.notes), region=src.region)
    for key, value in changes.items():
        setattr(g, key, value)
    mapping: dict = {}
    for v in src.inputs:
        nv = Value(v.dtype, sizes(tuple(v.shape)), None, v.name)
        g.inputs.append(nv)
        mapping[v] = nv
    get = _getter(mapping)
    for node in src.nodes:
        new = copy_node(g, node, get, sizes=sizes if sizes is not _same else None)
        mapping.update(zip(node.outputs, new.outputs))
    g.outputs = [get(v) for v in src.outputs]
    g.size_outputs = [sizes(x) for x in src.size_outputs]
    g.mutations = [(get(a), get(b)) for a, b in src.mutations]
    return g


def subgraph(src: Graph, name: str, inputs: list, nodes: list, outputs: list,
             made_by: str, sizes=None) -> Graph:
    """A graph over (copies of) `inputs` running copies of `nodes`, in order, and returning
    `outputs`' copies: a piece of `src` as a graph of its own. `sizes` maps the nodes'
    sizes; the inputs keep theirs (a run binds its sizes from what it is given)."""
    sizes = sizes or _same
    g = Graph(name, made_by=made_by, symbols=dict(src.symbols))
    mapping: dict = {}
    for v in inputs:
        nv = Value(v.dtype, v.shape, None, v.name or f"saved{len(g.inputs)}")
        g.inputs.append(nv)
        g.input_kinds.append("arg")
        mapping[v] = nv
    get = _getter(mapping)
    for node in nodes:
        new = copy_node(g, node, get, sizes=sizes if sizes is not _same else None)
        mapping.update(zip(node.outputs, new.outputs))
    g.outputs = [mapping[v] for v in outputs]
    return g


def _same(x):
    return x


def _getter(mapping: dict):
    return lambda x: mapping.get(x, x) if isinstance(x, Value) else x
