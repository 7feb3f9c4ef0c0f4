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


# ---- the other schedules: rates and momenta of every step against PyTorch's ---------------
class _Scale:
    """A scale_fn that is a callable object (its state travels in the state dict)."""

    def __init__(self, base):
        self.base = base

    def __call__(self, x):
        return self.base ** x


PLATEAU_METRICS = [5.0, 4.0, 4.0, 4.0, 3.9999, 4.1, 4.0, 4.0, 3.0, 3.0, 3.0, 3.0, 3.0, 2.9,
                   2.9, 2.9, 2.9, 2.9, 2.9, 2.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5,
                   0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
RISING_METRICS = [0.1 * min(i, 8) + (0.05 if i > 20 else 0.0) for i in range(36)]


def _plateau_step(sched, i, metrics=PLATEAU_METRICS):
    sched.step(metrics[i])


# (name, optimizer, make(S, opt), step(sched, i) or None for sched.step())
MORE_SCHEDULES = [
    ("MultiplicativeLR", "SGD", lambda S, opt: S.MultiplicativeLR(opt, lambda e: 0.95), None),
    ("MultiplicativeLR-per-group", "SGD",
     lambda S, opt: S.MultiplicativeLR(opt, [lambda e: 0.9, lambda e: 1.0 + 0.01 * e]), None),
    ("ConstantLR", "SGD", lambda S, opt: S.ConstantLR(opt, factor=0.5, total_iters=4), None),
    ("ConstantLR-defaults", "SGD", lambda S, opt: S.ConstantLR(opt), None),
    ("LinearLR", "SGD", lambda S, opt: S.LinearLR(opt, start_factor=0.25, end_factor=0.9,
                                                  total_iters=6), None),
    ("LinearLR-defaults", "SGD", lambda S, opt: S.LinearLR(opt), None),
    ("PolynomialLR", "SGD", lambda S, opt: S.PolynomialLR(opt, total_iters=8, power=2.0), None),
    ("PolynomialLR-defaults", "SGD", lambda S, opt: S.PolynomialLR(opt), None),
    ("CosineAnnealingWarmRestarts", "SGD",
     lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=4, eta_min=0.001), None),
    ("CosineAnnealingWarmRestarts-T_mult", "SGD",
     lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01), None),
    ("CyclicLR-triangular", "SGD",
     lambda S, opt: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4,
                               step_size_down=3), None),
    ("CyclicLR-triangular2", "SGD",
     lambda S, opt: S.CyclicLR(opt, base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3,
                               mode="triangular2", base_momentum=[0.7, 0.8],
                               max_momentum=0.95), None),
    ("CyclicLR-exp_range", "SGD",
     lambda S, opt: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=5,
                               mode="exp_range", gamma=0.97), None),
    ("CyclicLR-scale_fn", "SGD",
     lambda S, opt: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=5,
                               scale_fn=_Scale(0.9), scale_mode="iterations"), None),
    ("CyclicLR-Adam-betas", "Adam",
     lambda S, opt: S.CyclicLR(opt, base_lr=0.001, max_lr=0.01, step_size_up=4,
                               mode="triangular2"), None),
    ("CyclicLR-no-momentum", "Adam",
     lambda S, opt: S.CyclicLR(opt, base_lr=0.001, max_lr=0.01, step_size_up=3,
                               cycle_momentum=False), None),
    ("OneCycleLR-cos", "SGD", lambda S, opt: S.OneCycleLR(opt, max_lr=[0.5, 0.2],
                                                          total_steps=30), None),
    ("OneCycleLR-linear", "SGD",
     lambda S, opt: S.OneCycleLR(opt, max_lr=0.4, epochs=6, steps_per_epoch=5, pct_start=0.25,
                                 anneal_strategy="linear", div_factor=10.0,
                                 final_div_factor=100.0), None),
    ("OneCycleLR-three-phase", "SGD",
     lambda S, opt: S.OneCycleLR(opt, max_lr=0.3, total_steps=30, three_phase=True,
                                 base_momentum=[0.8, 0.85], max_momentum=[0.9, 0.99]), None),
    ("OneCycleLR-Adam-betas", "Adam",
     lambda S, opt: S.OneCycleLR(opt, max_lr=0.01, total_steps=30, pct_start=0.4), None),
    ("OneCycleLR-no-momentum", "Adam",
     lambda S, opt: S.OneCycleLR(opt, max_lr=0.01, total_steps=30, cycle_momentum=False), None),
    ("SequentialLR", "SGD",
     lambda S, opt: S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=5),
                                         S.ExponentialLR(opt, gamma=0.9)], milestones=[5]),
     None),
    ("SequentialLR-three", "SGD",
     lambda S, opt: S.SequentialLR(opt, [S.ConstantLR(opt, factor=0.2, total_iters=3),
                                         S.CosineAnnealingLR(opt, T_max=8, eta_min=0.001),
                                         S.StepLR(opt, step_size=4, gamma=0.5)],
                                   milestones=[4, 14]), None),
    ("ChainedScheduler", "SGD",
     lambda S, opt: S.ChainedScheduler([S.ConstantLR(opt, factor=0.1, total_iters=2),
                                        S.ExponentialLR(opt, gamma=0.9)]), None),
    ("ChainedScheduler-optimizer", "SGD",
     lambda S, opt: S.ChainedScheduler([S.LinearLR(opt, total_iters=4),
                                        S.MultiStepLR(opt, milestones=[6, 9], gamma=0.5)],
                                       optimizer=opt), None),
    ("ReduceLROnPlateau", "SGD", lambda S, opt: S.ReduceLROnPlateau(opt, patience=2),
     _plateau_step),
    ("ReduceLROnPlateau-abs-cooldown-min_lr", "SGD",
     lambda S, opt: S.ReduceLROnPlateau(opt, factor=0.5, patience=1, threshold=0.05,
                                        threshold_mode="abs", cooldown=2,
                                        min_lr=[0.02, 0.001]), _plateau_step),
    ("ReduceLROnPlateau-max", "SGD",
     lambda S, opt: S.ReduceLROnPlateau(opt, mode="max", factor=0.3, patience=3,
                                        min_lr=0.004),
     lambda sched, i: sched.step(RISING_METRICS[i])),
    ("ReduceLROnPlateau-max-abs-eps", "SGD",
     lambda S, opt: S.ReduceLROnPlateau(opt, mode="max", factor=0.9, patience=0,
                                        threshold=0.2, threshold_mode="abs", eps=0.004),
     lambda sched, i: sched.step(RISING_METRICS[i])),
]
MORE_IDS = [s[0] for s in MORE_SCHEDULES]


