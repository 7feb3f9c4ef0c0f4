"""The `numba_cpu` backend: each fused elementwise region becomes one generated
Numba kernel (parallel over the outer dimension).

Kernels read shapes at run time, so one compilation serves every batch size and
sequence length; a kernel is compiled once per region source (dtypes and ranks
are part of it) and kept in the disk cache. A region Numba cannot compile (its
module does not load, or Numba cannot type or lower a kernel at its first call) runs
on the interpreter after one warning: results are never wrong.
"""
from __future__ import annotations


import math
import warnings
from dataclasses import replace

import numpy as np
from numba.core.errors import NumbaError

from ..core.diagnostics import user_stacklevel
from ..ir.graph import Graph, Value
from ..core.symbolic import map_leaves, plain_symbol, SymInt
from ..ir.passes.fuse import column_sum
from ..core.log import enabled, log
from ..ops import OPS
from ..ops.rules import run_on_arrays
from ..ops.scalar import MATH1, MATH2, MAX, MEAN, MIN, PROD, SPECIAL, SUM, Arg, Ref, render
from ..core import events
from ..core.events import ACTIVE as _EVENTS
from ..runtime.kernel_cache import load_module, record_compiled, reload_compiled
from . import background
from .scalar_math import FLOAT32_FORMS, FLOAT64_FORMS
from .threads import THREADS, serial_below
from ..codegen.plan import (Access, ElementwisePlan, Load, Reciprocal, RowPlan,  # noqa: F401
                            Statement, Store, Unsupported, plan_elementwise, plan_row,
                            size_params)
from ..codegen.plan import is_column_value as _is_column_value
from ..codegen.plan import is_reduction as _is_reduction
from ..codegen.plan import is_row_value as _is_row_value


_NP_TYPES = {"bool": "np.bool_", "int32": "np.int32", "int64": "np.int64",
             "int8": "np.int8", "uint8": "np.uint8", "int16": "np.int16",
             "uint16": "np.uint16", "uint32": "np.uint32", "uint64": "np.uint64",
             "float16": "np.float32", "bfloat16": "np.float32",  # (held in float32)
             "float32": "np.float32", "float64": "np.float64"}


SPECIAL_NAMES = {fn: f"{fn}_cpu" for fn in SPECIAL}  # Numba functions of backends/special.py

# The CPU's spelling of each scalar function of ops/scalar.py, in Numba's Python (a test
# over ops.scalar.FUNCTIONS fails when one is missing). Rounding functions go through
# numpy's, which stay floats (math.floor returns an integer: undefined for inf and NaN).
CODE_FOR_FN = {
    "neg": "(-{0})", "abs": "abs({0})", "add": "({0} + {1})", "sub": "({0} - {1})",
    "mul": "({0} * {1})", "div": "({0} / {1})", "floordiv": "({0} // {1})",
    "mod": "({0} % {1})", "pow": "({0} ** {1})",
    # numpy's maximum/minimum: NaN from either side, the second operand on a tie (-0.0, 0.0)
    "max": "({1} if ({1} >= {0} or {1} != {1}) else {0})",
    "min": "({1} if ({1} <= {0} or {1} != {1}) else {0})",
    "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})",
    "ge": "({0} >= {1})", "eq": "({0} == {1})", "ne": "({0} != {1})", "not": "(not {0})",
    "and": "(bool({0}) and bool({1}))", "or": "(bool({0}) or bool({1}))",
    "xor": "(bool({0}) != bool({1}))", "select": "({1} if {0} else {2})",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "bitwise_not": "(~{0})",
    # (integers narrower than int64 are widened first, so a count of 32..63 shifts an
    # int32 as PyTorch's, whose limit is the type's width)
    "left_shift": "(({0} << {1}) if 0 <= {1} < 64 else 0)",
    "right_shift": "({0} >> ({1} if 0 <= {1} < 64 else 63))",
    **{f: f"math.{f}({{0}})" for f in MATH1}, **{f: f"math.{f}({{0}}, {{1}})" for f in MATH2},
    "floor": "np.floor({0})", "ceil": "np.ceil({0})", "trunc": "np.trunc({0})",
    "round": "np.rint({0})", "exp2": "np.exp2({0})", "fmod": "np.fmod({0}, {1})",
    **{fn: f"{name}({{0}})" for fn, name in SPECIAL_NAMES.items()},
}
# ... where float32 math has a vectorisable form in scalar_math (libm's calls block
# vectorisation), and where float64 math must saturate as eager's does
_FORMS = {dtype: {fn: f"{form}({{0}})" for fn, form in forms.items()}
          for dtype, forms in (("float32", FLOAT32_FORMS), ("float16", FLOAT32_FORMS),
                               ("bfloat16", FLOAT32_FORMS), ("float64", FLOAT64_FORMS))}
# ... and integers' C remainder from Python's (Numba's np.fmod of integers takes the
# divisor's sign)
_FORMS.update(dict.fromkeys(("int8", "uint8", "int16", "int32", "int64", "uint16", "uint32",
                              "uint64"), {
    "fmod": "(({0} % {1}) - ({1} if ({0} % {1}) != 0 and ({0} < 0) != ({1} < 0) else 0))"}))
_FLOAT32_MATH = ("float32", "float16", "bfloat16")  # computed in float32 registers


def _number(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float) and v != v:
        return "np.nan"
    if isinstance(v, float) and v in (math.inf, -math.inf):  # repr gives a bare `inf`
        return "np.inf" if v > 0 else "(-np.inf)"
    return repr(v)


