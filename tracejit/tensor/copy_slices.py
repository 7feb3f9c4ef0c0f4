"""CopySlices: the history of a base tensor after an in-place write through a view.

`base[view] op= value` makes the base a new value: the old base outside the
view, `value` inside it. Its backward splits the gradient the same way.
"""
from __future__ import annotations

import numpy as np

from . import functional as F
from .dispatch import _edge, apply
from .node import Node
from .tensor import _make


def apply_view_chain(t, chain):
    """Re-apply the view ops recorded from a base to one of its views."""
    for op, attrs in chain:
        t = apply(op, t, **attrs)
    return t


class CopySlices(Node):
    __slots__ = ("chain", "shape", "dtype")

    def __init__(self, base, chain, value_edge):
        old = _edge(base) if base._rg else (None, 0)
        Node.__init__(self, (old, value_edge))
        self.chain = chain
        self.shape = base._data.shape
        self.dtype = base._data.dtype

    def apply(self, grads):
        g = grads[0]
        mask = np.zeros(self.shape, np.bool_)
        apply_view_chain(_make(mask), self.chain)._data[...] = True
        return (F.where(_make(mask), 0, g), apply_view_chain(g, self.chain))
