"""One eager op in a loop, for counting its instructions (wall time on a shared machine
varies 2x; instruction counts do not):

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python benchmarks/op_loop.py OP N

per op = (instructions at N=20001 - at N=1) / 20000. OP is one of the names below; the
tensors have 8 float32 elements (`m` is 2x4, `r` requires grad). Without arguments (as
`python -m tracejit bench` runs it) each op's wall time per call is printed instead.
"""
from __future__ import annotations

import sys
import time

import numpy as np

import tracejit as tj

x = tj.tensor(np.arange(8, dtype=np.float32))
m = tj.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
r = tj.tensor(np.arange(8, dtype=np.float32), requires_grad=True)
OPS = {
    "add": lambda: x + 1.0, "mul": lambda: x * x, "tanh": lambda: x.tanh(),
    "view": lambda: m.view(8), "getitem": lambda: m[1], "cat": lambda: tj.cat([x, x]),
    "sum": lambda: x.sum(), "rgmul": lambda: r * r,
}

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if args:
        op = OPS[args[0]]
        for _ in range(int(args[1]) if len(args) > 1 else 20000):
            op()
    else:
        print("eager op wall time per call (median of 5 loops of 20,000; noisy: count "
              "instructions for comparisons)")
        for name, op in OPS.items():
            runs = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(20000):
                    op()
                runs.append((time.perf_counter() - t0) / 20000)
            print(f"{name:<8} {sorted(runs)[2] * 1e6:6.2f} us")