def unsigned_constant(value: int) -> str:
    """An integer constant of uint64 math: Numba computes a uint64 with an int64 in float64
    (losing the low bits past 2**53), so the constant is made unsigned, modulo 2**64."""
    return f"np.uint64({value % 2 ** 64})"


def render_statement(st: Statement) -> str:
    """The CPU spelling of a statement: each scalar function from CODE_FOR_FN (or its
    vectorisable form)."""
    forms = _FORMS.get(st.dtype, {})
    return spell_statement(st, lambda fn: forms.get(fn) or CODE_FOR_FN[fn], _ROUND,
                           _FLOAT32_MATH)


def spell_statement(st: Statement, code, rounding: dict, float32_math) -> str:
    """A statement in Numba's Python (the CPU and CUDA renderers'): `code(fn)` spells each
    scalar function; float32 math (the dtypes `float32_math` holds in float32 registers)
    with typed constants (a Python float literal would widen it to float64), uint64 math
    with unsigned constants, and a value of a dtype `rounding` names (float16, bfloat16)
    computed in float32 and rounded by that function, as is a Python number meeting such
    a tensor (as numpy does)."""
    rounding = rounding.get(st.dtype)

    def leaf(e, operand: bool = False) -> str:
        if isinstance(e, Arg):
            return leaf(st.args[e.index], True)
        if isinstance(e, Ref):
            return e.name
        if st.dtype == "uint64" and type(e.value) is int:
            return unsigned_constant(e.value)
        text = _number(e.value)
        if isinstance(e.value, bool) or st.dtype not in float32_math:
            return text
        if rounding and operand:
            return f"{rounding}(np.float32({text}))"
        return f"np.float32({text})"
    expr = render(st.expr, code, leaf)
    if rounding:  # computed in float32, rounded to the value's type (as eager's numpy)
        return f"{st.target} = {rounding}(np.float32({expr}))"
    return f"{st.target} = {_NP_TYPES[st.dtype]}({expr})"


# float16/bfloat16 values live in float32 registers: read from their bits, rounded after
# each op, written back as bits (the arrays pass to a kernel as uint16 views)
_ROUND = {"float16": "round_f16", "bfloat16": "round_bf16"}
_READ = {"float16": "f16_to_f32", "bfloat16": "bf16_to_f32"}
_WRITE = {"float16": "f32_to_f16", "bfloat16": "f32_to_bf16"}


def _converted(table: dict, dtype, text: str) -> str:
    """`text` through the bits conversion of its dtype in `table` (_READ or _WRITE), if
    the dtype has one."""
    f = table.get(dtype)
    return f"{f}({text})" if f else text


def _as_bits(a):
    """An array as the kernels take it: float16/bfloat16 as its uint16 bits."""
    return a.view(np.uint16) if a.dtype.itemsize == 2 and a.dtype.kind in "fV" else a


_HEADER = ["# generated by tracejit.backends.numba_cpu",
           "import math", "import numba", "import numpy as np",
           "from tracejit.backends.scalar_math import " + ", ".join(
               list(FLOAT32_FORMS.values()) + list(FLOAT64_FORMS.values()) +
               ["fmaximum", "fminimum", "f16_to_f32", "f32_to_f16", "round_f16",
                "bf16_to_f32", "f32_to_bf16", "round_bf16"]),
           "from tracejit.backends.special import " + ", ".join(SPECIAL_NAMES.values()),
           "", "CACHE = __name__.startswith('tracejit_k_')", ""]

_COMBINE = {  # per monoid: (initial value, combine, finish) with accumulator `acc`
    SUM: ("0.0", "acc += {x}", "acc"),
    MEAN: ("0.0", "acc += {x}", "acc / n"),
    PROD: ("1.0", "acc *= {x}", "acc"),
    MAX: ("-np.inf", "acc = max(acc, {x})", "acc"),
    MIN: ("np.inf", "acc = min(acc, {x})", "acc"),
}


def accumulation(monoid) -> tuple:
    """(initial value, combine, finish) of a monoid: its form above, or its combine
    expression spelled by CODE_FOR_FN (any monoid of ops/scalar.py)."""
    if monoid in _COMBINE:
        return _COMBINE[monoid]
    combine = render(monoid.combine, CODE_FOR_FN.__getitem__,
                     lambda e: "acc" if e == Arg(0) else "{x}")
    return _number(monoid.identity), f"acc = {combine}", "acc / n" if monoid.mean else "acc"


_PICK = {MAX: ">", MIN: "<"}
FLUSH_ROWS = 64  # rows a float32 partial sum over rows spans before it joins the float64 one
SHORT_ROW = 2048


def generate_row(region: Graph) -> str:
    """A row kernel: per row (in parallel), each reduction over the last dimension is one
    pass over the row that recomputes the elementwise ops it needs; then one pass writes
    the per-element outputs."""
    return render_row(plan_row(region))


def _row_item(item, statement=None, dtypes=None, reads=_READ, writes=_WRITE) -> str:
    """One item of a row pass (inside the loop over columns j) in Numba's Python, which
    the CPU and CUDA renderers share; `statement` spells a Statement (the CPU's by
    default); `dtypes` (param -> dtype) with `reads` and `writes` (dtype -> conversion)
    turns float16/bfloat16 elements into float32 registers and back (the CPU's arrays are
    their bits)."""
    if isinstance(item, Load):
        index = {"element": "r, j", "column": "j", "row": "r, 0", "spilled": "r, j"}
        text = f"{item.param}[{index[item.kind]}]"
        return f"{item.local} = {_converted(reads, (dtypes or {}).get(item.param), text)}"
    if isinstance(item, Store):
        return f"{item.param}[r, j] = " + _converted(writes, (dtypes or {}).get(item.param),
                                                     item.local)
    if isinstance(item, Reciprocal):
        return f"{item.target} = {_NP_TYPES[item.dtype]}(1) / {item.of}"
    return (statement or render_statement)(item)


