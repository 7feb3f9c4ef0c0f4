"""Whether a CUDA device is there (a GPU, or Numba's simulator), how many, and waiting for
it. Numba's CUDA target is imported only when the driver (or the simulator) is there."""
from __future__ import annotations

import ctypes.util
import functools
import os


@functools.lru_cache(maxsize=None)
def is_available() -> bool:
    """Whether CUDA tensors can be made (a GPU, or the simulator); decided once, as
    finding the driver runs ldconfig."""
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
