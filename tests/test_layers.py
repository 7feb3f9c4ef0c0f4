"""Layers, losses and optimisers against PyTorch with identical weights (float32, 1e-5),
and against numpy where PyTorch is not needed."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn
from conftest import requires_torch

RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def load_from_torch(jm, tm):
    """Copy PyTorch's parameters into the tracejit module through numpy (names must match)."""
    jm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})


def compare(jm, tm, inputs, *, reduce_out=lambda o: o, atol=1e-5, rtol=1e-5):
    """Outputs, input gradients and parameter gradients must agree."""
    import torch

    jx = [tj.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
          for a in inputs]
    tx = [torch.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
          for a in inputs]
    jo_l, to_l = _leaves(reduce_out(jm(*jx))), _leaves(reduce_out(tm(*tx)))
    assert len(jo_l) == len(to_l)
    for a, b in zip(jo_l, to_l):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=rtol)
    seed = [RNG.standard_normal(tuple(b.shape)).astype(np.float32) for b in to_l]
    sum(((a * tj.tensor(s)).sum() for a, s in zip(jo_l, seed)), tj.tensor(0.0)).backward()
    sum(((b * torch.tensor(s)).sum() for b, s in zip(to_l, seed)), torch.tensor(0.0)).backward()
    for a, b in zip(jx, tx):
        if isinstance(a, tj.Tensor) and a.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=atol, rtol=rtol)
    for (n, p), (tn, tp) in zip(jm.named_parameters(), tm.named_parameters()):
        assert n == tn
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=atol, rtol=rtol,
                                   err_msg=n)


def probabilities(*shape):
    return RNG.uniform(0.02, 0.98, shape).astype(np.float32)


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in _leaves(o)]
    return [out]


def same_parameter_shapes(jm, tm):
    assert [(n, tuple(p.shape)) for n, p in jm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]


