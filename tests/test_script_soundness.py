"""Script mode against eager where red-teaming found it wrong or unclear: each test
scripts a function, calls it first (the recording call) and again with other sizes and
values, and compares values, gradients and errors with the same function run eagerly;
what script mode cannot compile is refused with the user's file and line."""
from __future__ import annotations

import traceback

import numpy as np
import pytest

import tracejit as tj
from tracejit.testing.differential import Call, compare, outcome


from script_checks import agree, line_of, rg  # noqa: E402


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


# ---- recursion ---------------------------------------------------------------------------------
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


# ---- a loop's target after the loop ------------------------------------------------------------
def index_after_loop(x, n: int):
    i = -1
    for i in range(n):  # noqa: B007 — the index is read after the loop
        x = x + 1.0
    return x * i


def row_index_after_loop(x):
    t = 0
    for t in range(x.shape[0]):  # noqa: B007 — the index is read after the loop
        x = x * 1.5
    return x * t


def item_after_unrolled_loop(x, ws: list):
    w = x
    for w in ws:
        x = x + w
    return x * w


def test_a_loops_index_after_the_loop_is_its_last_value():
    sf = agree(index_after_loop, *[Call(rg(tj.randn(2)), n) for n in (3, 0, 5, 1)])
    assert sf.stats["compiles"] == 1
    sf = agree(row_index_after_loop, *[Call(rg(tj.randn(n))) for n in (3, 5, 2)])
    assert sf.stats["compiles"] == 1
    agree(item_after_unrolled_loop, Call(rg(tj.randn(3)), [rg(tj.randn(3)), rg(tj.randn(3))]))


# ---- a variable assigned only inside a loop ------------------------------------------------------
def assigned_in_loop_only(x, n: int):
    for i in range(n):
        last = x * i
    return last


def test_returning_a_variable_assigned_only_inside_a_loop_raises_at_the_return():
    sf = tj.script(assigned_in_loop_only)
    where = f"{__file__}:{line_of(assigned_in_loop_only, 'return last')}"
    for n in (3, 0, 2):
        try:
            assigned_in_loop_only(tj.ones(2), n)
            eager_raises = False
        except NameError:  # UnboundLocalError when the loop ran no iteration
            eager_raises = True
        with pytest.raises(NameError) as err:
            sf(tj.ones(2), n)
        assert "'last'" in str(err.value) and where in str(err.value)
        if not eager_raises:  # refused: script mode carries only variables defined before
            assert "defined before a loop" in str(err.value)


def assigned_on_one_path_only(x):
    if x.sum() > 0:
        y = x * 2
    return y


def test_returning_a_variable_assigned_on_one_path_of_a_tensor_branch_raises_at_the_return():
    sf = tj.script(assigned_on_one_path_only)
    where = f"{__file__}:{line_of(assigned_on_one_path_only, 'return y')}"
    for v in (1.0, -1.0):
        with pytest.raises(NameError) as err:
            sf(tj.full((3,), v))
        assert "'y'" in str(err.value) and where in str(err.value)


# ---- changing an element of a list a loop built ------------------------------------------------
def assigns_an_element(x):
    outs = []
    for i in range(x.shape[0]):
        outs.append(x[i] * 2)
    outs[0] = outs[0] * 10
    return tj.stack(outs)


def adds_to_an_element(x):
    outs = []
    for i in range(x.shape[0]):
        outs.append(x[i] * 2)
    outs[0] += 5
    return tj.stack(outs)


def updates_a_read_element_in_place(x):
    outs = []
    for i in range(x.shape[0]):
        outs.append(x[i] * 2)
    outs[0].mul_(10)
    return tj.stack(outs)


def updates_an_appended_tensor_in_place(x):
    outs = []
    h = x[0] * 0
    for i in range(x.shape[0]):
        h = h + x[i]
        outs.append(h)
    h.add_(1)
    return tj.stack(outs)


@pytest.mark.parametrize("fn,marker,what", [
    (assigns_an_element, "outs[0] = outs[0]", "item assignment"),
    (adds_to_an_element, "outs[0] += 5", "item assignment"),
    (updates_a_read_element_in_place, "outs[0].mul_", "in-place mul"),
    (updates_an_appended_tensor_in_place, "h.add_(1)", "in-place add")],
    ids=["assign", "augmented", "in-place-read", "in-place-appended"])
