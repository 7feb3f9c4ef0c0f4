"""Structured control flow captured into regions: `tj.cond`, `tj.while_loop`, and the
branch and loop helpers that scripted code (`@tj.script`) calls.

Outside a capture each helper is plain Python control flow. While a function is
traced or scripted, a branch on a tensor records both paths into an `if` node, and a
loop whose bounds are sizes or whose condition is a tensor records its body once into a
`loop` node. The call being recorded still computes eager's values: the path taken runs
for real (later iterations of a loop run eagerly), the other path is recorded without
effects. Variables a branch or body assigns are its results; a tensor stays a tensor,
an int becomes a size symbol bound when the program runs, a bool a bool tensor.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..core.modes import STATE
from ..capture.recorder import DryPathAbort
from ..core.diagnostics import raise_from_line  # noqa: F401 (the scripting modules' import)
from ..core.errors import ScriptError
from ..ir.graph import IF, LOOP, ListType, Value
from ..ir.passes.rewrite import same_type
from ..ir.printer import format_type
from ..core.symbolic import decide, hint_of, is_dynamic, same_dim, SymInt
from ..ops import OPS
from ..tensor.dispatch import apply, user_frame
from ..tensor.tensor import Tensor
from . import lists


class Undefined:
    """The value of a variable assigned on one path only (or only inside a loop body):
    any use raises, as reading an unbound variable does in Python."""

    __slots__ = ("name", "why")

    def __init__(self, name: str, why: str):
        self.name, self.why = name, why

    def _fail(self, *args, **kwargs):
        # named at the user's line that reads it (the converted code keeps the lines);
        # Python's error for a local read before it is assigned (a NameError)
        raise UnboundLocalError(f"{user_frame()}: variable '{self.name}' is not defined here: "
                        f"{self.why}")

    __bool__ = __call__ = __iter__ = __len__ = __getitem__ = __index__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _fail
    __rtruediv__ = __matmul__ = __rmatmul__ = __neg__ = __lt__ = __le__ = __gt__ = _fail
    __ge__ = __pow__ = __float__ = __int__ = _fail

    def __getattr__(self, item):
        self._fail()

    def __repr__(self) -> str:
        return f"<undefined {self.name}>"


# ---- small pieces ----------------------------------------------------------------------------
@contextlib.contextmanager
def suspended():
    """Run eagerly for a while, recording nothing."""
    rec = STATE.capture
    STATE.capture = None
    if rec is not None:
        rec.paused += 1  # sizes of the recording used meanwhile decide nothing recorded
    try:
        yield rec
    finally:
        if rec is not None:
            rec.paused -= 1
            if not rec.aborted:
                STATE.capture = rec


def _give_up(rec, reason: str) -> None:
    """Stop recording this call (it finishes eagerly; a later call records again). Called
    where a path or loop body recorded without running failed (its own `dry` level is
    1); inside a path not taken of an enclosing branch, that path stops too: run on
    eagerly, it would have its effects for real (`DryPathAbort`)."""
    dry, rec.dry = rec.dry, 0
    try:
        rec.abort(reason, final=False)
    finally:
        rec.dry = dry
    if dry > 1:
        raise DryPathAbort(reason)


def _alias(t: Tensor) -> Tensor:
    """A new tensor object for the same value, keeping its autograd history: the name a
    region's code knows a value by, distinct from every other name of it."""
    with suspended():  # t[...]: a writable view, so in-place updates reach t's storage
        return apply(OPS.getitem, t, index=(Ellipsis,))


def _truth(x) -> bool:
    if isinstance(x, Tensor):
        with suspended():
            return bool(x)
    return bool(x)


def _predicate(t: Tensor) -> Tensor:
    """A condition tensor as a recorded bool[]: what `bool(t)` would decide."""
    if t._data.size != 1:
        _truth(t)  # raises eager's error
    p = t.reshape(()) if t.ndim else t
    return p if p.dtype.name == "bool" else p != 0


def _is_int(x) -> bool:
    return isinstance(x, SymInt) or (isinstance(x, int) and not isinstance(x, bool))


def _is_bool(x) -> bool:
    return isinstance(x, bool) or (isinstance(x, Tensor) and x.dtype.name == "bool" and
                                   x._data.size == 1)


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a tensor {x.dtype.short}{list(x._data.shape)}"
    if isinstance(x, Undefined):
        return "not defined"
    return f"{type(x).__name__} {x!r}"


