"""The names of the package `tracejit` (`tj.tensor`, `tj.nn`, ...): __init__.py imports
them into it, at once on `import tracejit`, or on first use when `python -m tracejit`
starts."""
from __future__ import annotations

from . import _startup

_startup.pause_collector()  # see _startup.py: the collector and the imports
try:
    from . import ops  # noqa: F401  (registers the op table first)
    from .core.lazy import lazy as _lazy
    from .core import dtypes as _dtypes
    from . import cuda  # noqa: F401  (tj.cuda; Numba's CUDA target is imported on first use)
    from .core.dtypes import dtype
    from .tensor import (Size, Tensor, arange, as_tensor, device, empty, empty_like, eye,
                         from_numpy, full, full_like, initial_seed, linspace, manual_seed, ones,
                         ones_like, rand, rand_like, randint, randn, randn_like, randperm,
                         tensor, zeros, zeros_like)
    from .tensor.functional import (abs, add, addmm, all, allclose, amax, amin, any,
                                    argmax, argmin, bmm, broadcast_to, cat, chunk, clamp,
                                    clone, concat, cos, div, dot, eq, equal, erf, exp,
                                    expand, flatten, flip, floor, floor_divide, gather, ge,
                                    gt, index_select, isclose, isfinite, isnan, le, lerp,
                                    log, log1p, log_softmax, logical_and, logical_not,
                                    logical_or, logsumexp, lt, masked_fill, matmul, max,
                                    maximum, mean, min, minimum, mm, moveaxis, movedim, mul,
                                    narrow, ne, neg, nonzero, norm, outer, permute, pow, prod, relu,
                                    remainder, repeat, reshape, roll, rsqrt, sigmoid, sign,
                                    sin, softmax, split, sqrt, square, squeeze, stack, std,
                                    sub, sum, t, tanh, transpose, tril, triu, unbind,
                                    unsqueeze, var, where)
    from .tensor import functional as _functional
    globals().update({_n: getattr(_functional, _n) for _n in _functional.TABLE_FUNCTIONS})
    from .tensor import contraction as _contraction, ordering as _ordering
    globals().update({_n: getattr(_m, _n) for _m in (_contraction, _ordering)
                      for _n in _m.__all__})
    from . import linalg  # noqa: F401
    from .tensor import elementwise as _elementwise
    globals().update({_n: getattr(_elementwise, _n) for _n in _elementwise.NAMES})
    from .core.modes import (enable_grad, inference_mode, is_grad_enabled,
                                     is_inference_mode_enabled, no_grad, set_grad_enabled)
    from . import autograd, nn, optim  # noqa: E402
    from .nn import top_level as _top_level  # torch.conv2d, torch.layer_norm, ...
    globals().update(_top_level.names())
    from . import distributed, jit, onnx, utils  # noqa: E402
    from . import amp, cpu, profiler  # noqa: E402
    from .amp import autocast  # noqa: E402
    from .serialization import load, save  # noqa: E402
    from . import accelerator  # noqa: E402, F401
    from .tensor.typed import (BoolTensor, DoubleTensor, FloatTensor,  # noqa: E402, F401
                               HalfTensor, IntTensor, LongTensor)
    from .jit import trace  # noqa: E402
    from .backends import eager_impl as _eager_impl  # noqa: E402
    from .tensor import dispatch as _dispatch  # noqa: E402

    _dispatch.EAGER_LOOPS[0] = _eager_impl  # eager ops with loop nests run them compiled
finally:
    _startup.resume_collector()

bool = _dtypes.bool_
float32, float64, float16 = _dtypes.float32, _dtypes.float64, _dtypes.float16
int32, int64 = _dtypes.int32, _dtypes.int64
int8, uint8, int16, short = _dtypes.int8, _dtypes.uint8, _dtypes.int16, _dtypes.int16
uint16, uint32, uint64 = _dtypes.uint16, _dtypes.uint32, _dtypes.uint64
float, double, half, long = float32, float64, float16, int64

clip = clamp
multiply, divide, subtract, true_divide, absolute = mul, div, sub, div, abs

from .tensor import aliases as _aliases  # noqa: E402

_aliases.install(globals(), Tensor)  # x.sum(axis=0), tj.cat(ts, axis=1)

from .runtime import memory as _memory  # noqa: E402

_memory.install_at_import()  # only when asked to: see runtime/memory.py


def memory_allocated(device=None) -> int:  # noqa: F811 (PyTorch's parameter name)
    """Bytes held now by CPU tensor storage (numpy array data made since statistics were
    first asked for; see tracejit/runtime/memory.py for what is counted)."""
    return _memory.allocated()


def max_memory_allocated(device=None) -> int:  # noqa: F811
    """The peak of `memory_allocated()` since import or `reset_peak_memory_stats()`."""
    return _memory.peak()


def reset_peak_memory_stats(device=None) -> None:  # noqa: F811
    _memory.reset_peak()


_SCRIPTING = _lazy("tracejit.scripting")  # script mode: imported on first use


def __getattr__(name):
    if name == "bfloat16":  # made on first use (importing ml_dtypes is slow)
        return _dtypes.bfloat16_dtype()
    if name in ("script", "cond", "while_loop"):  # script mode: imported on first use
        value = globals()[name] = getattr(_SCRIPTING, name)
        return value
    raise AttributeError(f"module 'tracejit' has no attribute {name!r}")


def dtype_from_name(name: str) -> dtype:
    """`'f32'`, `'float32'`, `'int64'`, ... -> the dtype."""
    return _dtypes.as_dtype(name)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


from .ops.creation import _Generator as Generator  # noqa: E402