def render_row(plan: RowPlan) -> str:
    """The CPU spelling of a row plan: rows in parallel, each pass one loop over the row."""
    # reassociation lets LLVM vectorise the accumulations; NaN/inf semantics are kept.
    # Contracting multiply-adds is faster, but whether LLVM contracts depends on the code
    # around an expression, so a value recomputed in another pass could differ in its last
    # bit: a kernel that compares such values (amax's mask `x == max`) goes without it.
    flags = "{'reassoc'}" if plan.exact else "{'reassoc', 'contract'}"
    dtypes = dict(plan.dtypes)

    def item(x) -> str:
        return _row_item(x, None, dtypes)

    def written(param: str, local: str) -> str:
        return _converted(_WRITE, dtypes.get(param), local)
    # the body of the loop over rows (r)
    lines = ["        " + item(load) for load in plan.row_loads]
    for p in plan.reductions:
        lines += ["        " + item(x) for x in p.prelude]
        body = [item(x) for x in p.body]
        init, combine, finish = accumulation(p.monoid)
        float_result = p.dtype.startswith("float") or p.dtype == "bfloat16"
        # sums accumulate in float64 (float32 for short float32 rows, below); max/min are
        # exact in the value's own type
        acc_type = "np.float64" if float_result and p.monoid in (SUM, MEAN, PROD) else \
            _NP_TYPES[p.dtype]
        compare = _PICK.get(p.monoid)
        if compare is not None and float_result:
            # max/min of floats: LLVM's IEEE maximum/minimum propagate NaN and vectorise
            extremum = "fmaximum" if p.monoid is MAX else "fminimum"
            lines.append(f"        acc = {acc_type}({init})")
            lines.append("        for j in range(n):")
            lines += ["            " + ln for ln in body]
            lines.append(f"            acc = {extremum}(acc, {p.operand})")
        elif compare is not None:
            # integers and bools start from their type's extreme value (an infinity cast
            # to an integer is undefined)
            dt = np.dtype(p.dtype)
            first = (dt.type(0) if dt.kind == "b" else np.iinfo(dt).min) \
                if p.monoid is MAX else (dt.type(1) if dt.kind == "b" else np.iinfo(dt).max)
            lines.append(f"        acc = {acc_type}({int(first)})")
            lines.append("        for j in range(n):")
            lines += ["            " + ln for ln in body]
            lines.append(f"            acc = {p.operand} if {p.operand} {compare} acc else acc")
        elif acc_type == "np.float64" and p.monoid is not PROD and p.dtype == "float32":
            # float32 sums of short rows vectorise twice as wide; the partial sums LLVM
            # keeps bound their error (rows up to SHORT_ROW); longer rows sum in float64
            for cond, acc_t in ((f"if n <= {SHORT_ROW}:", "np.float32"), ("else:", acc_type)):
                lines.append(f"        {cond}")
                lines.append(f"            acc = {acc_t}({init})")
                lines.append("            for j in range(n):")
                lines += ["                " + ln for ln in body]
                lines.append("                " + combine.format(x=p.operand))
        else:
            lines.append(f"        acc = {acc_type}({init})")
            lines.append("        for j in range(n):")
            lines += ["            " + ln for ln in body]
            lines.append("            " + combine.format(x=p.operand))
        rounding = _ROUND.get(p.dtype)  # float16/bfloat16: accumulated wider, rounded once
        lines.append(f"        {p.target} = {rounding}(np.float32({finish}))" if rounding else
                     f"        {p.target} = {_NP_TYPES[p.dtype]}({finish})")
    lines += ["        " + item(x) for x in plan.prelude]
    partial = [param for param, _, f32 in plan.column_sums if f32]
    if plan.output_pass:
        lines.append("        for j in range(n):")
        lines += ["            " + item(x) for x in plan.output_body]
        lines += [f"            {param}[r, j] = {written(param, local)}"
                  for param, local in plan.element_stores]
        lines += [f"            {'p' + param[1:] + '[j]' if f32 else param + '[c, j]'} += "
                  f"{local}" for param, local, f32 in plan.column_sums]
    lines += [f"        {param}[r, 0] = {written(param, local)}"
              for param, local in plan.row_stores]

    def flush(indent: str) -> list:
        return [f"{indent}for j in range(n):"] + [
            ln for param in partial for ln in (f"{indent}    {param}[c, j] += p{param[1:]}[j]",
                                               f"{indent}    p{param[1:]}[j] = 0")]

    def kernel(parallel: bool) -> list:
        loop = "numba.prange" if parallel else "range"
        chunks = "chunks, " if plan.column_sums else ""
        out = [_decorator(parallel, f", fastmath={flags}"),
               f"def row{'' if parallel else '_serial'}(rows, n, {chunks}"
               f"{', '.join(plan.outputs + plan.inputs + plan.sizes)}):"]
        if not plan.column_sums:
            return out + [f"    for r in {loop}(rows):"] + lines
        # rows in `chunks` blocks, one per thread, each adding into its own accumulator
        # row c (numba.get_thread_id() would do, but cached code calling it crashes).
        # float32 sums add each row into a float32 row of partial sums, which is added
        # to the float64 accumulator every FLUSH_ROWS rows: float32 adds vectorise twice
        # as wide, and no partial sum spans more than FLUSH_ROWS rows
        out.append(f"    for c in {loop}(chunks):")
        out += [f"        p{param[1:]} = np.zeros(n, np.float32)" for param in partial]
        out.append("        for r in range(c * rows // chunks, (c + 1) * rows // chunks):")
        out += ["    " + ln for ln in lines]
        if partial:
            out += [f"            if (r + 1) % {FLUSH_ROWS} == 0:"] + flush(" " * 16)
            out += flush(" " * 8)
        return out
    return "\n".join(_HEADER + kernel(True) + [""] + kernel(False)) + "\n"


