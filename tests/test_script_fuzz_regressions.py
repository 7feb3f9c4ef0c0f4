"""Script mode against eager where the script-mode fuzzer (`python -m tracejit fuzz
--script --all`) found it wrong, each as a small program written by hand: scripted, called
first (the recording call) and again with other sizes, counts and values, compared with
the same function run eagerly (values, gradients, errors, and the type and identity of
every output); what script mode refuses by design raises a clear error naming the line."""
from __future__ import annotations

import inspect

import pytest

import tracejit as tj
from tracejit.testing.differential import Call


from script_checks import agree, line_of, rg  # noqa: E402


BACKENDS = ["interpret", "numba"]


# ---- A. break / continue inside an if nested in an if of a loop body ----------------------------
def break_in_nested_if(x, n: int):
    for i in range(n):
        if x.sum() > 0:
            if i >= 2:
                break
        x = x * 1.5 - 0.25
    return x


def continue_in_nested_if(x, n: int):
    for i in range(n):
        if i % 2 == 0:
            if x.sum() > 0:
                continue
        x = x * 1.5 - 0.25
    return x


def break_or_continue_in_inner_else(x, n: int):
    h = x * 0.5
    for i in range(n):
        if i > 1:
            h = h + x
        else:
            if x.mean() < 0:
                break
            if i == 0:
                continue
        h = h.tanh() * 2.0
    return h


def break_after_a_branch_that_returns_on_one_path(x, n: int):
    if n == 3:
        if x.sum() > 0:
            return x * 2, 0
    k = 0
    while k < 3:
        if n > 2:
            break
        k += 1
    return x * 1.5, k


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [break_in_nested_if, continue_in_nested_if,
                                break_or_continue_in_inner_else,
                                break_after_a_branch_that_returns_on_one_path])
def test_a_break_or_continue_in_a_nested_if_with_statements_after_it(fn, backend):
    calls = [Call(rg(tj.ones(3) * v), n) for v, n in
             [(1.0, 5), (-1.0, 4), (0.5, 0), (1.0, 3), (-2.0, 1), (2.0, 7), (-1.0, 3)]]
    calls.insert(3, Call(rg(tj.ones(5) * 0.3), 6))
    agree(fn, *calls, backend=backend)


def test_the_rest_after_a_partly_returning_branch_is_not_shared_between_its_paths():
    # the statements after the branch are lowered once per path: the loop keeps its own
    # break flag on each (it was undefined on the second path)
    sf = tj.script(break_after_a_branch_that_returns_on_one_path)
    assert sf.source.count("__tj_brk1 = False") + sf.source.count("__tj_brk2 = False") == 2


# ---- B. a side effect on a global list inside a loop or a branch on a tensor ---------------------
LOG: list = []


def logs_in_a_loop(x, n: int):
    for i in range(n):
        LOG.append(i)
        x = x * 2
    return x


def logs_in_a_tensor_branch(x, n: int):
    if x.sum() > 0:
        LOG.append(n)
    return x * 2


def logs_before_and_in_a_while(x, n: int):
    j = 0
    while j < n:
        LOG.append(j)
        j += 1
    return x * 3


def logs_in_a_nested_loop(x, n: int):
    for i in range(x.shape[0]):
        for j in range(n):
            if x[i].sum() > 0:
                LOG.append(j)
    return x + 1


@pytest.mark.parametrize("fn", [logs_in_a_loop, logs_in_a_tensor_branch,
                                logs_before_and_in_a_while, logs_in_a_nested_loop])
def test_a_global_list_changed_in_a_loop_or_branch_is_refused_naming_its_line(fn):
    sf = tj.script(fn)
    where = f"{__file__}:{line_of(fn, 'LOG.append')}"
    for v, n in [(1.0, 3), (-1.0, 0), (1.0, 0), (-1.0, 2)]:  # a loop that runs no time too
        with pytest.raises(tj.jit.ScriptError) as err:
            sf(rg(tj.ones(3) * v), n)
        message = str(err.value)
        assert message.startswith(where) and "only while compiling" in message, message
        assert "__tj" not in message and "not defined" not in message
    assert LOG == []  # refused before anything was appended


GT = tj.zeros(3)


def adds_to_a_global_tensor_in_a_loop(x, n: int):
    for i in range(n):
        GT.add_(1.0)
        x = x * 2
    return x + GT


