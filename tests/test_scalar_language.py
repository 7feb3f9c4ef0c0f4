"""The scalar language of ops/scalar.py: every elementwise op says what one element
computes, every renderer spells every scalar function and monoid, and every elementwise op
compiled alone as a CPU kernel agrees with its numpy implementation."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tracejit.ops import OPS
from tracejit.ops.registry import ELEMENTWISE, REDUCE
from tracejit.ops.scalar import (FUNCTIONS, MONOIDS, Arg, Call, Const, X, Y, call, evaluate,
                                 select, substitute)

from op_samples import SAMPLES

ELEMENTWISE_OPS = [op for op in OPS if op.kind == ELEMENTWISE]


@pytest.mark.parametrize("op", ELEMENTWISE_OPS, ids=lambda op: op.name)
def test_every_elementwise_op_has_an_element_expression(op):
    assert op.expr is not None, f"{op.name}: declare what one element computes (ops/scalar.py)"


def test_expressions_are_data():
    e = select(X > 0, X * 2, -Y)
    assert e == Call("select", (Call("gt", (X, Const(0))), Call("mul", (X, Const(2))),
                                Call("neg", (Y,))))
    assert e.calls() == {"select", "gt", "mul", "neg"} and not e.calls_math
    assert call("exp", X).calls_math
    assert substitute(e, (Const(3.0), Const(1.0))) == select(Const(3.0) > 0, Const(3.0) * 2,
                                                             -Const(1.0))
    with pytest.raises(ValueError, match="takes 1 operands"):
        call("exp", X, Y)
    with pytest.raises(ValueError, match="unknown scalar function"):
        call("expp", X)


def _numpy_functions() -> dict:
    """Each scalar function as NumPy computes it (the reference for every renderer)."""
    import math

    fns = {"neg": np.negative, "abs": np.abs, "add": np.add, "sub": np.subtract,
           "mul": np.multiply, "div": np.true_divide, "floordiv": np.floor_divide,
           "mod": np.remainder, "pow": np.power, "max": np.maximum, "min": np.minimum,
           "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal, "not": np.logical_not, "and": np.logical_and,
           "or": np.logical_or, "xor": np.logical_xor, "select": np.where,
           "erf": np.vectorize(math.erf), "erfc": np.vectorize(math.erfc),
           "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
    for fn in ("lgamma", "digamma", "trigamma", "erfinv"):  # PyTorch's values at the poles
        fns[fn] = OPS[fn].impl
    fns["left_shift"], fns["right_shift"] = OPS.bitwise_left_shift.impl, \
        OPS.bitwise_right_shift.impl  # (PyTorch's counts outside [0, 64); numpy's differ)
    for fn in FUNCTIONS:
        fns.setdefault(fn, getattr(np, fn, None) or getattr(np, "arc" + fn[1:], None))
    return fns


NUMPY_FNS = _numpy_functions()


def test_an_expression_evaluates_like_the_ops_impl():
    """The expressions mean what the implementations compute (NumPy's ufuncs as the
    scalar functions): a check of the table's expressions independent of any renderer."""
    fns = NUMPY_FNS
    checked = 0
    for op in ELEMENTWISE_OPS:
        samples, _, _ = SAMPLES[op.name]
        for s in samples:
            if "dtype" in s.attrs or "contiguous" in s.attrs:
                continue
            expr = op.scalar(s.attrs)
            env = {Arg(i): a for i, a in enumerate(s.args)}
            got = np.asarray(evaluate(expr, env, fns), dtype=np.float64)
            want = np.asarray(op.impl(*s.args, **s.attrs), dtype=np.float64)
            np.testing.assert_allclose(np.broadcast_to(got, want.shape), want, rtol=1e-12,
                                       atol=1e-12, err_msg=op.name)
            checked += 1
    assert checked >= 40


@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_the_cpu_renderer_spells_every_scalar_function(fn):
    from tracejit.backends.numba_cpu import CODE_FOR_FN

    spelled = CODE_FOR_FN[fn].format(*(f"a{i}" for i in range(FUNCTIONS[fn].arity)))
    assert all(f"a{i}" in spelled for i in range(FUNCTIONS[fn].arity))


