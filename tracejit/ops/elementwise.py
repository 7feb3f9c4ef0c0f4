"""Elementwise primitives: numpy impl, dtype rule, vjp and scalar expression.

`expr` is what one element computes, in the scalar language of `ops/scalar.py` (the
operands are X, Y, Z); every code generator spells it its own way. vjp rules are written
in tracejit ops (module F).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes as dt
from .registry import AVal, COMPARE, ELEMENTWISE, FLOAT, LOGICAL, PROMOTE, register
from .rules import aval_of, broadcast_shapes, elementwise_dtypes, infer_elementwise
from .scalar import IDENTITY, X, Y, Z, call, eq, ne, select
from .special import ufunc

F = None  # tracejit.tensor.functional, bound by tracejit.ops once both are loaded


def needs_grad(x) -> bool:
    """Whether the gradient for input x is wanted (False for Python scalars)."""
    return getattr(x, "_rg", False)


def _rounded_once(fn):
    """An impl of several numpy steps, on float16/bfloat16 inputs computed in float32 and
    rounded once, as one op is (PyTorch's opmath; numpy's ufuncs already do so, and so
    do the generated kernels)."""
    def impl(x, *rest, **kw):
        d = getattr(x, "dtype", None)
        if d is not None and d.itemsize == 2 and d.kind in "fV":
            out = fn(x.astype(np.float32), *[r.astype(np.float32) if getattr(
                r, "dtype", None) == d else r for r in rest], **kw)
            return out.astype(d) if out.dtype == np.float32 else out
        return fn(x, *rest, **kw)
    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def _unary(name, impl, expr, vjp=None, rule=FLOAT, saves=(0,), save_out=False, **kw):
    if not isinstance(impl, np.ufunc):
        impl = _rounded_once(impl)
    return register(name, ELEMENTWISE, impl, infer_elementwise(name, rule), vjp,
                    saves=saves if not save_out else (), save_out=save_out, expr=expr,
                    dtype_rule=rule, arity=1, **kw)


def _binary(name, impl, expr, vjp=None, rule=PROMOTE, saves=(0, 1), save_out=False, **kw):
    if not isinstance(impl, np.ufunc):
        impl = _rounded_once(impl)
    return register(name, ELEMENTWISE, impl, infer_elementwise(name, rule), vjp,
                    saves=saves, save_out=save_out, expr=expr, dtype_rule=rule, arity=2, **kw)


def _sigmoid(x, out=None):
    r = np.asarray(np.multiply(x, 0.5, out=out))  # (a 0-d input gives a numpy scalar)
    r = np.tanh(r, out=r)
    r = np.multiply(r, 0.5, out=r)
    return np.add(r, 0.5, out=r)


def _relu(x, out=None):
    return np.maximum(x, 0, out=out)


def _leaky_relu(x, negative_slope=0.01, out=None):
    return np.where(x > 0, x, x * negative_slope)


def _rsqrt(x, out=None):
    r = np.asarray(np.sqrt(x, out=out))  # (a 0-d input gives a numpy scalar)
    return np.divide(1, r, out=r)


def _special(name: str):
    """The numpy impl of a special function or of a libm function numpy lacks: its Numba
    loop (ops/special.py), float16/bfloat16 in float32 and rounded back."""
    def impl(x, out=None):
        x = np.asarray(x)
        if x.dtype.itemsize == 2:
            return ufunc(name)(x.astype(np.float32)).astype(x.dtype)
        return ufunc(name)(x, out=out) if out is not None else ufunc(name)(x)
    impl.__name__ = name
    return impl


def _clamp(x, min=None, max=None, out=None):
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if min is None:
        return np.minimum(x, max, out=out)
    if max is None:
        return np.maximum(x, min, out=out)
    if x.dtype.kind == "V":  # bfloat16: np.clip takes its Python bounds as float32
        return np.minimum(np.maximum(x, min), max, out=out)
    return np.clip(x, min, max, out=out)


def _inside(x, lo, hi):
    """Mask of elements clamp passes through unchanged (where its gradient is 1)."""
    if lo is None:
        return x <= hi
    if hi is None:
        return x >= lo
    return (x >= lo) & (x <= hi)


def _cast(x, dtype, out=None):
    if type(x) is np.ndarray and (x.dtype.kind == "V" or dtype.np.kind == "V"):
        # bfloat16 to and from float32 through the bits (core/dtypes.py: 1.6-3x faster
        # than ml_dtypes' astype, the same numbers)
        if x.dtype.kind == "V" and dtype.np == np.float32:
            return dt.as_float32(x)
        if x.dtype == np.float32 and dtype.np.kind == "V":
            return dt.rounded_from_float32(x, dtype.np)
    return x.astype(dtype.np)


def _infer_cast(x, dtype):
    return AVal(aval_of(x).shape, dtype)


def _clamp_expr(min=None, max=None):
    """clamp's element: NaN passes through; with min > max every element is max (as
    PyTorch and np.clip)."""
    e = X
    if min is not None:
        e = select(e < min, min, e)
    if max is not None:
        e = select(e > max, max, e)
    return e


def _infer_clamp(x, min=None, max=None):
    a = aval_of(x)
    bounds = [v for v in (min, max) if v is not None]
    return AVal(a.shape, infer_elementwise("clamp", PROMOTE)(x, *bounds).dtype)


def _where(cond, a, b, out=None):
    # Python numbers take the dtype the rule gives them, where np.where would not: beside
    # a bfloat16 array it takes one as float32 (ml_dtypes has no weak scalars there), and
    # two floats are float64 to it (PyTorch's default dtype, float32, to the rule)
    a_array, b_array = type(a) is np.ndarray, type(b) is np.ndarray
    if b_array and not a_array and b.dtype.kind == "V":
        a = np.asarray(a, b.dtype)
    elif a_array and not b_array and a.dtype.kind == "V":
        b = np.asarray(b, a.dtype)
    elif not (a_array or b_array) and (type(a) is float or type(b) is float):
        a, b = np.asarray(a, dt.default_float.np), np.asarray(b, dt.default_float.np)
    return np.where(cond, a, b)


def _infer_where(cond, a, b):
    shape = broadcast_shapes("where", aval_of(cond).shape, aval_of(a).shape, aval_of(b).shape)
    return AVal(shape, elementwise_dtypes(PROMOTE, (a, b))[1])


# ---- unary -------------------------------------------------------------------------------
_unary("neg", np.negative, -X, lambda g, out, x: (-g,), rule=PROMOTE, saves=(),
       meta_inputs=False, involution=True)
_unary("abs", np.abs, call("abs", X), lambda g, out, x: (g * F.sign(x),), rule=PROMOTE)
_unary("exp", np.exp, call("exp", X), lambda g, out, x: (g * out,), save_out=True,
       meta_inputs=False, autocast="fp32 cuda")
_unary("log", np.log, call("log", X), lambda g, out, x: (g / x,), autocast="fp32 cuda")
_unary("log1p", np.log1p, call("log1p", X), lambda g, out, x: (g / (x + 1),),
       autocast="fp32 cuda")
_unary("sqrt", np.sqrt, call("sqrt", X), lambda g, out, x: (g / (out * 2),), save_out=True,
       meta_inputs=False)
_unary("rsqrt", _rsqrt, 1 / call("sqrt", X),
       lambda g, out, x: (g * (out * out * out) * -0.5,), save_out=True, meta_inputs=False,
       autocast="fp32 cuda")
_unary("sin", np.sin, call("sin", X), lambda g, out, x: (g * F.cos(x),))
_unary("cos", np.cos, call("cos", X), lambda g, out, x: (-(g * F.sin(x)),))
_unary("tanh", np.tanh, call("tanh", X), lambda g, out, x: (F.tanh_backward(g, out),),
       save_out=True, meta_inputs=False)
_unary("sigmoid", _sigmoid, 0.5 * call("tanh", 0.5 * X) + 0.5,
       lambda g, out, x: (F.sigmoid_backward(g, out),), save_out=True, meta_inputs=False)
_unary("relu", _relu, call("max", X, 0), lambda g, out, x: (F.threshold_backward(g, out),),
       rule=PROMOTE, save_out=True, meta_inputs=False)
_unary("leaky_relu", _leaky_relu,
       lambda negative_slope=0.01: select(X > 0, X, X * negative_slope),
       lambda g, out, x, negative_slope=0.01: (F.where(x > 0, g, g * negative_slope),),
       rule=PROMOTE)
_unary("erf", _special("erf"), call("erf", X),
       lambda g, out, x: (g * F.exp(-(x * x)) * (2 / math.sqrt(math.pi)),))
def _sign(x):
    """PyTorch's sign: 0 for NaN (numpy's gives NaN), as the kernels' expression does."""
    return ((x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)) if x.dtype.kind != "b" else \
        x.copy()


