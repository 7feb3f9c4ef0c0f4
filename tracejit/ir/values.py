"""The IR's values and nodes: what a graph is made of, below the graph itself, its printer
and its verifier (ir/graph.py). The ops that are not in the op table are ir/structural.py's."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core import dtypes as dt
from ..core.modes import DEFAULT, Modes
from ..core.symbolic import SymInt, map_leaves, same_dim, symbols_in


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
    modes: Modes = DEFAULT  # the mode frame the op was traced under (core/modes.py)

    @property
    def grad_mode(self) -> bool:
        """Whether autograd recorded this op when it was traced."""
        return self.modes.grad_enabled

    @grad_mode.setter
    def grad_mode(self, on: bool) -> None:
        self.modes = self.modes.but(grad_enabled=bool(on))

    @property
    def output(self) -> Value:
        return self.outputs[0]


class ListType:
    """The type of a list value: every element has one tensor type, `elem` (a dtype and
    shape), known from the first element (None until then)."""

    __slots__ = ("elem",)
    name = short = "list"

    def __init__(self, elem=None):
        self.elem = elem


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


def same_type(a: Value, b: Value) -> bool:
    """Types compared as written: sizes by their expressions, a list by its elements'."""
    if isinstance(a.dtype, ListType) or isinstance(b.dtype, ListType):
        if not (isinstance(a.dtype, ListType) and isinstance(b.dtype, ListType)):
            return False
        ea, eb = a.dtype.elem, b.dtype.elem
        return ea is None or eb is None or (ea[0] is eb[0] and len(ea[1]) == len(eb[1]) and
                                            all(same_dim(x, y) for x, y in zip(ea[1], eb[1])))
    return a.dtype is b.dtype and len(a.shape) == len(b.shape) and all(
        same_dim(x, y) for x, y in zip(a.shape, b.shape))