# Below this many elements a kernel runs on one thread: the launch would cost more than
# the second thread saves (backends/threads.py has the cost model).
SERIAL_BELOW = serial_below()
# up to this many elements, a region's strided inputs are copied to contiguous arrays so
# that its flat (vectorised) kernel runs (RegionKernel.run)
COPY_STRIDED_BELOW = 1 << 16


class ThreadedTwin:
    """When a kernel runs its threaded variant: for SERIAL_BELOW elements or more, from
    its THREADED_AFTER-th such call. Compiling the threaded variant costs 0.1-0.3 s more
    than the serial one (a cold MLP step: 3.3 s against 2.7), which a kernel called once
    or twice does not earn back; a warm process loads either from the disk cache."""

    __slots__ = ("large_calls",)

    def __init__(self):
        self.large_calls = 0

    def worth(self, n: int) -> bool:
        if n < SERIAL_BELOW:
            return False
        if self.large_calls >= THREADED_AFTER:
            return True
        self.large_calls += 1
        return self.large_calls > THREADED_AFTER


THREADED_AFTER = 2


def _decorator(parallel: bool, options: str = "") -> str:
    """A kernel's decorator: its threaded variant, or its serial twin (`<name>_serial`,
    with numpy's error model, as the threaded one has)."""
    threads = "parallel=True" if parallel else "parallel=False, error_model='numpy'"
    return f"@numba.njit({threads}, cache=CACHE{options})"


def _index(access: Access) -> str:
    """Index expression of an array inside the loop nest (a literal 1 is read at 0)."""
    return ", ".join("0" if d is None else f"i{d}_" for d in access.dims) or "()"


def store_lines(plan: ElementwisePlan, indent: str, index: str, nested: bool,
                writes: dict = _WRITE) -> list:
    """The stores of an elementwise kernel's outputs (Numba's Python, shared with the
    CUDA renderer): at the loop's index, or at each output's own broadcast index, where a
    smaller output is stored once per element, not once per broadcast copy. `writes`:
    per dtype, what turns a float32 register into the array's element (the CPU's float16
    arrays are their bits)."""
    lines = []
    for o in plan.outputs:
        target = f"{o.param}[{_index(o) if nested else index}]"
        first = " and ".join(f"i{d}_ == 0" for d in o.first_only) if nested else ""
        value = _converted(writes, o.dtype, o.local)
        lines.append(f"{indent}if {first}: {target} = {value}" if first else
                     f"{indent}{target} = {value}")
    return lines


def generate(region: Graph) -> str:
    """Python source of a module with `flat` (1-D, contiguous) and `nd` kernels."""
    return render_elementwise(plan_elementwise(region))


def kernel_source(region: Graph, kind: str) -> str:
    """The source of a fused region's kernel module (the backends' common interface)."""
    return generate_row(region) if kind == "row" else generate(region)


def render_elementwise(plan: ElementwisePlan, into: dict | None = None) -> str:
    """The CPU spelling of an elementwise plan: `flat` over contiguous same-shape arrays
    and `nd`, a loop nest reading each input at its own broadcast index (a bias [C] at
    [i1_], so arrays pass as they are and the inner loop stays contiguous), each with a
    serial twin. In the loop nest each read and statement sits in the outermost loop
    that its indices and operands allow: a batch norm's per-channel scale (an rsqrt of
    a [1, C, 1, 1] variance) is computed once per channel, not once per pixel.

    `into` {output k: input j}: output k is stored into input j's array (an optimizer's
    update of its parameters and state), through input j's parameter. Passed as an
    output parameter too, the one array would be two pointers that overlap, and LLVM,
    checking for overlap before it vectorises, would run the scalar loop: an Adam update
    of 313,600 floats took 1.0 ms so, 0.14 ms without."""
    params = ", ".join(plan.params)
    if into:  # the parameters: the other outputs, the inputs, the sizes
        params = ", ".join([o.param for k, o in enumerate(plan.outputs) if k not in into] +
                           [a.param for a in plan.inputs] + list(plan.sizes))
        plan = replace(plan, outputs=tuple(
            replace(o, param=plan.inputs[into[k]].param) if k in into else o
            for k, o in enumerate(plan.outputs)))
    body = [render_statement(st) for st in plan.body]
    levels = loop_levels(plan)

    def header(name: str, shape: str, parallel: bool) -> list:
        return [_decorator(parallel), f"def {name}{'' if parallel else '_serial'}"
                                      f"({params}{shape}):"]

    def read(a: Access, index: str) -> str:
        return f"{a.local} = " + _converted(_READ, a.dtype, f"{a.param}[{index}]")

    def flat(parallel: bool) -> list:
        rng = "numba.prange" if parallel else "range"
        lines = header("flat", "", parallel) + [
            f"    for i in {rng}({plan.outputs[0].param}.shape[0]):"]
        lines += ["        " + read(a, "i") for a in plan.inputs]
        lines += ["        " + ln for ln in body]
        return lines + store_lines(plan, "        ", "i", False)

    def nested(parallel: bool) -> list:
        placed: dict = {}  # loop level (-1: before the loops) -> lines
        for a in plan.inputs:
            placed.setdefault(levels[a.local], []).append(read(a, _index(a)))
        for st, text in zip(plan.body, body):
            placed.setdefault(levels[st.target], []).append(text)
        lines = header("nd", ", shape", parallel)
        lines += ["    " + ln for ln in placed.get(-1, [])]
        for d in range(plan.rank):
            rng = "numba.prange" if d == 0 and parallel else "range"
            lines.append("    " * (d + 1) + f"for i{d}_ in {rng}(shape[{d}]):")
            lines += ["    " * (d + 2) + ln for ln in placed.get(d, [])]
        return lines + store_lines(plan, "    " * (plan.rank + 1), "", True)

    lines: list = []
    for parallel in (True, False):
        lines += (flat(parallel) if plan.flat else []) + [""]
    for parallel in (True, False):
        lines += (nested(parallel) if plan.rank else []) + [""]
    return "\n".join(_HEADER + lines[:-1]) + "\n"


