"""CUDA kernels from the kernel plans, against the interpreter: every elementwise op of
the op table as a one-op kernel, fused regions with broadcasting, odd sizes, NaN and
infinities. Runs on Numba's CUDA simulator (`NUMBA_ENABLE_CUDASIM=1`, which the test
command sets for this folder) or on a GPU; arrays stay small for the simulator."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import tracejit as tj
from tracejit.backends import numba_cpu
from tracejit.backends.cuda import kernels as cuda_kernels
from tracejit.codegen.plan import one_op_region, plan_elementwise
from tracejit.ops import OPS
from tracejit.ops.registry import ELEMENTWISE
from tracejit.ops.scalar import FUNCTIONS, MONOIDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from op_samples import SAMPLES  # noqa: E402

ELEMENTWISE_OPS = [op.name for op in OPS if op.kind == ELEMENTWISE and op.expr is not None]


def _on_device(arrays):
    return [cuda.to_device(np.ascontiguousarray(a)) for a in arrays]


def _run(region, arrays, env=None):
    kernel = cuda_kernels.CudaRegionKernel(region)
    return [o.copy_to_host() for o in kernel(_on_device(arrays), env)]


def test_every_elementwise_op_of_the_table_is_covered():
    assert len(ELEMENTWISE_OPS) >= 30 and "tanh" in ELEMENTWISE_OPS


@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_the_cuda_renderer_spells_every_scalar_function(fn):
    spelled = cuda_kernels.CODE_FOR_FN[fn].format(*(f"a{i}" for i in range(FUNCTIONS[fn].arity)))
    assert all(f"a{i}" in spelled for i in range(FUNCTIONS[fn].arity))
    assert all("{a}" in cuda_kernels._combine(m) and "{b}" in cuda_kernels._combine(m)
               for m in MONOIDS)


@pytest.mark.parametrize("name", ELEMENTWISE_OPS)
def test_each_elementwise_op_as_a_one_op_kernel_equals_the_interpreter(name):
    samples, _, _ = SAMPLES[name]
    for sample in samples:
        args = [np.asarray(a, np.float32) if isinstance(a, np.ndarray) and a.dtype ==
                np.float64 else a for a in sample.args]
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        if not arrays:
            continue
        attrs = dict(sample.attrs, dtype=tj.float64) if name == "cast" else sample.attrs
        region = one_op_region(OPS[name], args, attrs)
        want = numba_cpu.evaluate_by_ops(region, arrays, [])
        got = _run(region, arrays)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True)


def _region_of(fn, *example):
    t = tj.trace(fn, example, backend="interpret")
    fused = [n for n in t.graph.nodes if n.op == "fused"]
    assert len(fused) == 1 and fused[0].attrs["kind"] == "elementwise"
    return fused[0].regions[0], t


def chain(x, b):
    return ((x + b).tanh() * 0.5 + 1).sigmoid() - (x * x).exp() / (b.abs() + 1)


@pytest.mark.parametrize("shape_x,shape_b", [
    ((4, 3), (3,)), ((1, 3), (3,)), ((7, 5), (7, 1)), ((2, 3, 5), (5,)), ((9,), (1,)),
    ((1,), (1,)), ((37, 3), (37, 3))])
def test_a_fused_region_broadcasts_like_the_cpu_kernel(shape_x, shape_b):
    # traced at the call's ranks and sizes of 1 (a region is specific to both)
    region, _ = _region_of(chain, tj.ones(*shape_x), tj.ones(*shape_b))
    x = np.random.default_rng(0).standard_normal(shape_x).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(shape_b).astype(np.float32)
    out_shape = np.broadcast_shapes(x.shape, b.shape)
    want = chain(tj.from_numpy(x), tj.from_numpy(b)).numpy()
    kernel = cuda_kernels.CudaRegionKernel(region)
    got = kernel.run(_on_device([x, b]), [], [out_shape], out_shape)[0].copy_to_host()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:overflow encountered")  # exp(2e30), as intended
def test_nan_and_infinities_propagate_as_on_the_cpu():
    def f(x):
        return (x * 2).exp() + x.abs().sqrt() - (x > 0).float() * x.tanh()

    region, _ = _region_of(f, tj.ones(3))
    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -3.0], np.float32)
    with np.errstate(all="ignore"):
        want = f(tj.from_numpy(a)).numpy()
        got = cuda_kernels.CudaRegionKernel(region).run(_on_device([a]), [], [a.shape],
                                                      a.shape)[0].copy_to_host()
    np.testing.assert_allclose(got, want, rtol=2e-6, equal_nan=True)


def test_a_smaller_output_is_stored_at_its_own_index():
    # an output of shape [B, 1] next to one of [B, T]: stored where the loop is at 0
    def f(x, c):
        t = c + 1
        return x * t, t

    region, _ = _region_of(f, tj.ones(4, 5), tj.ones(4, 1))
    plan = plan_elementwise(region)
    assert not plan.flat and sorted(o.first_only for o in plan.outputs) == [(), (1,)]
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    c = np.arange(4, dtype=np.float32).reshape(4, 1)
    shapes = [(4, 5) if not o.first_only else (4, 1) for o in plan.outputs]
    arrays = [c if a.dims[-1] is None else x for a in plan.inputs]  # the region's order
    got = cuda_kernels.CudaRegionKernel(region).run(_on_device(arrays), [], shapes, (4, 5))
    want = {(4, 5): x * (c + 1), (4, 1): c + 1}
    for g, shape in zip(got, shapes):
        np.testing.assert_array_equal(g.copy_to_host(), want[shape])


def test_the_cuda_source_is_the_plan_spelled_for_the_device():
    region, _ = _region_of(chain, tj.ones(2, 3), tj.ones(3))
    src = cuda_kernels.render_elementwise(plan_elementwise(region))
    assert "@cuda.jit" in src and "cuda.gridsize(1)" in src and "prange" not in src
    # libdevice's tanh, not the CPU's vectorisable forms (the simulator runs numpy's)
    assert ("np.tanh(" if cuda_kernels.simulated() else "math.tanh(") in src
    assert "tanh_f32" not in src
    assert "np.float32(0.5)" in src  # typed constants keep float32 math in float32


# ---- row kernels: one block per row, tree reductions in shared memory -------------------
def _row_region(fn, *example):
    t = tj.trace(fn, example, backend="interpret")
    fused = [n for n in t.graph.nodes if n.op == "fused"]
    assert len(fused) == 1 and fused[0].attrs["kind"] == "row", t.graph
    return fused[0].regions[0]


def _run_row(region, arrays, full):
    kernel = cuda_kernels.CudaRowKernel(region)
    return [o.copy_to_host() for o in kernel.run(_on_device(arrays), [], full)]


@pytest.mark.parametrize("rows,n", [(3, 5), (4, 8), (5, 37)])  # rows longer than a block
def test_softmax_logsumexp_and_max_rows(rows, n):
    for fn in (lambda x: x.softmax(-1), lambda x: (x * 2).amax(-1),
               lambda x: (x + 1).amin(-1), lambda x: (x + 1).mean(-1),
               lambda x: x.logsumexp(-1, keepdim=True)):
        region = _row_region(fn, tj.ones(2, 6))
        a = np.random.default_rng(rows).standard_normal((rows, n)).astype(np.float32)
        want = fn(tj.from_numpy(a)).numpy()
        got = _run_row(region, [a], (rows, n))[0]
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-6)


def test_row_max_propagates_nan_through_the_tree():
    region = _row_region(lambda x: (x * 2).amax(-1), tj.ones(2, 6))
    a = np.random.default_rng(0).standard_normal((4, 19)).astype(np.float32)
    a[1, 17] = np.nan   # a thread's partial, late in the tree
    a[2, 0] = np.nan
    a[3, :] = -np.inf
    got = _run_row(region, [a], a.shape)[0].reshape(4)
    np.testing.assert_array_equal(got, (a * 2).max(-1))


def test_layer_norm_forward_and_backward_with_sums_over_rows():
    from tracejit.nn import functional as F

    n = 11
    region = _row_region(lambda x, w, b: F.layer_norm(x, (n,), w, b), tj.ones(2, n),
                         tj.ones(n), tj.ones(n))
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, n), (n,), (n,)))
    want = F.layer_norm(tj.from_numpy(x), (n,), tj.from_numpy(w), tj.from_numpy(b)).numpy()
    np.testing.assert_allclose(_run_row(region, [x, w, b], x.shape)[0], want, rtol=1e-5,
                               atol=1e-5)
    # the backward's row kernel: the input gradient and the weight and bias gradients,
    # sums over every row (two-stage: per block, then over the blocks), against the CPU
    # kernel of the same plan on the same arrays
    xs = [tj.randn(2, n, requires_grad=True), tj.ones(n, requires_grad=True),
          tj.ones(n, requires_grad=True)]
    t = tj.trace(lambda x_, w_, b_: F.layer_norm(x_, (n,), w_, b_), tuple(xs),
                 backend="numba")
    t(*xs).backward(tj.randn(2, n))
    fused = [nd for nd in t.backward_graph.nodes if nd.op == "fused" and
             nd.attrs["kind"] == "row"]
    assert len(fused) == 1
    _same_as_cpu(fused[0].regions[0], rows=9, n=n)


def _same_as_cpu(region, rows, n):
    cpu = numba_cpu.RowKernel(region)
    gpu = cuda_kernels.CudaRowKernel(region)
    assert any(kind == "summed" for _, kind, _ in gpu.outputs)
    rng = np.random.default_rng(rows)
    shapes = {"element": (rows, n), "column": (n,), "row": (rows, 1)}
    # positive values: a saved variance or its reciprocal square root among the inputs
    arrays = [(np.abs(rng.standard_normal(shapes[kind])) + 0.5).astype(v.dtype.np)
              for kind, v in zip(gpu.input_kinds, region.inputs)]
    zs = [n] * len(gpu.plan.sizes)  # the sizes these regions use as numbers: the row's
    want = cpu.run(arrays, zs, (rows, n))
    got = gpu.run(_on_device(arrays), zs, (rows, n))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.copy_to_host(), w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rows,n", [(5, 3), (70, 9)])  # more rows than blocks
def test_a_full_sum_fused_as_sums_over_rows(rows, n):
    region = _row_region(lambda x, g: (x.tanh() * g).sum(), tj.ones(2, 6), tj.ones(2, 6))
    _same_as_cpu(region, rows, n)


def test_the_gpu_check_script_runs():
    # its smoke mode: tiny sizes on the simulator (the figures mean nothing there)
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_check.py"), "--smoke"],
                       env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1"), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "| fused GELU * w + b" in r.stdout and "| softmax 8x64" in r.stdout
    for program in ("softmax fwd+bwd 4x16", "layer norm fwd+bwd 4x16",
                    "MLP 4-8-8-3 SGD step, batch 4"):
        assert f"| {program}: tracejit compiled |" in r.stdout, r.stdout
        assert f"| {program}: tracejit eager | " in r.stdout


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 3, 7), (9, 13, 6), (4, 0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_tiled_matmul_equals_numpy_at_sizes_that_are_not_tile_multiples(m, k, n, dtype):
    rng = np.random.default_rng(m * 100 + k)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    got = cuda_kernels.matmul(cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    np.testing.assert_allclose(got, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5)


def test_matmul_refuses_shapes_that_do_not_multiply_and_mixed_dtypes():
    a = cuda.to_device(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(2, 3\)"):
        cuda_kernels.matmul(a, a)
    with pytest.raises(cuda_kernels.Unsupported):
        cuda_kernels.matmul(a, cuda.to_device(np.ones((3, 2), np.float64)))
