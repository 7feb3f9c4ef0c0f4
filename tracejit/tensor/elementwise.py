"""Elementwise functions beyond the op table's own (`OpDef.api`): integers' bits, rounding
to decimals, PyTorch's elementwise math built of primitives, and the operators `&`, `|`,
`^`, `~`, `<<`, `>>`. Installed as `tracejit` functions (NAMES) and Tensor methods here.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes as dt
from ..ops import OPS
from . import functional as F
from .dispatch import apply, apply_inplace
from .functional import _operand
from .tensor import Tensor


def _dtype_of(*operands) -> dt.dtype:
    """The dtype PyTorch promotes tensors and Python numbers to."""
    return dt.result_type(*operands)


def _cpu_name(d: dt.dtype) -> str:
    """PyTorch's name of a dtype in its kernels' errors ('Float', 'Long', 'Bool')."""
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "int32": "Int", "int64": "Long", "bool": "Bool", "int16": "Short", "int8": "Char",
            "uint8": "Byte", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64"
            }.get(d.name, d.name)


def _no_kernel(name: str, d: dt.dtype, expected: str):
    return NotImplementedError(f"{name}: not implemented for {d.name} tensors "
                               f"('{_cpu_name(d)}'); expected {expected}")


def _tensor_arg(name: str, position: int, what: str, x) -> None:
    """PyTorch's TypeError for a Python number where its signature takes a tensor."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument '{what}' (position {position}) must be Tensor, "
                        f"not {type(x).__name__}")