def _list_like(x) -> bool:
    return type(x) is list and all(isinstance(t, Tensor) for t in x)


def _same_python(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, SymInt) or isinstance(b, SymInt):
        return isinstance(a, SymInt) and isinstance(b, SymInt) and a.source() == b.source()
    if type(a) is not type(b) or isinstance(a, Tensor):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 — incomparable objects differ
        return False


def _copies(rec, values) -> tuple:
    """Each path gets its own containers: appending on one path must not show on the other
    (list values got their own copies with their names already)."""
    return tuple(type(v)(v) if type(v) in (list, dict) and not lists.is_tracked(rec, v)
                 else v for v in values)


def _bool_tensor(rec, x) -> Tensor:
    return x if isinstance(x, Tensor) else rec.size_value(bool(x))


def _align(rec, scopes: list, n_carried: int) -> list:
    """The outer values a node passes to its regions (after its carried values): the
    union of what each region captured; every region gets a block argument for each."""
    operands: list = []
    for scope in scopes:
        for v in scope.outer:
            if not any(v is o for o in operands):
                operands.append(v)
    for scope in scopes:
        g = scope.graph
        carried, captured = g.inputs[:n_carried], g.inputs[n_carried:]
        by_outer = {id(o): inner for o, inner in zip(scope.outer, captured)}
        g.inputs = carried + [by_outer.get(id(o)) or Value(o.dtype, o.shape, None, o.name)
                              for o in operands]
        g.input_kinds = ["arg"] * len(g.inputs)
    return operands


# ---- tuples of values travel as their elements -------------------------------------------------
def _flatten(values, names):
    """(leaves, their names, structure): tuples (an LSTM's (h, c)) become their elements."""
    leaves, leaf_names = [], []

    def walk(v, name):
        if isinstance(v, tuple):
            return (type(v), tuple(walk(x, f"{name}[{k}]") for k, x in enumerate(v)))
        leaves.append(v)
        leaf_names.append(name)
        return None
    spec = tuple(walk(v, names[k] if k < len(names) else f"result {k}")
                 for k, v in enumerate(values))
    return leaves, tuple(leaf_names), spec


def _unflatten(spec, leaves):
    it = iter(leaves)

    def build(sp):
        if sp is None:
            return next(it)
        kind, parts = sp
        items = [build(p) for p in parts]
        return kind(*items) if hasattr(kind, "_fields") else kind(items)
    return tuple(build(sp) for sp in spec)


def _flat_fn(fn, in_spec, out_specs: list, lead: int = 0):
    """fn over structured values as a function over leaves; the structures it returns
    are kept in out_specs (to check that every path gives the same)."""
    def run(*args):
        out = fn(*args[:lead], *_unflatten(in_spec, args[lead:]))
        leaves, _, spec = _flatten(tuple(out), ())
        out_specs.append(spec)
        return tuple(leaves)
    return run


def _same_structure(specs, where: str, what: str) -> None:
    if any(sp != specs[0] for sp in specs[1:]):
        raise ScriptError(f"{where}: {what} gives its variables other structures (tuples of "
                          "other lengths, a tuple on one path and no tuple on the other)")


# ---- branches -------------------------------------------------------------------------------
def if_(pred, then_fn, else_fn, values: tuple = (), names: tuple = ()):
    """`if pred: <then> else: <else>` over the variables `names` the branches assign:
    each function takes their current values and returns their new ones."""
    rec = STATE.capture
    if rec is None or not isinstance(pred, Tensor):
        return tuple(then_fn(*values) if pred else else_fn(*values))
    leaves, leaf_names, spec = _flatten(values, names)
    fns = [lambda *v, f=f: tuple(f(*_unflatten(spec, v))) for f in (then_fn, else_fn)]
    return _if(rec, pred, fns, tuple(leaves), spec, names)


