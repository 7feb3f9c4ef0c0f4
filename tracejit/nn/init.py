"""Parameter initialisers with PyTorch's formulas (`kaiming_uniform_`, ...)."""
from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..ops.creation import GENERATOR


def _fans(t):
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity in ("linear", "conv1d", "conv2d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(t, a: float = 0.0, b: float = 1.0):
    with no_grad():
        t._data[...] = GENERATOR.rng.uniform(a, b, t.shape)
    return t


def normal_(t, mean: float = 0.0, std: float = 1.0):
    with no_grad():
        t._data[...] = GENERATOR.rng.normal(mean, std, t.shape)
    return t


def constant_(t, val: float):
    with no_grad():
        t._data[...] = val
    return t


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def kaiming_uniform_(t, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    fan_in, fan_out = _fans(t)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan_in if mode == "fan_in" else fan_out)
    return uniform_(t, -bound, bound)


def xavier_uniform_(t, gain: float = 1.0):
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, gain: float = 1.0):
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
