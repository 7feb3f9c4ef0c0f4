"""`tj.jit`: the JIT entry points (`tj.jit.trace` is `tj.trace`, `tj.jit.script` is
`tj.script`), `tj.jit.save`/`tj.jit.load` of compiled programs, and the background
compiler's controls (`wait_for_kernels`, `background_compile`; backends/background.py).

Script mode and saving are imported on first use (a process that only traces does not
pay for their modules at start-up)."""
import importlib

from .backends import background as _background
from .capture.trace import TracedFunction, TracedModule, trace

def wait_for_kernels(timeout: float | None = None) -> bool:
    """Block until every kernel being compiled in the background is compiled (the calls
    after it run compiled code): True, or False when `timeout` seconds passed first."""
    return _background.wait(timeout)


def background_compile(enabled: bool | None = True) -> None:
    """Whether kernels compile in a worker process while calls run on the interpreter
    (the default), or at their first call, the call waiting (False); None: as the
    environment variable TRACEJIT_BACKGROUND_COMPILE says ("0": off)."""
    _background.set_enabled(enabled)


_LAZY = {"script": "scripting", "ScriptFunction": "scripting", "ScriptModule": "scripting",
         "ScriptError": "scripting", "save": "capture.saving", "load": "capture.saving",
         "LoadedFunction": "capture.saving", "SaveError": "capture.saving"}
__all__ = ["trace", "TracedFunction", "TracedModule", "wait_for_kernels",
           "background_compile", *_LAZY]


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'tracejit.jit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tracejit.{where}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
