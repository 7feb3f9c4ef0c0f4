"""Vectorisable float32 forms of libm functions for generated kernels.

This llvmlite has no SVML, so `math.tanh` inside a Numba loop is a scalar
library call that blocks vectorisation. These forms are plain arithmetic
(a clamp and a rational function), which LLVM vectorises. Their maximum error
over the float32 range is measured by tests/test_scalar_math.py.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def _float32_from_bits(typingctx, bits):
    """Reinterpret an int32 as the float32 with those bits (an LLVM bitcast: vectorises)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return sig, codegen


def _ieee_extremum(name: str):
    """An intrinsic for LLVM's `llvm.maximum`/`llvm.minimum` on floats: IEEE 754-2019's
    maximum and minimum, which propagate NaN (as numpy's and PyTorch's max do) and which
    LLVM vectorises as a reduction, unlike a compare-and-select that checks for NaN."""
    @intrinsic
    def extremum(typingctx, a, b):
        if not isinstance(a, types.Float) or a != b:
            return None

        def codegen(context, builder, signature, args):
            ty = args[0].type
            bits = "f32" if ty == ir.FloatType() else "f64"
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty, ty]),
                                                f"llvm.{name}.{bits}")
            return builder.call(fn, args)
        return a(a, a), codegen
    return extremum


fmaximum = _ieee_extremum("maximum")
fminimum = _ieee_extremum("minimum")

# Rational minimax approximation of tanh on [-7.9, 7.9] (the coefficients of Eigen's
# float tanh); beyond that range 1 - 2**-24, and +-1 where eager's tanh is.
_A1, _A3, _A5 = np.float32(4.89352455891786e-03), np.float32(6.37261928875436e-04), \
    np.float32(1.48572235717979e-05)
_A7, _A9, _A11 = np.float32(5.12229709037114e-08), np.float32(-8.60467152213735e-11), \
    np.float32(2.00018790482477e-13)
_A13 = np.float32(-2.76076847742355e-16)
_B0, _B2, _B4, _B6 = np.float32(4.89352518554385e-03), np.float32(2.26843463243900e-03), \
    np.float32(1.18534705686654e-04), np.float32(1.19825839466702e-06)
_CLAMP = np.float32(7.90531110763549805)
_BELOW_ONE = np.float32(1.0) - np.float32(2.0 ** -24)  # the largest float32 under 1


def _saturation_point(dtype, lo: float, hi: float):
    """The smallest value of `dtype` where numpy's tanh (what eager execution computes) is
    exactly 1 — for float32 9.0108 when correctly rounded, 10.0 for numpy's own loop; for
    float64 18.99 where libm's is 19.06. Kernels saturate exactly there, so that a value
    compared with +-1 (sign(tanh(x) + 1)) decides as in eager."""
    ints = np.int32 if dtype == np.float32 else np.int64
    bits = np.array([lo, hi], dtype).view(ints)
    lo, hi = int(bits[0]), int(bits[1])
    while hi - lo > 1:  # on arrays, as eager runs it (numpy's scalar path differs)
        mid = (lo + hi) // 2
        if np.tanh(np.array([mid], ints).view(dtype))[0] == 1.0:
            hi = mid
        else:
            lo = mid
    return np.array([hi], ints).view(dtype)[0]


_SATURATED = _saturation_point(np.float32, 8.0, 16.0)
_SATURATED64 = _saturation_point(np.float64, 17.0, 24.0)
_BELOW_ONE64 = np.nextafter(1.0, 0.0)


@numba.njit(inline="always")
def tanh_f64(x):
    """libm's tanh, saturating exactly where numpy's float64 tanh does."""
    t = min(max(math.tanh(x), -_BELOW_ONE64), _BELOW_ONE64)
    return (1.0 if x > 0 else -1.0) if abs(x) >= _SATURATED64 else t


@numba.njit(inline="always", fastmath=False)
def tanh_f32(x):
    x0 = np.float32(x)
    x = min(max(x0, -_CLAMP), _CLAMP)
    x2 = x * x
    p = x2 * _A13 + _A11
    p = x2 * p + _A9
    p = x2 * p + _A7
    p = x2 * p + _A5
    p = x2 * p + _A3
    p = x2 * p + _A1
    p = x * p
    q = x2 * _B6 + _B4
    q = x2 * q + _B2
    q = x2 * q + _B0
    # exactly +-1 where eager's float32 tanh is, and only there: the rational form at the
    # clamp rounds to +-1 where eager is an ulp or three short of it, and a value compared
    # with -1 (sign(tanh(x) + 1)) would flip; its derivative 1 - t*t is 0 only there too
    # (NaN compares false, so it takes the rational branch and stays NaN)
    out = min(max(p / q, -_BELOW_ONE), _BELOW_ONE)
    return (np.float32(1.0) if x0 > 0 else np.float32(-1.0)) if abs(x0) >= _SATURATED \
        else out


