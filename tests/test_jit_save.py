"""tj.jit.save / tj.jit.load: compiled programs without their source; checked against
the original on other inputs (values and gradients), and refusals of bad files."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn
from tracejit.jit import SaveError


def _model():
    tj.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 2))


@pytest.mark.compile
def test_a_loaded_program_gives_the_originals_values_and_gradients(tmp_path):
    model = _model()
    traced = tj.trace(model, (tj.randn(4, 6),), backend="numba")
    path = tmp_path / "mlp.npz"
    tj.jit.save(traced, path)
    loaded = tj.jit.load(path)
    assert [n for n, _ in loaded.named_parameters()] == [n for n, _ in
                                                          model.named_parameters()]
    for batch in (1, 5, 33):
        x = tj.randn(batch, 6)
        results = []
        for fn, params in ((loaded, loaded.parameters()), (model, model.parameters())):
            for p in params:
                p.grad = None
            xi = x.clone().requires_grad_()
            y = fn(xi)
            (y * y).sum().backward()
            results.append([y.detach(), xi.grad] + [p.grad for p in params])
        for got, want in zip(*results):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_new_process_runs_it_without_the_source(tmp_path):
    model = _model()
    traced = tj.trace(model, (tj.randn(4, 6),), backend="numba")
    path = tmp_path / "mlp.npz"
    tj.jit.save(traced, path)
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = ("import numpy as np, tracejit as tj\n"
              f"f = tj.jit.load({str(path)!r})\n"
              f"x = tj.from_numpy(np.load({str(tmp_path / 'x.npy')!r}))\n"
              "print(' '.join(repr(float(v)) for v in f(x).detach().numpy().ravel()))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    got = np.array([float(v) for v in r.stdout.split()], np.float32).reshape(3, 2)
    np.testing.assert_allclose(got, model(tj.from_numpy(x)).detach().numpy(), rtol=1e-6)


def test_inputs_no_saved_trace_accepts_say_which_check_failed(tmp_path):
    traced = tj.trace(lambda x, y: x @ y, (tj.randn(3, 4), tj.randn(4, 5)))
    tj.jit.save(traced, tmp_path / "mm.npz")
    loaded = tj.jit.load(tmp_path / "mm.npz")
    assert loaded(tj.randn(2, 4), tj.randn(4, 7)).shape == (2, 7)
    assert any("==" in g for g in loaded.guards)  # the inner sizes are held equal
    with pytest.raises(RuntimeError, match="sizes: s1 == s2"):
        loaded(tj.randn(2, 4), tj.randn(3, 7))
    with pytest.raises(RuntimeError, match="argument 0: float32 of rank 2, got float64"):
        loaded(tj.randn(2, 4, dtype=tj.float64), tj.randn(4, 7))


def test_a_value_guard_that_fails_is_an_error_not_the_saved_path(tmp_path):
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    traced = tj.trace(f, (tj.ones(3),))
    tj.jit.save(traced, tmp_path / "f.npz")
    loaded = tj.jit.load(tmp_path / "f.npz")
    np.testing.assert_allclose(loaded(tj.ones(4)).numpy(), 2 * np.ones(4))
    with pytest.raises(RuntimeError, match=r"read a tensor's value at .*test_jit_save.py"):
        loaded(-tj.ones(4))


def test_bad_files_are_refused_with_a_clear_message(tmp_path):
    traced = tj.trace(lambda x: x.tanh() * 2, (tj.randn(3),))
    good = tmp_path / "good.npz"
    tj.jit.save(traced, good)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file at all")
    with pytest.raises(SaveError, match="cannot read"):
        tj.jit.load(junk)
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[:200])
    with pytest.raises(SaveError, match="cannot read"):
        tj.jit.load(cut)
    other = tmp_path / "tensors.npz"
    tj.save({"w": tj.ones(2)}, str(other))
    with pytest.raises(SaveError, match="not a tracejit program"):
        tj.jit.load(other)

    def rewrite(edit, name):
        with np.load(good) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays["__tracejit_program__"]))
        edit(meta)
        arrays["__tracejit_program__"] = np.asarray(json.dumps(meta))
        path = tmp_path / name
        np.savez(path, **arrays)
        return path
    with pytest.raises(SaveError, match="format version 99"):
        tj.jit.load(rewrite(lambda m: m.update(version=99), "v99.npz"))
    with pytest.raises(SaveError, match="malformed"):
        tj.jit.load(rewrite(lambda m: m["traces"][0]["graph"].pop("nodes"), "bad.npz"))
    with pytest.raises(SaveError, match="malformed|verif|unknown op"):
        tj.jit.load(rewrite(lambda m: m["traces"][0]["graph"]["nodes"][0].update(
            op="os.system"), "op.npz"))
    assert zipfile.is_zipfile(good)


def test_what_is_not_saved_yet_is_refused(tmp_path):
    @tj.script
    def f(x):
        return x * 2

    with pytest.raises(SaveError, match="no trace yet"):
        tj.jit.save(f, tmp_path / "s.npz")
    with pytest.raises(SaveError, match="traced or scripted"):
        tj.jit.save(lambda x: x, tmp_path / "l.npz")
    keyword = tj.trace(lambda x, s=None: x * 2 if s is None else x * s, (tj.ones(2),))
    keyword(tj.ones(2), s=tj.ones(2))  # a trace of a call with a keyword argument
    with pytest.raises(SaveError, match="positional arguments"):
        tj.jit.save(keyword, tmp_path / "k.npz")


@pytest.mark.compile
def test_python_arguments_are_saved_with_the_value_each_trace_holds_for(tmp_path):
    traced = tj.trace(lambda x, s, on: x * s + (1 if on else -1), (tj.ones(2), 2.0, True))
    traced(tj.ones(3), 0.5, False)  # a second trace, for other values
    assert len(traced.traces) == 2
    tj.jit.save(traced, tmp_path / "p.npz")
    loaded = tj.jit.load(tmp_path / "p.npz")
    x = tj.randn(4)
    for s, on in ((2.0, True), (0.5, False)):
        np.testing.assert_allclose(loaded(x, s, on).numpy(), traced(x, s, on).numpy())
    with pytest.raises(RuntimeError, match="argument 1: the trace holds for 2.0, got 3.0"):
        loaded(x, 3.0, True)
    with pytest.raises(RuntimeError, match="holds for 2.0, got 2;"):  # an int: not 2.0
        loaded(x, 2, True)


def test_a_tampered_size_expression_is_refused_not_evaluated(tmp_path):
    traced = tj.trace(lambda x: x.reshape(-1) * 2, (tj.randn(3, 4),))
    good = tmp_path / "good.npz"
    tj.jit.save(traced, good)
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["__tracejit_program__"]))
    meta["traces"][0]["bindings"][0][2] = "__import__('os').getcwd()"
    arrays["__tracejit_program__"] = np.asarray(json.dumps(meta))
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    with pytest.raises(SaveError, match="is not a size expression"):
        tj.jit.load(bad)


@tj.script
def _steps(x, n: int):
    h = x
    for i in range(n):
        if h.sum() > 0:
            h = h * 0.5 - 1
        else:
            h = h + i
    return h.tanh()


def test_a_scripted_function_keeps_its_loop_and_branches(tmp_path):
    """A scripted program's control flow is saved: the loaded one takes every trip count
    and both branches, and the path it is given, without its source."""
    _steps(tj.randn(3, 4), 3)
    path = tmp_path / "steps.tjp"  # the path as given: no .npz added
    tj.jit.save(_steps, path)
    assert path.exists()
    loaded = tj.jit.load(path)
    for shape, n in (((3, 4), 3), ((5, 2), 0), ((2, 7), 6), ((1, 1), 1)):
        x = tj.randn(*shape)
        for sign in (1, -1):  # both branches taken first
            xi = (x.abs() * sign).requires_grad_()
            xj = (x.abs() * sign).requires_grad_()
            got, want = loaded(xi, n), _steps(xj, n)
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                       rtol=1e-6, atol=1e-7)
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_allclose(xi.grad.numpy(), xj.grad.numpy(), rtol=1e-5,
                                       atol=1e-7)


def test_a_scripted_module_runs_in_a_new_process_without_its_class(tmp_path):
    tj.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(3, 5)
            self.head = nn.Linear(5, 1)

        def forward(self, x):
            out, h = self.rnn(x)
            if out.mean() > 0:
                y = self.head(h[0])
            else:
                y = -self.head(h[0])
            return y

    net = Net()
    scripted = tj.script(net)
    x = np.random.default_rng(1).standard_normal((7, 2, 3)).astype(np.float32)
    want = scripted(tj.from_numpy(x)).detach().numpy()
    path = tmp_path / "net.tjp"
    tj.jit.save(scripted, path)
    np.save(tmp_path / "x.npy", x)
    script = ("import numpy as np, tracejit as tj\n"
              f"f = tj.jit.load({str(path)!r})\n"
              f"x = tj.from_numpy(np.load({str(tmp_path / 'x.npy')!r}))\n"
              "print(' '.join(repr(float(v)) for v in f(x).detach().numpy().ravel()))\n"
              "print(len(f(x[:3]).shape))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.split("\n")
    got = np.array([float(v) for v in lines[0].split()], np.float32).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert lines[1] == "2"  # another sequence length, the same program
