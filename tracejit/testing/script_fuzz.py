"""A differential fuzzer for script mode: random `@tj.script`-able programs, compiled from
their source and called several times with other sizes, counts and values, compared with
the same source run eagerly (values, dtypes, shapes, exceptions, gradients, side effects).

Programs are written in the script subset (docs/script.md): `for i in range(...)` with
trip counts from sizes, int arguments and tensor values, `while` on ints and tensors,
`break`/`continue`, early returns, `if` on tensor values and on ints, int and float
arithmetic with loop indices, lists of tensors (append, index, item assignment),
`out[i] =` writes, plain and scripted helpers, closure variables, globals and module
attributes changed between calls. Each construct class has a name (`CONSTRUCTS`) and can
be switched off, so that a class with a known bug can be set aside while the rest is
fuzzed. A `ScriptError` that names the user's construct, or an error script mode raises
by design naming the program's line (`REFUSAL_ERRORS`), is a refusal (counted apart); any
other difference from eager is a mismatch, reported with the program, seed and call.

    python -m tracejit fuzz --script --n 200 --seed 1
"""
from __future__ import annotations

import ast
import linecache
import random
import re
import symtable
import textwrap
import warnings
from dataclasses import dataclass, field

import numpy as np

from .differential import compare, outcome
import tracejit as tj
from tracejit import nn
from tracejit.jit import ScriptError

FEATURES = 3  # the last dimension of x, the length of w

# construct classes the generator can use: name -> what it emits
CONSTRUCTS = {
    "for": "for i in range(...) with counts from n, x.shape[0] and tensor values",
    "while": "while on an int counter, or on a tensor value (capped)",
    "break": "if ...: break inside a loop",
    "continue": "if ...: continue inside a loop",
    "nested_exit": "break or continue inside an if inside an if of the loop body",
    "return": "an early return inside an if at the top level",
    "int_output": "an int (n, a counter) among the outputs",
    "alias": "copies written x * 1.0, and the input x itself among the outputs",
    "nested_return": "an early return inside an if inside an if",
    "if_tensor": "if/else on a tensor value (x.sum() > 0)",
    "if_int": "if/else on an int (n, a loop index, a counter)",
    "int_arith": "ints changed with +, *, //, % (negative operands too)",
    "int_tensor": "an int (n, a loop index, a counter) as a number in tensor arithmetic",
    "float_index": "float arithmetic with a loop index or int (i * 0.25 + x)",
    "list": "lists of tensors: append in loops, index, stack, cat, len",
    "list_setitem": "item assignment in a list of tensors (xs[0] = ...)",
    "out_setitem": "out[i] = ... writes into a tensor inside a loop",
    "helper": "calls of a plain helper function with control flow",
    "scripted_helper": "calls of another tj.script function (an int argument)",
    "closure": "a closure variable C read by the program",
    "global": "globals G (float), GN (int), GT (tensor) read by the program",
    "module": "an nn.Module program: a Linear, a float and an int attribute",
    "grad": "inputs that require grad, backward of a weighted sum of the outputs",
    "mutate_global": "globals G, GN and GT changed between calls",
    "mutate_closure": "the closure variable C changed between calls",
    "mutate_module": "the module's float and int attributes changed between calls",
    "index_after_loop": "a loop index read after its loop",
    "loop_local_after": "a variable first assigned inside a loop, read after it",
    "side_effect": "a Python side effect (LOG.append) the program makes on each call",
}
ALL = frozenset(CONSTRUCTS)
# known bug classes in script mode today (construct -> symptom): switched off by default
# so that the rest is fuzzed; `fuzz(..., constructs=ALL)` turns them back on
KNOWN_BUGGY = {
    "out_setitem": "a write into a value saved for backward (`o = t.tanh()`, then "
                   "`o[i] = ...`) on a path the recording call did not take: eager's "
                   "backward raises 'modified by an inplace operation', a later scripted "
                   "call's backward gives gradients (1 call in 2,813 with --all)",
}
# constructs script mode refuses by design (docs/script.md, "What is refused"): every
# program using one is refused (a clear error naming its line), so they are off by
# default (they would leave little else fuzzed) and on with `--all`, counted as refusals
REFUSED = {
    "list_setitem": "item assignment to a list that a loop or a branch on a tensor builds: "
                    "ScriptError naming the line",
    "index_after_loop": "a loop index with no value before its loop, read after it: "
                        "UnboundLocalError naming the line that reads it and the loop",
    "loop_local_after": "a variable assigned only inside a loop is not defined after it: "
                        "UnboundLocalError naming the line that reads it and the loop",
    "side_effect": "LOG.append(...) on a global list: ScriptError naming the line, at the "
                   "first call",
}
DEFAULT = ALL - set(KNOWN_BUGGY) - set(REFUSED)


