"""Eager per-op overhead on tiny tensors: tracejit vs numpy vs PyTorch eager.

A chain of 12 elementwise ops (mul, add, tanh, mul by a scalar, sigmoid, sub)
on 8-element float32 tensors, forward only and forward + backward, timed side
by side in one process. Run: python benchmarks/eager_overhead.py
"""
from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import median_time, print_table, try_import_torch  # noqa: E402

N_OPS = 12  # two rounds of the six-op pattern below


def chain(x, w, b, tanh, sigmoid):
    for _ in range(2):
        x = sigmoid(tanh(x * w + b) * 0.5) - b
    return x


def run() -> dict:
    import tracejit as tj

    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(8).astype(np.float32) for _ in range(3))
    res = {}

    def np_sigmoid(v):
        return 0.5 * np.tanh(0.5 * v) + 0.5  # the stable form tracejit also uses

    res["numpy fwd"] = median_time(lambda: chain(xs, ws, bs, np.tanh, np_sigmoid)) / N_OPS

    x, w, b = tj.from_numpy(xs.copy()), tj.from_numpy(ws), tj.from_numpy(bs)
    res["tracejit fwd"] = median_time(lambda: chain(x, w, b, tj.tanh, tj.sigmoid)) / N_OPS
    xg = tj.from_numpy(xs.copy()).requires_grad_()

    def tj_fb():
        chain(xg, w, b, tj.tanh, tj.sigmoid).sum().backward()
        xg.grad = None
    res["tracejit fwd+bwd"] = median_time(tj_fb) / N_OPS

    torch = try_import_torch()
    if torch is not None:
        tx, tw, tb = (torch.from_numpy(a.copy()) for a in (xs, ws, bs))
        res["torch fwd"] = median_time(lambda: chain(tx, tw, tb, torch.tanh,
                                                     torch.sigmoid)) / N_OPS
        txg = torch.from_numpy(xs.copy()).requires_grad_()

        def torch_fb():
            chain(txg, tw, tb, torch.tanh, torch.sigmoid).sum().backward()
            txg.grad = None
        res["torch fwd+bwd"] = median_time(torch_fb) / N_OPS
    return res


def main() -> None:
    res = run()
    us = {k: v * 1e6 for k, v in res.items()}
    rows = [["forward only", f"{us['tracejit fwd']:.2f}", f"{us['numpy fwd']:.2f}",
             f"{us.get('torch fwd', float('nan')):.2f}",
             f"{us['tracejit fwd'] / us['numpy fwd']:.2f}x numpy (target <= 3x)"]]
    if "torch fwd+bwd" in us:
        rows.append(["forward+backward", f"{us['tracejit fwd+bwd']:.2f}", "-",
                     f"{us['torch fwd+bwd']:.2f}",
                     f"{us['tracejit fwd+bwd'] / us['torch fwd+bwd']:.2f}x torch (target <= 1.5x)"])
    else:
        rows.append(["forward+backward", f"{us['tracejit fwd+bwd']:.2f}", "-", "n/a",
                     "torch not installed"])
    print_table("eager overhead, us per op (8-element float32, chain of 12 ops, median of 7)",
                ["mode", "tracejit", "numpy", "torch eager", "ratio"], rows)


if __name__ == "__main__":
    main()
