"""Fused elementwise kernels: GELU (tanh form) times a weight plus a bias on 4M float32,
traced with tj.trace and run by the Numba CPU backend, side by side with numpy, PyTorch
eager and (when it works here) torch.compile. Run: python benchmarks/elementwise_kernels.py
"""
from __future__ import annotations

import math
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import median_time, print_table, try_import_torch  # noqa: E402

N = 4 * 1024 * 1024
C = math.sqrt(2.0 / math.pi)


def gelu_affine(x, w, b, tanh):
    return x * 0.5 * (1.0 + tanh(C * (x + 0.044715 * x * x * x))) * w + b


def run() -> dict:
    import tracejit as tj

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(N).astype(np.float32) for _ in range(3))
    res = {"numpy": median_time(lambda: gelu_affine(x, w, b, np.tanh), repeat=5)}
    tx, tw, tb = tj.from_numpy(x), tj.from_numpy(w), tj.from_numpy(b)
    traced = tj.trace(lambda a, c, d: gelu_affine(a, c, d, tj.tanh), (tx[:1024], tw[:1024],
                                                                       tb[:1024]),
                      backend="numba")
    traced(tx, tw, tb)  # compile (or load from the cache) outside the timing
    np.testing.assert_allclose(traced(tx, tw, tb).numpy(), gelu_affine(x, w, b, np.tanh),
                               rtol=1e-5, atol=1e-5)
    assert traced.stats["compiles"] == 1
    res["tracejit numba"] = median_time(lambda: traced(tx, tw, tb), repeat=5)
    torch = try_import_torch()
    if torch is not None:
        torch.set_num_threads(2)
        px, pw, pb = (torch.from_numpy(a) for a in (x, w, b))
        res["torch eager"] = median_time(lambda: gelu_affine(px, pw, pb, torch.tanh), repeat=5)
        try:
            compiled = torch.compile(lambda a, c, d: gelu_affine(a, c, d, torch.tanh))
            compiled(px, pw, pb)
            res["torch.compile"] = median_time(lambda: compiled(px, pw, pb), repeat=5)
        except Exception as err:  # noqa: BLE001 — no C++ toolchain for inductor, etc.
            res["torch.compile"] = f"unavailable ({type(err).__name__})"
    return res


def main() -> None:
    r = run()
    base = r["numpy"]
    rows = []
    for k, v in r.items():
        if isinstance(v, float):
            rows.append([k, f"{v * 1e3:.2f}", f"{v / base:.2f}x"])
        else:
            rows.append([k, v, "-"])
    print_table("GELU(tanh) * w + b, 4M float32 (ms, median of 5; target tracejit <= 0.25x numpy)",
                ["implementation", "ms", "vs numpy"], rows)


if __name__ == "__main__":
    main()