def test_a_global_tensor_updated_in_place_in_a_loop_is_the_global_itself():
    # (carried as a variable, the global became a local of the function: NameError)
    sf = tj.script(adds_to_a_global_tensor_in_a_loop)
    for n in (3, 0, 2, 1):
        before = GT.clone()
        out = sf(tj.ones(3), n)
        assert (GT.numpy() == (before + n).numpy()).all()
        assert (out.numpy() == (before + n + 2.0 ** n).numpy()).all()


# ---- C. an int output is a Python int ---------------------------------------------------------
def counts_and_gives_up_on_the_other_path(x, n: int):
    k = 0
    for i in range(n):
        k += 2
    if x.sum() > 0:
        return x * 2, k, n
    y = x[7] * x  # x[7] is out of range for a short x: recorded without running, fails
    return y, k, n


def returns_its_loop_index_and_counter(x, n: int):
    i, steps = -1, 0
    for i in range(n):
        if x.sum() > 0:
            steps += 1
        x = x * 0.5
    return x, i, steps, n


def test_an_int_output_is_an_int_when_the_recording_gives_up():
    fn = counts_and_gives_up_on_the_other_path
    sf = agree(fn, *[Call(rg(tj.ones(m) * v), n) for m, v, n in
                     [(3, 1.0, 4), (2, 1.0, 0), (9, -1.0, 3), (3, 1.0, 7), (8, -1.0, 1)]])
    out = sf(tj.ones(3), 5)
    assert type(out[1]) is int and type(out[2]) is int and out[1:] == (10, 5)


def test_an_int_output_is_an_int_on_every_call():
    sf = agree(returns_its_loop_index_and_counter,
               *[Call(rg(tj.ones(3) * v), n) for v, n in
                 [(1.0, 3), (-1.0, 0), (1.0, 5), (-1.0, 2), (1.0, 1)]])
    assert sf.stats["compiles"] == 1
    assert all(type(v) is int for v in sf(tj.ones(3), 4)[1:])


# ---- D. an output is the input itself exactly where eager's is ----------------------------------
def returns_the_input_on_one_path(x):
    if x.sum() > 0:
        return x
    return x * 2


def a_copy_that_a_branch_keeps(x):
    h = x * 1.0
    if x.sum() > 0:
        h = x
    return h


def a_copy_that_a_loop_carries(x, n: int):
    h = x * 1.0
    for i in range(n):
        h = h + 1
    return h


def the_input_through_a_loop(x, n: int):
    y = x
    for i in range(n):
        y = y + 1
    return y


def returns_in_nested_branches(x, n: int):
    h1 = x + x * 0.5
    if x.norm() > 2.0:
        if x.sum() > 0:
            return h1, h1.sum(), n
    return x, h1.sum(), n


def equal_products_one_kept_by_a_branch(x):
    a = x * 2
    b = x * 2
    if x.sum() > 0:
        a = a + 1
    return a, b


def equal_products_one_carried_by_a_loop(x, n: int):
    a = x * 2
    for i in range(n):
        a = a + 1
    b = x * 2
    return a, b


def writes_into_a_copy_in_a_loop(x, n: int):
    o = x * 1.0
    for i in range(n):
        if x.sum() > 0:
            o = o * 0.5
    o[0] = 7.0
    return o


def reads_the_input_back_from_a_list(x, n: int):
    hs = [x]
    for i in range(x.shape[0]):
        hs.append(x * 2)
    return hs[(n - 2) % len(hs)], len(hs)  # the first call reads x back


def reads_a_copy_back_from_a_list(x, n: int):
    hs = [x * 1.0]
    for i in range(x.shape[0]):
        hs.append(x * 2)
    return hs[n % len(hs)]


@tj.script
def _halves(t, k: int):  # a scripted helper: the input itself when its loop runs no time
    for j in range(k % 3):
        t = t * 0.5 + j
    return t


def the_input_from_a_helper_with_a_copy_beside_it(x, n: int):
    h = _halves(x, n)
    for i in range(2):
        j = 0
        g = h * 1.0  # a copy of h, carried with h: h is handed on as itself, g as a copy
        while j < 3 and g.abs().sum() < 2.0:
            g = g * 1.5 + 0.25
            h = g + g * 0.5
            j += 1
    return h, h