@intrinsic
def _bits_from_float32(typingctx, x):
    """The int32 with the bits of a float32 (an LLVM bitcast)."""
    sig = types.int32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return sig, codegen


# exp: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact product), a degree-6
# polynomial for e^r (Cephes expf coefficients) and 2^n built from its exponent bits.
_LOG2E = np.float32(1.44269504088896341)
_LN2_HI, _LN2_LO = np.float32(0.693359375), np.float32(-2.12194440e-4)
_P0, _P1, _P2 = np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), \
    np.float32(8.3334519073e-3)
_P3, _P4, _P5 = np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), \
    np.float32(5.0000001201e-1)
_EXP_HI, _EXP_LO = np.float32(88.3762626647949), np.float32(-87.3365447504019)


@numba.njit(inline="always", fastmath=False)
def exp_f32(x):
    x = np.float32(x)
    big = x > _EXP_HI
    small = x < _EXP_LO
    y = min(max(x, _EXP_LO), _EXP_HI)
    n = np.float32(math_floor(y * _LOG2E + np.float32(0.5)))
    r = y - n * _LN2_HI - n * _LN2_LO
    p = _P0 * r + _P1
    p = p * r + _P2
    p = p * r + _P3
    p = p * r + _P4
    p = p * r + _P5
    p = p * r * r + r + np.float32(1.0)
    scale = _float32_from_bits(np.int32((np.int32(n) + np.int32(127)) << np.int32(23)))
    out = p * scale
    # selects rather than branches, so the loop still vectorises
    out = np.float32(np.inf) if big else out
    out = np.float32(0.0) if small else out
    return x if x != x else out  # NaN stays NaN


@numba.njit(inline="always")
def math_floor(v):
    return np.floor(v)


# log: x = m 2^e with m in [sqrt(1/2), sqrt(2)) read from the bits, then a degree-9
# polynomial in m - 1 (Cephes logf coefficients).
_L = [np.float32(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                              -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                              2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)]
_L0, _L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8 = _L
_SQRT_HALF = np.float32(0.707106781186547524)
_TINY = np.float32(1.17549435e-38)
_TWO23 = np.float32(8388608.0)


@numba.njit(inline="always", fastmath=False)
def log_f32(x):
    x = np.float32(x)
    sub = x < _TINY  # denormals: scale into the normal range first
    y = x * _TWO23 if sub else x
    bits = _bits_from_float32(y)
    e = np.float32(((bits >> np.int32(23)) & np.int32(0xFF)) - np.int32(126))
    e = e - np.float32(23.0) if sub else e
    m = _float32_from_bits((bits & np.int32(-2139095041)) | np.int32(0x3F000000))
    low = m < _SQRT_HALF
    e = e - np.float32(1.0) if low else e
    m = (m + m - np.float32(1.0)) if low else (m - np.float32(1.0))
    z = m * m
    p = _L0 * m + _L1
    p = p * m + _L2
    p = p * m + _L3
    p = p * m + _L4
    p = p * m + _L5
    p = p * m + _L6
    p = p * m + _L7
    p = p * m + _L8
    r = m * z * p
    r = r + _LN2_LO * e
    r = r - np.float32(0.5) * z
    out = m + r + _LN2_HI * e
    out = np.float32(-np.inf) if x == np.float32(0.0) else out
    out = np.float32(np.nan) if x < np.float32(0.0) else out
    out = x if (x != x or x == np.float32(np.inf)) else out
    return out


# erf: an odd Taylor polynomial near 0 (where relative error matters), elsewhere
# 1 - t(a1 + ... + a5 t^4) exp(-x^2) with t = 1 / (1 + p|x|) (Abramowitz & Stegun 7.1.26)
_E2_SQRT_PI = np.float32(1.1283791670955126)
_EP = np.float32(0.3275911)
_EA1, _EA2, _EA3 = np.float32(0.254829592), np.float32(-0.284496736), np.float32(1.421413741)
_EA4, _EA5 = np.float32(-1.453152027), np.float32(1.061405429)


