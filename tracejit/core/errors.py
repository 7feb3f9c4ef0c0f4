"""Exception types tracejit raises where PyTorch's and numpy's conventions differ."""
from __future__ import annotations


class ShapeError(RuntimeError, ValueError):
    """Shapes an op cannot combine (operands that do not broadcast, a product of
    mismatched matrices). PyTorch raises RuntimeError, which programs and tests catch;
    numpy raises ValueError, which code written against tracejit's earlier releases may
    catch: this is both."""


class ScriptError(RuntimeError):
    """What script mode cannot compile: names the construct, the file and the line."""
