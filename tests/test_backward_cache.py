"""The backward cache (capture/backward_cache.py): a compiled backward derived once is
loaded by later traces of the same graph — in this process or another — and runs the
same programs, with the same guards, as the derivation it replaces."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn

pytestmark = pytest.mark.compile  # every backward kept on disk is a compiled one


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    return tmp_path


def _mlp():
    tj.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))


def _cell():
    tj.manual_seed(0)
    return nn.RNNCell(5, 7)


PROGRAMS = {
    "mlp loss": (_mlp, lambda m: (lambda x, y: nn.functional.cross_entropy(m(x), y)),
                 lambda: (tj.randn(8, 12), tj.randint(0, 3, (8,)))),
    "rnn cell": (_cell, lambda m: m,
                 lambda: (tj.randn(4, 5), tj.randn(4, 7, requires_grad=True))),
    "softmax and sums": (lambda: None, lambda m: (
        lambda x, w: (tj.softmax(x @ w, dim=-1) * x.sum(1, keepdim=True)).amax(0).sum()),
        lambda: (tj.randn(6, 4, requires_grad=True), tj.randn(4, 4, requires_grad=True))),
}


def _run(name):
    """(the compiled backward, the gradients of a traced call, of an eager call, the
    inputs) for a fresh model and trace."""
    make, fn_of, args_of = PROGRAMS[name]
    tj.manual_seed(0)
    model = make()
    fn = fn_of(model)
    args = args_of()
    traced = tj.trace(fn, args, backend="numba")
    leaves = [a for a in args if a.requires_grad] + (
        list(model.parameters()) if model is not None else [])

    def grads(f):
        for t in leaves:
            t.grad = None
        out = f(*args)
        (out.sum() if out.ndim else out).backward()
        return [t.grad.numpy().copy() for t in leaves]

    got = grads(traced)
    want = grads(fn)
    [bt] = traced.traces[0].backwards
    return bt, got, want, traced


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_loaded_backward_runs_what_the_derived_one_ran(cache, name):
    derived, got1, want, _ = _run(name)
    assert not derived.loaded and list(cache.glob("bwd_*.json"))
    loaded, got2, _, traced = _run(name)
    assert loaded.loaded
    for a, b, c in zip(got1, got2, want):
        np.testing.assert_array_equal(a, b)  # the same programs: the same numbers
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    for attr in ("fwd_runner", "bwd_runner"):
        assert getattr(loaded, attr).__self__.source == getattr(derived, attr).__self__.source
    assert loaded.guards.source == derived.guards.source
    assert [str(g) for g in loaded.guards.guards] == [str(g) for g in derived.guards.guards]
    assert (loaded.fwd_guards is None) == (derived.fwd_guards is None)
    if derived.fwd_guards is not None:  # ("softmax and sums": sizes the joint trace pinned)
        assert loaded.fwd_guards.source == derived.fwd_guards.source
    assert (loaded.diff, loaded.float_outs, loaded.n_outputs, loaded.bindings) == (
        derived.diff, derived.float_outs, derived.n_outputs, derived.bindings)
    assert loaded.stages.summary == derived.stages.summary
    # the recorded graphs, decoded on first use, run the pipeline again for dumps
    assert [n for n, _, _ in loaded.stages] == [n for n, _, _ in derived.stages]
    assert str(loaded.stages[-1][1]) == str(derived.graph)
    assert "compiled backward 1:" in traced.explain()
    assert "(loaded from the backward cache)" in traced.explain()


def test_other_input_types_are_other_entries(cache):
    fn = lambda x: (x.tanh() * x).sum()  # noqa: E731
    transposed = tj.from_numpy(np.random.randn(4, 3).astype(np.float32).T)
    for x in (tj.randn(3, 4), tj.randn(3, 4, dtype=tj.float64), transposed):
        x.requires_grad_()
        traced = tj.trace(fn, (x,), backend="numba")
        traced(x).backward()
        assert not traced.traces[0].backwards[0].loaded
        a = x.detach().numpy()
        np.testing.assert_allclose(x.grad.numpy(), np.tanh(a) + a * (1 - np.tanh(a) ** 2),
                                   rtol=1e-5)
    assert len(list(cache.glob("bwd_*.json"))) == 3


def test_a_damaged_entry_is_derived_and_written_again(cache):
    bt, *_ = _run("rnn cell")
    [entry] = cache.glob("bwd_*.json")
    text = entry.read_text()
    entry.write_text(text[: len(text) // 2])
    bt, got, want, _ = _run("rnn cell")
    assert not bt.loaded
    again, *_ = _run("rnn cell")
    assert again.loaded  # written again, whole
    for a, c in zip(got, want):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)


def test_an_entry_that_does_not_restore_is_derived_again(cache):
    import json

    _run("rnn cell")
    [path] = cache.glob("bwd_*.json")
    entry = json.loads(path.read_text().split("\n", 1)[1])
    entry["guards"]["source"] = "def check(:"  # decodes as JSON, fails as Python
    _write_entry(path, json.dumps(entry))
    bt, got, want, traced = _run("rnn cell")
    assert not bt.loaded and not traced.traces[0]._backward_failed
    for a, c in zip(got, want):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    again, *_ = _run("rnn cell")
    assert again.loaded


def _write_entry(path, body: str) -> None:
    """An entry as the cache writes it: the digest of its body, then the body (JSON)."""
    import hashlib

    path.write_text(hashlib.sha256(body.encode()).hexdigest() + "\n" + body)


def test_an_entry_with_a_changed_constant_is_a_miss(cache):
    """One changed digit in an entry that still decodes (a constant 2.0 read as 3.0) fails
    the entry's digest: derived again, never 1.5 times the gradient."""
    fn = lambda x: (x * 2.0 + x.exp()).sum()  # noqa: E731

    def run():
        x = tj.randn(5, 3, requires_grad=True)
        traced = tj.trace(fn, (x,), backend="numba")
        traced(x).backward()
        got = x.grad.numpy().copy()
        x.grad = None
        fn(x).backward()
        return traced.traces[0].backwards[0], got, x.grad.numpy()

    run()
    [path] = cache.glob("bwd_*.json")
    text = path.read_text()
    assert '{"lit": 2.0}' in text
    path.write_text(text.replace('{"lit": 2.0}', '{"lit": 3.0}'))
    bt, got, want = run()
    assert not bt.loaded
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    again, got, want = run()
    assert again.loaded  # written again, whole
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_logging_the_passes_derives_again(cache, monkeypatch):
    _run("rnn cell")
    monkeypatch.setenv("TRACEJIT_LOG", "passes")
    bt, *_ = _run("rnn cell")
    assert not bt.loaded


