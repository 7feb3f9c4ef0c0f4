"""Never silently wrong: each program here was once traced and then called with other
inputs where the trace disagreed with eager execution (values, gradients, errors,
aliasing, requires_grad). Every call is checked against eager by the differential
oracle (`tracejit.testing.differential`) on both backends."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn
from tracejit.nn import functional as F
from tracejit.testing.differential import Call, compare, outcome


@pytest.fixture(autouse=True, params=["interpret", "numba"])
def backend(request, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", request.param)
    return request.param


def agree(fn, example: Call, *calls: Call, create_graph=False, traced=None):
    """Trace fn on `example`, then check every call (the example first) against eager."""
    if traced is None:
        args, kwargs = example.fresh()
        traced = tj.trace(fn, args) if not kwargs else tj.trace(
            lambda *a: fn(*a[:-1], **a[-1]), args + (kwargs,))
        traced.fn = fn if not kwargs else traced.fn
    for call in (example,) + calls:
        expected = outcome(fn, *call.fresh(), create_graph=create_graph)
        got = outcome(traced, *call.fresh(), create_graph=create_graph)
        diff = compare(expected, got)
        assert diff is None, f"{call.args} {call.kwargs}: {diff}"
    return traced


def rg(t):
    return t.requires_grad_()


# ---- 1. value guards survive the compiled forward of calls that record gradients -------------
@pytest.mark.parametrize("fn", [
    lambda x: x * x.sum().item(),
    lambda x: x * 2 if x.sum() > 0 else x - 1,
    lambda x: x * int(x.sum()),
    lambda x: x * float(x.max()),
    lambda x: x[x > 0].sum() * x,
], ids=["item", "bool", "int", "float", "mask-count"])
def test_value_guards_hold_when_inputs_require_grad(fn):
    agree(fn, Call(rg(tj.ones(3))), Call(rg(tj.ones(3) * 2)), Call(rg(-tj.ones(3))),
          Call(rg(tj.tensor([1.0, -2.0, 3.0]))))


def test_value_guards_hold_under_create_graph():
    agree(lambda x: (x * x) * x.sum().item(), Call(rg(tj.ones(3))), Call(rg(tj.ones(3) * 2)),
          create_graph=True)


def test_an_error_eager_raises_on_the_other_path_is_raised():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x.reshape(5)  # raises: 3 elements

    agree(f, Call(rg(tj.ones(3))), Call(rg(-tj.ones(3))))


# ---- 2. sizes used as numbers stay symbolic in the compiled backward -------------------------
def test_a_size_used_as_a_number_reaches_the_backward():
    agree(lambda x: x * x.shape[0], Call(rg(tj.ones(3, 2))), Call(rg(tj.ones(5, 2))))


def test_a_size_divides_in_the_backward():
    agree(lambda x: (x / x.shape[0]).tanh() + x.shape[0] * x.sum(),
          Call(rg(tj.ones(3, 2))), Call(rg(tj.ones(6, 2))))


# ---- 3. size expressions keep their meaning ---------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: x[: (x.shape[0] - 1) // 2],
    lambda x: x[: (x.shape[0] + 1) % 3 + 1],
    lambda x: x * ((x.shape[0] - 1) // 2),
    lambda x: x.reshape((x.shape[0] - 1) // 2 * 2 + 2 - x.shape[0] % 2, -1)
    if x.shape[0] % 2 == 0 else x,
    lambda x: x * (x.shape[0] ** 2),
    lambda x: x * abs(x.shape[0] - 7),
], ids=["floordiv", "mod", "scalar", "reshape", "pow", "abs"])
def test_size_expressions(fn):
    agree(fn, Call(tj.arange(12.0).reshape(6, 2)), Call(tj.arange(20.0).reshape(10, 2)),
          Call(rg(tj.arange(8.0).reshape(4, 2))), Call(tj.arange(18.0).reshape(9, 2)))


def test_a_size_is_not_merged_with_the_number_it_had():
    def f(x, y):
        return y * 2, y * (x.numel() // 3)  # at the traced call, numel() // 3 is 2

    agree(f, Call(tj.ones(2, 3), tj.ones(1, 3)), Call(tj.ones(3, 3), tj.ones(1, 3)))


def test_constants_of_one_shape_are_not_merged():
    agree(lambda x: x * tj.tensor([1.0, 2.0]) + x * tj.tensor([3.0, 4.0]),
          Call(tj.ones(2)), Call(tj.ones(3, 2)))


# ---- 4. a broadcast parameter's gradient sums over every row ---------------------------------
@pytest.mark.parametrize("batch", [5, 1, 0, 7])
def test_broadcast_parameter_gradient_sums_all_rows(batch):
    b = rg(tj.randn(3))
    agree(lambda x, b: (x + b).mean(), Call(tj.randn(4, 3), b), Call(tj.randn(batch, 3), b))


def test_broadcast_gradient_in_a_rank_3_program():
    w = rg(tj.randn(4))
    agree(lambda x, w: ((x * w).tanh() + w).sum(), Call(tj.randn(2, 3, 4), w),
          Call(tj.randn(5, 3, 4), w), Call(tj.randn(5, 1, 4), w))


# ---- 5. argument structure is part of the entry guards ---------------------------------------
def test_keyword_order():
    def f(x, y):
        return x - y

    a, b = tj.ones(2), tj.ones(2) * 3
    tf = tj.trace(f, (a, b))
    assert np.array_equal(tf(y=b, x=a).numpy(), (a - b).numpy())
    assert np.array_equal(tf(x=b, y=a).numpy(), (b - a).numpy())


def test_dict_arguments_by_key():
    def f(d):
        d["a"].add_(1)
        return d["a"] * 2 - d["b"]

    agree(f, Call({"a": tj.ones(2), "b": tj.zeros(2)}),
          Call({"b": tj.zeros(2) + 5, "a": tj.ones(2)}), Call({"a": tj.ones(2)}),
          Call({"a": rg(tj.ones(2) * 3), "b": tj.zeros(2)}))


def test_scalar_and_tensor_positions():
    def f(a, b):
        return a * 2 + b

    agree(f, Call(tj.ones(2), 3.0), Call(3.0, tj.ones(2)))


# ---- 6-7. aliasing: copies stay copies, inputs returned are the inputs ------------------------
def test_a_copy_is_not_an_alias():
    def f(x):
        h = x * 1.0
        x.add_(0.5)
        return h, x

    agree(f, Call(tj.ones(3)), Call(tj.zeros(3)))


def test_two_equal_values_are_two_tensors():
    def f(x):
        return x * 2, x * 2

    tf = tj.trace(f, (tj.ones(3),))
    a, b = tf(tj.ones(3))
    assert a is not b
    a.add_(1)
    assert b.numpy().tolist() == [2.0, 2.0, 2.0]


def test_an_input_updated_in_place_is_returned_itself():
    def f(x):
        x.add_(1)
        return x

    tf = tj.trace(f, (tj.ones(3),))
    x = tj.ones(3)
    out = tf(x)
    assert out is x
    agree(f, Call(tj.ones(3)), Call(tj.zeros(3)))


def test_an_input_returned_with_grad_keeps_its_identity():
    agree(lambda x, y: (x, x * y), Call(rg(tj.ones(3)), tj.ones(3)),
          Call(rg(tj.ones(3)), tj.ones(3) * 2))


# ---- 8. objects read from outside are guarded by identity -------------------------------------
SCALE = tj.ones(3)


def _scaled(x):
    return x * SCALE


def test_a_reassigned_global_tensor_is_seen():
    global SCALE
    tf = tj.trace(_scaled, (tj.ones(3),))
    SCALE = tj.ones(3) * 7
    try:
        assert tf(tj.ones(3)).numpy().tolist() == [7.0] * 3
    finally:
        SCALE = tj.ones(3)


WEIGHTS = [tj.ones(3), tj.ones(3) * 2]


def test_a_replaced_element_of_a_global_list_of_tensors_is_seen():
    tf = tj.trace(lambda x: x * WEIGHTS[1], (tj.ones(3),))
    old = WEIGHTS[1]
    WEIGHTS[1] = tj.ones(3) * 5
    try:
        assert tf(tj.ones(3)).numpy().tolist() == [5.0] * 3
        WEIGHTS.pop()
        with pytest.raises(IndexError):  # as eager
            tf(tj.ones(3))
    finally:
        WEIGHTS[1:] = [old]


def test_a_reassigned_closure_tensor_is_seen():
    w = tj.ones(3)

    def f(x):
        return x * w

    tf = tj.trace(f, (tj.ones(3),))
    w = tj.ones(3) * 4  # noqa: F841 — read by f through its closure cell
    assert tf(tj.ones(3)).numpy().tolist() == [4.0] * 3


def test_a_module_tensor_attribute_and_a_swapped_submodule_are_seen():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.act = nn.Tanh()
            self.offset = tj.ones(3)

        def forward(self, x):
            return self.act(self.lin(x)) + self.offset

    m = M()
    tm = tj.trace(m, (tj.randn(2, 3),))
    x = tj.randn(2, 3)
    m.offset = tj.ones(3) * 10
    assert np.allclose(tm(x).detach().numpy(), m(x).detach().numpy())
    m.act = nn.ReLU()
    assert np.allclose(tm(x).detach().numpy(), m(x).detach().numpy())
    assert tm.stats["compiles"] == 3


# ---- 9. a traced function inside another trace is inlined -------------------------------------
def test_nested_traced_function_is_inlined():
    inner = tj.trace(lambda x: x * 2, (tj.ones(3),))

    def outer(x):
        return inner(x) + 1

    agree(outer, Call(tj.ones(3)), Call(tj.ones(3) * 5), Call(rg(tj.ones(3) * 2)))


# ---- 10. functions that read data are recorded or guarded ------------------------------------
def test_randperm_is_fresh_on_every_call():
    tf = tj.trace(lambda x: x[tj.randperm(x.shape[0])], (tj.arange(50.0),))
    tj.manual_seed(3)
    a = tf(tj.arange(50.0)).numpy()
    b = tf(tj.arange(50.0)).numpy()
    assert not np.array_equal(a, b)
    tj.manual_seed(3)
    assert np.array_equal(tf(tj.arange(50.0)).numpy(), a)


@pytest.mark.parametrize("fn", [
    lambda x, y: tj.tensor([x.sum(), y.sum()]) * 2,
    lambda x, y: tj.isclose(x, y).float() + x,
    lambda x, y: x * 2 if tj.equal(x, y) else x - 1,
    lambda x, y: x * 2 if tj.allclose(x, y) else x - 1,
], ids=["tensor-of-tensors", "isclose", "equal", "allclose"])
def test_data_reads_are_recorded(fn):
    agree(fn, Call(tj.ones(3), tj.ones(3)), Call(tj.ones(3), tj.ones(3) * 2),
          Call(tj.ones(3) * 2, tj.ones(3) * 2))


# ---- 11. requires_grad of outputs follows the graph -----------------------------------------
def test_outputs_requires_grad_follows_the_graph():
    def f(x, y):
        return x * y, (x * 2).detach(), y * 3, y

    agree(f, Call(rg(tj.ones(3)), tj.ones(3)), Call(rg(tj.ones(3) * 2), tj.ones(3) * 5))


# ---- 12. sizes returned are the call's ---------------------------------------------------------
def test_returned_sizes_are_this_calls():
    agree(lambda x: (x * 2, x.shape[0], x.shape), Call(tj.ones(3, 2)), Call(tj.ones(5, 2)))
    tf = tj.trace(lambda x: x.shape, (tj.ones(3, 2),))
    assert tf(tj.ones(7, 2)) == (7, 2) and type(tf(tj.ones(7, 2)[0:4])[0]) is int


# ---- 13. sign(NaN) is 0, as in PyTorch --------------------------------------------------------
def test_sign_of_nan_is_zero_in_eager_and_kernels():
    x = tj.tensor([float("nan"), -2.0, 0.0, 3.0])
    assert tj.sign(x).numpy().tolist() == [0.0, -1.0, 0.0, 1.0]
    agree(lambda x: (x.sign() + 1) * 2, Call(x), Call(tj.tensor([1.0, float("nan")] * 3)))


@pytest.mark.parametrize("dtype,lo,hi", [(np.float32, 7.5, 10.5), (np.float64, 18.5, 19.5)])
def test_kernel_tanh_saturates_where_eager_does(dtype, lo, hi):
    x = tj.from_numpy(-np.linspace(lo, hi, 4001).astype(dtype))
    agree(lambda x: ((x * 1.0).tanh() + 1).sign(), Call(tj.ones(3, dtype=x.dtype)), Call(x))


# ---- 14-19. crashes where eager works ----------------------------------------------------------
def test_retrace_with_grad_of_a_centred_value():
    agree(lambda x: x - x.mean(), Call(tj.ones(3, 2)), Call(rg(tj.ones(3, 2) * 2)),
          Call(rg(tj.randn(6, 2))))


def test_layer_norm_at_batch_zero_with_grad():
    ln = nn.LayerNorm(4)
    agree(ln, Call(rg(tj.randn(3, 4))), Call(rg(tj.randn(0, 4))), Call(rg(tj.randn(1, 4))))


def test_mixed_dtypes_in_linear_raise_like_pytorch():
    lin = nn.Linear(2, 3)
    with pytest.raises(RuntimeError, match="same dtype"):
        lin(tj.randn(4, 2, dtype=tj.float64))
    agree(lin, Call(tj.randn(4, 2)), Call(tj.randn(4, 2, dtype=tj.float64)))


@pytest.mark.parametrize("c", [float("inf"), float("-inf"), float("nan")])
def test_python_inf_and_nan_in_kernels(c):
    agree(lambda x: (x * 2).clamp(max=1.0) + c, Call(tj.ones(3)), Call(tj.zeros(300)))
    agree(lambda x: tj.maximum(x * 2, tj.full_like(x, c)).tanh(), Call(tj.ones(3)))
    agree(lambda x: (x * 2 + c).tanh() * c, Call(tj.ones(3)), Call(tj.ones(5, 3)))


def test_float16_graphs_run():
    x = tj.randn(4, 3).half()
    agree(lambda x: (x * 2 + 1).tanh().sum(-1), Call(x), Call(tj.randn(6, 3).half()))
    agree(lambda x: (x * 2).softmax(-1), Call(x), Call(rg(tj.randn(6, 3).half())))


def test_norm_inside_softmax_and_with_a_bias():
    b = rg(tj.randn(3))
    agree(lambda x: tj.softmax(x / (x.norm() + 1), -1), Call(rg(tj.randn(4, 3))),
          Call(rg(tj.randn(6, 3))))
    agree(lambda h, b: h / (h.norm() + 1) + b, Call(rg(tj.randn(4, 3)), b),
          Call(rg(tj.randn(2, 3)), b))


def test_a_numpy_array_where_a_tensor_was_traced():
    tf = tj.trace(lambda x: x * 2, (tj.ones(3),))
    out = tf(np.ones(3))  # eager: numpy arithmetic
    assert isinstance(out, np.ndarray) and out.tolist() == [2.0] * 3
    agree(lambda x: x.tanh(), Call(tj.ones(3)), Call([1.0, 2.0]))


# ---- 20-21. errors eager raises ---------------------------------------------------------------
def test_in_place_update_of_a_saved_value_raises_at_backward():
    def f(x):
        h = x.exp()
        h.add_(1)
        return h

    agree(f, Call(rg(tj.ones(3))), Call(rg(tj.zeros(3))))
    agree(f, Call(tj.ones(3)), Call(rg(tj.zeros(3))))


def test_view_of_a_transposed_input_raises():
    agree(lambda x: x.view(-1) * 2, Call(tj.ones(3, 2)), Call(tj.ones(2, 3).T))


# ---- 25. tracing and compiling are linear in graph length ------------------------------------
def test_a_long_chain_traces_and_runs():
    def f(x):
        for k in range(3000):
            x = x * 1.0001 + (k % 7) * 1e-4 if k % 2 else (x - 1e-4).abs()
        return x

    agree(f, Call(tj.ones(4)), Call(tj.randn(8)))


# ---- 24. modes are per thread; traced calls are thread-safe -----------------------------------
def test_grad_mode_is_per_thread():
    seen = []
    inside = threading.Event()
    release = threading.Event()

    def other():
        with tj.no_grad():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    seen.append(tj.is_grad_enabled())
    x = rg(tj.ones(2))
    seen.append((x * 2).requires_grad)
    release.set()
    t.join()
    assert seen == [True, True]


def test_concurrent_traces_and_calls():
    tf = tj.trace(lambda x: (x * 2).tanh().sum(-1), (tj.ones(3, 4),))
    errors = []

    def work(k):
        try:
            for i in range(30):
                x = tj.randn(k + 2, 4)
                assert np.allclose(tf(x).numpy(), (x * 2).tanh().sum(-1).numpy(), atol=1e-5)
                c = k + i
                g = tj.trace(lambda y, c=c: y * c, (x,))
                assert np.allclose(g(x).numpy(), (x * c).numpy())
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---- 26. eager corners -----------------------------------------------------------------------
def test_transposed_contiguous_is_contiguous():
    y = tj.randn(3, 2).T.contiguous()
    assert y.is_contiguous() and y.numpy().flags.c_contiguous
    y.view(-1)


def test_softmax_of_an_empty_tensor():
    assert tj.softmax(tj.zeros(0, 3), -1).shape == (0, 3)
    agree(lambda x: x.softmax(-1) * 2, Call(tj.randn(2, 3)), Call(tj.zeros(0, 3)))


@pytest.mark.parametrize("record", ['{"tensor": "missing"}', '{"nonsense": 1}', '[1, 2]',
                                    '{"list": [{"tensor": 3}]}'])
def test_load_of_a_broken_structure_record(tmp_path, record):
    from tracejit.serialization import _META

    path = tmp_path / "x.npz"
    tj.save({"w": tj.ones(2)}, path)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays[_META] = np.frombuffer(record.encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="structure record"):
        tj.load(path)


@pytest.mark.parametrize("fn", [
    lambda x: x.logsumexp(-1, keepdim=True).logsumexp(-1, keepdim=True),
    lambda x: x.var(-1, keepdim=True).amax(-1, keepdim=True) * x,
    lambda x: ((x.amax(-1, keepdim=True) * 2).tanh() + 1).sum(-1, keepdim=True) + x,
], ids=["logsumexp-twice", "amax-of-var", "sum-of-row-value"])
def test_a_row_value_reduced_again_is_not_summed_over_the_row(fn):
    agree(fn, Call(rg(tj.randn(2, 3))), Call(rg(tj.randn(5, 3))), Call(tj.randn(1, 3)))


def test_a_smaller_output_of_an_empty_loop_is_computed():
    def f(x, y):
        h = y.exp() * 2            # [1, N]: its own value, whatever the batch
        return h, (x + y) * h      # [B, N]: empty at batch 0

    agree(f, Call(tj.randn(3, 4), tj.randn(1, 4)), Call(tj.randn(0, 4), tj.randn(1, 4)))
    w = rg(tj.randn(4))
    for fn in (lambda x, w: (x.softmax(-1) * (w * 2).tanh(), (w * 2).tanh()),  # a row kernel
               lambda x, w: F.layer_norm(x, (4,)) * w.sigmoid() + w.sigmoid()):  # its backward
        agree(fn, Call(rg(tj.randn(3, 4)), w), Call(rg(tj.randn(0, 4)), w))


def test_an_empty_row_kernel_with_a_size_from_another_input():
    def f(x, y):
        h = (y + 1) * x.shape[0]  # B is not a size of the kernel's inputs
        return h, h.logsumexp(-1, keepdim=True), (y + 1).softmax(-1)

    agree(f, Call(tj.randn(4, 3), tj.randn(1, 3)), Call(tj.randn(7, 3), tj.randn(7, 3)),
          Call(tj.randn(2, 3), tj.randn(0, 3)))


@pytest.mark.parametrize("read", [lambda x, idx: x[idx],
                                  lambda x, idx: x.gather(0, idx[:, None].expand(-1, 2))],
                         ids=["getitem", "gather"])
def test_an_unused_index_out_of_range_raises_as_in_eager(read):
    def f(x, idx):
        read(x, idx).sum()  # unused, but eager raises for an index past x's rows
        return x * 2

    agree(f, Call(tj.ones(3, 2), tj.tensor([0, 2])), Call(tj.ones(3, 2), tj.tensor([1, 5])),
          Call(tj.ones(6, 2), tj.tensor([1, 5])), Call(tj.ones(3, 2), tj.tensor([0, 1])))


def test_relu_then_sqrt_has_pytorch_s_gradient_at_zero():
    y = tj.tensor([1.0, -1.0, 0.0], requires_grad=True)
    y.relu().sqrt().sum().backward()
    assert y.grad.numpy().tolist() == [0.5, 0.0, 0.0]  # PyTorch's: 0, not 0 * inf
    agree(lambda y: y.relu().sqrt(), Call(rg(tj.tensor([1.0, -1.0, 0.0]))),
          Call(rg(tj.tensor([-2.0, 4.0, 0.0]))))


def test_gather_has_pytorch_s_signature_and_index_shapes():
    x = tj.arange(6.0).reshape(3, 2).requires_grad_()
    out = x.gather(1, tj.tensor([[0, 0], [1, 0]]))  # fewer rows than x: allowed
    assert out.detach().numpy().tolist() == [[0.0, 0.0], [3.0, 2.0]]
    out.sum().backward()
    assert x.grad.numpy().tolist() == [[2.0, 0.0], [1.0, 1.0], [0.0, 0.0]]


def test_a_size_expression_found_to_be_one_broadcasts_as_one():
    def f(x, y):  # y [1, 3] -> [N // 3, 3] with N // 3 == 1, broadcast against x's rows
        h = y.t().reshape(-1)[: y.numel()].reshape(3, -1).t()
        return h + x * 2

    agree(f, Call(tj.randn(2, 3), tj.randn(1, 3)), Call(tj.randn(7, 3), tj.randn(1, 3)),
          Call(tj.randn(300, 3), tj.randn(1, 3)))
    # the size is 1 in the types too, so the add joins x * 2's kernel (a kernel over
    # [B, 3] reading a [N // 3, 3] value as if it spanned the rows would be wrong)
    t = tj.trace(f, (tj.randn(2, 3), tj.randn(1, 3)), backend="numba")
    fused = [n for n in t.graph.nodes if n.op == "fused"]
    assert len(fused) == 1 and {m.op for m in fused[0].regions[0].nodes} == {"mul", "add"}


def test_outputs_keep_eager_s_memory_layout():
    inner = tj.trace(lambda t: (t * 2).tanh() + 1, (tj.ones(3, 2),))
    x = tj.randn(2, 3).T  # not contiguous: eager's elementwise results keep its strides
    for _ in range(3):  # the first call with this layout traces; the others run kernels
        assert not inner(x).is_contiguous() and not ((x * 2).tanh() + 1).is_contiguous()
    assert inner.stats["cache_hits"] >= 2
    assert np.allclose(inner(x).numpy(), ((x * 2).tanh() + 1).numpy(), atol=1e-5)
    agree(lambda x: (x * 2).tanh() + 1, Call(tj.ones(3, 2)), Call(x), Call(x))


def test_gather_with_an_index_longer_than_the_input_raises_like_pytorch():
    with pytest.raises(RuntimeError, match="Size does not match"):
        tj.zeros(0, 3).gather(-1, tj.zeros(1, 1, dtype=tj.int64))
    agree(lambda x, y: x.log_softmax(-1).gather(-1, y.argmin(-1, keepdim=True)),
          Call(tj.randn(2, 3), tj.randn(1, 3)), Call(tj.randn(0, 3), tj.randn(1, 3)),
          Call(tj.randn(5, 3), tj.randn(1, 3)))


def test_create_graph_through_a_call_whose_inputs_reach_one_another():
    """Under create_graph a traced call replays its forward differentiably; the gradient
    of an input must be the call's own vjp, not also what reaches it through another
    input's history (b = a * 3 computed before the call)."""
    f = tj.trace(lambda a, b: (a * b).tanh(), (rg(tj.ones(3)), rg(tj.ones(3))))

    for v in (0.5, -0.2):
        a1, a2 = rg(tj.ones(3) * v), rg(tj.ones(3) * v)
        (g1,) = tj.autograd.grad([f(a1, a1 * 3).sum()], [a1], create_graph=True)
        (g2,) = tj.autograd.grad([(a2 * (a2 * 3)).tanh().sum()], [a2], create_graph=True)
        assert np.allclose(g1.detach().numpy(), g2.detach().numpy(), rtol=1e-5)
        (h1,) = tj.autograd.grad([g1.sum()], [a1])
        (h2,) = tj.autograd.grad([g2.sum()], [a2])
        assert np.allclose(h1.numpy(), h2.numpy(), rtol=1e-4, atol=1e-6)


