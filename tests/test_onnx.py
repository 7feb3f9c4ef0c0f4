"""ONNX export, checked by onnxruntime against eager on inputs of other sizes than the
export example: every op the exporter lowers (parametrised over the op table), models,
dynamic dimensions, initializer names, and the refusals."""
from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from op_samples import SAMPLES

import tracejit as tj
from tracejit import nn
from tracejit.codegen.plan import one_op_region
from tracejit.onnx.exporter import build_model
from tracejit.onnx.lowering import (CODE_FOR_FN, LOWERINGS, REFUSED, REFUSED_FNS, ExportError,
                                    expressible)
from tracejit.ops import OPS
from tracejit.ops.registry import ELEMENTWISE
from tracejit.ops.scalar import FUNCTIONS


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_every_op_of_the_table_is_lowered_or_refused_with_a_reason():
    missing = [op.name for op in OPS if op not in LOWERINGS and op not in REFUSED and
               not expressible(op)]
    assert not missing, f"give {missing} a lowering in tracejit/onnx/lowering.py or a reason"
    assert not [op.name for op in LOWERINGS if op in REFUSED]
    assert all(isinstance(why, str) and why for why in REFUSED.values())


def test_every_scalar_function_has_an_onnx_spelling_or_a_reason():
    missing = [fn for fn in FUNCTIONS if fn not in CODE_FOR_FN and fn not in REFUSED_FNS]
    assert not missing, f"spell {missing} in CODE_FOR_FN (tracejit/onnx/lowering.py)"


EXPRESSION_CASES = [(op.name, i) for op in OPS if op.kind == ELEMENTWISE and expressible(op)
                    for i in range(len(SAMPLES[op.name][0]))]


@pytest.mark.parametrize("name,i", EXPRESSION_CASES)
def test_each_elementwise_op_lowered_from_its_expression_equals_eager(name, i, monkeypatch):
    """The path a new elementwise op takes (no entry in LOWERINGS), for every one."""
    monkeypatch.delitem(LOWERINGS, OPS[name], raising=False)
    test_each_lowered_op_equals_its_eager_impl_in_onnxruntime(name, i)


CASES = [(op.name, i) for op in OPS if op in LOWERINGS
         for i in range(len(SAMPLES[op.name][0]))]


@pytest.mark.parametrize("name,i", CASES)
def test_each_lowered_op_equals_its_eager_impl_in_onnxruntime(name, i):
    op = OPS[name]
    sample = SAMPLES[name][0][i]
    attrs = dict(sample.attrs)
    if "dtype" in attrs and attrs["dtype"] is None:  # the samples leave it to the test
        attrs["dtype"] = tj.float32
    # float32, as models are (onnxruntime lacks float64 kernels for some ops, Erf)
    args = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
            for a in sample.args]
    region = one_op_region(op, args, attrs)
    region.input_kinds = ["arg"] * len(region.inputs)
    arrays = [a for a in args if hasattr(a, "shape") and hasattr(a, "dtype")]
    index = attrs.get("index", ())
    if name == "getitem" and sum(not isinstance(x, (int, slice, type(None), type(Ellipsis)))
                                 for x in (index if isinstance(index, tuple) else (index,))) > 1:
        # indexing by more than one tensor is refused, with what is exported instead
        with pytest.raises(ExportError, match="exported for one integer tensor"):
            build_model(region, [f"x{k}" for k in range(len(arrays))], {})
        return
    model = build_model(region, [f"x{k}" for k in range(len(arrays))], {})
    with np.errstate(all="ignore"):
        want = np.asarray(op.impl(*args, **attrs))
    got = _session(model).run(None, {f"x{k}": np.asarray(a) for k, a in enumerate(arrays)})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def _check(fn, example, calls, rtol=1e-5, atol=1e-6, **kw):
    model = tj.onnx.export(fn, example, **kw)
    session = _session(model)
    names = [i.name for i in session.get_inputs()]
    for args in calls:
        with tj.no_grad():
            want = fn(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = session.run(None, dict(zip(names, [a.numpy() for a in args])))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=atol)
    return model


@pytest.mark.parametrize("fn", [
    lambda x: x.contiguous(),
    lambda x: nn.functional.dropout(x, 0.5, training=False),
    lambda x: (x, x * 2, x),
    lambda x: (x.float(), x + 1)], ids=["contiguous", "dropout-eval", "input-twice", "float"])
def test_a_model_returning_its_input_as_it_is_still_returns_it(fn):
    """No node computes an output that is an input returned unchanged; the model still
    lists it (an Identity), in the order the call returns its values."""
    _check(fn, (tj.randn(2, 3),), [(tj.randn(b, 3),) for b in (2, 5)])


