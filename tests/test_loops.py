"""Ops' loop nests (ops/registry.Loops): im2col and col2im as loop bodies that the CPU
backend compiles give impl's bits for every window geometry and dtype, uncompiled and
compiled (threaded and serial), run in compiled programs, and step aside to impl where
they do not apply or cannot compile."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import numba_loops
from tracejit.ops import OPS
from tracejit.ops import windows
from tracejit.ops.indexing import Slot
from tracejit.ops.registry import Loops

# (N, C, H, W, kernel, stride, padding, dilation, ceil_mode)
GEOMETRIES = [
    (2, 3, 7, 9, (3, 3), (1, 1), (1, 1), (1, 1), False),
    (1, 2, 8, 5, (2, 3), (2, 1), (0, 2), (1, 1), False),
    (2, 1, 11, 10, (3, 2), (2, 3), (2, 1), (2, 3), False),
    (1, 2, 5, 6, (5, 5), (1, 1), (2, 2), (1, 1), False),  # the kernel as large as the input
    (3, 2, 9, 9, (3, 3), (2, 2), (1, 1), (1, 1), True),   # ceil mode: a last partial window
    (1, 1, 7, 8, (2, 2), (3, 3), (1, 0), (1, 1), True),
    (2, 2, 6, 6, (1, 1), (2, 2), (0, 0), (1, 1), False),  # a 1x1 strided conv's windows
]


def _case(geometry, dtype, seed=0):
    n, c, h, w, kernel, stride, padding, dilation, ceil_mode = geometry
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal((n, c, h, w)).astype(dtype)
    else:
        x = rng.integers(0, 100, (n, c, h, w)).astype(dtype)
    attrs = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                 ceil_mode=ceil_mode)
    return x, attrs


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_the_uncompiled_bodies_give_impls_bits(geometry):
    """The loop bodies as plain Python (range for prange) are the ops' second definition:
    they must agree with the numpy impls before any compiler sees them."""
    x, attrs = _case(geometry, np.float64)
    for value in (0.0, -np.inf):
        want = OPS.unfold2d.impl(x, value=value, **attrs)
        outs, args = OPS.unfold2d.loops.args(x, value=value, **attrs)
        windows.unfold2d_loops(*args)
        np.testing.assert_array_equal(outs[0], want)
    g = np.random.default_rng(1).standard_normal(want.shape)
    want = OPS.fold2d.impl(g, x.shape, **attrs)
    outs, args = OPS.fold2d.loops.args(g, x.shape, **attrs)
    windows.fold2d_loops(*args)
    np.testing.assert_array_equal(outs[0], want)


@pytest.mark.compile
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_the_compiled_loops_give_impls_bits(geometry, dtype):
    x, attrs = _case(geometry, dtype)
    unfold = numba_loops.loop_kernel(OPS.unfold2d)
    fold = numba_loops.loop_kernel(OPS.fold2d)
    for value in (0.0, -np.inf):  # -inf: a max-pool's fill (an integer type's lowest)
        want = OPS.unfold2d.impl(x, value=value, **attrs)
        for name in ("loops", "loops_serial"):  # the threaded twin and the serial one
            outs, args = OPS.unfold2d.loops.args(x, value=value, **attrs)
            getattr(unfold.module, name)(*args)
            assert outs[0].dtype == want.dtype
            np.testing.assert_array_equal(outs[0], want)
    g = want[:, :, :, :, ::-1].copy()  # windows that differ per offset
    want = OPS.fold2d.impl(g, x.shape, **attrs)
    for name in ("loops", "loops_serial"):
        outs, args = OPS.fold2d.loops.args(g, x.shape, **attrs)
        getattr(fold.module, name)(*args)
        np.testing.assert_array_equal(outs[0], want)
    # a strided input is read as the impl reads it
    wide = np.concatenate([x, x], axis=3)[:, :, :, ::2]
    np.testing.assert_array_equal(unfold(wide, **attrs), OPS.unfold2d.impl(wide, **attrs))


@pytest.mark.compile
def test_dtypes_the_bodies_do_not_handle_run_impl():
    x, attrs = _case(GEOMETRIES[0], np.float16)
    assert OPS.unfold2d.loops.args(x, **attrs) is None
    kernel = numba_loops.loop_kernel(OPS.unfold2d)
    np.testing.assert_array_equal(kernel(x, **attrs), OPS.unfold2d.impl(x, **attrs))


@pytest.mark.compile
@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("stride, padding", [(1, 0), (2, 1), (1, "same")])
def test_compiled_convolutions_and_pools_equal_eager_bit_for_bit(stride, padding):
    """A traced conv - pool - conv with its backward on the Numba backend (the host
    program calls the loop kernels) against eager (numpy's impls)."""
    rng = np.random.default_rng(3)
    x = tj.tensor(rng.standard_normal((2, 3, 12, 11)).astype(np.float32),
                  requires_grad=True)
    w1 = tj.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    w2 = tj.tensor(rng.standard_normal((5, 4, 2, 2)).astype(np.float32), requires_grad=True)
    F = tj.nn.functional

    def f(x, w1, w2):
        y = F.max_pool2d(F.conv2d(x, w1, stride=stride, padding=padding).relu(), 2,
                         ceil_mode=True)
        return (F.conv2d(y, w2, padding=1, dilation=2) ** 2).mean()

    want = f(x, w1, w2)
    grads = tj.autograd.grad(want, (x, w1, w2))
    traced = tj.trace(f, (x, w1, w2), backend="numba")
    for _ in range(2):  # compiled at the first call, warm at the second
        got = traced(x, w1, w2)
        assert got.item() == want.item()
        for a, b in zip(tj.autograd.grad(got, (x, w1, w2)), grads):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for name in ("unfold2d", "fold2d"):  # the host program ran the loop kernels
        module = numba_loops.loop_kernel(OPS[name]).module
        assert module.loops_serial.signatures or module.loops.signatures


_LOOPS_OF = {}


def _untypable_loops(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] + _LOOPS_OF  # a dict: Numba cannot type it


class _Untypable:
    name = "untypable_op"

    @staticmethod
    def impl(x):
        return x + 1


@pytest.mark.compile
def test_a_body_numba_cannot_compile_warns_once_and_runs_impl():
    out = np.empty(3)
    _Untypable.loops = Loops(_untypable_loops, lambda x: ((out,), (x, out)))
    kernel = numba_loops.LoopKernel(_Untypable)
    x = np.arange(3.0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(kernel(x), x + 1)
        np.testing.assert_array_equal(kernel(x), x + 1)
    messages = [str(w.message) for w in seen if "Numba could not compile" in str(w.message)]
    assert messages == [messages[0]] and messages[0].startswith(
        "tracejit: Numba could not compile the loop nest of untypable_op; its numpy "
        "implementation runs")
    assert kernel.failed


def _index_cases(seed=0):
    """(x, index, dim) for gather and scatter_add: ranks 1-4, every dim, duplicate and
    negative indices."""
    rng = np.random.default_rng(seed)
    for rank in (1, 2, 3, 4):
        for dim in range(rank):
            shape = tuple(int(s) for s in rng.integers(1, 5, rank))
            size = shape[dim]
            ishape = list(shape)
            ishape[dim] = int(rng.integers(1, 6))
            index = rng.integers(-size, size, ishape).astype(np.int64)
            yield rng.standard_normal(shape).astype(np.float32), index, dim


def _run_loops(op, kernel, *args, **attrs):
    """The op's loop body on its arguments: uncompiled (kernel None) or a dispatcher."""
    outs, call = op.loops.args(*args, **attrs)
    (kernel or op.loops.body)(*call)
    return outs[0]


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.compile)])
def test_gather_scatter_add_and_row_adds_give_impls_bits(compiled):
    names = ("gather", "scatter_add", "index_scatter")
    kernels = {n: numba_loops.loop_kernel(OPS[n]).module.loops_serial if compiled else None
               for n in names}
    for x, index, dim in _index_cases():
        got = _run_loops(OPS.gather, kernels["gather"], x, index, dim=dim)
        np.testing.assert_array_equal(got, OPS.gather.impl(x, index, dim=dim))
        src = np.random.default_rng(dim).standard_normal(index.shape).astype(np.float32)
        attrs = dict(dim=dim, shape=x.shape)
        got = _run_loops(OPS.scatter_add, kernels["scatter_add"], src, index, **attrs)
        np.testing.assert_array_equal(got, OPS.scatter_add.impl(src, index, **attrs))
    rng = np.random.default_rng(5)
    for rows_shape, width in (((7,), (3,)), ((2, 5), (4, 2)), ((0,), (3,))):
        rows = rng.integers(-6, 6, rows_shape)
        g = rng.standard_normal(rows_shape + width)
        attrs = dict(shape=(6,) + width, index=(Slot(0),))
        got = _run_loops(OPS.index_scatter, kernels["index_scatter"], g, rows, **attrs)
        np.testing.assert_array_equal(got, OPS.index_scatter.impl(g, rows, **attrs))


def test_index_loops_step_aside_where_impl_must_decide():
    x = np.zeros((3, 4), np.float32)
    bad = np.array([[0, 4, 1, 2]])  # out of range: impl raises PyTorch's error
    assert OPS.gather.loops.args(x, bad, dim=0) is None
    assert OPS.scatter_add.loops.args(x[:1], bad, dim=1, shape=(1, 4)) is None
    short = np.zeros((2, 2), np.int64)  # shorter than the input off `dim`: impl's slicing
    assert OPS.gather.loops.args(x, short, dim=0) is None
    assert OPS.gather.loops.args(x.astype(np.float16), np.zeros((3, 4), np.int64),
                                 dim=0) is None
