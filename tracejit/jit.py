"""`tj.jit`: the JIT entry points (`tj.jit.trace` is `tj.trace`, `tj.jit.script` is
`tj.script`), and `tj.jit.save`/`tj.jit.load` of compiled programs.

Script mode and saving are imported on first use (a process that only traces does not
pay for their modules at start-up)."""
from .capture.trace import TracedFunction, TracedModule, trace

_LAZY = {"script": "scripting", "ScriptFunction": "scripting", "ScriptModule": "scripting",
         "ScriptError": "scripting", "save": "capture.saving", "load": "capture.saving",
         "LoadedFunction": "capture.saving", "SaveError": "capture.saving"}
__all__ = ["trace", "TracedFunction", "TracedModule", *_LAZY]


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'tracejit.jit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"tracejit.{where}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
