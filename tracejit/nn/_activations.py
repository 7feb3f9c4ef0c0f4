"""The activations of `tj.nn.functional` beyond relu, leaky_relu, silu and gelu: each an op
of the table (fused, with PyTorch's gradients at its kinks) or a composition of them.
`inplace=True` writes the result into the input."""
from __future__ import annotations

from ..ops import OPS
from ..tensor import functional as F
from ..tensor.dispatch import apply, apply_inplace
from ..tensor.creation import rand

__all__ = ["elu", "elu_", "selu", "selu_", "celu", "celu_", "hardtanh", "hardtanh_", "relu6",
           "hardswish", "hardsigmoid", "softplus", "softsign", "mish", "logsigmoid", "prelu",
           "glu", "tanhshrink", "softshrink", "hardshrink", "threshold", "threshold_", "rrelu",
           "rrelu_"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _run(op, input, inplace: bool, **attrs):
    return apply_inplace(op, input, **attrs) if inplace else apply(op, input, **attrs)


def _bound(input, value):
    """A bound for `input`'s dtype: integer tensors take it truncated, as PyTorch's kernels
    convert a Scalar to the tensor's type."""
    return int(value) if input.dtype.category == 1 else float(value)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    F.require_floating("elu", input)
    return _run(OPS.elu, input, inplace, alpha=float(alpha))


def elu_(input, alpha: float = 1.0):
    return elu(input, alpha, True)


def selu(input, inplace: bool = False):
    """scale * elu(x, alpha) with the self-normalising constants."""
    F.require_floating("selu", input)
    return _run(OPS.elu, input, inplace, alpha=SELU_ALPHA, scale=SELU_SCALE)


def selu_(input):
    return selu(input, True)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    F.require_floating("celu", input)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu expected a non-zero alpha, found 0")
    return _run(OPS.elu, input, inplace, alpha=float(alpha), input_scale=1.0 / alpha)


def celu_(input, alpha: float = 1.0):
    return celu(input, alpha, True)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """input clamped to [min_val, max_val]; its gradient is 0 at both bounds."""
    if min_val > max_val:
        raise ValueError(f"min_val cannot be greater than max_val (found min_val={min_val}, "
                         f"max_val={max_val})")
    return _run(OPS.hardtanh, input, inplace, min_val=_bound(input, min_val),
                max_val=_bound(input, max_val))


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    return hardtanh(input, min_val, max_val, True)


def relu6(input, inplace: bool = False):
    """min(max(x, 0), 6): hardtanh(x, 0, 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardswish(input, inplace: bool = False):
    """x * relu6(x + 3) / 6."""
    F.require_floating("hardswish", input)
    return _run(OPS.hardswish, input, inplace)


def hardsigmoid(input, inplace: bool = False):
    """relu6(x + 3) / 6."""
    F.require_floating("hardsigmoid", input)
    return _run(OPS.hardsigmoid, input, inplace)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """log(1 + exp(beta * x)) / beta; x itself where beta * x > threshold."""
    F.require_floating("softplus", input)
    return apply(OPS.softplus, input, beta=float(beta), threshold=float(threshold))


def softsign(input):
    """x / (1 + |x|)."""
    return input / (F.abs(input) + 1)


def mish(input, inplace: bool = False):
    """x * tanh(softplus(x))."""
    F.require_floating("mish", input)
    if inplace:  # computed from a copy, whose value the product's gradient reads
        return F.copy_(input, mish(F.clone(input) if input.requires_grad else input))
    return input * F.tanh(softplus(input))


def logsigmoid(input):
    """log(sigmoid(x)), computed as min(x, 0) - log1p(exp(-|x|)) (no overflow)."""
    F.require_floating("log_sigmoid", input)
    return apply(OPS.logsigmoid, input)


def prelu(input, weight):
    """x for x > 0, weight * x otherwise; weight holds one slope, or one per channel
    (dimension 1 of input)."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.ndim}")
    n = weight.numel()
    if n == 1:
        slope = F.reshape(weight, ())
    else:
        if input.ndim == 0:
            raise RuntimeError(f"prelu: Not allow zero-dim input tensor with {n} parameters "
                               "(expected one parameter, or an input with channels)")
        channels = input.shape[1] if input.ndim >= 2 else 1
        if n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size: "
                               f"expected {channels} parameters (or 1), found {n}")
        slope = F.reshape(weight, (n,) + (1,) * (input.ndim - 2))
    return F.where(input > 0, input, slope * input)


def glu(input, dim: int = -1):
    """a * sigmoid(b), a and b the two halves of input along `dim`."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even "
                           "(expected a tensor of at least one dimension, found a 0-d one)")
    d = dim + input.ndim if dim < 0 else dim
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    half = size // 2
    return F.narrow(input, d, 0, half) * F.sigmoid(F.narrow(input, d, half, half))


def tanhshrink(input):
    """x - tanh(x)."""
    return input - F.tanh(input)


def softshrink(input, lambd: float = 0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    F.require_floating("softshrink", input)
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return apply(OPS.softshrink, input, lambd=float(lambd))


def hardshrink(input, lambd: float = 0.5):
    """x outside [-lambd, lambd], 0 inside."""
    F.require_floating("hardshrink", input)
    return apply(OPS.hardshrink, input, lambd=float(lambd))


def threshold(input, threshold: float, value: float, inplace: bool = False):
    """value where x <= threshold, x elsewhere."""
    return _run(OPS.threshold, input, inplace, threshold=_bound(input, threshold),
                value=_bound(input, value))


_threshold = threshold


def threshold_(input, threshold: float, value: float):
    return _threshold(input, threshold, value, True)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False):
    """Leaky relu with a random slope per negative element, uniform in [lower, upper]
    (drawn from tracejit's generator) while training; the mean slope otherwise."""
    F.require_floating("rrelu", input)
    if lower > upper:
        raise RuntimeError(f"Lower bound should be less than or equal to the upper bound "
                           f"(found lower={lower}, upper={upper})")
    if not training:
        slope = (lower + upper) / 2
        return F.leaky_relu_(input, slope) if inplace else F.leaky_relu(input, slope)
    slopes = rand(*input.shape, dtype=input.dtype, device=input.device.type) * (
        upper - lower) + lower
    out = F.where(input >= 0, input, input * slopes)
    return F.copy_(input, out) if inplace else out


def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False):
    return rrelu(input, lower, upper, training, True)
