"""Special functions libm lacks (or gets wrong at its poles), as plain Python over `math`:
the same source is the CPU kernels' Numba function (`*_cpu`), eager's numpy ufunc
(`ufunc(name)`) and, through `special_cuda.py`, a CUDA device function. PyTorch's
values at the edges: digamma(+-0) = -+inf, NaN at the negative integers; lgamma and
trigamma +inf at the poles; erfinv(+-1) = +-inf, NaN outside [-1, 1]."""
from __future__ import annotations

import math

import numba

_INF = math.inf
_NAN = math.nan
_A = 0.147  # the constant of Winitzki's approximation of erf's inverse


def lgamma(x):
    """log |Gamma(x)|: +inf at 0 and the negative integers (where Python's raises)."""
    if x <= 0.0 and x == math.floor(x):
        return _INF
    return math.lgamma(x)


def digamma(x):
    """Gamma'(x) / Gamma(x): the recurrence up to 10, then the asymptotic series."""
    if x != x or x == -_INF:
        return _NAN
    if x == _INF:
        return _INF
    if x == 0.0:
        return math.copysign(_INF, -x)
    shift = 0.0
    if x < 0.0:
        if x == math.floor(x):
            return _NAN
        # reflection: digamma(x) = digamma(1 - x) - pi / tan(pi x), tan of the fraction
        shift = -math.pi / math.tan(math.pi * (x - math.floor(x)))
        x = 1.0 - x
    while x < 10.0:
        shift -= 1.0 / x
        x += 1.0
    z = 1.0 / (x * x)
    series = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z / 132))))
    return shift + math.log(x) - 0.5 / x - series


def trigamma(x):
    """digamma's derivative: the recurrence up to 10, then the asymptotic series."""
    if x != x or x == -_INF:
        return _NAN
    if x == _INF:
        return 0.0
    sign = 1.0
    shift = 0.0
    if x <= 0.0:
        if x == math.floor(x):
            return _INF
        # reflection: trigamma(x) = -trigamma(1 - x) + pi^2 / sin^2(pi x)
        s = math.sin(math.pi * (x - math.floor(x)))
        shift = math.pi * math.pi / (s * s)
        sign = -1.0
        x = 1.0 - x
    acc = 0.0
    while x < 10.0:
        acc += 1.0 / (x * x)
        x += 1.0
    z = 1.0 / (x * x)
    series = 1.0 / x + 0.5 * z + (z / x) * (1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z / 30)))
    return shift + sign * (acc + series)


def erfinv(y):
    """The inverse of erf: Winitzki's approximation, then Halley's steps on erf."""
    if y != y or y < -1.0 or y > 1.0:
        return _NAN
    if y == 1.0:
        return _INF
    if y == -1.0:
        return -_INF
    w = math.log((1.0 - y) * (1.0 + y))
    t = 2.0 / (math.pi * _A) + 0.5 * w
    x = math.copysign(math.sqrt(math.sqrt(t * t - w / _A) - t), y)
    for _ in range(3):
        # erf(x) - y, in the tails through erfc (1 - y is exact there)
        if y > 0.5:
            f = (1.0 - y) - math.erfc(x)
        elif y < -0.5:
            f = math.erfc(-x) - (1.0 + y)
        else:
            f = math.erf(x) - y
        slope = 1.1283791670955126 * math.exp(-x * x)  # 2 / sqrt(pi) e^(-x^2)
        x -= f / (slope + x * f)
    return x


FUNCTIONS = {"lgamma": lgamma, "digamma": digamma, "trigamma": trigamma, "erfinv": erfinv}
lgamma_cpu, digamma_cpu, trigamma_cpu, erfinv_cpu = (
    numba.njit(fn) for fn in (lgamma, digamma, trigamma, erfinv))
CPU_NAMES = {name: f"{name}_cpu" for name in FUNCTIONS}
_UFUNCS: dict = {}


def ufunc(name: str):
    """A numpy ufunc (float32 and float64) of the function `name`, made on first use."""
    fn = _UFUNCS.get(name)
    if fn is None:
        fn = _UFUNCS[name] = numba.vectorize(["float32(float32)", "float64(float64)"])(
            FUNCTIONS[name])
    return fn
