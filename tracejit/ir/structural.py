"""The IR's structural ops, declared once: the ops a graph holds that are not in the op
table (ops/), with what running each does besides computing its outputs.

Each consumer keeps its rule for them in one table keyed by these names (the
interpreter's steps, the verifier's checks, the ONNX exporter's lowerings, the dump's
spelling); tests/test_structural_ops.py fails when an op here lacks one. The effects are
the passes' one purity rule (ir/effects.py): CSE, constant folding, loop-invariant code
motion and DCE read them instead of listing ops of their own.
"""
from __future__ import annotations

from dataclasses import dataclass

# what running a node does besides computing its outputs (ir/effects.py reads these)
CHECK = "check"        # guard, raise: decides whether the program may go on
RANDOM_DRAW = "random"  # advances a random generator
BINDS = "binds"        # binds size symbols (bind_size, list ops, branches and loops)
LIST_STATE = "list"    # reads or changes a list value
INDICES = "indices"    # raises for an index tensor's out-of-range value
DATA_SIZE = "data_size"  # its output's size depends on the input values
REGIONS = "regions"    # runs regions (a branch, a loop, a fused group)
STRUCTURAL = "structural"  # a size expression: not an op of the table


@dataclass(frozen=True)
class StructuralOp:
    name: str
    effects: frozenset
    arity: tuple | None  # (inputs, outputs) where fixed
    script: bool         # a graph holding it runs through the interpreter (compiled
    #                      segments inside), not as one host program
    control: bool = False  # its regions are closed sub-graphs run as branches or a loop
    lists: bool = False    # it makes, reads or extends a list value
    doc: str = ""


def _op(name, effects, arity, script, doc, **kw) -> StructuralOp:
    return StructuralOp(name, frozenset(effects), arity, script, doc=doc, **kw)


STRUCTURAL_OPS: dict[str, StructuralOp] = {op.name: op for op in (
    _op("guard", {CHECK}, (1, 0), False,
        "a tensor-to-Python read seen while tracing, checked on every run; attrs: kind "
        "('bool'|'item'|'int'|'float'|'array'), expected"),
    _op("fused", {REGIONS}, None, False,
        "a fused kernel; attrs: kind ('elementwise'|'row'); regions[0] is its sub-graph"),
    # structured control flow (script mode): regions are closed sub-graphs, their inputs
    # block arguments (the node's operands), their outputs what they yield, and their
    # `size_outputs` sizes they yield (bound to the node's `sizes` symbols afterwards)
    _op("if", {REGIONS, BINDS}, None, True,
        "inputs: pred (bool[]), *operands; regions: then, else; attrs: sizes", control=True),
    _op("loop", {REGIONS, BINDS}, None, True,
        "inputs: *carried, *invariants; regions: [cond], body; attrs: see LOOP_ATTRS",
        control=True),
    _op("bind_size", {BINDS}, (1, 0), True,
        "inputs: an integer[] tensor; attrs: symbol: binds a size from data"),
    _op("size", {STRUCTURAL}, (0, 1), True,
        "no inputs; attrs: expr (a size expression or comparison) -> a 0-d tensor"),
    _op("raise", {CHECK}, (0, 0), True,
        "attrs: exc (an exception instance): raises it when reached"),
    # lists of tensors whose length is decided when the program runs (built in a loop)
    _op("list", {LIST_STATE, BINDS}, None, True,
        "inputs: the first elements -> a list value", lists=True),
    _op("list_append", {LIST_STATE, BINDS}, (2, 1), True,
        "inputs: list, tensor -> the list with it appended", lists=True),
    _op("list_get", {LIST_STATE, BINDS}, (1, 1), True,
        "inputs: list; attrs: index (a size) -> the element", lists=True),
    _op("list_len", {LIST_STATE, BINDS}, (1, 0), True,
        "inputs: list; attrs: symbol: binds the length", lists=True),
    _op("list_stack", {LIST_STATE, BINDS}, (1, 1), True,
        "inputs: list; attrs: how ('stack'|'cat'), dim, symbol", lists=True),
)}

GUARD, FUSED, IF, LOOP, BIND, SIZE, RAISE = (
    "guard", "fused", "if", "loop", "bind_size", "size", "raise")
LIST, LIST_APPEND, LIST_GET, LIST_LEN, LIST_STACK = (
    "list", "list_append", "list_get", "list_len", "list_stack")
CONTROL = frozenset(n for n, op in STRUCTURAL_OPS.items() if op.control)
LIST_OPS = frozenset(n for n, op in STRUCTURAL_OPS.items() if op.lists)
SCRIPT_OPS = frozenset(n for n, op in STRUCTURAL_OPS.items() if op.script)
# a loop's attributes: index (symbol bound to the iteration's number, or None), start,
# stop, step (sizes, for a range loop; stop None: a while loop), n_carried (how many
# inputs are carried values), carried_sizes (symbols carried, bound from sizes_init and
# then from the body's size outputs), has_cond (regions[0] decides each iteration)
