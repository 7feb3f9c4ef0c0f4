"""The Numba CPU backend: generated kernels against the interpreter, the fallback when
Numba fails, and the disk cache (corruption, unsafe folders, concurrent processes)."""
from __future__ import annotations

import math
import os
import re
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


@pytest.fixture(autouse=True)
def _both_twins(monkeypatch):
    """Kernels of 65,536 elements or more run threaded from their first call here, so the
    sizes below exercise both twins whichever threading layer is in use."""
    monkeypatch.setattr(numba_cpu, "SERIAL_BELOW", 1 << 16)
    monkeypatch.setattr(numba_cpu, "THREADED_AFTER", 0)


def test_a_kernel_runs_threaded_from_its_third_large_call(monkeypatch):
    monkeypatch.setattr(numba_cpu, "THREADED_AFTER", 2)
    twin = numba_cpu.ThreadedTwin()
    assert [twin.worth(1 << 20) for _ in range(4)] == [False, False, True, True]
    assert not twin.worth(10) and twin.worth(1 << 20)  # small calls stay serial


def chain(x, b):
    return ((x + b).tanh() * 0.5 + 1).sigmoid() - (x * x).exp() / (b.abs() + 1)


def traced(fn, *example, backend="numba"):
    return tj.trace(fn, example, backend=backend)


@pytest.mark.compile
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


@pytest.mark.compile
def test_strided_views_of_the_loop_shape_run_the_flat_kernel_on_copies(monkeypatch):
    def gates(x, w):  # an LSTM cell's gates: four column chunks of one product
        i, f, g, o = (x @ w).chunk(4, 1)
        return i.sigmoid() * g.tanh() + f.sigmoid() * o

    x, w = tj.randn(6, 5), tj.randn(5, 16)
    f = traced(gates, x, w)
    called = []
    original = numba_cpu.launch
    monkeypatch.setattr(numba_cpu, "launch", lambda owner, name, args: (
        called.append(name), original(owner, name, args))[1])
    for rows in (6, 3):  # below and above the copy limit
        monkeypatch.setattr(numba_cpu, "COPY_STRIDED_BELOW", 1 << 16 if rows == 6 else 0)
        x = tj.randn(rows, 5)
        np.testing.assert_allclose(f(x, w).numpy(), gates(x, w).numpy(), rtol=2e-6,
                                   atol=1e-6)
    assert called[0].startswith("flat") and called[-1].startswith("nd"), called


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
    assert f.code.startswith("# host program of chain\ndef program(t0, t1):")


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


def test_softmax_row_kernel_exponentiates_once_and_divides_once_per_row():
    """The plan of a softmax row: a max pass, a sum pass that keeps exp(x - max) in the
    output buffer (the spill), and an output pass that reads it back and multiplies by
    the row sum's reciprocal."""
    t = traced(lambda x: x.softmax(-1), tj.randn(4, 8))
    region = next(n for n in t.graph.nodes if n.op == "fused").regions[0]
    src = numba_cpu.generate_row(region).split("def row_serial")[0]
    src = src[src.index("\ndef "):]  # the kernel, not the module's imports
    sum_pass, output_pass = src.split("inv_")[0], src.split("inv_", 1)[1]
    assert sum_pass.count("exp_f32(") == 2  # float32 and float64 accumulators
    assert "exp_f32(" not in output_pass and "= o0[r, j]" in output_pass
    assert "= np.float32(1) / " in src and " / " not in output_pass.split("\n", 1)[1]


@pytest.mark.compile
def test_a_per_channel_value_is_computed_once_per_channel_not_per_pixel():
    """A batch norm's scale rsqrt(var + eps) of a [1, C, 1, 1] variance sits in the
    channel loop of the [N, C, H, W] loop nest, with the read of its operand; per-pixel
    work stays innermost. The kernel still equals the interpreter's result."""
    def norm(x, var):
        return x * (var + 1e-5).rsqrt()

    x, var = tj.randn(2, 3, 4, 5), tj.rand(1, 3, 1, 1)
    t = traced(norm, x, var)
    region = next(n for n in t.graph.nodes if n.op == "fused").regions[0]
    nd = numba_cpu.generate(region).split("def nd(")[1].split("def nd_serial")[0]

    def depth(text):
        line = next(ln for ln in nd.splitlines() if text in ln)
        return len(line) - len(line.lstrip())
    channel = depth("for i1_ in") + 4
    assert depth("[0, i1_, 0, 0]") == depth("math.sqrt") == channel  # var's read, rsqrt
    assert depth("= i1[i0_, i1_, i2_, i3_]") == depth("o0[i0_, i1_, i2_, i3_] =") > channel
    np.testing.assert_allclose(t(x, var).numpy(), norm(x, var).numpy(), rtol=1e-6)