def _if(rec, pred, fns, values: tuple, spec, names: tuple):
    """`values` are the variables' leaves (tuples flattened by `spec`); each function
    takes them and returns the variables."""
    where = user_frame()
    taken = 0 if _truth(pred) else 1
    p = _predicate(pred)
    for x in values:  # a list a path may change is a list value from here on
        if _list_like(x):
            lists.value_of(rec, x)
    scopes, results, entries = [None, None], [None, None], [None, None]
    for k in (taken, 1 - taken):
        dry = k != taken
        if dry and rec.aborted:
            break
        scope = scopes[k] = rec.open_scope("then" if k == 0 else "else")
        rec.dry += dry
        try:
            entries[k] = _entry_aliases(rec, values)
            results[k] = tuple(fns[k](*_copies(rec, entries[k])))
        except Exception as err:
            if not dry or isinstance(err, ScriptError) or (
                    isinstance(err, DryPathAbort) and rec.dry > dry):
                raise  # (inside an enclosing path not taken too: that one stops as well)
            if not rec.aborted:
                _give_up(rec, f"the path not taken of the branch at {where} raised "
                              f"{type(err).__name__}: {err} while it was recorded")
        finally:
            rec.dry -= dry
            rec.close_scope(scope)
    if rec.aborted:
        return results[taken]
    results, out_spec, leaf_names = _common_structure(results, names, where)
    updated = _updated_in_place(rec, values, entries, results) if out_spec == spec else set()
    if rec.aborted:
        return _unflatten(out_spec, results[taken])
    merged = _merge_branches(rec, p, scopes, results, taken, leaf_names, where, values,
                             updated)
    return _unflatten(out_spec, merged)


def _common_structure(results, names, where):
    """Both paths' variables as leaves of one structure. A variable one path leaves
    undefined is undefined after the branch, whatever the other path gives it."""
    if len(results[0]) != len(results[1]):
        raise ScriptError(f"{where}: the two paths of a branch give different numbers of "
                          f"results ({len(results[0])} and {len(results[1])})")
    sides = [list(r) for r in results]
    for k, (a, b) in enumerate(zip(*sides)):
        if _flatten((a,), ())[2] == _flatten((b,), ())[2]:
            continue
        if _undefined_in(a) or _undefined_in(b):
            name = names[k] if k < len(names) else f"result {k}"
            sides[0][k] = sides[1][k] = Undefined(
                name, f"it is assigned on one path of the branch at {where} only")
            continue
        raise ScriptError(f"{where}: variable '{names[k] if k < len(names) else k}' is "
                          f"{_describe(a)} on one path of the branch and {_describe(b)} on "
                          "the other (tuples must keep their length)")
    leaves0, leaf_names, out_spec = _flatten(tuple(sides[0]), names)
    leaves1 = _flatten(tuple(sides[1]), names)[0]
    return [tuple(leaves0), tuple(leaves1)], out_spec, leaf_names


def _undefined_in(x) -> bool:
    return isinstance(x, Undefined) or (isinstance(x, tuple) and any(map(_undefined_in, x)))


def _entry_aliases(rec, values) -> list:
    """The variables as a region's code starts from them: each tensor under a new name
    bound to the region's view of it, so that an in-place update inside is the region's
    (and written for real only on the path taken)."""
    out = list(values)
    for k, x in enumerate(values):
        if isinstance(x, Tensor):
            out[k] = _alias(x)
            rec.bind(out[k], rec.local(rec.value_of(x)), x)
        elif lists.is_tracked(rec, x):
            out[k] = list(x)
            lists.bind(rec, out[k], rec.local(rec.lists[id(x)]))
    return out


def _updated_in_place(rec, values, entries, results) -> set:
    """Positions of tensor variables a path updated in place without reassigning them:
    the node's result for them is the new value of the same tensor object."""
    updated = set()
    for k, x in enumerate(values):
        if not isinstance(x, Tensor):
            continue
        kept, changed = [], []
        for entry, res in zip(entries, results):
            if entry is None:
                continue
            kept.append(res[k] is entry[k])
            changed.append(res[k] is entry[k] and (
                id(entry[k]) in rec.stale or  # a view whose base was written
                rec.values.get(id(entry[k])) is not rec.entry_values.get(id(entry[k]))))
        if any(changed):
            if not all(kept):
                rec.abort("a tensor variable is updated in place on one path of a branch "
                          "and reassigned on the other", final=False)
                return set()
            updated.add(k)
    return updated


def _passed(rec, x, before):
    """The tensor object a branch's or loop's result stands for in this call, where it
    is one eager would hand on itself: the variable's value from before, unchanged, or
    an input of the function (`return x` on one path); None for a tensor the path made
    (the result is then a new tensor, as eager's is)."""
    if not isinstance(x, Tensor):
        return None
    p = rec.passthrough_of(x)
    if isinstance(before, Tensor) and p is rec.passthrough_of(before):
        return x
    return x if any(p is t for t in rec.inputs) else None


