"""The CUDA backend on a real GPU, in one go: runs tests/cuda_backend without the
simulator, then times tracejit's CUDA kernels side by side with a device-to-device copy
(the bandwidth floor) and, when a CUDA build of PyTorch is installed, PyTorch CUDA:

- the fused GELU(tanh) * w + b on 64M float32 elements (an elementwise plan),
- softmax and layer norm forward on 8192x4096 float32 (row plans), and layer norm's
  backward row kernel (input gradient plus the weight and bias gradients, sums over
  rows).

and then, on CUDA tensors, traced programs against the same code run eagerly on the
device (and PyTorch CUDA when installed):

- softmax and layer norm forward+backward on 8192x4096 (each loss traced),
- the MLP 784-512-512-10 SGD training step at batch 4096 (the loss traced: fused
  forward and compiled backward on the device).

Prints a markdown table for docs/benchmarks.md. Targets on an H100/H200-class GPU:
fused elementwise >= 80% of the copy bandwidth, softmax >= 70%.
Run: NUMBA_ENABLE_CUDASIM=0 python benchmarks/gpu_check.py [--quick] [--no-tests]
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
# --smoke: tiny sizes on the simulator, to check that this script runs (tests/cuda_backend)
SMOKE = "--smoke" in sys.argv
N_ELEMENTWISE = 4096 if SMOKE else (1 << 20) if QUICK else (64 << 20)
ROWS, COLS = (8, 64) if SMOKE else (256, 4096) if QUICK else (8192, 4096)
REPEAT = 2 if SMOKE else 20


def run_tests() -> str:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", TRACEJIT_CUDA_TESTS="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "tests/cuda_backend"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    return (r.stdout.strip().splitlines() or ["(no output)"])[-1]


def timed(fn, repeat: int = REPEAT) -> float:
    """Median seconds per call, the device synchronised around each."""
    from numba import cuda

    fn()
    cuda.synchronize()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        cuda.synchronize()
        runs.append(time.perf_counter() - t0)
    return float(np.median(runs))


def region_of(fn, *example, kind):
    import tracejit as tj

    t = tj.trace(fn, example, backend="interpret")
    fused = [n for n in t.graph.nodes if n.op == "fused" and n.attrs["kind"] == kind]
    assert len(fused) == 1
    return fused[0].regions[0]


def main() -> None:
    from numba import cuda

    import tracejit as tj
    from tracejit.backends.cuda import kernels as cuda_kernels
    from tracejit.nn import functional as F

    if not SMOKE and (cuda_kernels.simulated() or not cuda.is_available()):
        sys.exit("no GPU: run with NUMBA_ENABLE_CUDASIM=0 on a machine with one")
    if not SMOKE:
        name = cuda.get_current_device().name
        print(f"GPU: {name.decode() if isinstance(name, bytes) else name}")
        if "--no-tests" not in sys.argv:  # (run apart, with their own output)
            print(f"tests/cuda_backend on the GPU: {run_tests()}")
    rows = []
    rng = np.random.default_rng(0)

    # the bandwidth floor: a device-to-device copy of one float32 array
    src = cuda.to_device(rng.standard_normal(N_ELEMENTWISE).astype(np.float32))
    dst = cuda.device_array_like(src)
    t_copy = timed(lambda: dst.copy_to_device(src))
    copy_bw = 2 * 4 * N_ELEMENTWISE / t_copy
    rows.append((f"device-to-device copy, {N_ELEMENTWISE >> 20}M float32", t_copy, copy_bw,
                 1.0))

    c = math.sqrt(2 / math.pi)

    def gelu(x, w, b):
        return x * 0.5 * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh()) * w + b

    region = region_of(gelu, tj.ones(8), tj.ones(8), tj.ones(8), kind="elementwise")
    kernel = cuda_kernels.CudaRegionKernel(region)
    xs = [cuda.to_device(rng.standard_normal(N_ELEMENTWISE).astype(np.float32))
          for _ in range(3)]
    shape = (N_ELEMENTWISE,)
    t = timed(lambda: kernel.run(xs, [], [shape], shape))
    bw = 4 * 4 * N_ELEMENTWISE / t
    rows.append((f"fused GELU * w + b, {N_ELEMENTWISE >> 20}M float32 (target >= 80% of copy)",
                 t, bw,
                 bw / copy_bw))

    x = cuda.to_device(rng.standard_normal((ROWS, COLS)).astype(np.float32))
    softmax = cuda_kernels.CudaRowKernel(region_of(lambda a: a.softmax(-1), tj.ones(2, 8),
                                                 kind="row"))
    t = timed(lambda: softmax.run([x], [], (ROWS, COLS)))
    bw = 2 * 4 * ROWS * COLS / t
    rows.append((f"softmax {ROWS}x{COLS} (target >= 70% of copy)", t, bw, bw / copy_bw))

    w = cuda.to_device(rng.standard_normal(COLS).astype(np.float32))
    b = cuda.to_device(rng.standard_normal(COLS).astype(np.float32))
    ln = cuda_kernels.CudaRowKernel(region_of(lambda a, w_, b_: F.layer_norm(a, (8,), w_, b_),
                                            tj.ones(2, 8), tj.ones(8), tj.ones(8),
                                            kind="row"))
    t = timed(lambda: ln.run([x, w, b], [], (ROWS, COLS)))
    bw = 2 * 4 * ROWS * COLS / t
    rows.append((f"layer norm forward {ROWS}x{COLS}", t, bw, bw / copy_bw))

    compiled_rows = compiled_programs(rng)

    torch = None
    try:
        import torch

        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        pass
    if torch is not None:
        px = torch.randn(ROWS, COLS, device="cuda")
        pg = [torch.randn(N_ELEMENTWISE, device="cuda") for _ in range(3)]

        def ttimed(fn, repeat=20):
            fn()
            torch.cuda.synchronize()
            runs = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                runs.append(time.perf_counter() - t0)
            return float(np.median(runs))
        t = ttimed(lambda: gelu(*pg))
        rows.append(("PyTorch CUDA eager GELU * w + b", t, 16 * N_ELEMENTWISE / t,
                     16 * N_ELEMENTWISE / t / copy_bw))
        t = ttimed(lambda: torch.softmax(px, -1))
        rows.append(("PyTorch CUDA softmax", t, 8 * ROWS * COLS / t,
                     8 * ROWS * COLS / t / copy_bw))
        compiled_rows += torch_programs(torch, ttimed)
    print("\n| what | ms | GB/s | of copy bandwidth |\n|---|---:|---:|---:|")
    for name, t, bw, frac in rows:
        print(f"| {name} | {t * 1e3:.3f} | {bw / 1e9:.0f} | {frac * 100:.0f}% |")
    print("\n| program on CUDA tensors | ms | vs tracejit eager |\n|---|---:|---:|")
    eager = {key: t for key, kind, t in compiled_rows if kind == "tracejit eager"}
    for key, kind, t in compiled_rows:
        print(f"| {key}: {kind} | {t * 1e3:.3f} | {t / eager[key]:.2f}x |")


MLP = (4, 8, 8, 3) if SMOKE else (784, 512, 512, 10)
MLP_BATCH = 4 if SMOKE else 4096
# the compiled programs' inputs (the simulator runs every thread in Python: tiny there)
P_ROWS, P_COLS = (4, 16) if SMOKE else (ROWS, COLS)


def compiled_programs(rng) -> list:
    """(program, contestant, seconds) for traced losses on CUDA tensors and the same
    code run eagerly on the device."""
    import tracejit as tj
    from tracejit import nn
    from tracejit.nn import functional as F

    out = []
    repeat = 1 if SMOKE else REPEAT
    x = tj.from_numpy(rng.standard_normal((P_ROWS, P_COLS)).astype(np.float32)).cuda()
    g = tj.from_numpy(rng.standard_normal(P_COLS).astype(np.float32)).cuda()
    w, b = tj.ones(P_COLS, device="cuda"), tj.zeros(P_COLS, device="cuda")

    def softmax_loss(a):
        return (a.softmax(-1) * g).sum()

    def layer_norm_loss(a):
        return (F.layer_norm(a, (P_COLS,), w, b) * g).sum()

    for key, fn in ((f"softmax fwd+bwd {P_ROWS}x{P_COLS}", softmax_loss),
                    (f"layer norm fwd+bwd {P_ROWS}x{P_COLS}", layer_norm_loss)):
        traced = tj.trace(fn, (x.detach().requires_grad_(),))
        for kind, f in (("tracejit compiled", traced), ("tracejit eager", fn)):
            def step(f=f):
                a = x.detach().requires_grad_()
                f(a).backward()
            out.append((key, kind, timed(step, repeat)))

    tj.manual_seed(0)
    d_in, h1, h2, d_out = MLP
    model = nn.Sequential(nn.Linear(d_in, h1), nn.ReLU(), nn.Linear(h1, h2), nn.ReLU(),
                          nn.Linear(h2, d_out)).cuda()
    opt = tj.optim.SGD(model.parameters(), lr=0.01)
    lossf = nn.CrossEntropyLoss()
    xb = tj.randn(MLP_BATCH, d_in).cuda()
    yb = tj.randint(0, d_out, (MLP_BATCH,)).cuda()

    def loss(a, y):
        return lossf(model(a), y)

    traced = tj.trace(loss, (xb, yb))
    key = f"MLP {'-'.join(map(str, MLP))} SGD step, batch {MLP_BATCH}"
    for kind, f in (("tracejit compiled", traced), ("tracejit eager", loss)):
        def train_step(f=f):
            opt.zero_grad()
            f(xb, yb).backward()
            opt.step()
        out.append((key, kind, timed(train_step, repeat)))
    return out


def torch_programs(torch, ttimed) -> list:
    """The same programs in PyTorch CUDA eager."""
    out = []
    x = torch.randn(P_ROWS, P_COLS, device="cuda")
    g = torch.randn(P_COLS, device="cuda")
    for key, fn in ((f"softmax fwd+bwd {P_ROWS}x{P_COLS}", lambda a: (a.softmax(-1) * g).sum()),
                    (f"layer norm fwd+bwd {P_ROWS}x{P_COLS}", lambda a: (
                        torch.nn.functional.layer_norm(a, (P_COLS,)) * g).sum())):
        def step(fn=fn):
            a = x.detach().requires_grad_()
            fn(a).backward()
        out.append((key, "PyTorch CUDA eager", ttimed(step)))
    d_in, h1, h2, d_out = MLP
    model = torch.nn.Sequential(torch.nn.Linear(d_in, h1), torch.nn.ReLU(),
                                torch.nn.Linear(h1, h2), torch.nn.ReLU(),
                                torch.nn.Linear(h2, d_out)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xb = torch.randn(MLP_BATCH, d_in, device="cuda")
    yb = torch.randint(0, d_out, (MLP_BATCH,), device="cuda")

    def train_step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    out.append((f"MLP {'-'.join(map(str, MLP))} SGD step, batch {MLP_BATCH}",
                "PyTorch CUDA eager", ttimed(train_step)))
    return out


if __name__ == "__main__":
    main()
