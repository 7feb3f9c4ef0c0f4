"""Adamax, NAdam, RAdam, Rprop and ASGD against PyTorch's: the same float64 parameters and
the same loss, 20 steps, then every parameter and every state buffer equal to 1e-10 (the
scalar state PyTorch keeps in float32, NAdam's mu product and ASGD's eta and mu,
exactly); state dicts that resume the run, PyTorch's loaded too; PyTorch's errors."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

CASES = [
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, betas=(0.85, 0.99), weight_decay=0.05, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.005, maximize=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-4, 0.08))),
    ("Rprop", dict(lr=0.02, maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=1e-3, alpha=0.6, t0=5, weight_decay=0.01)),
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CASES)]
SCALARS = ("step", "mu_product", "eta", "mu")


def _start():
    rng = np.random.default_rng(7)
    return [rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((3, 2))]


def _data(steps: int):
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((6, 4)), rng.standard_normal((6, 2))) for _ in range(steps)]


def _setup(lib, name, kwargs, values=None):
    params = [lib.tensor(v, dtype=lib.float64, requires_grad=True)
              for v in (values if values is not None else _start())]
    groups = [{"params": params[:2]}, {"params": params[2:], "lr": kwargs.get("lr", 0.01) / 2}]
    return params, getattr(lib.optim, name)(groups, **kwargs)


def _run(lib, params, opt, batches) -> None:
    for x, y in batches:
        w1, b1, w2 = params
        opt.zero_grad()
        out = lib.tanh(lib.tensor(x) @ w1 + b1) @ w2
        ((out - lib.tensor(y)) ** 2).mean().backward()
        opt.step()


def _numpy(v):
    return v.detach().numpy() if hasattr(v, "detach") else v


def _same_run(ours, theirs) -> None:
    (params, opt), (tparams, topt) = ours, theirs
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-10,
                                   atol=1e-10)
    for p, tp in zip(params, tparams):
        state, tstate = opt.state[p], topt.state[tp]
        assert set(state) == set(tstate)
        for key, value in state.items():
            if key in SCALARS:
                assert float(value) == tstate[key].item(), key
            else:
                np.testing.assert_allclose(_numpy(value), _numpy(tstate[key]), rtol=1e-10,
                                           atol=1e-10, err_msg=key)


@requires_torch
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_twenty_steps_follow_pytorch(name, kwargs):
    import torch

    batches = _data(20)
    ours, theirs = _setup(tj, name, kwargs), _setup(torch, name, kwargs)
    _run(tj, *ours, batches)
    _run(torch, *theirs, batches)
    _same_run(ours, theirs)
    moved = [np.abs(p.detach().numpy() - v).max() for p, v in zip(ours[0], _start())]
    assert min(moved) > 1e-4  # (the steps did something)


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_a_state_dict_resumes_the_run(name, kwargs):
    batches = _data(12)
    params, opt = _setup(tj, name, kwargs)
    _run(tj, params, opt, batches[:5])
    state = opt.state_dict()
    resumed = _setup(tj, name, kwargs, [p.detach().numpy() for p in params])
    resumed[1].load_state_dict(state)
    _run(tj, *resumed, batches[5:])
    _run(tj, params, opt, batches[5:])
    for a, b in zip(params, resumed[0]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@requires_torch
@pytest.mark.parametrize("name,kwargs", CASES[::3], ids=IDS[::3])
def test_pytorchs_state_dict_loads_and_continues(name, kwargs):
    import torch

    batches = _data(14)
    tparams, topt = _setup(torch, name, kwargs)
    _run(torch, tparams, topt, batches[:7])
    sd = topt.state_dict()
    ours = _setup(tj, name, kwargs, [p.detach().numpy() for p in tparams])
    ours[1].load_state_dict({"state": {k: {n: v.numpy() for n, v in s.items()}
                                       for k, s in sd["state"].items()},
                             "param_groups": sd["param_groups"]})
    _run(tj, *ours, batches[7:])
    _run(torch, tparams, topt, batches[7:])
    _same_run(ours, (tparams, topt))


def test_sign_flips_shrink_rprop_steps_and_skip_the_update():
    p = tj.tensor([1.0, 1.0], dtype=tj.float64, requires_grad=True)
    opt = tj.optim.Rprop([p], lr=0.1)
    for grad in ([1.0, 1.0], [1.0, -1.0], [1.0, -1.0]):
        p.grad = tj.tensor(grad, dtype=tj.float64)
        opt.step()
    # the first element's gradient keeps its sign: steps of 0.1, 0.12, 0.144 down; the
    # second's flips: 0.1 down, then no move (its step halved to 0.05, its gradient taken
    # as 0), then 0.05 up, the step kept (a zero previous gradient)
    assert np.allclose(p.detach().numpy(), [1 - 0.1 - 0.12 - 0.144, 1 - 0.1 + 0.05])
    assert np.allclose(opt.state[p]["step_size"].numpy(), [0.144, 0.05])


BAD_ARGUMENTS = [
    ("Adamax", dict(lr=-1.0)), ("Adamax", dict(eps=-1e-8)), ("Adamax", dict(betas=(1.0, 0.9))),
    ("Adamax", dict(betas=(0.9, -0.1))), ("Adamax", dict(weight_decay=-0.1)),
    ("NAdam", dict(lr=-0.1)), ("NAdam", dict(momentum_decay=-1.0)),
    ("NAdam", dict(betas=(0.9, 1.0))), ("RAdam", dict(eps=-1.0)),
    ("RAdam", dict(weight_decay=-1.0)), ("RAdam", dict(betas=(-0.5, 0.9))),
    ("Rprop", dict(lr=-0.1)), ("Rprop", dict(etas=(1.1, 1.2))), ("Rprop", dict(etas=(0.5, 0.9))),
    ("Rprop", dict(etas=(0.0, 1.2))), ("ASGD", dict(lr=-0.1)),
    ("ASGD", dict(weight_decay=-1.0)),
]


@requires_torch
@pytest.mark.parametrize("name,kwargs", BAD_ARGUMENTS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD_ARGUMENTS)])
def test_bad_arguments_raise_pytorchs_errors(name, kwargs):
    import torch

    messages = []
    for lib in (torch, tj):
        with pytest.raises(ValueError) as info:
            getattr(lib.optim, name)([lib.zeros(2, requires_grad=True)], **kwargs)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@requires_torch
@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam", "Rprop", "ASGD"])
def test_defaults_are_pytorchs(name):
    import torch

    ours = getattr(tj.optim, name)([tj.zeros(1, requires_grad=True)]).defaults
    theirs = getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)]).defaults
    for key, value in ours.items():
        assert theirs[key] == value, key
    left = set(theirs) - set(ours) - {"capturable", "differentiable", "fused"}
    assert not left