def _some_tensor(name: str, input, other) -> None:
    """Ops with Tensor-Scalar and Scalar-Tensor forms still need one tensor."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        _tensor_arg(name, 1, "input", input)


# ---- integers' bits ------------------------------------------------------------------------
def _bitwise(op, logical):
    """`op` on integer operands; on bools its logical counterpart (PyTorch's & of bools is
    their logical and, of bool dtype)."""
    def fn(input, other):
        _some_tensor(op.name, input, other)
        input, other = _operand(input), _operand(other)
        d = _dtype_of(input, other)
        if d is dt.bool_:
            return apply(logical, input, other)
        if d.category != 1:
            raise _no_kernel(op.name, d, "integer or bool tensors")
        return apply(op, input, other)

    def inplace(self, other):
        other = _operand(other)
        d = _dtype_of(self, other)
        if d.category == 2 or self.dtype.category == 2:
            raise _no_kernel(op.name + "_", d, "integer or bool tensors")
        return apply_inplace(logical if d is dt.bool_ else op, self, other)
    fn.__name__ = fn.__qualname__ = op.name
    inplace.__name__ = inplace.__qualname__ = op.name + "_"
    return fn, inplace


bitwise_and, bitwise_and_ = _bitwise(OPS.bitwise_and, OPS.logical_and)
bitwise_or, bitwise_or_ = _bitwise(OPS.bitwise_or, OPS.logical_or)
bitwise_xor, bitwise_xor_ = _bitwise(OPS.bitwise_xor, OPS.logical_xor)


def bitwise_not(input):
    """~input: bits flipped for integers, logical not for bools."""
    if input.dtype is dt.bool_:
        return apply(OPS.logical_not, input)
    if input.dtype.category != 1:
        raise _no_kernel("bitwise_not", input.dtype, "integer or bool tensors")
    return apply(OPS.bitwise_not, input)


def bitwise_not_(self):
    if self.dtype.category != 1 and self.dtype is not dt.bool_:
        raise _no_kernel("bitwise_not_", self.dtype, "integer or bool tensors")
    return apply_inplace(OPS.logical_not if self.dtype is dt.bool_ else OPS.bitwise_not, self)


def _invert(self):
    if self.dtype.category == 2:
        raise TypeError(f"~ (operator.invert) is only implemented on integer and bool tensors, "
                        f"not {self.dtype.name}")
    return bitwise_not(self)


def _shift(op):
    def fn(input, other):
        _some_tensor(op.name, input, other)
        input, other = _operand(input), _operand(other)
        d = _dtype_of(input, other)
        if d.category != 1:
            raise _no_kernel(op.name, d, "integer tensors")
        return apply(op, input, other)

    def inplace(self, other):
        other = _operand(other)
        d = _dtype_of(self, other)
        if d.category != 1 or self.dtype.category != 1:
            raise _no_kernel(op.name + "_", d, "integer tensors")
        return apply_inplace(op, self, other)
    fn.__name__ = fn.__qualname__ = op.name
    inplace.__name__ = inplace.__qualname__ = op.name + "_"
    return fn, inplace


bitwise_left_shift, bitwise_left_shift_ = _shift(OPS.bitwise_left_shift)
bitwise_right_shift, bitwise_right_shift_ = _shift(OPS.bitwise_right_shift)


# ---- rounding, clamping ----------------------------------------------------------------
def round(input, *, decimals: int = 0):
    """To the nearest integer (ties to even), or to `decimals` decimal digits (negative:
    to tens, hundreds, ...), as PyTorch: x * 10**d rounded, divided by 10**d."""
    if decimals == 0:
        return apply(OPS.round, input)
    F.require_floating("round", input)
    if decimals > 0:
        scale = 10.0 ** decimals
        return apply(OPS.round, input * scale) / scale
    scale = 10.0 ** -decimals
    return apply(OPS.round, input / scale) * scale


def round_(self, *, decimals: int = 0):
    if decimals == 0:
        return apply_inplace(OPS.round, self)
    return F.copy_(self, round(self, decimals=decimals))


def clamp_min(input, min):
    _tensor_arg("clamp_min", 1, "input", input)
    return F.clamp(input, min=min)


def clamp_max(input, max):
    _tensor_arg("clamp_max", 1, "input", input)
    return F.clamp(input, max=max)


def clamp_min_(self, min):
    return F.clamp_(self, min=min)


def clamp_max_(self, max):
    return F.clamp_(self, max=max)


def square(input):
    """input * input; a bool tensor squares as int64 (PyTorch's pow(x, 2))."""
    if input.dtype is dt.bool_:
        input = F.cast(input, dt.int64)
    return F.mul(input, input)


def positive(input):
    """input itself (unary +); raises for bool tensors, as PyTorch."""
    if input.dtype is dt.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# ---- PyTorch's elementwise math, of primitives ---------------------------------------------
def _value_for(d: dt.dtype, value):
    """A Python scalar multiplier as PyTorch casts it to the result's dtype."""
    if d.category == 1 and isinstance(value, float):
        return int(value)
    return value


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, broadcasting all three."""
    d = _dtype_of(input, tensor1, tensor2)
    value = _value_for(d, value)
    prod = tensor1 if value == 1 else F.mul(tensor1, value)
    return F.add(input, F.mul(prod, tensor2))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2, broadcasting all three."""
    if all(not isinstance(t, Tensor) or t.dtype.category != 2 for t in (tensor1, tensor2)):
        raise RuntimeError("addcdiv: integer division is not supported (expected a floating "
                           "tensor1 or tensor2, found "
                           f"{_dtype_of(tensor1, tensor2).name}); use "
                           "addcmul(input, tensor1, 1 / tensor2) or true division")
    prod = tensor1 if value == 1 else F.mul(tensor1, value)
    return F.add(input, F.div(prod, tensor2))


addcmul_ = F.inplace_of(addcmul)


addcdiv_ = F.inplace_of(addcdiv)


_GREATEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
             "float32": float(np.finfo(np.float32).max),
             "float64": float(np.finfo(np.float64).max)}  # each dtype's greatest finite value


def nan_to_num(input, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None):
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default 0 and the
    dtype's greatest and least finite values); integers and bools are copied."""
    if input.dtype.category != 2:
        return F.clone(input)
    big = _GREATEST[input.dtype.name]
    return apply(OPS.nan_to_num, input, nan=float(nan),
                 posinf=big if posinf is None else float(posinf),
                 neginf=-big if neginf is None else float(neginf))


def nan_to_num_(self, nan: float = 0.0, posinf: float | None = None,
                neginf: float | None = None):
    if self.dtype.category != 2:
        return self
    return F.copy_(self, nan_to_num(self, nan, posinf, neginf))


