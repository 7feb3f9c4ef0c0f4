"""Per-call overhead of a traced call on tiny inputs: guard checks and dispatch.

A function of three 8-element tensors, a Python float argument and a global
scalar, whose trace carries about ten entry guards. Timed side by side: the
eager call, the traced call on the interpret backend (the graph replayed through
eager dispatch) and on the numba backend (one host program calling one fused
kernel), and the compiled entry-guard check alone.
Run: python benchmarks/guard_overhead.py
"""
from __future__ import annotations

import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import median_time, print_table  # noqa: E402

OFFSET = 0.5


def step(x, w, b, scale):
    return ((x * w + b) * scale + OFFSET).tanh()


def run() -> dict:
    import tracejit as tj
    from tracejit.capture.trace import flatten

    x, w, b = tj.randn(8), tj.randn(8), tj.randn(8)
    traced = tj.trace(step, (x, w, b, 2.0), backend="interpret")
    compiled = tj.trace(step, (x, w, b, 2.0), backend="numba")
    tr = traced.traces[0]
    tensors, others = [], []
    flatten(((x, w, b, 2.0), {}), tensors, others)
    res = {
        "eager call": median_time(lambda: step(x, w, b, 2.0)),
        "traced call (interpret backend)": median_time(lambda: traced(x, w, b, 2.0)),
        "traced call (numba backend: host program)": median_time(
            lambda: compiled(x, w, b, 2.0)),
        "entry guard check": median_time(lambda: tr.guards.check(*tensors, *others)),
        "flattening nested arguments": median_time(lambda: flatten(((x, w, b, 2.0), {}), [], [])),
        "n_guards": len(tr.guards.guards),
    }
    assert traced.stats["compiles"] == 1 and compiled.stats["compiles"] == 1
    return res


def main() -> None:
    r = run()
    us = {k: v * 1e6 for k, v in r.items() if k != "n_guards"}
    rows = [[k, f"{v:.2f}"] for k, v in us.items()]
    rows.append(["traced (interpret) - eager",
                 f"{us['traced call (interpret backend)'] - us['eager call']:.2f}"])
    print_table(f"traced-call overhead, us per call ({r['n_guards']} entry guards, median of 7;"
                " target: guard checking <= 5 us)", ["what", "us"], rows)


if __name__ == "__main__":
    main()
