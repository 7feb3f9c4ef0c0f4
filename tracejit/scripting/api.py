"""`tj.script`: a function or module compiled from its source, control flow included.

A scripted callable is a traced one whose function is the converted source: the first
call records the graph (branches and loops as regions), later calls run it; entry
guards, the trace tree, `.graph`, `.code`, `.explain()` are trace mode's. Arguments
annotated `int` are sizes bound when the program runs (never guarded), so every value
shares one compiled program.
"""
from __future__ import annotations

import inspect
import typing

from ..core.modes import STATE
from ..capture.trace import DEFAULT_BUDGET, LAZY, TracedFunction, TracedModule
from ..core.symbolic import SymInt
from ..tensor.tensor import Tensor
from .frontend import convert
from .runtime import _CONVERTED
from ..nn.module import Module
from ..tensor.creation import tensor


class _Scripted:
    """What scripted functions and modules share: running the converted code under the
    recorder in script mode, and the annotations' checks."""

    _made_by = "script"

    def _run_converted(self, fn, args, kwargs):
        rec = STATE.capture
        if rec is None:
            return self._run_original(args, kwargs)
        rec.script += 1
        try:
            args = [rec.read(a, "int") if k in self._int_params and isinstance(a, Tensor)
                    else a for k, a in enumerate(args)]
            return fn(*args, **kwargs)
        finally:
            rec.script -= 1

    def _prepare(self, args: tuple) -> tuple:
        """Check the annotated types; an `int` argument travels as a 0-d tensor so that
        its value is data of the program, not a guarded constant."""
        for k, check in self._checks:
            if k < len(args):
                check(args[k])
        if not self._int_params:
            return args
        # a size outside a recording (an eager iteration finishing a scripted loop) is the
        # int it stands for; inside one it is passed on as it is (the call is inlined)
        recording = STATE.capture is not None
        return tuple(tensor(a) if k in self._int_params and type(a) is int else
                     tensor(a.hint) if k in self._int_params and isinstance(a, SymInt) and
                     not recording else a for k, a in enumerate(args))

    def _python_args(self, args) -> list:
        """The arguments as the original function takes them (ints as ints)."""
        return [int(a) if k in self._int_params and isinstance(a, Tensor) else a
                for k, a in enumerate(args)]

    def __call__(self, *args, **kwargs):
        return super().__call__(*self._prepare(args), **kwargs)

    @property
    def source(self) -> str:
        """The converted source the recorder runs (helpers in place of control flow)."""
        return self.converted.__tj_source__


def _signature_checks(fn, skip_self: bool):
    """[(position, check)] for annotated parameters, and the positions annotated int."""
    try:
        hints = typing.get_type_hints(fn, localns={"Tensor": Tensor})
    except Exception:  # noqa: BLE001 — annotations that do not evaluate are not types
        hints = {}
    params = list(inspect.signature(fn).parameters.values())[1 if skip_self else 0:]
    checks, ints = [], set()
    for k, p in enumerate(params):
        if p.name not in hints or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        hint = hints[p.name]
        if hint is int:
            ints.add(k)
        checks.append((k, _checker(hint, p.name, fn.__qualname__)))
    return checks, ints


def _matches(value, hint) -> bool:
    origin = typing.get_origin(hint)
    if hint is typing.Any:
        return True
    if hint is float:  # (a size while recording is an int, too)
        return isinstance(value, (int, float, SymInt)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, (int, SymInt)) and not isinstance(value, bool) or (
            isinstance(value, Tensor) and value.ndim == 0 and value.dtype.name == "int64")
    if origin is typing.Union:
        return any(_matches(value, h) for h in typing.get_args(hint))
    if origin in (list, typing.List):
        (elem,) = typing.get_args(hint) or (typing.Any,)
        return isinstance(value, list) and all(_matches(v, elem) for v in value)
    if origin in (tuple, typing.Tuple):
        elems = typing.get_args(hint)
        if len(elems) == 2 and elems[1] is Ellipsis:
            return isinstance(value, tuple) and all(_matches(v, elems[0]) for v in value)
        return isinstance(value, tuple) and len(value) == len(elems) and all(
            _matches(v, h) for v, h in zip(value, elems))
    if origin in (dict, typing.Dict):
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _checker(hint, name: str, where: str):
    def check(value):
        if not _matches(value, hint):
            shown = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
            raise TypeError(f"{where}(): argument '{name}' is annotated {shown}, but the call "
                            f"passes {type(value).__name__}")
    return check


class ScriptFunction(_Scripted, TracedFunction):
    """A function compiled from its source by `tj.script`."""

    def __init__(self, fn, *, backend: str = "auto", budget: int = DEFAULT_BUDGET):
        self.original = fn
        self.converted = convert(fn, entry=True)  # the subset is checked now: ScriptError
        self._checks, self._int_params = _signature_checks(fn, skip_self=False)
        super().__init__(fn, LAZY, backend=backend, budget=budget,
                         name=getattr(fn, "__name__", "script"))

    def _call_eager(self, args, kwargs):
        return self._run_converted(self.converted, args, kwargs)

    def _run_original(self, args, kwargs):
        return self.original(*self._python_args(args), **kwargs)

    def __repr__(self) -> str:
        return f"<ScriptFunction {self.name}: {len(self.traces)} trace(s)>"


class ScriptModule(_Scripted, TracedModule):
    """A module whose forward (and every method and submodule it calls) is compiled
    from source by `tj.script`; parameters and buffers are graph inputs."""

    def __init__(self, module, *, backend: str = "auto", budget: int = DEFAULT_BUDGET):
        forward = type(module).forward
        self.converted = convert(forward, entry=True)
        _remember_converted(forward, self.converted)
        self._checks, self._int_params = _signature_checks(forward, skip_self=True)
        super().__init__(module, LAZY, backend=backend, budget=budget)

    def _call_eager(self, args, kwargs):
        return self._run_converted(self.converted.__get__(self.module), args, kwargs)

    def _run_original(self, args, kwargs):
        return self.module(*self._python_args(args), **kwargs)

    def __repr__(self) -> str:
        return f"<ScriptModule {self.name}: {len(self.traces)} trace(s)>"


def _remember_converted(fn, conv) -> None:
    """Calls of `fn` from scripted code (a submodule of the same class) reuse `conv`."""
    _CONVERTED[fn] = conv


def script(fn_or_module, *, backend: str = "auto", budget: int = DEFAULT_BUDGET):
    """Compile a function or module from its source, keeping its control flow.

    >>> @tj.script
    ... def f(x, n: int):
    ...     for i in range(n):
    ...         if x.sum() > 0:
    ...             x = x * 0.5
    ...     return x
    >>> f(tj.randn(4), 3); print(f.graph)
    """
    if isinstance(fn_or_module, (ScriptFunction, ScriptModule)):
        return fn_or_module
    if isinstance(fn_or_module, Module):
        return ScriptModule(fn_or_module, backend=backend, budget=budget)
    if not callable(fn_or_module) or not inspect.isfunction(fn_or_module):
        raise TypeError(f"tj.script expects a function defined with def or an nn.Module, "
                        f"got {type(fn_or_module).__name__}")
    return ScriptFunction(fn_or_module, backend=backend, budget=budget)


__all__ = ["script", "ScriptFunction", "ScriptModule"]
