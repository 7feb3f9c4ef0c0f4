"""The `interpret` backend: runs an IR graph op by op through eager dispatch.

It is the oracle the compiled backends are tested against. Running through
dispatch means a traced call takes part in eager autograd exactly as the
eager program would (hooks, create_graph, double backward).
"""
from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import STATE
from ..ir.graph import GUARD, Graph, Value
from ..ir.symbolic import SymInt, has_sym
from ..ops import OPS
from ..tensor.dispatch import apply, apply_inplace


class GuardMiss(Exception):
    """A value guard saw a different value: this call must leave the trace."""

    def __init__(self, node, seen):
        super().__init__(f"guard[{node.attrs['kind']}] expected {node.attrs['expected']!r}, "
                         f"saw {seen!r}")
        self.node, self.seen = node, seen


class _Expr:
    """A size expression compiled once, evaluated per call against the size symbols."""

    __slots__ = ("code",)

    def __init__(self, sym: SymInt):
        self.code = compile(sym.source(), "<size>", "eval")


def _precompile(x):
    if isinstance(x, SymInt):
        return _Expr(x)
    if type(x) is tuple:
        return tuple(_precompile(v) for v in x)
    if type(x) is list:
        return [_precompile(v) for v in x]
    if type(x) is slice:
        return slice(_precompile(x.start), _precompile(x.stop), _precompile(x.step))
    return x


def _resolve(x, env):
    if type(x) is _Expr:
        return eval(x.code, {}, env)  # noqa: S307 — expressions we generated
    if type(x) is tuple:
        return tuple(_resolve(v, env) for v in x)
    if type(x) is list:
        return [_resolve(v, env) for v in x]
    if type(x) is slice:
        return slice(_resolve(x.start, env), _resolve(x.stop, env), _resolve(x.step, env))
    return x


def _guard_holds(kind: str, expected, t) -> tuple[bool, object]:
    data = t._data
    if kind == "array":
        return data.shape == expected.shape and bool(np.array_equal(data, expected)), "<array>"
    seen = data.reshape(()).item()
    if kind == "bool":
        seen = bool(seen)
    return seen == expected and type(seen) is type(expected), seen


class Interpreter:
    """A graph prepared for repeated runs."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps = []
        for node in graph.nodes:
            if node.op == GUARD:
                self.steps.append((None, node, None, None, None))
                continue
            symbolic = any(isinstance(x, SymInt) for x in node.inputs) or has_sym(
                tuple(node.attrs.values()))
            attrs = {k: _precompile(v) for k, v in node.attrs.items()} if symbolic else \
                node.attrs
            inputs = [_precompile(x) for x in node.inputs]
            self.steps.append((OPS[node.op], node, symbolic, attrs, inputs))

    def run(self, inputs: list, env: dict) -> list:
        """Run with `inputs` bound to the graph inputs and size symbols bound in `env`."""
        vals = dict(zip(self.graph.inputs, inputs))
        caller_mode = STATE.grad_enabled
        try:
            self._run(vals, env)
        finally:
            STATE.grad_enabled = caller_mode
        for target, value in self.graph.mutations:  # every guard passed: now commit
            dst = vals[target]
            apply_inplace(OPS.setitem, dst, vals[value], index=(Ellipsis,))
        return [vals[v] for v in self.graph.outputs]

    def _run(self, vals: dict, env: dict) -> None:
        for op, node, symbolic, attrs, inputs in self.steps:
            if op is None:
                t = vals[node.inputs[0]]
                ok, seen = _guard_holds(node.attrs["kind"], node.attrs["expected"], t)
                if not ok:
                    raise GuardMiss(node, seen)
                continue
            STATE.grad_enabled = node.grad_mode
            if symbolic:
                args = [vals[x] if isinstance(x, Value) else _resolve(x, env) for x in inputs]
                out = apply(op, *args, **{k: _resolve(v, env) for k, v in attrs.items()})
            else:
                args = [vals[x] if isinstance(x, Value) else x for x in inputs]
                out = apply(op, *args, **attrs)
            vals[node.outputs[0]] = out
