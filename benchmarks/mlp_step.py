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
from common import median_time, print_table, try_import_torch  # noqa: E402

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


def run() -> dict:
    import tracejit as tj

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    y = rng.integers(0, 10, BATCH)
    params = [(rng.standard_normal((o, i)).astype(np.float32) * 0.05,
               np.zeros(o, np.float32)) for i, o in zip(SIZES[:-1], SIZES[1:])]
    res = {"numpy by hand": median_time(lambda: numpy_step(params, x, y), repeat=5)}
    tx, ty = tj.from_numpy(x), tj.from_numpy(y)
    step, traced = make_tracejit("numba")
    step(tx, ty)
    res["tracejit traced"] = median_time(lambda: step(tx, ty), repeat=5)
    assert traced.stats["compiles"] == 1 and traced.traces[0].backwards
    eager_step, _ = make_tracejit("eager")
    res["tracejit eager"] = median_time(lambda: eager_step(tx, ty), repeat=5)
    torch = try_import_torch()
    if torch is not None:
        torch.set_num_threads(2)
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
        res["torch eager"] = median_time(torch_step, repeat=5)
    res["cold compile s"], res["warm start s"], res["numba floor s"] = compile_latency()
    return res


def main() -> None:
    t = time.perf_counter()
    r = run()
    base = r["numpy by hand"]
    rows = [[k, f"{v * 1e3:.2f}", f"{v / base:.2f}x"] for k, v in r.items() if not
            k.endswith(" s")]
    rows += [["cold compile (new process, empty cache)", f"{r['cold compile s']:.2f} s", "-"],
             ["warm start (new process, disk cache)", f"{r['warm start s'] * 1e3:.0f} ms", "-"],
             ["  Numba's floor: one cached function (new process)",
              f"{r['numba floor s'] * 1e3:.0f} ms", "-"]]
    print_table("MLP 784-512-512-10, batch 256, one SGD step (ms, median of 5; targets: traced "
                "<= 1.2x numpy, cold compile <= 3 s, warm <= 100 ms)", ["what", "time", "vs numpy"],
                rows)
    print(f"(benchmark took {time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
