"""Shared benchmark helpers: median timing and side-by-side tables."""
from __future__ import annotations

import os
import statistics
import time

# What a program that starts often opts into (tracejit/_startup.py, runtime/memory.py): the
# objects alive after the import frozen out of the collector's walks, and memory counted
# from the import on. Set before tracejit is imported here or in the processes started here.
os.environ.setdefault("TRACEJIT_GC_FREEZE", "1")
os.environ.setdefault("TRACEJIT_MEMORY_STATS", "1")
# Kernel benchmarks time compiled kernels and compile latency: kernels compile at their
# first call, waiting (models/run.py measures the background compiler's first steps).
os.environ.setdefault("TRACEJIT_BACKGROUND_COMPILE", "0")


def median_time(fn, *, repeat: int = 7, min_time: float = 0.05) -> float:
    """Median seconds per call of fn() over `repeat` runs of an auto-sized loop."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= min_time:
            break
        n *= 2
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def try_import_torch():
    try:
        import torch

        torch.set_num_threads(1)
        return torch
    except ImportError:
        return None


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n{title}")
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    fmt = " | ".join("{:<%d}" % w for w in widths)
    print(fmt.format(*header))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(fmt.format(*[str(c) for c in r]))


# ---- contestants: side by side in one process, and each alone in its own ----------------

def page_faults() -> int:
    """Page faults of this process so far (minor + major)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def _loop_count(fn, min_time: float) -> int:
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= min_time or n >= 1 << 16:
            return n
        n *= 2


def _timed_round(fn, n: int) -> tuple[float, int]:
    f0 = page_faults()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n, page_faults() - f0


def measure_together(steps: dict, *, repeat: int = 5, min_time: float = 0.05) -> dict:
    """{name: (median seconds per call, page faults per call)}, the contestants interleaved:
    each round times every contestant once, so a slow spell of the machine hits all."""
    counts = {}
    for name, fn in steps.items():
        fn()  # warm-up: compiles, caches, first-touch of buffers
        counts[name] = _loop_count(fn, min_time)
    runs = {name: [] for name in steps}
    for _ in range(repeat):
        for name, fn in steps.items():
            runs[name].append(_timed_round(fn, counts[name]))
    return {name: (statistics.median(t for t, _ in r),
                   sum(f for _, f in r) / (counts[name] * len(r))) for name, r in runs.items()}


def measure_alone(script: str, name: str, *, env: dict | None = None) -> tuple[float, float]:
    """Run `python SCRIPT --alone NAME` in a new process: (seconds per call, faults per
    call) of that contestant with nothing else in the process."""
    import json
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, script, "--alone", name], check=True, text=True,
                         capture_output=True, env=env or dict(os.environ)).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return res["time"], res["faults"]


def contestants_main(script: str, title: str, contestants: dict, baselines: dict, *,
                     unit: float = 1e3, unit_name: str = "ms", repeat: int = 5) -> dict:
    """A benchmark's command line. `contestants`: {name: setup}, where setup() builds the
    contestant (checking its answer against the oracle) and returns the callable to time;
    contestants that cannot run here (PyTorch or JAX missing) are left out by the caller.
    `baselines`: {name: baseline name, or a tuple of them} — the ratio columns.
    `--alone NAME` times one contestant and prints JSON; `--isolated` adds a column of each
    contestant alone in its own process next to the interleaved one."""
    import json
    import sys

    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--alone":
        fn = contestants[args[1]]()
        t, f = measure_together({args[1]: fn}, repeat=repeat)[args[1]]
        print(json.dumps({"time": t, "faults": f}))
        return {}
    isolated = "--isolated" in args
    steps = {name: setup() for name, setup in contestants.items()}
    together = measure_together(steps, repeat=repeat)
    alone = {name: measure_alone(script, name) for name in contestants} if isolated else {}
    header = ["contestant", f"{unit_name} together", "faults/call", "ratio"]
    if isolated:
        header += [f"{unit_name} alone", "faults/call alone", "ratio alone"]
    rows = []
    for name in contestants:
        bases = baselines.get(name, name)
        bases = [b for b in ((bases,) if isinstance(bases, str) else bases) if b in together]

        def ratios(times: dict, t: float, named: bool, bases=bases) -> str:
            return ", ".join(f"{t / times[b][0]:.2f}x" + (f" vs {b}" if named else "")
                             for b in bases) or "-"
        t, f = together[name]
        row = [name, f"{t * unit:.3g}", f"{f:.1f}", ratios(together, t, True)]
        if isolated:
            ta, fa = alone[name]
            row += [f"{ta * unit:.3g}", f"{fa:.1f}", ratios(alone, ta, False)]
        rows.append(row)
    print_table(title + f" (median of {repeat}; together: interleaved in one process"
                + ("; alone: each in its own process)" if isolated else ")"), header, rows)
    return {"together": together, "alone": alone}


def try_import_jax():
    try:
        import jax

        jax.config.update("jax_platforms", "cpu")
        return jax
    except ImportError:
        return None