def _merge_branches(rec, p, scopes, results, taken, names, where, before, updated):
    then_out, else_out = results
    if len(then_out) != len(else_out):
        raise ScriptError(f"{where}: the two paths of a branch give different numbers of "
                          f"results ({len(then_out)} and {len(else_out)})")
    kinds = []
    for k, (a, b) in enumerate(zip(then_out, else_out)):
        name = names[k] if k < len(names) else f"result {k}"
        if isinstance(a, Undefined) or isinstance(b, Undefined):
            kinds.append("undefined")
        elif isinstance(a, Tensor) and isinstance(b, Tensor):
            kinds.append("tensor")
        elif lists.is_tracked(rec, a) and lists.is_tracked(rec, b):
            kinds.append("list")
        elif _same_python(a, b):
            kinds.append("same")
        elif all(lists.is_tracked(rec, x) or _list_like(x) for x in (a, b)):
            kinds.append("list")  # lists of tensors of lengths that differ by path
        elif _is_bool(a) and _is_bool(b):
            kinds.append("bool")
        elif _is_int(a) and _is_int(b):
            kinds.append("size")
        else:
            raise ScriptError(
                f"{where}: variable '{name}' is {_describe(a)} when the branch is taken and "
                f"{_describe(b)} when it is not; a branch on a tensor must give each "
                "variable the same kind of value on both paths (tensors of one type, ints, "
                "or bools)")
    yields = [[], []]
    for side in (0, 1):
        rec.scopes.append(scopes[side])
        sizes = []
        for kind, x in zip(kinds, results[side]):
            if kind in ("tensor", "bool"):
                t = _bool_tensor(rec, x) if kind == "bool" else x
                yields[side].append(rec.local(rec.value_of(t)))
            elif kind == "list":
                yields[side].append(rec.local(lists.value_of(rec, x)))
            elif kind == "size":
                sizes.append(x)
        scopes[side].graph.outputs = yields[side]
        scopes[side].graph.size_outputs = sizes
        rec.scopes.pop()
    out_types, binds = [], []
    taken_yields = yields[taken]
    for k, (a, b) in enumerate(zip(*yields)):
        if unify(a, b):
            out_types.append((a.dtype, a.shape))
            continue
        widened = _widen(rec, a, b, taken_yields[k])
        if widened is None:
            name = [n for n, kd in zip(names, kinds) if kd in ("tensor", "bool", "list")]
            raise ScriptError(
                f"{where}: variable '{name[k] if k < len(name) else k}' has type "
                f"{_type(rec, a)} on one path of the branch and {_type(rec, b)} on the "
                "other; both paths must give it the same type")
        shape, new = widened
        out_types.append((a.dtype, shape))
        binds += [(k, d, sym.source()) for d, sym in new]
    operands = _align(rec, scopes, 0)
    size_syms = [rec.new_symbol(int(hint_of(x)))
                 for kind, x in zip(kinds, results[taken]) if kind == "size"]
    node = rec._add(IF, [rec.value_of(p)] + operands,
                    {"sizes": [s.source() for s in size_syms], "binds": binds},
                    out_types, where, regions=[scopes[0].graph, scopes[1].graph])
    outs, values, sizes = iter(node.outputs), [], iter(size_syms)
    for k, (kind, x) in enumerate(zip(kinds, results[taken])):
        if k in updated:  # the same tensor, holding the branch's value from here on
            rec.commit_update(before[k], next(outs))
            values.append(before[k])
            continue
        if kind == "list":  # the same list object, holding the path's elements
            held = before[k] if k < len(before) and type(before[k]) is list else []
            held[:] = x  # (a new list where the variable held none before the branch)
            lists.bind(rec, held, next(outs))
            values.append(held)
            continue
        if kind in ("tensor", "bool"):
            t = _alias(x) if isinstance(x, Tensor) else Tensor._make(np.array(bool(x)))
            rec.bind(t, next(outs), _passed(rec, x, before[k] if k < len(before) else None))
            values.append(t)
        elif kind == "size":
            values.append(next(sizes))
        elif kind == "same":
            values.append(x)
        else:
            values.append(Undefined("?", "it is assigned on one path of a branch only"))
    for k, kind in enumerate(kinds):
        if kind == "undefined" and k < len(names):
            values[k] = Undefined(names[k], f"it is assigned on one path of the branch at "
                                            f"{where} only")
    return tuple(values)