def loop_levels(plan: ElementwisePlan) -> dict:
    """Per input local and statement target: the innermost loop dimension it depends on
    (-1: none), through the dimensions an input is read along and a statement's
    operands."""
    levels = {z: -1 for z in plan.sizes}
    for a in plan.inputs:
        levels[a.local] = max((d for d in a.dims if d is not None), default=-1)
    for st in plan.body:
        names = [x.name for x in st.args if isinstance(x, Ref)] + sorted(st.expr.refs())
        levels[st.target] = max((levels.get(n, plan.rank - 1) for n in names), default=-1)
    return levels


def row_picks(region: Graph, kinds: list, reduced: set, rank: int) -> list:
    """Per output of a row region: None, or, for a per-row value that does not span every
    row of the frame (of `rank` dims, the row last), per lead dimension whether it spans
    it, and the value's rank. A row kernel computes such a value in every row; its result
    is read from the first rows (picked_rows)."""
    picks = []
    for v, kind in zip(region.outputs, kinds):
        if kind != "row":
            picks.append(None)
            continue
        dims = list(_broadcast_pick(v))
        if v in reduced and len(dims) == rank - 1:  # a reduction without keepdim
            dims.append(False)
        dims = [False] * (rank - len(dims)) + dims
        spans = tuple(dims[:-1])
        picks.append(None if all(spans) and len(v.shape) >= rank - 1 else
                     (spans, len(v.shape), v in reduced and len(v.shape) == rank - 1))
    return picks


def picked_rows(results: list, outs: list, picks: list, lead: tuple) -> list:
    """`results` with each picked per-row output (row_picks) read from the first rows of
    its kernel output `outs[k]` ([rows, 1]) at the value's own shape."""
    for k, pick in enumerate(picks):
        if pick is None:
            continue
        spans, rank, no_keepdim = pick
        index = tuple(slice(None) if whole else slice(0, 1) for whole in spans)
        rows = outs[k].reshape(tuple(lead) + (1,))[index]
        shape = rows.shape[:-1] if no_keepdim else rows.shape
        results[k] = np.array(rows.reshape(shape[len(shape) - rank:] if rank else ()))
    return results


def _broadcast_pick(v: Value) -> tuple:
    """Per dimension of v: whether it spans the loop's dimension (else a literal 1)."""
    return tuple(not (isinstance(size, int) and size == 1) for size in v.shape)


def _size_codes(region: Graph) -> list:
    return [compile(src, "<size>", "eval") for src, _ in size_params(region)]


def _shape_codes(v: Value) -> list:
    """Per dimension of v: an int, or the compiled expression of a symbolic size."""
    return [compile(d.source(), "<size>", "eval") if isinstance(d, SymInt) else d
            for d in v.shape]


def _concrete(codes: list, env: dict) -> tuple:
    return tuple(d if isinstance(d, int) else eval(d, {}, env) for d in codes)  # noqa: S307


