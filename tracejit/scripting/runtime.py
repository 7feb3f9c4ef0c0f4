"""What converted (`@tj.script`) code calls: the branch and loop helpers, Python's
boolean operators on conditions, asserts and raises, and calls (which convert the
functions, methods and modules they reach, so their control flow is kept too)."""
from __future__ import annotations

import builtins
import collections
import io
import logging
import os
import sys
import types
import warnings
import weakref

from ..core.modes import STATE
from ..core.diagnostics import raise_at
from ..ir.graph import RAISE
from ..core.symbolic import SymInt, hint_of, is_dynamic
from ..tensor.dispatch import _PACKAGE_DIR, user_frame
from ..tensor.tensor import Tensor
from . import lists
from .frontend import convert
from .control_flow import ScriptError, Undefined, _predicate, for_each, for_range, if_, while_
from ..tensor.functional import logical_and, logical_not, logical_or
from ..tensor import functional as T
from ..nn.module import Module

__all__ = ["if_", "while_", "for_each", "range_", "ld", "not_", "and_", "or_", "ifexp",
           "assert_", "raise_", "call", "call_outer", "sub", "store", "store_outer", "slice_",
           "result"]


def _capturing() -> bool:
    return STATE.capture is not None


def ld(thunk, name: str):
    """The variable's value, or an Undefined if it is not assigned yet."""
    try:
        return thunk()
    except NameError:
        return Undefined(name, "it is not assigned before this point")


def result(value):
    """`return value`: a variable left undefined (assigned only inside a loop, or on one
    path of a branch) raises here, as any other use of it does."""
    for leaf in _containers(value):
        if isinstance(leaf, Undefined):
            raise UnboundLocalError(f"{user_frame()}: the function returns variable '{leaf.name}', "
                            f"which is not defined here: {leaf.why}")
    return value


