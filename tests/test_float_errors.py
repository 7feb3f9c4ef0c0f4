"""Floating-point errors inside ops are results, as in PyTorch: 0/0 = nan, log(-1) = nan,
exp(1000) = inf, without numpy's RuntimeWarnings; the caller's own numpy keeps its error
state, and the warnings tracejit means to give still reach the caller."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tracejit as tj

NAN, INF = float("nan"), float("inf")


def _inplace_overflow():
    t = tj.tensor([3e38])
    t.mul_(10.0)
    return t


def _backward_through_log_of_zero():
    x = tj.tensor([0.0, -1.0], requires_grad=True)
    x.log().sum().backward()
    return x.grad


CASES = {  # what runs -> what it gives (PyTorch's answer)
    "divide by a zero scalar": (lambda: tj.tensor([0.0, 1.0]) / 0, [NAN, INF]),
    "divide by a zero tensor": (lambda: tj.tensor([-1.0]) / tj.tensor([0.0]), [-INF]),
    "log of a negative": (lambda: tj.log(tj.tensor([-1.0, 0.0])), [NAN, -INF]),
    "exp overflows": (lambda: tj.exp(tj.tensor([1000.0])), [INF]),
    "multiply overflows": (lambda: tj.tensor([3e38]) * 10.0, [INF]),
    "in-place multiply overflows": (_inplace_overflow, [INF]),
    "max over nan": (lambda: tj.tensor([1.0, NAN]).max(), NAN),
    "amax over nan": (lambda: tj.amax(tj.tensor([[1.0, NAN]]), dim=1), [NAN]),
    "sum of inf and -inf": (lambda: tj.tensor([INF, -INF]).sum(), NAN),
    "mean of nothing": (lambda: tj.tensor([]).mean(), NAN),
    "backward through log(0)": (_backward_through_log_of_zero, [INF, -1.0]),
}


def _run_recording_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [f"{w.category.__name__}: {w.message}" for w in caught]


@pytest.mark.parametrize("case", list(CASES))
def test_an_eager_op_gives_inf_and_nan_without_a_warning(case):
    fn, expected = CASES[case]
    out, caught = _run_recording_warnings(fn)
    assert caught == []
    np.testing.assert_array_equal(out.numpy(), np.float32(expected))


def test_a_traced_call_gives_inf_and_nan_without_a_warning():
    x = tj.tensor([0.0, -1.0, 2.0])
    traced = tj.trace(lambda a: (a.log() * 2).sum(), (x,))
    out, caught = _run_recording_warnings(lambda: traced(x))
    assert caught == [] and math.isnan(out.item())


def test_a_host_program_gives_inf_and_nan_without_a_warning():
    """The numba backend's host program calls op impls on arrays (matmul, log, sum here:
    no kernel is compiled)."""
    x = tj.tensor([[INF, 1.0], [1.0, 2.0]])
    y = tj.tensor([[0.0, 1.0], [-1.0, 2.0]])
    traced = tj.trace(lambda a, b: (a @ b).log(), (x, y), backend="numba")
    out, caught = _run_recording_warnings(lambda: traced(x, y))
    assert caught == []
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out.numpy(), np.log(x.numpy() @ y.numpy()))


def test_the_callers_numpy_keeps_its_error_state():
    before = np.geterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tj.log(tj.tensor([0.0]))
        np.log(np.zeros(1))  # the caller's own numpy still warns
    assert [str(w.message) for w in caught] == ["divide by zero encountered in log"]
    assert np.geterr() == before
    with np.errstate(all="raise"):
        assert tj.exp(tj.tensor([1000.0])).item() == INF  # an op does not raise either
        with pytest.raises(FloatingPointError):
            np.exp(np.float32(1000.0))


def test_the_warnings_tracejit_means_to_give_still_appear():
    f = lambda x: x * float(x.sum())  # noqa: E731 — a guard on the sum: a new trace a call
    traced = tj.trace(f, (tj.ones(2),), budget=2)
    _, caught = _run_recording_warnings(
        lambda: [traced(tj.full((2,), float(k))) for k in range(2, 6)])
    assert any(c.startswith("RuntimeWarning: tracejit:") and "budget" in c for c in caught)