def test_no_entries_without_a_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEJIT_DISABLE_CACHE", "1")
    for _ in range(2):
        bt, got, want, _ = _run("rnn cell")
        assert not bt.loaded
    assert not list(tmp_path.glob("bwd_*"))


_PROCESS = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np
import test_backward_cache as t
bt, got, want, _ = t._run("mlp loss")
print(bt.loaded, float(sum(np.abs(g).sum() for g in got)))
"""


def test_a_new_process_loads_what_the_first_derived(cache):
    code = _PROCESS.format(tests=os.path.dirname(__file__))
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(cache))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    (first, g1), (second, g2) = (r.stdout.split() for r in runs)
    assert (first, second) == ("False", "True")
    assert g1 == g2


def test_array_constants_are_kept_and_keyed_by_their_values(cache):
    """A graph with an array constant (positions from an arange, as a GPT's forward makes
    them) is kept; the constant's values are part of the key, so another constant of the
    same shape is another entry, never the first one's gradient."""
    def run(start):
        fn = lambda x: (x * tj.arange(start, start + 3, dtype=tj.float32)).tanh().sum()  # noqa: E731
        x = tj.randn(4, 3, requires_grad=True)
        traced = tj.trace(fn, (x,), backend="numba")
        traced(x).backward()
        got = x.grad.numpy().copy()
        x.grad = None
        fn(x).backward()
        np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-4, atol=1e-6)
        return traced.traces[0].backwards[0]

    assert not run(1).loaded
    assert run(1).loaded
    [path] = cache.glob("bwd_*.json")
    assert '"arrays": {"a0"' in path.read_text()
    assert not run(2).loaded  # the same graph and shapes, other values: a miss
    assert len(list(cache.glob("bwd_*.json"))) == 2
