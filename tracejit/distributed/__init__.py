"""`tj.distributed`: collectives across processes on MPI, with PyTorch's names.

The engine is MPI through mpi4py (the `distributed` extra: `mpi4py` and the `mpich`
wheel, which brings `mpiexec`). Launch with `mpiexec -n 2 python train.py`; rank and
world size come from the launcher. A tensor's numpy array goes to MPI as a buffer, with
no copy when it is contiguous; a CUDA tensor's values travel through the host.

    import tracejit as tj
    import tracejit.distributed as dist

    dist.init_process_group("mpi")
    t = tj.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)                      # in place: the sum over ranks
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    work.wait()
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from ..backends.cuda import memory

__all__ = ["init_process_group", "is_initialized", "is_available", "get_rank",
           "get_world_size", "barrier", "all_reduce", "broadcast", "all_gather",
           "reduce_scatter", "destroy_process_group", "ReduceOp", "Work"]

_STATE = {"comm": None, "timeout": 1800.0}
DEFAULT_TIMEOUT = 1800.0  # seconds, PyTorch's default; TRACEJIT_DIST_TIMEOUT overrides


class ReduceOp:
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


def is_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError:
        raise RuntimeError("tracejit.distributed needs mpi4py and an MPI library: pip install "
                           "'tracejit[distributed]' (mpi4py and the mpich wheel)") from None
    return MPI


def init_process_group(backend: str = "mpi", init_method=None, timeout=None,
                       world_size: int = -1, rank: int = -1, **kwargs) -> None:
    """Join the processes `mpiexec` started. backend='mpi' only; the rank and world size
    are MPI's (if given, they must agree with it)."""
    if str(backend).lower() != "mpi":
        raise RuntimeError(f"tracejit.distributed supports backend='mpi' (MPI through "
                           f"mpi4py, launched with mpiexec); got backend={backend!r}")
    if _STATE["comm"] is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    MPI = _mpi()
    comm = MPI.COMM_WORLD
    if world_size not in (-1, None) and world_size != comm.Get_size():
        raise RuntimeError(f"init_process_group: world_size={world_size}, but mpiexec started "
                           f"{comm.Get_size()} processes")
    if rank not in (-1, None) and rank != comm.Get_rank():
        raise RuntimeError(f"init_process_group: rank={rank}, but MPI says this process is "
                           f"rank {comm.Get_rank()}")
    _STATE["comm"] = comm
    seconds = os.environ.get("TRACEJIT_DIST_TIMEOUT")
    if timeout is not None:
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
    _STATE["timeout"] = float(seconds) if seconds is not None else DEFAULT_TIMEOUT
    _abort_on_uncaught_exceptions(comm)


def _abort_on_uncaught_exceptions(comm) -> None:
    """A rank that dies of an exception takes the job down (MPI_Abort) instead of leaving
    the others waiting in a collective forever; the traceback is printed first."""
    previous = sys.excepthook
    if getattr(previous, "_tracejit_abort", False):
        return

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.write(f"tj.distributed: rank {comm.Get_rank()} raised {kind.__name__}; "
                         "aborting every rank\n")
        sys.stderr.flush()
        time.sleep(0.5)  # the launcher forwards what was printed before it kills the ranks
        comm.Abort(1)
    hook._tracejit_abort = True
    sys.excepthook = hook


def _wait(request, what: str) -> None:
    """Wait for a collective, at most the process group's timeout."""
    deadline = time.monotonic() + _STATE["timeout"]
    pause = 0.0
    while not request.Test():
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"tj.distributed: {what} did not complete within {_STATE['timeout']:g} s on "
                f"rank {_comm().Get_rank()}: another rank has failed or is not calling it "
                "(set timeout= in init_process_group, or TRACEJIT_DIST_TIMEOUT)")
        time.sleep(pause)
        pause = min(0.001, pause * 2 + 1e-5)


def is_initialized() -> bool:
    return _STATE["comm"] is not None


def _comm():
    comm = _STATE["comm"]
    if comm is None:
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call init_process_group.")
    return comm


def get_rank(group=None) -> int:
    return _comm().Get_rank()


def get_world_size(group=None) -> int:
    return _comm().Get_size()


def barrier(group=None, async_op: bool = False):
    work = Work(_comm().Ibarrier(), None, "barrier")
    return work if async_op else work.wait() and None


