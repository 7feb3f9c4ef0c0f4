"""nn.Module machinery, Linear/activations/Sequential, losses and SGD, with PyTorch as the
oracle where it is installed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn
from conftest import requires_torch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.scale = nn.Parameter(tj.ones(1))
        self.register_buffer("steps", tj.zeros(1))
        self.note = "not a parameter"

    def forward(self, x):
        return self.body(x) * self.scale


def test_registration_and_naming_order():
    net = Net()
    # PyTorch lists a module's own parameters before its submodules'
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias"]
    assert [n for n, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "body.2"]
    assert [n for n, _ in net.named_buffers()] == ["steps"]
    assert len(list(net.children())) == 1
    assert set(net.state_dict()) == {"scale", "steps", "body.0.weight", "body.0.bias",
                                     "body.2.weight", "body.2.bias"}
    assert net.note == "not a parameter"


def test_parameter_is_a_leaf_requiring_grad():
    p = nn.Parameter(tj.randn(2, 3))
    assert p.requires_grad and p.is_leaf and isinstance(p, tj.Tensor)
    assert repr(p).startswith("Parameter containing:")
    assert not nn.Parameter(tj.randn(2), requires_grad=False).requires_grad


def test_assigning_a_plain_tensor_to_a_parameter_name_is_an_error():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="nn.Parameter"):
        lin.weight = tj.randn(2, 2)


def test_call_train_eval_zero_grad():
    net = Net()
    out = net(tj.randn(5, 4))
    assert out.shape == (5, 3)
    out.sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.eval()
    assert not net.training and not net.body[0].training
    net.train()
    assert net.body[1].training


def test_linear_shapes_and_default_initialisation_bounds():
    tj.manual_seed(0)
    lin = nn.Linear(100, 50)
    assert lin.weight.shape == (50, 100) and lin.bias.shape == (50,)
    bound = 1 / math.sqrt(100)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    assert nn.Linear(3, 2, bias=False).bias is None
    assert "in_features=100, out_features=50" in repr(lin)


def test_sequential_indexing_slicing_and_len():
    seq = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1), nn.Sigmoid())
    assert len(seq) == 4
    assert isinstance(seq[1], nn.Tanh) and isinstance(seq[-1], nn.Sigmoid)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2
    assert head(tj.randn(5, 2)).shape == (5, 3)
    with pytest.raises(IndexError):
        seq[4]


def test_load_state_dict_reports_every_problem_at_once():
    net = Net()
    sd = net.state_dict()
    sd.pop("scale")
    sd["extra"] = tj.zeros(1)
    sd["body.0.bias"] = tj.zeros(5)
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    msg = str(err.value)
    assert "Missing key(s): scale" in msg and "Unexpected key(s): extra" in msg
    assert "body.0.bias: expected [8], got [5]" in msg


def test_state_dict_round_trip():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    x = tj.randn(3, 4)
    assert tj.equal(a(x), b(x))


def test_losses_by_hand():
    x = tj.tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
    t = tj.tensor([0, 1])
    logp = np.log(np.exp(x.numpy()) / np.exp(x.numpy()).sum(1, keepdims=True))
    np.testing.assert_allclose(nn.CrossEntropyLoss()(x, t).item(),
                               -(logp[0, 0] + logp[1, 1]) / 2, rtol=1e-6)
    np.testing.assert_allclose(nn.CrossEntropyLoss(reduction="sum")(x, t).item(),
                               -(logp[0, 0] + logp[1, 1]), rtol=1e-6)
    assert nn.CrossEntropyLoss(reduction="none")(x, t).shape == (2,)
    assert nn.MSELoss()(tj.tensor([1.0, 3.0]), tj.tensor([0.0, 0.0])).item() == 5.0
    with pytest.raises(ValueError, match="shape"):
        nn.MSELoss()(tj.ones(2), tj.ones(3))


def test_sgd_matches_hand_written_update():
    p = nn.Parameter(tj.tensor([1.0, -2.0]))
    opt = tj.optim.SGD([p], lr=0.1, momentum=0.9)
    buf = None
    expected = p.detach().numpy().copy()
    for _step in range(3):
        opt.zero_grad()
        (p * p).sum().backward()
        g = 2 * expected
        buf = g if buf is None else 0.9 * buf + g
        expected = expected - 0.1 * buf
        opt.step()
        np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-6)


# ---- PyTorch as oracle ---------------------------------------------------------------------
def _copy_weights(tmodel, jmodel):
    import torch

    with torch.no_grad():
        for (tn, tp), (jn, jp) in zip(tmodel.named_parameters(), jmodel.named_parameters()):
            assert tn == jn
            tp.copy_(torch.from_numpy(jp.detach().numpy().copy()))


@requires_torch
def test_mlp_outputs_and_gradients_match_pytorch():
    import torch

    tj.manual_seed(3)
    jm = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 4),
                       nn.Sigmoid())
    tm = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8),
                             torch.nn.Tanh(), torch.nn.Linear(8, 4), torch.nn.Sigmoid())
    _copy_weights(tm, jm)
    x = np.random.default_rng(0).standard_normal((10, 6)).astype(np.float32)
    target = np.random.default_rng(1).integers(0, 4, 10)
    jl = nn.CrossEntropyLoss()(jm(tj.from_numpy(x)), tj.from_numpy(target))
    tl = torch.nn.CrossEntropyLoss()(tm(torch.from_numpy(x)), torch.from_numpy(target))
    jl.backward()
    tl.backward()
    np.testing.assert_allclose(jl.item(), tl.item(), rtol=1e-5)
    for (n, jp), tp in zip(jm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(jp.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=n)


@requires_torch
@pytest.mark.parametrize("kw", [dict(momentum=0.0), dict(momentum=0.9),
                                dict(momentum=0.9, nesterov=True, weight_decay=1e-2),
                                dict(momentum=0.5, dampening=0.3)])
def test_sgd_trajectory_matches_pytorch(kw):
    import torch

    tj.manual_seed(4)
    jm = nn.Linear(5, 3)
    tm = torch.nn.Linear(5, 3)
    _copy_weights(tm, jm)
    jopt = tj.optim.SGD(jm.parameters(), lr=0.05, **kw)
    topt = torch.optim.SGD(tm.parameters(), lr=0.05, **kw)
    rng = np.random.default_rng(5)
    for _step in range(20):
        x = rng.standard_normal((8, 5)).astype(np.float32)
        y = rng.standard_normal((8, 3)).astype(np.float32)
        for model, opt, lib in ((jm, jopt, tj), (tm, topt, torch)):
            opt.zero_grad()
            loss = ((model(lib.from_numpy(x)) - lib.from_numpy(y)) ** 2).mean()
            loss.backward()
            opt.step()
    np.testing.assert_allclose(jm.weight.detach().numpy(), tm.weight.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jm.bias.detach().numpy(), tm.bias.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


@requires_torch
def test_pytorch_state_dict_loads_through_numpy():
    import torch

    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    jm = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    jm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(jm(tj.from_numpy(x)).detach().numpy(),
                               tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
