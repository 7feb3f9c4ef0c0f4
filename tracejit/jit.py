"""`tj.jit`: the JIT entry points (`tj.jit.trace` is `tj.trace`, `tj.jit.script` is
`tj.script`), and `tj.jit.save`/`tj.jit.load` of compiled programs."""
from .capture.saving import LoadedFunction, SaveError, load, save
from .capture.trace import TracedFunction, TracedModule, trace
from .scripting import ScriptError, ScriptFunction, ScriptModule, script

__all__ = ["trace", "script", "save", "load", "TracedFunction", "TracedModule",
           "ScriptFunction", "ScriptModule", "ScriptError", "LoadedFunction", "SaveError"]