def _groups_of(lib, kind):
    w, b = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.zeros(1))
    groups = [{"params": [w]}, {"params": [b], "lr": 0.05}]
    if kind == "Adam":
        return lib.optim.Adam(groups, lr=0.01, betas=(0.9, 0.99))
    return lib.optim.SGD(groups, lr=0.1, momentum=0.9)


def _settings(opt) -> list:
    """Each group's lr and momentum (SGD) or betas (Adam), as plain floats."""
    return [(g["lr"], g.get("momentum"), tuple(g["betas"]) if "betas" in g else None)
            for g in opt.param_groups]


def _trajectory(lib, kind, make, stepper, steps, start=0, resume=None):
    """The settings after construction and after each of `steps` steps; `resume` is
    (scheduler state, optimizer state) loaded into the new ones first, `start` the index
    of the first step (the metric it reads)."""
    opt = _groups_of(lib, kind)
    sched = make(lib.optim.lr_scheduler, opt)
    if resume is not None:
        opt.load_state_dict(resume[1])
        sched.load_state_dict(resume[0])
    out = [_settings(opt)]
    for i in range(start, start + steps):
        opt.step()
        stepper(sched, i) if stepper is not None else sched.step()
        out.append(_settings(opt))
        assert list(sched.get_last_lr()) == [g["lr"] for g in opt.param_groups]
    return out, sched, opt