def test_changing_an_element_of_a_list_a_loop_built_is_refused(fn, marker, what):
    sf = tj.script(fn)
    for n in (3, 4):  # the first (recording) call and a later one
        with pytest.raises(tj.jit.ScriptError) as err:
            sf(rg(tj.randn(n)))
        assert what in str(err.value)
        assert f"{__file__}:{line_of(fn, marker)}" in str(err.value)


def assigns_an_element_of_an_unrolled_list(x, ys: list):
    outs = [y * 2 for y in ys]
    outs[0] = outs[0] * 10
    return tj.stack(outs) * x


def test_item_assignment_to_a_python_list_is_kept():
    agree(assigns_an_element_of_an_unrolled_list,
          *[Call(rg(tj.randn(3)), [rg(tj.randn(3)) for _ in range(k)]) for k in (2, 3)])


# ---- a loop whose body branches and writes into a carried tensor --------------------------------
def branch_writes_row(x):
    out = x * 0
    for i in range(x.shape[0]):
        if x[i] > 100.0:
            out[i] = x[i] * 0
        else:
            out[i] = x[i] * 2
    return out


def python_int_branch_writes_row(x):
    out = x * 0
    for i in range(x.shape[0]):
        if i < x.shape[0] - 1:
            out[i] = x[i] * 3
        else:
            out[i] = x[i] * 2
    return out


