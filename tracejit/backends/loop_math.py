"""`math` as compiled loop bodies (ops/registry.Loops) see it.

A body calls `math.exp`, `math.tanh`, ... as plain Python does. In the kernel module the
Numba CPU backend makes of it (backends/numba_loops.py), `math` is this module: the
functions of Python's math module, with exp, tanh, log and erf of float32 in the
vectorisable forms the fused kernels use (backends/scalar_math.py: libm's calls would
keep LLVM from vectorising the loop), and tanh of float64 saturating where numpy's does.
"""
from __future__ import annotations

import math as _math
from math import *  # noqa: F401,F403 (the rest of math, as a body may call it)

from numba import types
from numba.extending import overload

from .scalar_math import FLOAT32_FORMS, FLOAT64_FORMS
from . import scalar_math


def _form(name: str):
    """A function `name` of one number, compiled as scalar_math's form for its dtype."""
    fallback = getattr(_math, name)

    def plain(x):
        return fallback(x)
    plain.__name__ = plain.__qualname__ = name

    @overload(plain)
    def _typed(x):
        chosen = FLOAT32_FORMS.get(name) if x == types.float32 else \
            FLOAT64_FORMS.get(name) if x == types.float64 else None
        fn = getattr(scalar_math, chosen) if chosen else None
        if fn is not None:
            return lambda x: fn(x)
        return lambda x: fallback(x)
    return plain


exp = _form("exp")
tanh = _form("tanh")
log = _form("log")
erf = _form("erf")
