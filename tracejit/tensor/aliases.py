"""PyTorch's NumPy-style keyword names: `axis=` for `dim=` and `keepdims=` for `keepdim=`,
which PyTorch's argument parser accepts for every op it binds natively (`x.sum(axis=0)`,
`torch.cat(ts, axis=1)`, `x.amax(axis=-1, keepdims=True)`).

One rule for the whole frontend: `install` wraps each `tj.NAME` function and `Tensor`
method with a `dim` (or `keepdim`) parameter and no alias of its own, so that the alias
is renamed before the call. A call without keywords pays one test.
"""
from __future__ import annotations

import functools
import types

ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))


def _parameters(fn) -> tuple:
    while hasattr(fn, "__wrapped__"):  # (the parameters of what a decorator wraps)
        fn = fn.__wrapped__
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def accepting_aliases(fn):
    """fn, or a wrapper of it renaming `axis=`/`keepdims=` to the parameters they alias."""
    params = _parameters(fn)
    renames = tuple((alias, name) for alias, name in ALIASES
                    if name in params and alias not in params)
    if not renames:
        return fn

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if kwargs:
            for alias, name in renames:
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {name!r} and its alias "
                                        f"{alias!r}")
                    kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)

    call.__tj_aliased__ = fn  # (what it wraps: the function that identity tests know)
    return call


def install(namespace: dict, cls: type) -> None:
    """Wrap the tracejit functions of a module namespace and the methods of `cls`."""
    for name, value in list(namespace.items()):
        if isinstance(value, types.FunctionType) and not name.startswith("_") and \
                value.__module__.startswith("tracejit."):
            namespace[name] = accepting_aliases(value)
    for name, value in list(vars(cls).items()):
        if isinstance(value, types.FunctionType) and not name.startswith("__"):
            wrapped = accepting_aliases(value)
            if wrapped is not value:
                setattr(cls, name, wrapped)
