"""Rebuilding a graph node by node: the common machinery of the passes.

A pass may replace a computed value by one it equals (`x * 1.0` by `x`, two equal
products by one). Where a value's identity is seen by the caller that is kept apart: a
graph's own outputs get their copies at the end (`outputs.copy_aliased_outputs`); what
a branch or loop passes on (a region's yields, a branch's or loop's operands) is kept
distinct here, as each pass rebuilds it (and what a list value holds): a computed value
that became an input, or the same value as another one, gets a `clone`. A script graph's
branch or loop hands on its input tensor object itself only where the program passes the
input on unchanged (as eager does), never a copy the program made."""
from __future__ import annotations

from ..graph import CONTROL, Graph, LIST, LIST_APPEND, ListType, Node, Value
from ..values import same_type  # noqa: F401 (the passes' import)
from ..walk import clone_graph
from ...core.symbolic import SymInt, same_dim  # noqa: F401 (same_dim: the passes' import)
import numpy as np


class Builder:
    """A new graph with the same inputs as `src`; old values map to new ones.

    `recurse`: the pass itself, applied to the regions of control-flow nodes as they are
    copied (each region is a closed graph, so a pass runs on it as on any graph). Fused
    regions are kernels: they are copied as they are (ir/walk.py)."""

    def __init__(self, src: Graph, made_by: str, recurse=None):
        self.src = src
        self.recurse = recurse
        self.graph = Graph(src.name, made_by=made_by, symbols=dict(src.symbols),
                           input_kinds=list(src.input_kinds), notes=list(src.notes),
                           region=src.region)
        self.map: dict = {}
        self.origin: dict = {}  # new value -> the source value whose node it is a copy of
        self._control: list = []  # (branch or loop made here, its source operands)
        for v in src.inputs:
            nv = Value(v.dtype, v.shape, None, v.name)
            self.graph.inputs.append(nv)
            self.map[v] = nv

    def get(self, x):
        return self.map.get(x, x) if isinstance(x, Value) else x

    def copy(self, node: Node) -> Node:
        new = self.emit(node.op, [self.get(x) for x in node.inputs], node.attrs,
                        [(v.dtype, v.shape) for v in node.outputs], node)
        for old, nv in zip(node.outputs, new.outputs):
            self.map[old] = nv
            self.origin[nv] = old
        if node.op in CONTROL or node.op in _HOLDS:
            self.passes_on(new, node.inputs)
        return new

    def emit(self, op: str, inputs: list, attrs: dict, out_types: list, like: Node) -> Node:
        new = self.graph.add_node(op, inputs, attrs, out_types, like.source)
        new.modes = like.modes
        if self.recurse is not None and like.op in CONTROL:
            new.regions = [self.recurse(r) for r in like.regions]
        else:  # (a copy shares no region with its source)
            new.regions = [clone_graph(r) for r in like.regions]
        return new

    def passes_on(self, node: Node, olds: list) -> None:
        """`node` (a branch, a loop, or a list node) was made from one whose operands were
        `olds` (its first operands, in order): `finish` keeps what it hands on apart."""
        self._control.append((node, list(olds)))

    def _distinct(self, olds: list, news: list, merged: dict) -> tuple[list, list]:
        """(`news` with clones where needed, the clone nodes): a tensor the source
        computed (a node's result) whose value here is an input of this graph, a value
        other computed values were merged into (CSE, `-(-y)` as y), or the value given
        for another of `olds`, is passed on as a copy, so that the node never hands on an
        input object, or one object for two, where the program made a new tensor. The
        source value a merged value was copied from (not merged into it) keeps it: `h`
        handed on with `g = h * 1.0` is h itself, g the copy, as in eager."""
        inputs, given, out, clones = set(self.graph.inputs), {}, [], []
        keeps = {}
        here = [o for o in olds if isinstance(o, Value)]
        for old, new in zip(olds, news):
            others = merged.get(new, set()) - {old}
            # the others merged into it are handed on here only (each gets its copy here)
            if isinstance(new, Value) and self.origin.get(new) is old and all(
                    o in here and self._handed().get(o, 0) == here.count(o) for o in others):
                keeps.setdefault(new, old)
        for old, new in zip(olds, news):
            if isinstance(old, Value) and isinstance(new, Value) and \
                    old.producer is not None and not isinstance(new.dtype, ListType) and \
                    (new in inputs or (keeps.get(new) is not old and (
                        len(merged.get(new, ())) > 1 or given.get(new, old) is not old))):
                like = old.producer
                node = self.graph.add_node("clone", [new], {}, [(new.dtype, new.shape)],
                                           like.source)
                node.modes = like.modes
                clones.append(node)
                new = node.outputs[0]
            if isinstance(new, Value):
                given.setdefault(new, old)
            out.append(new)
        return out + list(news[len(out):]), clones

    def _handed(self) -> dict:
        """source value -> how many times the source graph hands it on: as an output, or
        as an operand of a branch, a loop or a list node (where its identity is seen)."""
        if getattr(self, "_handed_counts", None) is None:
            counts: dict = {}
            for v in list(self.src.outputs) + [x for n in self.src.nodes
                                               if n.op in CONTROL or n.op in _HOLDS
                                               for x in n.inputs]:
                if isinstance(v, Value):
                    counts[v] = counts.get(v, 0) + 1
            self._handed_counts = counts
        return self._handed_counts

    def _merged(self) -> dict:
        """new value -> the computed source values it stands for."""
        merged: dict = {}
        for old, new in self.map.items():
            if isinstance(old, Value) and old.producer is not None and isinstance(new, Value):
                merged.setdefault(new, set()).add(old)
        return merged

    def finish(self) -> Graph:
        self.graph.outputs = [self.get(v) for v in self.src.outputs]
        control = self._control
        if control or self.src.region:
            merged = self._merged()
            for node, olds in control:  # operands: copies go right in front of the node
                node.inputs, clones = self._distinct(olds, node.inputs, merged)
                if clones:
                    nodes = self.graph.nodes[:-len(clones)]
                    at = next(k for k, n in enumerate(nodes) if n is node)
                    self.graph.nodes = nodes[:at] + clones + nodes[at:]
            if self.src.region:  # what a branch's or loop's region yields
                self.graph.outputs = self._distinct(self.src.outputs, self.graph.outputs,
                                                    merged)[0]
        self.graph.size_outputs = list(self.src.size_outputs)
        self.graph.mutations = [(self.get(t), self.get(v)) for t, v in self.src.mutations]
        return self.graph


_HOLDS = (LIST, LIST_APPEND)  # nodes that put tensors in a list value (read back as they are)


def value_key(x):
    """A hashable key that tells operands and attributes apart exactly: a size by its
    expression (not the number it had in the traced call), an array by its contents, a
    number by its type and value."""
    if isinstance(x, SymInt):
        return ("size", x.source())
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, tuple(value_key(v) for v in x))
    if isinstance(x, slice):
        return ("slice", value_key(x.start), value_key(x.stop), value_key(x.step))
    if isinstance(x, dict):
        return ("dict", tuple((k, value_key(v)) for k, v in sorted(x.items())))
    if isinstance(x, float):
        return ("float", repr(x))
    if isinstance(x, (bool, int, str, type(None))) or x is Ellipsis:
        return (type(x).__name__, x)
    return (type(x).__name__, repr(x))


def attrs_key(attrs: dict):
    """A canonical key of attributes (slices, SymInts and arrays included)."""
    return value_key(attrs)