# ---- per-layer checks against PyTorch ------------------------------------------------------
LAYERS = [
    ("Linear", lambda m: m.Linear(5, 3), [data(4, 5)]),
    ("GELU", lambda m: m.GELU(), [data(4, 5)]),
    ("GELU-tanh", lambda m: m.GELU(approximate="tanh"), [data(4, 5)]),
    ("Softmax", lambda m: m.Softmax(dim=1), [data(4, 5)]),
    ("LayerNorm", lambda m: m.LayerNorm(5), [data(2, 3, 5)]),
    ("BatchNorm1d", lambda m: m.BatchNorm1d(5), [data(4, 5)]),
    ("BatchNorm1d-3d", lambda m: m.BatchNorm1d(3), [data(4, 3, 6)]),
    ("BatchNorm2d", lambda m: m.BatchNorm2d(3), [data(2, 3, 4, 5)]),
    ("BatchNorm2d-eval", lambda m: m.BatchNorm2d(3).eval(), [data(2, 3, 4, 5)]),
    ("BatchNorm1d-no-stats", lambda m: m.BatchNorm1d(5, track_running_stats=False,
                                                       affine=False), [data(4, 5)]),
    ("LayerNorm-2d", lambda m: m.LayerNorm((3, 5)), [data(2, 3, 5)]),
    ("Tanh", lambda m: m.Tanh(), [data(3)]),
    ("Sigmoid", lambda m: m.Sigmoid(), [data(3)]),
    ("ReLU", lambda m: m.ReLU(), [data(3, 2)]),
    ("LeakyReLU", lambda m: m.LeakyReLU(0.2), [data(3, 4)]),
    ("SiLU", lambda m: m.SiLU(), [data(3, 4)]),
    ("ReLU-inplace", lambda m: m.Sequential(m.Linear(4, 3), m.ReLU(inplace=True)),
     [data(5, 4)]),
    ("LeakyReLU-inplace", lambda m: m.Sequential(m.Linear(4, 3), m.LeakyReLU(inplace=True)),
     [data(5, 4)]),
    ("SiLU-inplace", lambda m: m.Sequential(m.Linear(4, 3), m.SiLU(inplace=True)),
     [data(5, 4)]),
    ("PixelShuffle", lambda m: m.PixelShuffle(2), [data(2, 8, 3, 3)]),
    ("PixelUnshuffle", lambda m: m.PixelUnshuffle(3), [data(1, 2, 6, 3)]),
    ("Dropout2d-eval", lambda m: m.Dropout2d(0.3).eval(), [data(2, 3, 4, 4)]),
    ("sub-pixel-upsampler", lambda m: m.Sequential(m.Conv2d(3, 12, 3, padding=1),
                                                   m.PixelShuffle(2), m.LeakyReLU(0.1)),
     [data(2, 3, 4, 5)]),
    ("RNNCell", lambda m: m.RNNCell(4, 6), [data(3, 4), data(3, 6)]),
    ("RNNCell-relu", lambda m: m.RNNCell(4, 6, nonlinearity="relu"), [data(3, 4)]),
    ("GRUCell", lambda m: m.GRUCell(4, 6), [data(3, 4), data(3, 6)]),
    ("RNN", lambda m: m.RNN(4, 6, num_layers=2), [data(7, 3, 4)]),
    ("RNN-bi-batch-first", lambda m: m.RNN(4, 5, batch_first=True, bidirectional=True),
     [data(3, 7, 4), data(2, 3, 5)]),
    ("GRU", lambda m: m.GRU(4, 6, num_layers=2, bidirectional=True), [data(5, 2, 4)]),
    ("LSTM", lambda m: m.LSTM(4, 6), [data(5, 2, 4)]),
    ("LSTM-2-layer-bi", lambda m: m.LSTM(3, 4, num_layers=2, bidirectional=True,
                                         batch_first=True), [data(2, 6, 3)]),
    ("RNN-unbatched", lambda m: m.GRU(4, 5), [data(6, 4)]),
    ("Conv2d", lambda m: m.Conv2d(3, 5, 3), [data(2, 3, 7, 6)]),
    ("Conv2d-strided-padded", lambda m: m.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 2)),
     [data(2, 3, 7, 6)]),
    ("Conv2d-dilated-groups", lambda m: m.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2),
     [data(2, 4, 8, 8)]),
    ("Conv2d-same-no-bias", lambda m: m.Conv2d(3, 4, 5, padding="same", bias=False),
     [data(1, 3, 6, 7)]),
    ("Conv1d", lambda m: m.Conv1d(3, 4, 3, stride=2, padding=1), [data(2, 3, 9)]),
    ("Conv1d-groups", lambda m: m.Conv1d(4, 4, 2, groups=4, dilation=3), [data(3, 4, 10)]),
    ("MaxPool2d", lambda m: m.MaxPool2d(2), [data(2, 3, 6, 7)]),
    ("MaxPool2d-overlapping-padded", lambda m: m.MaxPool2d(3, stride=2, padding=1),
     [data(2, 3, 7, 6)]),
    ("MaxPool2d-dilated-unbatched", lambda m: m.MaxPool2d(2, stride=1, dilation=2),
     [data(3, 6, 6)]),
    ("AvgPool2d", lambda m: m.AvgPool2d(2), [data(2, 3, 6, 7)]),
    ("AvgPool2d-padded", lambda m: m.AvgPool2d(3, stride=2, padding=1), [data(2, 3, 7, 6)]),
    ("AdaptiveAvgPool2d-global", lambda m: m.AdaptiveAvgPool2d(1), [data(2, 3, 5, 7)]),
    ("AdaptiveAvgPool2d-bins", lambda m: m.AdaptiveAvgPool2d((3, 2)), [data(2, 3, 7, 5)]),
    ("AdaptiveAvgPool2d-even", lambda m: m.AdaptiveAvgPool2d(2), [data(2, 3, 6, 4)]),
    ("Flatten", lambda m: m.Flatten(), [data(2, 3, 4, 5)]),
    ("CNN", lambda m: m.Sequential(m.Conv2d(3, 8, 3, padding=1), m.BatchNorm2d(8), m.ReLU(),
                                   m.MaxPool2d(2), m.Conv2d(8, 4, 3), m.ReLU(),
                                   m.AdaptiveAvgPool2d(1), m.Flatten(), m.Linear(4, 2)),
     [data(4, 3, 8, 8)]),
]


