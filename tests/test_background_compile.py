"""The background compiler (backends/background.py): with an empty kernel cache, calls
run on the interpreter while a worker process compiles, then switch to the compiled
kernels, giving the same numbers throughout; a worker that dies or a kernel it cannot
compile leaves the program running. Each test runs a program in a new process with a
cache of its own (the suite's processes compile at first calls)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.compile

# a training step whose fused kernels do exact float32 arithmetic (adds, multiplies,
# relu and its gradient), so compiled and interpreted steps agree to the last bit
_TRAIN = """
import json, sys, time
import numpy as np
import tracejit as tj
from tracejit.backends import background

background.PROGRESS_AFTER = float(sys.argv[1])
tj.manual_seed(0)
model = tj.nn.Sequential(tj.nn.Linear(8, 16), tj.nn.ReLU(), tj.nn.Linear(16, 1))
x, y = tj.randn(32, 8), tj.randn(32, 1)
step_fn = tj.trace(lambda x, y: ((model(x) * 0.5 + 0.25 - y) ** 2).mean(), (x, y))
opt = tj.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
losses, during = [], []
for i in range(int(sys.argv[2])):
    opt.zero_grad()
    loss = step_fn(x, y)
    loss.backward()
    opt.step()
    losses.append(float(loss.item()))
    during.append(background.status())
    if sys.argv[3] == "kill" and i == 0 and background._WORKER:
        background._WORKER[0][0].kill()
        background._WORKER[0][0].wait()
    if i == 1:
        tj.jit.wait_for_kernels()
print(json.dumps({"losses": losses, "during": during, "after": background.status(),
                  "weights": [p.detach().numpy().tolist() for p in model.parameters()]}))
"""


def _run(tmp_path, name: str, background: str, progress_after: float = 2.0,
         steps: int = 6, kill: bool = False, env: dict | None = None):
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path / name), TRACEJIT_BACKEND="numba",
               TRACEJIT_BACKGROUND_COMPILE=background, TRACEJIT_LOG="compile",
               **(env or {}))
    r = subprocess.run([sys.executable, "-c", _TRAIN, str(progress_after), str(steps),
                        "kill" if kill else "-"], cwd=ROOT, env=env, timeout=600,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout), r.stderr


def test_first_steps_run_while_kernels_compile_then_use_them_with_the_same_numbers(tmp_path):
    bg, bg_log = _run(tmp_path, "bg", "1")
    sync, sync_log = _run(tmp_path, "sync", "0")
    # the first step returned before any kernel was compiled: it did not wait for Numba
    assert bg["during"][0]["sent"] > 0 and bg["during"][0]["compiled"] == 0
    assert "compiled" not in bg_log.split("\n")[0]
    # once they are compiled, the calls load them from the cache the worker wrote
    assert bg["after"]["compiled"] == bg["after"]["sent"] and bg["after"]["failed"] == 0
    assert "(disk cache hit" in bg_log and "(disk cache miss" not in bg_log
    assert "(disk cache miss)" in sync_log and sync["after"]["sent"] == 0
    # the same losses and weights, step by step, interpreted or compiled
    assert bg["losses"] == sync["losses"]
    assert bg["weights"] == sync["weights"]


def test_progress_line_while_a_compile_runs_and_its_opt_out(tmp_path):
    _, log = _run(tmp_path, "a", "1", progress_after=0.0)
    assert "[tracejit] compiling" in log and "in the background" in log
    _, quiet = _run(tmp_path, "b", "1", progress_after=0.0, env={"TRACEJIT_PROGRESS": "0"})
    assert "[tracejit] compiling" not in quiet


def test_a_worker_that_dies_leaves_the_kernels_to_compile_at_their_calls(tmp_path):
    killed, log = _run(tmp_path, "killed", "1", kill=True)
    sync, _ = _run(tmp_path, "sync", "0")
    assert killed["losses"] == sync["losses"] and killed["weights"] == sync["weights"]
    assert killed["after"]["failed"] > 0 or killed["after"]["compiled"] > 0
    assert "(disk cache miss" in log or "(disk cache hit" in log  # compiled in the end


def test_a_warm_cache_sends_nothing_to_the_worker(tmp_path):
    _run(tmp_path, "warm", "0")  # fills the cache
    warm, log = _run(tmp_path, "warm", "1")
    assert warm["during"][0]["sent"] == 0 and warm["after"]["sent"] == 0
    assert "(disk cache hit" in log and "(disk cache miss" not in log


_SHORT = """
import tracejit as tj
f = tj.trace(lambda x: ((x * 3).tanh() + 1).sigmoid() * 2, (tj.randn(16, 8),))
out = f(tj.randn(16, 8))
print(tj.backends.background.status()["sent"])
"""


def test_a_program_that_exits_before_its_kernels_compile_leaves_them_in_the_cache(
        tmp_path):
    """The worker finishes the compiles it was handed after the program ends (and holds
    none of its output pipes: this run returns at once): the next run loads them."""
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path), TRACEJIT_BACKEND="numba",
               TRACEJIT_BACKGROUND_COMPILE="1", TRACEJIT_LOG="compile")
    first = subprocess.run([sys.executable, "-c", _SHORT], cwd=ROOT, env=env, timeout=300,
                           capture_output=True, text=True)
    assert first.returncode == 0 and first.stdout.split() == ["1"], first.stderr
    assert "compiled" not in first.stderr and "loaded" not in first.stderr
    for _ in range(600):  # the worker, on its own now, writes the kernel's manifest
        if list(tmp_path.glob("k_*.sums")) and any(
                (tmp_path / "__pycache__").glob("k_*.nbc")):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    waits = _SHORT.replace("print(", "tj.jit.wait_for_kernels()  # (loaded in a thread)\nprint(")
    second = subprocess.run([sys.executable, "-c", waits], cwd=ROOT, env=env, timeout=300,
                            capture_output=True, text=True)
    assert second.returncode == 0 and second.stdout.split() == ["0"], second.stderr
    assert "(disk cache hit" in second.stderr and "miss" not in second.stderr


_SHAPES = """
import json
import tracejit as tj

