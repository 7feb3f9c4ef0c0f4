"""Property tests (hypothesis): broadcasting, promotion and traced kernels agree with eager
and numpy over generated shapes, dtypes and values."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
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
    from tracejit import dtypes

    assert out.dtype is dtypes.result_type(ta, tb)


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