def test_a_cnn_exports_its_convolutions_and_pools_as_windows():
    """Convolutions (padded, strided, dilated), batch norm, max-pool in ceil mode (its
    fill -inf), average pools with count_include_pad=False and an adaptive pool: the
    windows are strided Slices of the padded input; the batch stays dynamic."""
    tj.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 4, (3, 2), stride=(2, 1), dilation=(1, 2), padding=(1, 0))
            self.bn = nn.BatchNorm2d(8)
            self.fc = nn.Linear(16, 5)

        def forward(self, x):
            x = nn.functional.relu(self.bn(self.c1(x)))
            x = nn.functional.max_pool2d(x, 3, 2, 1, ceil_mode=True)
            x = nn.functional.avg_pool2d(self.c2(x), 2, ceil_mode=True,
                                         count_include_pad=False)
            x = nn.functional.adaptive_avg_pool2d(x, 2)
            return nn.functional.log_softmax(self.fc(x.flatten(1)), -1)

    m = Net().eval()
    _check(m, (tj.randn(2, 3, 13, 11),), [(tj.randn(b, 3, 13, 11),) for b in (2, 5)])


def test_a_fully_convolutional_net_exports_for_every_image_size():
    """Floor-mode windows need no size: each offset's Slice ends before the padded end,
    so convolutions keep the image's height and width dynamic."""
    tj.manual_seed(1)
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(4, 3, 3, padding=2, dilation=2)).eval()
    model = _check(m, (tj.randn(2, 2, 12, 10),), [(tj.randn(b, 2, h, w),) for b, h, w in
                                                   ((2, 12, 10), (3, 9, 17), (1, 16, 8))],
                   input_names=["x"], dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}})
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["N", 2, "H", "W"]
    # a max-pool's windows, strided and dilated, at the export's fixed size
    pool = nn.Sequential(nn.Conv2d(2, 2, 1), nn.MaxPool2d((3, 2), (2, 3), (1, 1), (2, 1)))
    _check(pool.eval(), (tj.randn(2, 2, 12, 10),), [(tj.randn(b, 2, 12, 10),) for b in (2, 4)])


def test_an_mlp_exports_with_a_dynamic_batch_and_named_parameters(tmp_path):
    tj.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 3), nn.Softmax(-1))
    path = tmp_path / "mlp.onnx"
    model = _check(m, (tj.randn(4, 6),), [(tj.randn(b, 6),) for b in (1, 3, 17)],
                   input_names=["x"])
    tj.onnx.export(m, (tj.randn(4, 6),), str(path))
    assert path.stat().st_size > 0
    assert [i.name for i in model.graph.initializer[:4]] == ["0.weight", "0.bias",
                                                             "2.weight", "2.bias"]
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["B", 6]


def test_layer_norm_and_attention_with_a_mask_over_other_lengths():
    tj.manual_seed(1)
    ln = nn.LayerNorm(8)
    _check(ln, (tj.randn(2, 5, 8),), [(tj.randn(3, 7, 8),), (tj.randn(1, 1, 8),)])

    def attention(q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / 8 ** 0.5
        scores = tj.where(mask, scores, tj.full((), -1e9))
        return scores.softmax(-1) @ v

    def inputs(b, t):
        return (tj.randn(b, t, 8), tj.randn(b, t, 8), tj.randn(b, t, 8),
                tj.randn(b, t, t) > 0)
    _check(attention, inputs(2, 4), [inputs(3, 6), inputs(1, 9)])


def test_dynamic_axes_rename_a_dimension():
    model = tj.onnx.export(lambda x: x * 2, (tj.randn(3, 4),), input_names=["x"],
                           dynamic_axes={"x": {0: "batch"}})
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "T"]


def test_a_reshape_to_a_computed_size_runs_on_other_sizes():
    _check(lambda x: (x.reshape(-1) * 2).reshape(x.shape[0], -1).sum(-1),
           (tj.randn(3, 4),), [(tj.randn(5, 7),), (tj.randn(2, 1),)])


def test_a_branch_on_a_tensor_value_is_refused_naming_the_line():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    with pytest.raises(ExportError, match=r"test_onnx.py:\d+.*tj.script"):
        tj.onnx.export(f, (tj.ones(3),))


def test_an_op_without_a_lowering_is_named_with_the_users_line():
    with pytest.raises(ExportError, match=r"randn .*test_onnx.py:\d+.*random"):
        tj.onnx.export(lambda x: x + tj.randn(3), (tj.ones(3),))