@requires_torch
@pytest.mark.parametrize("name,kind,make,stepper", MORE_SCHEDULES, ids=MORE_IDS)
def test_every_step_sets_pytorchs_rates_and_momenta(name, kind, make, stepper):
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = _trajectory(tj, kind, make, stepper, 30)[0]
    theirs = _trajectory(torch, kind, make, stepper, 30)[0]
    assert ours == theirs
    if "Plateau" in name:  # the metrics make the schedule reduce, and more than once
        assert len({s[0][0] for s in ours}) > 2


@pytest.mark.parametrize("name,kind,make,stepper", MORE_SCHEDULES, ids=MORE_IDS)
def test_a_state_dict_resumes_the_schedule_and_its_momenta(name, kind, make, stepper):
    _, sched, opt = _trajectory(tj, kind, make, stepper, 7)
    state = sched.state_dict()
    assert "optimizer" not in state
    resumed = _trajectory(tj, kind, make, stepper, 12, start=7,
                          resume=(state, opt.state_dict()))[0]
    assert resumed == _trajectory(tj, kind, make, stepper, 19)[0][7:]


@requires_torch
@pytest.mark.parametrize("name,kind,make,stepper", MORE_SCHEDULES, ids=MORE_IDS)
def test_state_dict_keeps_pytorchs_keys_and_values(name, kind, make, stepper):
    import torch

    def plain(state):
        return {k: v for k, v in state.items()
                if k not in ("_get_lr_called_within_step", "_is_initial", "_scale_fn_ref")}

    states = []
    for lib in (tj, torch):
        _, sched, _ = _trajectory(lib, kind, make, stepper, 5)
        states.append(plain(sched.state_dict()))
    if "_schedulers" in states[1]:
        for ours, theirs in zip(states[0].pop("_schedulers"), states[1].pop("_schedulers")):
            assert plain(ours) == plain(theirs)
    assert states[0] == states[1]


@requires_torch
def test_state_dict_saves_a_scale_fn_object_as_pytorch():
    import torch

    states = [_trajectory(lib, "SGD", MORE_SCHEDULES[13][2], None, 3)[1].state_dict()
              for lib in (tj, torch)]
    assert states[0]["_scale_fn_custom"] == states[1]["_scale_fn_custom"] == {"base": 0.9}
    sched = tj.optim.lr_scheduler.CyclicLR(_groups_of(tj, "SGD"), 0.01, 0.1,
                                           scale_fn=_Scale(0.5))
    sched.load_state_dict(states[0])
    assert sched._scale_fn_custom.base == 0.9
    assert tj.optim.lr_scheduler.CyclicLR(_groups_of(tj, "SGD"), 0.01, 0.1, scale_fn=lambda x: 1.0
                                          ).state_dict()["_scale_fn_custom"] is None


@requires_torch
def test_warm_restarts_take_a_fractional_epoch_as_pytorch():
    import torch

    runs = []
    for lib in (tj, torch):
        for T_mult in (1, 2, 3):
            opt = _groups_of(lib, "SGD")
            sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2,
                                                                       T_mult=T_mult,
                                                                       eta_min=0.002)
            for epoch in range(20):
                for batch in range(4):
                    opt.step()
                    sched.step(epoch + batch / 4)
                    runs.append((sched.get_last_lr(), sched.T_cur, sched.T_i,
                                 sched.last_epoch))
            for epoch in (17, 3, 0.5, 40.25):  # backwards, then far ahead
                sched.step(epoch)
                runs.append((sched.get_last_lr(), sched.T_cur, sched.T_i, sched.last_epoch))
    half = len(runs) // 2
    assert runs[:half] == runs[half:]
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        tj.optim.lr_scheduler.CosineAnnealingWarmRestarts(_groups_of(tj, "SGD"), 2).step(-1)


