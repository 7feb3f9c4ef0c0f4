"""Python values a traced program depends on besides its arguments: scalars in
its globals, closure cells and module attributes (compared by value), the
tensors, modules, functions and other callables it reaches there (compared by
identity: a reassigned global tensor, a swapped submodule or a replaced helper
function is a different object; what a function runs is followed in turn), and the
contents of lists, tuples and dicts it reaches there, nested ones included (compared
as a whole: element by element, scalars by type and value, other objects by identity).
Each is snapshot at trace time and checked on every call, so changing one never goes
unnoticed.
"""
from __future__ import annotations

import functools
import math
import sys
import types

import numpy as np

from ..nn.module import Module
from ..tensor.tensor import Tensor
from ..core.lazy import lazy

_trace = lazy("tracejit.capture.trace")  # (it imports this module)

SCALARS = (int, float, bool, str, type(None))
CONTAINERS = (list, tuple, dict)
SETS = (set, frozenset)
_NEST = 8  # containers nested deeper than this are compared by identity only
# modules whose attributes are taken as fixed: the library's own, numpy's, the standard
# library's (their attributes read through a global, `np.pi` or `F.relu`, are not guarded)
_LIBRARIES = frozenset({"tracejit", "numpy", "numba", "torch", "scipy"}) | frozenset(
    getattr(sys, "stdlib_module_names", ()))


def _objects():
    return Tensor, Module