@pytest.mark.parametrize("cls", [nn.RNN, nn.GRU, nn.LSTM])
def test_a_traced_recurrent_layer_exports_at_its_length_with_a_dynamic_batch(cls):
    # the trace unrolls the steps: the length is fixed (a guard pins it), the batch is not
    tj.manual_seed(2)
    layer = cls(4, 5, batch_first=True)

    def run(x):
        out = layer(x)[0]
        return out

    _check(run, (tj.randn(2, 3, 4),), [(tj.randn(b, 3, 4),) for b in (1, 4)], rtol=1e-4,
           atol=1e-5)


def test_a_scripted_branch_exports_as_onnx_if_and_takes_both_paths():
    tj.manual_seed(3)
    lin = nn.Linear(5, 5)

    @tj.script
    def f(x):
        h = lin(x)
        if h.mean() > 0:
            h = h.relu() * 2
        else:
            h = -h
        return h.sum(-1)

    model = tj.onnx.export(f, (tj.randn(3, 5),), input_names=["x"])
    assert any(n.op_type == "If" for n in model.graph.node)
    session = _session(model)
    taken = set()
    for k in range(8):
        x = tj.randn(1 + k, 5) + (2.0 if k % 2 else -2.0)
        taken.add(bool(lin(x).mean() > 0))
        with tj.no_grad():
            want = f(x).numpy()
        np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], want, rtol=1e-5,
                                   atol=1e-6)
    assert taken == {True, False}


def test_a_scripted_loop_exports_as_onnx_loop_with_its_index_and_count():
    @tj.script
    def f(x, n: int):
        for i in range(n):
            if x.sum() > 0:
                x = x * 0.5
            else:
                x = x + i
        return x

    model = tj.onnx.export(f, (tj.randn(4), 3), input_names=["x", "n"])
    assert any(n.op_type == "Loop" for n in model.graph.node)
    session = _session(model)
    for x, n in [(tj.randn(6), 5), (-10 * tj.ones(3), 4), (tj.randn(2), 0), (tj.randn(9), 1)]:
        got = session.run(None, {"x": x.numpy(), "n": np.asarray(n, np.int64)})[0]
        np.testing.assert_allclose(got, f(x, n).numpy(), rtol=1e-6, atol=1e-6)


def test_a_scripted_while_loop_exports_with_its_condition():
    @tj.script
    def f(x):
        while x.norm() > 1:
            x = x * 0.5
        return x

    model = tj.onnx.export(f, (tj.randn(4) * 10,), input_names=["x"])
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    assert loop.input[0] == ""  # no trip count: the condition ends it
    session = _session(model)
    for x in (tj.randn(4) * 10, tj.randn(7) * 100, tj.randn(3) * 0.01, tj.zeros(2)):
        np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], f(x).numpy(),
                                   rtol=1e-6)


def test_a_range_loop_with_break_exports_and_stops_where_eager_does():
    @tj.script
    def f(x, n: int):
        for i in range(n):
            if x.sum() > 10.0:
                break
            x = x * 1.5 + i
        return x

    model = tj.onnx.export(f, (tj.ones(3), 6), input_names=["x", "n"])
    session = _session(model)
    for x, n in ((tj.ones(3), 6), (tj.ones(5) * 3, 4), (-tj.ones(2), 8), (tj.ones(4), 0)):
        got = session.run(None, {"x": x.numpy(), "n": np.asarray(n, np.int64)})[0]
        np.testing.assert_allclose(got, f(x, n).numpy(), rtol=1e-6)


