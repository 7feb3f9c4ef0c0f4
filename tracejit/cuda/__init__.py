"""`tj.cuda`, with PyTorch's names: whether CUDA is there, synchronisation, memory and
the eager CUDA path's counters. Numba's CUDA target comes from the `cuda` extra
(`numba-cuda`); without a GPU its simulator (NUMBA_ENABLE_CUDASIM=1, set before Numba is
first imported) stands in, as the tests run it."""
from __future__ import annotations

import functools

from . import amp  # noqa: F401  (tj.cuda.amp.autocast, GradScaler)
from ..backends.cuda import memory as _memory
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream


@functools.lru_cache(maxsize=None)
def is_available() -> bool:
    """Whether CUDA tensors can be made (a GPU, or the simulator); decided once, as
    finding the driver runs ldconfig."""
    import ctypes.util
    import os

    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" and ctypes.util.find_library("cuda") is None:
        return False  # no driver: no need to import Numba's CUDA target to know
    try:
        from numba import cuda
    except ImportError:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 — a driver that fails to initialise: not available
        return False


def device_count() -> int:
    if not is_available():
        return 0
    from numba import cuda

    return len(cuda.gpus)


def current_device() -> int:
    return 0


def synchronize() -> None:
    if is_available():
        from numba import cuda

        cuda.synchronize()


def memory_allocated(device=None) -> int:
    """Bytes held by live CUDA tensors (and arrays made for them)."""
    return _memory.allocated()


def max_memory_allocated(device=None) -> int:
    return _memory.peak()


def reset_peak_memory_stats(device=None) -> None:
    _memory.reset_peak()


def memory_reserved(device=None) -> int:
    """Bytes reserved on the device: what live tensors hold, as nothing is cached."""
    return _memory.allocated()


def max_memory_reserved(device=None) -> int:
    return _memory.peak()


def empty_cache() -> None:
    """Nothing is cached: device arrays are freed when the last tensor using them goes."""


def stats() -> dict:
    """What the eager CUDA path did: kernel launches by op, and the ops that copied
    through the host (no device kernel for them yet), by op."""
    from .eager import STATS

    return {"kernels": dict(STATS["kernels"]), "host_round_trips": dict(STATS["host"])}