@pytest.mark.parametrize("monoid", MONOIDS, ids=lambda m: m.name)
def test_the_cpu_renderer_accumulates_every_monoid(monoid):
    from tracejit.backends.numba_cpu import accumulation

    init, combine, finish = accumulation(monoid)
    assert "{x}" in combine and "acc" in combine and "acc" in finish
    assert all(op.monoid in MONOIDS for op in OPS if op.kind == REDUCE and op.monoid)


@pytest.mark.compile
@pytest.mark.parametrize("name", [op.name for op in OPS if op.kind == REDUCE and op.monoid
                                  and op.name != "sum_to"])  # (sums over rows: elsewhere)
def test_every_reduction_over_rows_as_a_cpu_row_kernel(name):
    """Each reduction with a monoid, fused into a row kernel after an elementwise op, over
    float rows (NaN and zeros included) and bool rows, against eager."""
    import tracejit as tj

    x = np.array([[0.5, -2.0, 3.0, 0.0], [np.nan, 1.0, 2.0, -1.0], [0.0, 0.0, 0.0, 0.0]],
                 np.float32)
    def fn(a):
        return getattr(tj, name)(a * 2, 1)
    t = tj.trace(fn, (tj.tensor(x),), backend="numba")
    assert any(n.op == "fused" and n.attrs["kind"] == "row" for n in t.graph.nodes)
    with np.errstate(all="ignore"):
        for data in (x, x[:2], (x > 0).astype(np.float32)):
            want = fn(tj.tensor(data))
            got = t(tj.tensor(data))
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got.numpy().astype(np.float64),
                                       want.numpy().astype(np.float64), rtol=1e-6)


_OPERANDS = {"select": (True, 1.25, -0.75), "acosh": (1.75,), "pow": (1.5, 0.5)}
# each function at these too, where numpy's answer is not a ValueError (NaN, infinities,
# signed zeros: where spellings part from numpy)
_SPECIAL = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5)


@pytest.mark.compile
@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_every_scalar_function_compiles_on_the_cpu(fn):
    """Each scalar function as the CPU renderer spells it, compiled by Numba in float64
    and float32, against NumPy."""
    import numba

    from tracejit.backends import numba_cpu
    from tracejit.codegen.plan import Statement
    from tracejit.ops.scalar import Ref

    arity = FUNCTIONS[fn].arity
    operands = _OPERANDS.get(fn, (0.625, -0.375)[:arity] if arity <= 2 else None)
    bitwise = FUNCTIONS[fn].kind == "bitwise"
    if bitwise:
        operands = (-77, 5)[:arity]
    for dtype in ("int64", "int32") if bitwise else ("float64", "float32"):
        st = Statement(fn, "r0", dtype, Call(fn, tuple(Arg(i) for i in range(arity))),
                       tuple(Ref(f"a{i}") for i in range(arity)))
        params = ", ".join(f"a{i}" for i in range(arity))
        source = f"def k({params}):\n    {numba_cpu.render_statement(st)}\n    return r0\n"
        namespace = {"__name__": "scalar_function_test"}  # a kernel module's header first
        exec(compile("\n".join(numba_cpu._HEADER) + source, f"<{fn}>", "exec"), namespace)
        kernel = numba.njit(namespace["k"])
        args = [a if isinstance(a, bool) else np.dtype(dtype).type(a) for a in operands]
        np.testing.assert_allclose(float(kernel(*args)), float(NUMPY_FNS[fn](*args)),
                                   rtol=1e-6, err_msg=source)
        if bitwise:  # shifts by counts at and beyond the type's width, and negative ones
            for a, b in itertools.product((-77, 77, -1), (-1, 0, 31, 32, 63, 64, 99)):
                args = [np.dtype(dtype).type(v) for v in (a, b)[:arity]]
                want = np.asarray(NUMPY_FNS[fn](*[np.asarray(v) for v in args])).astype(
                    np.int64).astype(dtype)  # (the kernel's result converted as a store)
                got = np.dtype(dtype).type(np.int64(kernel(*args)).astype(dtype))
                assert got == want, (source, args)
            continue
        if fn in ("select", "round") or FUNCTIONS[fn].kind in ("logic", "math"):
            continue  # (libm's and numpy's edge cases agree; select has a bool operand)
        for a in _SPECIAL:
            for b in _SPECIAL if arity == 2 else (None,):
                args = [np.dtype(dtype).type(v) for v in (a, b)[:arity]]
                with np.errstate(all="ignore"):
                    want = NUMPY_FNS[fn](*args)
                    try:
                        got = kernel(*args)
                    except ZeroDivisionError:  # Python's semantics in a scalar kernel
                        continue
                np.testing.assert_array_equal(np.float64(got), np.float64(want),
                                              err_msg=f"{source} at {args}")
                if want == 0:
                    assert np.signbit(np.float64(got)) == np.signbit(np.float64(want)), (
                        source, args)


