"""Script mode: control flow kept in the IR.

`control_flow` records branches and loops into regions (`tj.cond`, `tj.while_loop`);
`frontend` rewrites a function's source so its `if`/`while`/`for` go through those
helpers (`runtime` is what the rewritten code calls); `api` is `tj.script`.
"""
from .api import ScriptFunction, ScriptModule, script
from .control_flow import ScriptError, cond, while_loop

__all__ = ["ScriptError", "ScriptFunction", "ScriptModule", "cond", "script", "while_loop"]
