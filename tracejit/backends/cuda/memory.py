"""Device storage: every device array tracejit makes goes through here, so that
`tj.cuda.memory_allocated()` counts what live tensors hold (freed when the last array
using the memory goes). Nothing is cached: `empty_cache()` has nothing to release."""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ...core.lazy import lazy

numba_cuda = lazy("numba.cuda")

ACTIVE = [False]  # set when the first device array is made: eager dispatch then checks
_lock = threading.Lock()
_bytes = {"allocated": 0, "peak": 0}


def _track(arr):
    n = int(np.prod(arr.shape)) * np.dtype(arr.dtype).itemsize
    with _lock:
        _bytes["allocated"] += n
        _bytes["peak"] = max(_bytes["peak"], _bytes["allocated"])
    weakref.finalize(arr, _release, n)
    ACTIVE[0] = True
    return arr


def _release(n: int) -> None:
    with _lock:
        _bytes["allocated"] -= n


def is_device_array(a) -> bool:
    return not isinstance(a, np.ndarray) and hasattr(a, "copy_to_host")


def empty(shape, dtype):
    return _track(numba_cuda.device_array(tuple(shape), np.dtype(dtype)))


def to_device(a: np.ndarray):
    a = np.asarray(a)
    if not a.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        a = a.copy(order="C")
    return _track(numba_cuda.to_device(a))


def to_host(a) -> np.ndarray:
    return a.copy_to_host() if is_device_array(a) else a


def allocated() -> int:
    return _bytes["allocated"]


def peak() -> int:
    return _bytes["peak"]


def reset_peak() -> None:
    with _lock:
        _bytes["peak"] = _bytes["allocated"]
