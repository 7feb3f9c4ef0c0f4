"""Automatic mixed precision with PyTorch's API: `autocast` and `GradScaler`.

Inside `tj.autocast(device_type, dtype)` each op runs in the precision its category
asks for — an attribute of the op-table entry (`OpDef.autocast`) or of a composed
function (`@composite(..., autocast=...)`), following PyTorch's CPU and CUDA lists:

- "low": matmul, linear, addmm, conv1d/conv2d run in the region's dtype (float16 or
  bfloat16); float32 (not float64) floating inputs are cast to it;
- "fp32": losses (mse, nll, cross-entropy, BCE with logits) and prod cast
  low-precision inputs to float32;
- "fp32 cuda": exp, log, pow, rsqrt, sum, softmax, log_softmax, layer_norm, norm,
  logsumexp: float32 on CUDA tensors only (on the CPU PyTorch runs them in the input's
  dtype, and so does tracejit);
- every other op runs in its inputs' dtype, with the usual promotion.

The casts are ordinary `cast` ops recorded by eager autograd (ToCopyBackward0: the
gradient comes back in the parameter's dtype) and by traces, whose entry guards
include the autocast state, so the code generators see and fuse them. Backward runs
with autocast off, in the dtypes the forward chose, as in PyTorch.
"""
from __future__ import annotations

import functools

from ..core import dtypes as dt
from ..core.modes import STATE

_DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT = {"cpu": "bfloat16", "cuda": "float16"}


class autocast:
    """`with tj.autocast("cpu", dtype=tj.bfloat16): ...` (also a decorator)."""

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if device_type not in _DEVICE_TYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}'; tracejit supports 'cpu' and 'cuda'")
        low = dt.as_dtype(dtype if dtype is not None else _DEFAULT[device_type])
        if low not in dt.LOW_PRECISION:
            raise RuntimeError(f"In {device_type} autocast, but the target dtype is not "
                               f"supported: {low.name} (use float16 or bfloat16)")
        self.device_type, self.fast_dtype, self._enabled = device_type, low, bool(enabled)
        self._prev = []

    def __enter__(self):
        self._prev.append(STATE.modes.autocast)
        cpu, cuda = STATE.modes.autocast or (None, None)
        if self.device_type == "cpu":
            cpu = self.fast_dtype if self._enabled else None
        else:
            cuda = self.fast_dtype if self._enabled else None
        STATE.modes = STATE.modes.but(
            autocast=None if cpu is None and cuda is None else (cpu, cuda))
        return self

    def __exit__(self, *exc):
        STATE.modes = STATE.modes.but(autocast=self._prev.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    mode = STATE.modes.autocast
    return mode is not None and mode[_DEVICE_TYPES.index(device_type)] is not None


def get_autocast_dtype(device_type: str = "cuda"):
    mode = STATE.modes.autocast
    got = mode[_DEVICE_TYPES.index(device_type)] if mode is not None else None
    return got or dt.as_dtype(_DEFAULT[device_type])


from .grad_scaler import GradScaler  # noqa: E402

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype"]