@pytest.mark.parametrize("fn", [branch_writes_row, python_int_branch_writes_row])
@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_writes_in_a_branch_inside_a_loop_keep_every_iterations_gradient(fn, backend,
                                                                          monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", backend)
    sf = agree(fn, *[Call(rg(tj.tensor(v))) for v in
                     ([1.0, 2.0, 3.0, 4.0], [300.0, 2.0, -5.0, 400.0, 1.0, 7.0], [3.0],
                      [5.0, 600.0, 2.0, 1.0])])
    assert sf.stats["compiles"] == 1


# ---- a module that updates running statistics, then branches ------------------------------------
class NormThenBranch(tj.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = tj.nn.BatchNorm1d(3)
        self.head = tj.nn.Linear(3, 2)

    def forward(self, x):
        x = self.norm(x)
        if x.mean() > 0:
            x = x * 2
        return self.head(x)


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_running_statistics_updated_before_a_branch_keep_backward_and_buffers_eager(
        backend, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", backend)
    eager, mine = NormThenBranch().train(), NormThenBranch().train()
    mine.load_state_dict(eager.state_dict())
    sm = tj.script(mine)
    for n, shift in [(5, 0.0), (4, 1.0), (7, -1.0), (5, 0.5)]:
        call = Call(rg(tj.randn(n, 3) + shift))
        diff = compare(outcome(eager, *call.fresh(), params=list(eager.parameters())),
                       outcome(sm, *call.fresh(), params=list(mine.parameters())))
        assert diff is None, diff
        for a, b in zip(eager.buffers(), mine.buffers()):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)


# ---- where an assert or raise of a scripted function is reported --------------------------------
def asserts_positive(x):
    assert x.sum() > 0, "needs a positive sum"
    return x * 2


def raises_on_negative(x, n: int):
    if x.min() < 0:
        raise ValueError("negative input")
    if n > 3:
        raise IndexError("n too large")
    return x.sqrt()


@pytest.mark.parametrize("fn,calls,marker,kind", [
    (asserts_positive, [(-1.0,), (1.0,), (-2.0,)], "assert x.sum()", AssertionError),
    (raises_on_negative, [(-1.0, 1), (1.0, 1), (-2.0, 2)], 'raise ValueError', ValueError),
    (raises_on_negative, [(1.0, 5), (1.0, 1), (2.0, 4)], 'raise IndexError', IndexError)],
    ids=["assert", "raise-on-tensor", "raise-on-int"])
def test_an_assert_or_raise_names_the_users_line_in_message_and_last_frame(fn, calls, marker,
                                                                           kind):
    sf = tj.script(fn)
    where = (__file__, line_of(fn, marker))
    for value, *rest in calls:  # the first call records; the others run the graph
        x = tj.full((3,), value)
        try:
            fn(x, *rest)
        except Exception as err:  # noqa: BLE001 — what eager raises
            expected = type(err)
        else:
            expected = None
        if expected is None:
            sf(x, *rest)
            continue
        assert expected is kind
        with pytest.raises(kind) as err:
            sf(x, *rest)
        assert f"{where[0]}:{where[1]}" in str(err.value)
        last = traceback.extract_tb(err.value.__traceback__)[-1]
        assert (last.filename, last.lineno) == where


# ---- Python side effects -------------------------------------------------------------------------
SEEN: list = []


def prints(x):
    print("scaling", x.shape)
    return x * 2


def appends_to_a_global(x):
    SEEN.append(x.shape[0])
    return x * 2


def appends_to_an_argument(x, log: list):
    log.append(x.sum())
    return x * 2


CACHE: dict = {}


def fills_a_global_dict(x):
    CACHE["last"] = x.sum()
    return x * 2


def writes_to_a_stream(x):
    import sys

    sys.stderr.write("step\n")
    return x * 2


def logs(x):
    import logging

    logging.getLogger("tracejit.test").warning("step")
    return x * 2


@pytest.mark.parametrize("fn,marker,extra", [
    (prints, "print(", ()), (appends_to_a_global, "SEEN.append", ()),
    (appends_to_an_argument, "log.append", ([],)),
    (fills_a_global_dict, 'CACHE["last"]', ()),
    (writes_to_a_stream, "sys.stderr.write", ()), (logs, "warning(", ())],
    ids=["print", "global-list", "argument-list", "global-dict", "stream", "logging"])
def test_a_python_side_effect_is_refused_naming_its_line(fn, marker, extra):
    sf = tj.script(fn)
    for n in (3, 4):
        with pytest.raises(tj.jit.ScriptError) as err:
            sf(rg(tj.randn(n)), *extra)
        assert f"{__file__}:{line_of(fn, marker)}" in str(err.value)
        assert "only while compiling" in str(err.value)
    assert SEEN == [] and CACHE == {} and all(e == [] for e in extra)  # refused before it ran


class CountsCalls(tj.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        return x * 2


def test_setting_an_attribute_of_self_is_refused_when_scripted():
    with pytest.raises(tj.jit.ScriptError) as err:
        tj.script(CountsCalls())
    assert "attribute 'calls'" in str(err.value)
    assert f"{__file__}:{line_of(CountsCalls.forward, 'self.calls =')}" in str(err.value)


def _collect(x, into):
    into.append(x * 2)
    into.append(x + 1)


def fills_its_own_list_through_a_helper(x):
    parts = []
    _collect(x, parts)
    parts.append(x)
    return tj.stack(parts)


def test_a_helper_appending_to_a_list_its_caller_made_is_kept():
    agree(fills_its_own_list_through_a_helper, Call(rg(tj.randn(3))), Call(rg(tj.randn(5))))


# ---- what script mode refuses: the error's last frame is the user's line -----------------------
def _refused_try(x):
    try:  # refused: the marker line
        y = x * 2
    except ValueError:
        y = x
    return y


def _calls_refused(x):
    return _refused_try(x) + 1


@pytest.mark.parametrize("fn", [_refused_try, _calls_refused])
def test_a_script_error_ends_at_the_refused_line_without_the_compilers_frames(fn):
    """At `tj.script` (the entry) or at the first call (a helper the scripted function
    calls), the ScriptError is raised from the construct's line, with none of the
    frames of the ast walk it was found in, and nothing chained to it."""
    with pytest.raises(tj.jit.ScriptError) as err:
        tj.script(fn)(tj.ones(3))
    where = (__file__, line_of(_refused_try, "refused: the marker line"))
    frames = traceback.extract_tb(err.value.__traceback__)
    assert (frames[-1].filename, frames[-1].lineno) == where
    assert not any(f.filename.endswith("ast.py") or f.name.startswith("visit") for f in frames)
    assert err.value.__suppress_context__ and f"{where[0]}:{where[1]}" in str(err.value)
