"""The elementwise op surface against PyTorch: activations (functional, in place and as
modules) with their gradients at the kinks, integers' bitwise operators and shifts,
elementwise math (NaN, infinities, dtypes), gradients at ties (maximum, minimum, clamp) and
at pow's edges, the errors PyTorch raises; and the new ops fused into one compiled
kernel."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

pytestmark = requires_torch

# kinks of every activation here (0, +-0.5, +-1, +-3, 6, 20) and values around them
KINKS = np.array([-20.5, -6.0, -3.0, -2.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 2.0,
                  3.0, 4.5, 6.0, 7.0, 20.0, 25.0], np.float32)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5], np.float32)


def _pair(data, requires_grad=True):
    import torch

    return (torch.tensor(data, requires_grad=requires_grad),
            tj.tensor(data, requires_grad=requires_grad))


def _close(got, want, what="", rtol=1e-5, atol=1e-6):
    want_np = want.detach().numpy()
    assert got.dtype.name == str(want.dtype).rsplit(".", 1)[-1], (what, got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), what
    np.testing.assert_allclose(got.detach().numpy().astype(np.float64),
                               want_np.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


ACTIVATIONS = [  # (name, keyword arguments); each is F.name in both libraries
    ("elu", {}), ("elu", {"alpha": 0.5}), ("selu", {}), ("celu", {"alpha": 2.0}),
    ("hardtanh", {}), ("hardtanh", {"min_val": -0.5, "max_val": 3.0}), ("relu6", {}),
    ("hardswish", {}), ("hardsigmoid", {}), ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 5.0}), ("softsign", {}), ("mish", {}),
    ("logsigmoid", {}), ("tanhshrink", {}), ("softshrink", {}), ("softshrink", {"lambd": 1.0}),
    ("hardshrink", {}), ("hardshrink", {"lambd": 1.0}), ("threshold", {"threshold": 0.5,
                                                                      "value": -3.0}),
    ("rrelu", {}), ("leaky_relu", {"negative_slope": 0.2}),
]


@pytest.mark.parametrize("name,kw", ACTIVATIONS,
                         ids=[f"{n}-{'-'.join(map(str, k.values()))}" for n, k in ACTIVATIONS])
def test_activation_values_and_gradients_at_the_kinks_match_pytorch(name, kw):
    import torch

    args = (kw.pop("threshold"), kw.pop("value")) if name == "threshold" else ()
    kw = dict(kw)
    tx, jx = _pair(KINKS)
    want = getattr(torch.nn.functional, name)(tx, *args, **kw)
    got = getattr(tj.nn.functional, name)(jx, *args, **kw)
    _close(got, want, name)
    g = np.linspace(-1, 1, KINKS.size).astype(np.float32)
    want.backward(torch.tensor(g))
    got.backward(tj.tensor(g))
    _close(jx.grad, tx.grad, f"{name} gradient", rtol=1e-4, atol=1e-5)
    with np.errstate(all="ignore"):  # NaN and infinities pass as PyTorch's do
        _close(getattr(tj.nn.functional, name)(tj.tensor(SPECIAL), *args, **kw),
               getattr(torch.nn.functional, name)(torch.tensor(SPECIAL), *args, **kw),
               f"{name} at NaN and infinities")


@pytest.mark.parametrize("name,kw", [("elu", {"alpha": 0.5}), ("selu", {}), ("celu", {}),
                                     ("hardtanh", {}), ("relu6", {}), ("hardswish", {}),
                                     ("hardsigmoid", {}), ("mish", {}), ("rrelu", {}),
                                     ("threshold", {"threshold": 0.5, "value": 2.0})])
def test_inplace_activations_write_into_the_input_and_differentiate(name, kw):
    import torch

    args = (kw["threshold"], kw["value"]) if name == "threshold" else ()
    kw = {} if name == "threshold" else kw
    ta, ja = _pair(KINKS)
    tb, jb = ta * 1.0, ja * 1.0
    tout = getattr(torch.nn.functional, name)(tb, *args, inplace=True, **kw)
    jout = getattr(tj.nn.functional, name)(jb, *args, inplace=True, **kw)
    assert jout is jb
    _close(jb, tb, name)
    tout.sum().backward()
    jout.sum().backward()
    _close(ja.grad, ta.grad, f"{name} gradient", rtol=1e-4, atol=1e-5)


def test_activation_modules_take_pytorchs_arguments():
    import torch

    x = np.linspace(-4, 4, 12, dtype=np.float32).reshape(2, 6)
    pairs = [("ELU", (0.5,)), ("SELU", ()), ("CELU", (1.5,)), ("Hardtanh", (-2.0, 2.0)),
             ("ReLU6", ()), ("Hardswish", ()), ("Hardsigmoid", ()), ("Softplus", (2.0, 3.0)),
             ("Softsign", ()), ("Mish", ()), ("LogSigmoid", ()), ("GLU", (1,)),
             ("Tanhshrink", ()), ("Softshrink", (0.75,)), ("Hardshrink", (0.75,)),
             ("Threshold", (0.1, 20.0)), ("RReLU", (0.1, 0.3))]
    for cls, args in pairs:
        tm, jm = getattr(torch.nn, cls)(*args).eval(), getattr(tj.nn, cls)(*args).eval()
        _close(jm(tj.tensor(x)), tm(torch.tensor(x)), cls)
    assert "min_val=-2.0, max_val=2.0" in repr(tj.nn.Hardtanh(-2.0, 2.0))
    with pytest.raises(ValueError, match="min_val cannot be greater"):
        tj.nn.Hardtanh(1.0, -1.0)


def test_prelu_learns_one_slope_per_channel():
    import torch

    x = np.linspace(-3, 3, 2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    tm, jm = torch.nn.PReLU(3, init=0.1), tj.nn.PReLU(3, init=0.1)
    with torch.no_grad(), tj.no_grad():
        tm.weight.copy_(torch.tensor([0.1, -0.5, 2.0]))
        jm.weight.copy_(tj.tensor([0.1, -0.5, 2.0]))
    tx, jx = _pair(x)
    tout, jout = tm(tx), jm(jx)
    _close(jout, tout, "prelu")
    tout.pow(2).sum().backward()
    jout.pow(2).sum().backward()
    _close(jm.weight.grad, tm.weight.grad, "prelu weight gradient", rtol=1e-4)
    _close(jx.grad, tx.grad, "prelu input gradient", rtol=1e-4)
    one = tj.nn.PReLU()  # one slope for every channel
    assert one.weight.shape == (1,) and one(tj.tensor(x)).shape == (2, 3, 4)
    with pytest.raises(RuntimeError, match="expected 3 parameters"):
        tj.nn.functional.prelu(tj.tensor(x), tj.tensor([0.1, 0.2]))


def test_glu_halves_a_dimension_and_rrelu_trains_with_random_slopes():
    import torch

    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    for dim in (0, 1, -1):
        _close(tj.nn.functional.glu(tj.tensor(x), dim), torch.nn.functional.glu(
            torch.tensor(x), dim), f"glu dim={dim}")
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        tj.nn.functional.glu(tj.tensor(x[:, :5]))
    tj.manual_seed(0)
    y = tj.nn.functional.rrelu(tj.tensor(x), 0.1, 0.3, training=True).numpy()
    ratio = y[x < 0] / x[x < 0]
    assert np.all(y[x >= 0] == x[x >= 0]) and np.all((ratio >= 0.1) & (ratio <= 0.3))
    assert np.unique(np.round(ratio, 6)).size > 1
    with pytest.raises(RuntimeError, match="Lower bound"):
        tj.nn.functional.rrelu(tj.tensor(x), 0.5, 0.1)


def test_activations_refuse_integer_tensors_as_pytorch():
    import torch

    ints = [1, -2, 3]
    for name in ("elu", "softplus", "hardshrink", "logsigmoid"):
        with pytest.raises(NotImplementedError):
            getattr(torch.nn.functional, name)(torch.tensor(ints))
        with pytest.raises(NotImplementedError, match="int64"):
            getattr(tj.nn.functional, name)(tj.tensor(ints))
    # hardtanh and threshold keep integers, their bounds truncated
    for name, args in (("hardtanh", (-1.5, 2.5)), ("threshold", (0.5, 7.9))):
        want = getattr(torch.nn.functional, name)(torch.tensor(ints), *args)
        _close(getattr(tj.nn.functional, name)(tj.tensor(ints), *args), want, name)


# ---- integers' bits ------------------------------------------------------------------------
INTS = np.array([-9, -1, 0, 5, 77, 2 ** 40, -(2 ** 62)], np.int64)
COUNTS = np.array([-1, 63, 64, 2, 0, 65, 3], np.int64)


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_bitwise_operators_follow_the_dtype_as_pytorch(dtype):
    import operator

    import torch

    a = INTS.astype(dtype) if dtype != "bool" else INTS > 0
    b = (INTS[::-1] * 3).astype(dtype) if dtype != "bool" else INTS[::-1] % 2 == 0
    ta, tb, ja, jb = torch.tensor(a), torch.tensor(b), tj.tensor(a), tj.tensor(b)
    for fn in (operator.and_, operator.or_, operator.xor):
        _close(fn(ja, jb), fn(ta, tb), f"{fn.__name__} {dtype}")
        _close(fn(ja, 6), fn(ta, 6), f"{fn.__name__} {dtype} with an int")
        _close(fn(6, jb), fn(6, tb), f"reflected {fn.__name__} {dtype}")  # __rand__, ...
        _close(fn(ja, True), fn(ta, True), f"{fn.__name__} {dtype} with a bool")
    _close(~ja, ~ta, f"~ {dtype}")
    _close(tj.bitwise_not(ja), torch.bitwise_not(ta), f"bitwise_not {dtype}")
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        _close(getattr(tj, name)(ja, jb), getattr(torch, name)(ta, tb), name)
        c = ja.clone()
        getattr(c, name + "_")(jb)
        _close(c, getattr(ta.clone(), name + "_")(tb), name + "_")
    if dtype != "bool":
        c = ja.clone()
        c &= jb
        c ^= 3
        c |= 8
        tc = ta.clone()
        tc &= tb
        tc ^= 3
        tc |= 8
        _close(c, tc, "in-place operators")


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_shifts_by_counts_past_the_width_and_negative_counts(dtype):
    import torch

    a, n = INTS.astype(dtype), COUNTS.astype(dtype)
    ta, tn, ja, jn = torch.tensor(a), torch.tensor(n), tj.tensor(a), tj.tensor(n)
    _close(ja << jn, ta << tn, "<<")
    _close(ja >> jn, ta >> tn, ">>")
    _close(tj.bitwise_left_shift(ja, 3), torch.bitwise_left_shift(ta, 3), "left shift")
    _close(tj.bitwise_right_shift(ja, 2), torch.bitwise_right_shift(ta, 2), "right shift")
    _close(5 << jn.abs() % 8, 5 << tn.abs() % 8, "reflected <<")  # __rlshift__
    _close(-100 >> jn.abs() % 8, -100 >> tn.abs() % 8, "reflected >>")
    c = ja.clone()
    c <<= 2
    c >>= 1
    _close(c, (ta.clone() << 2) >> 1, "in-place shifts")
    _close(tj.tensor([True, False]) << 1, torch.tensor([True, False]) << 1, "bool << int")


def test_bitwise_errors_are_pytorchs():
    import torch

    for fn in (lambda m, x: m.bitwise_and(x, x), lambda m, x: x << 1,
               lambda m, x: m.bitwise_not(x), lambda m, x: x | 2):
        for m in (torch, tj):
            with pytest.raises(NotImplementedError):
                fn(m, m.tensor([1.5]))
    for m in (torch, tj):
        with pytest.raises(TypeError):
            ~m.tensor([1.5])
        with pytest.raises(NotImplementedError):
            m.tensor([True]) << m.tensor([True])
        with pytest.raises(TypeError):
            m.bitwise_and(2, 3)


# ---- elementwise math ----------------------------------------------------------------------
def test_elementwise_math_matches_pytorch_with_nan_and_infinities():
    import torch

    x = np.concatenate([SPECIAL, np.linspace(-3, 3, 9, dtype=np.float32)])
    y = np.roll(x, 3)
    p = np.linspace(0.0, 1.0, 9, dtype=np.float32)
    t, j = torch.tensor, tj.tensor
    cases = [
        ("round 2", lambda m, a, b: m.round(a * 3.217, decimals=2)),
        ("round -1", lambda m, a, b: m.round(a * 37, decimals=-1)),
        ("clamp_min", lambda m, a, b: m.clamp_min(a, -1.0)),
        ("clamp_max", lambda m, a, b: m.clamp_max(a, 1.0)),
        ("addcmul", lambda m, a, b: m.addcmul(a, b, a, value=0.5)),
        ("addcdiv", lambda m, a, b: m.addcdiv(a, b, a, value=2)),
        ("nan_to_num", lambda m, a, b: m.nan_to_num(a)),
        ("nan_to_num given", lambda m, a, b: m.nan_to_num(a, 1.0, 2.0, -3.0)),
        ("xlogy", lambda m, a, b: m.xlogy(a, b)),
        ("xlogy scalar", lambda m, a, b: m.xlogy(a, 2.0)),
        ("erfc", lambda m, a, b: m.erfc(a)),
        ("sinc", lambda m, a, b: m.sinc(a)),
        ("heaviside", lambda m, a, b: m.heaviside(a, b)),
        ("fmax", lambda m, a, b: m.fmax(a, b)),
        ("fmin", lambda m, a, b: m.fmin(a, b)),
        ("frac", lambda m, a, b: m.frac(a)),
        ("logaddexp2", lambda m, a, b: m.logaddexp2(a, b)),
        ("deg2rad", lambda m, a, b: m.deg2rad(a)),
        ("rad2deg", lambda m, a, b: m.rad2deg(a)),
        ("float_power", lambda m, a, b: m.float_power(a, 2)),
        ("float_power tensor", lambda m, a, b: m.float_power(a.abs(), b)),
        ("signbit", lambda m, a, b: m.signbit(a)),
        ("positive", lambda m, a, b: m.positive(a)),
        ("true_divide", lambda m, a, b: m.true_divide(a, 2)),
    ]
    with np.errstate(all="ignore"):
        for what, fn in cases:
            _close(fn(tj, j(x), j(y)), fn(torch, t(x), t(y)), what)
        _close(tj.logit(j(p)), torch.logit(t(p)), "logit")
        _close(tj.logit(j(p), eps=0.1), torch.logit(t(p), eps=0.1), "logit eps")
    k = np.array([-3, 0, 2, 7])
    for what, fn in [("square bool", lambda m: m.square(m.tensor([True, False]))),
                     ("deg2rad int", lambda m: m.deg2rad(m.tensor(k))),
                     ("nan_to_num int", lambda m: m.nan_to_num(m.tensor(k))),
                     ("logit int", lambda m: m.logit(m.tensor(k))),
                     ("float_power int", lambda m: m.float_power(m.tensor(k), 2)),
                     ("addcmul int", lambda m: m.addcmul(m.tensor(k), m.tensor(k),
                                                         m.tensor(k), value=2)),
                     ("fmax int", lambda m: m.fmax(m.tensor(k), m.tensor(k[::-1].copy())))]:
        with np.errstate(all="ignore"):
            _close(fn(tj), fn(torch), what)


def test_elementwise_math_gradients_match_pytorch():
    import torch

    x = np.array([-2.5, -1.0, 0.0, 0.5, 1.0, 2.0, 3.25], np.float32)
    y = np.array([0.5, -1.0, 2.0, 0.5, 3.0, np.nan, 1.0], np.float32)
    cases = [
        ("xlogy", lambda m, a, b: m.xlogy(a, b.abs())),
        ("sinc", lambda m, a, b: m.sinc(a)),
        ("erfc", lambda m, a, b: m.erfc(a)),
        ("fmax", lambda m, a, b: m.fmax(a, b)),
        ("fmin", lambda m, a, b: m.fmin(a, b)),
        ("logaddexp2", lambda m, a, b: m.logaddexp2(a, b)),
        ("nan_to_num", lambda m, a, b: m.nan_to_num(a / m.zeros_like(a) * a, 0.0, 1.0)),
        ("logit eps", lambda m, a, b: m.logit(a * 0.3 + 0.5, eps=0.2)),
        ("frac", lambda m, a, b: m.frac(a * 1.7)),
        ("addcdiv", lambda m, a, b: m.addcdiv(a, a, b, value=0.5)),
        ("round 1", lambda m, a, b: m.round(a, decimals=1)),
        ("float_power", lambda m, a, b: m.float_power(a, 3)),
    ]
    for what, fn in cases:
        (ta, jA), (tb, jb) = _pair(x), _pair(y)
        with np.errstate(all="ignore"):
            want, got = fn(torch, ta, tb), fn(tj, jA, jb)
            want.sum().backward()
            got.sum().backward()
        _close(jA.grad, ta.grad, f"{what} gradient (input)", rtol=1e-4, atol=1e-5)
        if tb.grad is not None or jb.grad is not None:
            _close(jb.grad, tb.grad, f"{what} gradient (other)", rtol=1e-4, atol=1e-5)


def test_special_functions_at_their_poles_and_gradients_match_pytorch():
    import torch

    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -2.0, -2.5, -0.5, 1e-8, 0.25,
                  1.0, 2.5, 9.75, 10.0, 150.0, 1e10], np.float64)
    p = np.array([np.nan, -1.5, -1.0, -1 + 1e-12, -0.75, -0.0, 0.0, 0.3, 0.999999, 1 - 1e-15,
                  1.0, 1.0 + 1e-12], np.float64)
    for dtype in (np.float64, np.float32):
        with np.errstate(all="ignore"):
            for name, data in (("lgamma", x), ("digamma", x), ("erfinv", p)):
                a = data.astype(dtype)
                _close(getattr(tj, name)(tj.tensor(a)), getattr(torch, name)(torch.tensor(a)),
                       f"{name} {dtype.__name__}", rtol=1e-12 if dtype == np.float64 else 2e-6,
                       atol=0)
    g = np.array([-3.25, -0.5, 0.25, 1.5, 4.0, 12.0])
    for name, data in (("lgamma", g), ("digamma", g), ("erfinv", np.tanh(g / 4))):
        (t, j) = _pair(data)
        getattr(torch, name)(t).sum().backward()
        getattr(tj, name)(j).sum().backward()
        _close(j.grad, t.grad, f"{name} gradient", rtol=1e-8)


def test_elementwise_math_errors_are_pytorchs():
    import torch

    for m in (torch, tj):
        with pytest.raises(RuntimeError, match="different"):
            m.heaviside(m.tensor([1.0]), m.tensor([1.0], dtype=m.float64))
        with pytest.raises(TypeError):
            m.fmax(m.tensor([1.0]), 2.0)
        with pytest.raises(RuntimeError):
            m.addcdiv(m.tensor([1]), m.tensor([1]), m.tensor([2]))
        with pytest.raises(NotImplementedError):
            m.frac(m.tensor([1]))
        with pytest.raises(RuntimeError):
            +m.tensor([True])


# ---- gradients at ties and edges -----------------------------------------------------------
def test_maximum_minimum_and_clamp_split_gradients_at_ties_as_pytorch():
    import torch

    x = np.array([1.0, 2.0, 3.0, np.nan, 0.5], np.float32)
    y = np.array([1.0, 1.0, 5.0, 2.0, 0.5], np.float32)
    hi = np.array([1.0, 2.0, 2.0, 4.0, 0.25], np.float32)
    cases = [("maximum", lambda m, a, b, c: m.maximum(a, b)),
             ("minimum", lambda m, a, b, c: m.minimum(a, b)),
             ("max", lambda m, a, b, c: m.max(a, b)), ("min", lambda m, a, b, c: m.min(a, b)),
             ("clamp", lambda m, a, b, c: m.clamp(a, b, c)),
             ("clamp min", lambda m, a, b, c: m.clamp(a, min=b)),
             ("clamp max", lambda m, a, b, c: m.clamp(a, max=c)),
             ("clamp scalars", lambda m, a, b, c: m.clamp(a, 1.0, 2.0)),
             ("amax", lambda m, a, b, c: m.amax(b, 0))]
    for what, fn in cases:
        pairs = [_pair(v) for v in (x, y, hi)]
        want = fn(torch, *(p[0] for p in pairs))
        got = fn(tj, *(p[1] for p in pairs))
        _close(got, want, what)
        want.sum().backward()
        got.sum().backward()
        for k, (t, j) in enumerate(pairs):
            if t.grad is not None or j.grad is not None:
                _close(j.grad, t.grad, f"{what} gradient {k}")


def test_pow_gradients_at_zero_infinity_and_negative_bases():
    import torch

    base = np.array([0.0, 0.0, 0.0, -2.0, 2.0, np.inf, -np.inf, -2.0], np.float32)
    expo = np.array([0.0, -1.0, 2.0, 0.5, 2.0, 0.0, 2.0, 3.0], np.float32)
    for what, fn in [("tensor ** tensor", lambda m, a, b: a ** b),
                     ("tensor ** 0.0", lambda m, a, b: a ** 0.0),
                     ("tensor ** -1.0", lambda m, a, b: a ** -1.0),
                     ("0.0 ** tensor", lambda m, a, b: 0.0 ** b),
                     ("-2.0 ** tensor", lambda m, a, b: (-2.0) ** b),
                     ("2 ** tensor", lambda m, a, b: 2 ** b)]:
        (ta, ja), (tb, jb) = _pair(base), _pair(expo)
        with np.errstate(all="ignore"):
            want, got = fn(torch, ta, tb), fn(tj, ja, jb)
            _close(got, want, what)
            want.sum().backward()
            got.sum().backward()
        for t, j, k in ((ta, ja, "base"), (tb, jb, "exponent")):
            if t.grad is not None or j.grad is not None:
                _close(j.grad, t.grad, f"{what}: {k} gradient")


def test_integers_to_negative_integer_powers_as_pytorch():
    import torch

    base, expo = np.array([1, -1, -1, 2, 0, 3]), np.array([-3, -3, -2, -1, -1, 2])
    _close(tj.tensor(base) ** tj.tensor(expo), torch.tensor(base) ** torch.tensor(expo),
           "tensor ** tensor")
    _close(2 ** tj.tensor(expo), 2 ** torch.tensor(expo), "2 ** tensor")
    for m in (torch, tj):
        with pytest.raises(RuntimeError, match="negative integer powers"):
            m.tensor(base) ** -1


# ---- fused ---------------------------------------------------------------------------------
@pytest.mark.compile
def test_the_new_elementwise_ops_fuse_into_one_compiled_kernel():
    """Activations, bitwise ops and elementwise math traced on the Numba backend: one
    fused kernel for the float chain, one for the integer chain, values as eager's and
    PyTorch's, and the float chain's gradient as eager's."""
    import torch

    F = tj.nn.functional

    def floats(m, x, y):
        nf = m.nn.functional
        a = nf.elu(x, 0.5) + nf.hardtanh(y, -0.5, 2.0) + nf.hardswish(x) * nf.hardsigmoid(y)
        b = nf.softplus(x, 2.0, 3.0) - nf.logsigmoid(y) + nf.softshrink(x) + nf.hardshrink(y)
        c = nf.threshold(x, 0.25, -1.0) + m.erfc(y) + m.sinc(x) + m.xlogy(x, y.abs())
        d = m.fmax(x, y) - m.fmin(x, y) + m.logaddexp2(x, y) + m.nan_to_num(x / y)
        e = m.lgamma(x.abs() + 0.5) + m.digamma(y.abs() + 0.25) + m.erfinv(x / 5)
        return a * b + c * d + nf.selu(x) + nf.relu6(y * 4) + e

    def integers(m, i, k):
        return ((i & k) | (i ^ 5)) + (~i) + (i << (k & 7)) + (i >> (k & 3))

    rng = np.random.default_rng(5)
    x = rng.uniform(-4, 4, (3, 7)).astype(np.float32)
    y = rng.uniform(-4, 4, (3, 7)).astype(np.float32)
    i = rng.integers(-1000, 1000, (3, 7))
    k = rng.integers(0, 70, (3, 7))
    traced = tj.trace(lambda a, b: floats(tj, a, b), (tj.tensor(x), tj.tensor(y)),
                      backend="numba")
    kernels = [n for n in traced.graph.nodes if n.op == "fused"]
    assert len(kernels) == 1, traced.graph
    xs, ys = tj.tensor(x, requires_grad=True), tj.tensor(y, requires_grad=True)
    got = traced(xs, ys)
    want = floats(tj, tj.tensor(x, requires_grad=True), tj.tensor(y, requires_grad=True))
    _close(got, floats(torch, torch.tensor(x), torch.tensor(y)), "fused floats", rtol=2e-5,
           atol=1e-5)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=2e-5,
                               atol=1e-5)
    got.sum().backward()
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    floats(torch, tx, ty).sum().backward()
    _close(xs.grad, tx.grad, "fused gradient", rtol=1e-4, atol=1e-4)
    traced_ints = tj.trace(lambda a, b: integers(tj, a, b), (tj.tensor(i), tj.tensor(k)),
                           backend="numba")
    assert sum(n.op == "fused" for n in traced_ints.graph.nodes) == 1
    for dtype in (np.int64,):
        _close(traced_ints(tj.tensor(i.astype(dtype)), tj.tensor(k.astype(dtype))),
               integers(torch, torch.tensor(i), torch.tensor(k)), "fused integers")
    assert F.elu is tj.nn.functional.elu


