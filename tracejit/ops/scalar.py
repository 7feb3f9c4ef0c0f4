"""The scalar language: what one element of an elementwise op computes, and how a
reduction combines elements, as data that every code generator reads.

An op's `expr` is a small expression tree over its operands (`Arg(0)`, `Arg(1)`, ...),
constants (`Const(0.5)`) and calls of the scalar functions named in `FUNCTIONS`
(`Call("exp", (Arg(0),))`, written `exp(X)` below). A reduction's `monoid` says how
elements combine (`SUM`, `MEAN`, `PROD`, `MAX`, `MIN`). Nothing here is any device's
syntax: each renderer (Numba CPU, Numba CUDA, ONNX) keeps one table from scalar function
to its spelling and one from monoid to its accumulation, with a test that fails when a
function or monoid has no spelling there. So an elementwise op built from existing
functions is one entry in the op table, and a new function is one line here plus one
line per renderer table.

    from tracejit.ops.scalar import X, Y, select
    relu = maximum(X, 0)               # an op's expression
    threshold_backward = select(Y > 0, X, 0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple


class Fn(NamedTuple):
    """A scalar function: its arity and its class ("arith", "compare", "logic", "select",
    "bitwise": integers' bits, "math": a libm-style call, which costs far more than
    arithmetic to recompute)."""
    name: str
    arity: int
    kind: str


_FNS = [Fn(n, 1, "arith") for n in ("neg", "abs")]
_FNS += [Fn(n, 2, "arith") for n in ("add", "sub", "mul", "div", "floordiv", "mod", "pow",
                                     "max", "min")]
_FNS += [Fn(n, 2, "compare") for n in ("lt", "le", "gt", "ge", "eq", "ne")]
_FNS += [Fn("not", 1, "logic")] + [Fn(n, 2, "logic") for n in ("and", "or", "xor")]
_FNS += [Fn("select", 3, "select")]
# integers' bits (two's complement); shifts as PyTorch's: a count outside [0, 64) shifts
# every bit out (0 to the left, the sign to the right)
_FNS += [Fn("bitwise_not", 1, "bitwise")] + [Fn(n, 2, "bitwise") for n in (
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")]
# libm's functions of one argument (Python's `math` names; `round` to nearest even, as
# PyTorch's), and of two
MATH1 = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos",
         "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
         "erf", "erfc", "floor", "ceil", "trunc", "round", "isnan", "isinf", "isfinite")
MATH2 = ("atan2", "copysign", "fmod", "hypot")
# special functions beyond libm's (ops/special.py): PyTorch's values at their poles
SPECIAL = ("lgamma", "digamma", "trigamma", "erfinv")
_FNS += [Fn(n, 1, "math") for n in MATH1 + SPECIAL] + [Fn(n, 2, "math") for n in MATH2]
FUNCTIONS: dict[str, Fn] = {f.name: f for f in _FNS}


class Expr:
    """A node of a scalar expression. Python's operators build expressions (`X * 2`,
    `X < Y`); `==` compares expressions, so equality tests are `eq(a, b)`."""

    __slots__ = ()

    def __add__(self, o): return Call("add", (self, lift(o)))
    def __radd__(self, o): return Call("add", (lift(o), self))
    def __sub__(self, o): return Call("sub", (self, lift(o)))
    def __rsub__(self, o): return Call("sub", (lift(o), self))
    def __mul__(self, o): return Call("mul", (self, lift(o)))
    def __rmul__(self, o): return Call("mul", (lift(o), self))
    def __truediv__(self, o): return Call("div", (self, lift(o)))
    def __rtruediv__(self, o): return Call("div", (lift(o), self))
    def __floordiv__(self, o): return Call("floordiv", (self, lift(o)))
    def __mod__(self, o): return Call("mod", (self, lift(o)))
    def __pow__(self, o): return Call("pow", (self, lift(o)))
    def __neg__(self): return Call("neg", (self,))
    def __lt__(self, o): return Call("lt", (self, lift(o)))
    def __le__(self, o): return Call("le", (self, lift(o)))
    def __gt__(self, o): return Call("gt", (self, lift(o)))
    def __ge__(self, o): return Call("ge", (self, lift(o)))

    def calls(self) -> set:
        """The scalar functions this expression calls."""
        return {e.fn for e in self.nodes() if isinstance(e, Call)}

    def refs(self) -> set:
        """The names of the `Ref`s it reads."""
        return {e.name for e in self.nodes() if isinstance(e, Ref)}

    def nodes(self):
        """Every node of the expression, itself first."""
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            if isinstance(e, Call):
                stack.extend(e.args)

    @property
    def calls_math(self) -> bool:
        """Whether it calls a libm-style function (worth keeping rather than recomputing)."""
        return any(FUNCTIONS[f].kind == "math" for f in self.calls())


@dataclass(frozen=True, slots=True)
class Arg(Expr):
    """The op's operand `index`."""
    index: int