def _calls(fn):
    values = [(3, 1.0, 2), (3, -1.0, 0), (2, 1.0, 0), (4, -1.0, 3), (3, 3.0, 1), (2, -3.0, 2)]
    n_param = "n" in inspect.signature(fn).parameters
    return [Call(tj.ones(m) * v, n) if n_param else Call(tj.ones(m) * v)
            for m, v, n in values]


ALIASING = [returns_the_input_on_one_path, a_copy_that_a_branch_keeps,
            a_copy_that_a_loop_carries, the_input_through_a_loop, returns_in_nested_branches,
            equal_products_one_kept_by_a_branch, equal_products_one_carried_by_a_loop,
            writes_into_a_copy_in_a_loop, reads_the_input_back_from_a_list,
            reads_a_copy_back_from_a_list, the_input_from_a_helper_with_a_copy_beside_it]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", ALIASING)
def test_an_output_is_the_input_itself_exactly_where_eagers_is(fn, backend):
    calls = _calls(fn)
    agree(fn, *calls, backend=backend)  # compare() checks `is_input` of every output
    sf = tj.script(fn, backend=backend)
    for call in calls:
        args = call.fresh()[0]
        before = args[0].numpy().copy()
        e, s = fn(*call.fresh()[0]), sf(*args)
        e, s = (e, s) if isinstance(e, tuple) else ((e,), (s,))
        for a, b in zip(e, s):  # one object for two outputs only where eager has one
            assert [a is c for c in e] == [b is c for c in s]
        for out in s:  # a new tensor never shares the caller's input
            if isinstance(out, tj.Tensor) and out is not args[0]:
                out.add_(100.0)
        assert (args[0].numpy() == before).all()


def test_gradients_flow_through_an_input_handed_on_by_a_branch():
    agree(returns_the_input_on_one_path,
          *[Call(rg(tj.ones(m) * v)) for m, v in [(3, 1.0), (3, -1.0), (2, 2.0), (4, -2.0)]])
    agree(the_input_through_a_loop,
          *[Call(rg(tj.ones(m) * v), n) for m, v, n in [(3, 1.0, 2), (3, 1.0, 0), (2, 2.0, 3)]])


# ---- a path not taken never runs for real -------------------------------------------------------
def fails_inside_a_path_not_taken(x, n: int):
    if x.sum() > 0:
        return x * 2
    for i in range(n):
        t = x * i
    for j in range(n):
        x = x + t  # recorded without running (n == 0): t is not defined here
    x.mul_(3)
    return x


def test_a_loop_failing_while_recorded_inside_a_path_not_taken_stops_that_path():
    # the path not taken went on eagerly after the loop gave up: x.mul_(3) ran for real
    sf = tj.script(fails_inside_a_path_not_taken)
    x = tj.ones(3)
    out = sf(x, 0)
    assert (x.numpy() == 1.0).all() and (out.numpy() == 2.0).all()


# ---- E. a variable assigned only inside a loop, read after it: refused by design ---------------
def reads_a_loop_local_after_the_loop(x, n: int):
    for i in range(n + 1):
        t = x * 0.5 + i
    y = t + x
    return y


def test_a_variable_assigned_only_inside_a_loop_is_refused_naming_the_lines():
    sf = tj.script(reads_a_loop_local_after_the_loop)
    use = f"{__file__}:{line_of(reads_a_loop_local_after_the_loop, 'y = t + x')}"
    loop = f"{__file__}:{line_of(reads_a_loop_local_after_the_loop, 'for i in')}"
    for n in (2, 0, 1):
        reads_a_loop_local_after_the_loop(tj.ones(3), n)  # eager runs: the loop ran
        with pytest.raises(NameError) as err:  # UnboundLocalError, as Python's
            sf(tj.ones(3), n)
        message = str(err.value)
        assert message.startswith(f"{use}: variable 't' is not defined here"), message
        assert f"inside the loop at {loop}" in message and "before the loop" in message
        assert "__tj" not in message