def plain_offset_symbol(poly) -> str | None:
    """`s` when the polynomial is one symbol plus a constant (`u1 - 1`), else None."""
    terms = [m for m in poly if m != ()]
    if len(terms) == 1 and len(terms[0]) == 1 and poly[terms[0]] == 1:
        return terms[0][0]
    return None


def _poly_const(poly) -> int:
    """The constant of a polynomial that is only a constant; a large number otherwise
    (so that no fact follows)."""
    return poly.get((), 0) if all(m == () for m in poly) else 1 << 62


def _poly(size):
    return size.poly if isinstance(size, SymInt) and size.poly is not None else (
        {(): size} if isinstance(size, int) and size else {} if isinstance(size, int) else None)


def unify(a: Value, b: Value) -> bool:
    """Whether two paths give a value one type. Input sizes that are equal in this call
    but written differently (`T` and `N`) are guarded equal, as a trace guards any
    decision on sizes; sizes from data must match as written."""

    if isinstance(a.dtype, ListType) and isinstance(b.dtype, ListType):
        # lists: one element type (each path may have made its own list value)
        ea, eb = a.dtype.elem, b.dtype.elem
        return ea == eb or (ea is not None and eb is not None and
                            unify(Value(*ea), Value(*eb)))
    if a.dtype is not b.dtype or len(a.shape) != len(b.shape):
        return False
    if same_type(a, b):
        return True
    return all(lists.same_size(x, y) for x, y in zip(a.shape, b.shape))


def _widen(rec, a: Value, b: Value, taken: Value):
    """(shape, [(dim, symbol)]) for a value whose size from data differs between the two
    paths (two stacks of one list): the branch's result gets a fresh size, bound from
    the value the path gives; None when the types differ otherwise."""
    if a.dtype is not b.dtype or len(a.shape) != len(b.shape) or isinstance(
            a.dtype, lists.ListType):
        return None
    shape, new = [], []
    for d, (x, y) in enumerate(zip(a.shape, b.shape)):
        if same_dim(x, y):
            shape.append(x)
        elif is_dynamic(x) or is_dynamic(y):
            sym = rec.new_symbol(int(hint_of(taken.shape[d])))
            rec.nonneg.add(sym.source())
            shape.append(sym)
            new.append((d, sym))
        else:
            return None
    return tuple(shape), new


def _type(rec, v: Value) -> str:
    return format_type(v, rec.graph.symbols)


# ---- loops ----------------------------------------------------------------------------------
def while_(cond_fn, body_fn, values: tuple = (), names: tuple = ()):
    """`while cond: body` over the variables the body assigns."""
    values = tuple(values)
    while True:
        rec = STATE.capture
        go = cond_fn(*values)
        if rec is not None and isinstance(go, Tensor):
            return _loop(rec, values, names, cond_fn, body_fn, None)
        if not go:
            return values
        values = tuple(body_fn(*values))


def for_range(start, stop, step, body_fn, cond_fn=None, values: tuple = (), names: tuple = ()):
    """`for i in range(start, stop, step): body` (cond_fn: a `break` flag's test before
    each iteration). Bounds that are sizes make a loop node: new lengths never recompile."""
    rec = STATE.capture
    if rec is not None and any(isinstance(b, SymInt) for b in (start, stop, step)):
        return _loop(rec, tuple(values), names, cond_fn, body_fn, (start, stop, step))
    return _python_loop(range(start, stop, step), cond_fn, body_fn, tuple(values), names)


def for_each(iterable, body_fn, cond_fn=None, values: tuple = (), names: tuple = ()):
    """`for x in iterable: body`. Over a tensor whose first size is symbolic, a loop node
    over its rows; over anything else (lists, tuples, module containers) the loop is
    unrolled as Python runs it."""
    rec = STATE.capture
    if rec is not None and lists.is_tracked(rec, iterable):  # its length is data
        xs = iterable
        return _loop(rec, tuple(values), names, cond_fn,
                     lambda i, *v: body_fn(lists.get(rec, xs, i), *v),
                     (0, lists.length(rec, xs), 1))
    if rec is not None and isinstance(iterable, Tensor):
        if iterable.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        n = iterable.shape[0]
        if isinstance(n, SymInt):
            return _loop(rec, tuple(values), names, cond_fn,
                         lambda i, *v: body_fn(iterable[i], *v), (0, n, 1))
    return _python_loop(iterable, cond_fn, body_fn, tuple(values), names)


