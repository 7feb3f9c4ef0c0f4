"""`tj.linalg`: PyTorch's torch.linalg names that tracejit has."""
from __future__ import annotations

from .tensor.contraction import linalg_cross as cross
from .tensor.functional import matmul

__all__ = ["cross", "matmul"]
