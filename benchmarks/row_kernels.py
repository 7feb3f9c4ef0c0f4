"""Row kernels: softmax over rows (2048x1024) and layer norm forward (4096x1024), float32,
traced and run by the Numba CPU backend, side by side with numpy written by hand and
PyTorch eager. Run: python benchmarks/row_kernels.py
"""
from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import median_time, print_table, try_import_torch  # noqa: E402


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    c = x - mu
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + eps) * w + b


def run() -> dict:
    import tracejit as tj
    from tracejit.nn import functional as F

    rng = np.random.default_rng(0)
    xs = rng.standard_normal((2048, 1024)).astype(np.float32)
    xl = rng.standard_normal((4096, 1024)).astype(np.float32)
    w, b = rng.standard_normal(1024).astype(np.float32), rng.standard_normal(1024).astype(
        np.float32)
    softmax = tj.trace(lambda x: x.softmax(-1), (tj.randn(4, 1024),), backend="numba")
    layer_norm = tj.trace(lambda x, w_, b_: F.layer_norm(x, (1024,), w_, b_),
                          (tj.randn(4, 1024), tj.ones(1024), tj.zeros(1024)), backend="numba")
    ts, tl, tw, tb = (tj.from_numpy(a) for a in (xs, xl, w, b))
    np.testing.assert_allclose(softmax(ts).numpy(), np_softmax(xs), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(layer_norm(tl, tw, tb).numpy(), np_layer_norm(xl, w, b),
                               rtol=1e-4, atol=1e-5)
    res = {
        "softmax numpy": median_time(lambda: np_softmax(xs), repeat=5),
        "softmax tracejit": median_time(lambda: softmax(ts), repeat=5),
        "layer_norm numpy": median_time(lambda: np_layer_norm(xl, w, b), repeat=5),
        "layer_norm tracejit": median_time(lambda: layer_norm(tl, tw, tb), repeat=5),
    }
    assert softmax.stats["compiles"] == 1 and layer_norm.stats["compiles"] == 1
    torch = try_import_torch()
    if torch is not None:
        torch.set_num_threads(2)
        px, pl = torch.from_numpy(xs), torch.from_numpy(xl)
        pw, pb = torch.from_numpy(w), torch.from_numpy(b)
        res["softmax torch"] = median_time(lambda: torch.softmax(px, -1), repeat=5)
        res["layer_norm torch"] = median_time(
            lambda: torch.nn.functional.layer_norm(pl, (1024,), pw, pb), repeat=5)
    return res


def main() -> None:
    r = run()
    rows = []
    for name in ("softmax", "layer_norm"):
        base = r[f"{name} numpy"]
        for who in ("numpy", "tracejit", "torch"):
            key = f"{name} {who}"
            if key in r:
                rows.append([key, f"{r[key] * 1e3:.2f}", f"{r[key] / base:.2f}x"])
    print_table("row kernels, float32 (ms, median of 5; targets: softmax <= 0.35x numpy)",
                ["kernel", "ms", "vs numpy"], rows)


if __name__ == "__main__":
    main()
