"""Symbolic sizes: `SymInt` stands for a tensor dimension during tracing.

A SymInt carries its value in this trace (the hint) and an expression over
size symbols (s0, s1, ...), kept as an integer polynomial so that
`(B * 784) // B` is just 784. What is not a polynomial (`(B // 3)`) is an atom
of one: `1 + ((B // 3) - 1)` is `(B // 3)` again, so sizes computed step by step
in a loop stay as small as what they mean. Arithmetic stays symbolic; anything that turns
a size into a Python decision — a comparison, `bool`, `int`, `range`,
indexing — records a guard (expression, value seen) with the recorder, so the
trace is reused only where that decision comes out the same.
"""
from __future__ import annotations

import math
import operator
import re
from typing import Callable

from .diagnostics import user_frame

# A polynomial: {monomial: coefficient}, a monomial a sorted tuple of symbol names
# (repeated for powers); () is the constant term.
Poly = dict


def _poly_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
        if out[m] == 0:
            del out[m]
    return out


def _poly_mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
            if out[m] == 0:
                del out[m]
    return out


def _poly_div_exact(a: Poly, b: Poly) -> Poly | None:
    """a / b when b is a single monomial dividing every term of a exactly."""
    if len(b) != 1:
        return None
    (mb, cb), = b.items()
    out: Poly = {}
    for ma, ca in a.items():
        rest = list(ma)
        for s in mb:
            if s not in rest:
                return None
            rest.remove(s)
        if ca % cb:
            return None
        out[tuple(rest)] = ca // cb
    return out


def poly_source(p: Poly) -> str:
    """Python source of a polynomial over symbol variables (deterministic)."""
    if not p:
        return "0"
    parts = []
    for m in sorted(p, key=lambda m: (-len(m), m)):
        c = p[m]
        factors = list(m)
        if c != 1 or not factors:
            factors.insert(0, str(c))
        parts.append("*".join(factors))
    return " + ".join(parts).replace("+ -", "- ")


