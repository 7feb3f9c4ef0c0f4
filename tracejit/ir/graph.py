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

from ..core import dtypes as dt
from ..core.symbolic import SymInt, map_leaves, plain_symbol, symbols_in


@dataclass(eq=False)
class Value:
    """An SSA value: a tensor of `dtype` and `shape` (ints and SymInts)."""

    dtype: dt.dtype
    shape: tuple
    producer: "Node | None" = None
    name: str = ""          # a hint for printing (input names); numbering is at print time

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def requires_grad(self) -> bool:  # shape rules may ask
        return False

    _rg = False


@dataclass(eq=False)
class Node:
    """`outputs = op(inputs, **attrs)`; inputs are Values or Python scalars/SymInts."""

    op: str
    inputs: list
    attrs: dict
    outputs: list
    source: str = ""
    regions: list = field(default_factory=list)  # sub-graphs (control flow, fused kernels)
    grad_mode: bool = True  # whether autograd recorded this op when it was traced

    @property
    def output(self) -> Value:
        return self.outputs[0]


GUARD = "guard"  # attrs: kind ('bool'|'item'|'int'|'float'|'array'), expected
FUSED = "fused"  # attrs: kind ('elementwise'|'row'); regions[0] is the fused sub-graph

# Structured control flow (script mode). Regions are closed sub-graphs: their inputs are
# block arguments (the node's operands), their outputs what they yield, and their
# `size_outputs` sizes they yield (bound to the node's `sizes` symbols afterwards).
IF = "if"        # inputs: pred (bool[]), *operands; regions: then, else; attrs: sizes
LOOP = "loop"    # inputs: *carried, *invariants; regions: [cond], body; attrs: see LOOP_ATTRS
BIND = "bind_size"  # inputs: an integer[] tensor; attrs: symbol: binds a size from data
SIZE = "size"    # no inputs; attrs: expr (a size expression or comparison) -> a 0-d tensor
RAISE = "raise"  # attrs: exc (an exception instance): raises it when reached
CONTROL = frozenset({IF, LOOP})
# lists of tensors whose length is decided when the program runs (built in a loop)
LIST = "list"            # inputs: the first elements -> a list value
LIST_APPEND = "list_append"  # inputs: list, tensor -> the list with it appended
LIST_GET = "list_get"    # inputs: list; attrs: index (a size) -> the element
LIST_LEN = "list_len"    # inputs: list; attrs: symbol: binds the length
LIST_STACK = "list_stack"  # inputs: list; attrs: how ('stack'|'cat'), dim, symbol
LIST_OPS = frozenset({LIST, LIST_APPEND, LIST_GET, LIST_LEN, LIST_STACK})
SCRIPT_OPS = CONTROL | LIST_OPS | {BIND, SIZE, RAISE}


class ListType:
    """The type of a list value: every element has one tensor type, `elem` (a dtype and
    shape), known from the first element (None until then)."""

    __slots__ = ("elem",)
    name = short = "list"

    def __init__(self, elem=None):
        self.elem = elem
# a loop's attributes: index (symbol bound to the iteration's number, or None), start,
# stop, step (sizes, for a range loop; stop None: a while loop), n_carried (how many
# inputs are carried values), carried_sizes (symbols carried, bound from sizes_init and
# then from the body's size outputs), has_cond (regions[0] decides each iteration)


def symbols_in_values(x) -> set:
    """The size symbols mentioned anywhere in `x` (nested tuples, lists, dicts, SymInts)."""
    found: set = set()
    map_leaves(x, SymInt, lambda s: found.update(symbols_in(s.source())))
    return found


def symbols_bound(node: Node) -> set:
    """The size symbols `node` binds for the nodes after it: a size read from data or a
    list's length, the sizes a branch or loop yields. (A loop's index is bound inside its
    body only.)"""
    a = node.attrs
    out = {a["symbol"]} if isinstance(a.get("symbol"), str) else set()
    out.update(a.get("sizes") or ())
    out.update(a.get("carried_sizes") or ())
    out.update(b[-1] for b in a.get("binds") or ())  # (dim, sym) or (out, dim, sym)
    return out


def symbols_read(node: Node) -> set:
    """The size symbols `node` reads: in its operands, attributes and result types (a
    binding node's result types are what it binds, not reads). Not those of its regions."""
    found = symbols_in_values((tuple(node.inputs), tuple(node.attrs.values())))
    if not symbols_bound(node):
        found |= symbols_in_values(tuple(tuple(v.shape) for v in node.outputs))
    return found


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
        from .printer import format_graph

        return format_graph(self)

    def format(self, sources: bool = False) -> str:
        from .printer import format_graph

        return format_graph(self, sources=sources)

    def to_dot(self) -> str:
        from .printer import to_dot

        return to_dot(self)

    def verify(self) -> None:
        from .verifier import verify

        verify(self)