@requires_torch
@pytest.mark.parametrize("name,make,inputs", LAYERS, ids=[x[0] for x in LAYERS])
def test_layer_matches_pytorch(name, make, inputs):
    import torch

    tj.manual_seed(0)
    jm, tm = make(nn), make(torch.nn)
    same_parameter_shapes(jm, tm)
    load_from_torch(jm, tm)
    compare(jm, tm, inputs)


@requires_torch
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_running_statistics_follow_pytorch(momentum):
    import torch

    jm, tm = nn.BatchNorm2d(3, momentum=momentum), torch.nn.BatchNorm2d(3, momentum=momentum)
    load_from_torch(jm, tm)
    for step in range(4):
        x = data(2 + step, 3, 4, 5)
        jm(tj.tensor(x))
        tm(torch.tensor(x))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(jm, name).numpy(), getattr(tm, name).numpy(),
                                   rtol=1e-5, atol=1e-6)
    jm.eval(), tm.eval()
    x = data(3, 3, 4, 5)
    np.testing.assert_allclose(jm(tj.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(tj.randn(1, 3))
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(tj.randn(2, 3))


@requires_torch
def test_lstm_cell_with_state_matches_pytorch():
    import torch

    jm, tm = nn.LSTMCell(4, 6), torch.nn.LSTMCell(4, 6)
    load_from_torch(jm, tm)
    x, h, c = data(3, 4), data(3, 6), data(3, 6)
    jh, jc = jm(tj.tensor(x), (tj.tensor(h), tj.tensor(c)))
    th, tc = tm(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
    np.testing.assert_allclose(jh.detach().numpy(), th.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(jc.detach().numpy(), tc.detach().numpy(), atol=1e-6)


@requires_torch
def test_lstm_with_initial_state_matches_pytorch():
    import torch

    jm, tm = nn.LSTM(3, 4, num_layers=2), torch.nn.LSTM(3, 4, num_layers=2)
    load_from_torch(jm, tm)
    x, h, c = data(5, 2, 3), data(2, 2, 4), data(2, 2, 4)
    jo, (jh, jc) = jm(tj.tensor(x), (tj.tensor(h), tj.tensor(c)))
    to, (th, tc) = tm(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
    for a, b in ((jo, to), (jh, th), (jc, tc)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-5)


@requires_torch
@pytest.mark.parametrize("mode", ["RNN", "GRU", "LSTM"])
def test_packed_sequences_match_pytorch(mode):
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence as tpack
    from torch.nn.utils.rnn import pad_packed_sequence as tpad

    from tracejit.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    jm = getattr(nn, mode)(3, 4, bidirectional=True)
    tm = getattr(torch.nn, mode)(3, 4, bidirectional=True)
    load_from_torch(jm, tm)
    x = data(6, 4, 3)
    lengths = [3, 6, 1, 4]  # unsorted on purpose
    jout, jstate = jm(pack_padded_sequence(tj.tensor(x), lengths, enforce_sorted=False))
    tout, tstate = tm(tpack(torch.tensor(x), torch.tensor(lengths), enforce_sorted=False))
    jpad, jlen = pad_packed_sequence(jout)
    tpad_, tlen = tpad(tout)
    np.testing.assert_allclose(jpad.detach().numpy(), tpad_.detach().numpy(), atol=1e-5)
    assert jlen.tolist() == tlen.tolist()
    jh = jstate[0] if mode == "LSTM" else jstate
    th = tstate[0] if mode == "LSTM" else tstate
    np.testing.assert_allclose(jh.detach().numpy(), th.detach().numpy(), atol=1e-5)


@requires_torch
def test_embedding_matches_pytorch_including_padding_idx():
    import torch

    jm, tm = nn.Embedding(10, 4, padding_idx=0), torch.nn.Embedding(10, 4, padding_idx=0)
    load_from_torch(jm, tm)
    idx = np.array([[1, 0, 3], [3, 3, 9]])
    jo, to = jm(tj.tensor(idx)), tm(torch.tensor(idx))
    np.testing.assert_allclose(jo.detach().numpy(), to.detach().numpy())
    (jo ** 2).sum().backward()
    (to ** 2).sum().backward()
    np.testing.assert_allclose(jm.weight.grad.numpy(), tm.weight.grad.numpy(), atol=1e-6)
    assert np.all(jm.weight.grad.numpy()[0] == 0)


LOSSES = [
    ("MSELoss", lambda m: m.MSELoss(), lambda: [data(4, 3), data(4, 3)]),
    ("MSELoss-sum", lambda m: m.MSELoss(reduction="sum"), lambda: [data(4, 3), data(4, 3)]),
    ("CrossEntropyLoss", lambda m: m.CrossEntropyLoss(),
     lambda: [data(5, 4), RNG.integers(0, 4, 5)]),
    ("CrossEntropyLoss-none", lambda m: m.CrossEntropyLoss(reduction="none"),
     lambda: [data(5, 4), RNG.integers(0, 4, 5)]),
    ("CrossEntropyLoss-ignore", lambda m: m.CrossEntropyLoss(ignore_index=1),
     lambda: [data(6, 4), np.array([0, 1, 2, 1, 3, 0])]),
    ("CrossEntropyLoss-smoothing", lambda m: m.CrossEntropyLoss(label_smoothing=0.1),
     lambda: [data(5, 4), RNG.integers(0, 4, 5)]),
    ("CrossEntropyLoss-3d", lambda m: m.CrossEntropyLoss(),
     lambda: [data(2, 4, 3), RNG.integers(0, 4, (2, 3))]),
    ("NLLLoss", lambda m: m.NLLLoss(), lambda: [data(5, 4), RNG.integers(0, 4, 5)]),
    ("NLLLoss-sum", lambda m: m.NLLLoss(reduction="sum"),
     lambda: [data(5, 4), RNG.integers(0, 4, 5)]),
    ("BCELoss", lambda m: m.BCELoss(), lambda: [probabilities(4, 3), probabilities(4, 3)]),
    ("BCELoss-sum", lambda m: m.BCELoss(reduction="sum"),
     lambda: [probabilities(6), (RNG.random(6) > 0.5).astype(np.float32)]),
    ("SmoothL1Loss", lambda m: m.SmoothL1Loss(), lambda: [data(4, 3), data(4, 3)]),
    ("SmoothL1Loss-beta-none", lambda m: m.SmoothL1Loss(reduction="none", beta=0.5),
     lambda: [data(4, 3), data(4, 3)]),
    ("BCEWithLogitsLoss", lambda m: m.BCEWithLogitsLoss(),
     lambda: [data(4, 3) * 5, (RNG.random((4, 3)) > 0.5).astype(np.float32)]),
    ("BCEWithLogitsLoss-none", lambda m: m.BCEWithLogitsLoss(reduction="none"),
     lambda: [data(4, 3), RNG.random((4, 3)).astype(np.float32)]),
]


@requires_torch
@pytest.mark.parametrize("name,make,inputs", LOSSES, ids=[x[0] for x in LOSSES])
def test_loss_matches_pytorch(name, make, inputs):
    compare(make(nn), make(__import__("torch").nn), inputs())


@requires_torch
def test_weighted_losses_match_pytorch():
    import torch

    w = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    compare(nn.CrossEntropyLoss(weight=tj.tensor(w)), torch.nn.CrossEntropyLoss(
        weight=torch.tensor(w)), [data(5, 4), RNG.integers(0, 4, 5)])
    bw = np.array([0.5, 2.0, 1.0], np.float32)
    jm, tm = nn.BCELoss(weight=tj.tensor(bw)), torch.nn.BCELoss(weight=torch.tensor(bw))
    assert list(jm.state_dict()) == list(tm.state_dict()) == ["weight"]
    compare(jm, tm, [probabilities(4, 3), probabilities(4, 3)])
    pw = np.array([2.0, 0.5, 1.0], np.float32)
    compare(nn.BCEWithLogitsLoss(pos_weight=tj.tensor(pw)), torch.nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor(pw)), [data(4, 3), RNG.random((4, 3)).astype(np.float32)])


# ---- layers by themselves ------------------------------------------------------------------
def test_dropout_respects_train_eval_and_the_seed():
    d = nn.Dropout(0.5)
    x = tj.ones(1000)
    tj.manual_seed(7)
    a = d(x)
    tj.manual_seed(7)
    b = d(x)
    assert tj.equal(a, b)
    kept = (a != 0).float().mean().item()
    assert 0.4 < kept < 0.6 and set(np.unique(a.numpy())) <= {0.0, 2.0}
    d.eval()
    assert tj.equal(d(x), x)


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and isinstance(layers[-1], nn.Linear)
    layers.append(nn.ReLU())
    assert [n for n, _ in layers.named_modules()][1:] == ["0", "1", "2", "3"]
    assert len(list(layers.parameters())) == 6
    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 3)})
    assert list(heads.keys()) == ["a", "b"] and "a" in heads
    assert [n for n, _ in heads.named_parameters()] == ["a.weight", "a.bias", "b.weight",
                                                         "b.bias"]


def test_pad_sequence_and_packing_round_trip():
    from tracejit.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

    seqs = [tj.ones(3, 2), tj.ones(5, 2) * 2, tj.ones(1, 2) * 3]
    padded = pad_sequence(seqs)
    assert padded.shape == (5, 3, 2) and padded[4, 0].tolist() == [0.0, 0.0]
    assert pad_sequence(seqs, batch_first=True).shape == (3, 5, 2)
    packed = pack_padded_sequence(padded, [3, 5, 1], enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 2, 2, 1, 1]
    assert packed.data.shape == (9, 2)
    back, lengths = pad_packed_sequence(packed)
    assert tj.equal(back, padded) and lengths.tolist() == [3, 5, 1]
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_padded_sequence(padded, [3, 5, 1])


def test_clip_grad_norm():
    a = nn.Parameter(tj.tensor([3.0]))
    b = nn.Parameter(tj.tensor([4.0]))
    (a * a / 2 + b * b / 2).sum().backward()  # grads 3 and 4: norm 5
    total = nn.utils.clip_grad_norm_([a, b], 1.0)
    assert abs(total.item() - 5.0) < 1e-6
    np.testing.assert_allclose([a.grad.item(), b.grad.item()], [0.6, 0.8], rtol=1e-5)


def test_checkpoint_gives_the_same_gradients_and_saves_fewer_activations():
    import tracemalloc

    tj.manual_seed(0)
    block = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(256, 256), nn.Tanh())])
    x = tj.randn(64, 256, requires_grad=True)

    def run(use_checkpoint):
        for p in block.parameters():
            p.grad = None
        x.grad = None
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        y = tj.utils.checkpoint.checkpoint(block, x) if use_checkpoint else block(x)
        held = tracemalloc.get_traced_memory()[0] - base  # what the graph keeps alive
        tracemalloc.stop()
        (y * y).sum().backward()
        return held, [p.grad.clone() for p in block.parameters()] + [x.grad.clone()]

    held_plain, grads_plain = run(False)
    held_ckpt, grads_ckpt = run(True)
    for a, b in zip(grads_plain, grads_ckpt):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    activation = 64 * 256 * 4
    assert held_plain > 5 * activation  # each tanh's output is saved for backward
    assert held_ckpt < 2 * activation   # only the output (inputs are the caller's)


