"""What running a node does besides computing its outputs: the one rule the passes share.

CSE merges two nodes only when neither has an effect that running it twice (or once)
would change; constant folding runs a node at compile time only when that is the same
as running it at every call; hoisting moves a node out of a loop only when it is free of
every effect; DCE keeps a node whose effect is observable even when nothing reads its
outputs. Each asks `effects(node)` rather than listing ops of its own.
"""
from __future__ import annotations

from ..ops import OPS
from ..ops.registry import RANDOM
from .graph import BIND, CONTROL, FUSED, GUARD, LIST_OPS, RAISE, SIZE

CHECK = "check"        # guard, raise: decides whether the program may go on
RANDOM_DRAW = "random"  # advances a random generator
BINDS = "binds"        # binds size symbols (bind_size, list ops, branches and loops)
LIST_STATE = "list"    # reads or changes a list value
INDICES = "indices"    # raises for an index tensor's out-of-range value
DATA_SIZE = "data_size"  # its output's size depends on the input values
REGIONS = "regions"    # runs regions (a branch, a loop, a fused group)
STRUCTURAL = "structural"  # not an op of the table (size expressions)


def effects(node) -> frozenset:
    op = node.op
    if op in (GUARD, RAISE):
        return frozenset({CHECK})
    if op == BIND:
        return frozenset({BINDS})
    if op in LIST_OPS:
        return frozenset({LIST_STATE, BINDS})
    if op in CONTROL:
        return frozenset({REGIONS, BINDS})
    if op == FUSED:
        return frozenset({REGIONS})
    if op == SIZE or op not in OPS:
        return frozenset({STRUCTURAL})
    opdef = OPS[op]
    found = set()
    if opdef.kind == RANDOM:
        found.add(RANDOM_DRAW)
    if opdef.checks_indices:
        found.add(INDICES)
    if opdef.data_dependent:
        found.add(DATA_SIZE)
    if node.regions:
        found.add(REGIONS)
    return frozenset(found)


# effects that make two runs of a node differ from one (CSE may not merge such nodes)
NOT_MERGEABLE = frozenset({CHECK, RANDOM_DRAW, BINDS, LIST_STATE, REGIONS})


def mergeable(node) -> bool:
    """Two such nodes of the same op, inputs and attributes compute the same thing once
    (an index check or a data-dependent size is the same check and size twice)."""
    return not effects(node) & NOT_MERGEABLE


def foldable(node) -> bool:
    """An op of the table that computes the same values at compile time as at every
    call (given known inputs)."""
    return node.op in OPS and node.op != "constant" and not effects(node) & {
        CHECK, RANDOM_DRAW, REGIONS}


def movable(node) -> bool:
    """Free of every effect: it may run once before a loop instead of at every
    iteration (an index check would raise even when the loop runs no iteration)."""
    return not effects(node)
