"""Backends that run IR graphs: `interpret` (numpy through the op table), `numba` (the
CPU: host programs, fused kernels, loop nests), `cuda`; backends/registry.py names them.

`eager_impl(op)` is what eager execution runs for an op with a loop nest
(ops/registry.Loops): the numba backend's compiled nest where numba is the default
backend (TRACEJIT_BACKEND) and TRACEJIT_EAGER_KERNELS is not 0, else the op's impl. The
nest compiles in the background at its first call (impl runs until it is ready), as in
a compiled program.
"""
from __future__ import annotations

import os

from ..core.lazy import lazy
from .registry import AUTO, resolve

numba_loops = lazy("tracejit.backends.numba_loops")  # (it imports Numba)

_LOOP_KERNEL: list = []  # [loop_kernel or None], decided at the first call


def eager_impl(op):
    if not _LOOP_KERNEL:
        on = os.environ.get("TRACEJIT_EAGER_KERNELS", "1") != "0" and \
            resolve(AUTO) == "numba"
        _LOOP_KERNEL.append(numba_loops.loop_kernel if on else None)
    make = _LOOP_KERNEL[0]
    return make(op) if make is not None else op.impl
