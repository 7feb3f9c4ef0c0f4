"""Tensor creation: `tj.tensor`, `zeros`, `randn`, `arange`, `from_numpy`, ...

Creation goes through the op table's creation/random entries so that tracing
records it (a traced `randn` draws new numbers on every call).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core import dtypes as dt
from ..backends.cuda.device import is_available
from ..ops import OPS
from ..ops.creation import GENERATOR
from .dispatch import apply
from ..core.symbolic import SymInt
from .functional import _shape_arg, contiguous, expand
from .tensor import Tensor, _make
from ..backends.cuda import memory
from . import functional as F


def check_device(device) -> None:
    """'cpu', or 'cuda' when tj.cuda.is_available(); a clear error otherwise."""
    if device is None:
        return
    name = str(device).split(":")[0]
    if name == "cpu":
        return
    if name == "cuda":
        if not is_available():
            raise RuntimeError("CUDA tensors are not available: Numba finds no CUDA device "
                               "(tj.cuda.is_available() is False; without a GPU, Numba's "
                               "simulator stands in with NUMBA_ENABLE_CUDASIM=1)")
        return
    raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: "
                       f"{device}")


def _place(t: Tensor, device) -> Tensor:
    """`t` (made on the host) on `device`."""
    if device is None or str(device).split(":")[0] == "cpu":
        return t
    return _make(memory.to_device(t._data))


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(data) -> dt.dtype:
    """PyTorch's inference for Python data: floats -> float32, ints -> int64."""
    flat = data
    while isinstance(flat, (list, tuple)) and flat:
        flat = flat[0]
    a = np.asarray(data)
    if a.dtype.kind == "f":
        return dt.default_float
    if a.dtype.kind in "iu":
        return dt.int64
    if a.dtype.kind == "b":
        return dt.bool_
    raise TypeError(f"can't build a tensor from data of type {type(flat).__name__}")


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor copying `data` (nested lists, numbers, numpy arrays or tensors).

    >>> tj.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    """
    check_device(device)
    if isinstance(data, Tensor):  # a copy without history (recorded when tracing)
        out = data.detach().clone()
        out = out if dtype is None else out.to(dtype)
        return _finish(out if device is None else out.to(device), requires_grad)
    elif isinstance(data, np.ndarray):
        arr = np.array(data, copy=True)
        dt.from_numpy_dtype(arr.dtype)
    elif isinstance(data, (list, tuple)) and data and any(
            isinstance(v, (Tensor, list, tuple)) for v in data) and _holds_tensors(data):
        # stacked through dispatch, so a trace records it (the values are read, not frozen)
        items = [tensor(v) if not isinstance(v, Tensor) else v.detach() for v in data]
        common = dt.result_type(*items)
        out = F.stack([t if t.dtype is common else t.to(common) for t in items])
        out = out if dtype is None else out.to(dtype)
        return _finish(out if device is None else out.to(device), requires_grad)
    else:
        arr = np.array(data, dtype=_infer_dtype(data).np if dtype is None else None)
        if arr.dtype.kind == "f" and dtype is not None and dt.as_dtype(dtype) is dt.uint64:
            arr = np.array(data, dtype=np.uint64)  # (numpy makes ints past int64's floats)
    if dtype is not None:
        arr = arr.astype(dt.as_dtype(dtype).np, copy=False)
    return _finish(_place(_make(arr), device), requires_grad)


def _holds_tensors(data) -> bool:
    return any(isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and _holds_tensors(v))
               for v in data)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor) and (dtype is None or data.dtype is dt.as_dtype(dtype)):
        return data
    if isinstance(data, np.ndarray) and dtype is None:
        return from_numpy(data)
    return tensor(data, dtype, device)


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with the numpy array `a`."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(a).__name__})")
    dt.from_numpy_dtype(a.dtype)
    return _make(a)


def _dtype(dtype, default=None) -> dt.dtype:
    return dt.as_dtype(dtype) if dtype is not None else (default or dt.default_float)


def _create(op, requires_grad, device, **attrs) -> Tensor:
    check_device(device)
    return _finish(_place(apply(op, **attrs), device), requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if dtype is None and isinstance(fill_value, Tensor):  # its kind, as PyTorch's Scalar
        kind = fill_value.dtype.np.kind
        dtype = dt.bool_ if kind == "b" else dt.int64 if kind in "iu" else dt.default_float
    if dtype is None:
        dtype = dt.as_dtype(type(fill_value)) if isinstance(fill_value, (bool, int, float)) \
            else dt.int64 if isinstance(fill_value, SymInt) else dt.default_float
    if isinstance(fill_value, Tensor) and fill_value.numel() == 1:
        # its value, broadcast: computed with the program when traced (a float a script
        # works out from an int), not read once
        check_device(device)
        value = fill_value.detach().reshape(()).to(_dtype(dtype))
        return _finish(_place(contiguous(expand(value, _shape_arg((size,)))), device),
                       requires_grad)
    return _create(OPS.full, requires_grad, device, shape=_shape_arg((size,)),
                   value=fill_value, dtype=_dtype(dtype))


def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _create(OPS.full, requires_grad, device, shape=_shape_arg(size), value=0,
                   dtype=_dtype(dtype))


def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _create(OPS.full, requires_grad, device, shape=_shape_arg(size), value=1,
                   dtype=_dtype(dtype))


def empty(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def _generator(generator) -> dict:
    """The attribute naming a generator of the user's (none for the global one)."""
    return {} if generator is None else {"generator": generator}


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    return _create(OPS.rand, requires_grad, device, shape=_shape_arg(size), dtype=_dtype(dtype),
                   **_generator(generator))


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    return _create(OPS.randn, requires_grad, device, shape=_shape_arg(size), dtype=_dtype(dtype),
                   **_generator(generator))