# ---- 27. sizes are Python ints in every arithmetic form ---------------------------------------
# A float worked out from a size is specialised (guarded): called at another size, the trace
# either fits or is recorded again, never reused with the float it saw.
@pytest.mark.parametrize("fn", [
    lambda x: x * x.shape[-1] ** -0.5,
    lambda x: x * (x.shape[0] * 0.5),
    lambda x: x + (10.0 + x.shape[0]),
    lambda x: x - (0.5 - x.shape[0]),
    lambda x: x * (x.shape[0] // 4.0) + (x.shape[0] % 2.5),
    lambda x: x * x.shape[0] ** 0.5 + 2 ** x.shape[0],
    lambda x: x * math.sqrt(x.shape[0]) + float(x.shape[0]),
    lambda x: x * 2 if x.shape[0] > 6.5 else x - 1,
    lambda x: x * 2 if x.shape[0] == 6.0 else x - 1,
    lambda x: x * 2 if x.shape[0] != 6.5 else x - 1,
    lambda x: x * divmod(x.shape[0], 4)[1] + round(x.shape[0] / 4) + math.floor(x.shape[0]),
    lambda x: x * (x.shape[0] << 1) + (x.shape[0] >> 1) + (x.shape[0] & 3) + ~x.shape[0],
    lambda x: x * (x.shape[0] + True),
], ids=["rsqrt-scale", "mul", "radd", "rsub", "floordiv-mod", "pow", "sqrt-float",
        "gt", "eq", "ne", "divmod-round", "bits", "bool"])
def test_sizes_mix_with_floats_as_ints_do(fn):
    agree(fn, Call(tj.arange(12.0).reshape(6, 2)), Call(tj.arange(20.0).reshape(10, 2)),
          Call(rg(tj.arange(8.0).reshape(4, 2))), Call(tj.arange(14.0).reshape(7, 2)))


def test_a_size_compared_with_a_float_is_decided_as_for_an_int():
    seen = []

    def f(x):
        seen.append((x.shape[0] == 6.0, x.shape[0] == 6.5, x.shape[0] < 6.5,
                     x.shape[0] >= 5.5, x.shape[0] < float("inf"), x.shape[0] == float("nan")))
        return x * 2

    tj.trace(f, (tj.ones(6, 2),))
    assert seen == [(True, False, True, True, True, False)]


# ---- 28. split and chunk along a traced size --------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: tuple(c * 2 for c in x.chunk(3, 0)),
    lambda x: tj.chunk(x, 2, 1),
    lambda x: x.split(x.shape[1] // 2, 1),
    lambda x: tuple(c + 1 for c in x.split(4, 0)),
    lambda x: x.unbind(0),
], ids=["chunk", "tj.chunk", "split-by-size", "split", "unbind"])
def test_split_and_chunk_along_a_traced_size(fn):
    agree(fn, Call(tj.randn(6, 4)), Call(tj.randn(7, 6)), Call(rg(tj.randn(9, 5))),
          Call(tj.randn(5, 2)), Call(tj.randn(2, 3)))


