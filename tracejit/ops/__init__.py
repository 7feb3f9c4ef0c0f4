"""The op table (`OPS`): every primitive tracejit knows, declared once.

Importing this package registers all entries; `tracejit.tensor.functional`
is bound into the modules whose vjp rules are written in tracejit ops.
"""
from . import (creation, elementwise, indexing, linalg, recurrent, reduction, scatter, shape,
               sorting, windows)
from .registry import AVal, OPS, OpDef, register

_RULE_MODULES = (elementwise, reduction, shape, indexing, linalg, windows, sorting, scatter,
                 recurrent)


def bind_frontend(functional) -> None:
    """Give vjp rules the tensor functions they are written in (called once at import)."""
    for module in _RULE_MODULES:
        module.F = functional


__all__ = ["AVal", "OPS", "OpDef", "register", "bind_frontend", "creation"]
