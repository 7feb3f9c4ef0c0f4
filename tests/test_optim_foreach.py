"""foreach optimizer steps (optim/optimizer.py): after the first step, a group's update is
one traced call over all its parameters. Checked bit for bit against the eager loop
(`foreach=False`), over steps whose learning rate a scheduler changes, with settings
that change, gradients that go missing, and on PyTorch's numbers."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

pytestmark = pytest.mark.compile

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.3)),
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, weight_decay=1e-2, amsgrad=True)),
    ("AdamW", dict(lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1)),
]


def _params(dtype=tj.float32):
    tj.manual_seed(0)
    return [tj.randn(5, 4, dtype=dtype, requires_grad=True),
            tj.randn(4, dtype=dtype, requires_grad=True),
            tj.randn(2, 3, 2, dtype=dtype, requires_grad=True)]


def _train(name, kwargs, foreach, steps=6, dtype=tj.float32, missing_at=3):
    params = _params(dtype)
    opt = getattr(tj.optim, name)(params, foreach=foreach, **kwargs)
    sched = tj.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rng = np.random.default_rng(1)
    for step in range(steps):
        for k, p in enumerate(params):
            p.grad = None if (step == missing_at and k == 1) else tj.tensor(
                rng.standard_normal(p.shape), dtype=dtype)
        opt.step()
        sched.step()
    return params, opt


@pytest.mark.parametrize("name,kwargs", CASES)
@pytest.mark.parametrize("dtype", [tj.float32, tj.float64])
def test_foreach_steps_give_the_eager_loop_s_bits(name, kwargs, dtype, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")  # (the interpreter keeps the loop)
    eager, _ = _train(name, kwargs, False, dtype=dtype)
    fused, opt = _train(name, kwargs, None, dtype=dtype)
    for a, b in zip(eager, fused):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    traces = list(opt._traces.values())
    # one trace for all parameters and one for the step a gradient was missing: the
    # learning rate the scheduler halves is an input, not a constant of the trace
    assert traces and sum(t.stats["compiles"] for t in traces) == 2
    assert all(t.stats["eager_fallbacks"] == 0 for t in traces)


def test_state_dict_after_foreach_steps_is_the_eager_loop_s(monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    _, eager = _train("Adam", dict(lr=1e-2, amsgrad=True), False)
    _, fused = _train("Adam", dict(lr=1e-2, amsgrad=True), None)
    a, b = eager.state_dict(), fused.state_dict()
    assert [{k: v for k, v in g.items() if k != "foreach"} for g in a["param_groups"]] == \
        [{k: v for k, v in g.items() if k != "foreach"} for g in b["param_groups"]]
    for k in a["state"]:
        assert a["state"][k]["step"] == b["state"][k]["step"]
        for name in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            np.testing.assert_array_equal(a["state"][k][name].numpy(),
                                          b["state"][k][name].numpy())


def test_changed_settings_make_a_new_trace(monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    params = _params()
    opt = tj.optim.AdamW(params, lr=1e-2)
    for step in range(4):
        for p in params:
            p.grad = tj.ones_like(p)
        if step == 2:
            opt.param_groups[0]["eps"] = 1e-3
        opt.step()
    assert len(opt._traces) == 2
    eager = _params()
    ref = tj.optim.AdamW(eager, lr=1e-2, foreach=False)
    for step in range(4):
        for p in eager:
            p.grad = tj.ones_like(p)
        if step == 2:
            ref.param_groups[0]["eps"] = 1e-3
        ref.step()
    for a, b in zip(eager, params):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                         ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("AdamW", dict(lr=1e-2, weight_decay=0.1))])
def test_a_schedule_cycling_momentum_or_beta1_keeps_one_trace(name, kwargs, monkeypatch):
    """OneCycleLR changes the momentum (SGD) or beta1 (Adam) every step: they are inputs
    of the fused update, as the learning rate is, not constants that retrace it."""
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")

    def run(foreach):
        params = _params()
        opt = getattr(tj.optim, name)(params, foreach=foreach, **kwargs)
        sched = tj.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=8)
        rng = np.random.default_rng(3)
        for _ in range(8):
            for p in params:
                p.grad = tj.tensor(rng.standard_normal(p.shape), dtype=tj.float32)
            opt.step()
            sched.step()
        return params, opt

    eager, _ = run(False)
    fused, opt = run(None)
    for a, b in zip(eager, fused):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert len(opt._traces) == 1


@requires_torch
@pytest.mark.parametrize("name,kwargs", CASES)
def test_foreach_steps_follow_pytorch(name, kwargs, monkeypatch):
    import torch

    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    ours, _ = _train(name, kwargs, None, missing_at=-1)
    params = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in _params()]
    opt = getattr(torch.optim, name)(params, **kwargs)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rng = np.random.default_rng(1)
    for _ in range(6):
        for p in params:
            p.grad = torch.tensor(rng.standard_normal(p.shape), dtype=torch.float32)
        opt.step()
        sched.step()
    for a, b in zip(ours, params):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                         ("AdamW", dict(lr=1e-2))])
def test_a_foreach_step_writes_into_the_parameters_and_buffers(name, kwargs, monkeypatch):
    """The kernels write the new values into the parameters' and buffers' own arrays:
    no parameter-sized temporary per step (a fresh one, freed each step, makes every
    next step fault its pages in again), and the version counters still move."""
    import tracemalloc

    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    w = tj.zeros(1 << 18, requires_grad=True)    # 1 MB
    opt = getattr(tj.optim, name)([w], **kwargs)
    w.grad = tj.ones(1 << 18)
    for _ in range(8):  # the eager first step, the trace, compiled steps (threaded from
        opt.step()      # the third: its twin compiles then, allocating as compiles do)
    storage, version = w._data, w._version
    tracemalloc.start()
    try:
        opt.step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (1 << 18)  # well under the 1 MB one temporary would take
    assert w._data is storage and w._version > version


def test_a_setting_that_cannot_key_a_trace_keeps_the_eager_loop(monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    results = []
    for tags in (["a", "b"], ("a", "b")):  # a list is no trace key: the loop runs
        params = _params()
        opt = tj.optim.Adam(params, lr=1e-2)
        opt.param_groups[0]["tags"] = tags  # (a setting of the user's own)
        for _ in range(4):
            for p in params:
                p.grad = tj.ones_like(p)
            opt.step()
        assert opt.state[params[0]]["step"] == 4
        assert (opt._traces is None) == isinstance(tags, list)
        results.append([p.detach().numpy() for p in params])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
