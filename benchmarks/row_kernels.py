"""Row kernels: softmax over rows (2048x1024) and layer norm forward (4096x1024), float32,
traced and run by the Numba CPU backend, side by side with numpy written by hand and
PyTorch eager. Run: python benchmarks/row_kernels.py
"""
from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import contestants_main, try_import_torch  # noqa: E402


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


def _data():
    rng = np.random.default_rng(0)
    return {"xs": rng.standard_normal((2048, 1024)).astype(np.float32),
            "xl": rng.standard_normal((4096, 1024)).astype(np.float32),
            "w": rng.standard_normal(1024).astype(np.float32),
            "b": rng.standard_normal(1024).astype(np.float32),
            "dy": rng.standard_normal((4096, 1024)).astype(np.float32)}


def _tracejit(kind: str):
    import tracejit as tj
    from tracejit.nn import functional as F

    d = _data()
    xs, xl, w, b, dy = d["xs"], d["xl"], d["w"], d["b"], d["dy"]
    if kind == "softmax":
        softmax = tj.trace(lambda x: x.softmax(-1), (tj.randn(4, 1024),), backend="numba")
        ts = tj.from_numpy(xs)
        np.testing.assert_allclose(softmax(ts).numpy(), np_softmax(xs), rtol=1e-5, atol=1e-7)
        assert softmax.stats["compiles"] == 1
        return lambda: softmax(ts)
    tl, tw, tb = (tj.from_numpy(a) for a in (xl, w, b))
    if kind == "layer_norm":
        layer_norm = tj.trace(lambda x, w_, b_: F.layer_norm(x, (1024,), w_, b_),
                              (tj.randn(4, 1024), tj.ones(1024), tj.zeros(1024)),
                              backend="numba")
        np.testing.assert_allclose(layer_norm(tl, tw, tb).numpy(), np_layer_norm(xl, w, b),
                                   rtol=1e-4, atol=1e-5)
        return lambda: layer_norm(tl, tw, tb)
    gx, gw, gb = (tj.from_numpy(a.copy()).requires_grad_() for a in (xl, w, b))
    tdy = tj.from_numpy(dy)
    example = (tj.randn(4, 1024, requires_grad=True), tj.ones(1024, requires_grad=True),
               tj.zeros(1024, requires_grad=True))
    if kind == "layer_norm fwd+bwd":  # the layer traced, backward from a given gradient
        ln = tj.trace(lambda x_, w_, b_: F.layer_norm(x_, (1024,), w_, b_), example,
                      backend="numba")

        def step():
            gx.grad = gw.grad = gb.grad = None
            ln(gx, gw, gb).backward(tdy)
    else:  # the whole loss traced: (layer_norm(x) * dy).sum()
        loss = tj.trace(lambda x_, w_, b_, g_: (F.layer_norm(x_, (1024,), w_, b_) * g_).sum(),
                        example + (tj.randn(4, 1024),), backend="numba")

        def step():
            gx.grad = gw.grad = gb.grad = None
            loss(gx, gw, gb, tdy).backward()
    step()
    _, dx, dw, db = np_layer_norm_fwd_bwd(xl, w, b, dy)
    np.testing.assert_allclose(gx.grad.numpy(), dx, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(gw.grad.numpy(), dw, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(gb.grad.numpy(), db, rtol=1e-3, atol=1e-2)
    return step


def _numpy(kind: str):
    d = _data()
    if kind == "softmax":
        return lambda: np_softmax(d["xs"])
    if kind == "layer_norm":
        return lambda: np_layer_norm(d["xl"], d["w"], d["b"])
    return lambda: np_layer_norm_fwd_bwd(d["xl"], d["w"], d["b"], d["dy"])


def _torch(kind: str, compiled: bool = False):
    torch = try_import_torch()
    torch.set_num_threads(2)
    d = _data()
    if kind == "softmax":
        px = torch.from_numpy(d["xs"])
        return lambda: torch.softmax(px, -1)
    pl, pw, pb = (torch.from_numpy(d[k]) for k in ("xl", "w", "b"))
    if kind == "layer_norm":
        return lambda: torch.nn.functional.layer_norm(pl, (1024,), pw, pb)
    qx, qw, qb = (torch.from_numpy(d[k].copy()).requires_grad_() for k in ("xl", "w", "b"))
    qdy = torch.from_numpy(d["dy"])

    def loss(x_, w_, b_, g_):
        return (torch.nn.functional.layer_norm(x_, (1024,), w_, b_) * g_).sum()
    if compiled:
        loss = torch.compile(loss)

    def step():
        qx.grad = qw.grad = qb.grad = None
        loss(qx, qw, qb, qdy).backward()
    step()
    return step


def contestants() -> dict:
    found = {}
    torch = try_import_torch()
    for kind in ("softmax", "layer_norm", "layer_norm fwd+bwd"):
        found[f"{kind} numpy"] = lambda k=kind: _numpy(k)
        found[f"{kind} tracejit"] = lambda k=kind: _tracejit(k)
        if kind == "layer_norm fwd+bwd":
            found[f"{kind} tracejit, loss traced"] = lambda: _tracejit("loss")
        if torch is not None:
            found[f"{kind} torch"] = lambda k=kind: _torch(k)
    if torch is not None:
        found["layer_norm fwd+bwd torch.compile"] = lambda: _torch("loss", compiled=True)
    return found


def main() -> None:
    found = contestants()
    base = {}
    for name in found:
        kind = name.split(" ")[0] if not name.startswith("layer_norm fwd+bwd") else \
            "layer_norm fwd+bwd"
        base[name] = f"{kind} torch" if f"{kind} torch" in found else f"{kind} numpy"
    if "layer_norm fwd+bwd torch.compile" in found:
        base["layer_norm fwd+bwd tracejit, loss traced"] = "layer_norm fwd+bwd torch.compile"
    contestants_main(__file__, "row kernels, float32: softmax 2048x1024, layer norm 4096x1024 "
                     "(targets: softmax <= 1.0x PyTorch eager; layer norm fwd+bwd, loss "
                     "traced, <= 1.0x torch.compile)", found, base)


if __name__ == "__main__":
    main()