def _code_objects(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


_INSTALLED: dict = {}  # top-level module name -> whether it is an installed package


def _library(module_name) -> bool:
    """Whether a module is a library's (taken as fixed, its code not followed): ours,
    numpy's, the standard library's, or any package installed in site-packages (the
    test runner's assertion helpers, a progress bar); the user's own modules are not."""
    top = (module_name or "").split(".")[0]
    if top in _LIBRARIES:
        return True
    known = _INSTALLED.get(top)
    if known is None:
        path = getattr(sys.modules.get(top), "__file__", None) or ""
        known = _INSTALLED[top] = "site-packages" in path or "dist-packages" in path
    return known


class Contents:
    """What a list, tuple or dict held when traced, compared as a whole at each call
    (`same`): it may be changed in place, where its identity stays the same."""

    __slots__ = ("snapshot", "shown")

    def __init__(self, value):
        self.snapshot = _snapshot(value, _NEST)
        self.shown = _shown(value)


# the standard library's attribute bags, used as config objects (`args.lr`)
_NAMESPACES = frozenset({("types", "SimpleNamespace"), ("argparse", "Namespace")})


def plain_object(value) -> bool:
    """An object holding its state in attributes (a config object: an instance of a class
    of the user's, an argparse or SimpleNamespace): compared by identity and by what its
    attributes hold."""
    tensor, module = _objects()
    cls = type(value)
    return hasattr(value, "__dict__") and not isinstance(
        value, (type, types.ModuleType, tensor, module)) and not callable(value) and (
        not _library(cls.__module__) or (cls.__module__, cls.__name__) in _NAMESPACES)


def held_as_contents(value) -> bool:
    """A value guarded by what it holds (besides containers): a set, a numpy array or
    scalar, an object holding its state in attributes."""
    return type(value) in SETS or type(value) is np.ndarray or \
        isinstance(value, np.generic) or plain_object(value)


def _snapshot(value, nest: int):
    if type(value) in SCALARS or isinstance(value, np.generic):  # numpy scalars too
        return ("s", type(value), value)
    if type(value) in CONTAINERS and nest > 0:
        if type(value) is dict:
            return ("d", tuple(value), tuple(_snapshot(v, nest - 1) for v in value.values()))
        return ("c", type(value), tuple(_snapshot(v, nest - 1) for v in value))
    if type(value) in SETS:
        return ("set", type(value), frozenset(value))
    if type(value) is np.ndarray:  # its values: it may be written in place
        return ("a", value, value.copy())
    if nest > 0 and plain_object(value):
        return ("p", value, _snapshot(dict(vars(value)), nest - 1))
    return ("o", value)


def same_scalar(value, expected) -> bool:
    """`value` is `expected` as a guard must see it: the same type and value, NaN the same
    as NaN, and -0.0 apart from 0.0 (`x / s` is -inf for one, inf for the other)."""
    if type(value) is not type(expected):
        return False
    if value != value:
        return expected != expected
    return value == expected and (value != 0 or type(value) is not float or
                                  math.copysign(1.0, value) == math.copysign(1.0, expected))


def scalar_check(get: str, name: str, value) -> str:
    """Source of a guard that `get` is the scalar `value` (held by `name`): `==` where
    that is exact, the whole comparison of `same_scalar` for a float that is 0 or NaN."""
    if type(value) is float and (value == 0 or value != value):
        return f"SAME_SCALAR({get}, {name})"
    return f"type({get}) is type({name}) and {get} == {name}"


def same(value, snap) -> bool:
    """`value` holds what `snap` (a Contents snapshot) recorded: the same types, lengths,
    keys in the same order, equal scalars (NaN equal to NaN, -0.0 apart from 0.0),
    identical other objects."""
    tag = snap[0]
    if tag == "s":
        return same_scalar(value, snap[2])
    if tag == "o":
        return value is snap[1]
    if tag == "set":
        return type(value) is snap[1] and value == snap[2]
    if tag == "a":  # the same array, holding the same values (NaN where it was NaN)
        return value is snap[1] and np.array_equal(value, snap[2], equal_nan=value.dtype.kind
                                                   in "fc")
    if tag == "p":
        return value is snap[1] and same(dict(vars(value)), snap[2])
    if tag == "d":
        if type(value) is not dict or len(value) != len(snap[1]) or tuple(value) != snap[1]:
            return False
        return all(same(v, s) for v, s in zip(value.values(), snap[2]))
    if type(value) is not snap[1] or len(value) != len(snap[2]):
        return False
    return all(same(v, s) for v, s in zip(value, snap[2]))


def _shown(value) -> str:
    if type(value) is np.ndarray:
        text = f"ndarray{list(value.shape)} of {value.dtype}"
    elif plain_object(value):
        text = f"{type(value).__name__} object with attributes {sorted(vars(value))}"
    elif type(value) in CONTAINERS and _has_tensors(value):
        text = f"{type(value).__name__} of {len(value)}"
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _has_tensors(value) -> bool:
    tensor, module = _objects()
    items = value.values() if isinstance(value, dict) else value
    return any(isinstance(v, (tensor, module)) or (type(v) in CONTAINERS and _has_tensors(v))
               for v in items)


def function_reads(fn, depth: int = 3, seen=None) -> list:
    """[(description, getter, value)] for the globals and closure cells `fn` reads,
    following calls to other plain Python functions up to `depth` levels."""
    seen = set() if seen is None else seen
    fn = getattr(fn, "__func__", fn)
    if not isinstance(fn, types.FunctionType) or fn in seen or depth < 0:
        return []
    seen.add(fn)
    out = []
    g = fn.__globals__
    names = {n for code in _code_objects(fn.__code__) for n in code.co_names}
    for name in sorted(names):
        if name in g:
            out += value_reads(f"global {name} in {fn.__module__}", ("global", g, name),
                               g[name], names, depth, seen)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            out += value_reads(f"closure variable {name} of {fn.__qualname__}",
                               ("cell", cell, None), value, names, depth, seen)
    # defaults are read when an argument is left out; a mutable one can change in place
    for attr in ("__defaults__", "__kwdefaults__"):
        if getattr(fn, attr) and not _library(fn.__module__):
            out.append((f"{attr} of {fn.__qualname__}", ("getattr", fn, attr),
                        Contents(getattr(fn, attr))))
    return out


def value_reads(what: str, getter: tuple, value, names=(), depth: int = 3,
                seen=None) -> list:
    """The guards for one value a program reads through `getter`: a scalar by value; a
    tensor, module or function by identity (a module's attributes and a function's own
    reads follow); a container by its contents; a Python module of the user's by
    identity and the attributes among `names` (the names the reading code uses)."""
    tensor, module = _objects()
    if isinstance(value, SCALARS + (tensor, module)):
        out = [(what, getter, value)]
        if isinstance(value, module):
            out += module_reads(value, f"{what}.")
        return out
    if isinstance(value, types.FunctionType):
        # the function itself: replacing a helper after compiling is a miss, never the
        # old code; the library's own functions are taken as they are
        out = [(what, getter, value)]
        if not _library(value.__module__):
            out += function_reads(value, depth - 1, seen)
        return out
    if type(value) in CONTAINERS:
        return [(what, getter, Contents(value))] + _inside(value, what, depth, seen, _NEST)
    if held_as_contents(value):
        # a set, a numpy array or scalar, a config object: what it holds, compared as a
        # whole (an array's values, an object's attributes, nested ones included)
        return [(what, getter, Contents(value))]
    if callable(value) and not isinstance(value, types.ModuleType):
        # another callable (a traced or scripted function, a partial, a bound method, a
        # class): the same object, and what it runs reads in turn
        return [(what, getter, value)] + _callable_reads(value, what, depth, seen)
    if isinstance(value, types.ModuleType) and not _library(value.__name__):
        out = [(what, getter, value)]
        attrs = vars(value)
        for name in sorted(n for n in names if n in attrs):
            out += value_reads(f"{value.__name__}.{name}", ("attr", attrs, name), attrs[name],
                               (), depth, seen)
        return out
    return []


def _callable_reads(value, what: str, depth: int, seen) -> list:
    TracedFunction, TracedModule = _trace.TracedFunction, _trace.TracedModule
    _, module = _objects()
    if isinstance(value, TracedModule):
        return module_reads(value.module)
    if isinstance(value, TracedFunction):  # inlined into the trace that calls it
        return function_reads(value.fn, depth - 1, seen)
    if isinstance(value, functools.partial):
        return (value_reads(f"{what}.args", ("getattr", value, "args"), value.args) +
                value_reads(f"{what}.keywords", ("getattr", value, "keywords"),
                            value.keywords) +
                _callable_reads(value.func, f"{what}.func", depth, seen))
    if isinstance(value, types.MethodType):
        out = function_reads(value.__func__, depth - 1, seen)
        if isinstance(value.__self__, module):
            out += module_reads(value.__self__)
        return out
    if isinstance(value, types.FunctionType) and not _library(value.__module__):
        return function_reads(value, depth - 1, seen)
    return []


def _inside(value, label: str, depth: int, seen, nest: int) -> list:
    """What a container's modules and functions read in turn (their identity is part of
    the container's contents)."""
    tensor, module = _objects()
    out = []
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    for key, v in pairs:
        where = f"{label}[{key!r}]"
        if isinstance(v, module):
            out += module_reads(v, f"{where}.")
        elif isinstance(v, types.FunctionType) and not _library(v.__module__):
            out += function_reads(v, depth - 1, seen)
        elif type(v) in CONTAINERS and nest > 1:
            out += _inside(v, where, depth, seen, nest - 1)
    return out


def module_reads(module, label: str = "",
                 stores: tuple = ("_modules", "_parameters", "_buffers")) -> list:
    """Scalar attributes of a module and its submodules (`training` included), its plain
    tensor attributes and what `stores` hold (by identity), the contents of list, tuple
    and dict attributes, functions kept as attributes (by identity) and the `forward` of
    the user's module classes. A traced module reads its own parameters anew at every
    call, so it guards only its submodules."""
    tensor, _ = _objects()
    out = []
    seen: set = set()
    for prefix, m in module.named_modules():
        where = f"{label}{prefix}." if prefix else label
        for name, value in vars(m).items():
            if name.startswith("__"):
                continue
            what = f"module attribute {where}{name}"
            if isinstance(value, SCALARS + (tensor,)):
                out.append((what, ("attr", m.__dict__, name), value))
            elif type(value) in CONTAINERS:
                out.append((what, ("attr", m.__dict__, name), Contents(value)))
                out += _inside(value, what, 2, seen, _NEST)
            elif held_as_contents(value):
                out.append((what, ("attr", m.__dict__, name), Contents(value)))
            elif isinstance(value, (types.FunctionType, types.MethodType)):
                out.append((what, ("attr", m.__dict__, name), value))
                out += function_reads(value, 2, seen)
        for store in stores:
            for name, value in getattr(m, store).items():
                out.append((f"module attribute {where}{name}", ("attr", getattr(m, store),
                                                               name), value))
        forward = type(m).forward
        if not _library(type(m).__module__):
            out += _method_reads(type(m), m, seen)
            out += _class_attribute_reads(m, where)
        out += function_reads(forward, depth=2, seen=seen)
    return out


def _method_reads(cls, m, seen) -> list:
    """`forward` and the methods it calls (`self.helper(x)`, transitively) on a module
    class of the user's, by identity: a method replaced on the class is a miss."""
    out, todo, done = [], ["forward"], set()
    while todo:
        name = todo.pop()
        if name in done or name in vars(m):
            continue
        done.add(name)
        fn = getattr(cls, name, None)
        if not isinstance(fn, types.FunctionType):
            continue
        out.append((f"{cls.__qualname__}.{name}", ("getattr", cls, name), fn))
        if name != "forward":
            out += function_reads(fn, depth=2, seen=seen)
        todo += sorted({n for code in _code_objects(fn.__code__) for n in code.co_names})
    return out


def _class_attribute_reads(m, where: str) -> list:
    """Values a module of the user's class reads as `self.name` from its class (or the
    user's classes it derives from): read through the module, so that a changed class
    attribute and an instance attribute set later to shadow it are both seen."""
    out, done = [], set(vars(m))
    for cls in type(m).__mro__:
        if _library(cls.__module__):
            continue
        for name, value in vars(cls).items():
            if name in done or name.startswith("__"):
                continue
            done.add(name)
            getter = ("getattr", m, name)
            what = f"class attribute {where}{name} ({cls.__qualname__}.{name})"
            if type(value) in SCALARS:
                out.append((what, getter, value))
            elif type(value) in CONTAINERS or held_as_contents(value):
                out.append((what, getter, Contents(value)))
    return out
