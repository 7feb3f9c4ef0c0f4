"""`nn.Parameter`: a leaf tensor that modules register as trainable."""
from __future__ import annotations

from ..tensor.tensor import _copy_memory, _make, Tensor
from ..tensor.creation import tensor


class Parameter(Tensor):
    """A tensor that is a module parameter (requires grad by default)."""

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = tensor([])
        p = object.__new__(cls)
        src = _make(data._data)
        for slot in ("_data", "_rg", "grad_fn", "_vc", "_base", "_output_nr"):
            setattr(p, slot, getattr(src, slot))
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __deepcopy__(self, memo: dict) -> "Parameter":
        """A Parameter over a copy of the values, with the same requires_grad (its grad is
        not copied, as in PyTorch)."""
        if id(self) not in memo:
            memo[id(self)] = Parameter(_make(_copy_memory(self, memo)), self.requires_grad)
        return memo[id(self)]

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
