"""dtypes and PyTorch's type-promotion rules.

Read by the tensor frontend (every op's result dtype) and by the op table's
dtype rules, so eager execution and tracing promote identically.
"""
from __future__ import annotations

import numpy as np


class dtype:
    """A tensor element type: `tj.float32`, `tj.int64`, ... (PyTorch's names)."""

    __slots__ = ("name", "np", "category", "itemsize", "short")

    def __init__(self, name: str, np_dtype, category: int, short: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category  # 0 bool, 1 integer, 2 floating
        self.itemsize = self.np.itemsize
        self.short = short  # used by IR dumps: f32, i64, b8

    @property
    def is_floating_point(self) -> bool:
        return self.category == 2

    def __repr__(self) -> str:
        return f"tracejit.{self.name}"

    def __reduce__(self):
        return self.name


bool_ = dtype("bool", np.bool_, 0, "b8")
uint8 = dtype("uint8", np.uint8, 1, "u8")
int8 = dtype("int8", np.int8, 1, "i8")
int16 = dtype("int16", np.int16, 1, "i16")
int32 = dtype("int32", np.int32, 1, "i32")
int64 = dtype("int64", np.int64, 1, "i64")
# PyTorch's "shell" unsigned types: they promote only with themselves and floats
uint16 = dtype("uint16", np.uint16, 1, "u16")
uint32 = dtype("uint32", np.uint32, 1, "u32")
uint64 = dtype("uint64", np.uint64, 1, "u64")
float16 = dtype("float16", np.float16, 2, "f16")
float32 = dtype("float32", np.float32, 2, "f32")
float64 = dtype("float64", np.float64, 2, "f64")

# bfloat16 is numpy's through the ml_dtypes package (the `amp` extra), made on first need:
# importing ml_dtypes takes 0.7-0.9 s here, most of a warm start. Until then no array can
# hold it (making one needs ml_dtypes), so nothing is missed.
bfloat16 = None
BF16_NP = None  # its numpy dtype, once made

ALL = (bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, float32,
       float64)
WIDE_UNSIGNED = (uint16, uint32, uint64)
FLOATING = (float16, float32, float64)
LOW_PRECISION = (float16,)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "long": int64,
                 "int": int32, "f32": float32, "f64": float64, "f16": float16,
                 "i32": int32, "i64": int64, "b8": bool_, "short": int16, "i16": int16,
                 "i8": int8, "u8": uint8, "u16": uint16, "u32": uint32, "u64": uint64})

default_float = float32
default_int = int64

BF16_MISSING = ("tracejit.bfloat16 needs the ml_dtypes package: pip install 'tracejit[amp]' "
                "(or ml_dtypes)")


def bfloat16_dtype() -> dtype:
    """tj.bfloat16, made (and registered with the other dtypes) on first need; raises
    AttributeError naming the package when ml_dtypes is not installed."""
    global bfloat16, BF16_NP, ALL, FLOATING, LOW_PRECISION
    if bfloat16 is None:
        try:
            import ml_dtypes
        except ImportError:
            raise AttributeError(BF16_MISSING) from None
        bf = dtype("bfloat16", ml_dtypes.bfloat16, 2, "bf16")
        _BY_NP[bf.np] = bf  # (in place: other modules hold these dicts)
        _BY_NAME["bfloat16"] = _BY_NAME["bf16"] = bf
        ALL = (bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, bf,
               float32, float64)
        FLOATING = (float16, bf, float32, float64)
        LOW_PRECISION = (float16, bf)
        BF16_NP, bfloat16 = bf.np, bf
    return bfloat16


def as_float32(a: np.ndarray) -> np.ndarray:
    """A float16/bfloat16 array widened to float32 (exact). bfloat16 through its bits
    (the high half of a float32): 3x faster than ml_dtypes' astype ([1024, 512]: 83
    against 264 us)."""
    if a.dtype.kind == "V":
        wide = a.view(np.uint16).astype(np.uint32)
        np.left_shift(wide, np.uint32(16), out=wide)
        return wide.view(np.float32)
    return a.astype(np.float32)


