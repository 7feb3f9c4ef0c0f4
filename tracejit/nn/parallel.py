"""`tj.nn.parallel.DistributedDataParallel`: data-parallel training over
`tj.distributed` (MPI), with PyTorch's constructor and semantics.

At construction the parameters' shapes are compared across ranks (a mismatch names the
parameter) and parameters and buffers are broadcast from rank 0. Gradients are grouped
into buckets of about `bucket_cap_mb`, in reverse order of registration (the order a
backward pass usually produces them). During `backward()`, a post-accumulate hook on
each parameter copies its gradient into its bucket (with
`gradient_as_bucket_view=True` the gradient *is* a view of the bucket: no copy); when a
bucket is complete its non-blocking allreduce starts at once, overlapping the rest of
the backward; a callback queued on the autograd engine waits for every bucket before
`backward()` returns and averages. A compiled (traced) backward accumulates through the
same leaves, so the same hooks fire. `no_sync()` accumulates locally.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np

from .. import distributed as dist
from ..tensor import engine
from .module import Module
from ..tensor.tensor import _make

_UNUSED = ("Expected to have finished reduction in the prior iteration before starting a "
           "new one. This error indicates that your module has parameters that were not "
           "used in producing loss. You can enable unused parameter detection by passing "
           "the keyword argument `find_unused_parameters=True` to "
           "`tj.nn.parallel.DistributedDataParallel`. Parameters that did not receive "
           "a gradient: {}")


class _Bucket:
    __slots__ = ("params", "offsets", "buffer", "ready", "work")

    def __init__(self, params, dtype):
        self.params = params
        sizes = [p._data.size for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.buffer = np.zeros(int(self.offsets[-1]), dtype)
        self.ready: set = set()
        self.work = None

    def view(self, k: int) -> np.ndarray:
        p = self.params[k]
        return self.buffer[self.offsets[k]:self.offsets[k + 1]].reshape(p._data.shape)


class DistributedDataParallel(Module):
    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, bucket_cap_mb: float = 25,
                 find_unused_parameters: bool = False, gradient_as_bucket_view: bool = False,
                 **kwargs):
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("Default process group has not been initialized, please make "
                               "sure to call init_process_group.")
        self.module = module
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._check_shapes(named)
        for _, p in module.named_parameters():
            dist.broadcast(p, src=0)
        for _, b in module.named_buffers():
            dist.broadcast(b, src=0)
        self._names = {id(p): n for n, p in named}
        self._buckets = self._plan([p for _, p in named], bucket_cap_mb * 2 ** 20)
        self._where = {id(p): (b, k) for b in self._buckets for k, p in enumerate(b.params)}
        self._queued = False
        # (event, bucket, perf_counter) per backward when set to a list: "ready" (a
        # bucket's allreduce starts), "backward_done" (the engine finished), "synced"
        self.timeline = None
        if gradient_as_bucket_view:
            for b in self._buckets:
                for k, p in enumerate(b.params):
                    p.grad = _grad_view(b, k)
        self._hooks = [p.register_post_accumulate_grad_hook(self._ready) for _, p in named]

    # ---- construction ------------------------------------------------------------------
    def _check_shapes(self, named) -> None:
        comm = dist._comm()
        mine = [(n, tuple(p._data.shape), p._data.dtype.str) for n, p in named]
        for rank, theirs in enumerate(comm.allgather(mine)):
            if theirs == mine:
                continue
            for (n, s, d), other in zip(mine, theirs):
                if (n, s, d) != tuple(other):
                    raise RuntimeError(f"DistributedDataParallel: parameter {n} has shape "
                                       f"{list(s)} here (rank {comm.Get_rank()}) but "
                                       f"{list(other[1])} on rank {rank}")
            raise RuntimeError(f"DistributedDataParallel: rank {rank} has "
                               f"{len(theirs)} parameters, this rank {len(mine)}")

    @staticmethod
    def _plan(params, cap: float) -> list:
        """Buckets of one dtype each, up to `cap` bytes, in reverse registration order."""
        buckets, current, size = [], [], 0
        for p in reversed(params):
            if current and (size + p._data.nbytes > cap or
                            p._data.dtype != current[0]._data.dtype):
                buckets.append(_Bucket(current, current[0]._data.dtype))
                current, size = [], 0
            current.append(p)
            size += p._data.nbytes
        if current:
            buckets.append(_Bucket(current, current[0]._data.dtype))
        return buckets

    # ---- the forward and backward ------------------------------------------------------
    def forward(self, *args, **kwargs):
        if self.broadcast_buffers:
            for _, b in self.module.named_buffers():
                dist.broadcast(b, src=0)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally, without communication."""
        prev = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = prev

    def _ready(self, p) -> None:
        if not self.require_backward_grad_sync:
            return
        bucket, k = self._where[id(p)]
        if not self._queued:
            engine.queue_callback(self._finish)
            self._queued = True
        view = bucket.view(k)
        if p.grad is None or p.grad._data is not view:
            np.copyto(view, p.grad._data)
            if self.gradient_as_bucket_view:
                p.grad = _grad_view(bucket, k)
        bucket.ready.add(k)
        # MPI moves a non-blocking collective along only inside MPI calls: testing the
        # buckets in flight at every hook lets them progress while the backward runs
        for b in self._buckets:
            if b.work is not None:
                b.work.is_completed()
        if len(bucket.ready) == len(bucket.params):
            bucket.work = dist.all_reduce(_Tensor(bucket.buffer), async_op=True)
            if self.timeline is not None:
                self.timeline.append(("ready", self._buckets.index(bucket),
                                      time.perf_counter()))

    def _finish(self) -> None:
        """At the end of backward(): every bucket reduced, averaged, and in the grads."""
        self._queued = False
        if self.timeline is not None:
            self.timeline.append(("backward_done", None, time.perf_counter()))
        missing = [self._names[id(p)] for b in self._buckets for k, p in enumerate(b.params)
                   if k not in b.ready]
        if missing and not self.find_unused_parameters:
            for b in self._buckets:
                b.ready.clear()
                if b.work is not None:
                    b.work.wait()
                    b.work = None
            raise RuntimeError(_UNUSED.format(", ".join(missing)))
        world = dist.get_world_size()
        for b in self._buckets:
            if b.work is None:  # unused parameters: zeros from this rank
                for k in range(len(b.params)):
                    if k not in b.ready:
                        b.view(k)[...] = 0
                b.work = dist.all_reduce(_Tensor(b.buffer), async_op=True)
            b.work.wait()
            b.buffer /= world
            for k, p in enumerate(b.params):
                if self.gradient_as_bucket_view:
                    if p.grad is None or p.grad._data is not b.view(k):
                        p.grad = _grad_view(b, k)
                elif p.grad is not None:
                    np.copyto(p.grad._data, b.view(k))
                elif k not in b.ready:
                    continue  # unused here; its reduced gradient stays in the bucket
            b.ready.clear()
            b.work = None
        if self.timeline is not None:
            self.timeline.append(("synced", None, time.perf_counter()))


def _grad_view(bucket: _Bucket, k: int):
    return _make(bucket.view(k))


def _Tensor(array: np.ndarray):
    return _make(array)


class DataParallel(Module):
    """PyTorch's single-process data parallelism, on tracejit's one device: the wrapper
    calls `module` (kept as `.module`, so state dict keys carry the `module.` prefix as
    PyTorch's do) with the inputs as they are.

    >>> model = nn.DataParallel(model)   # model.module is the wrapped network
    """

    def __init__(self, module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else [0]
        self.output_device, self.dim = output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