class SymInt:
    """A tensor size that may differ between calls; see the module docstring."""

    __slots__ = ("hint", "poly", "opaque", "recorder", "terms")

    def __init__(self, hint: int, poly: Poly | None, recorder, opaque: str | None = None,
                 terms: Poly | None = None):
        self.hint = int(hint)
        self.poly = poly          # None when the expression is not a polynomial
        self.opaque = opaque      # source of a non-polynomial expression
        self.recorder = recorder
        self.terms = terms        # the opaque one as a polynomial over symbols and atoms

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def symbol(name: str, hint: int, recorder) -> "SymInt":
        return SymInt(hint, {(name,): 1}, recorder)

    def source(self) -> str:
        return self.opaque if self.poly is None else poly_source(self.poly)

    def symbols(self) -> set:
        return symbols_in(self.source())

    def substitute(self, mapping: dict) -> "SymInt | int":
        """This expression with symbols replaced (by ints, other symbol names, or size
        expressions)."""
        out: Poly = {}
        for mono, coef in _terms(self).items():
            term: Poly = {(): coef}
            for sym in mono:
                if _is_atom(sym):
                    term = _poly_mul(term, _substitute_atom(sym, mapping))
                    continue
                rep = mapping.get(sym, sym)
                rep = _terms(rep) if isinstance(rep, SymInt) else rep
                term = _poly_mul(term, rep if isinstance(rep, dict) else (
                    {(): rep} if isinstance(rep, int) else {(rep,): 1}))
            out = _poly_add(out, term)
        return make(self.hint, out, self.recorder, None)

    # ---- arithmetic stays symbolic ------------------------------------------------------
    def _binary(self, other, op: str, fn: Callable[[int, int], int], reflected=False):
        if isinstance(other, float):  # Python's float result (see `_with_float`)
            return self._with_float(other, fn, reflected)
        if isinstance(other, SymInt):
            a, b = (other, self) if reflected else (self, other)
            ov = other.hint
        elif isinstance(other, int):
            other = int(other)  # a bool is the int 0 or 1, as in Python
            a, b = (other, self) if reflected else (self, other)
            ov = other
        else:
            return NotImplemented
        hint = fn(ov, self.hint) if reflected else fn(self.hint, ov)
        pa, pb = _terms(a), _terms(b)  # atoms (non-polynomial parts) act as symbols here
        if op == "+":
            poly = _poly_add(pa, pb)
        elif op == "-":
            poly = _poly_add(pa, pb, -1)
        elif op == "*":
            poly = _poly_mul(pa, pb)
        elif op == "//":
            poly = _poly_div_exact(pa, pb)
        else:  # "%"
            poly = {} if _poly_div_exact(pa, pb) is not None else None
        if poly is None:  # a new atom, written once: later steps refer to it whole
            poly = {(f"({_src(a)} {op} {_src(b)})",): 1}
        return make(hint, poly, self.recorder, None)

    def __add__(self, o):
        return self._binary(o, "+", lambda a, b: a + b)

    def __radd__(self, o):
        return self._binary(o, "+", lambda a, b: a + b, True)

    def __sub__(self, o):
        return self._binary(o, "-", lambda a, b: a - b)

    def __rsub__(self, o):
        return self._binary(o, "-", lambda a, b: a - b, True)

    def __mul__(self, o):
        return self._binary(o, "*", lambda a, b: a * b)

    def __rmul__(self, o):
        return self._binary(o, "*", lambda a, b: a * b, True)

    def __floordiv__(self, o):
        return self._binary(o, "//", lambda a, b: a // b)

    def __rfloordiv__(self, o):
        return self._binary(o, "//", lambda a, b: a // b, True)

    def __mod__(self, o):
        return self._binary(o, "%", lambda a, b: a % b)

    def __rmod__(self, o):
        return self._binary(o, "%", lambda a, b: a % b, True)

    def _with_float(self, other: float, fn, reflected: bool):
        """`size op float` (or reflected): Python's float result for the size's value. An
        input's size is specialised (a guard: the trace is reused only for this size), so
        a float worked out from a size is never a stale constant at another size. A size
        from data (a loop index, an `n: int`) gives a 0-d tensor the program computes
        when it runs instead: guarding it would fail at the loop's next step."""
        mine = self._runtime_value()
        if mine is None:
            mine = self.specialize("float")
        return fn(other, mine) if reflected else fn(mine, other)

    def _runtime_value(self):
        """This size as a 0-d int64 tensor computed when the program runs, where it is a
        size from data being recorded by a script; else None."""
        rec = self.recorder
        if rec is None or not is_dynamic(self) or not getattr(rec, "script", 0) or \
                rec.closed or rec.aborted or rec.paused:
            return None
        return rec.size_value(self)

    def __pow__(self, o, mod=None):
        if mod is not None:
            return pow(self.specialize("int"), _int_or_special(o), _int_or_special(mod))
        if isinstance(o, int) and not isinstance(o, bool) and 0 <= o <= 64:
            out = 1
            for _ in range(o):
                out = out * self
            return out
        if isinstance(o, float) or isinstance(o, int) and o < 0:  # a float result
            return self._with_float(float(o), lambda a, b: a ** b, False)
        if isinstance(o, (int, SymInt)):  # a large or a symbolic power
            return self.specialize("int") ** _int_or_special(o)
        return NotImplemented

    def __rpow__(self, o):
        if isinstance(o, float):
            return self._with_float(o, lambda a, b: a ** b, True)
        if isinstance(o, int):
            return o ** self.specialize("int")
        return NotImplemented

    def __divmod__(self, o):
        return self // o, self % o

    def __rdivmod__(self, o):
        return o // self, o % self

    def __lshift__(self, o):
        if isinstance(o, int) and 0 <= o <= 64:
            return self * (1 << int(o))
        return self.specialize("int") << _int_or_special(o)

    def __rlshift__(self, o):
        return _int_or_special(o) << self.specialize("int")

    def __rshift__(self, o):
        if isinstance(o, int) and 0 <= o <= 64:
            return self // (1 << int(o))
        return self.specialize("int") >> _int_or_special(o)

    def __rrshift__(self, o):
        return _int_or_special(o) >> self.specialize("int")

    def __and__(self, o):
        return self.specialize("int") & _int_or_special(o)

    __rand__ = __and__

    def __or__(self, o):
        return self.specialize("int") | _int_or_special(o)

    __ror__ = __or__

    def __xor__(self, o):
        return self.specialize("int") ^ _int_or_special(o)

    __rxor__ = __xor__

    def __invert__(self):
        return -self - 1

    def __round__(self, ndigits=None):
        """round(), math.floor/ceil/trunc of an int are the int itself."""
        return self if ndigits is None or ndigits >= 0 else round(self.specialize("int"),
                                                                  ndigits)

    def __trunc__(self):
        return self

    __floor__ = __ceil__ = __trunc__

    def __abs__(self):
        """|expr|: a symbol or a sum with non-negative terms is a size already."""
        if self.poly is not None and all(c > 0 for c in self.poly.values()):
            return self
        return make(abs(self.hint), None, self.recorder, f"abs({self.source()})")

    def __truediv__(self, o):
        """True division of sizes is a Python float: the trace specialises it (guarded),
        or a script computes it when it runs (see `_with_float`)."""
        if not isinstance(o, (int, float, SymInt)):
            return NotImplemented
        mine = self._runtime_value()
        if mine is None:
            mine = self.specialize("float")
        if isinstance(o, SymInt):
            theirs = o._runtime_value()
            o = o.specialize("float") if theirs is None else theirs
        return mine / o

    def __rtruediv__(self, o):
        if not isinstance(o, (int, float)):
            return NotImplemented
        mine = self._runtime_value()
        return o / (self.specialize("float") if mine is None else mine)

    def __neg__(self):
        return self * -1

    def __pos__(self):
        return self

    # ---- decisions become guards --------------------------------------------------------
    def _compare(self, other, op: str, fn):
        if isinstance(other, float):
            other = _as_int_bound(other, op)
            if isinstance(other, bool):  # decided for every int (`s == 2.5`, `s < inf`)
                return other
            op = "<=" if op == "<" and other[1] else ">=" if op == ">" and other[1] else op
            other, fn = other[0], _COMPARE[op]
        if not isinstance(other, (int, SymInt)):
            return NotImplemented
        other = int(other) if isinstance(other, int) else other
        hint = fn(self.hint, other.hint if isinstance(other, SymInt) else other)
        if not isinstance(self - other, SymInt):  # the difference is a known constant
            return hint
        if self.recorder is None:  # no recording (a loaded or rebuilt graph): no guards
            return hint
        if is_dynamic(self) or is_dynamic(other):  # decided when the program runs
            return self.recorder.size_decision(self, op, other, hint)
        if decide(self, op, other, {}, _is_input_size) is not None:
            return hint  # true for every size (`B != -1`, `B >= 0`): nothing to guard
        self.recorder.add_shape_guard(self.source(), op, _src(other), hint)
        return hint

    def __eq__(self, o):
        return self._compare(o, "==", lambda a, b: a == b)

    def __ne__(self, o):
        return self._compare(o, "!=", lambda a, b: a != b)

    def __lt__(self, o):
        return self._compare(o, "<", lambda a, b: a < b)

    def __le__(self, o):
        return self._compare(o, "<=", lambda a, b: a <= b)

    def __gt__(self, o):
        return self._compare(o, ">", lambda a, b: a > b)

    def __ge__(self, o):
        return self._compare(o, ">=", lambda a, b: a >= b)

    def __hash__(self):
        return hash(self.hint)

    def specialize(self, why: str = "int") -> int:
        if self.recorder is None:
            return self.hint
        if is_dynamic(self):  # a size from data: checked where it is used, at run time
            self.recorder.size_check(self)
            return self.hint
        self.recorder.add_shape_guard(self.source(), "==", str(self.hint), True)
        return self.hint

    def __index__(self) -> int:
        return self.specialize("index")

    def __int__(self) -> int:
        return self.specialize("int")

    def __float__(self) -> float:
        return float(self.specialize("float"))

    def __bool__(self) -> bool:
        nonzero = self != 0
        return nonzero if isinstance(nonzero, bool) else bool(nonzero)

    def __repr__(self) -> str:
        return str(self.hint)

    def __format__(self, spec: str) -> str:
        return format(self.hint, spec)

    def __str__(self) -> str:
        return str(self.hint)


_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


def _int_or_special(x):
    """An operand of an int-only operation: a size becomes its value (guarded)."""
    return x.specialize("int") if isinstance(x, SymInt) else x


def _as_int_bound(c: float, op: str):
    """Comparing an int with the float c: the same comparison with an int, as
    (int, strict-became-inclusive), or the answer itself when it is one for every int."""
    if c != c:  # nan: only != holds
        return op == "!="
    if c in (float("inf"), float("-inf")):
        return {"==": False, "!=": True, "<": c > 0, "<=": c > 0, ">": c < 0,
                ">=": c < 0}[op]
    if c.is_integer():
        return int(c), False
    if op in ("==", "!="):
        return op == "!="
    # s < 2.5 is s <= 2; s <= 2.5 is s <= 2; s > 2.5 is s >= 3; s >= 2.5 is s >= 3
    bound = math.floor(c) if op in ("<", "<=") else math.ceil(c)
    return bound, op in ("<", ">")


_SYMBOL = re.compile(r"\b[su]\d+\b")
_DYNAMIC = re.compile(r"\bu\d+\b")


def same_dim(a, b) -> bool:
    """Whether two sizes are the same as written (a symbol by its expression)."""
    if isinstance(a, SymInt) or isinstance(b, SymInt):
        return isinstance(a, SymInt) and isinstance(b, SymInt) and a.source() == b.source()
    return a == b


def _is_input_size(sym: str) -> bool:
    return sym.startswith("s")  # an input's size: never negative


def known_same(a, b) -> bool:
    """Whether two sizes are the same as written, or two input sizes the trace's entry
    guards already hold equal (`s8 == s0`, a gradient's batch and the input's): deciding
    how they broadcast then needs no new guard."""
    if same_dim(a, b):
        return True
    sa, sb = plain_symbol(a), plain_symbol(b)
    if sa is None or sb is None or is_dynamic(a) or is_dynamic(b):
        return False
    shown = a.recorder.graph.symbols if a.recorder is not None else {}
    return sa in shown and shown.get(sa) == shown.get(sb)


def is_dynamic(size) -> bool:
    """Whether a size depends on data, a loop's iteration or a branch taken (symbols
    u0, u1, ... of script graphs): decisions on it are made when the program runs, not
    guarded once per call like those on input sizes (s0, s1, ...)."""
    return isinstance(size, SymInt) and bool(_DYNAMIC.search(size.source()))


def plain_symbol(size) -> str | None:
    """The symbol name of a size that is exactly one symbol (`s0`), else None."""
    if isinstance(size, SymInt) and size.poly is not None and len(size.poly) == 1:
        (mono, coef), = size.poly.items()
        if len(mono) == 1 and coef == 1:
            return mono[0]
    return None


def symbols_in(source: str) -> set:
    """The size symbols (`s0`, `u0`, ...) a size expression's source mentions."""
    return set(_SYMBOL.findall(source))


def rename_symbols(source: str, names: dict) -> str:
    """`source` with each size symbol that `names` names replaced by that name, in one
    pass over the text (a replacement per symbol made printing a trace of n inputs
    O(n^2): recording a 500-step loop over 1,000 inputs took 3.9 s so, 1.3 s now; and a
    name that is itself a symbol is not renamed again)."""
    return _SYMBOL.sub(lambda m: names.get(m.group(0), m.group(0)), source)


def _as_poly(x) -> Poly | None:
    if isinstance(x, SymInt):
        return x.poly
    return {(): x} if x else {}


def _src(x) -> str:
    """Source of an operand, parenthesised unless it is one symbol or a number, so that
    it keeps its meaning inside a larger expression (`(s0 - 1) // 2`)."""
    if not isinstance(x, SymInt):
        return f"({x})" if x < 0 else str(x)
    src = x.source()
    return src if re.fullmatch(r"\w+|\(.*\)", src) and _balanced(src) else f"({src})"


def _balanced(src: str) -> bool:
    """Whether an outer pair of parentheses (if any) encloses the whole expression."""
    if not src.startswith("("):
        return True
    depth = 0
    for k, ch in enumerate(src):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k < len(src) - 1:
            return False
    return True


# A size expression longer than this is refused: the trace is dropped and the call runs
# eagerly (sizes recomputed from themselves each step of a Python loop, in ways that do
# not simplify, would otherwise double the guards and kernels' size code every step).
MAX_SOURCE = 2000


def make(hint: int, poly: Poly | None, recorder, opaque: str | None) -> "SymInt | int":
    """A SymInt, or a plain int when the expression turned out constant. `poly` may have
    atoms among its factors (then the size is opaque, its source the polynomial's)."""
    if poly is not None and all(m == () for m in poly):
        return poly.get((), 0)
    terms = None
    if poly is not None and any(_is_atom(f) for m in poly for f in m):
        terms, poly, opaque = poly, None, poly_source(poly)
    size = SymInt(hint, poly, recorder, opaque, terms)
    # (a polynomial's length is estimated from its factors, without printing it)
    length = len(opaque) if poly is None else 4 * sum(len(m) + 1 for m in poly)
    if length > MAX_SOURCE and getattr(recorder, "closed", True) is False:
        return _refuse_large(size)
    return size


def _refuse_large(size: SymInt) -> int:
    """Stop recording (the rest of the call runs eagerly, the function is not traced) and
    go on with the size's value."""

    src = size.source()
    size.recorder.abort(
        f"a size expression grew past {MAX_SOURCE} characters at {user_frame()} "
        f"({src[:60]} ...): a size recomputed from itself step by step in a Python loop; "
        "make that size static (`int(...)`, guarded once) or keep the loop in tj.script, "
        "where a loop is recorded once")
    return size.hint


def _is_atom(factor: str) -> bool:
    """Whether a polynomial's factor is a non-polynomial expression (else a symbol)."""
    return "(" in factor


def _atom(src: str) -> str:
    """An opaque expression as one factor: parenthesised unless it already is one group
    (`(s0 // 3)`) or one call (`min(u0, 4)`)."""
    if src.startswith("(") and _balanced(src):
        return src
    m = re.match(r"\w+\(", src)
    if m is not None and src.endswith(")") and _balanced(src[m.end() - 1:]):
        return src
    return f"({src})"


def _terms(x) -> Poly:
    """x as a polynomial over symbols and atoms."""
    if not isinstance(x, SymInt):
        return {(): x} if x else {}
    if x.poly is not None:
        return x.poly
    return x.terms if x.terms is not None else {(_atom(x.opaque),): 1}


def _substitute_atom(atom: str, mapping: dict) -> Poly:
    """An atom with symbols replaced (`mapping` as for `SymInt.substitute`), as a
    polynomial: a constant when no symbol is left in it."""
    def rep(m):
        r = mapping.get(m.group(), m.group())
        return r if isinstance(r, str) else _src(r)
    text = _SYMBOL.sub(rep, atom)
    if not _SYMBOL.search(text):  # our own arithmetic on integers (and abs/min/max)
        value = eval(text, {"__builtins__": {"abs": abs, "min": min, "max": max}})  # noqa: S307
        return {(): int(value)} if value else {}
    return {(_atom(text),): 1}


def map_leaves(x, kind: type, fn):
    """Apply fn to every `kind` object inside nested tuples, lists and slices (attributes)."""
    if isinstance(x, kind):
        return fn(x)
    if type(x) is tuple:
        return tuple(map_leaves(v, kind, fn) for v in x)
    if type(x) is list:
        return [map_leaves(v, kind, fn) for v in x]
    if type(x) is slice:
        return slice(map_leaves(x.start, kind, fn), map_leaves(x.stop, kind, fn),
                     map_leaves(x.step, kind, fn))
    return x


def hint_of(x):
    """The concrete value of every SymInt in x (no guard)."""
    return map_leaves(x, SymInt, _hint)


def _hint(s: SymInt) -> int:
    return s.hint


def has_sym(x) -> bool:
    found = []
    map_leaves(x, SymInt, found.append)
    return bool(found)


# ---- deciding comparisons from known bounds ---------------------------------------------------
def _bound(poly: Poly, ranges: dict, upper: bool) -> Poly:
    """`poly` with each ranged symbol (appearing linearly) replaced by the end of its range
    that makes the expression largest (upper) or smallest."""
    for _ in range(4):  # ranges may mention other ranged symbols (nested loops)
        out: Poly = {}
        changed = False
        for mono, coef in poly.items():
            if len(mono) == 1 and mono[0] in ranges:
                lo, hi = ranges[mono[0]]
                pick = hi if (coef > 0) == upper else lo
                out = _poly_add(out, _poly_mul({(): coef}, pick))
                changed = True
            else:
                out = _poly_add(out, {mono: coef})
        poly = out
        if not changed:
            break
    return poly


def _const_bound(poly: Poly, nonneg, upper: bool):
    """A constant c with poly <= c (upper) or poly >= c, or None, knowing the symbols in
    `nonneg` are >= 0."""
    const = poly.get((), 0)
    for mono, coef in poly.items():
        if mono == ():
            continue
        if not all(nonneg(s) for s in mono) or (coef > 0) == upper:
            return None
    return const


def decide(lhs, op: str, rhs, ranges: dict, nonneg) -> bool | None:
    """`lhs op rhs` for every value the sizes can take, if the bounds prove it: loop
    indices within their ranges (`ranges`: symbol -> (first, last) polynomials), and the
    symbols `nonneg(sym)` says are sizes (>= 0). None when it depends on the values."""
    a, b = _as_poly(lhs), _as_poly(rhs)
    if a is None or b is None:
        return None
    d = _poly_add(a, b, -1)
    ub = _const_bound(_bound(d, ranges, True), nonneg, True)
    lb = _const_bound(_bound(d, ranges, False), nonneg, False)
    if op == "<":
        return True if ub is not None and ub < 0 else (False if lb is not None and lb >= 0
                                                      else None)
    if op == "<=":
        return True if ub is not None and ub <= 0 else (False if lb is not None and lb > 0
                                                       else None)
    if op == ">":
        return decide(rhs, "<", lhs, ranges, nonneg)
    if op == ">=":
        return decide(rhs, "<=", lhs, ranges, nonneg)
    if op in ("==", "!="):
        differ = (ub is not None and ub < 0) or (lb is not None and lb > 0)
        if differ:
            return op == "!="
        return None
    return None


# ---- size expressions evaluated at run time ---------------------------------------------------
class SizeExpr:
    """A size expression compiled once, evaluated per call against the size symbols."""

    __slots__ = ("code",)

    def __init__(self, sym: SymInt):
        self.code = compile(sym.source(), "<size>", "eval")


def compile_sizes(x):
    """`x` (a value, tuple or list of them) with each SymInt compiled to a SizeExpr."""
    return map_leaves(x, SymInt, SizeExpr)


def eval_sizes(x, env: dict):
    """`x` from compile_sizes with each SizeExpr evaluated against the symbols in env."""
    return map_leaves(x, SizeExpr, lambda e: eval(e.code, {}, env))  # noqa: S307 — our own