def test_the_fuzzer_counts_a_refusal_by_design_as_refused_and_other_errors_as_mismatches():
    from tracejit.testing import script_fuzz as sfz
    from tracejit.testing.differential import Outcome

    res = Outcome()
    res.error, res.message = "UnboundLocalError", (
        "<script fuzz 7>:9: variable 't2' is not defined here: it is assigned inside the "
        "loop at <script fuzz 7>:4 but not before it")
    assert sfz._refusal(res, "<script fuzz 7>")
    assert not sfz._refusal(res, "<script fuzz 8>")  # another program's line
    res.error = "NameError"
    assert not sfz._refusal(res, "<script fuzz 7>")
    res.error, res.message = "UnboundLocalError", "<script fuzz 7>:9: variable '__tj_brk8'"
    assert not sfz._refusal(res, "<script fuzz 7>")


# ---- C. an op reading a size that a loop binds, fused with an op before the loop -----------------
def scaled_by_a_while_loops_count(x, n: int):
    h = x * 2.0
    j = 0
    while j < n % 3 + 1:
        j += 1
    hs = [x]
    for i in range(n):
        g = h * (j % 3 + 1)  # invariant: moved in front of this loop, next to h = x * 2.0
        if g.mean() < 0.25:
            continue
        hs.append(x + i * 0.25)
    return hs[len(hs) // 2] * 2.0, j


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_reading_a_loops_trip_count_runs_after_the_loop(backend):
    # fusion placed `h * (j % 3 + 1)` in one kernel with `x * 2.0`, in front of the while
    # loop that binds j: the next call raised NameError for the loop's size symbol
    calls = [Call(rg(tj.ones(b, 3) * v), n) for b, v, n in
             [(5, 1.0, 4), (3, 1.0, 2), (2, -1.0, 1), (4, 0.5, 5), (1, 1.0, 0), (3, -0.1, 7)]]
    agree(scaled_by_a_while_loops_count, *calls, backend=backend)
    sf = tj.script(scaled_by_a_while_loops_count, backend=backend)
    sf(*calls[0].fresh()[0])
    order = [n.op for n in sf.graph.nodes]
    assert order.index("loop") < order.index("fused"), sf.graph


# ---- D. one tensor under two names (an input and a list element) read in a nested loop ----------
def one_tensor_under_two_names(x, w, n: int):
    hs = [x]
    for i in range(2, x.shape[0] + 1):
        continue
    h = hs[n % len(hs)]  # x itself while the list holds only x
    if h.norm() > 2.0:
        h = x.tanh() * 1.5
    else:
        j = 0
        g = h * 1.0
        while j < 6 and g.abs().sum() < 8.0:
            inner = [x]
            for k in range(1, n + 1):
                if n == n - 1:
                    continue
                if j > 2:
                    continue
                g = h * 2.0
                inner.append(g * w)
            j += 1
    return x, h.sum(), n


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_read_under_two_names_in_a_loop_is_one_block_argument(backend):
    # the loop body captured x twice (as the input and as the branch's name for h, the
    # same tensor): one of the two block arguments was dropped, and building the
    # compiled program raised KeyError for it
    x = [[0.88, -1.55, 2.82]]
    w = rg(tj.tensor([-0.12, 0.67, -0.29], dtype=tj.float64))
    calls = [Call(rg(tj.tensor(x, dtype=tj.float64)), w, 2),
             Call(rg(tj.tensor(x, dtype=tj.float64) * 0.1), w, 3),
             Call(rg(tj.ones(3, 3, dtype=tj.float64) * 0.2), w, 1),
             Call(rg(tj.ones(1, 3, dtype=tj.float64) * -0.3), w, 4)]
    agree(one_tensor_under_two_names, *calls, backend=backend)


# ---- E. a view made inside a helper's loop, then a write into its base ---------------------------
def rows_sin(t):
    u = t * 0.5
    for j in range(t.shape[0]):
        u = u + t[j].sin()  # a view of t for each j, live until the helper returns
    return u


def helper_views_then_a_write(x, n: int):
    k = (n - 4) // 3
    o = x * 1.0
    for i in range(x.shape[0]):
        if -k // 2 > 2:
            continue
        h = rows_sin(o)  # noqa: F841 — made and left unused, as the fuzzer wrote it
        if o.norm() > 2.0:
            break
        o[i] = o[i] * 2.0 + o[i]
    return o, o.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_does_not_re_derive_views_made_inside_a_finished_loop(backend):
    # the write `o[i] = ...` re-derived every live view of o at once, the helper's `t[j]`
    # too: a read (and a guard) with the helper loop's index, after that loop, raised
    # NameError at the next call. Views are now derived again where they are next used
    calls = [Call(tj.tensor([[2.2, 1.3, 0.97], [0.86, -1.04, 0.65]]), 4),
             Call(tj.tensor([[0.05, -0.5, -0.7], [1.45, -0.46, -1.58], [1.1, -0.4, 0.3]]), 0),
             Call(rg(tj.ones(4, 3) * 0.1), 2), Call(rg(tj.ones(1, 3) * 0.3), 9)]
    agree(helper_views_then_a_write, *calls, backend=backend)


def sibling_view_read_after_a_write(x, n: int):
    o = x * 1.0
    first = o[0]          # a view made before the write
    for i in range(n):
        o[1] = o[1] + first * 2.0
    if o.sum() > 0:
        o[0] = o[0] * 3.0
    return first * 1.0, o  # reads the base as written


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_made_before_writes_reads_the_written_base_where_it_is_used(backend):
    calls = [Call(rg(tj.ones(3, 2) * v), n) for v, n in [(1.0, 2), (-1.0, 3), (0.5, 0),
                                                          (2.0, 1)]]
    agree(sibling_view_read_after_a_write, *calls, backend=backend)


# ---- F. lists of tensors that a loop body builds again, or the paths of a branch build -----------
def body_rebuilds_a_list(x, n: int):
    j = 0
    out = x * 0.0
    while j < x.shape[0]:
        hs = [x]
        for i in range(2):  # unrolled: a Python list in the body
            hs.append(hs[-1] * 0.5)
        out = out + hs[n % len(hs)]
        if out.sum() > 4.0:
            break
        j += 1
    return out, j


def branch_lists_of_two_lengths(x, n: int):
    if x.sum() > 0:
        hs = [x, x * 2.0]
    else:
        hs = [x]
    return tj.stack(hs).sum(0), len(hs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [body_rebuilds_a_list, branch_lists_of_two_lengths])
def test_a_list_built_again_in_a_body_or_differently_by_each_path_is_a_list_value(fn, backend):
    # both were refused ("is a list before the loop and list [...] after its body", "is
    # list [...] when the branch is taken and list [...] when it is not"): a list of
    # tensors whose length depends on the path becomes a list value, as one a loop built
    calls = [Call(rg(tj.ones(b, 3) * v), n) for b, v, n in
             [(2, 0.5, 3), (3, -1.0, 2), (1, 2.0, 0), (4, 0.2, 5), (2, -0.3, 1)]]
    agree(fn, *calls, backend=backend)


def test_two_list_values_of_one_element_type_unify():
    # each path of a branch may make its own list value: their types are one when their
    # elements' are (they were compared as objects, and refused with two equal names)
    from tracejit.ir.graph import ListType, Value
    from tracejit.scripting.control_flow import unify

    elem = (tj.float32, (3, 3))
    assert unify(Value(ListType(elem), ()), Value(ListType((tj.float32, (3, 3))), ()))
    assert not unify(Value(ListType(elem), ()), Value(ListType((tj.float64, (3, 3))), ()))
    assert not unify(Value(ListType(elem), ()), Value(ListType((tj.float32, (3,))), ()))


# ---- G. a recording that stops inside a path not taken, nested in another one ------------------
SEEN: list = []


def stops_inside_a_nested_path_not_taken(x, n: int):
    h = x.tanh()
    if (x > 1).any():
        return h, n
    for i in range(x.shape[0]):
        if h.norm() > 2.0:
            break
        if (x > 1).any():
            break
        for k in range(n + 1):
            t = h + 1.0
            if i < n:
                break
        u = t + h  # noqa: F841 — t is assigned inside the loop only: recorded without
        # running, this fails
    SEEN.append(n)
    return x, n


def test_a_path_not_taken_stops_when_a_part_inside_it_stops_the_recording():
    # the inner path's failure stopped the recording, but the enclosing loop recorded
    # without running swallowed the stop: the rest of the outer path not taken ran for
    # real after it, and its side effect happened though eager returned early
    sf = tj.script(stops_inside_a_nested_path_not_taken)
    del SEEN[:]
    out = sf(tj.ones(4, 3) * 2, 7)
    assert out[1] == 7 and SEEN == []
