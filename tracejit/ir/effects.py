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
from .structural import (BINDS, CHECK, DATA_SIZE, INDICES, LIST_STATE,  # noqa: F401
                         RANDOM_DRAW, REGIONS, STRUCTURAL, STRUCTURAL_OPS)

_NONE = frozenset()


def effects(node) -> frozenset:
    """A structural op's declared effects (ir/structural.py); an op of the table's from
    its definition: a random draw, an index check, a size that depends on the data."""
    op = node.op
    declared = STRUCTURAL_OPS.get(op)
    if declared is not None:
        return declared.effects
    opdef = OPS.get(op)
    if opdef is None:
        return frozenset({STRUCTURAL})
    found = set()
    if opdef.kind == RANDOM:
        found.add(RANDOM_DRAW)
    if opdef.checks_indices:
        found.add(INDICES)
    if opdef.data_dependent:
        found.add(DATA_SIZE)
    if node.regions:
        found.add(REGIONS)
    return frozenset(found) if found else _NONE


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