@pytest.mark.compile
@pytest.mark.parametrize("a,b", [
    (np.random.default_rng(0).random(257).astype("float32"), np.array(0.9999)),
    (np.arange(-300, 300, dtype="int32") * 16777, np.array(0.1, "float32")),
    (np.random.default_rng(1).random((3, 5)).astype("float32"),
     np.random.default_rng(2).random(5)),
    (np.arange(12, dtype="int64").reshape(3, 4) * 3, np.array(7, "int32"))])
def test_a_fused_op_computes_in_eager_s_promoted_dtype(a, b):
    """A 0-dim tensor of a wider dtype (or a float32 tensor next to int32 values) takes
    part in promotion as eager's dispatch says: its operands are cast to the compute
    dtype first, so the kernel's bits are eager's (float64 arithmetic rounded once
    differs in the last place)."""
    def f(x, y):
        return (x * y + y).relu() / 2, x + y < y * 2

    x, y = tj.tensor(a), tj.tensor(b)
    got, want = traced(f, x, y)(x, y), f(x, y)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())


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


def test_the_cache_keeps_bytecode_where_python_is_told_to_write_none(tmp_path, monkeypatch):
    """PYTHONDONTWRITEBYTECODE: the cache writes a module's bytecode itself (and lists it
    in the entry's manifest), so the next process does not compile the source again."""
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    src = "Y = 6 * 7\n"
    assert kernel_cache.load_module(src).Y == 42
    pyc = list((tmp_path / "__pycache__").glob("k_*.pyc"))
    assert len(pyc) == 1
    sums = next(tmp_path.glob("k_*.sums")).read_text()
    assert pyc[0].name in sums
    for name in [n for n in sys.modules if n.startswith("tracejit_k_")]:
        del sys.modules[name]
    kernel_cache._LISTING.clear()  # as a new process reads the folder
    before = pyc[0].stat().st_mtime_ns
    assert kernel_cache.load_module(src).Y == 42  # verified, loaded from the bytecode
    assert pyc[0].exists() and pyc[0].stat().st_mtime_ns == before


def test_unsafe_cache_folder_is_refused_with_a_warning(tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(folder))
    monkeypatch.setattr(kernel_cache, "_warned_unsafe", set())
    with pytest.warns(RuntimeWarning, match="other users can write it"):
        assert kernel_cache.load_module("Y = 2\n").Y == 2
    assert not list(folder.glob("k_*.py"))


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="giving a folder to another user needs root")
def test_cache_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 65534, 65534)
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(folder))
    monkeypatch.setattr(kernel_cache, "_warned_unsafe", set())
    with pytest.warns(RuntimeWarning, match="belongs to another user"):
        assert kernel_cache.load_module("Y = 5\n").Y == 5
    assert not list(folder.glob("k_*.py"))


@pytest.mark.parametrize("damage", ["garbage", "truncate"])
@pytest.mark.parametrize("which", ["nbi", "nbc"])
@pytest.mark.compile  # compiles in the processes it starts
def test_damaged_numba_cache_files_are_recompiled(tmp_path, damage, which):
    script = ("import tracejit as tj\n"
              "f = tj.trace(lambda x: (x * 3).tanh() + 1, (tj.ones(5),), backend='numba')\n"
              "print(float(f(tj.ones(5)).sum()))\n")
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path))

    def run():
        r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, timeout=300,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        return float(r.stdout)

    first = run()
    files = list((tmp_path / "__pycache__").glob(f"*.{which}"))
    assert files
    for f in files:
        f.write_bytes(b"garbage\n" if damage == "garbage" else f.read_bytes()[:20])
    assert run() == first and run() == first  # recovered, and the cache works again


def _in_a_new_process(script: str, cache) -> str:
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(cache))
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, timeout=300,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "could not compile" not in r.stderr, r.stderr[-2000:]
    return r.stdout