# ---- small integer dtypes ----------------------------------------------------------------
SMALL = ("uint8", "int8", "int16")


def test_small_integer_dtypes_promote_wrap_and_cast_as_pytorch():
    import itertools

    import torch

    names = ("bool",) + SMALL + ("int32", "int64", "float16", "float32", "float64")
    for a, b in itertools.product(names, names):
        ta, tb = torch.ones(2, dtype=getattr(torch, a)), torch.ones(2, dtype=getattr(torch, b))
        ja, jb = tj.ones(2, dtype=getattr(tj, a)), tj.ones(2, dtype=getattr(tj, b))
        for what, fn in (("tensors", lambda x, y: x + y), ("0-d", lambda x, y: x + y[0]),
                         ("int", lambda x, y: x + 1), ("float", lambda x, y: x * 1.5)):
            want, got = fn(ta, tb), fn(ja, jb)
            assert got.dtype.name == str(want.dtype).rsplit(".", 1)[-1], (a, b, what)
    u = np.array([200, 100, 0, 255], np.uint8)
    s = np.array([-128, 127, -1, 5], np.int8)
    for m in (torch, tj):
        assert m.tensor(u).dtype == m.uint8 and m.tensor(s).dtype == m.int8
    tu, ju, ts, js = torch.tensor(u), tj.tensor(u), torch.tensor(s), tj.tensor(s)
    for what, fn in (("wraps", lambda x, y: x * 2 + x), ("negates", lambda x, y: -y),
                     ("mixes", lambda x, y: x - y), ("sums to int64", lambda x, y: x.sum()),
                     ("bits", lambda x, y: (~x) ^ (x << 3) | (y >> 2)),
                     ("compares", lambda x, y: x > y), ("divides", lambda x, y: x / 7),
                     ("casts", lambda x, y: (x.short(), y.byte(), x.char(), y.float())),
                     ("amax", lambda x, y: y.amax())):
        want, got = fn(tu, ts), fn(ju, js)
        for w, g in zip(want if isinstance(want, tuple) else (want,),
                        got if isinstance(got, tuple) else (got,)):
            _close(g, w, what)
    assert tj.short is tj.int16 and tj.tensor([1], dtype="short").dtype is tj.int16


@pytest.mark.compile
def test_small_integer_dtypes_fuse_into_one_compiled_kernel():
    import torch

    def fn(u, i, h):
        return (u + i) * 3 - (h << 2) + (u & 15) - (i >> 1) + (h // 5), u * 2, i.abs()

    rng = np.random.default_rng(8)
    u = rng.integers(0, 256, (4, 5)).astype(np.uint8)
    i = rng.integers(-128, 128, (4, 5)).astype(np.int8)
    h = rng.integers(-3000, 3000, (4, 5)).astype(np.int16)
    traced = tj.trace(fn, (tj.tensor(u), tj.tensor(i), tj.tensor(h)), backend="numba")
    assert sum(n.op == "fused" for n in traced.graph.nodes) == 1
    got = traced(tj.tensor(u), tj.tensor(i), tj.tensor(h))
    for g, w in zip(got, fn(torch.tensor(u), torch.tensor(i), torch.tensor(h))):
        _close(g, w, "fused small integers")
