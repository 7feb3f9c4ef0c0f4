"""Script mode over modules: every `tracejit.nn` layer scripted against eager (outputs,
input and parameter gradients) on inputs of other batch sizes and lengths than the
first call, with one compile each; the seed programs; trace and script together."""
from __future__ import annotations

import pytest

import tracejit as tj
from tracejit import nn
from tracejit.nn.utils.rnn import pack_padded_sequence
from tracejit.testing.differential import Call, compare, outcome


@pytest.fixture(autouse=True, params=["interpret", "numba"])
def backend(request, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", request.param)
    return request.param


def agree_module(m, *calls: Call, compiles: int = 1):
    sm = tj.script(m)
    params = list(m.parameters())
    for call in calls:
        diff = compare(outcome(m, *call.fresh(), params=params),
                       outcome(sm, *call.fresh(), params=params))
        assert diff is None, f"{type(m).__name__}: {diff}"
    assert sm.stats["compiles"] == compiles, sm.explain()
    assert sm.stats["eager_fallbacks"] == 0, sm.explain()
    return sm


def rg(*shape):
    return tj.randn(*shape).requires_grad_()


def ids(*values):
    return tj.tensor(list(values))


LAYERS = [
    ("Linear", lambda: nn.Linear(5, 3), [(rg(4, 5),), (rg(7, 5),)]),
    ("ReLU", nn.ReLU, [(rg(4, 5),), (rg(2, 5),)]),
    ("Tanh", nn.Tanh, [(rg(3),), (rg(6),)]),
    ("Sigmoid", nn.Sigmoid, [(rg(3, 2),), (rg(5, 2),)]),
    ("GELU", nn.GELU, [(rg(4, 5),), (rg(2, 5),)]),
    ("GELU-tanh", lambda: nn.GELU(approximate="tanh"), [(rg(4, 5),), (rg(3, 5),)]),
    ("Softmax", lambda: nn.Softmax(dim=1), [(rg(4, 5),), (rg(3, 6),)]),
    ("LayerNorm", lambda: nn.LayerNorm(5), [(rg(2, 3, 5),), (rg(4, 2, 5),)]),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(5), [(rg(4, 5),), (rg(7, 5),)]),
    ("BatchNorm2d-eval", lambda: nn.BatchNorm2d(3).eval(), [(rg(2, 3, 4, 4),),
                                                             (rg(5, 3, 2, 6),)]),
    ("Dropout-eval", lambda: nn.Dropout(0.5).eval(), [(rg(4, 5),), (rg(3, 5),)]),
    ("Conv2d", lambda: nn.Conv2d(3, 4, 3, padding=1), [(rg(2, 3, 5, 5),), (rg(3, 3, 5, 5),)]),
    ("Conv1d", lambda: nn.Conv1d(3, 4, 3, stride=2), [(rg(2, 3, 9),), (rg(4, 3, 9),)]),
    ("MaxPool2d", lambda: nn.MaxPool2d(2), [(rg(2, 3, 4, 6),), (rg(1, 3, 4, 6),)]),
    ("AvgPool2d", lambda: nn.AvgPool2d(3, stride=2, padding=1), [(rg(2, 3, 5, 5),),
                                                                 (rg(4, 3, 5, 5),)]),
    ("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d(1), [(rg(2, 3, 4, 4),),
                                                           (rg(5, 3, 4, 4),)]),
    ("Flatten", lambda: nn.Flatten(), [(rg(2, 3, 4),), (rg(5, 3, 4),)]),
    ("Embedding", lambda: nn.Embedding(10, 4), [(ids(1, 2, 3),), (ids(4, 5, 6, 7, 8),)]),
    ("Sequential", lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
     [(rg(3, 4),), (rg(6, 4),)]),
    ("RNNCell", lambda: nn.RNNCell(4, 6), [(rg(3, 4), rg(3, 6)), (rg(5, 4), rg(5, 6))]),
    ("RNNCell-relu", lambda: nn.RNNCell(4, 6, nonlinearity="relu"), [(rg(3, 4),), (rg(5, 4),)]),
    ("GRUCell", lambda: nn.GRUCell(4, 6), [(rg(3, 4),), (rg(5, 4),)]),
    ("LSTMCell", lambda: nn.LSTMCell(4, 6), [(rg(3, 4),), (rg(5, 4),)]),
    ("RNN-2-layer", lambda: nn.RNN(4, 6, num_layers=2),
     [(rg(7, 3, 4),), (rg(4, 3, 4),), (rg(9, 2, 4),)]),
    ("RNN-bi-batch-first", lambda: nn.RNN(4, 5, batch_first=True, bidirectional=True),
     [(rg(3, 7, 4), rg(2, 3, 5)), (rg(3, 4, 4), rg(2, 3, 5))]),
    ("GRU-2-layer-bi", lambda: nn.GRU(4, 6, num_layers=2, bidirectional=True),
     [(rg(5, 2, 4),), (rg(8, 2, 4),)]),
    ("LSTM", lambda: nn.LSTM(4, 6), [(rg(5, 2, 4),), (rg(3, 2, 4),), (rg(6, 4, 4),)]),
    ("LSTM-unbatched", lambda: nn.LSTM(3, 4), [(rg(6, 3),), (rg(2, 3),)]),
    ("MSELoss", nn.MSELoss, [(rg(3, 4), tj.randn(3, 4)), (rg(5, 4), tj.randn(5, 4))]),
    ("CrossEntropyLoss", nn.CrossEntropyLoss,
     [(rg(3, 4), ids(0, 1, 3)), (rg(5, 4), ids(0, 1, 3, 2, 2))]),
    ("NLLLoss", nn.NLLLoss, [(rg(3, 4), ids(0, 1, 3)), (rg(5, 4), ids(0, 1, 3, 2, 2))]),
    ("BCEWithLogitsLoss", nn.BCEWithLogitsLoss,
     [(rg(3, 4), tj.rand(3, 4)), (rg(5, 4), tj.rand(5, 4))]),
]


