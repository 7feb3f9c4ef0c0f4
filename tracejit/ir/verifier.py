"""The IR verifier: structural and type checks, run after every pass in tests."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .structural import IF, LIST, SCRIPT_OPS, STRUCTURAL_OPS, FUSED, GUARD
from .values import Value, same_type
from ..core.symbolic import SymInt

if TYPE_CHECKING:  # (the graph verifies itself through this module)
    from .graph import Graph
from ..ops import OPS
from ..ops.registry import AVal


class VerificationError(RuntimeError):
    pass


def verify(graph: Graph) -> None:
    """Raise VerificationError naming the first broken rule.

    Rules: every value is defined once, before its uses; nodes name table ops
    (or guards) with the arity the op takes; each output type is what the op's
    shape rule gives for the input types; outputs and mutations refer to
    defined values, mutations to graph inputs.
    """
    defined = set()
    for v in graph.inputs:
        if not isinstance(v, Value):
            raise VerificationError(f"graph input {v!r} is not a Value")
        if v in defined:
            raise VerificationError(f"graph input %{v.name} is listed twice")
        defined.add(v)
    for i, node in enumerate(graph.nodes):
        where = f"node {i} ({node.op})"
        for x in node.inputs:
            if isinstance(x, Value) and x not in defined:
                raise VerificationError(f"{where} uses a value before it is defined")
        if node.op == GUARD:
            if len(node.inputs) != 1 or node.outputs:
                raise VerificationError(f"{where}: a guard reads one value and defines none")
            continue
        if node.op == FUSED:
            _check_fused(node, where, defined)
            continue
        if node.op in SCRIPT_OPS:
            _check_script_node(node, where, defined)
            continue
        if node.op not in OPS:
            raise VerificationError(f"{where}: unknown op {node.op!r}")
        op = OPS[node.op]
        if op.arity >= 0 and len(node.inputs) != op.arity:
            raise VerificationError(f"{where}: {op.name} takes {op.arity} inputs, got "
                                    f"{len(node.inputs)}")
        for v in node.outputs:
            if v in defined:
                raise VerificationError(f"{where} redefines a value (SSA violated)")
            if v.producer is not node:
                raise VerificationError(f"{where}: output's producer is another node")
            defined.add(v)
        _check_types(OPS[node.op], node, where)
    for v in graph.outputs:
        if isinstance(v, Value) and v not in defined:
            raise VerificationError("graph output is not defined by the graph")
    for target, value in graph.mutations:
        if target not in graph.inputs:
            raise VerificationError("a mutation targets a value that is not a graph input")
        if value not in defined:
            raise VerificationError("a mutation writes an undefined value")


def _check_fused(node, where: str, defined: set) -> None:
    if len(node.regions) != 1:
        raise VerificationError(f"{where}: a fused node holds exactly one region")
    region = node.regions[0]
    try:
        verify(region)
    except VerificationError as err:
        raise VerificationError(f"{where}: in its region: {err}") from None
    if len(region.inputs) != len(node.inputs) or len(region.outputs) != len(node.outputs):
        raise VerificationError(f"{where}: arguments or results do not match its region")
    for outer, inner in zip(list(node.inputs) + node.outputs, region.inputs + region.outputs):
        if isinstance(outer, Value) and (outer.dtype is not inner.dtype or
                                         [_hint(d) for d in outer.shape] !=
                                         [_hint(d) for d in inner.shape]):
            raise VerificationError(f"{where}: a type differs from its region's")
    for v in node.outputs:
        if v in defined:
            raise VerificationError(f"{where} redefines a value (SSA violated)")
        defined.add(v)


def _check_script_node(node, where: str, defined: set) -> None:
    """Branches, loops and the size nodes of script graphs."""
    arity = STRUCTURAL_OPS[node.op].arity
    if node.op == LIST:
        if len(node.outputs) != 1:
            raise VerificationError(f"{where}: a list node defines one list value")
    elif arity is not None:
        if (len(node.inputs), len(node.outputs)) != arity:
            raise VerificationError(f"{where}: takes {arity[0]} inputs and defines "
                                    f"{arity[1]} values")
    elif node.op == IF:
        if len(node.regions) != 2:
            raise VerificationError(f"{where}: an if holds a then and an else region")
        pred = node.inputs[0]
        if not isinstance(pred, Value) or pred.shape != () or pred.dtype.name != "bool":
            raise VerificationError(f"{where}: the condition is not a bool[] value")
        widened = {k for k, _, _ in node.attrs.get("binds", ())}
        for name, region in zip(("then", "else"), node.regions):
            _check_region(node, name, region, node.inputs[1:], node.outputs,
                          len(node.attrs.get("sizes", ())), where, widened)
    else:
        a = node.attrs
        k = a["n_carried"]
        body = node.regions[-1]
        if len(node.regions) != 1 + bool(a.get("has_cond")) or len(node.outputs) != k:
            raise VerificationError(f"{where}: a loop holds [cond,] body and returns its "
                                    f"{k} carried values")
        _check_region(node, "body", body, node.inputs, node.inputs[:k],
                      len(a.get("carried_sizes", ())), where)
        if a.get("has_cond"):
            cond = node.regions[0]
            _check_region(node, "cond", cond, node.inputs, cond.outputs[:1], 0, where)
            out = cond.outputs[0] if len(cond.outputs) == 1 else None
            if out is None or out.shape != () or out.dtype.name != "bool":
                raise VerificationError(f"{where}: the loop condition does not yield bool[]")
        for outer, carried in zip(node.outputs, node.inputs[:k]):
            if not same_type(outer, carried):
                raise VerificationError(f"{where}: a carried value changes type")
    for v in node.outputs:
        if v in defined:
            raise VerificationError(f"{where} redefines a value (SSA violated)")
        defined.add(v)


def _check_region(node, name, region, args, results, n_sizes, where, widened=()) -> None:
    try:
        verify(region)
    except VerificationError as err:
        raise VerificationError(f"{where}: in its {name} region: {err}") from None
    if len(region.inputs) != len(args) or len(region.outputs) != len(results) or \
            len(region.size_outputs) != n_sizes:
        raise VerificationError(f"{where}: the {name} region's arguments or results do not "
                                "match the node")
    pairs = list(zip(args, region.inputs)) + [
        (outer, inner) for k, (outer, inner) in enumerate(zip(results, region.outputs))
        if k not in widened]  # a widened result's sizes are bound from what a path gives
    for outer, inner in pairs:
        if isinstance(outer, Value) and not same_type(outer, inner):
            raise VerificationError(f"{where}: a type differs from its {name} region's")


def _hint(d):
    return d.hint if isinstance(d, SymInt) else d


def _check_types(op, node, where: str) -> None:
    avals = [AVal(tuple(x.shape), x.dtype) if isinstance(x, Value) else x for x in node.inputs]
    try:
        expect = op.infer(*avals, **node.attrs)
    except Exception as err:  # noqa: BLE001
        raise VerificationError(f"{where}: shape rule rejects the input types: {err}") from None
    got = node.outputs[0]
    if op.data_dependent:  # the count is guarded where the graph reads it
        expect = AVal(tuple(got.shape[:1]) + tuple(expect.shape[1:]), expect.dtype)
    if expect.dtype is not got.dtype:
        raise VerificationError(f"{where}: output dtype {got.dtype.name}, but the op gives "
                                f"{expect.dtype.name}")
    if tuple(_hint(d) for d in expect.shape) != tuple(_hint(d) for d in got.shape):
        raise VerificationError(f"{where}: output shape {[_hint(d) for d in got.shape]}, but the "
                                f"op gives {[_hint(d) for d in expect.shape]}")
