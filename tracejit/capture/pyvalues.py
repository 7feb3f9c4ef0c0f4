"""Python values a traced program depends on besides its arguments: scalars in
its globals, closure cells and module attributes (compared by value), and the
tensors and modules it reaches there (compared by identity: a reassigned global
tensor or a swapped submodule is a different object). Each is snapshot at trace
time and checked on every call, so changing one never goes unnoticed.
"""
from __future__ import annotations

import types

SCALARS = (int, float, bool, str, type(None))


def _objects():
    from ..nn.module import Module
    from ..tensor.tensor import Tensor

    return Tensor, Module


def _code_objects(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


def function_reads(fn, depth: int = 3, seen=None) -> list:
    """[(description, getter, value)] for scalar globals and closure cells `fn` reads,
    following calls to other plain Python functions up to `depth` levels."""
    seen = set() if seen is None else seen
    fn = getattr(fn, "__func__", fn)
    if not isinstance(fn, types.FunctionType) or fn in seen or depth < 0:
        return []
    seen.add(fn)
    tensor, module = _objects()
    out = []
    g = fn.__globals__
    names = {n for code in _code_objects(fn.__code__) for n in code.co_names}
    for name in sorted(names):
        if name not in g:
            continue
        value = g[name]
        if isinstance(value, SCALARS + (tensor, module)):
            out.append((f"global {name} in {fn.__module__}", ("global", g, name), value))
            if isinstance(value, module):
                out += module_reads(value, f"{name}.")
        elif _holds_tensors(value, tensor, module):
            out.append((f"global {name} in {fn.__module__}", ("global", g, name), value))
            out += _element_reads(value, f"global {name}", tensor, module)
        elif isinstance(value, types.FunctionType):
            out += function_reads(value, depth - 1, seen)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, SCALARS + (tensor, module)):
                out.append((f"closure variable {name} of {fn.__qualname__}",
                            ("cell", cell, None), value))
                if isinstance(value, module):
                    out += module_reads(value, f"{name}.")
            elif _holds_tensors(value, tensor, module):
                out.append((f"closure variable {name} of {fn.__qualname__}",
                            ("cell", cell, None), value))
                out += _element_reads(value, f"closure variable {name}", tensor, module)
            elif isinstance(value, types.FunctionType):
                out += function_reads(value, depth - 1, seen)
    return out


def _holds_tensors(value, tensor, module) -> bool:
    """A list, tuple or dict with tensors or modules in it (a list of weights)."""
    items = value.values() if isinstance(value, dict) else value if isinstance(
        value, (list, tuple)) else ()
    return any(isinstance(v, (tensor, module)) for v in items)


def _element_reads(value, label: str, tensor, module) -> list:
    """Each element of a list/tuple/dict (by value or identity): replacing one is seen."""
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    out = []
    for key, v in pairs:
        if isinstance(v, SCALARS + (tensor, module)):
            out.append((f"{label}[{key!r}]", ("item", value, key), v))
            if isinstance(v, module):
                out += module_reads(v, f"{label}[{key!r}].")
    return out


def module_reads(module, label: str = "",
                 stores: tuple = ("_modules", "_parameters", "_buffers")) -> list:
    """Scalar attributes of a module and its submodules (`training` included), its plain
    tensor attributes and what `stores` hold (by identity). A traced module reads its own
    parameters anew at every call, so it guards only its submodules."""
    tensor, _ = _objects()
    out = []
    for prefix, m in module.named_modules():
        where = f"{label}{prefix}." if prefix else label
        for name, value in vars(m).items():
            if isinstance(value, SCALARS + (tensor,)) and not name.startswith("__"):
                out.append((f"module attribute {where}{name}", ("attr", m.__dict__, name),
                            value))
        for store in stores:
            for name, value in getattr(m, store).items():
                out.append((f"module attribute {where}{name}", ("attr", getattr(m, store),
                                                               name), value))
        out += function_reads(type(m).forward, depth=2)
    return out
