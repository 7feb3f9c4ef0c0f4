"""The IR: graphs, symbolic sizes, printer and verifier."""
from .graph import GUARD, Graph, Node, Value
from ..core.symbolic import SymInt
from .verifier import VerificationError, verify

__all__ = ["Graph", "Node", "Value", "GUARD", "SymInt", "verify", "VerificationError"]