@pytest.mark.parametrize("name,make,calls", LAYERS, ids=[x[0] for x in LAYERS])
def test_every_layer_scripts_and_agrees_with_eager(name, make, calls):
    tj.manual_seed(0)
    agree_module(make(), *[Call(*args) for args in calls])


def test_module_containers_script():
    blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
    heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks, self.heads = blocks, heads

        def forward(self, x):
            for block in self.blocks:
                x = x + block(x).tanh()
            return self.heads["a"](x) + self.heads["b"](x)

    agree_module(Net(), Call(rg(3, 4)), Call(rg(6, 4)))


@pytest.mark.parametrize("make", [lambda: nn.RNN(3, 4), lambda: nn.GRU(3, 4, num_layers=2),
                                  lambda: nn.LSTM(3, 4, bidirectional=True)],
                         ids=["RNN", "GRU-2-layer", "LSTM-bi"])
def test_recurrent_layers_on_packed_sequences_compile_once(make):
    def packed(T, lengths):
        return pack_padded_sequence(tj.randn(T, len(lengths), 3), tj.tensor(lengths),
                                    enforce_sorted=False)

    agree_module(make(), Call(packed(5, [2, 5, 3])), Call(packed(7, [4, 7, 1, 6])),
                 Call(packed(3, [2, 3])))


# ---- the seed programs --------------------------------------------------------------------------
def _example(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PerSample = _example("scripted_rnn").PerSample  # the per-sample loop over a padded batch


class AdaptiveDepth(nn.Module):
    """A network whose depth is chosen per sample (larger norm, more residual blocks)."""

    def __init__(self, width: int = 8, max_depth: int = 4):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(max_depth)])
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        outs = []
        for row in x:
            h = row
            depth = min(len(self.blocks), 1 + int(row.norm()))
            for i, block in enumerate(self.blocks):
                if i < depth:
                    h = h + block(h).tanh()
            outs.append(self.head(h))
        return tj.stack(outs)


def test_a_per_sample_loop_over_a_padded_batch_compiles_once():
    tj.manual_seed(1)
    agree_module(PerSample(), Call(tj.randn(3, 6, 3), tj.tensor([6, 2, 4])),
                 Call(tj.randn(5, 9, 3), tj.tensor([1, 9, 3, 7, 2])),
                 Call(tj.randn(2, 4, 3), tj.tensor([4, 3])))


def test_a_depth_chosen_per_sample_compiles_once():
    tj.manual_seed(2)
    scale = [tj.linspace(0.1, 1.4, n).unsqueeze(1) for n in (6, 3, 9)]
    agree_module(AdaptiveDepth(), *[Call(tj.randn(s.shape[0], 8) * s) for s in scale])


# ---- trace and script together -------------------------------------------------------------------
@tj.script
def scripted_step(x):
    if x.sum() > 0:
        return x * 2
    return -x


def test_a_trace_keeps_a_scripted_callees_control_flow():
    traced = tj.trace(lambda x: scripted_step(x) + 1, (tj.ones(3),))
    assert "if(" in str(traced.graph)
    for v in (1.0, -1.0, 2.0, -3.0):
        x = tj.ones(4) * v
        assert tj.allclose(traced(x), scripted_step.original(x) + 1)
    assert traced.stats["compiles"] == 1 and not traced.traces[0].value_guards()


def test_dropout_while_training_draws_what_eager_draws():
    m = nn.Dropout(0.5)
    sm = tj.script(m)
    for n in (4, 7, 5):
        x = tj.randn(n, 6)
        tj.manual_seed(n)
        expected = m(x)
        tj.manual_seed(n)
        assert tj.equal(sm(x), expected)
    assert sm.stats["compiles"] == 1
