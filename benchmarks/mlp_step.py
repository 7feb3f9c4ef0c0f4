"""One SGD training step of an MLP 784-512-512-10 on a batch of 256 (float32):
tracejit (traced loss, compiled forward and backward) vs a hand-written numpy
forward+backward, tracejit eager and PyTorch eager. Also compile latency: a cold
compile in a fresh process and a warm start from the disk cache, next to Numba's own
floor for a warm start (loading and calling one trivial cached function).
Run: python benchmarks/mlp_step.py
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import (contestants_main, print_table, try_import_jax,  # noqa: E402
                    try_import_torch)

SIZES = (784, 512, 512, 10)
BATCH, LR = 256, 0.01


def numpy_step(params, x, y):
    """Forward, softmax cross-entropy, backward and the SGD update, by hand."""
    (w1, b1), (w2, b2), (w3, b3) = params
    h1 = np.maximum(x @ w1.T + b1, 0)
    h2 = np.maximum(h1 @ w2.T + b2, 0)
    z = h2 @ w3.T + b3
    z = z - z.max(1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(len(y)), y]).mean()
    dz = p
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    dh2 = (dz @ w3) * (h2 > 0)
    dh1 = (dh2 @ w2) * (h1 > 0)
    grads = [(dz.T @ h2, dz.sum(0)), (dh2.T @ h1, dh2.sum(0)), (dh1.T @ x, dh1.sum(0))][::-1]
    for (w, b), (gw, gb) in zip(params, grads):
        w -= LR * gw
        b -= LR * gb
    return loss


def make_tracejit(backend: str):
    import tracejit as tj
    from tracejit import nn

    tj.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = tj.optim.SGD(model.parameters(), lr=LR)

    def loss_fn(x, y):
        return nn.functional.cross_entropy(model(x), y)

    if backend != "eager":
        loss_fn = tj.trace(loss_fn, (tj.randn(8, 784), tj.randint(0, 10, (8,))),
                           backend=backend)

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        return loss
    return step, loss_fn


COMPILE_SCRIPT = """
import time, sys
t0 = time.perf_counter()
import numba  # noqa: F401
t1 = time.perf_counter()
sys.path.insert(0, {bench!r})
from mlp_step import make_tracejit
import tracejit as tj
step, fn = make_tracejit("numba")
x, y = tj.randn(256, 784), tj.randint(0, 10, (256,))
step(x, y)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""

# Numba's own floor: one trivial cached function, loaded and called in a new process
FLOOR_MODULE = """
import numba
@numba.njit(cache=True)
def add(a, b):
    for i in range(a.shape[0]):
        a[i] += b[i]
"""
FLOOR_SCRIPT = """
import time, sys
t0 = time.perf_counter()
import numba  # noqa: F401
t1 = time.perf_counter()
import numpy as np
sys.path.insert(0, {folder!r})
import floor_module
a = np.ones(4)
floor_module.add(a, a)
print(t1 - t0, time.perf_counter() - t1)
"""


def _new_process(script: str, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.split()[1])


def compile_latency() -> tuple[float, float, float]:
    """(cold seconds, warm seconds beyond importing numba, Numba's floor for the same), each
    in a new process. Python writes and reads its bytecode caches, as it does by default."""
    bench = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o700)
        env["TRACEJIT_CACHE_DIR"] = cache
        cold = _new_process(COMPILE_SCRIPT.format(bench=bench), env)
        warm = statistics.median(_new_process(COMPILE_SCRIPT.format(bench=bench), env)
                                 for _ in range(3))
        with open(os.path.join(cache, "floor_module.py"), "w") as f:
            f.write(FLOOR_MODULE)
        floor = [_new_process(FLOOR_SCRIPT.format(folder=cache), env) for _ in range(4)][1:]
        # (the first run compiles the floor function and writes Numba's cache)
    return cold, warm, statistics.median(floor)


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    y = rng.integers(0, 10, BATCH)
    params = [(rng.standard_normal((o, i)).astype(np.float32) * 0.05,
               np.zeros(o, np.float32)) for i, o in zip(SIZES[:-1], SIZES[1:])]
    return x, y, params


def setup_numpy():
    x, y, params = _data()
    return lambda: numpy_step(params, x, y)


def _setup_tracejit(backend: str):
    import tracejit as tj

    x, y, _ = _data()
    tx, ty = tj.from_numpy(x), tj.from_numpy(y)
    step, traced = make_tracejit(backend)
    step(tx, ty)
    if backend != "eager":
        assert traced.stats["compiles"] == 1 and traced.traces[0].backwards
    return lambda: step(tx, ty)


def setup_torch():
    torch = try_import_torch()
    torch.set_num_threads(2)
    x, y, _ = _data()
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    px, py = torch.from_numpy(x), torch.from_numpy(y)

    def torch_step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(px), py)
        loss.backward()
        opt.step()
    return torch_step


def setup_jax():
    jax = try_import_jax()
    import jax.numpy as jnp

    x, y, params = _data()
    state = [[(jnp.asarray(w), jnp.asarray(b)) for w, b in params]]
    jx, jy = jnp.asarray(x), jnp.asarray(y)

    def loss(ps, x_, y_):
        h = x_
        for i, (w, b) in enumerate(ps):
            h = h @ w.T + b
            if i < len(ps) - 1:
                h = jax.nn.relu(h)
        return -jnp.take_along_axis(jax.nn.log_softmax(h), y_[:, None], 1).mean()

    @jax.jit
    def step(ps, x_, y_):
        value, grads = jax.value_and_grad(loss)(ps, x_, y_)
        return [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(ps, grads)], value

    def run():
        state[0], value = step(state[0], jx, jy)
        value.block_until_ready()
    return run


def contestants() -> dict:
    found = {"numpy by hand": setup_numpy,
             "tracejit traced": lambda: _setup_tracejit("numba"),
             "tracejit eager": lambda: _setup_tracejit("eager")}
    if try_import_torch() is not None:
        found["torch eager"] = setup_torch
    if try_import_jax() is not None:
        found["jax.jit"] = setup_jax
    return found


def main() -> None:
    t = time.perf_counter()
    found = contestants()
    base = {name: "numpy by hand" for name in found}
    if "jax.jit" in found:
        base["tracejit traced"] = ("numpy by hand", "jax.jit")
    r = contestants_main(__file__, "MLP 784-512-512-10, batch 256, one SGD step (targets: "
                         "traced <= 1.0x numpy by hand and <= 1.0x jax.jit)", found, base)
    if not r:  # --alone
        return
    cold, warm, floor = compile_latency()
    print_table("compile latency (targets: cold <= 3 s, warm <= 100 ms beyond Numba's floor)",
                ["what", "time"],
                [["cold compile (new process, empty cache)", f"{cold:.2f} s"],
                 ["warm start (new process, disk cache), beyond importing numba",
                  f"{warm * 1e3:.0f} ms"],
                 ["Numba's floor: one cached function (new process)", f"{floor * 1e3:.0f} ms"]])
    print(f"(benchmark took {time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
