"""tj.distributed on MPI, with 2 ranks launched by mpiexec (the `distributed` extra,
installed by the tests, brings mpi4py and the mpich wheel's mpiexec)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tracejit as tj
import tracejit.distributed as dist

HERE = Path(__file__).resolve().parent


def _mpiexec() -> str:
    path = Path(sys.executable).parent / "mpiexec"
    return str(path) if path.exists() else shutil.which("mpiexec")


def _run(case: str, n: int = 2, timeout: int = 120):
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable,
                           str(HERE / "distributed_worker.py"), case],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(HERE.parent)))


def test_collectives_on_two_ranks_equal_numpy():
    r = _run("collectives")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "rank 0 ok" in r.stdout and "rank 1 ok" in r.stdout  # (lines may interleave)


@pytest.mark.parametrize("case", ["ddp", "ddp_traced", "ddp_scripted", "ddp_wraps_traced",
                                  "ddp_bucket_view", "ddp_no_sync", "ddp_errors"])
def test_data_parallel_training_on_two_ranks(case):
    # ddp*: 10 SGD steps on two ranks with half the batch each equal one process with the
    # whole batch (1e-6), eager, traced and scripted, and a traced model wrapped by DDP;
    # the gradients as views of the
    # buckets; no_sync accumulation; the error cases
    r = _run(case, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "rank 0 ok" in r.stdout and "rank 1 ok" in r.stdout  # (lines may interleave)


def test_a_rank_that_raises_takes_the_job_down_instead_of_hanging():
    import time

    t0 = time.monotonic()
    r = _run("rank_raises", timeout=60)
    assert r.returncode != 0 and time.monotonic() - t0 < 30
    assert "rank 1 failed on purpose" in r.stderr and "aborting every rank" in r.stderr
    assert "should not get here" not in r.stdout


def test_a_collective_that_a_rank_never_joins_times_out_clearly():
    import time

    t0 = time.monotonic()
    r = _run("rank_stalls", timeout=60)
    assert r.returncode != 0 and time.monotonic() - t0 < 25
    assert "all_reduce did not complete within 2 s on rank 0" in r.stderr


def test_other_backends_are_refused_naming_what_is_supported():
    for backend in ("nccl", "gloo"):
        with pytest.raises(RuntimeError, match="supports backend='mpi'"):
            dist.init_process_group(backend)


def test_collectives_before_init_say_so():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="has not been initialized"):
        dist.all_reduce(tj.ones(2))
    with pytest.raises(RuntimeError, match="has not been initialized"):
        dist.get_rank()


def test_the_ddp_example_trains_on_two_ranks():
    r = subprocess.run([_mpiexec(), "-n", "2", sys.executable,
                        str(HERE.parent / "examples" / "ddp_train.py")], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(HERE.parent)))
    assert r.returncode == 0, r.stderr[-3000:]
    words = r.stdout.split()
    assert words[:2] == ["2", "ranks,"] and float(words[-1]) > 0.85
