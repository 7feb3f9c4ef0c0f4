"""Shared benchmark helpers: median timing and side-by-side tables."""
from __future__ import annotations

import statistics
import time


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
