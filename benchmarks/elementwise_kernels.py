"""Fused elementwise kernels: GELU (tanh form) times a weight plus a bias on 4M float32,
traced with tj.trace and run by the Numba CPU backend, side by side with numpy, PyTorch
eager and (when it works here) torch.compile. Run: python benchmarks/elementwise_kernels.py
"""
from __future__ import annotations

import math
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import contestants_main, try_import_torch  # noqa: E402

N = 4 * 1024 * 1024
C = math.sqrt(2.0 / math.pi)


def gelu_affine(x, w, b, tanh):
    return x * 0.5 * (1.0 + tanh(C * (x + 0.044715 * x * x * x))) * w + b


def _data():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(3)]


def setup_numpy():
    x, w, b = _data()
    return lambda: gelu_affine(x, w, b, np.tanh)


def setup_tracejit():
    import tracejit as tj

    x, w, b = _data()
    tx, tw, tb = tj.from_numpy(x), tj.from_numpy(w), tj.from_numpy(b)
    traced = tj.trace(lambda a, c, d: gelu_affine(a, c, d, tj.tanh),
                      (tx[:1024], tw[:1024], tb[:1024]), backend="numba")
    np.testing.assert_allclose(traced(tx, tw, tb).numpy(), gelu_affine(x, w, b, np.tanh),
                               rtol=1e-5, atol=1e-5)
    assert traced.stats["compiles"] == 1
    return lambda: traced(tx, tw, tb)


def setup_memory_floor():
    """The same bytes moved by the cheapest kernel: read x, w and b, write one array, on
    two threads (a new output each call, as the traced function allocates)."""
    import numba

    import tracejit  # noqa: F401 — its threading layer

    @numba.njit(parallel=True, fastmath=True)
    def move(x, w, b, out):
        for i in numba.prange(x.shape[0]):
            out[i] = x[i] + w[i] + b[i]

    x, w, b = _data()

    def run():
        out = np.empty_like(x)
        move(x, w, b, out)
        return out
    return run


def _setup_torch(compiled: bool):
    torch = try_import_torch()
    torch.set_num_threads(2)
    px, pw, pb = (torch.from_numpy(a) for a in _data())
    fn = lambda a, c, d: gelu_affine(a, c, d, torch.tanh)  # noqa: E731
    if compiled:
        fn = torch.compile(fn)
        fn(px, pw, pb)
    return lambda: fn(px, pw, pb)


def contestants() -> dict:
    found = {"numpy": setup_numpy, "tracejit": setup_tracejit,
             "memory floor (2 threads)": setup_memory_floor}
    if try_import_torch() is not None:
        found["torch eager"] = lambda: _setup_torch(False)
        found["torch.compile"] = lambda: _setup_torch(True)
    return found


def main() -> None:
    found = contestants()
    base = {name: "numpy" for name in found}
    base["tracejit"] = "memory floor (2 threads)"
    contestants_main(__file__, "GELU(tanh) * w + b, 4M float32 (target: tracejit <= 1.2x the "
                     "memory floor)", found, base)


if __name__ == "__main__":
    main()