w = tj.randn(3, requires_grad=True)

def f(x):
    s = 0
    for t in range(x.shape[0]):
        s = s + (x[t] * w).tanh().sum()
    return s, (x * 2).relu()

x = tj.randn(4, 3, requires_grad=True)
traced = tj.trace(f, (x,))
got = traced(x)
got[0].backward()
want = f(x)
print(json.dumps([list(got[0].shape), list(want[0].shape), list(got[1].shape),
                  tj.backends.background.status()["compiled"]]))
"""


def test_regions_run_op_by_op_while_compiling_keep_shapes_and_sizes(tmp_path):
    """While kernels compile, regions run op by op: a 0-d result stays 0-d (a sum of
    sums), and sizes that only the region's ops name come from the host program."""
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path), TRACEJIT_BACKEND="numba",
               TRACEJIT_BACKGROUND_COMPILE="1")
    r = subprocess.run([sys.executable, "-c", _SHAPES], cwd=ROOT, env=env, timeout=300,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    got0, want0, got1, compiled = json.loads(r.stdout)
    assert got0 == want0 == [] and got1 == [4, 3] and compiled == 0


_LOOPS = """
import json
import tracejit as tj
from tracejit.backends import background

tj.manual_seed(0)
emb, gru = tj.nn.Embedding(20, 6), tj.nn.GRU(6, 5)
conv = tj.nn.Conv2d(1, 2, 3)
tokens, img = tj.randint(0, 20, (7, 3)), tj.randn(2, 1, 6, 6)
f = tj.trace(lambda t, x: gru(emb(t))[0].sum() + conv(x).relu().sum(), (tokens, img))
first = f(tokens, img)
first.backward()
during = background.status()
tj.jit.wait_for_kernels()
last = f(tokens, img)
print(json.dumps({"during": during, "after": background.status(),
                  "losses": [first.item(), last.item()]}))
"""


def test_loop_nests_compile_in_the_worker_too(tmp_path):
    """Ops' loop nests (im2col, an embedding's gradient, a recurrent layer's steps) are
    sent to the worker like fused regions: their dispatchers are found there by their
    names in the kernel module, not their functions' names (a loop body's are others),
    and none fails over to a compile at its call."""
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path / "c"), TRACEJIT_BACKEND="numba",
               TRACEJIT_BACKGROUND_COMPILE="1", TRACEJIT_PROGRESS="0")
    r = subprocess.run([sys.executable, "-c", _LOOPS], cwd=ROOT, env=env, timeout=600,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["during"]["sent"] > 0 and out["during"]["compiled"] == 0
    assert out["after"]["failed"] == 0, out
    assert out["after"]["compiled"] == out["after"]["sent"]
    assert abs(out["losses"][0] - out["losses"][1]) <= 1e-5 * abs(out["losses"][0])
