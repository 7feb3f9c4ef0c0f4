"""The GPT char model of benchmarks/models/gpt.py trained under bfloat16 autocast
(`lib.autocast("cpu", dtype=lib.bfloat16)` around the forward, as nanoGPT does): tracejit
traced and eager against PyTorch eager, same initial weights and batch, 1 thread each,
interleaved in one process; the losses of the first steps are printed side by side.

Run: python benchmarks/autocast_gpt.py [small|large] [--threads N]   (default 1 thread)
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "models"))
# models/run.py fixes every library's thread count before numpy, Numba and torch start
# their pools: from --threads, else TJB_THREADS
os.environ.setdefault("TJB_THREADS", "1")
import common  # noqa: E402,F401 (the benchmark environment)
import run  # noqa: E402 (models/run.py: the model, its weights and batch)

import numpy as np  # noqa: E402

import tracejit as tj  # noqa: E402


def make_step(lib, spec, cfg, state, batch, trace: bool):
    lib.manual_seed(1)
    model = spec.build(lib, cfg)
    model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in state.items()})
    opt = spec.optimizer(lib, model, cfg)
    inputs = tuple(lib.from_numpy(a) for a in batch)

    def loss_of(*args):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            return model(*args)
    fn = tj.trace(loss_of, inputs) if trace else loss_of

    def step():
        opt.zero_grad()
        loss = fn(*inputs)
        loss.backward()
        opt.step()
        return loss
    return step


def main(size: str = "small") -> None:
    torch = run._torch()
    spec = run.load("gpt")
    cfg = spec.SIZES[size]
    state = run.reference_state(spec, cfg)
    batch = spec.data(cfg, np.random.default_rng(0))
    steps = {"tracejit traced": make_step(tj, spec, cfg, state, batch, True),
             "tracejit eager": make_step(tj, spec, cfg, state, batch, False)}
    if torch is not None:
        steps["torch eager"] = make_step(torch, spec, cfg, state, batch, False)
    losses = {name: [round(step().item(), 4) for _ in range(3)] for name, step in steps.items()}
    tj.jit.wait_for_kernels()
    for step in steps.values():
        step()
    times: dict = {name: [] for name in steps}
    for _ in range(7):
        for name, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(3):
                step()
            times[name].append((time.perf_counter() - t0) / 3)
    base = statistics.median(times["torch eager"]) if torch is not None else None
    print(f"GPT {size} under bfloat16 autocast, {run.THREADS} thread(s) each, medians of 7 "
          "interleaved runs")
    for name in steps:
        m = statistics.median(times[name])
        ratio = f", {m / base:.2f}x torch eager" if base else ""
        print(f"{name:16s} {m * 1e3:8.2f} ms/step{ratio}; first losses {losses[name]}")


if __name__ == "__main__":
    main(*[a for a in sys.argv[1:2] if not a.startswith("--")])
