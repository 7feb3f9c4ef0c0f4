"""`tj.cuda`, with PyTorch's names: whether CUDA is there, synchronisation, memory and
the eager CUDA path's counters. Numba's CUDA target comes from the `cuda` extra
(`numba-cuda`); without a GPU its simulator (NUMBA_ENABLE_CUDASIM=1, set before Numba is
first imported) stands in, as the tests run it."""
from __future__ import annotations

from . import amp  # noqa: F401  (tj.cuda.amp.autocast, GradScaler)
from ..backends.cuda import memory as _memory
from ..backends.cuda.device import current_device, device_count, is_available, synchronize
from ..tensor.device import STATS
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream


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
    return {"kernels": dict(STATS["kernels"]), "host_round_trips": dict(STATS["host"])}
