"""Which thread pool runs the parallel kernels, and when a kernel is worth running on it.

Numba offers three threading layers, and the choice decides two costs measured on the
project's 2-core machines (`benchmarks/` and docs/architecture.md, "Threads"):

- OpenMP: a parallel launch costs about 2 us, but its threads spin after a loop and starve
  the BLAS threads of the matmuls between kernels (a 784x512 matmul next to a kernel:
  8.8 ms against 1.0 ms alone; the MLP step 36-39 ms).
- workqueue: its threads sleep, so BLAS runs at full speed, but a launch costs 80-130 us.
- TBB (the `tbb` package, in the `fast` extra): about 2-5 us a launch *and* BLAS at full
  speed (the same matmul next to a kernel: 1.08-1.14 ms). This is the one to have.

So tracejit asks Numba for TBB first and falls back to workqueue, never OpenMP; the
`tbb` wheel puts `libtbb.so.12` in the environment's `lib/` folder, which is not on the
loader's path, so it is loaded from there by its full name before Numba looks for it. A
user's NUMBA_THREADING_LAYER wins over all of this.

A kernel runs in parallel only when its work pays for the launch: with `T` threads, a
kernel of `n` elements at `c` ns each saves `n * c * (1 - 1/T)` and costs the layer's
launch, so it runs serially below `n = launch / (c * (1 - 1/T))`.
"""
from __future__ import annotations

import ctypes
import os
import site
import sys
import time

import numba
import numpy as np

# the cost of one parallel launch beyond the serial call, per layer, in ns: a traced
# 1024-element kernel called in parallel against its serial twin took 14 against 9 us
# under TBB and 134 against 16 us under workqueue (`python -m tracejit.backends.threads`
# measures the bare launch: 2 us under TBB here)
LAUNCH_NS = {"tbb": 5_000, "omp": 2_000, "workqueue": 90_000}
# the work of one element of a fused kernel, in ns (GELU-like elementwise regions and
# the softmax rows measured 0.5-0.9 ns per element on one thread)
ELEMENT_NS = 0.5


def _load_tbb() -> bool:
    """Load libtbb from the environment's lib folders by path; True when it loaded."""
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix, site.getuserbase()]):
        path = os.path.join(prefix, "lib", "libtbb.so.12")
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                continue
    return False


def configure() -> str:
    """Set Numba's threading layer (unless the user did); the layer asked for."""
    tbb = _load_tbb()  # also for a user who asks for "tbb", "safe" or "default"
    if "NUMBA_THREADING_LAYER" in os.environ:
        return str(numba.config.THREADING_LAYER).lower()
    if tbb:
        # "default" takes the first layer of the priority list that loads: TBB when
        # its library is compatible, else workqueue (OpenMP is never reached)
        numba.config.THREADING_LAYER = "default"
        numba.config.THREADING_LAYER_PRIORITY = ["tbb", "workqueue", "omp"]
        return "tbb"
    numba.config.THREADING_LAYER = "workqueue"
    return "workqueue"


LAYER = configure()
THREADS = numba.config.NUMBA_NUM_THREADS


def serial_below(layer: str = LAYER, threads: int = THREADS) -> int:
    """The element count under which a kernel runs on one thread."""
    if threads <= 1:
        return 1 << 62
    launch = LAUNCH_NS.get(layer, LAUNCH_NS["workqueue"])
    return int(launch / (ELEMENT_NS * (1 - 1 / threads)))


def measure_launch(repeat: int = 2000) -> tuple[float, float]:
    """(parallel, serial) microseconds per call of a 64-element kernel: the launch cost."""
    @numba.njit(parallel=True)
    def parallel(a):
        for i in numba.prange(a.shape[0]):
            a[i] += 1.0

    @numba.njit
    def serial(a):
        for i in range(a.shape[0]):
            a[i] += 1.0

    a = np.zeros(64, np.float32)
    out = []
    for fn in (parallel, serial):
        fn(a)
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(repeat):
                fn(a)
            runs.append((time.perf_counter() - t0) / repeat * 1e6)
        out.append(sorted(runs)[2])
    return out[0], out[1]


if __name__ == "__main__":
    p, s = measure_launch()
    print(f"threading layer {numba.threading_layer()}, {THREADS} threads: parallel launch "
          f"{p:.1f} us, serial call {s:.1f} us; kernels run serially below "
          f"{serial_below()} elements")