def randint(low, high=None, size=(), *, dtype=None, device=None) -> Tensor:
    """Integers uniform in [low, high); `randint(high, size)` is also accepted."""
    if high is None or (isinstance(high, (tuple, list)) and size == ()):
        low, high, size = 0, low, high if high is not None else size
    return _create(OPS.randint, False, device, low=int(low), high=int(high),
                   shape=_shape_arg((size,)), dtype=_dtype(dtype, dt.int64))


def randperm(n, *, dtype=None, device=None) -> Tensor:
    check_device(device)
    return _create(OPS.randperm, False, device, n=n, dtype=_dtype(dtype, dt.int64))


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = dt.default_float if any(isinstance(v, float) for v in (start, end, step)) \
            else dt.int64
    return _create(OPS.arange, requires_grad, device, start=start, end=end, step=step,
                   dtype=_dtype(dtype))


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    dtype = _dtype(dtype)
    if dtype is dt.bool_:
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    return _create(OPS.linspace, requires_grad, device, start=start, end=end, steps=int(steps),
                   dtype=dtype)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _create(OPS.eye, requires_grad, device, n=n, m=n if m is None else m,
                   dtype=_dtype(dtype))


def _like(fn):
    def like(input, *, dtype=None, device=None, requires_grad=False) -> Tensor:
        return fn(tuple(input.shape), dtype=dtype or input.dtype,
                  device=input.device.type if device is None else device,
                  requires_grad=requires_grad)
    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = (f"`{fn.__name__}` with the shape (and by default dtype and device) of "
                    f"`input`.")
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
rand_like = _like(rand)
randn_like = _like(randn)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype,
                device=input.device.type if device is None else device,
                requires_grad=requires_grad)


# ---- Tensor.new_*: the tensor's dtype and device unless given ----------------------------
def _new(self, make, size, dtype, device, requires_grad, *fill) -> Tensor:
    return make(_shape_arg(size), *fill, dtype=dtype or self.dtype,
                device=self.device.type if device is None else device,
                requires_grad=requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None,
             requires_grad=False) -> Tensor:
    """A tensor of `size` filled with `fill_value`, of this tensor's dtype and device.

    >>> tj.tensor([1, 2]).new_full((2, 2), 7)   # int64
    """
    return _new(self, full, (size,), dtype, device, requires_grad, fill_value)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _new(self, zeros, size, dtype, device, requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _new(self, ones, size, dtype, device, requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _new(self, empty, size, dtype, device, requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A copy of `data` (without history), of this tensor's dtype and device unless given."""
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than "
                      "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
    return tensor(data, dtype=dtype or self.dtype,
                  device=self.device.type if device is None else device,
                  requires_grad=requires_grad)


for _fn in (new_full, new_zeros, new_ones, new_empty, new_tensor):
    setattr(Tensor, _fn.__name__, _fn)


def manual_seed(seed: int):
    """Seed tracejit's random generator (rand, randn, randint, dropout, init)."""
    return GENERATOR.manual_seed(seed)


def initial_seed() -> int:
    return GENERATOR.seed
