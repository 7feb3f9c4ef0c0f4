"""Error bounds of the vectorisable math forms over the float32 range."""
import numba
import numpy as np

from tracejit.backends.scalar_math import exp_f32, tanh_f32


@numba.njit
def _apply_tanh(x, out):
    for i in range(x.shape[0]):
        out[i] = tanh_f32(x[i])


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


@numba.njit
def _apply_exp(x, out):
    for i in range(x.shape[0]):
        out[i] = exp_f32(x[i])


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
