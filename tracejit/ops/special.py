"""Special functions libm lacks (or gets wrong at its poles), as plain Python over `math`:
the ops' definition. The same source is the CPU kernels' Numba function (backends/special.py,
`*_cpu`), eager's loop over arrays (`ufunc(name)`, kept in the kernel cache) and a CUDA
device function (backends/cuda/special.py). PyTorch's values at the edges:
digamma(+-0) = -+inf, NaN at the negative integers; lgamma and trigamma +inf at the poles;
erfinv(+-1) = +-inf, NaN outside [-1, 1]."""
from __future__ import annotations

import math

import numpy as np

from ..core.config import default_backend
from ..core.lazy import lazy
from ..runtime.kernel_cache import load_module, record_compiled

numba = lazy("numba")  # (importing tracejit does not import Numba)

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
CPU_NAMES = {name: f"{name}_cpu" for name in FUNCTIONS}  # their Numba twins' names
_UFUNCS: dict = {}


def ufunc(name: str):
    """`f(x, out=None)` over float32 and float64 arrays for `name`, one of FUNCTIONS or a
    function of libm's that numpy lacks (erf, erfc), made on first use: the same scalar
    code either way, as a loop kept in the kernel cache where Numba is the default
    backend, else as a Numba ufunc compiled in the process."""
    fn = _UFUNCS.get(name)
    if fn is None:
        if default_backend() == "numba":
            fn = _cached_loop(name)
        else:
            fn = numba.vectorize(["float32(float32)", "float64(float64)"])(
                FUNCTIONS[name] if name in FUNCTIONS else _libm(getattr(math, name)))
        _UFUNCS[name] = fn
    return fn


def _libm(scalar):
    def kernel(v):
        return scalar(v)
    return kernel


def _cached_loop(name: str):
    """The loop is a module of the kernel cache, so a new process loads it compiled (a
    few ms) rather than compiling it again (0.15-0.3 s each: GELU's erf in every
    transformer's first step); a plain loop, not a Numba ufunc, whose wrapper would be
    built again at each load (85 ms)."""
    scalar = f"{CPU_NAMES[name]}(x[i])" if name in FUNCTIONS else f"math.{name}(x[i])"
    source = "\n".join([
        "import math", "import numba",
        "from tracejit.backends.special import " + ", ".join(CPU_NAMES.values()),
        "", "CACHE = __name__.startswith('tracejit_k_')", "", "",
        "@numba.njit(cache=CACHE, error_model='numpy')",
        f"def {name}(x, out):", "    for i in range(x.size):",
        f"        out[i] = {scalar}", ""])
    module = load_module(source, f"ufunc_{name}")
    loop, seen = getattr(module, name), set()

    def fn(x, out=None):
        x = np.asarray(x)
        flat = np.ascontiguousarray(x).reshape(-1)
        result = np.empty(x.shape, x.dtype)
        loop(flat, result.reshape(-1))
        if x.dtype not in seen:  # compiled or loaded: the manifest names its files
            seen.add(x.dtype)
            record_compiled(module)
        if out is None:
            return result
        out[...] = result
        return out
    fn.__name__, fn.loop = name, loop
    return fn