class RegionKernel:
    """A compiled elementwise region: call with the region's input arrays."""

    def __init__(self, region: Graph):
        self.region = region
        self.source = generate(region)
        self.module = load_module(self.source, "region")
        self.into: dict = {}    # {((output, input), ...): _IntoVariant}, made when used
        self.out_shapes = [_shape_codes(v) for v in region.outputs]
        self.out_dtypes = [v.dtype.np for v in region.outputs]
        self.sizes = _size_codes(region)
        self.has_flat = hasattr(self.module, "flat")
        self.threads = ThreadedTwin()
        # float16/bfloat16 arrays pass as their uint16 bits (the kernel converts)
        self.low_precision = any(v.dtype.name in _READ
                                 for v in region.inputs + region.outputs)
        self.label = None       # the region's source line (compile_region sets it)
        self.failed = False     # Numba could not compile a kernel: interpret the region

    def __call__(self, arrays: list, env: dict | None = None) -> list:
        arrays = [np.asarray(a) for a in arrays]
        env = env or {}
        zs = [eval(code, {}, env) for code in self.sizes]  # noqa: S307 — ours
        out_shapes = [_concrete(codes, env) for codes in self.out_shapes]
        shape = np.broadcast_shapes(*out_shapes, *[a.shape for a in arrays])
        return self.run(arrays, zs, out_shapes, shape)

    def run(self, arrays: list, zs, out_shapes, shape: tuple, env=None, into=None) -> list:
        """The kernel on input arrays, with sizes, output shapes and the loop shape
        already worked out (a host program computes them from its own sizes; `env`: the
        values of the size symbols the region's ops name, for running them op by op;
        `into`: per output, an array to write it into, or None)."""
        if self.failed:
            return evaluate_by_ops(self.region, arrays, zs, list(zip(self.region.outputs,
                                                                     out_shapes)), env)
        # (outputs written into arrays the host program gives: inputs' new values)
        outs = [a if into and a is not None and a.shape == tuple(s) and a.dtype == d and
                a.flags.c_contiguous and a.flags.writeable else np.empty(s, d)
                for a, s, d in zip(into or [None] * len(out_shapes), out_shapes,
                                   self.out_dtypes)]
        n = 1
        for d in shape:
            n *= d
        if n == 0:  # no loop runs (a hoisted statement must not run either)
            if any(o.size for o in outs):
                return evaluate_by_ops(self.region, arrays, zs,
                                       list(zip(self.region.outputs, out_shapes)), env)
            return outs
        small = n < SERIAL_BELOW or not self.threads.worth(n)
        if self.has_flat and shape and n <= COPY_STRIDED_BELOW and all(
                a.shape == shape for a in arrays) and not all(
                a.flags.c_contiguous for a in arrays):
            # a strided view (a slice, a chunk of a matmul's output) makes Numba type the
            # nd kernel's arrays as layout 'A', whose loops LLVM does not vectorize: the
            # LSTM gates' kernel on four [8, 64] chunks takes 13 us so, 1.6 us flat on
            # contiguous copies (each copy 0.3-0.5 us)
            arrays = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
        args_in, args_out = arrays, outs
        owner = self
        if into:  # outputs stored into their inputs' arrays: the kernels made for that
            where: dict = {}  # id of an input array -> its first position
            for j, a in enumerate(arrays):
                where.setdefault(id(a), j)
            pairs = tuple((k, where[id(o)]) for k, o in enumerate(outs)
                          if o is into[k] and id(o) in where)
            if pairs:
                owner = self.into.get(pairs)
                if owner is None:
                    owner = self.into.setdefault(pairs, _IntoVariant(
                        plan_elementwise(self.region), dict(pairs), self.label))
                if owner.failed:
                    return self.run(arrays, zs, out_shapes, shape, env)
                stored = owner.stored
                args_out = [o for k, o in enumerate(outs) if k not in stored]
        if self.low_precision:
            args_in = [_as_bits(a) for a in arrays]
            args_out = [_as_bits(o) for o in args_out]
        if self.has_flat and (not shape or all(a.shape == shape and a.flags.c_contiguous
                                               for a in arrays)):
            name = "flat_serial" if small else "flat"
            args = [o.reshape(-1) for o in args_out] + [a.reshape(-1) for a in args_in]
            args += zs
        else:
            name = "nd_serial" if small else "nd"
            args = args_out + args_in
            args += zs
            args.append(shape)
        done = launch(owner, name, args)
        if done is FAILED:
            return self.run(arrays, zs, out_shapes, shape, env)
        if done is PENDING:
            return evaluate_by_ops(self.region, arrays, zs, list(zip(self.region.outputs,
                                                                     out_shapes)), env)
        return outs


class _IntoVariant:
    """A region's kernels that store some outputs into inputs' arrays (`into` of
    render_elementwise), in a module of their own; `launch` calls them as it calls the
    region's."""

    def __init__(self, plan: ElementwisePlan, into: dict, label):
        self.module = load_module(render_elementwise(plan, into), "region")
        self.stored = frozenset(into)  # the outputs stored into inputs
        self.label = label
        self.failed = False


def evaluate_by_ops(region: Graph, arrays: list, zs, shapes: list = (),
                    sizes: dict | None = None) -> list:
    """The region's outputs computed op by op with numpy. For an empty iteration space
    with an output that is not empty (a [1, N] value next to a [0, N] one): the loop that
    writes it at its broadcast index runs zero times. Sizes used as numbers come from the
    kernel's size parameters `zs`; size symbols in attributes come from `sizes` (symbol ->
    value, as a host program knows them), else are read off the inputs' shapes and
    `shapes` ((value, concrete shape), right-aligned)."""
    by_source = {src: z for (src, _), z in zip(size_params(region), zs)}
    env = dict(sizes or {})
    for v, shape in list(zip(region.inputs, (a.shape for a in arrays))) + list(shapes):
        offset = len(shape) - len(v.shape)
        for d, size in enumerate(v.shape):
            sym = plain_symbol(size)
            if sym is not None and offset + d >= 0:
                env.setdefault(sym, shape[offset + d])

    def size(s: SymInt) -> int:
        src = s.source()
        return by_source[src] if src in by_source else eval(src, {}, env)  # noqa: S307

    def resolve(x):
        return values[x] if isinstance(x, Value) else map_leaves(x, SymInt, size)

    values = dict(zip(region.inputs, arrays))
    for node in region.nodes:
        values[node.outputs[0]] = run_on_arrays(
            OPS[node.op], [resolve(x) for x in node.inputs],
            {k: resolve(v) for k, v in node.attrs.items()})
    return [np.asarray(values[v], order="C") for v in region.outputs]  # (0-d stays 0-d)