@pytest.mark.compile  # compiles in the processes it starts
def test_a_flipped_bit_in_a_numba_data_file_is_a_miss(tmp_path):
    """The constant 2.5 in a kernel's machine code read as 3.5: the data file fails its
    digest in the entry's manifest, and the kernel is compiled again."""
    import struct

    script = ("import tracejit as tj\n"
              "f = tj.trace(lambda x: (x * 2.5).tanh() + 1, (tj.ones(5),), backend='numba')\n"
              "print(f(tj.full((5,), 0.25)).tolist())\n")
    first = _in_a_new_process(script, tmp_path)
    assert eval(first) == pytest.approx([float(np.tanh(np.float32(0.625))) + 1] * 5)
    damaged = 0
    for f in (tmp_path / "__pycache__").glob("*.nbc"):
        data = f.read_bytes()
        damaged += data.count(struct.pack("<f", 2.5))
        f.write_bytes(data.replace(struct.pack("<f", 2.5), struct.pack("<f", 3.5)))
    assert damaged
    assert _in_a_new_process(script, tmp_path) == first
    assert _in_a_new_process(script, tmp_path) == first  # written again, and loaded


_TWO_KERNELS = ("import tracejit as tj\n"
                "f = tj.trace(lambda x: x.exp() * 3 + 1, (tj.ones(5),), backend='numba')\n"
                "g = tj.trace(lambda x, y: x * y - 2, (tj.ones(5), tj.ones(5)), "
                "backend='numba')\n"
                "print(f(tj.ones(5)).tolist(), g(tj.ones(5), tj.full((5,), 4.0)).tolist())\n")


def _exchange_data_files(cache):
    a, b = sorted((cache / "__pycache__").glob("*.nbc"))
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)


@pytest.mark.parametrize("script", [_TWO_KERNELS, (
    "import tracejit as tj\n"
    "f = tj.trace(lambda x: x.exp() * 3 + 1, (tj.ones(5),), backend='numba')\n"
    "g = tj.trace(lambda x: x * 4 - 2, (tj.ones(5),), backend='numba')\n"
    "print(f(tj.ones(5)).tolist(), g(tj.ones(5)).tolist())\n")], ids=["2-and-3-args", "same-args"])
@pytest.mark.compile  # compiles in the processes it starts
def test_two_kernels_data_files_exchanged_are_a_miss(tmp_path, script):
    """Kernels of the same parameters ran each other's machine code (g gave f's values)."""
    first = _in_a_new_process(script, tmp_path)
    _exchange_data_files(tmp_path)
    assert _in_a_new_process(script, tmp_path) == first


@pytest.mark.compile  # compiles in the processes it starts
def test_a_kernel_whose_files_pass_their_digests_but_fail_to_load_compiles_again(tmp_path):
    """Files that are what was written but not what this module's Numba wrote (here,
    another kernel's data file, with the manifests written over them): the first call
    fails, and the module is imported afresh without them. Retrying the dispatcher that
    had loaded the other kernel's overload failed again with `TypeError: flat_serial
    expected 3 arguments` on every call."""
    first = _in_a_new_process(_TWO_KERNELS, tmp_path)
    _exchange_data_files(tmp_path)
    script = ("import sys\n"
              "from tracejit.runtime import kernel_cache\n"
              "for p in kernel_cache.cache_dir().glob('k_*.py'):\n"
              "    m = type(sys)('m')\n"
              "    m.__file__ = str(p)\n"
              "    kernel_cache.record_compiled(m)\n")
    _in_a_new_process(script, tmp_path)
    assert _in_a_new_process(_TWO_KERNELS, tmp_path) == first
    assert _in_a_new_process(_TWO_KERNELS, tmp_path) == first