def test_the_export_command_names_dynamic_sizes(tmp_path):
    import subprocess
    import sys

    import onnx

    src = tmp_path / "model.py"
    src.write_text("import tracejit as tj\nfrom tracejit import nn\n"
                   "class MLP(nn.Module):\n"
                   "    def __init__(self):\n"
                   "        super().__init__()\n"
                   "        self.a = nn.Linear(12, 5)\n"
                   "    def forward(self, x):\n"
                   "        return self.a(x).relu().softmax(-1)\n")
    out = tmp_path / "mlp.onnx"
    r = subprocess.run([sys.executable, "-m", "tracejit", "export", f"{src}:MLP", "--input",
                        "f32[B,12]", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    model = onnx.load(str(out))
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["B", 12]
    x = np.random.default_rng(0).standard_normal((7, 12)).astype(np.float32)
    assert _session(model).run(None, {"input0": x})[0].shape == (7, 5)


@pytest.mark.parametrize("dtype", [tj.int64, tj.float32])
def test_floor_division_and_remainder_keep_pytorchs_signs(dtype):
    # negative dividends and divisors: ONNX's Div truncates integers and its Mod of floats
    # takes the dividend's sign; PyTorch floors and takes the divisor's
    a = tj.tensor([-7, -6, -1, 0, 1, 6, 7, 5], dtype=dtype)
    b = tj.tensor([2, -4, 3, -3, -2, 4, -5, 5], dtype=dtype)
    _check(lambda x, y: (x // y, x % y), (a, b), [(a, b), (a[:5], b[:5])])


def test_a_scripted_list_of_tensors_exports_as_an_onnx_sequence():
    @tj.script
    def f(x, n: int):
        outs = []
        h = x
        for _i in range(n):
            h = h.tanh() + 1
            outs.append(h * 2)
        y = tj.stack(outs)
        return y.sum(0) + outs[0] * len(outs) + tj.cat(outs).mean()

    model = tj.onnx.export(f, (tj.randn(3), 4), input_names=["x", "n"])
    kinds = {n.op_type for n in model.graph.node}
    assert {"SequenceEmpty", "ConcatFromSequence", "SequenceAt", "Loop"} <= kinds
    session = _session(model)
    for x, n in ((tj.randn(3), 4), (tj.randn(6), 1), (tj.randn(2), 7)):
        got = session.run(None, {"x": x.numpy(), "n": np.asarray(n, np.int64)})[0]
        np.testing.assert_allclose(got, f(x, n).numpy(), rtol=1e-5, atol=1e-6)


class _WordLanguageModel(nn.Module):
    """PyTorch's word-language-model example: embedding -> LSTM -> linear decoder."""

    def __init__(self, ntoken=40, ninp=8, nhid=8, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output), hidden


def test_an_lstm_language_model_exports_with_the_sizes_its_trace_decided_fixed():
    """The LSTM indexes its layers' states (the trace decided `N > 1` on the states'
    first size): exported with that size fixed at the example's, as PyTorch fixes every
    size not in `dynamic_axes`, and stated in the doc string; it was refused unless
    dynamic axes were given. The batch stays dynamic."""
    tj.manual_seed(0)
    m = _WordLanguageModel().eval()

    def inputs(t, b):
        return tj.randint(0, 40, (t, b)), (tj.randn(2, b, 8), tj.randn(2, b, 8))

    model = tj.onnx.export(m, inputs(5, 3), input_names=["input", "h0", "c0"])
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input}
    assert dims["h0"][0] == 2 and dims["c0"][0] == 2 and isinstance(dims["h0"][1], str)
    assert re.search(r"= 2 \(the trace decided `sizes: \w+ > 1` at .*test_onnx.py:\d+",
                     model.doc_string)
    session = _session(model)
    for b in (3, 7):
        ids, (h, c) = inputs(5, b)
        with tj.no_grad():
            out, (hn, cn) = m(ids, (h, c))
        got = session.run(None, {"input": ids.numpy(), "h0": h.numpy(), "c0": c.numpy()})
        for g, w in zip(got, (out, hn, cn)):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    # other sizes than the fixed ones are the runtime's error, never another model's answer
    ids, (h, c) = inputs(5, 3)
    with pytest.raises(Exception, match="dimensions"):
        session.run(None, {"input": ids.numpy(), "h0": np.zeros((3, 3, 8), np.float32),
                           "c0": np.zeros((3, 3, 8), np.float32)})


def test_a_dynamic_axis_the_trace_decided_something_about_is_refused_naming_the_line():
    tj.manual_seed(0)
    m = _WordLanguageModel().eval()
    args = (tj.randint(0, 40, (5, 3)), (tj.randn(2, 3, 8), tj.randn(2, 3, 8)))
    with pytest.raises(ExportError, match=r"`dynamic_axes` makes layers dynamic, but the "
                                          r"trace decided `sizes: \w+ > 1` at .*test_onnx"):
        tj.onnx.export(m, args, input_names=["input", "h0", "c0"],
                       dynamic_axes={"h0": {0: "layers"}})


def test_a_branch_on_a_size_exports_with_that_size_fixed():
    def f(x):
        return x * 2 if x.shape[0] > 2 else x - 1

    model = _check(f, (tj.randn(3, 4),), [(tj.randn(3, 6),)], input_names=["x"])
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == 3 and isinstance(dims[1], str)
    with pytest.raises(Exception, match="dimensions"):
        _session(model).run(None, {"x": np.ones((2, 4), np.float32)})


@pytest.mark.parametrize("pick", [lambda w, i: w[i], lambda w, i: w[:, i]])
def test_indexing_by_one_integer_tensor_exports_as_gather(pick):
    w = tj.randn(6, 5)
    _check(lambda i: pick(w, i) * 2, (tj.tensor([[0, 3], [-1, 2]]),),
           [(tj.tensor([[4, 1, -2]]),), (tj.randint(0, 5, (3, 4)),)])