def test_checkpoint_replays_dropout_masks():
    tj.manual_seed(1)
    block = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    x = tj.randn(4, 8, requires_grad=True)
    tj.manual_seed(2)
    block(x).sum().backward()
    plain = x.grad.clone()
    x.grad = None
    tj.manual_seed(2)
    tj.utils.checkpoint.checkpoint(block, x).sum().backward()
    np.testing.assert_allclose(plain.numpy(), x.grad.numpy(), rtol=1e-6)


def test_save_and_load_round_trip_without_pickle(tmp_path):
    obj = {"w": tj.randn(3, 2), "nested": {"b": tj.arange(4), "list": [tj.ones(1), 2.5, "s"]},
           "none": None}
    path = tmp_path / "ckpt.npz"
    tj.save(obj, path)
    back = tj.load(path)
    assert tj.equal(back["w"], obj["w"]) and tj.equal(back["nested"]["b"], obj["nested"]["b"])
    assert back["nested"]["list"][1:] == [2.5, "s"] and back["none"] is None
    with np.load(path, allow_pickle=False) as raw:  # a plain npz: readable without tracejit
        assert len(raw.files) == 4


def test_load_refuses_files_it_did_not_write(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, a=np.zeros(2))
    with pytest.raises(ValueError, match="not a tracejit file"):
        tj.load(path)


