"""Host programs on the device: a straight-line graph on CUDA tensors as one generated
Python function, as on the CPU (backends/host.py), over device arrays. A fused region
launches its CUDA kernel; any other op calls the device's one-op step (eager.py: a
kernel where the device has one, a copy through the host where it has none), with its
attributes decided at generation time. No Tensor, dispatch or dtype check runs per op:
`trace.code` shows the function.

    def program(t0, t1):
        v0 = t0._data
        v1 = t1._data
        v2 = f2([v0, v1], a3)  # matmul
        v3, = _fused(k4([v2], {}), 'fused[elementwise]')  # fused model.py:12
        Tv3 = _make(v3)
        return (Tv3, )
"""
from __future__ import annotations

import functools

from ...ops import OPS
from ...ops.scalar import IDENTITY
from ..host import HostProgram, returns_views, size_env  # noqa: F401 (the interface)
from ..numba_cpu import Unsupported
from ...core.lazy import lazy
from . import eager

# the CUDA renderer (it imports numba-cuda: loaded when a program is first generated)
kernels = lazy("tracejit.backends.cuda.kernels")


def _fused(outs: list, key: str) -> list:
    eager.STATS["kernels"][key] += 1
    return outs


class CudaHostProgram(HostProgram):
    """HostProgram over device arrays. Its kernels write only their own outputs (no input
    is donated), and the graph's outputs are never views of its inputs (returns_views)."""

    def __init__(self, graph, make, bindings=None, donate=None):
        super().__init__(graph, make, bindings, None)

    def _emit_op(self, em, node, args: list, out: str) -> None:
        op = OPS[node.op]
        # an element identity (detach, an expand to the same shape): the same array, which
        # nothing in the program updates (a graph with updates has no program)
        if em.alias(node, args, out, op.expr == IDENTITY):
            return
        fn = em.const(functools.partial(eager.compute, op), "f")
        em.lines.append(f"{out} = {fn}([{', '.join(args)}], {em.attrs(node.attrs)})"
                        f"  # {node.op}")

    def _emit_region(self, em, node, args: list, outs: list, into=None) -> None:
        region = node.regions[0]
        kernel = kernels.compile_region(region, node.source, node.attrs["kind"])
        if kernel is None:  # a region this renderer does not cover: its ops one by one
            self._emit_region_ops(em, node, args, outs)
            return
        env, missing = size_env(region, em.bound)
        if missing:
            raise Unsupported(f"sizes {sorted(missing)} are not known from the input shapes")
        kname = em.const(kernel, "k")
        em.ns["_fused"] = _fused
        key = f"fused[{node.attrs['kind']}]"
        em.lines.append(f"{''.join(o + ', ' for o in outs)}= _fused({kname}([{', '.join(args)}]"
                        f", {env}), {key!r})  # fused {node.source}")


def host_program(graph, make, bindings: list | None = None,
                 donate: dict | None = None) -> CudaHostProgram | None:
    """The device host program of a graph, or None when it must be interpreted."""
    try:
        return CudaHostProgram(graph, make, bindings, donate)
    except Unsupported:
        return None