@numba.njit(inline="always", fastmath=False)
def erf_f32(x):
    x = np.float32(x)
    a = abs(x)
    x2 = x * x
    series = x * _E2_SQRT_PI * (np.float32(1.0) + x2 * (np.float32(-1.0 / 3) + x2 * (
        np.float32(0.1) + x2 * (np.float32(-1.0 / 42) + x2 * (np.float32(1.0 / 216) + x2 * (
            np.float32(-1.0 / 1320)))))))
    t = np.float32(1.0) / (np.float32(1.0) + _EP * a)
    poly = t * (_EA1 + t * (_EA2 + t * (_EA3 + t * (_EA4 + t * _EA5))))
    tail = np.float32(1.0) - poly * exp_f32(-x2)
    tail = tail if x >= np.float32(0.0) else -tail
    return series if a < np.float32(0.5) else tail


# a scalar function (ops/scalar.py) in a float32 kernel is emitted as the fast form where
# one exists
FLOAT32_FORMS = {"tanh": "tanh_f32", "exp": "exp_f32", "log": "log_f32", "erf": "erf_f32"}
# ... and in a float64 kernel, as the form that saturates where eager does
FLOAT64_FORMS = {"tanh": "tanh_f64"}


# ---- float16 and bfloat16 storage: kernels read and write them as uint16 bits and
# compute in float32 (each float16/bfloat16 op's result rounded to its type, as eager's
# numpy computes it: in float32, rounded once per op)
@intrinsic
def f16_to_f32(typingctx, bits):
    """float16 bits (uint16) -> float32 (F16C's vcvtph2ps where the CPU has it)."""
    sig = types.float32(types.uint16)

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return sig, codegen


@intrinsic
def f32_to_f16(typingctx, x):
    """float32 -> float16 bits (uint16), rounded to nearest even."""
    sig = types.uint16(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return sig, codegen


@intrinsic
def round_f16(typingctx, x):
    """x rounded to float16 precision, kept as a float32."""
    sig = types.float32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.fptrunc(args[0], ir.HalfType()), ir.FloatType())
    return sig, codegen


def _bf16_high_half(builder, x):
    """The float32 `x` rounded to bfloat16 as the high half of a 32-bit integer, to
    nearest even (a NaN stays a quiet NaN), as ml_dtypes rounds: integer ops in LLVM IR,
    so each of a kernel's roundings costs LLVM a few instructions and Numba no inlining
    (as inline="always" functions they were: two kernels of 40 and 20 bfloat16
    statements took Numba 27 s to compile, 1.3 s so)."""
    i32 = ir.IntType(32)
    u = builder.bitcast(x, i32)
    odd = builder.and_(builder.lshr(u, ir.Constant(i32, 16)), ir.Constant(i32, 1))
    rounded = builder.add(builder.add(u, ir.Constant(i32, 0x7FFF)), odd)
    quiet_nan = builder.or_(u, ir.Constant(i32, 0x400000))
    is_nan = builder.fcmp_unordered("uno", x, x)
    return builder.and_(builder.select(is_nan, quiet_nan, rounded),
                        ir.Constant(i32, 0xFFFF0000))


@intrinsic
def bf16_to_f32(typingctx, bits):
    """bfloat16 bits (uint16) -> float32: the high half of the float32."""
    sig = types.float32(types.uint16)

    def codegen(context, builder, signature, args):
        wide = builder.zext(args[0], ir.IntType(32))
        return builder.bitcast(builder.shl(wide, ir.Constant(ir.IntType(32), 16)),
                               ir.FloatType())
    return sig, codegen


@intrinsic
def f32_to_bf16(typingctx, x):
    """float32 -> bfloat16 bits (uint16), rounded to nearest even (NaN stays NaN)."""
    sig = types.uint16(types.float32)

    def codegen(context, builder, signature, args):
        high = _bf16_high_half(builder, args[0])
        return builder.trunc(builder.lshr(high, ir.Constant(ir.IntType(32), 16)),
                             ir.IntType(16))
    return sig, codegen


@intrinsic
def round_bf16(typingctx, x):
    """x rounded to bfloat16 precision, kept as a float32."""
    sig = types.float32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(_bf16_high_half(builder, args[0]), ir.FloatType())
    return sig, codegen
