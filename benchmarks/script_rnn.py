"""The per-sample variable-length RNN: a padded batch of 16 sequences (lengths 5..60), a
loop over the samples running nn.RNN (hidden 128) on each one's true length
(`x[i, :lengths[i]]`), a linear head, forward and backward; 20 batches per epoch.

Contestants: tracejit eager, tj.trace (one trace per length pattern until its budget,
then eager), tj.script (one program for every batch), and PyTorch eager and
torch.jit.script when PyTorch is installed; measured one after the other in one process
and each alone in its own process, with page faults per epoch. The scripted compile
(cold: new process, empty kernel cache) is reported too.
Run: python benchmarks/script_rnn.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import median_time, print_table, try_import_torch  # noqa: E402

HIDDEN, SAMPLES, INPUT, MAXLEN = 128, 16, 32, 60


def make_data(n_batches: int = 20):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n_batches):
        lengths = rng.integers(5, MAXLEN + 1, SAMPLES)
        out.append((rng.standard_normal((SAMPLES, MAXLEN, INPUT)).astype(np.float32),
                    lengths.astype(np.int64)))
    return out


def model_class(lib):
    nn = lib.nn

    class PerSample(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.RNN(INPUT, HIDDEN)
            self.head = nn.Linear(HIDDEN, 1)

        def forward(self, x, lengths):
            outs = []
            for i in range(x.shape[0]):
                n = int(lengths[i])
                out, h = self.rnn(x[i, :n].unsqueeze(1))
                outs.append(h[0, 0])
            return self.head(lib.stack(outs))

    return PerSample


def epoch(model, batches, lib):
    total = 0.0
    for x, lengths in batches:
        loss = (model(lib.from_numpy(x), lib.from_numpy(lengths)) ** 2).mean()
        loss.backward()
        total += loss.item()
    return total


def build(kind: str):
    """(model to call, stats or None) for a contestant."""
    if kind.startswith("torch"):
        import torch

        torch.manual_seed(0)
        m = model_class(torch)()
        return (torch.jit.script(m) if kind == "torch script" else m), None
    import tracejit as tj

    tj.manual_seed(0)
    m = model_class(tj)()
    if kind == "tracejit eager":
        return m, None
    if kind == "tracejit script":
        s = tj.script(m)
        return s, s.stats
    x, lengths = make_data(1)[0]
    t = tj.trace(m, (tj.from_numpy(x), tj.from_numpy(lengths)))
    return t, t.stats


COLD = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {bench!r})
import script_rnn as b
import tracejit as tj
batches = b.make_data()
model, stats = b.build("tracejit script")
t1 = time.perf_counter()
b.epoch(model, batches[:2], tj)  # the first call records, the second compiles and runs
t2 = time.perf_counter()
print(t2 - t0, t2 - t1, stats["compiles"])
"""


def faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def timed(model, batches, lib) -> tuple[float, float]:
    """(median seconds per epoch, page faults per epoch)."""
    f0 = faults()
    t = median_time(lambda: epoch(model, batches, lib), repeat=3, min_time=0.0)
    return t, (faults() - f0) / 4  # median_time runs one warm-up and three epochs


def alone(kind: str) -> None:
    """One contestant in this process: its first epoch, then the median."""
    lib = __import__("torch") if kind.startswith("torch") else __import__("tracejit")
    if kind.startswith("torch"):
        lib.set_num_threads(2)
    batches = make_data()
    model, _ = build(kind)
    epoch(model, batches, lib)
    t, f = timed(model, batches, lib)
    print(t, f)


def run() -> dict:
    batches = make_data()
    torch = try_import_torch()
    kinds = ["tracejit eager", "tracejit trace", "tracejit script"]
    if torch is not None:
        torch.set_num_threads(2)
        kinds += ["torch eager", "torch script"]
    res, stats = {}, {}
    built = {}
    for kind in kinds:
        lib = torch if kind.startswith("torch") else __import__("tracejit")
        model, st = build(kind)
        t0 = time.perf_counter()
        epoch(model, batches, lib)  # first epoch: compiles included
        res[kind + " first"] = time.perf_counter() - t0
        built[kind] = (model, lib)
        stats[kind] = st
    for kind in kinds:
        model, lib = built[kind]
        res[kind], res[kind + " faults"] = timed(model, batches, lib)
    here = os.path.abspath(__file__)
    for kind in kinds:  # each contestant alone in a new process
        out = subprocess.run([sys.executable, here, "--alone", kind], check=True,
                             capture_output=True, text=True).stdout.split()
        res[kind + " alone"], res[kind + " alone faults"] = float(out[-2]), float(out[-1])
    for kind, st in stats.items():
        if st is not None:
            res[kind + " compiles"] = st["compiles"]
            res[kind + " eager fallbacks"] = st["eager_fallbacks"]
    bench = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o700)
        out = subprocess.run([sys.executable, "-c", COLD.format(bench=bench)], check=True,
                             env=dict(os.environ, TRACEJIT_CACHE_DIR=cache),
                             capture_output=True, text=True).stdout.split()
    res["cold total s"], res["cold first batch s"], res["cold compiles"] = \
        float(out[0]), float(out[1]), int(out[2])
    return res


def main() -> None:
    r = run()
    base = r["tracejit eager"]
    torch_eager = r.get("torch eager")
    rows = []
    for kind in ("tracejit script", "tracejit trace", "tracejit eager", "torch eager",
                 "torch script"):
        if kind not in r:
            continue
        note = ""
        if kind + " compiles" in r:
            note = f"{r[kind + ' compiles']} compiles, {r[kind + ' eager fallbacks']} eager"
        rows.append([kind, f"{r[kind] * 1e3:.0f}", f"{r[kind] / base:.2f}x",
                     f"{r[kind] / torch_eager:.2f}x" if torch_eager else "-",
                     f"{r[kind + ' alone'] * 1e3:.0f}",
                     f"{r[kind + ' alone'] / r['torch eager alone']:.2f}x"
                     if torch_eager else "-",
                     f"{r[kind + ' faults']:.0f} / {r[kind + ' alone faults']:.0f}",
                     f"{r[kind + ' first'] * 1e3:.0f}", note])
    rows.append(["tracejit script, cold (new process, empty cache): import + 2 batches",
                 f"{r['cold total s']:.2f} s", "-", "-", "-", "-", "-",
                 f"{r['cold first batch s'] * 1e3:.0f}", f"{r['cold compiles']} compiles"])
    print_table(f"per-sample RNN, {SAMPLES} samples of lengths 5-{MAXLEN}, hidden {HIDDEN}, "
                "20 batches, forward+backward (ms per epoch, median of 3; together: one process, "
                "contestants one after the other; alone: each in its own process; "
                "targets: script <= 0.5x tracejit eager and <= 1.0x PyTorch eager, "
                "compile <= 3 s cold)",
                ["what", "epoch ms", "vs tracejit eager", "vs torch eager", "alone ms",
                 "alone vs torch", "faults/epoch (together / alone)", "first epoch ms",
                 "notes"], rows)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--alone":
        alone(sys.argv[2])
    else:
        main()