_unary("sign", _sign, select(X > 0, 1, select(X < 0, -1, 0)), lambda g, out, x: (g * 0,),
       rule=PROMOTE, saves=(), meta_inputs=False, discontinuous=True)
_unary("floor", np.floor, call("floor", X), lambda g, out, x: (g * 0,), rule=PROMOTE,
       saves=(), meta_inputs=False, discontinuous=True)
_unary("logical_not", np.logical_not, call("not", X), rule=LOGICAL, saves=())
_unary("isnan", np.isnan, call("isnan", X), rule=COMPARE, saves=())
_unary("isfinite", np.isfinite, call("isfinite", X), rule=COMPARE, saves=())
# ---- ops the frontend makes from the table alone (tj.NAME, Tensor.NAME, Tensor.NAME_) -----
API = ("function", "method", "inplace")
_LN2, _LN10 = math.log(2.0), math.log(10.0)
_unary("tan", np.tan, call("tan", X), lambda g, out, x: (g * (out * out + 1),),
       save_out=True, meta_inputs=False, autocast="fp32 cuda", api=API)
_unary("asin", np.arcsin, call("asin", X), lambda g, out, x: (g * F.rsqrt(1 - x * x),),
       autocast="fp32 cuda", api=API)
_unary("acos", np.arccos, call("acos", X), lambda g, out, x: (-(g * F.rsqrt(1 - x * x)),),
       autocast="fp32 cuda", api=API)