def destroy_process_group(group=None) -> None:
    _STATE["comm"] = None


class Work:
    """A collective in flight: `wait()` blocks until it is done (and finishes it: an
    average divides, a copy goes back to a non-contiguous or CUDA tensor)."""

    def __init__(self, request, finish=None, what: str = "a collective"):
        self._request, self._finish, self._done, self._what = request, finish, False, what

    def wait(self, timeout=None) -> bool:
        if not self._done:
            if self._request is not None:
                _wait(self._request, self._what)
            if self._finish is not None:
                self._finish()
            self._done = True
        return True

    def is_completed(self) -> bool:
        if not self._done and self._request is not None and self._request.Test():
            self.wait()
        return self._done or self._request is None


def _buffer(tensor):
    """(numpy buffer MPI reads and writes, how to put it back into the tensor)."""
    data = tensor._data
    if memory.is_device_array(data):
        host = data.copy_to_host()
        return host, lambda: data.copy_to_device(host)
    if data.flags.c_contiguous and data.flags.writeable:
        return data, None
    host = np.ascontiguousarray(data)
    return host, lambda: np.copyto(data, host)


def _then(*steps):
    steps = [s for s in steps if s is not None]
    if not steps:
        return None

    def run():
        for s in steps:
            s()
    return run


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` over all ranks, in place (SUM, AVG, MAX, MIN, PRODUCT)."""
    MPI = _mpi()
    comm = _comm()
    ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX,
           ReduceOp.MIN: MPI.MIN, ReduceOp.PRODUCT: MPI.PROD}
    if op not in ops:
        raise ValueError(f"all_reduce: unknown op {op!r}")
    buf, back = _buffer(tensor)
    average = (lambda: np.divide(buf, comm.Get_size(), out=buf, casting="unsafe")) \
        if op == ReduceOp.AVG else None
    finish = _then(average, back)
    work = Work(comm.Iallreduce(MPI.IN_PLACE, buf, op=ops[op]), finish, "all_reduce")
    return work if async_op else work.wait() and None


def broadcast(tensor, src: int = 0, group=None, async_op: bool = False):
    """Rank `src`'s values into `tensor` on every rank, in place."""
    comm = _comm()
    buf, back = _buffer(tensor)
    work = Work(comm.Ibcast(buf, root=src), back, "broadcast")
    return work if async_op else work.wait() and None


def all_gather(tensor_list: list, tensor, group=None, async_op: bool = False):
    """Every rank's `tensor` into `tensor_list` (one tensor per rank, same shape)."""
    comm = _comm()
    size = comm.Get_size()
    if len(tensor_list) != size:
        raise RuntimeError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a world "
                           f"of {size}")
    send = np.ascontiguousarray(_buffer(tensor)[0])
    recv = np.empty((size,) + send.shape, send.dtype)

    def scatter_back():
        for t, part in zip(tensor_list, recv):
            out, back = _buffer(t)
            np.copyto(out, part.reshape(out.shape), casting="unsafe")
            if back is not None:
                back()
    work = Work(comm.Iallgather(send, recv), scatter_back, "all_gather")
    return work if async_op else work.wait() and None


def reduce_scatter(output, input_list: list, op=ReduceOp.SUM, group=None,
                   async_op: bool = False):
    """Reduce the ranks' `input_list`s elementwise and give rank r the r-th result."""
    MPI = _mpi()
    comm = _comm()
    size = comm.Get_size()
    if len(input_list) != size:
        raise RuntimeError(f"reduce_scatter: input_list has {len(input_list)} tensors for a "
                           f"world of {size}")
    send = np.ascontiguousarray(np.stack([_buffer(t)[0] for t in input_list]))
    out, back = _buffer(output)
    ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX,
           ReduceOp.MIN: MPI.MIN, ReduceOp.PRODUCT: MPI.PROD}
    recv = np.empty(out.shape, out.dtype)

    def finish():
        if op == ReduceOp.AVG:
            np.divide(recv, size, out=recv, casting="unsafe")
        np.copyto(out, recv)
        if back is not None:
            back()
    work = Work(comm.Ireduce_scatter_block(send, recv, op=ops[op]), finish, "reduce_scatter")
    return work if async_op else work.wait() and None
