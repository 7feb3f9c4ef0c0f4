"""Data-parallel scaling: the MLP 784-512-512-10 SGD step at a global batch of 512 on 1 and
2 ranks (each rank its share of the batch), eager DDP, and how much of the gradient
communication the backward hides: per step, the time from the end of the backward to
the gradients being synchronised (exposed communication), against the time the first
bucket's allreduce started before the backward ended (communication overlapped).
Run: python benchmarks/ddp_scaling.py (it starts `mpiexec -n 1` and `-n 2` itself).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GLOBAL_BATCH = 512


def worker() -> None:
    import numpy as np

    import tracejit as tj
    import tracejit.distributed as dist
    from tracejit import nn
    from tracejit.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    tj.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10)), bucket_cap_mb=1)
    opt = tj.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(rank)
    local = GLOBAL_BATCH // size
    x = tj.from_numpy(rng.standard_normal((local, 784)).astype(np.float32))
    y = tj.from_numpy(rng.integers(0, 10, local))

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    for _ in range(3):
        step()
    times, exposed, overlapped = [], [], []
    for _ in range(15):
        model.timeline = []
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        events = {e: t for e, _, t in model.timeline if e != "ready"}
        first = min(t for e, _, t in model.timeline if e == "ready")
        exposed.append(events["synced"] - events["backward_done"])
        overlapped.append(events["backward_done"] - first)
    if rank == 0:
        print(json.dumps({"ranks": size, "step": statistics.median(times),
                          "exposed": statistics.median(exposed),
                          "overlapped": statistics.median(overlapped),
                          "buckets": len(model._buckets)}))


def main() -> None:
    here = Path(__file__).resolve()
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        print("ddp_scaling: no mpiexec next to this Python (pip install '.[distributed]')")
        return
    rows = []
    for n in (1, 2):
        out = subprocess.run([str(mpiexec), "-n", str(n), sys.executable, str(here),
                              "--worker"], capture_output=True, text=True, check=True,
                             env=dict(os.environ, OMP_NUM_THREADS=str(max(1, 2 // n)),
                                      OPENBLAS_NUM_THREADS=str(max(1, 2 // n)))).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    base = rows[0]["step"]
    print(f"\nDDP, MLP 784-512-512-10, global batch {GLOBAL_BATCH}, {rows[0]['buckets']} "
          "buckets of about 1 MB (ms, median of 15 steps; BLAS threads split between ranks)")
    print("ranks | step ms | vs 1 rank | exposed comm ms | comm started before the end of "
          "backward, ms")
    for r in rows:
        print(f"{r['ranks']:5} | {r['step'] * 1e3:7.2f} | {r['step'] / base:8.2f}x | "
              f"{r['exposed'] * 1e3:15.3f} | {r['overlapped'] * 1e3:.3f}")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        main()