_unary("atan", np.arctan, call("atan", X), lambda g, out, x: (g / (x * x + 1),), api=API)
_unary("sinh", np.sinh, call("sinh", X), lambda g, out, x: (g * F.cosh(x),),
       autocast="fp32 cuda", api=API)
_unary("cosh", np.cosh, call("cosh", X), lambda g, out, x: (g * F.sinh(x),),
       autocast="fp32 cuda", api=API)
_unary("asinh", np.arcsinh, call("asinh", X), lambda g, out, x: (g * F.rsqrt(x * x + 1),),
       api=API)
_unary("acosh", np.arccosh, call("acosh", X), lambda g, out, x: (g * F.rsqrt(x * x - 1),),
       api=API)
_unary("atanh", np.arctanh, call("atanh", X), lambda g, out, x: (g / (1 - x * x),), api=API)
_unary("exp2", np.exp2, call("exp2", X), lambda g, out, x: (g * out * _LN2,), save_out=True,
       meta_inputs=False, api=API)
_unary("expm1", np.expm1, call("expm1", X), lambda g, out, x: (g * (out + 1),),
       save_out=True, meta_inputs=False, autocast="fp32 cuda", api=API)
_unary("log2", np.log2, call("log2", X), lambda g, out, x: (g / (x * _LN2),),
       autocast="fp32 cuda", api=API)
_unary("log10", np.log10, call("log10", X), lambda g, out, x: (g / (x * _LN10),),
       autocast="fp32 cuda", api=API)