@dataclass(frozen=True, slots=True)
class Const(Expr):
    """A number or bool (or, in a kernel plan, an operand the renderer spells as a name:
    see `Ref`)."""
    value: object


@dataclass(frozen=True, slots=True)
class Ref(Expr):
    """A value a kernel already holds, by its name in the kernel (plans' operands)."""
    name: str


@dataclass(frozen=True, slots=True)
class Call(Expr):
    fn: str
    args: tuple

    def __post_init__(self):
        f = FUNCTIONS.get(self.fn)
        if f is None:
            raise ValueError(f"unknown scalar function {self.fn!r}")
        if len(self.args) != f.arity:
            raise ValueError(f"{self.fn} takes {f.arity} operands, got {len(self.args)}")


def lift(x) -> Expr:
    return x if isinstance(x, Expr) else Const(x)


def call(fn: str, *args) -> Call:
    return Call(fn, tuple(lift(a) for a in args))


def select(cond, a, b) -> Call:
    """`a` where `cond` else `b`."""
    return call("select", cond, a, b)


def eq(a, b) -> Call:
    return call("eq", a, b)


def ne(a, b) -> Call:
    return call("ne", a, b)


X, Y, Z = Arg(0), Arg(1), Arg(2)
IDENTITY = X  # the expression of a view that is the identity on the element a kernel reads


def substitute(expr: Expr, operands: tuple) -> Expr:
    """`expr` with each `Arg(i)` replaced by `operands[i]` (an Expr)."""
    if isinstance(expr, Arg):
        return operands[expr.index]
    if isinstance(expr, Call):
        return Call(expr.fn, tuple(substitute(a, operands) for a in expr.args))
    return expr


def render(expr: Expr, table: Callable[[str], str], leaf: Callable[[Expr], str]) -> str:
    """Text of `expr`: each call spelled by `table(fn)` (a format string with {0}, {1},
    ...), each leaf (`Arg`, `Const`, `Ref`) by `leaf`. Renderers of text-based targets
    call this with their own table."""
    if isinstance(expr, Call):
        return table(expr.fn).format(*(render(a, table, leaf) for a in expr.args))
    return leaf(expr)


def evaluate(expr: Expr, env: dict, functions: dict) -> object:
    """The value of `expr`, each call through `functions[fn]`, leaves from `env` (an
    `Arg`, `Ref` -> value) or themselves (`Const`)."""
    if isinstance(expr, Call):
        return functions[expr.fn](*(evaluate(a, env, functions) for a in expr.args))
    if isinstance(expr, Const):
        return expr.value
    return env[expr]


# ---- reductions ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Monoid:
    """How a reduction combines elements: `combine`, an expression of the accumulator X
    and an element Y, from `identity` (for max/min of integers and bools the renderers
    start from the type's least/greatest value instead); `mean` divides the result by
    the count. NaN propagates through every float monoid here, as in PyTorch. A renderer
    accumulates any monoid through its scalar table, and may know faster forms of some."""
    name: str
    combine: Expr
    identity: object
    mean: bool = False

    def __repr__(self) -> str:
        return f"Monoid({self.name})"


SUM = Monoid("sum", X + Y, 0.0)
MEAN = Monoid("mean", X + Y, 0.0, mean=True)
PROD = Monoid("prod", X * Y, 1.0)
MAX = Monoid("max", call("max", X, Y), -math.inf)
MIN = Monoid("min", call("min", X, Y), math.inf)
ANY = Monoid("any", call("or", X, Y), False)
ALL = Monoid("all", call("and", X, Y), True)
MONOIDS = (SUM, MEAN, PROD, MAX, MIN, ANY, ALL)