@requires_torch
@pytest.mark.parametrize("make", [
    lambda S, opt: S.ConstantLR(opt, factor=0.5, total_iters=4),
    lambda S, opt: S.LinearLR(opt, start_factor=0.25, end_factor=0.9, total_iters=6),
    lambda S, opt: S.PolynomialLR(opt, total_iters=8, power=2.0),
], ids=["ConstantLR", "LinearLR", "PolynomialLR"])
def test_the_new_closed_forms_are_pytorchs(make):
    import torch

    rates = []
    for lib in (tj, torch):
        sched = make(lib.optim.lr_scheduler, _groups_of(lib, "SGD"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in (2, 5, 3, 11, 0):
                sched.step(epoch)
                rates.append(sched.get_last_lr())
    assert rates[:5] == rates[5:]


def test_one_cycle_stepping_past_the_end_is_an_error():
    opt = _groups_of(tj, "SGD")
    sched = tj.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=4)
    for _ in range(4):
        sched.step()
    with pytest.raises(ValueError, match="Tried to step 5 times. The specified number of "
                                         "total steps is 4"):
        sched.step()


def test_composites_undo_and_hold_their_members_states():
    opt = _groups_of(tj, "SGD")
    S = tj.optim.lr_scheduler
    first, second = S.ConstantLR(opt, factor=0.5, total_iters=2), S.ExponentialLR(opt, 0.5)
    seq = S.SequentialLR(opt, [first, second], milestones=[3])
    assert (first.last_epoch, second.last_epoch) == (0, -1)
    assert seq.get_last_lr() == [0.05, 0.025]
    state = seq.state_dict()
    assert [s["last_epoch"] for s in state["_schedulers"]] == [0, -1]
    assert "optimizer" not in state["_schedulers"][0]


BAD_ARGUMENTS = [
    ("MultiplicativeLR-count", lambda S, o: S.MultiplicativeLR(o, [lambda e: 1.0])),
    ("MultiplicativeLR-not-callable", lambda S, o: S.MultiplicativeLR(o, 0.9)),
    ("ConstantLR-factor", lambda S, o: S.ConstantLR(o, factor=1.5)),
    ("ConstantLR-negative", lambda S, o: S.ConstantLR(o, factor=-0.1)),
    ("LinearLR-start", lambda S, o: S.LinearLR(o, start_factor=0)),
    ("LinearLR-end", lambda S, o: S.LinearLR(o, end_factor=1.2)),
    ("WarmRestarts-T_0", lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=0)),
    ("WarmRestarts-T_0-float", lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2.5)),
    ("WarmRestarts-T_mult", lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0)),
    ("WarmRestarts-eta_min", lambda S, o: S.CosineAnnealingWarmRestarts(o, 2, eta_min="0")),
    ("CyclicLR-mode", lambda S, o: S.CyclicLR(o, 0.01, 0.1, mode="square")),
    ("CyclicLR-base_lr-list", lambda S, o: S.CyclicLR(o, [0.01], 0.1)),
    ("CyclicLR-max_momentum-list", lambda S, o: S.CyclicLR(o, 0.01, 0.1,
                                                           max_momentum=[0.9, 0.9, 0.9])),
    ("CyclicLR-no-momentum", lambda S, o: S.CyclicLR(_no_momentum(S, o), 0.01, 0.1)),
    ("CyclicLR-not-optimizer", lambda S, o: S.CyclicLR(object(), 0.01, 0.1)),
    ("OneCycleLR-total_steps", lambda S, o: S.OneCycleLR(o, 0.1, total_steps=0)),
    ("OneCycleLR-nothing", lambda S, o: S.OneCycleLR(o, 0.1)),
    ("OneCycleLR-epochs", lambda S, o: S.OneCycleLR(o, 0.1, epochs=0, steps_per_epoch=3)),
    ("OneCycleLR-steps_per_epoch", lambda S, o: S.OneCycleLR(o, 0.1, epochs=2,
                                                             steps_per_epoch=-1)),
    ("OneCycleLR-pct_start", lambda S, o: S.OneCycleLR(o, 0.1, total_steps=9, pct_start=1.5)),
    ("OneCycleLR-pct_start-int", lambda S, o: S.OneCycleLR(o, 0.1, total_steps=9,
                                                           pct_start=1)),
    ("OneCycleLR-anneal", lambda S, o: S.OneCycleLR(o, 0.1, total_steps=9,
                                                    anneal_strategy="step")),
    ("OneCycleLR-max_lr-list", lambda S, o: S.OneCycleLR(o, [0.1, 0.2, 0.3], total_steps=9)),
    ("OneCycleLR-no-momentum", lambda S, o: S.OneCycleLR(_no_momentum(S, o), 0.1,
                                                         total_steps=9)),
    ("SequentialLR-empty", lambda S, o: S.SequentialLR(o, [], milestones=[])),
    ("SequentialLR-milestones", lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o), S.ExponentialLR(o, 0.9)], milestones=[2, 4])),
    ("SequentialLR-plateau", lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o), S.ReduceLROnPlateau(o)], milestones=[2])),
    ("SequentialLR-no-optimizer", lambda S, o: S.SequentialLR(o, [S.ConstantLR(o), 3],
                                                              milestones=[2])),
    ("SequentialLR-other-optimizer", lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o), S.ConstantLR(_groups_of(_lib(S), "SGD"))], milestones=[2])),
    ("ChainedScheduler-other-optimizer", lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o), S.ConstantLR(_groups_of(_lib(S), "SGD"))])),
    ("ChainedScheduler-empty", lambda S, o: S.ChainedScheduler([])),
    ("ChainedScheduler-plateau", lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o), S.ReduceLROnPlateau(o)])),
    ("Plateau-factor", lambda S, o: S.ReduceLROnPlateau(o, factor=1.0)),
    ("Plateau-mode", lambda S, o: S.ReduceLROnPlateau(o, mode="median")),
    ("Plateau-threshold_mode", lambda S, o: S.ReduceLROnPlateau(o, threshold_mode="pct")),
    ("Plateau-min_lr", lambda S, o: S.ReduceLROnPlateau(o, min_lr=[0.1])),
    ("Plateau-not-optimizer", lambda S, o: S.ReduceLROnPlateau(None)),
]


