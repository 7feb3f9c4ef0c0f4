"""The trace recorder: while `tj.trace` runs a function, every op is executed
eagerly on concrete values and also appended to an IR graph.

Dispatch hands each op here (`STATE.capture`). Sizes of traced tensors are
SymInts, so arithmetic on them stays symbolic and every decision on a size
becomes a shape guard. Every tensor-to-Python read (bool, item, int, float,
numpy escapes) becomes a guard node in the graph. In-place updates are
recorded functionally; updates of graph inputs become `mutations`.
"""
from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import STATE
from ..ir.graph import GUARD, Graph, Value
from ..ir.symbolic import SymInt, hint_of
from ..ops.registry import AVal
from ..tensor.dispatch import user_frame
from ..tensor.tensor import Size, Tensor

DISPLAY_NAMES = ["B", "T", "N", "M", "K", "L", "P", "Q", "R", "U", "V", "W"]



_NEGATE = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


class ShapeGuard:
    """`lhs op rhs` (size expressions) evaluated to `expected` in this trace."""

    __slots__ = ("source", "lhs", "op", "rhs", "expected", "where")

    def __init__(self, lhs: str, op: str, rhs: str, expected: bool, where: str):
        self.lhs, self.op, self.rhs, self.expected, self.where = lhs, op, rhs, expected, where
        self.source = f"({lhs}) {op} ({rhs})"

    def describe(self, names: dict) -> str:
        op = self.op if self.expected else _NEGATE[self.op]
        text = f"{self.lhs} {op} {self.rhs}"
        for sym in sorted(names, key=len, reverse=True):
            text = text.replace(sym, names[sym])
        return f"sizes: {text}"


