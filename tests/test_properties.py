"""Property tests (hypothesis): broadcasting, promotion and traced kernels agree with eager
and numpy over generated shapes, dtypes and values."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tracejit as tj

dims = st.integers(min_value=1, max_value=4)


@st.composite
def broadcastable_pair(draw):
    rank = draw(st.integers(1, 3))
    shape = [draw(dims) for _ in range(rank)]
    other = [1 if draw(st.booleans()) else s for s in shape]
    cut = draw(st.integers(0, rank - 1))
    return tuple(shape), tuple(other[cut:])


@settings(max_examples=40, deadline=None)
@given(broadcastable_pair(), st.sampled_from(["float32", "float64", "int64", "int32"]),
       st.sampled_from(["float32", "int64", "bool"]))
def test_binary_ops_match_numpy_with_pytorch_promotion(shapes, da, db):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shapes[0]) * 3).astype(da)
    b = (rng.standard_normal(shapes[1]) * 3).astype(db)
    ta, tb = tj.from_numpy(a), tj.from_numpy(b)
    out = ta * tb + ta
    expected = a * b + a
    assert tuple(out.shape) == expected.shape
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected.astype(np.float64),
                               rtol=1e-5)
    from tracejit.core import dtypes

    assert out.dtype is dtypes.result_type(ta, tb)


@pytest.mark.compile
@settings(max_examples=25, deadline=None)
@given(broadcastable_pair(), st.sampled_from([0.5, -1.25]))
def test_traced_kernels_match_eager_for_any_shapes(shapes, c):
    def f(x, y):
        return ((x * y + c).tanh() - y.exp() / (x * x + 1)).sigmoid()

    traced = tj.trace(f, (tj.ones(*shapes[0]), tj.ones(*shapes[1])), backend="numba")
    rng = np.random.default_rng(1)
    x = tj.from_numpy(rng.standard_normal(shapes[0]).astype(np.float32))
    y = tj.from_numpy(rng.standard_normal(shapes[1]).astype(np.float32))
    np.testing.assert_allclose(traced(x, y).numpy(), f(x, y).numpy(), rtol=2e-5, atol=2e-6)


UNARY = {"tanh": lambda a: a.tanh(), "sigmoid": lambda a: a.sigmoid(),
         "relu": lambda a: a.relu(), "neg": lambda a: -a, "square": lambda a: a * a,
         "softmax": lambda a: a.softmax(-1), "center": lambda a: a - a.mean(-1, keepdim=True),
         "rowsum": lambda a: a.sum(-1, keepdim=True) * 0.1 + a,
         "rowmax": lambda a: a - a.amax(-1, keepdim=True),
         "logsumexp": lambda a: a.logsumexp(-1, keepdim=True) - a,
         "norm": lambda a: tj.nn.functional.layer_norm(a, (a.shape[-1],))}
BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / (b * b + 1)}


@st.composite
def programs(draw):
    """A random chain over x [R, N], y (broadcastable to it), w [N] and m [N, N]."""
    steps = draw(st.lists(st.one_of(
        st.tuples(st.just("u"), st.sampled_from(sorted(UNARY))),
        st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)), st.sampled_from("xyw")),
        st.tuples(st.just("m"), st.booleans())),
        min_size=2, max_size=6))
    return steps


def _run(steps, x, y, w, m):
    h, env = x, {"x": x, "y": y, "w": w}
    for step in steps:
        if step[0] == "m":  # a matmul, with the weight transposed or not
            h = h @ (m.t() if step[1] else m)
        else:
            h = UNARY[step[1]](h) if step[0] == "u" else BINARY[step[1]](h, env[step[2]])
    return (h * h).sum()


@pytest.mark.compile
@settings(max_examples=15, deadline=None, derandomize=True)  # the same programs in CI
@given(programs(), st.sampled_from([(3, 5), (40, 7), (2, 3, 4)]), st.booleans())
def test_random_programs_train_like_eager_on_the_numba_backend(steps, shape, y_is_column):
    """x: [rows, *middle, n]; y: [n] or one value per row of the last two dimensions."""
    rng = np.random.default_rng(2)
    rows, *middle, n = shape
    middle = tuple(middle)

    def tensors(r):
        y_shape = (middle + (1,) if middle else (r, 1)) if y_is_column else (n,)
        return [tj.from_numpy(rng.standard_normal(s).astype(np.float32)).requires_grad_()
                for s in ((r,) + middle + (n,), y_shape, (n,), (n, n))]

    traced = tj.trace(lambda x, y, w, m: _run(steps, x, y, w, m), tuple(tensors(rows)),
                      backend="numba")
    args = tensors(rows + 2)  # another batch size: the same trace
    loss = traced(*args)
    want_loss = _run(steps, *args)
    np.testing.assert_allclose(loss.item(), want_loss.item(), rtol=1e-4, atol=1e-4)
    loss.backward()
    got = [None if a.grad is None else a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    _run(steps, *args).backward()
    for g, a in zip(got, args):
        assert (g is None) == (a.grad is None)  # unused inputs get no gradient in both
        if g is not None:  # kernels use float32 approximations: tolerances by scale
            want = a.grad.numpy()
            np.testing.assert_allclose(g.numpy(), want, rtol=2e-4,
                                       atol=2e-5 * max(1.0, float(np.abs(want).max())))
    assert traced.stats["backward_kernels"] == 1
    with tj.no_grad():  # a trace of its own (grad mode is guarded): the host program alone
        for batch in (rows + 1, rows + 3):
            args = tensors(batch)
            np.testing.assert_allclose(traced(*args).item(), _run(steps, *args).item(),
                                       rtol=1e-4, atol=1e-4)


SHAPE_STEPS = {
    "t": lambda a: a.transpose(-1, -2),
    "flat": lambda a: a.reshape(a.shape[0], -1)[:, : a.shape[-1]],
    "unsqueeze": lambda a: a.unsqueeze(0).squeeze(0),
    "slice": lambda a: a[..., 1:],
    "cat": lambda a: tj.cat([a, a * 2], dim=-1)[..., : a.shape[-1]],
    "permute": lambda a: a.permute(*reversed(range(a.ndim))),
    "tanh_exp": lambda a: a.tanh().exp(),
    "sum0": lambda a: a.sum(0, keepdim=True) + a,
    "center": lambda a: a - a.mean(-1, keepdim=True),
    "expand": lambda a: a[..., :1].expand(*a.shape) + a,
    "gather": lambda a: a[tj.tensor([0, 0])],
}


def _chain_trains_like_eager(table, steps, shape, dtype, seed, tol, rows_after=(2, 3)):
    """`steps` (keys of `table`) applied in turn, traced on the numba backend and called
    at other batch sizes: values, dtypes and input gradients as eager's (tolerances from
    `tol`, gradient ones scaled by the gradient's size)."""
    def f(x):
        for s in steps:
            x = table[s](x)
        return x

    rng = np.random.default_rng(seed)

    def tensor(rows):
        return tj.from_numpy(rng.standard_normal((rows,) + shape[1:]).astype(dtype)
                             ).requires_grad_()

    x0 = tensor(shape[0])
    try:
        f(x0)
    except (IndexError, RuntimeError, ValueError) as err:
        # an error in eager (a slice of an empty dimension): tracing raises it too, and the
        # example is rejected rather than counted as a pass
        with pytest.raises(type(err)):
            tj.trace(f, (x0,), backend="numba")
        assume(False)
    traced = tj.trace(f, (x0,), backend="numba")
    for extra in rows_after:
        x = tensor(shape[0] + extra)
        got, want = traced(x), f(x)
        assert tuple(got.shape) == tuple(want.shape) and got.dtype is want.dtype
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                   rtol=5 * tol, atol=tol)
        g = tj.from_numpy(rng.standard_normal(tuple(want.shape)).astype(dtype))
        got.backward(g)
        gx = x.grad.clone()
        x.grad = None
        want.backward(g)
        w = x.grad.numpy()
        np.testing.assert_allclose(gx.numpy(), w, rtol=20 * tol,
                                   atol=5 * tol * max(1.0, float(np.abs(w).max())))
    assert traced.stats["backward_kernels"] >= 1