def _rounding(ufunc):
    """trunc/ceil/round: integers and bools are their own result (numpy's would return
    float64 and lose digits above 2**53)."""
    def impl(x, out=None):
        return x.copy() if x.dtype.kind in "biu" else ufunc(x, out=out)
    impl.__name__ = ufunc.__name__
    return impl


for _name, _impl in (("trunc", _rounding(np.trunc)), ("ceil", _rounding(np.ceil)),
                     ("round", _rounding(np.rint))):
    _unary(_name, _impl, call(_name, X), lambda g, out, x: (g * 0,), rule=PROMOTE, saves=(),
           meta_inputs=False, discontinuous=True, api=API)
_unary("isinf", np.isinf, call("isinf", X), rule=COMPARE, saves=(), api=API[:2])
_unary("signbit", np.signbit, call("copysign", 1.0, X) < 0, rule=COMPARE, saves=(),
       api=API[:2])
_binary("copysign", np.copysign, call("copysign", X, Y),
        lambda g, out, x, y: (g * F.where(x == 0, 0, out / x) if needs_grad(x) else None,
                              g * 0 if needs_grad(y) else None),
        rule=FLOAT, save_out=True, saves=(0,), api=API)
_binary("fmod", np.fmod, call("fmod", X, Y),
        lambda g, out, x, y: (g, -g * F.trunc(x / y) if needs_grad(y) else None),
        discontinuous=True, scalar_edges=False, api=API)
_binary("hypot", np.hypot, call("hypot", X, Y),
        lambda g, out, x, y: (g * x / out if needs_grad(x) else None,
                              g * y / out if needs_grad(y) else None),
        rule=FLOAT, save_out=True, api=API)
_binary("logaddexp", np.logaddexp,
        select(eq(X, Y), X + _LN2, call("max", X, Y) + call("log1p", call(
            "exp", -call("abs", X - Y)))),
        lambda g, out, x, y: (g * F.exp(x - out) if needs_grad(x) else None,
                              g * F.exp(y - out) if needs_grad(y) else None),
        rule=FLOAT, save_out=True, api=API)

register("clamp", ELEMENTWISE, _clamp, _infer_clamp,
         lambda g, out, x, min=None, max=None: (F.where(_inside(x, min, max), g, 0),),
         saves=(0,), expr=_clamp_expr, dtype_rule=PROMOTE, arity=1, promote_attrs=("min", "max"),
         grad_name="ClampBackward1")
register("cast", ELEMENTWISE, _cast, _infer_cast,
         lambda g, out, x, dtype: (F.cast(g, x.dtype),), saves=(), expr=IDENTITY,
         dtype_rule="cast", arity=1, grad_name="ToCopyBackward0", noop="same_type")

# ---- binary ------------------------------------------------------------------------------
_binary("add", np.add, X + Y, lambda g, out, x, y: (g, g), saves=(), meta_inputs=False,
        right_identity=0, left_identity=0)
_binary("sub", np.subtract, X - Y,
        lambda g, out, x, y: (g, -g if needs_grad(y) else None), saves=(), right_identity=0)
_binary("mul", np.multiply, X * Y,
        lambda g, out, x, y: (g * y if needs_grad(x) else None,
                              g * x if needs_grad(y) else None), save_when={0: (1,), 1: (0,)},
        right_identity=1, left_identity=1)
_binary("div", np.true_divide, X / Y,
        lambda g, out, x, y: (g / y if needs_grad(x) else None,
                              -(g * x) / (y * y) if needs_grad(y) else None), rule=FLOAT,
        save_when={0: (1,), 1: (0, 1)}, right_identity=1)


def _log_of_number(v: float) -> float:
    return math.log(v) if v > 0 else -math.inf if v == 0 else math.nan


