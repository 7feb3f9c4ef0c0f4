"""`gemm` for compiled loop bodies: a call into the BLAS numpy itself links.

A loop body (ops/registry.Loops) that multiplies matrices calls `ops.looplang.gemm`;
here that name gets its compiled meaning, a Numba overload. Where numpy's BLAS is found
(the OpenBLAS its wheels bundle), float32 and float64 products whose rows are contiguous
call its `cblas_?gemm` directly: the same routine `np.matmul` calls, so the product has
numpy's bits, without a trip through Python per call (a [8, 64] @ [64, 256] product:
2.4 us, against 3.4 us through `np.matmul` from Python and 7.5 us as a compiled loop).
Otherwise the overload is a plain loop nest.

The call names its symbol and the library is loaded into LLVM's symbol table, so the
machine code Numba caches on disk holds no address of this process. `SIGNATURE` names
the library; a kernel module that calls `gemm` puts it in its source, so another library
is another cache entry (and the cache's keys hash this file's text, as scalar_math's).
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np
from llvmlite import ir
import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..ops import looplang

# (symbol prefix, symbol suffix, integer bits): numpy's ILP64 builds rename cblas_sgemm
_NAMES = (("scipy_cblas_", "64_", 64), ("cblas_", "64_", 64), ("cblas_", "", 32))


def _find():
    """(library path, {"float32": symbol, "float64": symbol}, integer bits) or None."""
    root = os.path.dirname(np.__file__)
    paths = []
    for pattern in ("../numpy.libs/*blas*", ".dylibs/*blas*", "../numpy.libs/*.so*"):
        paths += sorted(glob.glob(os.path.join(root, pattern)))
    for path in dict.fromkeys(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix, bits in _NAMES:
            names = {"float32": f"{prefix}sgemm{suffix}", "float64": f"{prefix}dgemm{suffix}"}
            if all(hasattr(lib, n) for n in names.values()):
                return os.path.realpath(path), names, bits
    return None


_FOUND = None if os.environ.get("TRACEJIT_LOOP_BLAS") == "0" else _find()
if _FOUND is not None:
    import llvmlite.binding as llvm

    llvm.load_library_permanently(_FOUND[0])

SIGNATURE = os.path.basename(_FOUND[0]) if _FOUND else "none (loop nests)"


def available() -> bool:
    """Whether compiled bodies call numpy's BLAS (else their gemm is a loop nest)."""
    return _FOUND is not None


@intrinsic
def _cblas_gemm(typingctx, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """cblas_?gemm(RowMajor, NoTrans, trans_b ? Trans : NoTrans, ...) on raw addresses
    (a, b, c: integers); the dtype is alpha's."""
    dtype = alpha
    symbol = _FOUND[1]["float32" if dtype == types.float32 else "float64"]
    bits = _FOUND[2]
    sig = types.void(trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        i32, size = ir.IntType(32), ir.IntType(bits)
        real = context.get_value_type(dtype)
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, size, size, size, real, ptr,
                                               size, ptr, size, real, ptr, size])
        fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
        argtys = signature.args

        def integer(i, to):
            v = context.cast(builder, args[i], argtys[i], types.int64)
            return builder.trunc(v, to) if to.width < 64 else v

        def address(i):
            return builder.inttoptr(context.cast(builder, args[i], argtys[i], types.uintp), ptr)

        def number(i):
            return context.cast(builder, args[i], argtys[i], dtype)
        trans = builder.select(builder.icmp_signed("!=", integer(0, i32), i32(0)), i32(112),
                               i32(111))
        builder.call(fn, [i32(101), i32(111), trans, integer(1, size), integer(2, size),
                          integer(3, size), number(4), address(5), integer(6, size),
                          address(7), integer(8, size), number(9), address(10),
                          integer(11, size)])
        return context.get_dummy_value()
    return sig, codegen


def _loop_gemm(a, b, out, trans_b, beta):
    m, k = a.shape
    n = out.shape[1]
    for i in range(m):
        for j in range(n):
            out[i, j] = out[i, j] * beta if beta != 0 else 0
        for p in range(k):
            x = a[i, p]
            if trans_b:
                for j in range(n):
                    out[i, j] += x * b[j, p]
            else:
                for j in range(n):
                    out[i, j] += x * b[p, j]


_loop_gemm_compiled = numba.njit(_loop_gemm)


@overload(looplang.gemm)
def _gemm(a, b, out, trans_b, beta):
    arrays = (a, b, out)
    if not all(isinstance(x, types.Array) and x.ndim == 2 for x in arrays):
        return None
    blas = _FOUND is not None and a.dtype in (types.float32, types.float64) and \
        b.dtype == a.dtype and out.dtype == a.dtype
    if not blas:
        return _loop_gemm
    real = a.dtype

    def impl(a, b, out, trans_b, beta):
        m, k = a.shape
        n = out.shape[1]
        size = a.itemsize
        lda, ldb, ldc = a.strides[0] // size, b.strides[0] // size, out.strides[0] // size
        ok = a.strides[1] == size and b.strides[1] == size and out.strides[1] == size and \
            a.strides[0] % size == 0 and b.strides[0] % size == 0 and \
            out.strides[0] % size == 0 and lda >= max(k, 1) and ldc >= max(n, 1) and \
            ldb >= max(k if trans_b else n, 1) and m > 0 and n > 0 and k > 0
        if ok:
            _cblas_gemm(trans_b, m, n, k, real(1), a.ctypes.data, lda, b.ctypes.data, ldb,
                        real(beta), out.ctypes.data, ldc)
        else:
            _loop_gemm_compiled(a, b, out, trans_b, beta)
    return impl
