"""PyTorch's legacy typed constructors (`tj.FloatTensor([1, 2])`, `tj.LongTensor(2, 3)`):
data gives a tensor of the type's dtype, sizes an uninitialised one; `isinstance(x,
tj.FloatTensor)` asks for a CPU tensor of that dtype."""
from __future__ import annotations

from ..core import dtypes as dt
from .tensor import Tensor
from .creation import empty, tensor


class _TypedTensor(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and not obj.is_cuda

    def __call__(cls, *args, device=None):
        if not args:
            return empty(0, dtype=cls.dtype, device=device)
        if all(type(a) is int for a in args) or (len(args) == 1 and isinstance(
                args[0], tuple) and all(type(a) is int for a in args[0])):
            return empty(*args, dtype=cls.dtype, device=device)
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}(): expected sizes (ints) or one sequence of "
                            f"data, got {args!r}")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(f"expected {cls.dtype.name} (got {data.dtype.name})")
            return data
        return tensor(data, dtype=cls.dtype, device=device)  # (floats to integers truncate)


def _typed(name: str, dtype) -> type:
    return _TypedTensor(name, (), {"dtype": dtype, "__doc__": f"A {dtype.name} tensor: "
                                                               f"`{name}(data)` or "
                                                               f"`{name}(*sizes)`."})


FloatTensor = _typed("FloatTensor", dt.float32)
DoubleTensor = _typed("DoubleTensor", dt.float64)
HalfTensor = _typed("HalfTensor", dt.float16)
IntTensor = _typed("IntTensor", dt.int32)
LongTensor = _typed("LongTensor", dt.int64)
BoolTensor = _typed("BoolTensor", dt.bool_)