def _python_loop(items, cond_fn, body_fn, values: tuple, names):
    for item in items:
        if cond_fn is not None:
            go = cond_fn(*values)
            if STATE.capture is not None and isinstance(go, Tensor):
                # a break decided by a tensor: the rest of the unrolled loop is a branch
                values = if_(go, lambda *v, item=item: body_fn(item, *v), lambda *v: v,
                             values, names)
                continue
            if not go:
                break
        values = tuple(body_fn(item, *values))
    return values


def _loop(rec, values: tuple, names: tuple, cond_fn, body_fn, bounds):
    """A loop node over the leaves of the variables (tuples travel as their elements)."""
    leaves, leaf_names, spec = _flatten(values, names)
    out_specs: list = []
    cond = None if cond_fn is None else (
        lambda *v: cond_fn(*_unflatten(spec, v)))
    local = [k for k, v in enumerate(values) if isinstance(v, Undefined)]
    if local:  # assigned in the body only: what it gives them stays inside the loop
        inner = body_fn

        def body_fn(*args):
            out = list(inner(*args))
            for k in local:
                out[k] = values[k]
            return tuple(out)
    body = _flat_fn(body_fn, spec, out_specs, lead=1 if bounds else 0)
    out = _loop_leaves(rec, tuple(leaves), leaf_names, cond, body, bounds)
    _same_structure([spec] + out_specs, user_frame(), "a loop body")
    return _unflatten(spec, out)