@dataclass
class Program:
    source: str
    seed: int
    module: bool = False
    dtype: str = "float64"
    constructs: frozenset = frozenset()  # the constructs this program really uses


_HELPERS = [  # a plain helper with control flow of its own
    "def HP(t):\n    if t.sum() > 0:\n        return t.tanh() * 2.0\n    return t * 0.5 - 1.0\n",
    "def HP(t):\n    u = t * 0.5\n    for j in range(t.shape[0]):\n        u = u + t[j].sin()\n"
    "    return u\n",
    "def HP(t):\n    k = 0\n    while k < 2:\n        t = (t + 0.5).tanh()\n        k += 1\n"
    "    return t\n",
]
_SCRIPTED = [  # another scripted function, with an int argument that is data
    "def HS(t, k: int):\n    for j in range(k % 3):\n        t = t * 0.5 + j\n    return t\n",
    "def HS(t, k: int):\n    if k > 2:\n        return t.sigmoid() * k\n    return t - k\n",
    "def HS(t, k: int):\n    hs = [t]\n    for j in range(k % 4):\n"
    "        hs.append(hs[-1].tanh() + 0.25)\n    return tj.stack(hs).sum(0)\n",
]


class _Gen:
    """Builds a random program body over row tensors of shape [B, FEATURES], ints, and
    lists of row tensors, keeping every name defined where it is read."""

    def __init__(self, rng: random.Random, on: frozenset, module: bool):
        self.rng, self.on, self.module = rng, on, module
        self.lines: list[str] = []
        self.depth = 0          # indentation
        self.scopes = [{"row": ["x"], "int": ["n"], "list": []}]
        self.loops: list[dict] = []  # enclosing loops: index name, kind, ifs around it
        self.ifs = 0            # enclosing ifs (for nested returns)
        self.count = 0
        self.used: set[str] = set()
        self.ret = ["row", rng.choice(["row", "scalar"])]
        if self.can("int_output") and rng.random() < 0.5:
            self.ret.append("int")
        # a copy the passes may fold into its operand: an output must still be a new tensor
        self.copy = " * 1.0" if self.can("alias") else " * 1.5"

    # ---- bookkeeping -----------------------------------------------------------------
    def new(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def visible(self, kind: str) -> list[str]:
        return [v for s in self.scopes for v in s[kind]]

    def define(self, kind: str, name: str) -> None:
        if name not in self.visible(kind):
            self.scopes[-1][kind].append(name)

    def can(self, construct: str) -> bool:
        return construct in self.on

    def use(self, construct: str) -> None:
        self.used.add(construct)

    def open(self, line: str) -> None:
        self.emit(line)
        self.depth += 1
        self.scopes.append({"row": [], "int": [], "list": []})

    def close(self) -> dict:
        self.depth -= 1
        return self.scopes.pop()

    def row(self) -> str:
        rows = self.visible("row")
        return self.rng.choice(rows[-3:] if len(rows) > 3 else rows)

    def held(self) -> str:
        """A row to return or keep in a list: the input x itself only where outputs that
        are inputs (aliasing) are fuzzed."""
        rows = [v for v in self.visible("row") if v != "x" or self.can("alias")]
        return self.rng.choice(rows[-3:]) if rows else f"x{self.copy}"

    def int_(self) -> str:
        return self.rng.choice(self.visible("int"))

    # ---- expressions -----------------------------------------------------------------
    def row_expr(self) -> str:
        r, a, b = self.rng, self.row(), self.row()
        forms = [f"{a} * {b}.tanh()", f"{a} + {b} * 0.5", f"{a}.tanh() * 1.5",
                 f"{a}.sigmoid() * {b}",
                 # not a - a.mean(): its sum is rounding noise, and a branch on it a coin
                 f"{a} - {a}.mean() * 0.5", f"({a} * 0.5).sin() + {b}"]
        forms += [f"{a} * w", f"({a} + w).tanh()"]
        forms += [f"self.lin({a}).tanh()", f"{a} * self.scale"] if self.module else \
            [f"({a} @ W).tanh()"]
        if self.can("global"):
            forms += [f"{a} * G", f"{a} + GT"]
        if self.can("closure"):
            forms.append(f"{a} * C")
        if self.can("helper"):
            forms.append(f"HP({a})")
        if self.can("scripted_helper"):
            forms.append(f"HS({a}, {self.int_()})")
        if self.can("int_tensor"):
            k = self.int_()
            forms += [f"{a} * ({k} % 3 + 1)", f"{a} + {k}"]
        if self.can("float_index"):
            k = self.int_()
            forms += [f"{a} + {k} * 0.25", f"{a} * (0.5 + {k} / 4)"]
        expr = r.choice(forms)
        for tag, marks in (("global", (" * G", " + GT")), ("closure", (" * C",)),
                           ("helper", ("HP(",)), ("scripted_helper", ("HS(",)),
                           ("int_tensor", ("% 3 + 1)",)), ("float_index", ("* 0.25", "/ 4)"))):
            if any(m in expr for m in marks):
                self.use(tag)
        if re.search(r"\+ [kijn][0-9]*$", expr):
            self.use("int_tensor")
        return expr

    def tensor_cond(self) -> str:
        a = self.row()
        self.use("if_tensor")
        return self.rng.choice([f"{a}.sum() > 0", f"{a}.mean() < 0.25", f"({a} > 1).any()",
                                f"{a}.norm() > 2.0"])

    def int_cond(self) -> str:
        k = self.int_()
        self.use("if_int")
        return self.rng.choice([f"{k} % 2 == 0", f"{k} > 2", f"{k} < n", "x.shape[0] > 2",
                                f"{k} == n - 1"])

    def cond(self) -> str:
        kinds = [c for c in ("if_tensor", "if_int") if self.can(c)]
        if not kinds:
            return "n > 1"
        return self.tensor_cond() if self.rng.choice(kinds) == "if_tensor" else self.int_cond()

    def int_expr(self) -> str:
        k, m = self.int_(), self.int_()
        bounded = [f"({k} * 3 + {m}) % 7", f"({k} - 4) // 3", f"({k} - 5) % 4",
                   f"({k} + {m}) % 5", f"-{k} // 2"]
        if self.loops:  # a loop repeats it: values stay small (Python ints do not wrap)
            return self.rng.choice(bounded)
        return self.rng.choice(bounded + [f"{k} + {m}", f"{k} * 2 - {m}",
                                          f"x.shape[0] + {k}"])

    def ret_tuple(self) -> str:
        parts = []
        for kind in self.ret:
            if kind == "row":
                parts.append(self.held())
            elif kind == "scalar":
                parts.append(f"{self.row()}.sum()")
            else:
                parts.append(self.int_())
        return ", ".join(parts)

    # ---- statements ------------------------------------------------------------------
    def block(self, budget: int) -> None:
        for _ in range(budget):
            self.stmt()

    def stmt(self) -> None:
        r = self.rng
        kinds = ["assign", "assign", "update"]
        deep = len(self.loops) + self.ifs
        if deep < 3:
            kinds += [k for k in ("if_tensor", "if_int") if self.can(k)]
        if deep < 3 and len(self.loops) < 2:  # two nested loops at most: calls stay quick
            kinds += [k for k in ("for", "while") if self.can(k)] * 2
        if self.can("int_arith"):
            kinds.append("int")
        exits = self.loops and (self.ifs == self.loops[-1]["ifs"] or self.can("nested_exit"))
        if exits and self.can("break"):
            kinds.append("break")
        if exits and self.can("continue"):
            kinds.append("continue")
        if not self.loops and self.can("return") and (self.ifs == 0 or
                                                      self.can("nested_return")):
            kinds.append("return")
        if self.can("side_effect"):
            kinds.append("side_effect")
        kind = r.choice(kinds)
        getattr(self, f"s_{kind}")()

    def s_assign(self) -> None:
        v = self.new("h")
        self.emit(f"{v} = {self.row_expr()}")
        self.define("row", v)

    def s_update(self) -> None:  # an existing name changes: carried through loops and ifs
        rows = [v for v in self.visible("row") if v != "x"] or ["x"]
        v = self.rng.choice(rows)
        if v == "x":
            v = self.new("h")
            self.emit(f"{v} = x{self.copy}")
            self.define("row", v)
            return
        self.emit(f"{v} = {self.row_expr()}")

    def s_int(self) -> None:
        if self.loops and self.rng.random() < 0.6:
            ints = [k for k in self.visible("int") if k != "n" and
                    k not in {lp["index"] for lp in self.loops}]
            if ints:
                k = self.rng.choice(ints)
                self.emit(f"{k} = {self.int_expr()}")
                self.use("int_arith")
                return
        k = self.new("k")
        self.emit(f"{k} = {self.int_expr()}")
        self.define("int", k)
        self.use("int_arith")

    def s_if_tensor(self) -> None:
        self._if(self.tensor_cond())

    def s_if_int(self) -> None:
        self._if(self.int_cond())

    def _if(self, cond: str) -> None:
        self.ifs += 1
        self.open(f"if {cond}:")
        self.block(self.rng.randint(1, 2))
        self.close()
        if self.rng.random() < 0.6:
            self.open("else:")
            self.block(self.rng.randint(1, 2))
            self.close()
        self.ifs -= 1

    def s_return(self) -> None:
        self.use("return")
        if self.ifs:
            self.use("nested_return")
        self.open(f"if {self.cond()}:")
        self.emit(f"return {self.ret_tuple()}")
        self.close()

    def _exit_used(self, kind: str) -> None:
        self.use(kind)
        if self.ifs > self.loops[-1]["ifs"]:
            self.use("nested_exit")

    def s_break(self) -> None:
        self._exit_used("break")
        self.open(f"if {self.cond()}:")
        self.emit("break")
        self.close()

    def s_continue(self) -> None:
        loop = self.loops[-1]
        self._exit_used("continue")
        self.open(f"if {self.cond()}:")
        if loop["kind"] == "while":
            self.emit(f"{loop['index']} += 1")
        self.emit("continue")
        self.close()

    def s_side_effect(self) -> None:
        self.use("side_effect")
        self.emit(f"LOG.append({self.int_()})")

    def _bound(self, at_least_one: bool) -> tuple[str, bool]:
        """A range(...) argument list and whether every index is below x.shape[0]."""
        r = self.rng
        if r.random() < 0.3:
            return "x.shape[0]", True
        forms = ["n", "n % 3 + 1", "1, n + 1", "x.shape[0] - 1", "2, x.shape[0] + 1"]
        if r.random() < 0.3:  # a count read from a tensor's value
            forms = [f"int({self.row()}.abs().sum()) % 3"]
        if self.can("global"):
            forms.append("GN")
        if self.module:
            forms.append("self.steps")
        bound = r.choice(forms)
        if at_least_one:  # eager reads the index or a loop's local after the loop
            bound = r.choice(["n % 3 + 1", "n + 1"])
        if bound == "GN":
            self.use("global")
        return bound, False

    def s_for(self) -> None:
        r = self.rng
        self.use("for")
        after_index = self.can("index_after_loop") and r.random() < 0.2
        loop_local = self.can("loop_local_after") and r.random() < 0.2
        bound, below_b = self._bound(after_index or loop_local)
        i = self.new("i")
        acc = out = None
        if self.can("list") and r.random() < 0.4:
            acc = self.new("hs")
            self.emit(f"{acc} = [{self.held()}]")
            self.use("list")
        if below_b and self.can("out_setitem") and r.random() < 0.5:
            out = self.new("o")
            self.emit(f"{out} = " + r.choice(["x * 0.0", "tj.zeros_like(x)",
                                               f"{self.row()}{self.copy}"]))
            self.define("row", out)
            self.use("out_setitem")
        self.loops.append({"index": i, "kind": "for", "ifs": self.ifs})
        self.open(f"for {i} in range({bound}):")
        self.define("int", i)
        local = None
        if loop_local:  # first in the body: no break or continue skips it
            local = self.new("t")
            self.emit(f"{local} = {self.row_expr()}")
        self.block(r.randint(1, 3))
        if out is not None:
            a, b = self.row(), self.row()
            self.emit(f"{out}[{i}] = " + r.choice([
                f"{a}[{i}] * 2.0 + {b}[{i}]", f"({a}[{i}] * w).tanh()",
                f"{out}[{i}] * 0.5 + {a}[{i}]"]))
        if acc is not None:
            self.emit(f"{acc}.append({self.row_expr()})")
            if self.can("list_setitem") and r.random() < 0.3:
                self.emit(f"{acc}[{i} % len({acc})] = {acc}[-1] * 0.5")
                self.use("list_setitem")
        self.close()
        self.loops.pop()
        if acc is not None:
            self._use_list(acc)
        if after_index:
            self.use("index_after_loop")
            v = self.new("h")
            self.emit(f"{v} = {self.row()} * ({i} + 1)")
            self.define("row", v)
        if local is not None:
            self.use("loop_local_after")
            v = self.new("h")
            self.emit(f"{v} = {local} + {self.row()}")
            self.define("row", v)

    def _use_list(self, acc: str) -> None:
        r, v = self.rng, self.new("h")
        self.emit(f"{v} = " + r.choice([f"tj.stack({acc}).sum(0)", f"{acc}[-1] + {acc}[0]",
                                        f"{acc}[len({acc}) // 2] * 2.0",
                                        f"tj.cat({acc}, 0)[:x.shape[0]]",
                                        f"{acc}[n % len({acc})]"]))
        self.define("row", v)
        if self.can("int_arith") and "int" in self.ret and r.random() < 0.3:
            k = self.new("k")
            self.emit(f"{k} = len({acc})")
            self.define("int", k)
        if self.can("list_setitem") and r.random() < 0.3:
            self.use("list_setitem")
            self.emit(f"{acc}[0] = {acc}[-1] * 0.5")
            v2 = self.new("h")
            self.emit(f"{v2} = tj.stack({acc}).mean(0)")
            self.define("row", v2)

    def s_while(self) -> None:
        r = self.rng
        self.use("while")
        j = self.new("j")
        self.emit(f"{j} = 0")
        self.define("int", j)
        if r.random() < 0.5 or not self.can("if_tensor"):
            cond = f"{j} < " + r.choice(["n", "n % 3 + 1", "x.shape[0]", "3"])
            h = None
        else:
            h = self.new("h")
            self.emit(f"{h} = {self.row()}{self.copy}")
            self.define("row", h)
            cond = f"{j} < 6 and {h}.abs().sum() < 8.0"
            self.use("if_tensor")
        self.loops.append({"index": j, "kind": "while", "ifs": self.ifs})
        self.open(f"while {cond}:")
        if h is not None:
            self.emit(f"{h} = {h} * 1.5 + 0.25")
        self.block(r.randint(1, 2))
        self.emit(f"{j} += 1")
        self.close()
        self.loops.pop()


def generate(seed: int, constructs=DEFAULT) -> Program:
    """The random program of one seed over the enabled constructs (the same program for
    the same seed and constructs)."""
    rng = random.Random(seed)
    on = frozenset(constructs)
    module = "module" in on and rng.random() < 0.25
    gen = _Gen(rng, on, module)
    for _ in range(rng.randint(3, 6)):
        gen.stmt()
    gen.emit(f"return {gen.ret_tuple()}")
    body = "\n".join(gen.lines)
    helpers = ("helper" in gen.used and _HELPERS[rng.randrange(len(_HELPERS))] or "") + \
        ("scripted_helper" in gen.used and _SCRIPTED[rng.randrange(len(_SCRIPTED))] or "")
    if module:
        gen.used.add("module")
        inner = ("class Model(nn.Module):\n"
                 "    def __init__(self):\n"
                 "        super().__init__()\n"
                 f"        self.lin = nn.Linear({FEATURES}, {FEATURES})\n"
                 "        self.scale = 0.5\n"
                 "        self.steps = 2\n\n"
                 "    def forward(self, x, w, n: int):\n" + textwrap.indent(body, " " * 8))
    else:
        inner = "def program(x, w, n: int):\n" + textwrap.indent(body, "    ")
    # a closure variable C: the program is defined inside a function that holds it
    source = (helpers + ("\n" if helpers else "") + "def make(C):\n" +
              textwrap.indent(inner, "    ") +
              f"\n    return {'Model' if module else 'program'}\n")
    dtype = rng.choice(["float64"] * 3 + ["float32"])
    if "grad" in on:
        gen.used.add("grad")
    if "int" in gen.ret:
        gen.used.add("int_output")
    for mutation, read in (("mutate_global", "global"), ("mutate_closure", "closure"),
                           ("mutate_module", "module")):
        if mutation in on and read in gen.used:  # changed between calls: see _between_calls
            gen.used.add(mutation)
    if "alias" in on and ("* 1.0" in body or re.search(r"return (x,|.*, x,|.*, x$)|\[x\]",
                                                       body, re.M)):
        gen.used.add("alias")
    return Program(source, seed, module, dtype, frozenset(gen.used))


# ---- running a program ----------------------------------------------------------------------
@dataclass
class Report:
    programs: int = 0
    calls: int = 0
    mismatches: list = field(default_factory=list)  # (seed, backend, call, diff, source)
    refused: list = field(default_factory=list)     # (seed, backend, call, message)
    rounding: int = 0  # float32 calls apart only within 10x the tolerance (rounding)

    def __str__(self) -> str:
        return (f"{self.programs} programs, {self.calls} scripted calls compared with eager, "
                f"{len(self.mismatches)} mismatches, {len(self.refused)} programs refused "
                f"with a clear error (a ScriptError, or a refusal by design naming the line); "
                f"{self.rounding} float32 calls apart only within 10x the tolerance (rounding)")


def _namespaces(prog: Program, backend: str):
    """The program's source run twice: as plain Python (the oracle: helpers plain too) and
    with HS scripted; both read the same W, and the same values of G, GN, GT and C."""
    filename = f"<script fuzz {prog.seed}>"
    # tj.script reads the source through inspect, which finds it in linecache
    linecache.cache[filename] = (len(prog.source), None, prog.source.splitlines(True),
                                 filename)
    dtype = tj.dtype_from_name(prog.dtype)
    shared = {"W": (tj.randn(FEATURES, FEATURES) * 0.5).to(dtype).requires_grad_(),
              "GT": tj.randn(FEATURES, dtype=dtype)}
    spaces = []
    for scripted in (False, True):
        ns = {"tj": tj, "nn": nn, "G": 2.0, "GN": 2, "LOG": [], **shared}
        exec(compile(prog.source, filename, "exec"), ns)  # noqa: S102 — our own source
        if scripted and "HS" in ns:
            ns["HS"] = tj.script(ns["HS"], backend=backend)
        spaces.append(ns)
    return spaces, filename


def _inputs(rng: np.random.Generator, dtype: str, grad: bool):
    batch = int(rng.choice([0, 1, 2, 3, 3, 4, 5, 6], p=[.04, .12, .2, .16, .16, .12, .1, .1]))
    x = tj.from_numpy((rng.standard_normal((batch, FEATURES)) * 1.2).astype(dtype))
    w = tj.from_numpy((rng.standard_normal(FEATURES) * 0.8).astype(dtype))
    if grad:
        x.requires_grad_(rng.random() < 0.5)
        w.requires_grad_(rng.random() < 0.7)
    return x, w, int(rng.choice([0, 1, 2, 3, 4, 5, 7]))


def _fresh(args):
    x, w, n = args
    return tuple(tj.from_numpy(t.detach().numpy().copy()).requires_grad_(t.requires_grad)
                 for t in (x, w)) + (n,)


def _clear(message: str) -> bool:
    """Whether a ScriptError's message is about the user's code: one that shows the
    converter's own names (`__tj_...`, `<undefined ...>`) is not a clear refusal."""
    return "__tj" not in message and "<undefined" not in message


# errors other than ScriptError that script mode raises by design where eager runs on
# (docs/script.md): error type -> what its message says. With the program's file:line at
# the start of the message, such an error is a refusal, not a mismatch
REFUSAL_ERRORS = {
    # a variable assigned only inside a loop, read after it (the loop may run no time)
    "UnboundLocalError": "is not defined here: it is assigned inside the loop at",
}


def _refusal(res, filename: str) -> bool:
    """Whether a scripted call's error is a clear refusal: a ScriptError about the
    user's code, or an error of REFUSAL_ERRORS naming the program's line."""
    if res.error == "ScriptError":
        return _clear(res.message)
    says = REFUSAL_ERRORS.get(res.error)
    return says is not None and res.message.startswith(f"{filename}:") and \
        says in res.message and _clear(res.message)


def run_program(seed: int, backend: str, calls: int = 5, report: Report | None = None,
                constructs=DEFAULT) -> Report:
    """Script program `seed`, call it `calls` times and compare each call with eager."""
    return check(generate(seed, constructs), backend, calls, report)


def check(prog: Program, backend: str, calls: int = 5, report: Report | None = None) -> Report:
    """Script `prog`, call it `calls` times and compare each call with eager; the calls'
    inputs and what changes between them come from the program's seed."""
    report = report or Report()
    seed = prog.seed
    rng = np.random.default_rng(seed)
    tj.manual_seed(seed)
    (eager_ns, script_ns), filename = _namespaces(prog, backend)
    try:
        eager = eager_ns["make"](1.25)
        target = script_ns["make"](1.25)
        params_e = params_s = [eager_ns["W"]]
        if prog.module:
            eager, target = eager().to(tj.dtype_from_name(prog.dtype)), \
                target().to(tj.dtype_from_name(prog.dtype))
            with tj.no_grad():
                for pe, ps in zip(eager.parameters(), target.parameters()):
                    ps.copy_(pe)
            params_e, params_s = list(eager.parameters()), list(target.parameters())
        report.programs += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scripted = tj.script(target, backend=backend)
        except Exception as err:  # noqa: BLE001 — a refusal, or a crash of the converter
            return _failed(report, prog, backend, "script()", err)
        grad = "grad" in prog.constructs
        for call in range(calls):
            args = _inputs(rng, prog.dtype, grad)
            grad_mode = grad and rng.random() < 0.85
            results = []
            for runner, params, ns in ((eager, params_e, eager_ns),
                                       (scripted, params_s, script_ns)):
                del ns["LOG"][:]
                with warnings.catch_warnings(), tj.set_grad_enabled(grad_mode):
                    warnings.simplefilter("ignore")
                    res = outcome(runner, _fresh(args), params=params)
                res.log = list(ns["LOG"])
                results.append(res)
            report.calls += 1
            if results[1].error != results[0].error and _refusal(results[1], filename):
                report.refused.append((seed, backend, call, results[1].message))
                return report
            diff = compare(*results)
            if diff is not None and prog.dtype == "float32" and \
                    compare(*results, values=False) is None and \
                    compare(*results, rtol=2e-3, atol=2e-4) is None:
                report.rounding += 1
                diff = None
            if diff is None and results[0].log != results[1].log:
                diff = f"side effects: eager LOG {results[0].log}, scripted {results[1].log}"
            if diff is not None:
                shown = (f"x {tuple(args[0].shape)} requires_grad={args[0].requires_grad}, "
                         f"w requires_grad={args[1].requires_grad}, n={args[2]}, "
                         f"grad_mode={grad_mode}")
                report.mismatches.append((seed, backend, call, f"{diff}\n  call: {shown}",
                                          prog.source))
                return report
            _between_calls(rng, prog, (eager_ns, script_ns), (eager, target))
    finally:
        linecache.cache.pop(filename, None)
    return report


def _failed(report: Report, prog: Program, backend: str, call, err: Exception) -> Report:
    if isinstance(err, ScriptError) and _clear(str(err)):
        report.refused.append((prog.seed, backend, call, str(err)[:300]))
    else:
        report.mismatches.append((prog.seed, backend, call, f"{type(err).__name__}: "
                                  f"{str(err)[:300]}", prog.source))
    return report


def _between_calls(rng, prog: Program, spaces, objs) -> None:
    """What a program's user does between calls: an optimiser step, a changed setting."""
    on = prog.constructs
    r = rng.random()
    with tj.no_grad():
        if r < 0.3:  # an SGD-like update of the shared W (and the modules' weights)
            spaces[0]["W"].sub_(spaces[0]["W"] * 0.1)
            if prog.module:
                for obj in objs:
                    for p in obj.parameters():
                        p.sub_(p * 0.1)
        elif r < 0.45 and "mutate_global" in on:
            g, gn = float(rng.choice([2.0, -1.0, 0.5])), int(rng.choice([0, 1, 3]))
            gt = tj.randn(FEATURES, dtype=tj.dtype_from_name(prog.dtype))
            for ns in spaces:
                ns["G"], ns["GN"], ns["GT"] = g, gn, gt
        elif r < 0.6 and "mutate_closure" in on:
            c = float(rng.choice([1.25, -0.5, 3.0]))
            for obj in objs:
                fn = type(obj).forward if prog.module else obj
                for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                    if name == "C":
                        cell.cell_contents = c
        elif r < 0.75 and prog.module and "mutate_module" in on:
            scale, steps = float(rng.choice([0.5, -1.5, 2.0])), int(rng.choice([0, 1, 3]))
            for obj in objs:
                obj.scale, obj.steps = scale, steps


def fuzz(n: int, seed: int = 0, backends=("interpret",), calls: int = 5,
         constructs=DEFAULT, verbose: bool = False) -> dict:
    """Run `n` programs per backend from `seed`; {backend: Report}."""
    reports = {}
    for backend in backends:
        report = Report()
        for k in range(n):
            before = len(report.mismatches)
            run_program(seed + k, backend, calls, report, constructs)
            if verbose and len(report.mismatches) > before:
                print(format_mismatch(report.mismatches[before]), flush=True)
        reports[backend] = report
    return reports


def signature(diff: str) -> str:
    """A mismatch's kind without its numbers: what the shrinker keeps while it cuts."""
    line = diff.split("\n")[0]
    line = re.sub(r"array\(.*|\[[^\]]*\]|\(\d[^)]*\)", "#", line)
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", line)[:100]


_KNOWN_GLOBALS = {"tj", "nn", "G", "GN", "GT", "LOG", "W", "HP", "HS", "C", "range", "len",
                  "int", "float", "super"}


def _well_formed(source: str) -> bool:
    """Whether a cut program still compiles and reads no name it no longer defines, nor a
    local above its first assignment (a path eager never takes would otherwise hide a
    NameError)."""
    try:
        top = symtable.symtable(source, "<shrink>", "exec")
    except SyntaxError:
        return False
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        stored, params = {}, {a.arg for a in fn.args.args}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stored[node.id] = min(stored.get(node.id, node.lineno), node.lineno)
        for node in ast.walk(fn):  # a local read above its first assignment
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                    node.id in stored and node.id not in params and \
                    node.lineno < stored[node.id]:
                return False
    stack = list(top.get_children())
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        if table.get_type() == "function" and any(
                sym.is_global() and sym.is_referenced() and sym.get_name() not in _KNOWN_GLOBALS
                for sym in table.get_symbols()):
            return False
    return True


def shrink(prog: Program, backend: str, calls: int = 5, budget: int = 300) -> Program:
    """A smaller program (statements and their blocks cut, one at a time) with a mismatch
    of the same kind, or a refusal with the same message: reproducers a person can read."""
    def key(p: Program, n: int):
        rep = check(p, backend, n)
        if rep.mismatches:
            return signature(rep.mismatches[0][3]), rep.mismatches[0][2]
        if rep.refused:
            return "refused " + signature(rep.refused[0][3]), rep.refused[0][2]
        return None, None

    want, call = key(prog, calls)
    if want is None:
        return prog
    calls = call + 1 if isinstance(call, int) else 1
    lines = prog.source.split("\n")
    changed = True
    while changed and budget > 0:
        changed = False
        at = 0
        while at < len(lines) and budget > 0:  # top down: a whole loop or if goes first
            text = lines[at].strip()
            if not text or text.startswith(("def ", "class ", "return Model", "return program",
                                            "super()", "self.lin =", "self.scale =",
                                            "self.steps =")):
                at += 1
                continue
            indent = len(lines[at]) - len(lines[at].lstrip())
            end = at + 1
            while end < len(lines) and lines[end].strip() and \
                    len(lines[end]) - len(lines[end].lstrip()) > indent:
                end += 1
            trial = lines[:at] + lines[end:]
            candidate = Program("\n".join(trial), prog.seed, prog.module, prog.dtype,
                                prog.constructs)
            ok = _well_formed(candidate.source)
            if ok:
                budget -= 1
                if key(candidate, calls)[0] == want:
                    lines, changed = trial, True
                    continue
            at += 1
    return Program("\n".join(lines), prog.seed, prog.module, prog.dtype, prog.constructs)


def format_mismatch(m) -> str:
    seed, backend, call, diff, source = m
    return f"seed {seed} ({backend}), call {call}: {diff}\n{textwrap.indent(source, '    ')}"