def test_module_to_dtype_and_apply():
    m = nn.Linear(2, 2)
    m.to(tj.float64)
    assert m.weight.dtype is tj.float64
    m.apply(lambda mod: nn.init.zeros_(mod.bias) if isinstance(mod, nn.Linear) else None)
    assert m.bias.tolist() == [0.0, 0.0]


# ---- optimisers ----------------------------------------------------------------------------
OPTIMS = [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01)), ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01)), ("AdamW", dict(lr=0.01, weight_decay=0.3, betas=(0.8, 0.99))),
]


@requires_torch
@pytest.mark.parametrize("name,kw", OPTIMS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMS)])
def test_optimizer_trajectory_matches_pytorch_over_20_steps(name, kw):
    import torch

    jm, tm = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), \
        torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    load_from_torch(jm, tm)
    jopt = getattr(tj.optim, name)(jm.parameters(), **kw)
    topt = getattr(torch.optim, name)(tm.parameters(), **kw)
    rng = np.random.default_rng(3)
    for _ in range(20):
        x, y = data(16, 4), rng.standard_normal((16, 2)).astype(np.float32)
        for m, opt, lib in ((jm, jopt, tj), (tm, topt, torch)):
            opt.zero_grad()
            ((m(lib.tensor(x)) - lib.tensor(y)) ** 2).mean().backward()
            opt.step()
    for (n, p), tp in zip(jm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-5, err_msg=n)


