"""Script mode against eager where red-teaming found it wrong or unclear: each test
scripts a function, calls it first (the recording call) and again with other sizes and
values, and compares values, gradients and errors with the same function run eagerly;
what script mode cannot compile is refused with the user's file and line."""
from __future__ import annotations

import inspect
import traceback

import pytest

import tracejit as tj
from tracejit.testing.differential import Call, compare, outcome


def agree(fn, *calls: Call, scripted=None):
    """Script fn and check every call (values, gradients, errors) against eager."""
    sf = scripted or tj.script(fn)
    for call in calls:
        diff = compare(outcome(fn, *call.fresh()), outcome(sf, *call.fresh()))
        assert diff is None, f"{call.args}: {diff}"
    return sf


def rg(t):
    return t.requires_grad_()


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


# ---- return inside nested branches ---------------------------------------------------------------
def return_in_nested_branch(x):
    if x.sum() > 0:
        if x.mean() > 1:
            return x * 2
        x = x + 1
    return x


def return_in_inner_else(x):
    y = x
    if x.sum() > 0:
        y = x + 1
        if x.mean() > 1:
            return y * 2
        else:
            y = y * 4
    else:
        if x.mean() < -1:
            return y
    return y - 1


@pytest.mark.parametrize("fn", [return_in_nested_branch, return_in_inner_else])
def test_a_return_inside_nested_branches_on_tensors(fn):
    sf = agree(fn, *[Call(rg(tj.ones(n) * v)) for n, v in
                     [(3, 2.0), (4, 0.5), (2, -3.0), (5, -0.5), (3, 2.0)]])
    assert sf.stats["compiles"] == 1


def falls_through_on_one_path(x):
    if x.sum() > 0:
        if x.mean() > 1:
            return x * 2
    x = x + 1


def test_a_path_that_returns_nothing_beside_one_returning_a_tensor_is_refused_by_name():
    with pytest.raises(tj.jit.ScriptError) as err:
        tj.script(falls_through_on_one_path)(tj.ones(3))
    assert "__tj" not in str(err.value) and "return value" in str(err.value)


# ---- recursion -------------------------------------------------------------------------------------
def recursive(x, n: int):
    if n <= 0:
        return x
    return recursive(x * 2, n - 1)


def test_a_function_that_calls_itself_is_refused_naming_the_call():
    with pytest.raises(tj.jit.ScriptError) as err:
        tj.script(recursive)
    assert "recursion" in str(err.value)
    assert f"{__file__}:{line_of(recursive, 'return recursive(')}" in str(err.value)


def reads_its_own_name(x):
    return x * reads_its_own_name.scale


reads_its_own_name.scale = 3.0


def test_a_function_reading_its_own_name_is_scripted():
    agree(reads_its_own_name, Call(rg(tj.randn(3))), Call(rg(tj.randn(5))))
