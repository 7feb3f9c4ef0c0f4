"""Whether a CUDA device is there (a GPU, or Numba's simulator), how many, and waiting for
it. Numba's CUDA target is imported only when the driver (or the simulator) is there."""
from __future__ import annotations

import ctypes.util
import functools
import math
import os

from ...core.lazy import lazy

numba = lazy("numba")
numba_cuda = lazy("numba.cuda")


@functools.lru_cache(maxsize=None)
def is_available() -> bool:
    """Whether CUDA tensors can be made (a GPU, or the simulator); decided once, as
    finding the driver runs ldconfig."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" and ctypes.util.find_library("cuda") is None:
        return False  # no driver: no need to import Numba's CUDA target to know
    try:
        cuda = numba_cuda.load()
    except ImportError:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 — a driver that fails to initialise: not available
        return False


def device_count() -> int:
    if not is_available():
        return 0
    return len(numba_cuda.gpus)


def current_device() -> int:
    return 0


def synchronize() -> None:
    if is_available():
        numba_cuda.synchronize()


def simulated() -> bool:
    """Whether CUDA is Numba's simulator (NUMBA_ENABLE_CUDASIM=1 before Numba's import)."""
    return bool(numba.config.ENABLE_CUDASIM)


def launch_config(n: int) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride loop over n elements."""
    threads = 32 if simulated() else 256
    blocks = max(1, min(math.ceil(n / threads), 4 if simulated() else 4096))
    return blocks, threads
