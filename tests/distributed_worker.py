"""Run by tests/test_distributed.py under `mpiexec -n 2`: each case checks the
collectives against numpy on its rank and exits non-zero on a mismatch."""
from __future__ import annotations

import sys

import numpy as np

import tracejit as tj
import tracejit.distributed as dist


def collectives():
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.is_initialized() and size == 2
    vals = [np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1) for r in range(size)]
    for op, ref in [(dist.ReduceOp.SUM, sum(vals)), (dist.ReduceOp.AVG, sum(vals) / size),
                    (dist.ReduceOp.MAX, np.maximum(*vals)), (dist.ReduceOp.MIN,
                                                             np.minimum(*vals))]:
        t = tj.from_numpy(vals[rank].copy())
        data = t._data
        dist.all_reduce(t, op=op)
        np.testing.assert_allclose(t.numpy(), ref)
        assert t._data is data  # in place, no copy
        u = tj.from_numpy(vals[rank].copy())
        work = dist.all_reduce(u, op=op, async_op=True)
        work.wait()
        assert work.is_completed()
        np.testing.assert_allclose(u.numpy(), ref)
    # a non-contiguous tensor: reduced through a contiguous buffer, written back
    base = tj.from_numpy(np.ascontiguousarray(vals[rank].T.copy()))
    view = base.t()
    dist.all_reduce(view)
    np.testing.assert_allclose(view.numpy(), sum(vals))
    # broadcast from rank 1
    b = tj.from_numpy(vals[rank].copy())
    dist.broadcast(b, src=1)
    np.testing.assert_allclose(b.numpy(), vals[1])
    # all_gather and reduce_scatter
    out = [tj.zeros(2, 3) for _ in range(size)]
    dist.all_gather(out, tj.from_numpy(vals[rank]))
    for r in range(size):
        np.testing.assert_allclose(out[r].numpy(), vals[r])
    parts = [tj.from_numpy(vals[rank] + k) for k in range(size)]
    got = tj.zeros(2, 3)
    dist.reduce_scatter(got, parts)
    np.testing.assert_allclose(got.numpy(), sum(v + rank for v in vals))
    dist.barrier()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    print(f"rank {rank} ok")


def _mlp():
    from tracejit import nn

    tj.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
            for _ in range(10)]


def _reference():
    """Ten SGD steps of the whole batch in one process."""
    from tracejit import nn

    model = _mlp()
    opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches():
        opt.zero_grad()
        nn.functional.cross_entropy(model(tj.from_numpy(x)), tj.from_numpy(y)).backward()
        opt.step()
    return [p.detach().numpy() for p in model.parameters()]


def ddp_wraps_traced():
    """A traced model wrapped by DDP: the same 10 steps as the eager reference."""
    from tracejit import nn
    from tracejit.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank = dist.get_rank()
    model = _mlp()
    if rank == 1:
        with tj.no_grad():
            for p in model.parameters():
                p.mul_(0.5)
    traced = tj.trace(model, (tj.randn(4, 6),), backend="numba")
    net = DDP(traced, bucket_cap_mb=0.0005)
    opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches():
        half = slice(rank * 4, rank * 4 + 4)
        opt.zero_grad()
        nn.functional.cross_entropy(net(tj.from_numpy(x[half])),
                                    tj.from_numpy(y[half])).backward()
        opt.step()
    for got, want in zip([p.detach().numpy() for p in model.parameters()], _reference()):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    print(f"rank {rank} ok")


def ddp(mode="eager", bucket_view=False):
    from tracejit import nn
    from tracejit.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank = dist.get_rank()
    model = _mlp()
    if rank == 1:  # a different start: construction broadcasts rank 0's parameters
        with tj.no_grad():
            for p in model.parameters():
                p.mul_(0.5)
    net = DDP(model, bucket_cap_mb=0.0005, gradient_as_bucket_view=bucket_view)
    assert len(net._buckets) > 1  # several buckets: reductions start during backward
    step = net
    if mode == "traced":
        step = tj.trace(net, (tj.randn(4, 6),), backend="numba")
    elif mode == "scripted":
        step = tj.script(net)
    opt = tj.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches():
        half = slice(rank * 4, rank * 4 + 4)  # each rank: its half of the batch
        opt.zero_grad(set_to_none=not bucket_view)
        out = step(tj.from_numpy(x[half]))
        nn.functional.cross_entropy(out, tj.from_numpy(y[half])).backward()
        if bucket_view:  # the gradients are the buckets' memory
            b = net._buckets[0]
            assert b.params[0].grad._data.base is b.buffer
        opt.step()
    for got, want in zip([p.detach().numpy() for p in model.parameters()], _reference()):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    print(f"rank {rank} ok")


def ddp_traced():
    ddp("traced")


def ddp_scripted():
    ddp("scripted")


def ddp_bucket_view():
    ddp(bucket_view=True)


def ddp_no_sync():
    from tracejit import nn
    from tracejit.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank = dist.get_rank()
    model = _mlp()
    net = DDP(model)
    x, y = _batches()[0]
    half = slice(rank * 4, rank * 4 + 4)
    with net.no_sync():  # accumulated locally: the ranks' gradients differ
        nn.functional.cross_entropy(net(tj.from_numpy(x[half])), tj.from_numpy(y[half])).backward()
    local = model[0].weight.grad.numpy().copy()
    others = [tj.zeros(*local.shape) for _ in range(2)]
    dist.all_gather(others, tj.from_numpy(local))
    assert not np.allclose(others[0].numpy(), others[1].numpy())
    # the next synchronised backward reduces the accumulated sum
    nn.functional.cross_entropy(net(tj.from_numpy(x[half])), tj.from_numpy(y[half])).backward()
    g = model[0].weight.grad.numpy()
    both = [tj.zeros(*g.shape) for _ in range(2)]
    dist.all_gather(both, tj.from_numpy(g.copy()))
    np.testing.assert_allclose(both[0].numpy(), both[1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(g, (others[0].numpy() + others[1].numpy()), rtol=1e-5,
                               atol=1e-7)
    print(f"rank {rank} ok")


def ddp_errors():
    from tracejit import nn
    from tracejit.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank = dist.get_rank()
    try:
        DDP(nn.Linear(4, 3 if rank == 0 else 5))
        raise AssertionError("shapes differ: expected an error")
    except RuntimeError as err:
        assert "parameter weight has shape" in str(err), err

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x):
            return self.a(x)  # b unused
    net = DDP(TwoHeads())
    try:
        net(tj.randn(3, 4)).sum().backward()
        raise AssertionError("an unused parameter: expected an error")
    except RuntimeError as err:
        assert "find_unused_parameters=True" in str(err) and "b.weight" in str(err), err
    net = DDP(TwoHeads(), find_unused_parameters=True)
    net(tj.randn(3, 4)).sum().backward()
    assert net.module.a.weight.grad is not None
    print(f"rank {rank} ok")


def rank_raises():
    dist.init_process_group("mpi")
    if dist.get_rank() == 1:
        raise ValueError("rank 1 failed on purpose")
    t = tj.ones(3)
    dist.all_reduce(t)  # would wait forever for rank 1
    print("rank 0 should not get here")


def rank_stalls():
    dist.init_process_group("mpi", timeout=2.0)
    if dist.get_rank() == 1:
        import time
        time.sleep(30)  # alive, but never joins the collective
    dist.all_reduce(tj.ones(3))


if __name__ == "__main__":
    globals()[sys.argv[1]]()