def test_optimizer_state_dict_round_trip_continues_identically():
    def make():
        tj.manual_seed(0)
        m = nn.Linear(3, 1)
        return m, tj.optim.Adam(m.parameters(), lr=0.05)

    x, y = tj.randn(8, 3), tj.randn(8, 1)

    def step(m, opt):
        opt.zero_grad()
        ((m(x) - y) ** 2).mean().backward()
        opt.step()

    m1, o1 = make()
    for _ in range(3):
        step(m1, o1)
    m2, o2 = make()
    m2.load_state_dict(m1.state_dict())
    o2.load_state_dict(o1.state_dict())
    step(m1, o1)
    step(m2, o2)
    assert tj.equal(m1.weight, m2.weight)
    assert o1.state_dict()["state"][0]["step"] == 4


@requires_torch
def test_optimizer_state_dict_from_pytorch_loads():
    import torch

    tm = torch.nn.Linear(3, 2)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    tm(torch.randn(4, 3)).sum().backward()
    topt.step()
    jm = nn.Linear(3, 2)
    jopt = tj.optim.SGD(jm.parameters(), lr=0.5, momentum=0.5)
    sd = topt.state_dict()
    jopt.load_state_dict({"state": {k: {n: v.numpy() for n, v in s.items()}
                                    for k, s in sd["state"].items()},
                          "param_groups": sd["param_groups"]})
    assert jopt.param_groups[0]["lr"] == 0.1
    buf = jopt.state[jm.weight]["momentum_buffer"]
    np.testing.assert_allclose(buf.numpy(), sd["state"][0]["momentum_buffer"].numpy())