def _floating(input):
    """input, an integer or bool tensor converted to the default float dtype."""
    return input if input.dtype.category == 2 else F.cast(input, dt.default_float)


def logit(input, eps: float | None = None):
    """log(p / (1 - p)); with `eps`, p is first clamped to [eps, 1 - eps]."""
    p = _floating(input)
    if eps is not None and eps >= 0:
        p = F.clamp(p, eps, 1 - eps)
    return F.log(p / (1 - p))


logit_ = F.inplace_of(logit)


def frac(input):
    """input - trunc(input), of the sign of input."""
    F.require_floating("frac", input)
    return input - apply(OPS.trunc, input)


frac_ = F.inplace_of(frac)


_DEG = math.pi / 180.0


def deg2rad(input):
    return F.mul(input, _DEG)


def rad2deg(input):
    return F.mul(input, 180.0 / math.pi)


def deg2rad_(self):
    F.require_floating("deg2rad_", self)
    return apply_inplace(OPS.mul, self, _DEG)


def rad2deg_(self):
    F.require_floating("rad2deg_", self)
    return apply_inplace(OPS.mul, self, 180.0 / math.pi)


def _double(x):
    if isinstance(x, Tensor):
        return F.cast(x, dt.float64)
    return float(_operand(x))


def float_power(input, exponent):
    """input ** exponent in float64 (both converted first)."""
    _some_tensor("float_power", input, exponent)
    return F.pow(_double(input), _double(exponent))


def float_power_(self, exponent):
    if self.dtype is not dt.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype.name} but "
                           "the operation's result requires dtype float64")
    return F.copy_(self, float_power(self, exponent))


def heaviside(input, values):
    """0 where input < 0, `values` where it is 0, 1 where > 0 (NaN: 0)."""
    _tensor_arg("heaviside", 1, "input", input)
    _tensor_arg("heaviside", 2, "values", values)
    if isinstance(values, Tensor) and values.dtype is not input.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different "
                           f"dtypes: expected values of dtype {input.dtype.name}, found "
                           f"{values.dtype.name}")
    return apply(OPS.heaviside, input, values)


heaviside_ = F.inplace_of(heaviside)


def _nan_ignoring(op):
    def fn(input, other):
        _tensor_arg(op.name, 1, "input", input)
        _tensor_arg(op.name, 2, "other", other)
        return apply(op, input, other)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"Elementwise {op.name}: a NaN loses to a number (NaN only where both are)."
    return fn


fmax, fmin = _nan_ignoring(OPS.fmax), _nan_ignoring(OPS.fmin)


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN)."""
    _some_tensor("xlogy", input, other)
    return F.xlogy(input, other)


# ---- installation ------------------------------------------------------------------------
NAMES = ("bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift "
         "bitwise_right_shift round clamp_min clamp_max square positive addcmul addcdiv "
         "nan_to_num logit frac deg2rad rad2deg float_power heaviside fmax fmin xlogy").split()
_INPLACE = ("bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift "
            "bitwise_right_shift round clamp_min clamp_max addcmul addcdiv nan_to_num logit "
            "frac deg2rad rad2deg float_power heaviside").split()


def _install() -> None:
    T = Tensor
    scope = globals()
    for name in NAMES:
        setattr(T, name, scope[name])
    for name in _INPLACE:
        setattr(T, name + "_", scope[name + "_"])
    for sym, name in (("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
                      ("lshift", "bitwise_left_shift"), ("rshift", "bitwise_right_shift")):
        fn = scope[name]
        setattr(T, f"__{sym}__", fn)
        setattr(T, f"__r{sym}__", lambda self, other, fn=fn: fn(other, self))
        setattr(T, f"__i{sym}__", scope[name + "_"])
    T.__invert__ = _invert
    T.byte = lambda self: F.cast(self, dt.uint8)
    T.char = lambda self: F.cast(self, dt.int8)
    T.short = lambda self: F.cast(self, dt.int16)
    T.__pos__ = positive


_install()
