"""The special functions of ops/special.py as CUDA device functions (erf's inverse is
libdevice's on a GPU), and float16 rounding, for the CUDA kernels' header."""
from __future__ import annotations

import numpy as np
from numba import cuda

from ...ops import special

lgamma_dev, digamma_dev, trigamma_dev = (cuda.jit(device=True)(fn) for fn in (
    special.lgamma, special.digamma, special.trigamma))
erfinv_dev = cuda.jit(device=True)(special.erfinv)  # (the simulator's: no libdevice there)


@cuda.jit(device=True)
def round_f16_dev(x):
    """A float32 register rounded to float16 (kept in float32 for the next op)."""
    return np.float32(np.float16(x))
