"""`tj.jit`: the JIT entry points (`tj.jit.trace` is `tj.trace`)."""
from .capture.trace import TracedFunction, TracedModule, trace

__all__ = ["trace", "TracedFunction", "TracedModule"]
