"""A differential fuzzer: random programs, traced once and called again with other inputs,
compared with eager execution (values, gradients, exception types, requires_grad, aliasing).

Each program is Python source, so a mismatch is reported as a program a person can run.
Programs draw from what has broken traces before: branches on tensor values, `.item()`
used as a number, loops whose trip count comes from a size or a value, scalar globals,
closure variables and module attributes read (and changed between calls), a global
tensor reassigned, parameters requiring grad updated in place between calls, in-place
updates of inputs and of views, keyword and dict arguments, nested traced calls,
float32/float64/float16, batch sizes 0, 1 and others, grad and no-grad, create_graph.

    python -m tracejit fuzz --n 200 --seed 1
"""
from __future__ import annotations

import random
import textwrap
import warnings
from dataclasses import dataclass, field

import numpy as np

from .differential import compare, outcome, rounding_explains
import tracejit as tj
from tracejit import nn
from tracejit.nn import functional as F

FEATURES = 3  # the last dimension of every program input


@dataclass
class Program:
    source: str
    uses_dict: bool = False
    module: bool = False
    dtype: str = "float32"
    notes: list = field(default_factory=list)


class _Gen:
    """Builds a random program body over tensors of shape [B, FEATURES] (or [B, 1])."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.lines: list[str] = []
        self.vars = ["x", "y"]
        self.count = 0

    def new(self) -> str:
        self.count += 1
        return f"h{self.count}"

    def pick(self) -> str:
        return self.rng.choice(self.vars[-4:] if len(self.vars) > 4 else self.vars)

    def const(self) -> str:
        return self.rng.choice(["0.5", "2.0", "-1.5", "3", "0.25"])

    def emit(self, line: str, var: str | None = None) -> None:
        self.lines.append(line)
        if var is not None:
            self.vars.append(var)

    def step(self, depth: int = 0) -> None:
        r, a, b, v = self.rng, self.pick(), self.pick(), self.new()
        kind = r.choice(["binary", "binary", "unary", "unary", "reduce", "matmul", "branch",
                         "item", "size", "loop_size", "loop_value", "pyread", "mask",
                         "inplace", "view", "setitem", "nested", "detach", "row",
                         "join", "view_write", "layout", "argext", "step"])
        if kind == "binary":
            op = r.choice(["+", "-", "*"])
            self.emit(f"{v} = {a} {op} {b}" if r.random() < 0.7 else
                      f"{v} = {a} {op} {self.const()}", v)
        elif kind == "unary":
            fn = r.choice(["tanh()", "sigmoid()", "relu()", "abs()", "sign()", "neg()",
                           "exp().clamp(max=4.0)", "clamp(-1.0, 1.0)", "sqrt()", "log()",
                           "square()"])
            self.emit(f"{v} = {a}.{fn}", v)
        elif kind == "reduce":
            fn = r.choice(["sum(-1, keepdim=True)", "mean(-1, keepdim=True)",
                           "amax(-1, keepdim=True)", "logsumexp(-1, keepdim=True)",
                           "softmax(-1)", "mean()", "sum()", "var(-1, keepdim=True)",
                           # a row sum, then over the first dim: one value per column
                           # of rows (a batch norm's statistics)
                           "sum(-1, keepdim=True).sum(0, keepdim=True)",
                           "mean(0, keepdim=True)"])
            self.emit(f"{v} = {a}.{fn}", v)
        elif kind == "matmul":
            self.emit(f"{v} = {a} @ W", v)
        elif kind == "row":
            self.emit(f"{v} = F.layer_norm({a}, ({FEATURES},)) * W[0] + W[1]", v)
        elif kind == "branch" and depth < 2:
            cond = r.choice([f"{a}.sum() > 0", f"{a}.mean() < 0.5", f"bool(({a} > 1).any())",
                             f"{a}.shape[0] > 2", f"int({a}.abs().sum()) % 2 == 0"])
            self.emit(f"if {cond}:")
            self.emit(f"    {v} = {a} * {self.const()} + {b}")
            self.emit("else:")
            self.emit(f"    {v} = {a} - {self.const()}", v)
        elif kind == "item":
            red = r.choice(["sum()", "mean()", "max()", "abs().sum()"])
            cast = r.choice(["{}.item()", "float({})", "int({})"])
            self.emit(f"{v} = {a} * {cast.format(f'{b}.{red}')}", v)
        elif kind == "size":
            expr = r.choice(["x.shape[0]", "(x.shape[0] - 1) // 2", "(x.shape[0] + 1) % 3",
                             "x.shape[0] ** 2", "abs(x.shape[0] - 3)", "x.numel() // 3"])
            self.emit(f"{v} = {a} * ({expr})", v)
        elif kind == "loop_size":
            self.emit(f"{v} = {a}")
            self.emit("for _ in range(x.shape[0] % 3):")
            self.emit(f"    {v} = {v} * 0.75 + {b}", v)
        elif kind == "loop_value":
            self.emit(f"{v} = {a}")
            self.emit(f"for _ in range(int({b}.abs().sum().item()) % 3):")
            self.emit(f"    {v} = {v}.tanh() + 0.5", v)
        elif kind == "pyread":
            src = r.choice(["G", "C", "GT", "SCALE"])
            self.emit(f"{v} = {a} * {src}", v)
        elif kind == "mask":
            self.emit(r.choice([f"{v} = {a} * ({b} > 0)", f"{v} = {a}[{b} > 0].sum() * {a}",
                                f"{v} = tj.where({a} > {b}, {a}, {b} * 0.5)"]), v)
        elif kind == "inplace":
            target = r.choice(["x", "clone"])
            if target == "x" and "x" in self.vars[:2]:
                self.emit(f"x.{r.choice(['add_', 'mul_'])}({self.const()})")
                self.emit(f"{v} = x * 1.0", v)
            else:
                self.emit(f"{v} = {a}.clone()")
                self.emit(f"{v}.{r.choice(['add_', 'mul_', 'sub_'])}({b})", v)
        elif kind == "view":
            self.emit(r.choice([f"{v} = {a}[0] * 2", f"{v} = {a}.t().t() + 1",
                                f"{v} = {a}.reshape(-1)[: {a}.numel()].reshape({a}.shape)",
                                f"{v} = {a}[:, :1] * {b}", f"{v} = {a}.view(-1).sum()"]), v)
        elif kind == "setitem":
            self.emit(f"{v} = {a}.clone()")
            self.emit(f"{v}[0] = {self.const()}", v)
        elif kind == "nested":
            self.emit(f"{v} = INNER({a})", v)
        elif kind == "detach":
            self.emit(f"{v} = {a}.detach() * {b}", v)
        elif kind == "join":
            self.emit(r.choice([f"{v} = tj.cat([{a}, {b}], 0)[: {a}.shape[0]] * 2",
                                f"{v} = tj.stack([{a}, {a} * {b}]).sum(0)",
                                f"{v} = tj.cat([{a}, {a}], -1)[..., 1:{FEATURES + 1}]"]), v)
        elif kind == "view_write":  # a write through a basic-indexing view
            self.emit(f"{v} = {a}.clone()")
            self.emit(r.choice([f"{v}[1:].mul_(0.5)", f"{v}[:, 0].add_(1.0)",
                                f"{v}[0].copy_({b}[-1])"]), v)
        elif kind == "argext":  # values and indices of a reduction, indices used
            self.emit(r.choice([f"{v} = {a}.max(-1, keepdim=True)[0] + {a}.argmax(-1, "
                                "keepdim=True).float()",
                                f"{v} = {a}.log_softmax(-1).gather(-1, {b}.argmin(-1, "
                                "keepdim=True))",
                                f"{v} = {a}.min(-1)[0][:, None] * {b}"]), v)
        elif kind == "step":  # a recurrent step, twice
            self.emit(f"{v} = {a}")
            self.emit("for _ in range(2):")
            self.emit(f"    {v} = ({v} @ W + {b}).tanh()", v)
        elif kind == "layout":
            self.emit(r.choice([f"{v} = {a}.t().contiguous().t() + {b}",
                                f"{v} = {a}.t().reshape(-1)[:{a}.numel()].reshape("
                                f"{FEATURES}, -1).t()",
                                f"{v} = {a}.reshape(-1, {FEATURES}).flip(0).flip(0)"]), v)


def generate(seed: int) -> Program:
    """The random program of one seed (the same program for the same seed)."""
    rng = random.Random(seed)
    gen = _Gen(rng)
    for _ in range(rng.randint(2, 7)):
        gen.step()
    outs = sorted({gen.vars[-1], rng.choice(gen.vars)}, key=gen.vars.index)
    ret = ", ".join(outs)
    extra = rng.random()
    if extra < 0.15:
        ret += ", x.shape[0]"
    elif extra < 0.25:
        ret += ", x"
    elif extra < 0.3:
        ret += ", x.shape"
    module = rng.random() < 0.25
    uses_dict = not module and rng.random() < 0.2
    body = "\n".join(gen.lines + [f"return {ret}"])
    if module:
        body = body.replace("W", "self.W").replace("SCALE", "self.scale")
        src = ("class Model(nn.Module):\n"
               "    def __init__(self):\n"
               "        super().__init__()\n"
               f"        self.W = nn.Parameter(tj.randn({FEATURES}, {FEATURES}) * 0.5)\n"
               "        self.scale = 1.5\n"
               "    def forward(self, x, y):\n" + textwrap.indent(body, " " * 8) + "\n")
    elif uses_dict:
        src = "def program(d):\n    x, y = d['x'], d['y']\n" + textwrap.indent(body, "    ") + "\n"
    else:
        src = "def program(x, y):\n" + textwrap.indent(body, "    ") + "\n"
    dtype = rng.choice(["float32"] * 6 + ["float64"] * 3 + ["float16"])
    return Program(src, uses_dict, module, dtype)


def _namespace(prog: Program, backend: str):
    ns = {"tj": tj, "nn": nn, "F": F, "G": 2.0, "SCALE": 0.5,
          "GT": tj.randn(FEATURES, dtype=tj.dtype_from_name(prog.dtype)),
          "W": (tj.randn(FEATURES, FEATURES) * 0.5).to(tj.dtype_from_name(
              prog.dtype)).requires_grad_()}
    ns["INNER"] = tj.trace(lambda t: (t * 2).tanh() + 1,
                           (tj.ones(2, FEATURES, dtype=tj.dtype_from_name(prog.dtype)),),
                           backend=backend)
    # a closure variable C: the program is compiled inside a function that holds it
    wrapper = "def make(C):\n" + textwrap.indent(prog.source, "    ") + \
        f"\n    return {'Model' if prog.module else 'program'}\n"
    exec(compile(wrapper, "<fuzz program>", "exec"), ns)  # noqa: S102 — our own source
    return ns, ns["make"](1.25)


@dataclass
class Report:
    programs: int = 0
    calls: int = 0
    mismatches: list = field(default_factory=list)
    skipped: int = 0   # programs whose example call fails eagerly: nothing to trace
    rounding: int = 0  # calls whose numbers differ only as float32 rounding does

    def __str__(self) -> str:
        return (f"{self.programs} programs, {self.calls} traced calls compared with eager, "
                f"{len(self.mismatches)} mismatches; {self.rounding} calls differ beyond the "
                "tolerance only as rounding does (as close to float64 as eager); "
                f"{self.skipped} programs fail eagerly on their example inputs and are not "
                "traced")


def _inputs(rng: np.random.Generator, batch: int, dtype: str, requires_grad: bool,
            contiguous: bool = True):
    def make(shape):
        a = (rng.standard_normal(shape) * 1.5).astype(dtype)
        if not contiguous and len(shape) == 2:
            a = np.ascontiguousarray(a.T).T
        t = tj.from_numpy(a)
        return t.requires_grad_() if requires_grad else t

    return make((batch, FEATURES)), make((batch, FEATURES) if rng.random() < 0.7 else (1,
                                                                                       FEATURES))


def run_program(seed: int, backend: str, calls: int = 6, report: Report | None = None):
    """Trace program `seed` and compare `calls` later calls with eager; returns the report."""
    report = report or Report()
    prog = generate(seed)
    rng = np.random.default_rng(seed)
    tj.manual_seed(seed)  # the program's weights too: a seed is a program, in any order
    ns, fn = _namespace(prog, backend)
    obj = fn() if prog.module else fn
    params = [ns["W"]] if not prog.module else [obj.W]

    def wrap(args):
        x, y = args
        return ((({"x": x, "y": y},), {}) if prog.uses_dict else ((x, y), {}))

    example = _inputs(rng, int(rng.choice([2, 3, 4])), prog.dtype, rng.random() < 0.5)
    a, k = wrap(_fresh(example))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj(*a, **k)
    except Exception:  # noqa: BLE001 — fails eagerly: no trace to compare
        report.skipped += 1
        return report
    report.programs += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, _ = wrap(_fresh(example))
        try:
            traced = tj.trace(obj, a, backend=backend)
        except Exception as err:  # noqa: BLE001 — eager ran this call: tracing must too
            report.calls += 1
            report.mismatches.append((seed, backend, "trace", f"tracing raised "
                                      f"{type(err).__name__}: {err}", prog.source))
            return report
    for call in range(calls):
        batch = int(rng.choice([0, 1, 2, 3, 5, 7]))
        args = _inputs(rng, batch, prog.dtype, rng.random() < 0.5, rng.random() > 0.15)
        grad_mode = rng.random() > 0.2
        create_graph = grad_mode and rng.random() < 0.1
        use_kwargs = not prog.uses_dict and rng.random() < 0.15
        snapshot = [p.detach().numpy().copy() for p in params]
        results = []
        for runner in (obj, traced):
            for p, s in zip(params, snapshot):
                p.detach().numpy()[...] = s
            a, k = wrap(_fresh(args))
            if use_kwargs:
                a, k = (), {"y": a[1], "x": a[0]}
            with warnings.catch_warnings(), tj.set_grad_enabled(grad_mode):
                warnings.simplefilter("ignore")
                results.append(outcome(runner, a, k, create_graph=create_graph,
                                       params=params))
        report.calls += 1
        diff = compare(*results)
        if diff is not None and prog.dtype != "float64":
            # a number apart: is it rounding? Eager again, in float64, as the referee
            for p, s in zip(params, snapshot):
                p.detach().numpy()[...] = s
            reference = _reference(obj, ns, params, wrap(_fresh(args, np.float64)), use_kwargs,
                                   grad_mode, create_graph)
            if rounding_explains(*results, reference):
                report.rounding += 1
                diff = None
        if diff is not None:
            report.mismatches.append((seed, backend, call, diff, prog.source))
        _between_calls(rng, ns, obj, params, prog)
    return report


def _fresh(args, dtype=None):
    return tuple(tj.from_numpy(t.detach().numpy().astype(dtype or t.detach().numpy().dtype,
                                                         order="K")).requires_grad_(
        t.requires_grad) for t in args)


def _reference(obj, ns, params, call, use_kwargs, grad_mode, create_graph):
    """The eager outcome of a call with its inputs, parameters and global tensor in
    float64 (the program's own constants stay as they are)."""
    a, k = call
    if use_kwargs:
        a, k = (), {"y": a[1], "x": a[0]}
    narrow = [p._data for p in params]
    gt = ns["GT"]
    try:
        for p in params:
            p._data = p._data.astype(np.float64)
        ns["GT"] = gt.double()
        with warnings.catch_warnings(), tj.set_grad_enabled(grad_mode):
            warnings.simplefilter("ignore")
            return outcome(obj, a, k, create_graph=create_graph, params=params)
    finally:
        for p, d in zip(params, narrow):
            p._data = d
        ns["GT"] = gt


def _between_calls(rng, ns, obj, params, prog) -> None:
    """What a training loop does between calls: an optimiser step, a changed setting."""
    r = rng.random()
    with tj.no_grad():
        if r < 0.3:
            for p in params:
                p.sub_(p * 0.1)  # an SGD-like update in place
        elif r < 0.4:
            ns["G"] = float(rng.choice([2.0, -1.0, 0.5]))
        elif r < 0.5:
            ns["GT"] = tj.randn(FEATURES, dtype=tj.dtype_from_name(prog.dtype))
        elif r < 0.55 and prog.module:
            obj.scale = float(rng.choice([1.5, -2.0]))
        elif r < 0.6:  # the closure variable C
            fn = type(obj).forward if prog.module else obj
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                if name == "C":
                    cell.cell_contents = float(rng.choice([1.25, -0.5]))


def fuzz(n: int, seed: int = 0, backends=("interpret", "numba"), calls: int = 6,
         verbose: bool = False) -> dict:
    """Run `n` programs per backend from `seed`; {backend: Report}."""
    reports = {}
    for backend in backends:
        report = Report()
        for k in range(n):
            before = len(report.mismatches)
            run_program(seed + k, backend, calls, report)
            if verbose and len(report.mismatches) > before:
                print(format_mismatch(report.mismatches[before]))
        reports[backend] = report
    return reports


def format_mismatch(m) -> str:
    seed, backend, call, diff, source = m
    return f"seed {seed} ({backend}), call {call}: {diff}\n{textwrap.indent(source, '    ')}"