def test_rnn_dropout_between_layers_only_while_training():
    tj.manual_seed(0)
    gru = nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = tj.randn(5, 2, 3)
    gru.eval()
    a, _ = gru(x)
    b, _ = gru(x)
    assert tj.equal(a, b)  # no dropout in eval
    gru.train()
    c, _ = gru(x)
    assert not tj.allclose(a, c)
    one = nn.GRU(3, 4, num_layers=1, dropout=0.5)  # a single layer has nothing between layers
    one.train()
    d1, _ = one(x)
    d2, _ = one(x)
    assert tj.equal(d1, d2)


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}])
def test_sgd_steps_allocate_no_parameter_sized_temporaries(kw):
    """Temporaries of a parameter's size, freed each step, make glibc return memory to
    the system and the next step's arrays fault their pages in again; the update goes
    through one reused scratch array instead."""
    import tracemalloc

    w = tj.zeros(1 << 20, requires_grad=True)    # 4 MB
    opt = tj.optim.SGD([w], lr=0.1, **kw)
    w.grad = tj.ones(1 << 20)
    opt.step()                                   # the scratch (and momentum) made once
    tracemalloc.start()
    try:
        opt.step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20)  # well under the 4 MB one temporary would take
    expected = -0.2 if not kw else -0.1 - 0.19
    np.testing.assert_allclose(w.detach().numpy()[:3], expected, rtol=1e-6)


@pytest.mark.compile
def test_a_traced_batch_norm_updates_its_running_statistics_as_eager_does():
    # tracing runs the example call (as torch.jit.trace does), so both see it
    a, b = nn.BatchNorm1d(4), nn.BatchNorm1d(4)
    example = tj.randn(5, 4)
    traced = tj.trace(a, (example,), backend="numba")
    b(example)
    for n in (5, 9, 3):
        x = tj.randn(n, 4)
        np.testing.assert_allclose(traced(x).detach().numpy(), b(x).detach().numpy(),
                                   rtol=1e-6, atol=1e-6)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(a, name).numpy(), getattr(b, name).numpy(),
                                   rtol=1e-6)
    assert traced.stats["compiles"] == 1


def test_batch_norm_training_fuses_its_statistics_into_row_kernels():
    """BatchNorm1d in training mode: the centred squares and their sum over the batch are
    one row kernel (its column sums), and the traced call keeps eager's values and
    running statistics."""
    bn = nn.BatchNorm1d(8)
    ref = nn.BatchNorm1d(8)
    traced = tj.trace(lambda x: bn(x).relu(), (tj.randn(16, 8),))
    fused = [n for n in traced.graph.nodes if n.op == "fused" and n.attrs["kind"] == "row"]
    assert any("sum_to" in {m.op for m in f.regions[0].nodes} and "mul" in
               {m.op for m in f.regions[0].nodes} for f in fused), traced.graph
    ref(tj.randn(16, 8))  # the same single update the trace's recording call made
    ref.load_state_dict(bn.state_dict())
    for batch in (16, 5):
        x = tj.randn(batch, 8)
        np.testing.assert_allclose(traced(x).detach().numpy(), ref(x).relu().detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(getattr(bn, name).numpy(), getattr(ref, name).numpy(),
                                       rtol=1e-6, atol=1e-7)