def _pow_vjp(g, out, x, y):
    """PyTorch's: no gradient for the base where the exponent is 0 (0 ** 0, inf ** 0);
    for the exponent, 0 where the base is 0 and the exponent >= 0, and log(base) (NaN for
    a negative base, -inf at 0) elsewhere."""
    gx = gy = None
    if needs_grad(x):
        if isinstance(y, (int, float)):
            gx = g * 0 if y == 0 else g * y * F.pow(x, y - 1)
        else:
            gx = F.where(y == 0, 0, g * y * F.pow(x, y - 1))
    if needs_grad(y):
        if isinstance(x, (int, float)):
            gy = g * out * _log_of_number(x)
            if x == 0:
                gy = F.where(y >= 0, 0, gy)
        else:
            gy = F.where((x == 0) & (y >= 0), 0, g * out * F.log(x))
    return gx, gy


def _pow(x, y, out=None):
    """numpy's power; integers to negative integer powers as PyTorch's (and the kernels')
    for an integer tensor exponent: 1 for a base of 1, +-1 for -1, else 0."""
    try:
        return np.power(x, y) if out is None else np.power(x, y, out=out)
    except ValueError:  # numpy refuses negative integer powers
        if not isinstance(y, np.ndarray):
            raise RuntimeError("Integers to negative integer powers are not allowed (expected "
                               f"an exponent >= 0, found {y})") from None
    base, exponent = np.asarray(x), np.asarray(y)
    d = np.result_type(x, y)
    negative = exponent < 0
    r = np.power(base, np.where(negative, 0, exponent))
    unit = np.where(base == 1, 1, np.where(base == -1, np.where(exponent % 2 == 0, 1, -1), 0))
    return np.where(negative, unit, r).astype(d)


_binary("pow", _pow, X ** Y, _pow_vjp, save_out=True,
        save_when={0: (0, 1), 1: (0, 1)}, right_identity=1, scalar_edges=False,
        autocast="fp32 cuda")


def _extremum_split(loses):
    """maximum's and minimum's gradient as PyTorch's: half to each side at a tie, all of
    it to both where a NaN makes them incomparable."""
    def vjp(g, out, x, y):
        h = F.where(x == y, g / 2, g)
        return (F.where(loses(x, y), 0, h) if needs_grad(x) else None,
                F.where(loses(y, x), 0, h) if needs_grad(y) else None)
    return vjp


_binary("maximum", np.maximum, call("max", X, Y), _extremum_split(lambda a, b: a < b))
_binary("minimum", np.minimum, call("min", X, Y), _extremum_split(lambda a, b: a > b))
_binary("floor_divide", np.floor_divide, X // Y, saves=())
_binary("remainder", np.remainder, X % Y, saves=(), discontinuous=True,
        scalar_edges=False)
for _name, _ufunc in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)):
    _binary(_name, _ufunc, call(_name, X, Y), rule=COMPARE, saves=())
for _name, _ufunc in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                      ("logical_xor", np.logical_xor)):
    _binary(_name, _ufunc, call(_name[len("logical_"):], X, Y), rule=LOGICAL, saves=())


def _binary_cross_entropy(x, t, out=None):
    """PyTorch's elementwise loss: each log clamped at -100, so that 0 and 1 give finite
    losses."""
    return (t - 1) * np.maximum(np.log1p(-x), -100) - t * np.maximum(np.log(x), -100)


def _binary_cross_entropy_vjp(g, out, x, t):
    """PyTorch's gradients: for the input (x - t) / max(x (1 - x), 1e-12), finite where a
    log is clamped (a saturated sigmoid gives 0 or 1); for the target -logit(x)."""
    gx = g * (x - t) / F.clamp((1 - x) * x, min=1e-12) if needs_grad(x) else None
    gt = g * (F.log1p(-x) - F.log(x)) if needs_grad(t) else None
    return gx, gt


_binary("binary_cross_entropy", _binary_cross_entropy,
        (Y - 1) * call("max", call("log1p", -X), -100) - Y * call("max", call("log", X), -100),
        _binary_cross_entropy_vjp, rule=FLOAT)

