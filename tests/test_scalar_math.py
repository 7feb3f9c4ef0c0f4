"""Error bounds of the vectorisable math forms over the float32 range."""
import numba
import numpy as np
import pytest

from tracejit.backends.scalar_math import erf_f32, exp_f32, log_f32, tanh_f32, tanh_f64


def _elementwise(fn):
    """A compiled loop applying the scalar form `fn` to every element."""
    @numba.njit
    def apply(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])
    return apply


_apply_tanh, _apply_exp = _elementwise(tanh_f32), _elementwise(exp_f32)
_apply_log, _apply_erf = _elementwise(log_f32), _elementwise(erf_f32)
_apply_tanh64 = _elementwise(tanh_f64)


@pytest.mark.compile
def test_float64_tanh_is_exactly_one_where_numpy_s_is():
    x = np.concatenate([np.linspace(17.0, 20.0, 300001), -np.linspace(17.0, 20.0, 300001)])
    out = np.empty_like(x)
    _apply_tanh64(x, out)
    assert np.array_equal(np.abs(out) == 1.0, np.abs(np.tanh(x)) == 1.0)
    assert np.allclose(out, np.tanh(x), rtol=1e-15, atol=0)


@pytest.mark.compile
def test_tanh_f32_error_over_the_float32_range():
    x = np.concatenate([np.linspace(-10, 10, 400001), np.geomspace(1e-30, 20, 20001),
                        -np.geomspace(1e-30, 20, 20001), [0.0, 7.9, 8.0, 1e30, -1e30]])
    x = x.astype(np.float32)
    out = np.empty_like(x)
    _apply_tanh(x, out)
    exact = np.tanh(x.astype(np.float64))
    rel = np.abs(out - exact) / np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
    assert rel.max() < 1e-6, rel.max()
    assert out.dtype == np.float32 and np.all(np.abs(out) <= 1)
    # where tanh rounded to float32 is exactly +-1, so is this: its derivative 1 - t*t is
    # then exactly 0, as in eager float32
    saturated = np.abs(x) >= 10.0
    assert np.all(np.abs(out[saturated]) == 1.0)
    # ... and only there: a value one ulp short of -1 in eager is one ulp short here too
    tail = np.concatenate([np.linspace(7.0, 10.5, 200001), -np.linspace(7.0, 10.5, 200001)])
    tail = tail.astype(np.float32)
    got = np.empty_like(tail)
    _apply_tanh(tail, got)
    assert np.array_equal(np.abs(got) == 1.0, np.abs(np.tanh(tail)) == 1.0)
    special = np.array([np.nan, np.inf, -np.inf], np.float32)
    out = np.empty_like(special)
    _apply_tanh(special, out)
    assert np.isnan(out[0]) and out[1] == 1.0 and out[2] == -1.0


@pytest.mark.compile
def test_exp_f32_error_over_the_float32_range():
    x = np.concatenate([np.linspace(-87, 88, 2000001), np.geomspace(1e-30, 80, 20001),
                        -np.geomspace(1e-30, 80, 20001), [0.0]]).astype(np.float32)
    out = np.empty_like(x)
    _apply_exp(x, out)
    exact = np.exp(x.astype(np.float64))
    rel = np.abs(out - exact) / exact
    assert rel.max() < 2e-7 * 8, rel.max()  # a few float32 ulps
    edge = np.array([100.0, -100.0, np.inf, -np.inf, np.nan], np.float32)
    out = np.empty_like(edge)
    _apply_exp(edge, out)
    assert out[0] == np.inf and out[1] == 0.0 and out[2] == np.inf and out[3] == 0.0
    assert np.isnan(out[4])


@pytest.mark.compile
def test_log_f32_error_over_the_float32_range():
    x = np.concatenate([np.geomspace(1e-44, 3e38, 2000001), np.linspace(0.5, 2, 200001)])
    x = x.astype(np.float32)
    x = x[x > 0]
    out = np.empty_like(x)
    _apply_log(x, out)
    exact = np.log(x.astype(np.float64))
    err = np.abs(out - exact) / np.maximum(np.abs(exact), 1.0)  # relative, absolute near 1
    assert err.max() < 2e-7 * 4, err.max()
    edge = np.array([0.0, -1.0, np.inf, np.nan, 1.0], np.float32)
    out = np.empty_like(edge)
    _apply_log(edge, out)
    assert out[0] == -np.inf and np.isnan(out[1]) and out[2] == np.inf and np.isnan(out[3])
    assert out[4] == 0.0


@pytest.mark.compile
def test_erf_f32_error_over_the_float32_range():
    import math

    x = np.concatenate([np.linspace(-6, 6, 200001), np.geomspace(1e-30, 6, 20001),
                        -np.geomspace(1e-30, 6, 20001)]).astype(np.float32)
    out = np.empty_like(x)
    _apply_erf(x, out)
    exact = np.array([math.erf(float(v)) for v in x])
    err = np.abs(out - exact) / np.maximum(np.abs(exact), 1e-30)
    assert err.max() < 1e-6, err.max()
