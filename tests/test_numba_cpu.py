"""The Numba CPU backend: generated kernels against the interpreter, the fallback when
Numba fails, and the disk cache (corruption, unsafe folders, concurrent processes)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import numba_cpu
from tracejit.runtime import kernel_cache

ROOT = Path(__file__).resolve().parents[1]

# a kernel that falls back to the interpreter would still give right answers: make it fail
pytestmark = pytest.mark.filterwarnings("error:tracejit. Numba could not compile")


def chain(x, b):
    return ((x + b).tanh() * 0.5 + 1).sigmoid() - (x * x).exp() / (b.abs() + 1)


def traced(fn, *example, backend="numba"):
    return tj.trace(fn, example, backend=backend)


@pytest.mark.parametrize("shape_x,shape_b", [
    ((4, 3), (3,)), ((1, 3), (3,)), ((0, 3), (3,)), ((7, 5), (7, 1)), ((2, 3, 5), (5,)),
    ((9,), (1,)), ((1,), (1,))])
def test_kernels_equal_the_interpreter_with_broadcasting_and_odd_sizes(shape_x, shape_b):
    f = traced(chain, tj.ones(2, 3), tj.ones(3))  # example sizes differ from the calls
    g = traced(chain, tj.ones(2, 3), tj.ones(3), backend="interpret")
    x, b = tj.randn(*shape_x), tj.randn(*shape_b)
    np.testing.assert_allclose(f(x, b).numpy(), g(x, b).numpy(), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(f(x, b).numpy(), chain(x, b).numpy(), rtol=2e-6, atol=1e-6)


def test_non_contiguous_inputs():
    f = traced(chain, tj.ones(4, 3), tj.ones(3))
    x = tj.randn(3, 8).t()[::2]          # a strided view
    b = tj.randn(6)[::2]
    np.testing.assert_allclose(f(x, b).numpy(), chain(x, b).numpy(), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [tj.float64, tj.int64])
def test_other_dtypes(dtype):
    def f(x, y):
        return (x * y + 3) * (x - y)

    t = traced(f, tj.ones(3, dtype=dtype), tj.ones(3, dtype=dtype))
    x, y = tj.arange(12).reshape(3, 4).to(dtype), tj.arange(4).to(dtype)
    out = t(x, y)
    assert out.dtype is dtype
    np.testing.assert_array_equal(out.numpy(), f(x, y).numpy())


def test_code_shows_the_generated_kernels():
    f = traced(chain, tj.ones(4, 3), tj.ones(3))
    assert "@numba.njit(parallel=True" in f.code and "tanh_f32(" in f.code


def test_gradients_take_the_interpreted_path_and_match_eager():
    f = traced(chain, tj.ones(4, 3), tj.ones(3))
    x = tj.randn(5, 3, requires_grad=True)
    b = tj.randn(3, requires_grad=True)
    f(x, b).sum().backward()
    gx, gb = x.grad.clone(), b.grad.clone()
    x.grad = b.grad = None
    chain(x, b).sum().backward()
    np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(gb.numpy(), b.grad.numpy(), rtol=1e-5)


def test_a_region_numba_cannot_compile_runs_on_the_interpreter(monkeypatch):
    monkeypatch.setattr(numba_cpu, "generate", lambda region: "def flat(:\n")
    monkeypatch.setattr(numba_cpu, "_failed", set())

    def f(x):
        return (x * 3).exp() + 1

    t = traced(f, tj.ones(3))
    with pytest.warns(RuntimeWarning, match="could not compile the fused region"):
        out = t(tj.arange(3.0))
    np.testing.assert_allclose(out.numpy(), f(tj.arange(3.0)).numpy(), rtol=1e-6)


def test_cache_reuses_entries_and_recovers_from_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    src = "X = 41\n"
    assert kernel_cache.load_module(src).X == 41
    entry = next(tmp_path.glob("k_*.py"))
    for damage in ("X = (\n", "\x00\x01garbage", ""):
        for name in [n for n in sys.modules if n.startswith("tracejit_k_")]:
            del sys.modules[name]
        entry.write_text(damage)
        assert kernel_cache.load_module(src).X == 41  # rewritten, never an error
    assert kernel_cache.info()["kernels"] == 1
    assert kernel_cache.clear() >= 1 and kernel_cache.info()["kernels"] == 0


def test_unsafe_cache_folder_is_refused_with_a_warning(tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(folder))
    monkeypatch.setattr(kernel_cache, "_warned_unsafe", set())
    with pytest.warns(RuntimeWarning, match="other users can write it"):
        assert kernel_cache.load_module("Y = 2\n").Y == 2
    assert not list(folder.glob("k_*.py"))


def test_disabling_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEJIT_DISABLE_CACHE", "1")
    assert kernel_cache.load_module("Z = 3\n").Z == 3
    assert not list(tmp_path.iterdir())


def test_concurrent_processes_share_the_cache(tmp_path):
    script = ("import tracejit as tj, numpy as np\n"
              "f = tj.trace(lambda x: (x * 2).tanh() + 1, (tj.ones(3),), backend='numba')\n"
              "print(float(f(tj.ones(4)).sum()))\n")
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert abs(float(out) - 4 * (np.tanh(2.0) + 1)) < 1e-5
    assert len(list(tmp_path.glob("k_*.py"))) == 1


def test_cache_command(tmp_path):
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path))
    kernel_cache_file = tmp_path / "k_0123.py"
    kernel_cache_file.write_text("A = 1\n")
    out = subprocess.run([sys.executable, "-m", "tracejit", "cache", "info"], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "kernels: 1" in out.stdout and str(tmp_path) in out.stdout
    out = subprocess.run([sys.executable, "-m", "tracejit", "cache", "clear"], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not kernel_cache_file.exists()


ROW_PROGRAMS = {
    "softmax": lambda x, w: x.softmax(-1) * w,
    "log_softmax": lambda x, w: x.log_softmax(-1) + w,
    "layer_norm": lambda x, w: tj.nn.functional.layer_norm(x, (x.shape[-1],), w, w * 0.5),
    "sum_of_squares": lambda x, w: ((x - w) * (x - w)).sum(-1),
    "max_and_mean": lambda x, w: x.amax(-1, keepdim=True) - (x * w).mean(-1, keepdim=True),
    "prod_and_min": lambda x, w: (x * 0.5 + w).prod(-1) + x.amin(-1),
}


@pytest.mark.parametrize("name", list(ROW_PROGRAMS))
@pytest.mark.parametrize("rows,n", [(5, 7), (1, 7), (3, 1), (2, 3)])
def test_row_kernels_equal_the_interpreter(name, rows, n):
    fn = ROW_PROGRAMS[name]
    f = traced(fn, tj.randn(4, n), tj.randn(n))
    assert any(nd.op == "fused" and nd.attrs["kind"] == "row" for nd in f.graph.nodes) or n == 1
    x, w = tj.randn(rows, n), tj.randn(n)
    np.testing.assert_allclose(f(x, w).numpy(), fn(x, w).numpy(), rtol=2e-5, atol=2e-6)


def test_row_kernels_with_leading_dimensions_and_strided_input():
    fn = ROW_PROGRAMS["softmax"]
    f = traced(fn, tj.randn(2, 3, 6), tj.randn(6))
    x = tj.randn(4, 6, 5).transpose(1, 2)  # [4, 5, 6], not contiguous
    w = tj.randn(6)
    np.testing.assert_allclose(f(x, w).numpy(), fn(x, w).numpy(), rtol=2e-5, atol=2e-6)
    assert "def row(" in f.code and "exp_f32(" in f.code


@pytest.mark.filterwarnings("ignore:divide by zero", "ignore:invalid value")
@pytest.mark.parametrize("n", [5, 1 << 17])  # the serial twin and the parallel kernel
def test_division_by_zero_gives_infinities_like_numpy(n):
    def f(x, y):
        return x / y + 1

    t = traced(f, tj.ones(3), tj.ones(3))
    x = tj.from_numpy(np.tile(np.array([1.0, -1.0, 0.0, 2.0, 3.0], np.float32), n // 5 + 1)[:n])
    y = tj.from_numpy(np.tile(np.array([0.0, 0.0, 0.0, 2.0, 0.5], np.float32), n // 5 + 1)[:n])
    np.testing.assert_array_equal(t(x, y).numpy(), f(x, y).numpy())
