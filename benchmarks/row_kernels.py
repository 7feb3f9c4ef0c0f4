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


def np_layer_norm_fwd_bwd(x, w, b, dy, eps=1e-5):
    """Layer norm forward and backward written by hand."""
    mu = x.mean(-1, keepdims=True)
    c = x - mu
    rstd = 1 / np.sqrt((c * c).mean(-1, keepdims=True) + eps)
    xhat = c * rstd
    y = xhat * w + b
    g = dy * w
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    return y, dx, (dy * xhat).sum(0), dy.sum(0)


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
    dy = rng.standard_normal((4096, 1024)).astype(np.float32)
    tdy = tj.from_numpy(dy)
    gx, gw, gb = (tj.from_numpy(a.copy()).requires_grad_() for a in (xl, w, b))
    ln_grad = tj.trace(lambda x_, w_, b_: F.layer_norm(x_, (1024,), w_, b_),
                       (tj.randn(4, 1024, requires_grad=True), tj.ones(1024, requires_grad=True),
                        tj.zeros(1024, requires_grad=True)), backend="numba")

    def tj_fwd_bwd():
        gx.grad = gw.grad = gb.grad = None
        ln_grad(gx, gw, gb).backward(tdy)
    tj_fwd_bwd()
    _, dx, dw, db = np_layer_norm_fwd_bwd(xl, w, b, dy)
    np.testing.assert_allclose(gx.grad.numpy(), dx, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(gw.grad.numpy(), dw, rtol=1e-3, atol=1e-2)
    assert ln_grad.stats["backward_kernels"] >= 1
    res["layer_norm fwd+bwd numpy"] = median_time(lambda: np_layer_norm_fwd_bwd(xl, w, b, dy),
                                                  repeat=5)
    res["layer_norm fwd+bwd tracejit"] = median_time(tj_fwd_bwd, repeat=5)
    torch = try_import_torch()
    if torch is not None:
        torch.set_num_threads(2)
        px, pl = torch.from_numpy(xs), torch.from_numpy(xl)
        pw, pb = torch.from_numpy(w), torch.from_numpy(b)
        res["softmax torch"] = median_time(lambda: torch.softmax(px, -1), repeat=5)
        res["layer_norm torch"] = median_time(
            lambda: torch.nn.functional.layer_norm(pl, (1024,), pw, pb), repeat=5)
        qx, qw, qb = (torch.from_numpy(a.copy()).requires_grad_() for a in (xl, w, b))
        qdy = torch.from_numpy(dy)

        def torch_fwd_bwd():
            qx.grad = qw.grad = qb.grad = None
            torch.nn.functional.layer_norm(qx, (1024,), qw, qb).backward(qdy)
        res["layer_norm fwd+bwd torch"] = median_time(torch_fwd_bwd, repeat=5)
    return res


def main() -> None:
    r = run()
    rows = []
    for name in ("softmax", "layer_norm", "layer_norm fwd+bwd"):
        base = r[f"{name} numpy"]
        for who in ("numpy", "tracejit", "torch"):
            key = f"{name} {who}"
            if key in r:
                rows.append([key, f"{r[key] * 1e3:.2f}", f"{r[key] / base:.2f}x"])
    print_table("row kernels, float32 (ms, median of 5; targets: softmax <= 0.35x numpy, "
                "layer norm fwd+bwd <= 0.5x numpy)",
                ["kernel", "ms", "vs numpy"], rows)


if __name__ == "__main__":
    main()
