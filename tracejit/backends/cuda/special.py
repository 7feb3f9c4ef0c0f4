"""The special functions of ops/special.py as CUDA device functions (erf's inverse is
libdevice's on a GPU), for the CUDA kernels' header."""
from __future__ import annotations

from numba import cuda

from ...ops import special

lgamma_dev, digamma_dev, trigamma_dev = (cuda.jit(device=True)(fn) for fn in (
    special.lgamma, special.digamma, special.trigamma))
erfinv_dev = cuda.jit(device=True)(special.erfinv)  # (the simulator's: no libdevice there)