def test_chunk_guards_the_number_of_pieces_not_the_size():
    f = tj.trace(lambda x: tuple(c * 2 for c in x.chunk(3, 0)), (tj.randn(7, 2),))
    for n in (7, 8, 9):
        x = tj.randn(n, 2)
        got, want = f(x), tuple(c * 2 for c in x.chunk(3, 0))
        assert [g.shape for g in got] == [w.shape for w in want]
        assert all(np.array_equal(g.numpy(), w.numpy()) for g, w in zip(got, want))
    assert f.stats["compiles"] == 1


# ---- 29. sizes and loop indices as numbers in scripted code -----------------------------------
def index_weighted_sum(x):
    acc = x[0] * 0
    for i in range(x.shape[0]):
        acc = acc + x[i] * i
    return acc


def index_and_floats(x, n: int):
    acc = x * 0
    for i in range(n):
        acc = acc + x * (10.0 + i) + i * 0.25 + n / 4
    return acc


def sizes_taken_before_a_loop(x, n: int):
    rows, cols = x.shape
    for _ in range(n):
        x = x * cols + (rows + 0.5)
    return x


def scaled_steps_eager(x, k: int):
    for i in range(k):
        x = x * 0.5 + i
    return x


scaled_steps = tj.script(scaled_steps_eager)  # inlined where a recording calls it