class Recorder:
    def __init__(self, name: str):
        self.graph = Graph(name)
        self.values: dict[int, Value] = {}     # id(tensor) -> Value
        self.keep: list = []                   # keeps ids unique while tracing
        self.shape_guards: dict[str, ShapeGuard] = {}
        self.bindings: list = []               # (input index, dim, symbol)
        self.inputs: list = []                 # the tensor behind each graph input
        self.views: dict[int, int] = {}        # id(view tensor) -> id(base tensor)
        self.input_values: dict[int, Value] = {}  # id(input tensor) -> its graph input
        self.letters: dict[str, str] = {}      # symbol -> letter, for guard descriptions
        self.closed = False
        self.aborted: str | None = None
        self.grad_mode = STATE.grad_enabled  # at the call: part of the entry guards

    # ---- inputs ----------------------------------------------------------------------------
    def add_input(self, t: Tensor, name: str, kind: str, symbolic: bool) -> Value:
        index = len(self.graph.inputs)
        shape = []
        for d, size in enumerate(t._data.shape):
            if symbolic and size > 1:  # 0 and 1 stay static: they change broadcasting
                sym = f"s{len(self.bindings)}"
                self.letters[sym] = self.graph.symbols[sym] = DISPLAY_NAMES[
                    len(self.bindings)] if len(self.bindings) < len(DISPLAY_NAMES) else sym
                self.bindings.append((index, d, sym))
                shape.append(SymInt.symbol(sym, size, self))
            else:
                shape.append(size)
        v = Value(t.dtype, tuple(shape), None, name)
        self.graph.inputs.append(v)
        self.graph.input_kinds.append(kind)
        self.inputs.append(t)
        self.input_values[id(t)] = v
        self._bind(t, v)
        return v

    def _bind(self, t: Tensor, v: Value) -> None:
        self.values[id(t)] = v
        self.keep.append(t)

    def value_of(self, t: Tensor) -> Value:
        v = self.values.get(id(t))
        if v is None:  # a tensor from outside the trace: read it at every call
            v = self.add_input(t, f"c{sum(k == 'captured' for k in self.graph.input_kinds)}",
                               "captured", symbolic=False)
        return v

    def shape_of(self, t: Tensor) -> Size:
        return Size(self.value_of(t).shape)

    # ---- guards ----------------------------------------------------------------------------
    def add_shape_guard(self, lhs: str, op: str, rhs: str, expected: bool) -> None:
        if op in ("!=", ">", ">="):  # one spelling per relation, so duplicates merge
            op, expected = _NEGATE[op], not expected
        g = ShapeGuard(lhs, op, rhs, expected, "")
        if self.closed or g.source in self.shape_guards:
            return
        g.where = user_frame()
        self.shape_guards[g.source] = g
        if op == "==" and expected and lhs in self.graph.symbols and rhs.isdigit():
            self.graph.symbols[lhs] = rhs  # a size pinned to a constant prints as it

    def _guard_node(self, t: Tensor, kind: str, expected) -> None:
        self.graph.add_node(GUARD, [self.value_of(t)], {"kind": kind, "expected": expected},
                            [], user_frame())

    def read(self, t: Tensor, kind: str):
        """bool(t), t.item(), int(t), float(t): the value becomes a guard in the graph."""
        value = t._data.reshape(()).item()
        self._guard_node(t, kind, value)
        return value

    def read_size(self, t: Tensor, dim: int, kind: str) -> int:
        size = self.shape_of(t)[dim]
        return size.specialize(kind) if isinstance(size, SymInt) else size

    def escape(self, t: Tensor, how: str) -> None:
        """t.numpy(), t.tolist(), np.asarray(t): guard the whole value seen."""
        self._guard_node(t, "array", np.array(t._data, copy=True))

    def unsupported(self, what: str) -> None:
        """Called for things a trace cannot replay."""
        self.abort(f"{what} inside a traced function is not captured by tj.trace")

    def abort(self, reason: str) -> None:
        """Stop recording: the rest of this call runs purely eagerly (each side effect
        once) and the function is not traced; `reason` is reported."""
        if self.aborted is None:
            self.aborted = reason
        if STATE.capture is self:
            STATE.capture = None

    # ---- ops -------------------------------------------------------------------------------
    def apply(self, op, args, attrs):
        from ..tensor.dispatch import apply

        STATE.capture = None
        try:
            out = apply(op, *hint_of(args), **_hint_attrs(attrs))
        finally:
            STATE.capture = self
        self._record(op, args, attrs, out)
        if self.aborted:
            return out
        if op.view and out._base is not None:
            src = args[0]
            self.views[id(out)] = self.views.get(id(src), id(src))
        return out

    def _record(self, op, args, attrs, out: Tensor) -> Value:
        inputs = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        avals = [AVal(x.shape, x.dtype) if isinstance(x, Value) else x for x in inputs]
        aval = op.infer(*avals, **attrs)
        node = self.graph.add_node(op.name, inputs, attrs, [(aval.dtype, aval.shape)],
                                   user_frame())
        node.grad_mode = STATE.grad_enabled
        if hint_of(tuple(aval.shape)) != out._data.shape or aval.dtype is not out.dtype:
            self.abort(f"{op.name}: the shape rule gives {aval.dtype.short}"
                       f"{list(hint_of(tuple(aval.shape)))} but the op produced "
                       f"{out.dtype.short}{list(out._data.shape)}")
        self._bind(out, node.output)
        return node.output

    def apply_inplace(self, op, target: Tensor, others, attrs):
        from ..tensor.dispatch import apply_inplace

        tid = id(target)
        if tid in self.views or tid in self.views.values():
            self.abort(f"in-place {op.name} on a tensor that has views (or is one): tracing "
                       "records in-place updates only of whole tensors")
            return apply_inplace(op, target, *hint_of(others), **_hint_attrs(attrs))
        STATE.capture = None
        try:
            apply_inplace(op, target, *hint_of(others), **_hint_attrs(attrs))
        finally:
            STATE.capture = self
        self.value_of(target)  # a tensor from outside the trace becomes an input first
        value = self._record_functional(op, target, others, attrs)
        original = self.input_values.get(tid)
        if original is not None:  # an update of a graph input: committed after the run
            self.graph.mutations = [(t, v) for t, v in self.graph.mutations
                                    if t is not original]
            self.graph.mutations.append((original, value))
        return target

    def _record_functional(self, op, target, others, attrs) -> Value:
        """The value `target` holds after `target.op_(*others)`, recorded out of place."""
        args = (target,) + tuple(others)
        inputs = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        avals = [AVal(x.shape, x.dtype) if isinstance(x, Value) else x for x in inputs]
        aval = op.infer(*avals, **attrs)
        node = self.graph.add_node(op.name, inputs, attrs, [(aval.dtype, aval.shape)],
                                   user_frame())
        node.grad_mode = STATE.grad_enabled
        value = node.output
        if aval.dtype is not target.dtype:  # in-place results keep the target's dtype
            cast = self.graph.add_node("cast", [value], {"dtype": target.dtype},
                                       [(target.dtype, aval.shape)], node.source)
            value = cast.output
        self._bind(target, value)
        return value


def _hint_attrs(attrs: dict) -> dict:
    return {k: hint_of(v) for k, v in attrs.items()} if attrs else attrs