def rounded_from_float32(x: np.ndarray, npd) -> np.ndarray:
    """A float32 array rounded to float16/bfloat16 `npd`, to nearest even (a NaN stays a
    quiet NaN): bfloat16 through integer ops on the bits, 1.6x faster than ml_dtypes'
    astype with the same bits."""
    if np.dtype(npd).kind != "V" or x.ndim == 0:  # (0-d: numpy's ops give scalars)
        return x.astype(npd)
    u = x.view(np.uint32)
    r = u >> np.uint32(16)  # (in place from here: each pass is one over the array)
    np.bitwise_and(r, np.uint32(1), out=r)
    r += u
    r += np.uint32(0x7FFF)
    np.right_shift(r, np.uint32(16), out=r)
    high = r.astype(np.uint16)
    if x.size and np.isnan(x.max()):  # (max propagates a NaN: one fast pass)
        nan = np.isnan(x)
        high[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return high.view(npd)


def from_numpy_dtype(npd) -> dtype:
    """The tracejit dtype of a numpy dtype; raises TypeError for unsupported ones."""
    d = _BY_NP.get(npd)
    if d is None:
        d = _BY_NP.get(np.dtype(npd))
        if d is None and np.dtype(npd).name == "bfloat16" and bfloat16 is None:
            d = bfloat16_dtype()  # an array of ml_dtypes' bfloat16 made by the user
        if d is None:
            raise TypeError(
                f"numpy dtype {np.dtype(npd)} is not supported; tracejit tensors hold "
                f"{', '.join(x.name for x in ALL)}")
    return d


def as_dtype(x) -> dtype:
    """Accept a tracejit dtype, a numpy dtype/type, a Python type or a name."""
    if isinstance(x, dtype):
        return x
    if x is float:
        return float32
    if x is int:
        return int64
    if x is bool:
        return bool_
    if isinstance(x, str):
        if x in _BY_NAME:
            return _BY_NAME[x]
        if x in ("bfloat16", "bf16"):
            return bfloat16_dtype()
        raise TypeError(f"unknown dtype name {x!r}")
    return from_numpy_dtype(np.dtype(x))


def _higher(a: dtype, b: dtype) -> dtype:
    """Promotion of two dtypes of equal priority (PyTorch's promote_types)."""
    if a is b:
        return a
    if (a in WIDE_UNSIGNED or b in WIDE_UNSIGNED) and a.category != 2 and b.category != 2:
        raise RuntimeError(f"Promotion for uint16, uint32, uint64 types is not supported, "
                           f"attempted to promote {a.name} and {b.name}")
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.itemsize == b.itemsize == 2 and a.category == 2:  # float16 with bfloat16
        return float32
    if a.np.kind != b.np.kind and a.category == 1:  # uint8 with a signed integer
        signed = b if a is uint8 else a
        return int16 if signed.itemsize == 1 else signed
    return a if a.itemsize >= b.itemsize else b


_SCALAR_DTYPE = {bool: bool_, int: int64, float: float32}


def result_type(*operands) -> dtype:
    """PyTorch's result type: dimensioned tensors first, then 0-dim tensors, then
    Python scalars; a lower-priority operand only matters if its category is higher.

    Each operand is a Tensor-like (with `.dtype` and `.ndim`) or a Python scalar.
    """
    tiers: list[dtype | None] = [None, None, None]
    for x in operands:
        t = type(x)
        if t in _SCALAR_DTYPE:
            d, tier = _SCALAR_DTYPE[t], 2
        elif t.__name__ == "SymInt":  # a symbolic size used as a number while tracing
            d, tier = int64, 2
        elif t is np.bool_ or t is np.float64 or t is np.float32 or isinstance(x, np.generic):
            d, tier = _SCALAR_DTYPE[type(x.item())], 2
        else:
            d, tier = x.dtype, (1 if x.ndim == 0 else 0)
        cur = tiers[tier]
        tiers[tier] = d if cur is None else _higher(cur, d)
    return _combine(tiers[0], _combine(tiers[1], tiers[2]))


def _combine(higher: dtype | None, lower: dtype | None) -> dtype | None:
    """Merge a higher-priority tier with a lower one (PyTorch's combine_categories)."""
    if higher is None:
        return lower
    if lower is None or higher.category == 2:
        return higher
    if higher.category == 0 or lower.category == 2:
        return _higher(higher, lower)
    return higher


def to_float(d: dtype) -> dtype:
    """The dtype an op that needs floating point computes in (int -> float32)."""
    return d if d.category == 2 else default_float