# Gradients of activations as single primitives (as PyTorch's tanh_backward etc.): one
# dispatch in eager backward instead of three, and one fused expression for codegen.
_binary("tanh_backward", lambda g, y: g * (1 - y * y), X * (1 - Y * Y),
        lambda gg, out, g, y: (F.tanh_backward(gg, y),
                               gg * g * y * -2 if needs_grad(y) else None), rule=FLOAT)
_binary("sigmoid_backward", lambda g, y: g * (y * (1 - y)), X * (Y * (1 - Y)),
        lambda gg, out, g, y: (F.sigmoid_backward(gg, y),
                               gg * g * (1 - 2 * y) if needs_grad(y) else None), rule=FLOAT)
_binary("threshold_backward", lambda g, y: np.where(y > 0, g, np.zeros((), g.dtype)),
        select(Y > 0, X, 0),
        lambda gg, out, g, y: (F.threshold_backward(gg, y), None), rule=PROMOTE,
        discontinuous=True)


# ---- of three operands -------------------------------------------------------------------
def _lerp(x, y, w, out=None):
    """PyTorch's two forms: from the nearer end, for accuracy near either weight."""
    return np.where(np.abs(w) < 0.5, x + w * (y - x), y - (y - x) * (1 - w))


register("lerp", ELEMENTWISE, _rounded_once(_lerp), infer_elementwise("lerp", PROMOTE),
         lambda g, out, x, y, w: (g * (1 - w) if needs_grad(x) else None,
                                  g * w if needs_grad(y) else None,
                                  g * (y - x) if needs_grad(w) else None),
         saves=(0, 1, 2), save_when={0: (2,), 1: (2,), 2: (0, 1)},
         expr=select(call("abs", Z) < 0.5, X + Z * (Y - X), Y - (Y - X) * (1 - Z)),
         dtype_rule=PROMOTE, arity=3, scalar_edges=False)
register("where", ELEMENTWISE, _where, _infer_where,
         lambda g, out, c, a, b: (None, F.where(c, g, 0) if needs_grad(a) else None,
                                  F.where(c, 0, g) if needs_grad(b) else None),
         saves=(0,), expr=select(X, Y, Z), dtype_rule="where", arity=3,
         grad_inputs=(1, 2))


# ---- activations (PyTorch's forms, and its gradients at the kinks) ---------------------------
def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0, out=None):
    return np.where(x > 0, x * scale, np.expm1(x * input_scale) * (alpha * scale))


def _elu_vjp(g, out, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """PyTorch's: the negative side's slope at 0 (alpha * scale * input_scale)."""
    return (F.where(x <= 0, g * F.exp(x * input_scale) * (alpha * scale * input_scale),
                    g * scale),)


_unary("elu", _elu,
       lambda alpha=1.0, scale=1.0, input_scale=1.0: select(
           X > 0, X * scale, call("expm1", X * input_scale) * (alpha * scale)),
       _elu_vjp, rule=PROMOTE)


def _hardtanh(x, min_val=-1.0, max_val=1.0, out=None):
    return np.where(x < min_val, min_val, np.where(x > max_val, max_val, x)).astype(x.dtype)


_unary("hardtanh", _hardtanh, lambda min_val=-1.0, max_val=1.0: _clamp_expr(min_val, max_val),
       lambda g, out, x, min_val=-1.0, max_val=1.0: (
           F.where((x <= min_val) | (x >= max_val), 0, g),),
       rule=PROMOTE)


def _hardswish(x, out=None):
    return x * np.minimum(np.maximum(x + 3, 0), 6) / 6


_unary("hardswish", _hardswish, X * call("min", call("max", X + 3, 0), 6) / 6,
       lambda g, out, x: (F.where(x <= -3, 0, F.where(x < 3, g * (x / 3 + 0.5), g)),),
       rule=PROMOTE)


def _hardsigmoid(x, out=None):
    return np.minimum(np.maximum(x + 3, 0), 6) / 6


_unary("hardsigmoid", _hardsigmoid, call("min", call("max", X + 3, 0), 6) / 6,
       lambda g, out, x: (F.where((x > -3) & (x < 3), g / 6, 0),), rule=PROMOTE)


def _softplus(x, beta=1.0, threshold=20.0, out=None):
    xb = x * beta
    return np.where(xb > threshold, x, np.log1p(np.exp(xb)) / beta)


def _softplus_vjp(g, out, x, beta=1.0, threshold=20.0):
    z = F.exp(x * beta)
    return (F.where(x * beta > threshold, g, g * z / (z + 1)),)


_unary("softplus", _softplus,
       lambda beta=1.0, threshold=20.0: select(
           X * beta > threshold, X, call("log1p", call("exp", X * beta)) / beta),
       _softplus_vjp, rule=PROMOTE)


def _logsigmoid(x, out=None):
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


_unary("logsigmoid", _logsigmoid,
       call("min", X, 0) - call("log1p", call("exp", -call("abs", X))),
       lambda g, out, x: (g * F.sigmoid(-x),), rule=PROMOTE, grad_name="LogSigmoidBackward0")


def _shrunk(x, lambd):
    """Where softshrink and hardshrink are 0 (and so is their gradient)."""
    return (x >= -lambd) & (x <= lambd)


def _softshrink(x, lambd=0.5, out=None):
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, x * 0))