RAN, FAILED, PENDING = "ran", "failed", "pending"


def launch(owner, name: str, args: list) -> str:
    """Call kernel `name` of `owner.module` (a RegionKernel's or RowKernel's): RAN;
    FAILED when Numba cannot compile it, and the region is to be interpreted from now on
    (with one warning); PENDING when it is being compiled in the background
    (backends/background.py) and this call is to be interpreted.

    Numba compiles a kernel, or loads its machine code from the cache files, at its first
    call for a signature. A compile error (Numba cannot type or lower it) is the region's:
    it runs on the interpreter. Any other error there may be the cache's: files that pass
    their digests but are not what this module's Numba wrote (UnpicklingError, a
    TypeError from another kernel's overload): the module is imported afresh without its
    files, so that its dispatchers compile rather than keep what they loaded, and the
    call is made again; a second failure is the kernel's own and raises. What Numba
    compiles and writes is then added to the entry's digest manifest."""
    kernel = getattr(owner.module, name)
    known = len(kernel.overloads)
    if not known and background.enabled() and background.pending(owner.module, kernel, args,
                                                                  name):
        return PENDING
    try:
        if not known and (_EVENTS[0] or enabled("compile")):
            _first_launch(owner.module, kernel, args)
        else:
            kernel(*args)
    except NumbaError as err:
        _interpret(owner, err)
        return FAILED
    except Exception:
        fresh = reload_compiled(owner.module)
        if fresh is None:
            raise
        owner.module = fresh
        return launch(owner, name, args)
    if len(kernel.overloads) > known and sum(kernel.stats.cache_misses.values()):
        record_compiled(owner.module)
    return RAN


def _interpret(owner, err) -> None:
    owner.failed = True
    _warn_uncompiled(owner.label or owner.module.__name__, err,
                     getattr(owner, "fallback", "the fused region {}; it runs on the "
                                                "interpreter"))


def _first_launch(module, kernel, args) -> None:
    """The first call, reported to a profiler as a compile or a load from the cache."""
    hits = sum(kernel.stats.cache_hits.values())
    start = events.now()
    kernel(*args)
    loaded = sum(kernel.stats.cache_hits.values()) > hits
    end = events.now()
    events.emit(events.Event(f"tracejit::{'cache_load' if loaded else 'compile'} "
                             f"{kernel.__name__} {module.__name__}", "compile", start, end))
    log("compile", f"{'loaded' if loaded else 'compiled'} {kernel.__name__} of "
                   f"{module.__name__} in {(end - start) / 1e9:.3f} s "
                   f"(disk cache {'hit' if loaded else 'miss'})")


def row_frame(region: Graph) -> list:
    """The values whose shapes broadcast to a row kernel's iteration space: its inputs and
    outputs but the per-row reductions, and the operand of every reduction and sum over
    rows. An operand can exist only inside the region (an expanded gradient summed back to
    a bias; `x.expand(4, 3).sum(1)` of an x [4, 1]): without it the row length would be
    read off the inputs (1) and the sum would cover one element of each row."""
    reduced = {n.outputs[0] for n in region.nodes if _is_reduction(n)}
    return [v for v in region.outputs + region.inputs if v not in reduced] + [
        n.inputs[0] for n in region.nodes if column_sum(n) or _is_reduction(n)]


