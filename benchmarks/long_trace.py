"""Tracing and compiling cost against graph length: a chain of elementwise ops.

`x * 1.0001 + 0.001` and `(x - 1e-4).abs()` alternating, N ops in all, traced on the
numba backend: seconds to trace and optimise (every pass), for the first call
(compiling its kernels: a chain becomes regions of at most 96 ops, and repeated
regions share one compiled module) and for a later call. Each N runs in a new
process with a kernel cache of its own, so nothing is warm.
Run: python benchmarks/long_trace.py [N ...]   (default 1000 10000 100000)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import print_table  # noqa: E402

CHILD = """
import json, sys, time
import tracejit as tj
n = int(sys.argv[1])
def chain(x):
    for k in range(n // 2):
        x = x * 1.0001 + 0.001 if k % 2 else (x - 1e-4).abs()
    return x
t0 = time.perf_counter()
traced = tj.trace(chain, (tj.ones(4),), backend="numba")
t1 = time.perf_counter()
traced(tj.ones(64))
t2 = time.perf_counter()
traced(tj.ones(64))
t3 = time.perf_counter()
nodes = len(traced.traces[0].recorded.nodes)
regions = sum(node.op == "fused" for node in traced.graph.nodes)
print(json.dumps([nodes, regions, t1 - t0, t2 - t1, t3 - t2]))
"""


def run(n: int) -> list:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRACEJIT_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", CHILD, str(n)], env=env, check=True,
                             capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:] if not a.startswith("--")] or [1000, 10000, 100000]
    rows = []
    for n in sizes:
        nodes, regions, trace_s, first_s, later_s = run(n)
        rows.append([f"{nodes:,}", regions, f"{trace_s:.2f}", f"{first_s:.2f}",
                     f"{later_s * 1e3:.1f}"])
    print_table("long traces (new process and cache each; target: 100k ops compile well "
                "under a minute)", ["ops", "kernels", "trace+passes s", "first call s",
                                    "later call ms"], rows)


if __name__ == "__main__":
    main()