def _loop_leaves(rec, values: tuple, names: tuple, cond_fn, body_fn, bounds):
    """Record a loop node: the condition and the body once each, over block arguments for
    the carried variables; then finish the loop eagerly so the call keeps eager's values."""
    where = user_frame()
    names = tuple(names) + tuple(f"carried {k}" for k in range(len(names), len(values)))
    values = list(values)
    kinds = []
    for k, v in enumerate(values):
        if isinstance(v, bool):
            values[k] = rec.size_value(v)
            kinds.append("tensor")
        elif isinstance(v, Tensor):
            kinds.append("tensor")
        elif lists.is_tracked(rec, v) or _list_like(v):
            lists.value_of(rec, v)
            kinds.append("list")
        elif _is_int(v):
            kinds.append("size")
        elif isinstance(v, Undefined):
            kinds.append("local")
        else:
            kinds.append("same")
    carried = [values[k] for k, kind in enumerate(kinds) if kind in ("tensor", "list")]
    carried_values = [rec.lists[id(x)] if kind == "list" else rec.value_of(x)
                      for x, kind in zip(values, kinds) if kind in ("tensor", "list")]
    size_syms = {k: rec.new_symbol(int(hint_of(values[k])))
                 for k, kind in enumerate(kinds) if kind == "size"}
    steps = range(*(int(hint_of(b)) for b in bounds)) if bounds else None
    index = rec.new_symbol(steps[0] if len(steps) else int(hint_of(bounds[0]))) \
        if bounds else None
    first, last = (_poly(bounds[0]), _poly(bounds[1] - 1)) if bounds else (None, None)
    inside_only = None  # a symbol known >= 0 only while the body is recorded
    if index is not None and type(bounds[2]) is int and bounds[2] == 1 and len(steps) and \
            first is not None and last is not None:
        # while the body is recorded, comparisons the index's range decides are no checks
        rec.ranges[index.source()] = (first, last)
        if decide(bounds[0], ">=", 0, rec.ranges, rec._nonneg):
            rec.nonneg.add(index.source())
            # the body runs only when the range is not empty: a stop that is one symbol
            # (plus a constant) is then at least the start, so >= 0 inside the body
            sym = plain_offset_symbol(last)
            if sym is not None and sym not in rec.nonneg and \
                    decide(bounds[0], ">=", 0, {}, rec._nonneg) and \
                    -last.get((), 0) >= _poly_const(first):
                inside_only = sym
                rec.nonneg.add(sym)

    def entry(scope):
        """The values the region's code starts from: block arguments and size symbols."""
        vals = list(values)
        for k, kind in enumerate(kinds):
            if kind == "tensor":
                arg = rec.block_arg(scope, values[k].dtype, rec.value_of(values[k]).shape,
                                    names[k])
                vals[k] = _alias(values[k])
                rec.bind(vals[k], arg, values[k])
                rec.entry_values[id(vals[k])] = arg
                if scope.graph.name == "body":
                    body_entry[k] = vals[k]
            elif kind == "list":
                v = rec.lists[id(values[k])]
                arg = rec.block_arg(scope, v.dtype, (), names[k])
                vals[k] = list(values[k])
                lists.bind(rec, vals[k], arg)
            elif kind == "size":
                vals[k] = size_syms[k]
        return vals

    body_entry: dict = {}  # position -> the body's name for a carried tensor
    regions, go = [], True
    if bounds is not None and not len(steps):
        go = False
    has_cond = cond_fn is not None
    if has_cond:
        scope = rec.open_scope("cond")
        try:
            c = cond_fn(*entry(scope))
            if go:
                go = _truth(c)
            scope.graph.outputs = [rec.local(rec.value_of(
                _predicate(c) if isinstance(c, Tensor) else rec.size_value(bool(c))))]
        finally:
            rec.close_scope(scope)
        regions.append(scope)
    scope = rec.open_scope("body")
    rec.dry += not go
    out = None
    try:
        vals = entry(scope)
        out = tuple(body_fn(index, *vals) if bounds else body_fn(*vals))
        _body_yields(rec, scope, kinds, values, out, names, where)
    except Exception as err:
        if go or isinstance(err, ScriptError) or (
                isinstance(err, DryPathAbort) and rec.dry > (not go)):
            raise  # (inside an enclosing path not taken too: that one stops as well)
        if not rec.aborted:
            _give_up(rec, f"the body of the loop at {where}, recorded without running (no "
                          f"iteration in this call), raised {type(err).__name__}: {err}")
    finally:
        rec.dry -= not go
        rec.close_scope(scope)
    regions.append(scope)
    if index is not None:
        rec.ranges.pop(index.source(), None)
        if inside_only is not None:
            rec.nonneg.discard(inside_only)
    if rec.aborted:  # the first iteration ran for real (if it ran): finish eagerly
        return _finish_eagerly(out if go else values, kinds, cond_fn, body_fn, bounds,
                               steps, 1 if go else None)
    updated = _updated_in_place(rec, [values[k] if k in body_entry else None
                                      for k in range(len(values))],
                                [[body_entry.get(k) for k in range(len(values))]], [out])
    if rec.aborted:
        return _finish_eagerly(out if go else values, kinds, cond_fn, body_fn, bounds,
                               steps, 1 if go else None)
    operands = _align(rec, regions, len(carried))
    attrs = {"index": index.source() if index is not None else None,
             "start": bounds[0] if bounds else None, "stop": bounds[1] if bounds else None,
             "step": bounds[2] if bounds else None, "n_carried": len(carried),
             "carried_sizes": [size_syms[k].source() for k in sorted(size_syms)],
             "sizes_init": [values[k] for k in sorted(size_syms)], "has_cond": has_cond}
    node = rec._add(LOOP, carried_values + operands, attrs,
                    [(v.dtype, v.shape) for v in carried_values], where,
                    regions=[s.graph for s in regions])
    final = _finish_eagerly(out, kinds, cond_fn, body_fn, bounds, steps, 1) if go else \
        list(values)
    results, outs = [], iter(node.outputs)
    for k, kind in enumerate(kinds):
        if k in updated:  # the same tensor, holding the loop's value from here on
            rec.commit_update(values[k], next(outs))
            results.append(values[k])
            continue
        if kind == "list":  # the same list object, holding the loop's elements
            values[k][:] = final[k]
            lists.bind(rec, values[k], next(outs))
            results.append(values[k])
            continue
        if kind == "tensor":
            t = _alias(final[k]) if isinstance(final[k], Tensor) else Tensor._make(
                np.array(final[k]))  # a bool flag the eager iterations set
            rec.bind(t, next(outs), _passed(rec, final[k], values[k]))
            results.append(t)
        elif kind == "size":
            results.append(SymInt.symbol(size_syms[k].source(), int(hint_of(final[k])), rec))
        elif kind == "local":
            results.append(Undefined(names[k], f"it is assigned inside the loop at {where} "
                                               "but not before it; script mode carries only "
                                               "variables defined before a loop (assign it "
                                               "a value of the type the loop gives it "
                                               "before the loop)"))
        else:
            results.append(values[k])
    return tuple(results)