_unary("softshrink", _softshrink,
       lambda lambd=0.5: select(X > lambd, X - lambd, select(X < -lambd, X + lambd, X * 0)),
       lambda g, out, x, lambd=0.5: (F.where(_shrunk(x, lambd), 0, g),), rule=PROMOTE)


def _hardshrink(x, lambd=0.5, out=None):
    return np.where(_shrunk(x, lambd), x * 0, x)


_unary("hardshrink", _hardshrink,
       lambda lambd=0.5: select(call("and", X >= -lambd, X <= lambd), X * 0, X),
       lambda g, out, x, lambd=0.5: (F.where(_shrunk(x, lambd), 0, g),), rule=PROMOTE)


def _threshold(x, threshold=0.0, value=0.0, out=None):
    return np.where(x <= threshold, value, x).astype(x.dtype)


_unary("threshold", _threshold,
       lambda threshold=0.0, value=0.0: select(X <= threshold, value, X),
       lambda g, out, x, threshold=0.0, value=0.0: (F.where(x <= threshold, 0, g),),
       rule=PROMOTE)


# ---- integers' bits ----------------------------------------------------------------------
def _shift(left: bool):
    """PyTorch's shifts: a count outside [0, 64) (in int64, which holds every narrower
    type) shifts every bit out: 0 to the left, the sign to the right."""
    def impl(x, n, out=None):
        like = x if isinstance(x, np.ndarray) else np.asarray(n)
        a, c = np.asarray(x, np.int64), np.asarray(n, np.int64)
        inside = (c >= 0) & (c < 64)
        if left:
            r = np.where(inside, np.left_shift(a, np.where(inside, c, 0)), 0)
        else:
            r = np.right_shift(a, np.where(inside, c, 63))
        return r.astype(like.dtype)
    impl.__name__ = "left_shift" if left else "right_shift"
    return impl


_unary("bitwise_not", np.invert, call("bitwise_not", X), rule=PROMOTE, saves=())
for _name, _ufunc in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                      ("bitwise_xor", np.bitwise_xor)):
    _binary(_name, _ufunc, call(_name, X, Y), saves=())
_binary("bitwise_left_shift", _shift(True), call("left_shift", X, Y), saves=(),
        discontinuous=True)
_binary("bitwise_right_shift", _shift(False), call("right_shift", X, Y), saves=(),
        discontinuous=True)


# ---- more of PyTorch's elementwise math ----------------------------------------------------
def _nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0, out=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


