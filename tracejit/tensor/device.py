"""Eager ops on CUDA tensors: the device step of eager dispatch (dispatch.py). The ops
themselves run on the tensors' device arrays (backends/cuda/eager.py: kernels where the
device has them, a copy through the host where it has none).

Views of CUDA tensors (reshape, slicing, transpose, ...) are copies so far. Without
in-place updates a copy cannot be told from a view, so an in-place op on a CUDA tensor
that is such a copy, or whose copy is still alive, raises instead of updating one and
not the other (an optimiser's update after backward() is fine: the transposed weights
the forward made are gone by then).
"""
from __future__ import annotations

import weakref

from ..backends.cuda import eager as device_ops
from ..backends.cuda import memory
from ..backends.cuda.eager import STATS  # noqa: F401 (tj.cuda.stats() reads it here)
from ..core.symbolic import SymInt
from .tensor import Tensor


class _Views:
    """The copies standing for views of CUDA tensors, and their bases, by identity and
    held weakly (a WeakSet would compare tensors with `==`, which is elementwise)."""

    def __init__(self):
        self._copies: dict = {}  # id(copy) -> (weakref to the copy, id of its root base)
        self._bases: dict = {}   # id(root base) -> {id(copy)}

    def add(self, copy, base) -> None:
        root = self._copies.get(id(base), (None, id(base)))[1]
        key = id(copy)

        def gone(_, key=key, root=root):
            self._copies.pop(key, None)
            self._bases.get(root, set()).discard(key)
        self._copies[key] = (weakref.ref(copy, gone), root)
        self._bases.setdefault(root, set()).add(key)

    def is_copy(self, t) -> bool:
        entry = self._copies.get(id(t))
        return entry is not None and entry[0]() is t

    def has_live_copies(self, t) -> bool:
        return any(self._copies.get(k, (lambda: None, None))[0]() is not None
                   for k in self._bases.get(id(t), ()))


VIEWS = _Views()  # views of CUDA tensors are copies so far: see the module docstring


def _tensors(args):

    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _tensors(a)


def on_device(args) -> bool:
    return any(memory.is_device_array(t._data) for t in _tensors(args))


def check_same_device(op, args) -> None:
    devices = {str(t.device) for t in _tensors(args) if not (t.device.type == "cpu" and
                                                             t._data.ndim == 0)}
    if len(devices) > 1:
        a, b = sorted(devices, reverse=True)[:2]
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                           f"least two devices, {a} and {b}! (in {op.name})")


def _array(x):
    if isinstance(x, Tensor):
        return x._data
    return x.hint if type(x) is SymInt else x


def compute(op, args, attrs):
    """The device array of `op` on arguments some of which are CUDA tensors."""
    check_same_device(op, args)
    return device_ops.compute(op, [_array(a) for a in args], attrs)


def inplace_check(target) -> None:
    """An in-place update is refused on a copy standing for a view, and on a tensor such
    a copy of which is still alive: the two would disagree after it."""
    if VIEWS.is_copy(target) or VIEWS.has_live_copies(target):
        raise NotImplementedError(
            "an in-place update of a CUDA tensor that has views, or is one, is not supported "
            "yet: views of CUDA tensors are copies so far, and one of them would not see "
            "the update (use the out-of-place op)")