@pytest.mark.compile  # compiles in the processes it starts
def test_a_read_only_cache_folder_compiles_in_memory(tmp_path):
    """Not op by op on the interpreter after a warning that Numba could not compile."""
    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o500)
    try:
        env = dict(os.environ, TRACEJIT_CACHE_DIR=str(folder))
        r = subprocess.run([sys.executable, "-c", _TWO_KERNELS], cwd=ROOT, env=env,
                           timeout=300, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "cannot be written; compiling in memory" in r.stderr
        assert "could not compile" not in r.stderr
        assert r.stdout == _in_a_new_process(_TWO_KERNELS, tmp_path / "rw")
        assert not list(folder.iterdir())
    finally:
        os.chmod(folder, 0o700)


@pytest.mark.compile
def test_a_kernel_numba_cannot_type_runs_on_the_interpreter(tmp_path, monkeypatch):
    """Numba compiles at a kernel's first call: a kernel it cannot type (here a statement
    naming an undefined function in each kernel) falls back for its region, with one
    warning, instead of raising TypingError to the caller."""
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(numba_cpu, "_failed", set())
    for name in ("generate", "generate_row"):
        real = getattr(numba_cpu, name)
        monkeypatch.setattr(numba_cpu, name, lambda region, real=real: re.sub(
            r"(\n    for [^\n]*\n)", r"\1        undefined_function_0()\n", real(region)))

    def f(x):
        return (x * 3).exp().softmax(-1) + 1

    t = traced(f, tj.ones(2, 3))
    x = tj.randn(4, 5)
    with pytest.warns(RuntimeWarning, match="could not compile the fused region") as seen:
        out = t(x)
        again = t(x)
    messages = [str(w.message) for w in seen if "could not compile" in str(w.message)]
    assert messages and all("TypingError" in m and re.search(r"test_numba_cpu.py:\d+", m)
                            for m in messages)
    np.testing.assert_allclose(out.numpy(), f(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(again.numpy(), f(x).numpy(), rtol=1e-6)


def test_disabling_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEJIT_DISABLE_CACHE", "1")
    assert kernel_cache.load_module("Z = 3\n").Z == 3
    assert not list(tmp_path.iterdir())


@pytest.mark.compile  # compiles in the processes it starts
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


@pytest.mark.compile  # compiles in the processes it starts
def test_kernels_loaded_from_the_cache_in_a_new_process_give_the_same_results(tmp_path):
    """Every kind of kernel — elementwise, row with lanes, row with sums over rows, serial
    and parallel — compiled in one process and loaded from the disk cache in the next."""
    script = (
        "import tracejit as tj, numpy as np\n"
        "from tracejit.nn import functional as F\n"
        "f = tj.trace(lambda x, w, b: F.layer_norm(x.softmax(-1) * 2 + b, (x.shape[-1],), w,"
        " b), (tj.randn(2, 300, requires_grad=True), tj.randn(300, requires_grad=True),"
        " tj.randn(300, requires_grad=True)), backend='numba')\n"
        "tj.manual_seed(0)\n"
        "for rows in (3, 400, 400, 400):\n"  # the threaded twin from the third large call
        "    x, w, b = (tj.randn(*s, requires_grad=True) for s in ((rows, 300), (300,), (300,)))\n"
        "    f(x, w, b).pow(2).sum().backward()\n"
        "    print(*[float(t.grad.sum()) for t in (x, w, b)])\n")
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, timeout=300,
                           capture_output=True, text=True) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout and len(runs[0].stdout.split()) == 12


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


@pytest.mark.compile
@pytest.mark.parametrize("name", list(ROW_PROGRAMS))
@pytest.mark.parametrize("rows,n", [(5, 7), (1, 7), (3, 1), (2, 3), (3, 16), (4, 17),
                                    (70, 1000)])  # lanes of 8 and a remainder; threads
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


@pytest.mark.compile
@pytest.mark.filterwarnings("ignore:divide by zero", "ignore:invalid value")
@pytest.mark.parametrize("n", [5, 1 << 17])  # the serial twin and the parallel kernel
def test_division_by_zero_gives_infinities_like_numpy(n):
    def f(x, y):
        return x / y + 1

    t = traced(f, tj.ones(3), tj.ones(3))
    x = tj.from_numpy(np.tile(np.array([1.0, -1.0, 0.0, 2.0, 3.0], np.float32), n // 5 + 1)[:n])
    y = tj.from_numpy(np.tile(np.array([0.0, 0.0, 0.0, 2.0, 0.5], np.float32), n // 5 + 1)[:n])
    np.testing.assert_array_equal(t(x, y).numpy(), f(x, y).numpy())


@pytest.mark.compile
@pytest.mark.parametrize("n", [5, 8, 21])
def test_row_max_and_min_propagate_nan_like_numpy(n):
    def f(x):
        return x.amax(-1), x.amin(-1), x.softmax(-1)

    t = traced(f, tj.randn(2, n))
    a = np.random.default_rng(0).standard_normal((4, n)).astype(np.float32)
    a[1, n - 1] = np.nan     # in the remainder (or the last lane)
    a[2, 0] = np.nan         # in the first lane
    a[3, :] = -np.inf
    x = tj.from_numpy(a)
    with np.errstate(invalid="ignore"):
        for got, want in zip(t(x), f(x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, equal_nan=True)


@pytest.mark.compile
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool", "float64"])
def test_row_max_and_min_of_other_dtypes_equal_numpy(dtype):
    # all-negative integer rows: the running extreme starts from the type's own limit
    # (an elementwise op first, so that the reduction runs in a fused row kernel)
    def f(x):
        y = x.logical_not() if dtype == "bool" else x + x
        return y.amax(-1), y.amin(-1)

    t = traced(f, tj.zeros(2, 7, dtype=getattr(tj, dtype)))
    assert any(n.op == "fused" and n.attrs["kind"] == "row" for n in t.graph.nodes)
    rng = np.random.default_rng(1)
    for a in (rng.integers(-9, -1, (5, 300)), rng.integers(2, 9, (5, 33)),
              rng.integers(0, 2, (3, 1))):
        x = tj.from_numpy(a.astype(dtype))
        for got, want in zip(t(x), f(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert t.stats["compiles"] == 1


@pytest.mark.compile
@pytest.mark.parametrize("rows,n", [(6, 5), (300, 257)])  # serial twin; threads
def test_sums_over_rows_fuse_into_the_row_kernel(rows, n):
    from tracejit.nn import functional as F

    def f(x, w, b):
        return F.layer_norm(x, (n,), w, b)

    args = [tj.randn(rows, n, requires_grad=True), tj.randn(n, requires_grad=True),
            tj.randn(n, requires_grad=True)]
    t = traced(f, *[tj.randn(3, n, requires_grad=True)] + args[1:])
    dy = tj.randn(rows, n)
    t(*args).backward(dy)
    got = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    f(*args).backward(dy)
    for g, a in zip(got, args):
        np.testing.assert_allclose(g.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-4)
    bg = t.backward_graph
    rows_kernels = [nd for nd in bg.nodes if nd.op == "fused" and nd.attrs["kind"] == "row"]
    assert len(rows_kernels) == 1
    inner = [(nd.op, len(nd.outputs[0].shape)) for nd in rows_kernels[0].regions[0].nodes]
    assert inner.count(("sum_to", 1)) == 2  # the weight's and the bias's gradient
    assert not any(nd.op == "sum_to" for nd in bg.nodes)


@pytest.mark.compile
def test_a_bias_gradient_joins_the_activation_gradient_kernel():
    def f(x, w, b):
        return (x @ w + b).relu().sum()

    t = traced(f, tj.randn(4, 3, requires_grad=True), tj.randn(3, 5, requires_grad=True),
               tj.randn(5, requires_grad=True))
    args = [tj.randn(9, 3, requires_grad=True), tj.randn(3, 5, requires_grad=True),
            tj.randn(5, requires_grad=True)]
    t(*args).backward()
    assert not any(nd.op == "sum_to" for nd in t.backward_graph.nodes)
    got = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    f(*args).backward()
    for g, a in zip(got, args):
        np.testing.assert_allclose(g.numpy(), a.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.compile
@pytest.mark.parametrize("n", [1000, 5000])  # float32 partial sums; float64 for long rows
def test_row_sums_stay_accurate(n):
    t = traced(lambda x: x.mean(-1, keepdim=True) * 1.0 + x.sum(-1, keepdim=True),
               tj.randn(2, 8))
    a = (np.random.default_rng(1).standard_normal((3, n)) * 10 + 1e4).astype(np.float32)
    want = a.astype(np.float64).mean(-1, keepdims=True) + a.astype(np.float64).sum(
        -1, keepdims=True)
    np.testing.assert_allclose(t(tj.from_numpy(a)).numpy(), want, rtol=2e-6)


@pytest.mark.compile
@pytest.mark.parametrize("rows", [63, 64, 65, 200_000])  # around one flush; many flushes
def test_sums_over_rows_stay_accurate_across_float32_partial_sums(rows):
    # a bias gradient: float32 partial sums over FLUSH_ROWS rows, then float64 (summed in
    # float32 over all 200,000 rows, the error would be about 1e-5 of the sum)
    b = tj.zeros(16, requires_grad=True)
    t = traced(lambda x, b_: (x + b_).tanh(), tj.randn(3, 16), b)
    a = (np.random.default_rng(2).standard_normal((rows, 16)) * 0.3).astype(np.float32)
    dy = (np.random.default_rng(3).standard_normal((rows, 16)) + 5).astype(np.float32)
    t(tj.from_numpy(a), b).backward(tj.from_numpy(dy))
    want = ((1 - np.tanh(a.astype(np.float64)) ** 2) * dy).sum(0)
    np.testing.assert_allclose(b.grad.numpy(), want, rtol=3e-6)


@pytest.mark.compile
def test_a_full_sum_of_an_elementwise_product_fuses_as_sums_over_rows():
    # (out * g).sum(): the product is summed per column inside the row kernel, and
    # only the row of column sums is summed outside it
    def f(x, g):
        return (x.tanh() * g).sum()

    t = traced(f, tj.randn(4, 8), tj.randn(4, 8))
    fused = [n for n in t.graph.nodes if n.op == "fused"]
    assert len(fused) == 1 and fused[0].attrs["kind"] == "row"
    assert [n.op for n in fused[0].regions[0].nodes][-1] == "sum_to"
    for shape in [(300, 257), (1, 5), (70, 1)]:
        x, g = tj.randn(*shape, dtype=tj.float64), tj.randn(*shape, dtype=tj.float64)
        np.testing.assert_allclose(t(x.float(), g.float()).item(), f(x, g).item(),
                                   rtol=2e-5)
    assert t.stats["compiles"] == 1


def test_layer_norm_forward_writes_its_output_once():
    # no spill: (x - mean) is cheaper to recompute than to store and load again
    from tracejit.nn import functional as F

    t = traced(lambda x, w, b: F.layer_norm(x, (8,), w, b), tj.randn(4, 8), tj.ones(8),
               tj.zeros(8))
    region = next(n for n in t.graph.nodes if n.op == "fused").regions[0]
    src = numba_cpu.generate_row(region).split("def row_serial")[0]
    src = src[src.index("\ndef "):]  # the kernel, not the module's imports
    assert src.count("o0[r, j] =") == 1 and "= o0[r, j]" not in src


@pytest.mark.compile
def test_a_row_kernel_returns_a_value_that_is_the_same_in_every_row():
    def f(x, y):
        s = y * y + 1                      # [N], computed inside the row kernel
        h = x / s
        return (h - h.mean(-1, keepdim=True)) * s, s * 2

    t = traced(f, tj.randn(3, 5), tj.randn(5))
    assert any(nd.op == "fused" and nd.attrs["kind"] == "row" and
               any(len(v.shape) == 1 for v in nd.outputs) for nd in t.graph.nodes)
    for rows in (5, 300):                  # the serial twin; threads
        x, y = tj.randn(rows, 5), tj.randn(5)
        for got, want in zip(t(x, y), f(x, y)):
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=2e-6)



@pytest.mark.compile
def test_a_row_kernel_output_that_spans_fewer_rows_than_the_frame_keeps_its_shape():
    """A per-channel value [1, C, 1] computed inside a row kernel over [B, C, N] (a batch
    norm's mean as sums over rows, then over the batch) is one value per channel, not per
    (image, channel) row: its sum and its reshape see C values, as in eager."""
    def f(x):
        m = x.sum(2, keepdim=True).sum(0, keepdim=True) / 512
        c = x - m
        v = (c * c).sum(2, keepdim=True).sum(0, keepdim=True) / 512
        return c * (v + 1e-5).rsqrt(), m.sum() * 1, m.reshape(16), m * 2

    t = traced(f, tj.randn(8, 16, 64))
    assert any(nd.op == "fused" and nd.attrs["kind"] == "row" and
               any(v.shape[0] == 1 for v in nd.outputs if v.shape) for nd in t.graph.nodes)
    for batch in (8, 3):
        x = tj.randn(batch, 16, 64)
        for got, want in zip(t(x), f(x)):
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)

# reductions whose operand is broadcast inside the region (a stride-0 dimension): nothing
# outside the row kernel has the reduced dimension's length
BROADCAST_REDUCTIONS = {
    "sum": ((4, 1), lambda x: x.expand(4, 3).sum(1)),
    "sum_3d": ((2, 4, 1), lambda x: (x.expand(2, 4, 3) * x).sum(-1)),
    "mean_keepdim": ((4, 1), lambda x: (x.expand(4, 3) + 1).mean(1, keepdim=True)),
    "amax_of_exp": ((4, 1), lambda x: x.exp().expand(4, 5).amax(1) * 2),
    "logsumexp": ((4, 1), lambda x: x.expand(4, 3).logsumexp(1)),
    "var": ((4, 1), lambda x: (x.expand(4, 3) * tj.arange(3.0)).var(1)),
    "softmax": ((4, 1), lambda x: x.expand(4, 3).softmax(1) * x),
    "sum_of_everything": ((4, 1), lambda x: x.exp().expand(4, 5).sum()),
    "sum_of_a_1_vector": ((1,), lambda x: x.expand(6).sum()),
    "sum_over_rows": ((1, 3), lambda x: x.expand(4, 3).sum(0)),
}


@pytest.mark.parametrize("backend", ["numba", "interpret"])
@pytest.mark.parametrize("name", list(BROADCAST_REDUCTIONS))
def test_reductions_over_an_expanded_dimension_match_eager(name, backend):
    """The row kernel's row length comes from the reductions' operands too: read off the
    region's inputs and outputs alone, it was 1 and `x.expand(4, 3).sum(1)` summed one
    element a row; the backward's sum of an expanded gradient likewise."""
    shape, f = BROADCAST_REDUCTIONS[name]
    x = tj.tensor(np.random.rand(*shape).astype(np.float32) + 1, requires_grad=True)
    t = traced(f, x, backend=backend)
    want = f(x)
    want.sum().backward()
    want_grad, x.grad = x.grad.numpy().copy(), None
    got = t(x)
    got.sum().backward()
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), want_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.compile
def test_the_sum_of_an_expanded_column_equals_torch():
    import torch

    x = np.arange(1.0, 5.0, dtype=np.float32).reshape(4, 1)
    t = traced(lambda v: v.expand(4, 3).sum(1), tj.tensor(x))
    np.testing.assert_array_equal(t(tj.tensor(x)).numpy(),
                                  torch.from_numpy(x).expand(4, 3).sum(1).numpy())


LOW_PRECISION_PROGRAMS = {
    "chain": lambda x, y: ((x * y + 1.5).tanh() * 0.25 + x.exp()) * 2,
    "scalars": lambda x, y: (x + 257) * 0.1 - 1.3 / (y.abs() + 0.5),
    "activations": lambda x, y: tj.sigmoid(x) * tj.relu(y) + tj.nn.functional.gelu(x),
    "casts": lambda x, y: (x.float() * 3.3).to(x.dtype) + y.double().to(y.dtype),
    "compare": lambda x, y: tj.where(x > y, x.rsqrt().abs(), y.sign() * 0.7),
}


@pytest.mark.compile
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(LOW_PRECISION_PROGRAMS))
def test_low_precision_kernels_read_and_write_bits_and_match_eager(name, dtype):
    """float16/bfloat16 regions compile to kernels that compute in float32 and round per
    op as eager does: bit for bit the same results."""
    fn = LOW_PRECISION_PROGRAMS[name]
    d = getattr(tj, dtype)
    x, y = tj.randn(6, 7).to(d), tj.randn(6, 7).to(d)
    f = traced(fn, x, y)
    assert "@numba.njit" in f.code and ("f16_to_f32(" in f.code or "bf16_to_f32(" in f.code)
    for shape in ((6, 7), (33, 5)):
        a, b = tj.randn(*shape).to(d), tj.randn(*shape).to(d)
        got, want = f(a, b), fn(a, b)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


LOW_PRECISION_ROWS = {
    "softmax": lambda x: tj.softmax(x, -1),
    "log_softmax": lambda x: tj.nn.functional.log_softmax(x * 2, -1),
    "layer_norm": lambda x: tj.nn.functional.layer_norm(x, (x.shape[-1],)),
    "sum": lambda x: (x.exp() * 0.5).sum(-1),
}


@pytest.mark.compile
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(LOW_PRECISION_ROWS))
def test_low_precision_row_kernels_match_eager(name, dtype):
    """Row kernels read and write float16/bfloat16 bits and accumulate in float32 or
    wider, rounding each value once, as eager does (within one unit in the last place:
    a reciprocal times is not a division)."""
    fn = LOW_PRECISION_ROWS[name]
    d = getattr(tj, dtype)
    f = traced(fn, tj.randn(4, 9).to(d))
    assert "def row(" in f.code and ("f16_to_f32(" in f.code or "bf16_to_f32(" in f.code)
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
    for shape in ((4, 9), (17, 40)):
        x = tj.randn(*shape).to(d)
        got, want = f(x), fn(x)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=ulp,
                                   atol=ulp)


@pytest.mark.compile
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_kernels_with_many_statements(dtype):
    """A kernel's values are named r0, r1, ...: helper functions must not share a name
    with one of them (a region of 40 statements, and a row region of more than 16)."""
    def chain(x):
        for _ in range(20):
            x = x * 1.01 + 0.1
        return x

    def rows(x):
        h = tj.nn.functional.layer_norm(x, (x.shape[-1],)) * 2 + 1
        for _ in range(9):
            h = h * 0.5 + 0.25
        return tj.softmax(h, -1)

    d = getattr(tj, dtype)
    for fn in (chain, rows):
        x = tj.randn(5, 6).to(d)
        f = traced(fn, x)
        ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
        np.testing.assert_allclose(f(x).float().numpy(), fn(x).float().numpy(), rtol=ulp,
                                   atol=ulp)


@pytest.mark.compile
@pytest.mark.parametrize("n", [1000, 1 << 17])  # the serial twin and the threaded one
def test_outputs_stored_into_their_inputs_arrays_take_kernels_made_for_that(n):
    """An update in place (an optimizer's step: new m, v and p written into their arrays)
    runs kernels whose stores go through the inputs' own parameters: the same array as
    an output parameter too would overlap an input, and LLVM would not vectorise."""
    def update(m, v, p, g):
        m2 = m * 0.9 + g * 0.1
        v2 = v * 0.99 + g * g * 0.01
        return m2, v2, p - m2 / ((v2 / 0.5).sqrt() + 1e-8)

    rng = np.random.default_rng(0)
    m, v, p, g = (rng.random(n).astype(np.float32) for _ in range(4))
    t = traced(update, *(tj.tensor(a) for a in (m, v, p, g)))
    [node] = [nd for nd in t.graph.nodes if nd.op == "fused"]
    region = node.regions[0]
    kernel = numba_cpu.compile_region(region, "test", "elementwise")
    shapes = [(n,)] * 3
    want = kernel.run([m, v, p, g], [], shapes, (n,))  # into fresh arrays
    assert not kernel.into
    outs = kernel.run([m, v, p, g], [], shapes, (n,), into=[m, v, p])
    assert outs[0] is m and outs[1] is v and outs[2] is p  # written in place
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got, w)
    [variant] = kernel.into.values()
    source = variant.module.__file__ and Path(variant.module.__file__).read_text()
    assert "def flat(i0, i1, i2, i3)" in source and "i2[i] = " in source


_SPECIAL = """
import numpy as np
import tracejit as tj
from tracejit.ops.special import ufunc
x = np.linspace(-2, 2, 9, dtype=np.float32)
print(float(np.abs(tj.erf(tj.from_numpy(x)).numpy()).sum()), float(tj.lgamma(
    tj.tensor([0.5, 3.0])).sum()), ufunc("erf").loop.stats.cache_hits.total(),
    ufunc("erf").loop.stats.cache_misses.total())
"""


@pytest.mark.compile
def test_eager_special_functions_load_compiled_from_the_cache(tmp_path):
    """erf (GELU's), erfc and the special functions run eagerly through Numba loops kept
    in the kernel cache: a new process loads them compiled, not compiling them again
    (0.15-0.3 s each, in every transformer's first step)."""
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path), TRACEJIT_BACKEND="numba")

    def run():
        out = subprocess.run([sys.executable, "-c", _SPECIAL], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
        return float(out[0]), float(out[1]), int(out[2]), int(out[3])
    first, second = run(), run()
    want = sum(abs(math.erf(v)) for v in np.linspace(-2, 2, 9, dtype=np.float32))
    assert first[0] == pytest.approx(want, rel=1e-6) and second[:2] == first[:2]
    assert first[1] == pytest.approx(math.lgamma(0.5) + math.lgamma(3.0), rel=1e-6)
    assert (first[2], first[3]) == (0, 1)  # compiled for float32 in the first process
    assert (second[2], second[3]) == (1, 0)  # loaded in the second


@pytest.mark.compile
def test_a_row_kernel_over_many_frame_shapes_equals_the_interpreter():
    # a row kernel keeps its per-call layout per frame shape (at most 64, then starts
    # over): sizes that vary call after call, a per-row input, a partial output (a [N]
    # value the same in every row) and a sum over rows among its outputs
    def fn(x, s, w):
        h = (x - x.amax(-1, keepdim=True)) * s
        p = tj.softmax(h, -1)
        return p * w, (p * x).sum(0), (w * 2 + 1)

    example = (tj.randn(3, 2, 5), tj.randn(3, 2, 1), tj.randn(5))
    f = traced(fn, *example)
    g = traced(fn, *example, backend="interpret")
    rng = np.random.default_rng(3)
    # 27 shapes three times over (the same rows with other row lengths among them), then
    # 70 more than the 64 kept
    repeated = [(b, t, n) for b in (1, 2, 3) for t in (1, 2, 3) for n in (2, 3, 5)] * 3
    fresh = [(1 + k % 9, 4 + (k // 9) % 5, 7 + k % 4) for k in range(70)]
    for b, t, n in repeated + fresh:
        args = [tj.from_numpy(rng.standard_normal(s).astype(np.float32))
                for s in ((b, t, n), (b, t, 1), (n,))]
        for got, want in zip(f(*args), g(*args)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-6)
    kernels = [k for k in gc_objects(numba_cpu.RowKernel) if k._layouts]
    assert kernels and all(len(k._layouts) <= 64 for k in kernels)


def gc_objects(kind):
    import gc
    return [o for o in gc.get_objects() if isinstance(o, kind)]
