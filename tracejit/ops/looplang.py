"""What a loop body (ops/registry.Loops) may call besides loops, indexing and arithmetic.

These are the plain-Python meanings, which run where a body runs uncompiled (the tests,
as the oracle's twin). A backend that compiles bodies gives each name its own meaning:
the Numba CPU backend's `prange` is numba's, and its `gemm` calls the BLAS numpy links
(backends/numba_blas.py).
"""
from __future__ import annotations


prange = range  # a loop whose iterations may run on threads (each writes its own elements)


def gemm(a, b, out, trans_b, beta):
    """out[...] = a @ (b.T if trans_b else b) + beta * out, for 2-D arrays (a [m, k],
    out [m, n]); with beta 0, out is only written."""
    prod = a @ (b.T if trans_b else b)
    if beta == 0:
        out[...] = prod
    else:
        out[...] = prod + out * beta if beta != 1 else prod + out
