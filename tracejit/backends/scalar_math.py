"""Vectorisable float32 forms of libm functions for generated kernels.

This llvmlite has no SVML, so `math.tanh` inside a Numba loop is a scalar
library call that blocks vectorisation. These forms are plain arithmetic
(a clamp and a rational function), which LLVM vectorises. Their maximum error
over the float32 range is measured by tests/test_scalar_math.py.
"""
from __future__ import annotations

import numba
import numpy as np

# Rational minimax approximation of tanh on [-7.9, 7.9] (the coefficients of Eigen's
# float tanh); beyond that range float32 tanh is +-1 to the last bit.
_A1, _A3, _A5 = np.float32(4.89352455891786e-03), np.float32(6.37261928875436e-04), \
    np.float32(1.48572235717979e-05)
_A7, _A9, _A11 = np.float32(5.12229709037114e-08), np.float32(-8.60467152213735e-11), \
    np.float32(2.00018790482477e-13)
_A13 = np.float32(-2.76076847742355e-16)
_B0, _B2, _B4, _B6 = np.float32(4.89352518554385e-03), np.float32(2.26843463243900e-03), \
    np.float32(1.18534705686654e-04), np.float32(1.19825839466702e-06)
_CLAMP = np.float32(7.90531110763549805)


@numba.njit(inline="always", fastmath=False)
def tanh_f32(x):
    x = np.float32(x)
    x = min(max(x, -_CLAMP), _CLAMP)
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
    return p / q


# math.<name> in a float32 kernel is emitted as the fast form where one exists
FLOAT32_FORMS = {"math.tanh": "tanh_f32"}
