"""Script mode: control flow kept in the IR (`tj.cond`, `tj.while_loop`, `@tj.script`)."""
from .control_flow import ScriptError, cond, while_loop

__all__ = ["ScriptError", "cond", "while_loop"]
