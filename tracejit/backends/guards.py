"""Guards at run time: a value guard checks the array it guards against the value the
capture saw; a miss is `GuardMiss` (the call leaves the trace). The host programs and the
interpreter both check through here."""
from __future__ import annotations

import numpy as np


class GuardMiss(Exception):
    """A value guard saw a different value: this call must leave the trace."""

    def __init__(self, node, seen):
        super().__init__(f"guard[{node.attrs['kind']}] expected {node.attrs['expected']!r}, "
                         f"saw {seen!r}")
        self.node, self.seen = node, seen


def check_guard(node, data) -> None:
    """Raise GuardMiss unless the array `data` holds the value the guard `node` saw."""
    kind, expected = node.attrs["kind"], node.attrs["expected"]
    if not isinstance(data, np.ndarray):  # a CUDA device array: its value, on the host
        data = data.copy_to_host()
    if kind == "array":
        if not (data.shape == expected.shape and np.array_equal(data, expected)):
            raise GuardMiss(node, "<array>")
        return
    seen = data.reshape(()).item()
    if kind == "bool":
        seen = bool(seen)
    if not (seen == expected and type(seen) is type(expected)):
        raise GuardMiss(node, seen)