def _body_yields(rec, scope, kinds, values, out, names, where) -> None:
    yields, sizes = [], []
    for k, (kind, x) in enumerate(zip(kinds, out)):
        if kind == "tensor":
            if isinstance(x, bool):
                x = rec.size_value(x)
            if not isinstance(x, Tensor):
                raise ScriptError(f"{where}: variable '{names[k]}' is a tensor before the "
                                  f"loop and {_describe(x)} after its body")
            v = rec.local(rec.value_of(x))
        elif kind == "list":
            if not lists.is_tracked(rec, x) and not _list_like(x):
                raise ScriptError(f"{where}: variable '{names[k]}' is a list before the loop "
                                  f"and {_describe(x)} after its body")
            # a list the body built again (`hs = [x]` then appends the body unrolled)
            # becomes a list value here, as the one before the loop did
            v = rec.local(lists.value_of(rec, x))
        if kind in ("tensor", "list"):
            start = scope.graph.inputs[len(yields)]
            if not unify(v, start):
                raise ScriptError(
                    f"{where}: variable '{names[k]}' changes type in the loop, from "
                    f"{_type(rec, start)} to {_type(rec, v)}; a loop must keep the types of the "
                    "variables it carries")
            yields.append(v)
        elif kind == "size":
            if not _is_int(x):
                raise ScriptError(f"{where}: variable '{names[k]}' is an int before the loop "
                                  f"and {_describe(x)} after its body")
            sizes.append(x)
        elif kind == "same" and not _same_python(x, values[k]):
            raise ScriptError(
                f"{where}: variable '{names[k]}' changes in the loop from "
                f"{_describe(values[k])} to {_describe(x)}; a loop recorded once for all "
                "its iterations carries tensors, ints and bools only")
    scope.graph.outputs = yields
    scope.graph.size_outputs = sizes


def _finish_eagerly(values, kinds, cond_fn, body_fn, bounds, steps, done):
    """The iterations after the first (`done` ran already), eagerly: eager's values."""
    values = [hint_of(v) if kind == "size" else v for v, kind in zip(values, kinds)]
    if done is None:
        return values
    with suspended():
        rest = iter(steps[done:]) if bounds else None
        while True:
            if bounds:
                i = next(rest, None)
                if i is None:
                    break
            if cond_fn is not None and not _truth(cond_fn(*values)):
                break
            values = list(body_fn(i, *values) if bounds else body_fn(*values))
    return values


# ---- the functional forms ---------------------------------------------------------------------
def cond(pred, true_fn, false_fn, *operands):
    """`true_fn(*operands)` if pred else `false_fn(*operands)`; traced or scripted, both
    branches are recorded and the choice is made when the program runs.

    >>> y = tj.cond(x.sum() > 0, lambda x: x * 2, lambda x: -x, x)
    """
    tupled = []

    def wrap(fn):
        def run():
            out = fn(*operands)
            tupled.append(isinstance(out, tuple))
            return out if isinstance(out, tuple) else (out,)
        return run

    out = if_(pred, wrap(true_fn), wrap(false_fn), (), ())
    return out if tupled and tupled[0] else out[0]


def while_loop(cond_fn, body_fn, carried):
    """`while cond_fn(*carried): carried = body_fn(*carried)`, returning the final values
    (a tuple, as PyTorch's `while_loop`). Traced or scripted, one loop node serves every
    trip count.

    >>> i, x = tj.while_loop(lambda i, x: x.sum() < 100, lambda i, x: (i + 1, x * 2),
    ...                      (tj.tensor(0), x))
    """
    single = not isinstance(carried, (tuple, list))
    values = (carried,) if single else tuple(carried)

    def body(*v):
        out = body_fn(*v)
        return (out,) if not isinstance(out, (tuple, list)) else tuple(out)

    out = while_(cond_fn, body, values, tuple(f"c{k}" for k in range(len(values))))
    return out[0] if single else tuple(out)
