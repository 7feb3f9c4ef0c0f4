"""`tj.accelerator`: the device-agnostic queries of PyTorch's `torch.accelerator`. The one
accelerator tracejit knows is CUDA (a GPU, or Numba's simulator); without it there is
none, and the queries say so rather than raise."""
from __future__ import annotations

from . import cuda as _cuda
from .tensor import device


def is_available() -> bool:
    """Whether an accelerator can run tensors here (False on a CPU-only machine)."""
    return _cuda.is_available()


def current_accelerator(check_available: bool = False):
    """`tj.device("cuda")`, or None when there is no accelerator.

    >>> dev = tj.accelerator.current_accelerator() or tj.device("cpu")
    """
    if not is_available():
        return None
    return device("cuda")


def device_count() -> int:
    return _cuda.device_count()


def current_device_index() -> int:
    """The current accelerator's index (0), -1 without one."""
    return _cuda.current_device() if is_available() else -1


current_device_idx = current_device_index


def set_device_index(device) -> None:
    index = getattr(device, "index", device)
    if index not in (None, 0, -1):
        raise RuntimeError(f"set_device_index: tracejit uses one accelerator (index 0), got "
                           f"{index}")


set_device_idx = set_device_index


def synchronize(device=None) -> None:
    """Wait for the accelerator's work to finish (nothing to wait for without one)."""
    _cuda.synchronize()


def current_stream(device=None):
    return _cuda.current_stream(device)


def memory_allocated(device=None) -> int:
    return _cuda.memory_allocated(device)


def max_memory_allocated(device=None) -> int:
    return _cuda.max_memory_allocated(device)


def memory_reserved(device=None) -> int:
    return _cuda.memory_reserved(device)


def empty_cache() -> None:
    _cuda.empty_cache()
