"""Script mode: each construct of the subset, scripted and called with inputs that take
other paths and lengths than the first call, against eager (values, gradients, errors)
on both backends, with one compile for all of them."""
from __future__ import annotations

import pytest

import tracejit as tj
from tracejit.testing.differential import Call, compare, outcome


@pytest.fixture(autouse=True, params=["interpret", "numba"])
def backend(request, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", request.param)
    return request.param


def agree(fn, *calls: Call, compiles: int = 1, scripted=None, create_graph=False):
    """Script fn, check every call against eager and that one graph served them all."""
    sf = scripted or tj.script(fn)
    for call in calls:
        expected = outcome(fn, *call.fresh(), create_graph=create_graph)
        got = outcome(sf, *call.fresh(), create_graph=create_graph)
        diff = compare(expected, got)
        assert diff is None, f"{call.args}: {diff}"
    assert sf.stats["compiles"] == compiles, sf.explain()
    assert sf.stats["eager_fallbacks"] == 0, sf.explain()
    # one program, no guard on what it branches over: the first call records, no guard
    # fails (a second graph follows a guard that did)
    assert sf.stats["guard_failures"] == compiles - 1, sf.explain()
    return sf


def rg(t):
    return t.requires_grad_()


def signs(n, *values):
    return [Call(rg(tj.tensor([float(v)] * n))) for v in values]


# ---- if / elif / else -----------------------------------------------------------------------
def branch(x):
    if x.sum() > 0:
        y = x.tanh() * 2
    else:
        y = (x * x).exp()
    return y + 1


def elif_chain(x):
    m = x.mean()
    if m > 1:
        y = x * 3
    elif m > -1:
        y = x.sin()
    else:
        y = -x
    return y


def early_return(x):
    if x.sum() > 0:
        return x * 2
    y = x - 1
    return y.exp()


def return_in_both(x):
    if x.max() > 2:
        return x.relu()
    else:
        return x.sigmoid()


def nested_branches(x):
    if x.sum() > 0:
        if x.max() > 3:
            y = x * 0.5
        else:
            y = x * 2
    else:
        y = x.abs()
    return y.sum()


@pytest.mark.parametrize("fn", [branch, elif_chain, early_return, return_in_both,
                                nested_branches])
def test_branches_on_tensor_values(fn):
    sf = agree(fn, *signs(3, 1, -1, 4, -4, 0.5, 0))
    assert "if(" in str(sf.graph)


def python_branch(x, scale: float, flag: bool):
    if flag:
        return x * scale
    return x - scale


def test_a_condition_known_when_compiled_folds_away():
    sf = agree(python_branch, Call(rg(tj.ones(3)), 2.0, True), Call(rg(tj.ones(5)), 2.0, True))
    assert "if(" not in str(sf.graph)
    agree(python_branch, Call(rg(tj.ones(3)), 2.0, False), scripted=sf, compiles=2)


def optional_bias(x, b=None):
    if b is not None:
        x = x + b
    return x * 2


def test_none_checks_on_optional_values():
    sf = agree(optional_bias, Call(rg(tj.ones(3)), rg(tj.ones(3))),
               Call(rg(tj.ones(4)), rg(tj.ones(4))))
    agree(optional_bias, Call(rg(tj.ones(3))), scripted=sf, compiles=2)


def my_model(x, w1, w2):
    """The seeds' MyModel: a branch on the data."""
    h = x @ w1
    if h.mean() > 0:
        out = (h @ w2).relu()
    else:
        out = h @ w2 * -1
    return out.sum()


def test_the_data_dependent_model_on_both_paths_with_gradients():
    w1, w2 = rg(tj.randn(4, 8)), rg(tj.randn(8, 2))
    calls = [Call(rg(tj.randn(n, 4) + shift), w1, w2) for n, shift in
             [(3, 2.0), (5, -2.0), (2, 2.0), (7, -2.0)]]
    agree(my_model, *calls)


def test_gradients_through_a_branch_under_create_graph():
    agree(branch, *signs(3, 1, -1, 2), create_graph=True)


# ---- loops ----------------------------------------------------------------------------------
def while_norm(x):
    while x.norm() < 10:
        x = x * 1.5
    return x


def for_range_size(x):
    h = x[0]
    for t in range(1, x.shape[0]):
        h = (h + x[t]).tanh()
    return h


def for_range_int(x, n: int):
    for i in range(n):
        x = x * 0.9 + i
    return x


def for_rows(x):
    total = x[0] * 0
    for row in x:
        total = total + row.exp()
    return total


def for_list(xs: list):
    total = xs[0] * 0
    for x in xs:
        total = total + x.sin()
    return total


def loop_with_branch(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        if x[i] > 0:
            s = s + x[i]
        else:
            s = s - x[i] * 0.5
    return s


def while_counter(x):
    n = 0
    while x.sum() < 20:
        x = x + 1
        n += 1
    return x, n


def test_while_on_a_tensor_condition():
    sf = agree(while_norm, *[Call(rg(tj.ones(3) * s)) for s in (0.1, 1.0, 20.0, 3.0)])
    assert "loop(" in str(sf.graph)


def test_for_over_a_size_compiles_once_for_all_lengths():
    sf = agree(for_range_size, *[Call(rg(tj.randn(n, 4))) for n in (3, 1, 7, 12)])
    assert "loop(" in str(sf.graph)


def test_for_over_an_int_argument_compiles_once_for_all_counts():
    agree(for_range_int, *[Call(rg(tj.randn(3)), n) for n in (2, 0, 5, 9)])


def test_for_over_a_tensors_rows_and_over_a_list():
    agree(for_rows, *[Call(rg(tj.randn(n, 2))) for n in (2, 5, 3)])
    sf = agree(for_list, Call([rg(tj.randn(2)), rg(tj.randn(2))]),
               Call([rg(tj.randn(3)), rg(tj.randn(3))]))
    assert "loop(" not in str(sf.graph)  # a list's length is fixed: unrolled


def test_a_branch_inside_a_loop():
    agree(loop_with_branch, *[Call(rg(tj.randn(n))) for n in (4, 9, 1, 6)])


def test_an_int_counted_in_a_loop_is_returned_as_eager_counts_it():
    agree(while_counter, *[Call(rg(tj.ones(2) * s)) for s in (1.0, 15.0, 0.0, 30.0)])


# ---- break / continue -----------------------------------------------------------------------
def break_on_value(x):
    for i in range(x.shape[0]):
        if x[i] > 0.5:
            break
        x = x * 1.1
    return x


def continue_on_value(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        if x[i] < 0:
            continue
        s = s + x[i] * x[i]
    return s


def break_in_while(x):
    steps = 0
    while x.sum() < 100:
        x = x * 2
        steps += 1
        if x.max() > 30:
            break
    return x, steps


def test_break_and_continue_decided_by_tensors():
    agree(break_on_value, *[Call(rg(tj.rand(n))) for n in (6, 3, 10, 2)])
    agree(continue_on_value, *[Call(rg(tj.randn(n))) for n in (5, 8, 2)])
    agree(break_in_while, *[Call(rg(tj.tensor(v))) for v in
                            ([1.0, 1.0], [0.1, 9.0], [60.0, 60.0], [2.0, 3.0])])


# ---- sizes from data ------------------------------------------------------------------------
def padded_sums(x, lengths):
    total = x[0, 0] * 0
    for i in range(x.shape[0]):
        n = int(lengths[i])
        total = total + x[i, :n].sum()
    return total


def item_bound(x, n):
    for _i in range(n.item()):
        x = x * 2
    return x


def test_slices_with_bounds_from_data_compile_once():
    agree(padded_sums, Call(rg(tj.randn(4, 7)), tj.tensor([1, 3, 7, 5])),
          Call(rg(tj.randn(3, 6)), tj.tensor([6, 2, 1])),
          Call(rg(tj.randn(2, 9)), tj.tensor([9, 4])))


def test_a_loop_bound_from_item_is_data_of_the_program():
    agree(item_bound, *[Call(rg(tj.randn(2)), tj.tensor(k)) for k in (1, 3, 0, 5)])


# ---- assert and raise -----------------------------------------------------------------------
def asserting(x):
    assert x.sum() > 0, "needs a positive sum"
    return x * 2


def raising(x):
    if x.min() < 0:
        raise ValueError("negative input")
    return x.sqrt()


def test_assert_and_raise_raise_at_run_time_on_the_path_that_reaches_them():
    agree(asserting, *signs(3, 1, -1, 2))
    agree(raising, *signs(3, 1, 4, -1, 2))


# ---- in-place updates inside branches and loops ---------------------------------------------
def fill_rows(x):
    out = tj.zeros(x.shape[0], x.shape[1])
    h = x[0] * 0
    for t in range(x.shape[0]):
        h = (h + x[t]).tanh()
        out[t] = h
    return out


def scale_input_rows(x):
    for i in range(x.shape[0]):
        if x[i].sum() > 0:
            x[i] = x[i] * 2
    return x


def zero_first_row(x):
    y = x.clone()
    if y.sum() > 0:
        y[0] = 0
    return y


def test_in_place_updates_of_variables_in_loops_and_branches():
    agree(fill_rows, *[Call(rg(tj.randn(n, 3))) for n in (3, 6, 2)])
    agree(scale_input_rows, *[Call(tj.randn(n, 3)) for n in (4, 7, 2)])  # the input changes
    agree(zero_first_row, *[Call(rg(tj.randn(3, 2) + s)) for s in (3.0, -3.0, 2.0)])


# ---- lists of tensors -----------------------------------------------------------------------
def collect_until(x):
    """The seeds' loop with break building a list."""
    hs = []
    h = x[0] * 0
    for t in range(x.shape[0]):
        h = (h + x[t]).tanh()
        hs.append(h)
        if h.sum() > 1.5:
            break
    return tj.stack(hs), len(hs)


def grow_in_branch(x):
    parts = [x]
    if x.sum() > 0:
        parts.append(x * 2)
    return tj.cat(parts)


def build_then_iterate(x):
    hs = []
    for t in range(x.shape[0]):
        hs.append(x[t] * t)
    s = x[0] * 0
    for h in hs:
        s = s + h
    return s, hs[-1]


@pytest.mark.parametrize("fn", [collect_until, grow_in_branch, build_then_iterate])
def test_lists_whose_length_is_decided_when_the_program_runs(fn):
    sf = agree(fn, *[Call(rg(tj.randn(n, 3) + s)) for n, s in
                     [(3, 0.5), (5, -0.5), (8, 0.5), (4, -0.5)]])
    assert "list" in str(sf.graph)


# ---- what script mode refuses: a ScriptError naming the construct, the file and the line -------
def _line_of(fn, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def uses_try(x):
    try:
        y = x * 2
    except ValueError:
        y = x
    return y


def uses_yield(x):
    yield x


def uses_global(x):
    global _G
    _G = x
    return x


def returns_in_loop(x):
    for i in range(x.shape[0]):
        if x[i] > 0:
            return x[i]
    return x[0]


def loop_else(x):
    while x.sum() < 3:
        x = x + 1
    else:
        x = x * 2
    return x


def uses_del(x):
    y = x * 2
    del y
    return x


@pytest.mark.parametrize("fn,construct,marker", [
    (uses_try, "try/except", "try:"), (uses_yield, "yield", "yield x"),
    (uses_global, "global", "global _G"), (returns_in_loop, "return inside a loop", "return x[i]"),
    (loop_else, "else clause", "while x.sum()"), (uses_del, "del", "del y")],
    ids=["try", "yield", "global", "return-in-loop", "loop-else", "del"])
def test_an_unsupported_construct_is_refused_when_scripted(fn, construct, marker):
    with pytest.raises(tj.jit.ScriptError) as err:
        tj.script(fn)
    message = str(err.value)
    assert construct in message
    assert f"{__file__}:{_line_of(fn, marker)}" in message


def branch_changes_type(x):
    if x.sum() > 0:
        y = x
    else:
        y = x.sum()
    return y


def loop_changes_type(x):
    while x.sum() < 10:
        x = tj.cat([x, x])
    return x


def test_a_variable_whose_type_depends_on_the_path_is_refused_at_its_first_call():
    for fn, marker, what in [(branch_changes_type, "if x.sum() > 0", "type f32[B] on one path"),
                             (loop_changes_type, "while x.sum() < 10", "changes type in the loop")]:
        sf = tj.script(fn)
        with pytest.raises(tj.jit.ScriptError) as err:
            sf(tj.ones(3))
        assert what in str(err.value) and f"{__file__}:{_line_of(fn, marker)}" in str(err.value)


def test_a_lambda_is_refused():
    with pytest.raises(tj.jit.ScriptError, match="defined with def"):
        tj.script(lambda x: x)


def stack_on_either_path(x):
    hs = []
    for t in range(x.shape[0]):
        hs.append(x[t] * 2)
    if x.sum() > 0:
        return tj.stack(hs) * 2
    return tj.stack(hs)


def test_a_size_from_data_that_differs_between_paths_is_bound_from_the_path_taken():
    agree(stack_on_either_path, *[Call(rg(tj.randn(n, 3) + s)) for n, s in
                                  [(3, 1.0), (5, -1.0), (4, 1.0)]])


def test_the_examples_in_the_script_docs_are_in_the_subset(tmp_path):
    import re
    import runpy
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "script.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert len(blocks) >= 10
    for k, block in enumerate(blocks):
        path = tmp_path / f"block{k}.py"
        path.write_text("import tracejit as tj\n" + block)
        runpy.run_path(str(path))  # scripting checks the subset: a ScriptError fails here


def index_scaled_sum(w, n: int):
    s = w * 0
    for i in range(n):
        s = s + w * i  # w * i reads only invariants, but i changes: it stays in the loop
    return s


def test_an_op_using_the_loop_index_is_not_moved_out_of_the_loop():
    agree(index_scaled_sum, *[Call(rg(tj.randn(3)), n) for n in (3, 5, 0, 2)])


def head_by_data(x, n):
    k = int(n)
    return x[:k].sum()


def test_a_size_from_data_may_be_negative():
    # x[:k] with k < 0 counts from the end, as in Python: nothing assumes k >= 0
    sf = agree(head_by_data, Call(rg(tj.randn(6)), tj.tensor(3)),
               Call(rg(tj.randn(6)), tj.tensor(5)))
    agree(head_by_data, Call(rg(tj.randn(6)), tj.tensor(-2)), Call(rg(tj.randn(7)), tj.tensor(-3)),
          scripted=sf, compiles=2)


def test_gradients_through_a_loop_under_create_graph():
    agree(for_range_size, *[Call(rg(tj.randn(n, 3))) for n in (3, 5)], create_graph=True)
    agree(while_norm, *[Call(rg(tj.ones(3) * s)) for s in (0.5, 4.0)], create_graph=True)


def _clipped(h):
    if h.abs().max() > 2:
        h = h / h.abs().max()
    return h


def calls_a_helper(x):
    for _ in range(x.shape[0]):
        x = _clipped(x * 1.7)
    return x


def test_functions_a_scripted_function_calls_are_compiled_too(backend):
    sf = agree(calls_a_helper, *[Call(rg(tj.randn(n) + 0.5)) for n in (3, 6, 2)])
    body = next(n for n in sf.graph.nodes if n.op == "loop").regions[-1]
    assert any(n.op == "if" for n in body.nodes)  # the helper's branch, not a guard
    if backend == "numba":
        assert "# host program of segment" in sf.code


# ---- more combinations ------------------------------------------------------------------------
def break_inner_loop(x):
    total = x[0, 0] * 0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            if x[i, j] > 1:
                break  # leaves the inner loop only
            total = total + x[i, j]
    return total


def while_with_continue_and_break(x):
    i = 0
    s = x[0] * 0
    while i < x.shape[0]:
        i += 1
        if x[i - 1] < 0:
            continue
        s = s + x[i - 1]
        if s > 2:
            break
    return s, i


def swap_carried(a, b):
    for _ in range(a.shape[0]):
        a, b = b, a + b
    return a, b


class StepNet(tj.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tj.nn.Linear(3, 3)

    def step(self, h):
        if h.sum() > 0:
            return self.lin(h).tanh()
        return self.lin(-h)

    def forward(self, x):
        for _ in range(4):
            x = self.step(x)
        return x


def test_combinations_of_loops_branches_and_methods():
    agree(break_inner_loop, *[Call(rg(tj.randn(n, m) + s)) for n, m, s in
                              [(3, 4, 0.0), (5, 2, 0.0), (4, 6, 0.8)]])
    agree(while_with_continue_and_break, Call(rg(tj.randn(6))), Call(rg(tj.rand(9))),
          Call(rg(-tj.rand(3))))
    agree(swap_carried, Call(rg(tj.randn(3)), rg(tj.randn(3))),
          Call(rg(tj.randn(6)), rg(tj.randn(6))))
    net = StepNet()
    sm = tj.script(net)
    for v in (1.0, -1.0, 0.5):
        call = Call(rg(tj.ones(2, 3) * v))
        diff = compare(outcome(net, *call.fresh(), params=list(net.parameters())),
                       outcome(sm, *call.fresh(), params=list(net.parameters())))
        assert diff is None, diff
    assert sm.stats["compiles"] == 1


# ---- the functional forms, in a plain trace ----------------------------------------------------
def with_cond(x, w):
    y = tj.cond((x @ w).sum() > 0, lambda x: (x @ w).tanh() * 2, lambda x: -x.exp(), x)
    return y.sum()


def with_while_loop(i, x):
    return tj.while_loop(lambda i, x: x.sum() < 50, lambda i, x: (i + 1, x * 2), (i, x))


def test_cond_and_while_loop_keep_both_paths_in_a_trace():
    w = rg(tj.randn(3, 3))
    traced = tj.trace(with_cond, (rg(tj.randn(4, 3)), w))
    assert "if(" in str(traced.graph)
    for n, s in [(5, 1.0), (6, -1.0), (3, 1.0)]:
        call = Call(rg(tj.randn(n, 3) + s), w)
        assert compare(outcome(with_cond, *call.fresh()), outcome(traced, *call.fresh())) is None
    traced = tj.trace(with_while_loop, (tj.tensor(0), rg(tj.rand(3) + 0.1)))
    assert "loop(" in str(traced.graph)
    for s in (0.05, 1.0, 30.0):
        call = Call(tj.tensor(0), rg(tj.rand(3) + s))
        assert compare(outcome(with_while_loop, *call.fresh()),
                       outcome(traced, *call.fresh())) is None
    assert traced.stats["compiles"] == 1
