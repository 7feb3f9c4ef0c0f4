"""The bilinear layer (PyTorch's nn.Bilinear and F.bilinear)."""
from __future__ import annotations

import math

from ..tensor.composite import composite
from ..tensor import functional as F
from ..tensor.creation import empty
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["bilinear"]


@composite(None, "input1", "input2", "weight", "bias", autocast="low")
def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum over i, j of input1[..., i] weight[o, i, j] input2[..., j] + bias[o].

    >>> F.bilinear(x1, x2, weight)   # x1 [*, I], x2 [*, J], weight [O, I, J]: [*, O]
    """
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional [out, in1, in2], got "
                           f"{list(weight.shape)}")
    o, i, j = weight.shape
    if input1.shape[-1] != i or input2.shape[-1] != j:
        raise RuntimeError(f"bilinear(): input sizes {list(input1.shape)} and "
                           f"{list(input2.shape)} do not match the weight's in1_features {i} "
                           f"and in2_features {j}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{list(input1.shape[:-1])} and {list(input2.shape[:-1])}")
    left = F.matmul(input1, F.reshape(F.permute(weight, (1, 0, 2)), (i, o * j)))  # [*, O*J]
    left = F.reshape(left, (*input1.shape[:-1], o, j))
    prod = left * F.unsqueeze(input2, -2)
    out = F.sum(prod, -1)
    if out.dtype is not prod.dtype:  # integers: PyTorch keeps their dtype
        out = F.cast(out, prod.dtype)
    return out if bias is None else out + bias


class Bilinear(Module):
    """y = x1 weight x2 + bias; weight [out, in1, in2] and bias [out] ~ U(-1/sqrt(in1),
    1/sqrt(in1)), as PyTorch initialises them."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
