"""A variable-length RNN: RNNCell (hidden 128), batch 16, 20 batches with lengths 5 to 60,
forward and backward. tracejit traces the cell step once (sizes are symbolic, so every
length reuses it) and compiles it; timed against tracejit eager and PyTorch eager, with
the total time of a cold start (empty kernel cache, new process) reported too.
Run: python benchmarks/rnn_variable_length.py; with --isolated, the warm epochs are also
timed with each contestant alone in its own process (PyTorch's OpenMP threads and
tracejit's TBB threads share the two cores when they run in one process).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import (contestants_main, median_time, print_table,  # noqa: E402
                    try_import_torch)

HIDDEN, BATCH, INPUT = 128, 16, 32
LENGTHS = [5 + (k * 11) % 56 for k in range(20)]  # 20 batches, lengths 5..60


def make_data():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((n, BATCH, INPUT)).astype(np.float32) for n in LENGTHS]


def tracejit_epoch(cell, step, batches, lib):
    total = 0.0
    for xs in batches:
        h = lib.zeros(BATCH, HIDDEN)
        for t in range(xs.shape[0]):
            h = step(lib.from_numpy(xs[t]), h)
        loss = (h * h).mean()
        loss.backward()
        total += loss.item()
    return total


def run_tracejit(backend: str, batches):
    import tracejit as tj

    tj.manual_seed(0)
    cell = tj.nn.RNNCell(INPUT, HIDDEN)
    step = cell if backend == "eager" else tj.trace(
        cell, (tj.randn(BATCH, INPUT), tj.randn(BATCH, HIDDEN)), backend=backend)
    return cell, step, (lambda: tracejit_epoch(cell, step, batches, tj))


COLD = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {bench!r})
import rnn_variable_length as r
cell, step, epoch = r.run_tracejit("numba", r.make_data())
epoch()
print(time.perf_counter() - t0, step.stats["compiles"])
"""


def run() -> dict:
    batches = make_data()
    res = {}
    _, step, epoch = run_tracejit("numba", batches)
    res["tracejit traced"] = median_time(epoch, repeat=3, min_time=0.0)
    res["compiles"] = step.stats["compiles"]
    _, _, eager = run_tracejit("eager", batches)
    res["tracejit eager"] = median_time(eager, repeat=3, min_time=0.0)
    torch = try_import_torch()
    if torch is not None:
        torch.set_num_threads(2)
        torch.manual_seed(0)
        cell = torch.nn.RNNCell(INPUT, HIDDEN)
        res["torch eager"] = median_time(lambda: tracejit_epoch(cell, cell, batches, torch),
                                         repeat=3, min_time=0.0)
    bench = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o700)
        out = subprocess.run([sys.executable, "-c", COLD.format(bench=bench)], check=True,
                             env=dict(os.environ, TRACEJIT_CACHE_DIR=cache),
                             capture_output=True, text=True).stdout.split()
    res["cold total s"], res["cold compiles"] = float(out[0]), int(out[1])
    return res


def _setup_tracejit(backend: str):
    return run_tracejit(backend, make_data())[2]


def _setup_torch():
    torch = try_import_torch()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    cell = torch.nn.RNNCell(INPUT, HIDDEN)
    batches = make_data()
    return lambda: tracejit_epoch(cell, cell, batches, torch)


def contestants() -> dict:
    found = {"tracejit traced": lambda: _setup_tracejit("numba"),
             "tracejit eager": lambda: _setup_tracejit("eager")}
    if try_import_torch() is not None:
        found["torch eager"] = _setup_torch
    return found


def main() -> None:
    if {"--alone", "--isolated"} & set(sys.argv[1:]):
        found = contestants()
        base = "torch eager" if "torch eager" in found else "tracejit eager"
        contestants_main(__file__, f"variable-length RNN epoch, lengths {min(LENGTHS)}-"
                         f"{max(LENGTHS)} (target: traced <= 0.6x PyTorch eager)", found,
                         {name: base for name in found}, repeat=3)
        return
    r = run()
    base = r.get("torch eager", r["tracejit eager"])
    rows = [[k, f"{r[k] * 1e3:.1f}", f"{r[k] / base:.2f}x"]
            for k in ("tracejit traced", "tracejit eager", "torch eager") if k in r]
    rows.append(["cold start, new process (import, trace, compile, run)",
                 f"{r['cold total s']:.2f} s", "-"])
    print_table(f"variable-length RNN, 20 batches, lengths {min(LENGTHS)}-{max(LENGTHS)} "
                f"(ms per epoch, median of 3; traces compiled: {r['compiles']} warm, "
                f"{r['cold compiles']} cold; targets: warm <= 1.0x PyTorch, cold <= 5 s)",
                ["what", "time", "vs torch"], rows)


if __name__ == "__main__":
    main()
