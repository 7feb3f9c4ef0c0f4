"""`tj.jit`: the JIT entry points (`tj.jit.trace` is `tj.trace`, `tj.jit.script` is
`tj.script`)."""
from .capture.trace import TracedFunction, TracedModule, trace
from .scripting import ScriptError, ScriptFunction, ScriptModule, script

__all__ = ["trace", "script", "TracedFunction", "TracedModule", "ScriptFunction",
           "ScriptModule", "ScriptError"]