@pytest.mark.compile
@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(sorted(SHAPE_STEPS)), min_size=1, max_size=5),
       st.sampled_from([(3, 4), (2, 3, 4), (4, 6)]))
def test_random_view_and_index_programs_train_like_eager(steps, shape):
    """Views, slices up to a size, cat, indexing, expand and reductions."""
    _chain_trains_like_eager(SHAPE_STEPS, steps, shape, "float32", seed=3, tol=2e-6)


JUMPY_STEPS = {
    "where": lambda a: tj.where(a > 0, a, a * 0.1),
    "clamp": lambda a: a.clamp(-0.5, 0.5) + a * 0.01,
    "abs": lambda a: a.abs() + 0.1,
    "mask": lambda a: a * (a < 0.3).float(),
    "maximum": lambda a: tj.maximum(a, a * -0.5),
    "sqrt": lambda a: (a * a + 0.5).sqrt(),
    "log": lambda a: (a * a + 1).log(),
    "gelu": lambda a: tj.nn.functional.gelu(a),
    "log_softmax": lambda a: a.log_softmax(-1),
    "amin": lambda a: a - a.amin(-1, keepdim=True),
    "amax": lambda a: a.amax(-1, keepdim=True) * 0.5 + a,
    "var": lambda a: a.var(-1, keepdim=True) + a,
}


@pytest.mark.compile
@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(sorted(JUMPY_STEPS)), min_size=1, max_size=5),
       st.sampled_from([(3, 4), (2, 3, 5), (70, 1000)]),
       st.sampled_from(["float32", "float64"]))
def test_random_programs_with_jumps_train_like_eager(steps, shape, dtype):
    """Comparisons, masks, clamps, abs and row max/min: the compiled backward must see
    the forward's values exactly where a gradient jumps (ties of amax, abs at 0)."""
    _chain_trains_like_eager(JUMPY_STEPS, steps, shape, dtype, seed=4,
                             tol=2e-5 if dtype == "float32" else 1e-9, rows_after=(1, 2))