def _elementwise_cases():
    for op in ELEMENTWISE_OPS:
        samples, _, _ = SAMPLES[op.name]
        for i, s in enumerate(samples):
            if any(isinstance(a, np.ndarray) for a in s.args) and "dtype" not in s.attrs:
                yield pytest.param(op, i, id=f"{op.name}-{i}")


@pytest.mark.compile
@pytest.mark.parametrize("op,i", list(_elementwise_cases()))
def test_every_elementwise_op_as_a_cpu_kernel(op, i):
    """Each op compiled alone by the CPU renderer, in float64 and float32, against its
    implementation (the kernel computes float32 math in float32, with its own forms of
    exp/tanh/log/erf: a float32 tolerance)."""
    from tracejit.backends.numba_cpu import RegionKernel
    from tracejit.codegen.plan import one_op_region

    s = SAMPLES[op.name][0][i]
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
        args = [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                for a in s.args]
        region = one_op_region(op, args, s.attrs)
        kernel = RegionKernel(region)
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        [got] = kernel(arrays)
        want = op.impl(*args, **s.attrs)
        assert got.dtype == np.asarray(want).dtype, (op.name, dtype)
        np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64),
                                   rtol=tol, atol=tol, err_msg=f"{op.name} {dtype.__name__}")


@pytest.mark.compile
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64, np.float32])
def test_fmod_takes_the_dividends_sign_in_every_dtype(dtype):
    """C's remainder, as PyTorch's fmod: eager, and fused on the CPU."""
    import tracejit as tj

    x = tj.tensor(np.array([-7, 7, -7, 7, -6, 5], dtype))
    y = tj.tensor(np.array([2, -2, -2, 2, 3, 5], dtype))
    want = np.fmod(x.numpy().astype(np.float64), y.numpy().astype(np.float64))
    np.testing.assert_array_equal(tj.fmod(x, y).numpy(), want)
    traced = tj.trace(lambda a, b: tj.fmod(a, b) * 1, (x, y), backend="numba")
    np.testing.assert_array_equal(traced(x, y).numpy(), want)


def test_logaddexp_at_infinities_and_nan():
    import tracejit as tj

    x = tj.tensor([-np.inf, np.inf, 1.0, np.nan, -np.inf])
    y = tj.tensor([-np.inf, np.inf, -np.inf, 1.0, 2.0])
    with np.errstate(all="ignore"):
        want = np.logaddexp(x.numpy(), y.numpy())
        got = tj.logaddexp(x, y).numpy()
    np.testing.assert_array_equal(got, want)
    fns = NUMPY_FNS
    expr = OPS.logaddexp.expr
    with np.errstate(all="ignore"):
        got = evaluate(expr, {Arg(0): x.numpy().astype(np.float64),
                              Arg(1): y.numpy().astype(np.float64)}, fns)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["trunc", "ceil", "round"])
def test_rounding_an_integer_tensor_keeps_it_exact(name):
    import tracejit as tj

    x = tj.tensor([2 ** 60 + 1, -3, 0], dtype=tj.int64)
    got = getattr(tj, name)(x)
    assert got.dtype == tj.int64 and got.numpy().tolist() == x.numpy().tolist()
    traced = tj.trace(lambda a: getattr(tj, name)(a) + 1, (x,))
    assert traced(x).numpy().tolist() == [2 ** 60 + 2, -2, 1]