def _containers(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _containers(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _containers(v)
    else:
        yield value


def range_(body_fn, cond_fn, values, names, range_obj, *args):
    if range_obj is not builtins.range:  # a name `range` of the user's: just iterate it
        return for_each(range_obj(*args), body_fn, cond_fn, values, names)
    args = [_as_size(a) for a in args]
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (
        (args[0], args[1], 1) if len(args) == 2 else tuple(args))
    return for_range(start, stop, step, body_fn, cond_fn, values, names)


def _as_size(x):
    if isinstance(x, Tensor) and STATE.capture is not None:
        return STATE.capture.read(x, "int")
    return x


def not_(x):
    if isinstance(x, Tensor) and _capturing():
        return logical_not(_predicate(x))
    return not x


def and_(*thunks):
    return _bool_op(thunks, stop_when=False)


def or_(*thunks):
    return _bool_op(thunks, stop_when=True)


def _bool_op(thunks, stop_when: bool):
    """`a and b` (stop_when False) / `a or b` (True) in a condition: Python's meaning on
    Python values (short-circuit included); on a tensor being recorded, a bool tensor."""
    combine = logical_or if stop_when else logical_and
    value = thunks[0]()
    for th in thunks[1:]:
        if isinstance(value, Tensor) and _capturing():
            other = th()
            if not isinstance(other, Tensor):
                if bool(other) == stop_when:
                    return other
                continue
            value = combine(_predicate(value), _predicate(other))
            continue
        if bool(value) == stop_when:
            return value
        value = th()
    return value


def ifexp(test, then_thunk, else_thunk):
    if isinstance(test, Tensor) and _capturing():
        return if_(test, lambda: (then_thunk(),), lambda: (else_thunk(),))[0]
    return then_thunk() if test else else_thunk()


def raise_(exc):
    """`raise exc`. On a path recorded but not taken it becomes a `raise` node, raised
    when a later call takes that path."""
    if isinstance(exc, type):
        exc = exc()
    rec = STATE.capture
    where, function = _user_site()
    if rec is not None and rec.dry:
        rec._add(RAISE, [], {"exc": exc, "function": function}, [], where)
        return
    raise_at(exc, where, function)


def assert_(test, msg_thunk):
    if isinstance(test, Tensor) and _capturing():
        def fail():
            raise_(AssertionError(msg_thunk()) if msg_thunk else AssertionError())
            return ()
        if_(not_(test), fail, lambda: ())
        return
    if not test:
        raise_(AssertionError(msg_thunk()) if msg_thunk else AssertionError())


def _user_site() -> tuple[str, str]:
    """(file:line, function name) of the innermost caller outside the tracejit package."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return "<unknown>", "<unknown>"
    where, owner = f"{f.f_code.co_filename}:{f.f_lineno}", f
    # the function is the user's (a branch's or loop body's generated function is not)
    while owner is not None and (owner.f_code.co_name.startswith("__tj_") or
                                 owner.f_code.co_filename.startswith(_PACKAGE_DIR)):
        owner = owner.f_back
    return where, owner.f_code.co_name if owner is not None else f.f_code.co_name


# ---- calls ---------------------------------------------------------------------------------------
_CONVERTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LIBRARY = "tracejit."
_LIBRARY_CONVERTED = ("tracejit.nn",)  # library code kept in the subset (layers, functional)


def converted(fn):
    """The converted twin of a Python function, or None to call it as it is (builtins,
    tracejit's own runtime, functions without source)."""
    if not isinstance(fn, types.FunctionType):
        return None
    # a composite's wrapper (autograd/composite.py) runs its composition while capturing,
    # after the autocast casts its category asks for
    if hasattr(fn, "composed"):
        inner = converted(fn.composed)
        return None if inner is None else fn.cast_entry(inner)
    hit = _CONVERTED.get(fn, _MISSING)
    if hit is not _MISSING:
        return hit
    module = fn.__module__ or ""
    library = module.startswith(_LIBRARY) or module == "tracejit"
    if library and not module.startswith(_LIBRARY_CONVERTED):
        result = None
    elif fn.__name__ == "<lambda>":
        result = None
    else:
        try:
            result = convert(fn)
        except ScriptError:
            if not library:
                raise
            result = None  # library code outside the subset runs as traced code
    _CONVERTED[fn] = result
    return result


_MISSING = object()


def store(target):
    """Before `target[index] = value` (or `target[index] op= value`): refuses an item
    assignment the graph would not see (an element of a list value)."""
    rec = STATE.capture
    if rec is not None and rec.lists:
        lists.refuse_store(rec, target, user_frame())


def store_outer(target):
    """Before `target[index] = value` on an object from outside the function (a global,
    an argument of the scripted function, self's attribute): a Python container changed
    so would change only while compiling, not at later calls."""
    rec = STATE.capture
    if rec is not None and rec.script and isinstance(target, _CONTAINERS):
        raise ScriptError(f"{user_frame()}: item assignment to a {type(target).__name__} from "
                          "outside the function (a parameter, self, a global); tj.script "
                          "would change it only while compiling, not at later calls: build "
                          "a new one inside the function and return it")
    store(target)


def sub(value, index):
    """`value[index]`: a list value's element, or Python's indexing."""
    rec = STATE.capture
    if rec is not None and lists.is_tracked(rec, value):
        return lists.get(rec, value, index)
    return value[index]


slice_ = builtins.slice


def call(f, *args, **kwargs):
    rec = STATE.capture
    if rec is None or not rec.script:
        return f(*args, **kwargs)
    if any(f is e for e in _EFFECTS) or _writes_outside(f):
        raise ScriptError(f"{user_frame()}: {_name_of(f)} has an effect outside the function "
                          "(output, input, a file, a log); tj.script would run it only while "
                          "compiling, not at later calls: call it outside the scripted "
                          "function")
    if rec.lists:
        hit = _list_call(rec, f, args, kwargs)
        if hit is not _MISSING:
            return hit
    if f is builtins.len and len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].shape[0]  # a size, not a guarded int
    if f is builtins.int and len(args) == 1 and isinstance(args[0], Tensor):
        return rec.read(args[0], "int")
    if f in (builtins.min, builtins.max) and len(args) > 1 and not kwargs and \
            any(is_dynamic(a) for a in args) and all(_is_size(a) for a in args):
        return _extremum(rec, f.__name__, args)
    target = _target(f)
    return (target or f)(*args, **kwargs)


def call_outer(f, *args, **kwargs):
    """A method call `obj.m(...)` on an object from outside the function (a parameter,
    self, a global): refused when it changes a Python container, which the graph would
    not see (the change would happen at the first call only)."""
    rec = STATE.capture
    owner = getattr(f, "__self__", None)
    if rec is not None and rec.script and isinstance(owner, _CONTAINERS):
        raise ScriptError(f"{user_frame()}: {type(owner).__name__}.{f.__name__} changes a "
                          f"{type(owner).__name__} from outside the function (a parameter, "
                          "self, a global); tj.script would change it only while compiling, "
                          "not at later calls: build a new one inside the function and "
                          "return it")
    return call(f, *args, **kwargs)


_CONTAINERS = (list, dict, set, bytearray, collections.deque)
_EFFECTS = frozenset({builtins.print, builtins.input, builtins.open, builtins.breakpoint,
                      warnings.warn, warnings.warn_explicit, os.system})


def _writes_outside(f) -> bool:
    """A method of a stream, a file or a logger (`sys.stdout.write`, `log.info`)."""
    owner = getattr(f, "__self__", None)
    return isinstance(owner, (io.IOBase, logging.Logger)) or (
        getattr(f, "__module__", None) == "logging" and callable(f))


def _name_of(f) -> str:
    owner = getattr(f, "__self__", None)
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", repr(f))
    return f"{type(owner).__name__}.{f.__name__}" if owner is not None and \
        not isinstance(owner, type(builtins)) else name


def _is_size(x) -> bool:
    return isinstance(x, SymInt) or (isinstance(x, int) and not isinstance(x, bool))


def _extremum(rec, name: str, args) -> SymInt:
    """min/max of sizes, one of them from data: a size computed when the program runs."""
    hint = builtins.min(hint_of(a) for a in args) if name == "min" else \
        builtins.max(hint_of(a) for a in args)
    parts = ", ".join(a.source() if isinstance(a, SymInt) else str(a) for a in args)
    return SymInt(hint, None, rec, f"{name}({parts})")


def _list_call(rec, f, args, kwargs):
    owner = getattr(f, "__self__", None)
    if type(owner) is list and lists.is_tracked(rec, owner):
        if f.__name__ == "append" and len(args) == 1:
            lists.append(rec, owner, args[0])
            return None
        raise ScriptError(f"{user_frame()}: list.{f.__name__} on a list that a loop or a "
                          "branch on a tensor builds is not supported by tj.script (append, "
                          "len, indexing, iteration, tj.stack and tj.cat are)")
    if f is builtins.len and len(args) == 1 and lists.is_tracked(rec, args[0]):
        return lists.length(rec, args[0])
    f = getattr(f, "__tj_aliased__", f)  # (tj.stack accepts axis=: tensor/aliases.py)
    if f in (T.stack, T.cat) and args and lists.is_tracked(rec, args[0]):
        dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis", 0))
        return lists.combine(rec, "stack" if f is T.stack else "cat", args[0], dim)
    return _MISSING


def _target(f):
    if isinstance(f, types.FunctionType):
        return converted(f)
    if isinstance(f, types.MethodType):
        fn = converted(f.__func__)
        return fn.__get__(f.__self__) if fn is not None else None
    if isinstance(f, Module):
        fn = converted(type(f).forward)
        return fn.__get__(f) if fn is not None else None
    return None