class RowKernel:
    """A compiled row region (reductions over the last dimension)."""

    def __init__(self, region: Graph):
        self.region = region
        self.source = generate_row(region)
        self.module = load_module(self.source, "row")
        self.reduced = reduced = {n.outputs[0] for n in region.nodes if _is_reduction(n)}
        self.sizes = _size_codes(region)
        self.threads = ThreadedTwin()
        self.frame_values = row_frame(region)
        self.frame = [_shape_codes(v) for v in self.frame_values]
        # inputs: one value per row, per column (the same in every row), or per element
        self.row_inputs = ["row" if _is_row_value(v, reduced) else "column" if
                           _is_column_value(v) else "element" for v in region.inputs]
        summed = {n.outputs[0] for n in region.nodes if column_sum(n)}
        self.columns = bool(summed)
        # float16/bfloat16 arrays pass to the kernel as their bits
        self.half = any(v.dtype.np.itemsize == 2 and v.dtype.np.kind in "fV"
                        for v in region.inputs + region.outputs)
        # outputs: one value per row, per element, or a sum over rows (per column)
        self.label = None       # the region's source line (compile_region sets it)
        self.failed = False     # Numba could not compile a kernel: interpret the region
        self.outputs = [(v.dtype.np, "summed" if v in summed else "row" if _is_row_value(
            v, reduced) else "element", len(v.shape)) for v in region.outputs]
        # a per-element output smaller than the frame (a [N] value the same in every row):
        # the kernel writes it at every position; it is read back from the first ones
        self.partial = [None if kind != "element" else _broadcast_pick(v)
                        for v, (_, kind, _) in zip(region.outputs, self.outputs)]
        # a per-row output that does not span every row (a [1, C, 1] value of a [B, C, N]
        # frame, a scalar the same in every row): computed per row, read from the first
        self.row_picks = row_picks(region, [kind for _, kind, _ in self.outputs], reduced,
                                   max(len(v.shape) for v in self.frame_values))
        self._layouts: dict = {}  # (frame shape, serial) -> _RowLayout

    def __call__(self, arrays: list, env: dict | None = None) -> list:
        arrays = [np.asarray(a) for a in arrays]
        env = env or {}
        zs = [eval(code, {}, env) for code in self.sizes]  # noqa: S307 — ours
        full = np.broadcast_shapes(*[a.shape for a in arrays],
                                   *[_concrete(codes, env) for codes in self.frame])
        return self.run(arrays, zs, full)

    def run(self, arrays: list, zs, full: tuple, env=None) -> list:
        """The kernel on input arrays, with sizes and the full shape already worked out
        (`env`: as RegionKernel.run's)."""
        if self.failed:
            return evaluate_by_ops(self.region, arrays, zs,
                                   [(v, full) for v in self.frame_values], env)
        lead, n = full[:-1], full[-1]
        rows = 1
        for d in lead:
            rows *= d
        if rows * n == 0 and any(kind == "summed" or (kind == "row" and rows) or
                                 self.partial[k] is not None or self.row_picks[k] is not None
                                 for k, (_, kind, _) in enumerate(self.outputs)):
            return evaluate_by_ops(self.region, arrays, zs,
                                   [(v, full) for v in self.frame_values], env)
        serial = not self.threads.worth(rows * n)
        layout = self._layouts.get((full, serial))
        if layout is None:
            if len(self._layouts) >= 64:  # many frame shapes (lengths that vary): bounded
                self._layouts.clear()
            layout = self._layouts[(full, serial)] = _RowLayout(self, full, serial)
        element, per_row = layout.element, layout.per_row
        ins = [(a if a.shape == full else np.broadcast_to(a, full)).reshape(element)
               if kind == "element" else a.reshape(n) if kind == "column" else
               a.reshape(per_row) if a.size == rows else  # (a view: broadcast_to is
               np.broadcast_to(a, layout.row_frame).reshape(per_row)  # 2-3 us of Python)
               for a, kind in zip(arrays, self.row_inputs)]
        outs = [np.zeros(s, np.float64) if summed else np.empty(s, d)
                for s, d, summed in layout.outs]
        # float16/bfloat16 arrays pass as their bits (sums over rows accumulate in float64)
        args_in = [_as_bits(a) for a in ins] if self.half else ins
        args_out = [_as_bits(o) for o in outs] if self.half else outs
        done = launch(self, "row_serial" if serial else "row", layout.head + args_out +
                      args_in + list(zs))
        if done is FAILED:
            return self.run(arrays, zs, full, env)
        if done is PENDING:
            return evaluate_by_ops(self.region, arrays, zs,
                                   [(v, full) for v in self.frame_values], env)
        # (one chunk's partial sums are the sums: the same numbers as summing one row)
        results = [(o[0].astype(d) if layout.chunks == 1 else o.sum(0).astype(d))
                   if shape is None else o.reshape(shape)
                   for o, d, shape in zip(outs, layout.dtypes, layout.results)]
        for k, index in layout.partial:
            results[k] = np.array(results[k][index])
        return picked_rows(results, outs, self.row_picks, lead) if layout.picks else results


class _RowLayout:
    """What a row kernel's call over one frame shape needs besides its arrays, worked out
    at the first call over that shape: the shapes inputs are reshaped to, the outputs'
    (shape, dtype, whether summed over rows), the shapes results are read back at, and
    which partial outputs are read from the first positions."""
    __slots__ = ("element", "per_row", "row_frame", "chunks", "head", "outs", "dtypes",
                 "results", "partial", "picks")

    def __init__(self, kernel: "RowKernel", full: tuple, serial: bool):
        lead, n = tuple(full[:-1]), full[-1]
        rows = math.prod(lead)
        self.element, self.per_row, self.row_frame = (rows, n), (rows, 1), lead + (1,)
        self.chunks = chunks = 1 if serial else max(1, min(THREADS, rows))
        self.head = [rows, n, chunks] if kernel.columns else [rows, n]
        self.outs = [((chunks, n), np.float64, True) if kind == "summed" else
                     ((rows, 1 if kind == "row" else n), d, False)
                     for d, kind, _ in kernel.outputs]
        self.dtypes = [d for d, _, _ in kernel.outputs]
        self.results = [None if kind == "summed" else
                        lead + ((n,) if kind == "element" else (1,) if rank == len(full)
                                else ())
                        for _, kind, rank in kernel.outputs]
        self.partial = [(k, (0,) * (len(full) - len(pick)) + tuple(
            slice(None) if whole else slice(0, 1) for whole in pick))
            for k, pick in enumerate(kernel.partial)
            if pick is not None and (len(pick) < len(full) or not all(pick))]
        self.picks = any(p is not None for p in kernel.row_picks)


_failed: set = set()


def compile_region(region: Graph, label: str, kind: str = "elementwise"):
    """The kernel of a region, or None (with one warning) when it cannot be compiled."""
    try:
        kernel = RowKernel(region) if kind == "row" else RegionKernel(region)
    except Unsupported:
        return None
    except Exception as err:  # noqa: BLE001 — Numba failed: interpret this region
        _warn_uncompiled(label, err)
        return None
    kernel.label = label
    return kernel


def _warn_uncompiled(label: str, err: Exception,
                     what: str = "the fused region {}; it runs on the interpreter") -> None:
    """One warning per region (or loop nest: `what`) that runs on the interpreter because
    Numba failed on it."""
    if label not in _failed:
        _failed.add(label)
        text = str(err).strip()
        warnings.warn(f"tracejit: Numba could not compile {what.format(label)} "
                      f"({type(err).__name__}: "
                      f"{text.splitlines()[0] if text else ''})", RuntimeWarning,
                      stacklevel=user_stacklevel())