def passes_its_int_on(x, n: int, steps=None):
    steps = steps or scaled_steps  # the oracle passes the plain function
    rows = x.shape[0]
    for j in range(n):
        x = steps(x, rows) + j
    return steps(x, n) + steps(x, n + 1)


@pytest.mark.parametrize("fn,calls", [
    (index_weighted_sum, [(tj.randn(3, 4),), (tj.randn(5, 4),), (tj.randn(2, 6),)]),
    (index_and_floats, [(tj.randn(4), 3), (tj.randn(6), 5), (tj.randn(4), 2)]),
    (sizes_taken_before_a_loop, [(tj.randn(3, 4), 2), (tj.randn(5, 6), 3), (tj.randn(2, 2), 1)]),
], ids=["loop-index-factor", "index-and-floats", "sizes-before-loop"])
def test_sizes_and_indices_as_numbers_in_scripts(fn, calls):
    scripted = tj.script(fn)
    for args in calls + calls[:1]:  # the first call again: a compiled run, not the recording
        want = fn(*args)
        np.testing.assert_allclose(scripted(*args).numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def floats_from_an_index(x, n: int):
    acc = x * 0
    for i in range(n):
        acc = acc + x * (0.5 - i) * (i // 2.0) + 2.0 ** i + (i + 1) ** -0.5 + 3 / (i + 1)
    if n * 0.5 > 1.2:
        acc = acc * 2
    return acc + tj.full((4,), n / 4)


def test_a_float_from_a_loop_index_or_an_int_argument_is_computed_when_the_program_runs():
    scripted = tj.script(floats_from_an_index)
    for n in (3, 5, 2, 3):
        x = tj.randn(4)
        np.testing.assert_allclose(scripted(x, n).numpy(), floats_from_an_index(x, n).numpy(),
                                   rtol=1e-5, atol=1e-5)
    assert scripted.stats["compiles"] == 1


def test_an_int_argument_passed_on_to_a_scripted_function_keeps_one_program():
    scripted = tj.script(passes_its_int_on)
    for n, rows in ((2, 3), (4, 5), (3, 4), (2, 3)):
        x = tj.randn(rows)
        want = passes_its_int_on(x, n, scaled_steps_eager)
        np.testing.assert_allclose(scripted(x, n).numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert scripted.stats["compiles"] == 1
    traced = tj.trace(lambda x: scaled_steps(x, x.shape[0]), (tj.randn(3),))
    for rows in (3, 5):
        x = tj.randn(rows)
        np.testing.assert_allclose(traced(x).numpy(), scaled_steps_eager(x, rows).numpy(),
                                   rtol=1e-5, atol=1e-5)


# ---- 30. size expressions stay as small as what they mean -------------------------------------
def roll_window(x, new):
    """A context window rolled by hand (makemore-style); the window's size is not a
    polynomial in the input sizes (x's size // new's)."""
    ctx = x.reshape(new.shape[0], -1)
    for _ in range(12):
        ctx = tj.cat([ctx.narrow(1, ctx.size(1) - 3, 3), new], 1)
        ctx = tj.cat([ctx.narrow(1, 1, ctx.size(1) - 1), new], 1)
    return ctx * ctx.shape[1]


def test_a_rolled_window_keeps_its_size_expressions_small():
    f = agree(roll_window, Call(tj.randn(20), tj.randn(2, 1)), Call(tj.randn(30), tj.randn(3, 1)),
              Call(tj.randn(28), tj.randn(4, 1)))
    assert f.stats["compiles"] == 1
    assert max(len(str(g)) for g in f.guards) < 200  # it doubled with every step


def test_a_part_that_is_not_a_polynomial_is_one_factor_written_once():
    from tracejit.core.symbolic import SymInt

    b = SymInt.symbol("s0", 7, None)
    third = b // 3
    assert (1 + (third - 1)).source() == third.source() == "(s0 // 3)"
    assert third * 2 - third - third == 0
    assert (third * b + 1).substitute({"s0": 9}) == 3 * 9 + 1  # atoms are substituted too
    carried = (third + 1).substitute({"s0": SymInt.symbol("s9", 5, None) - 2})
    assert carried.symbols() == {"s9"}


def halve_twice_per_step(x):
    for _ in range(12):
        x = x[: x.shape[0] // 2 + x.shape[0] // 3 + 1]
    return x * 2


def test_a_size_expression_that_keeps_growing_is_refused_and_the_call_runs_eagerly():
    with pytest.warns(RuntimeWarning, match=r"size expression grew past .*test_soundness\.py"):
        f = tj.trace(halve_twice_per_step, (tj.randn(5000, 2),))
    for n in (5000, 7000):
        x = tj.randn(n, 2)
        np.testing.assert_array_equal(f(x).numpy(), halve_twice_per_step(x).numpy())
    assert f.stats["compiles"] == 0


def index_window_sums(x):
    acc = x[0] * 0
    for i in range(x.shape[0]):
        acc = acc + x[: i // 2 + 1].sum(0) * 2
    return acc


def test_a_loop_index_inside_a_size_expression_reaches_compiled_segments():
    scripted = tj.script(index_window_sums)
    for n in (3, 5, 3):
        x = tj.randn(n, 4)
        np.testing.assert_allclose(scripted(x).numpy(), index_window_sums(x).numpy(),
                                   rtol=1e-5, atol=1e-5)


# ---- 31. a tensor where an op takes a number is this call's, not the recording's --------------
@pytest.mark.parametrize("fn", [
    lambda x: x + tj.full((4,), x.sum()),
    lambda x: x + tj.full_like(x, x.max()),
    lambda x: tj.full((2,), x.shape[0]),
    lambda x: tj.linspace(0, x.sum(), 5) * x[0],
], ids=["full", "full_like", "full-of-a-size", "linspace"])
def test_a_tensor_or_a_size_where_an_op_takes_a_number_is_this_calls(fn):
    agree(fn, Call(tj.ones(4)), Call(tj.randn(4)), Call(tj.randn(4) * 3))


@pytest.mark.compile
def test_a_value_guard_after_an_input_update_sees_the_old_input_when_it_fails():
    """A kernel may write an input's new value into the input's own array; it must not
    when a value guard follows (`int(h.mean())`), or a call whose guard fails runs again
    from an input already updated (found by `python -m tracejit fuzz --backend numba`,
    seed 112: x doubled twice)."""
    def program(x, y):
        x.mul_(2.0)
        h = x * 1.0
        return x, (h - y) * int(h.mean())

    rng = np.random.default_rng(0)
    traced = None
    for call in range(4):
        xv = (rng.standard_normal((2, 3)) * (1 + 3 * call)).astype(np.float32)
        yv = rng.standard_normal((2, 3)).astype(np.float32)
        want = program(tj.tensor(xv.copy()), tj.tensor(yv))
        if traced is None:
            traced = tj.trace(program, (tj.tensor(xv.copy()), tj.tensor(yv)), backend="numba")
        x = tj.tensor(xv.copy())
        got = traced(x, tj.tensor(yv))
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(x.numpy(), want[0].numpy())
    assert traced.stats["guard_failures"] > 0  # the guard did fail, and was survived


def test_a_traced_call_that_updates_an_input_its_backward_reads_gives_eagers_gradient():
    """The forward reads x, then updates it in place (x needs no gradient): the compiled
    backward (which reads x for a product's gradient) and the forward replayed for
    create_graph (which reads x for everything) see x's value from before the update, as
    eager's saved values do, and no version error is raised (the update is the call's
    own)."""
    w = tj.randn(3, dtype=tj.float64).requires_grad_()  # (float64: tight tolerances)
    norm = tj.nn.functional.layer_norm

    def product(x):
        h = x * x
        x.add_(0.25)
        return (norm(h, (3,)) * w).sum()

    def exponential(x):  # exp's gradient reads its result: the compiled part not x
        g = (x * 0.5).exp()
        x.add_(0.25)
        return (norm(g, (3,)) * w).sum()

    for f in (product, exponential):
        traced = tj.trace(f, (tj.randn(4, 3, dtype=tj.float64),))
        for create_graph in (False, True, False):  # compiled; the forward replayed
            x = tj.randn(4, 3, dtype=tj.float64)
            x2 = x.clone()
            f(x2).backward(create_graph=create_graph)
            want, w.grad = w.grad.detach().clone(), None
            traced(x).backward(create_graph=create_graph)
            np.testing.assert_allclose(w.grad.detach().numpy(), want.numpy(), rtol=1e-10,
                                       atol=1e-12)
            np.testing.assert_array_equal(x.numpy(), x2.numpy())
            w.grad = None


def test_a_reshape_that_aliases_for_some_sizes_and_copies_for_others_is_guarded():
    """x.t().reshape(-1) copies a [B, 3] x, but is a view of it when B is 1 (a [3, 1]
    transpose is contiguous): an update of x after it then changes the reshape's value or
    not, as in eager, whichever the trace saw."""
    def f(x):
        h = x.t().reshape(-1).reshape(3, -1).t()
        x.mul_(0.25)
        return h * 2

    for first, then in (((4, 3), (1, 3)), ((1, 3), (4, 3))):
        traced = tj.trace(f, (tj.randn(*first),))
        for shape in (then, first, then):
            x = tj.randn(*shape)
            x2 = x.clone()
            np.testing.assert_allclose(traced(x).numpy(), f(x2).numpy(), rtol=1e-6)
            np.testing.assert_array_equal(x.numpy(), x2.numpy())
