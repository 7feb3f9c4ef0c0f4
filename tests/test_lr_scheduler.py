"""Learning-rate schedules against PyTorch's: the rates of every step (exactly, as the
same recurrences give), several parameter groups, state dicts, and `step(epoch)`."""
from __future__ import annotations

import warnings

import pytest

import tracejit as tj
from conftest import requires_torch

SCHEDULES = [
    ("StepLR", lambda S, opt: S.StepLR(opt, step_size=3, gamma=0.5)),
    ("MultiStepLR", lambda S, opt: S.MultiStepLR(opt, milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ExponentialLR", lambda S, opt: S.ExponentialLR(opt, gamma=0.9)),
    ("CosineAnnealingLR", lambda S, opt: S.CosineAnnealingLR(opt, T_max=7, eta_min=0.001)),
    ("LambdaLR", lambda S, opt: S.LambdaLR(opt, lambda epoch: 1 / (epoch + 1))),
    ("LambdaLR-per-group", lambda S, opt: S.LambdaLR(opt, [lambda e: 0.9 ** e,
                                                           lambda e: 1 + e])),
]


def _optimizer(lib):
    w, b = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.zeros(1))
    return lib.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1,
                         momentum=0.9)


def _rates(lib, make, steps: int, state=None) -> list:
    opt = _optimizer(lib)
    sched = make(lib.optim.lr_scheduler, opt)
    if state is not None:
        sched.load_state_dict(state)
        for group, lr in zip(opt.param_groups, state["_last_lr"]):
            group["lr"] = lr
    rates = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        rates.append(sched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == rates[-1]
    return rates


@requires_torch
@pytest.mark.parametrize("name,make", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_every_step_sets_pytorchs_learning_rates(name, make):
    import torch

    assert _rates(tj, make, 30) == _rates(torch, make, 30)


@pytest.mark.parametrize("name,make", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_a_state_dict_resumes_the_schedule(name, make):
    opt = _optimizer(tj)
    sched = make(tj.optim.lr_scheduler, opt)
    for _ in range(4):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 4
    assert _rates(tj, make, 10, state) == _rates(tj, make, 14)[4:]


@requires_torch
def test_state_dict_keeps_what_pytorch_keeps():
    import torch

    states = [lib.optim.lr_scheduler.StepLR(_optimizer(lib), 3).state_dict()
              for lib in (tj, torch)]
    for key in ("step_size", "gamma", "base_lrs", "last_epoch", "_step_count", "_last_lr"):
        assert states[0][key] == states[1][key], key


def test_lambda_state_dict_saves_callable_objects_not_functions():
    class Warmup:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.steps)

    opt = tj.optim.SGD([tj.nn.Parameter(tj.ones(1))], lr=1.0)
    sched = tj.optim.lr_scheduler.LambdaLR(opt, Warmup(4))
    assert sched.state_dict()["lr_lambdas"] == [{"steps": 4}]
    other = tj.optim.lr_scheduler.LambdaLR(tj.optim.SGD([tj.nn.Parameter(tj.ones(1))], lr=1.0),
                                           Warmup(10))
    other.load_state_dict(sched.state_dict())
    assert other.lr_lambdas[0].steps == 4
    assert tj.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0).state_dict()["lr_lambdas"] == \
        [None]


@requires_torch
@pytest.mark.parametrize("name,make", SCHEDULES[:4], ids=[s[0] for s in SCHEDULES[:4]])
def test_step_to_an_epoch_takes_the_closed_form_as_pytorch(name, make):
    import torch

    rates = []
    for lib in (tj, torch):
        sched = make(lib.optim.lr_scheduler, _optimizer(lib))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched.step(11)
        rates.append(sched.get_last_lr())
    assert rates[0] == rates[1]


def test_initial_lr_is_recorded_and_resuming_without_it_is_an_error():
    opt = tj.optim.SGD([tj.nn.Parameter(tj.ones(1))], lr=0.3)
    tj.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    assert opt.param_groups[0]["initial_lr"] == 0.3
    with pytest.raises(KeyError, match="initial_lr"):
        tj.optim.lr_scheduler.StepLR(tj.optim.SGD([tj.nn.Parameter(tj.ones(1))], lr=0.3), 2,
                                     last_epoch=5)
    with pytest.raises(TypeError, match="not an Optimizer"):
        tj.optim.lr_scheduler.StepLR(object(), 2)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas"):
        tj.optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0, lambda e: 2.0])