_unary("nan_to_num", _nan_to_num,
       lambda nan=0.0, posinf=0.0, neginf=0.0: select(
           ne(X, X), nan, select(eq(X, math.inf), posinf, select(eq(X, -math.inf), neginf, X))),
       lambda g, out, x, **attrs: (F.where(F.isfinite(x), g, 0),), rule=PROMOTE)


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_unary("erfc", _special("erfc"), call("erfc", X),
       lambda g, out, x: (-(g * F.exp(-(x * x)) * _TWO_OVER_SQRT_PI),), api=API)


def _sinc(x, out=None):
    px = x * math.pi
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(x == 0, 1, np.sin(px) / px).astype(px.dtype)


def _sinc_vjp(g, out, x):
    """(cos(pi x) - sinc(x)) / x, 0 at 0 (x there replaced by 1, so that no NaN reaches a
    second derivative)."""
    zero = x == 0
    safe = F.where(zero, 1, x)
    px = safe * math.pi
    return (g * F.where(zero, 0, (px * F.cos(px) - F.sin(px)) / (px * safe)),)


_unary("sinc", _sinc, select(eq(X, 0), 1, call("sin", X * math.pi) / (X * math.pi)),
       _sinc_vjp, api=API)


def _heaviside(x, v, out=None):
    return np.where(x == 0, v, x > 0).astype(np.result_type(x, v))


_binary("heaviside", _heaviside, select(eq(X, 0), Y, select(X > 0, 1, 0)), saves=(),
        discontinuous=True)


def _extremum_vjp(keep_x):
    """fmax's and fmin's gradient: all of it to x where x wins or ties, or y is NaN."""
    def vjp(g, out, x, y):
        to_x = keep_x(x, y) | F.isnan(y)
        return (F.where(to_x, g, 0) if needs_grad(x) else None,
                F.where(to_x, 0, g) if needs_grad(y) else None)
    return vjp


_binary("fmax", np.fmax, select(ne(X, X), Y, select(ne(Y, Y), X, call("max", X, Y))),
        _extremum_vjp(lambda x, y: x >= y), scalar_edges=False)
_binary("fmin", np.fmin, select(ne(X, X), Y, select(ne(Y, Y), X, call("min", X, Y))),
        _extremum_vjp(lambda x, y: x <= y), scalar_edges=False)


def _xlogy(x, y, out=None):
    d = np.result_type(x, y)  # (a Python number takes the tensor's dtype)
    x, y = np.asarray(x, d), np.asarray(y, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.asarray(x * np.log(y))
    return np.where(np.isnan(y), y, np.where(np.asarray(x) == 0, 0, r)).astype(r.dtype)


_binary("xlogy", _xlogy, select(ne(Y, Y), Y, select(eq(X, 0), 0, X * call("log", Y))),
        lambda g, out, x, y: (F.where((x == 0) & (y <= 0), 0, F.xlogy(g, y))
                              if needs_grad(x) else None,
                              g * x / y if needs_grad(y) else None), rule=FLOAT, api=API)


_binary("logaddexp2", np.logaddexp2,
        select(eq(X, Y), X + 1, call("max", X, Y) + call("log1p", call(
            "exp2", -call("abs", X - Y))) / _LN2),
        lambda g, out, x, y: (g / (F.exp2(y - x) + 1) if needs_grad(x) else None,
                              g / (F.exp2(x - y) + 1) if needs_grad(y) else None),
        rule=FLOAT, api=API)



# ---- special functions (ops/special.py: PyTorch's values at the poles) ----------------
_trigamma = _unary("trigamma", _special("trigamma"), call("trigamma", X))  # (polygamma(1, x))
_unary("lgamma", _special("lgamma"), call("lgamma", X),
       lambda g, out, x: (g * F.digamma(x),), api=API)
_unary("digamma", _special("digamma"), call("digamma", X),
       lambda g, out, x: (g * F.apply(_trigamma, x),), api=API)
_unary("erfinv", _special("erfinv"), call("erfinv", X),
       lambda g, out, x: (g * F.exp(out * out) * (math.sqrt(math.pi) / 2),), save_out=True,
       meta_inputs=False, api=API)
