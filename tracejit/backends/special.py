"""The special functions of ops/special.py as Numba CPU functions (`*_cpu`), which the
generated CPU kernels and eager's cached loops import."""
from __future__ import annotations

import numba

from ..ops.special import CPU_NAMES, FUNCTIONS, digamma, erfinv, lgamma, trigamma

lgamma_cpu, digamma_cpu, trigamma_cpu, erfinv_cpu = (
    numba.njit(fn) for fn in (lgamma, digamma, trigamma, erfinv))

__all__ = ["CPU_NAMES", "FUNCTIONS"] + list(CPU_NAMES.values())
