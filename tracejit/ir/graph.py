"""The IR: SSA `Graph`s of `Node`s that name op-table entries, over typed `Value`s.

A value's type is a dtype and a shape whose entries are ints or `SymInt`
expressions (`f32[B,784]`). Nodes keep the user source line that produced
them. Besides op-table ops a graph holds `guard` nodes (a tensor-to-Python
read seen while tracing, checked on every run) and records in-place updates
of its inputs as `mutations` (input, new value), applied after all guards pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.symbolic import plain_symbol
from .printer import format_graph, to_dot as _to_dot
from .structural import (BIND, CONTROL, FUSED, GUARD, IF, LIST, LIST_APPEND,  # noqa: F401
                         LIST_GET, LIST_LEN, LIST_OPS, LIST_STACK, LOOP, RAISE, SCRIPT_OPS,
                         SIZE, STRUCTURAL_OPS)
from .values import (ListType, Node, Value, symbols_bound, symbols_in_values,  # noqa: F401
                     symbols_read)
from .verifier import verify as _verify


@dataclass(eq=False)
class Graph:
    name: str
    inputs: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    mutations: list = field(default_factory=list)   # [(input Value, new Value)]
    made_by: str = "trace"
    symbols: dict = field(default_factory=dict)     # symbol -> display name ('s0' -> 'B')
    input_kinds: list = field(default_factory=list)  # 'arg' | 'param' | 'captured' per input
    notes: list = field(default_factory=list)        # pass decisions, for explain()
    size_outputs: list = field(default_factory=list)  # sizes a region yields (see IF/LOOP)
    region: bool = False  # a branch's or loop's region (what it yields the node passes on)

    def add_node(self, op: str, inputs: list, attrs: dict, out_types: list,
                 source: str = "") -> Node:
        node = Node(op, list(inputs), dict(attrs), [], source)
        for dtype, shape in out_types:
            node.outputs.append(Value(dtype, tuple(shape), node))
        self.nodes.append(node)
        return node

    def size_bindings(self) -> list:
        """(input index, dim, symbol) for every input size that is a plain symbol: where
        a run reads the value of each symbol."""
        out = []
        for i, v in enumerate(self.inputs):
            for d, size in enumerate(v.shape):
                sym = plain_symbol(size)
                if sym is not None:
                    out.append((i, d, sym))
        return out

    def walk(self):
        """Every node, and the nodes of every branch and loop region, in order."""
        for node in self.nodes:
            yield node
            if node.op in CONTROL:
                for region in node.regions:
                    yield from region.walk()

    def is_script(self) -> bool:
        """Whether the graph has branches, loops, sizes from data or lists: it runs
        through the interpreter (compiled segments inside), not as one host program."""
        return any(n.op in SCRIPT_OPS for n in self.nodes)

    def has_control_flow(self) -> bool:
        return any(n.op in CONTROL for n in self.nodes)

    def users(self) -> dict:
        """{Value: [Node, ...]} for every value used by a node."""
        out: dict[Any, list] = {}
        for n in self.nodes:
            for v in n.inputs:
                if isinstance(v, Value):
                    out.setdefault(v, []).append(n)
        return out

    def __str__(self) -> str:
        return format_graph(self)

    def format(self, sources: bool = False) -> str:
        return format_graph(self, sources=sources)

    def to_dot(self) -> str:
        return _to_dot(self)

    def verify(self) -> None:
        _verify(self)
