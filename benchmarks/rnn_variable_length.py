"""A variable-length RNN: RNNCell (hidden 128), batch 16, 20 batches with lengths 5 to 60,
forward and backward. tracejit traces the cell step once (sizes are symbolic, so every
length reuses it) and compiles it; timed against tracejit eager and PyTorch eager, with
the total time of a cold start (empty kernel cache, new process) reported too.
Run: python benchmarks/rnn_variable_length.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import median_time, print_table, try_import_torch  # noqa: E402

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


def main() -> None:
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