def _lib(S):
    return tj if S is tj.optim.lr_scheduler else __import__("torch")


def _no_momentum(S, opt):
    return _lib(S).optim.Adagrad(opt.param_groups[0]["params"], lr=0.1)


@requires_torch
@pytest.mark.parametrize("name,make", BAD_ARGUMENTS, ids=[b[0] for b in BAD_ARGUMENTS])
def test_bad_arguments_raise_pytorchs_errors(name, make):
    import torch

    errors = []
    for lib in (torch, tj):
        with pytest.raises((ValueError, TypeError)) as info:
            make(lib.optim.lr_scheduler, _groups_of(lib, "SGD"))
        errors.append((info.type, str(info.value)))
    if "different" in errors[0][1]:  # (the message shows the optimizer's repr)
        errors = [(t, m.split(" has ")[0]) for t, m in errors]
    assert errors[0] == errors[1]


def test_plateau_with_a_group_added_later():
    opt = _groups_of(tj, "SGD")
    sched = tj.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=0.001)
    opt.add_param_group({"params": [tj.nn.Parameter(tj.ones(1))], "lr": 0.5})
    sched.step(1.0)
    sched.step(1.0)
    assert sched.get_last_lr() == [0.1 * 0.1, 0.05 * 0.1, 0.5 * 0.1]
    fixed = tj.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=[0.0, 0.0, 0.0])
    opt.add_param_group({"params": [tj.nn.Parameter(tj.ones(1))], "lr": 0.5})
    fixed.step(1.0)
    with pytest.raises(RuntimeError, match="differs from when `ReduceLROnPlateau`"):
        fixed.step(1.0)
