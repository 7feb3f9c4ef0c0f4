"""Parameter initialisers with PyTorch's formulas, fan computation and gains
(`kaiming_uniform_`, `xavier_normal_`, `orthogonal_`, ...). Each fills its tensor in place
without recording autograd history, draws from tracejit's generator (or `generator`), and
returns the tensor."""
from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import numpy as np

from ..core.modes import no_grad
from ..ops.creation import GENERATOR

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table): 1 for linear layers and
    sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope²)) for leaky_relu, 3/4
    for selu.

    >>> nn.init.calculate_gain("leaky_relu", 0.2)
    """
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(t) -> tuple[int, int]:
    """(fan_in, fan_out): dims 1 and 0 times the receptive field (the product of the rest)."""
    if t.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = math.prod(int(s) for s in t.shape[2:])
    return int(t.shape[1]) * receptive, int(t.shape[0]) * receptive


def _fan(t, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return fan_in if mode == "fan_in" else fan_out


def _rng(generator):
    return (generator or GENERATOR).rng


def _fill(t, values):
    with no_grad():
        t._data[...] = values
    return t


def _empty(t) -> bool:
    if 0 in tuple(t.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
        return True
    return False


def uniform_(t, a: float = 0.0, b: float = 1.0, generator=None):
    """Values drawn from U(a, b)."""
    return _fill(t, _rng(generator).uniform(a, b, tuple(t.shape)))


def normal_(t, mean: float = 0.0, std: float = 1.0, generator=None):
    """Values drawn from N(mean, std²)."""
    return _fill(t, _rng(generator).normal(mean, std, tuple(t.shape)))


def trunc_normal_(t, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None):
    """Values drawn from N(mean, std²) truncated to [a, b] (the inverse CDF of a uniform
    draw between the bounds' probabilities, as PyTorch does)."""
    dist = NormalDist()
    lo, hi = dist.cdf((a - mean) / std), dist.cdf((b - mean) / std)
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    u = _rng(generator).uniform(lo, hi, tuple(t.shape))
    eps = np.finfo(np.float64).eps
    z = np.vectorize(dist.inv_cdf, otypes=[np.float64])(np.clip(u, eps, 1 - eps))
    return _fill(t, np.clip(mean + std * z, a, b))


def constant_(t, val: float):
    return _fill(t, val)


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def eye_(t):
    """The identity matrix in a 2-D tensor (ones on the diagonal of a non-square one)."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(t, np.eye(*(int(s) for s in t.shape)))


def dirac_(t, groups: int = 1):
    """The identity of a convolution's weight [out, in, *kernel]: a 1 at the kernel's
    centre of each channel d, d (within each of `groups`), zeros elsewhere."""
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    shape = tuple(int(s) for s in t.shape)
    if shape[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = shape[0] // groups
    values = np.zeros(shape)
    centre = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for d in range(min(per_group, shape[1])):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(t, values)


def xavier_uniform_(t, gain: float = 1.0, generator=None):
    """U(-a, a) with a = gain sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t, gain: float = 1.0, generator=None):
    """N(0, std²) with std = gain sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(t, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None):
    """U(-b, b) with b = gain sqrt(3 / fan) (He et al.), the gain of `nonlinearity` (with
    negative slope `a`) and fan the `mode`'s.

    >>> nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5))
    """
    if _empty(t):
        return t
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode))
    return uniform_(t, -math.sqrt(3.0) * std, math.sqrt(3.0) * std, generator)


def kaiming_normal_(t, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None):
    """N(0, std²) with std = gain / sqrt(fan) (He et al.)."""
    if _empty(t):
        return t
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode))
    return normal_(t, 0.0, std, generator)


def orthogonal_(t, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix times `gain`, the trailing dims flattened: the Q of the
    QR decomposition of a normal draw, its columns' signs fixed by R's diagonal."""
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if t.numel() == 0:
        return t
    rows = int(t.shape[0])
    cols = t.numel() // rows
    flat = _rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(t, (gain * q).reshape(tuple(t.shape)))


def sparse_(t, sparsity: float, std: float = 0.01, generator=None):
    """A 2-D tensor drawn from N(0, std²) with ceil(sparsity * rows) zeros in each column,
    at random rows."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = (int(s) for s in t.shape)
    rng = _rng(generator)
    values = rng.normal(0.0, std, (rows, cols))
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):
        values[rng.permutation(rows)[:zeros], c] = 0
    return _fill(t, values)
