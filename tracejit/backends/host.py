"""Host programs: a whole graph as one generated Python function over numpy arrays.

The interpreter replays a graph through eager dispatch, which is what lets a
traced call record autograd history, but it costs a Tensor, a dtype check and a
dispatch per op. Where nothing is recorded — the compiled forward and backward
parts of a traced call, and traced calls that need no gradient — the numba
backend runs a graph as one straight-line function instead: each op calls its
op-table impl on arrays, each fused region its compiled kernel, and every size
a kernel or attribute needs is computed once from the input shapes. `.source`
shows the function:

    def program(t0, t1, t2):
        v0 = t0._data
        v1 = t1._data
        v2 = t2._data
        s0 = v0.shape[0]
        v3 = f3(v1, **a4)  # transpose
        v4 = f5(v0, v3)  # matmul
        v5, = k6.run([v4, v2], (), (((s0), 5, ), ), ((s0), 5, ))  # fused model.py:12
        Tv5 = _make(v5)
        return (Tv5, )
"""
from __future__ import annotations

import re

import numpy as np

from ..core.float_errors import quiet, restore
from ..ir.graph import FUSED, GUARD, Graph, Value, symbols_read
from ..core import events
from ..runtime import memory
from ..core.events import ACTIVE as _EVENTS
from ..core.symbolic import SymInt, has_sym, hint_of
from ..ops import OPS
from ..ops.registry import ELEMENTWISE, AVal
from ..ops.rules import compute_dtype
from ..ops.scalar import IDENTITY
from .guards import check_guard
from .numba_loops import loop_kernel
from .numba_cpu import RowKernel, Unsupported, compile_region, row_frame, size_params


def static_broadcast(shapes: list) -> tuple | None:
    """The broadcast of symbolic shapes when it is decided without run-time sizes (each
    dimension has one size other than 1), else None."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(-rank, 0):
        # keyed by source: comparing SymInts would record guards
        sizes = {(x.source() if isinstance(x, SymInt) else x): x
                 for s in shapes if len(s) >= -d for x in (s[d],)}
        sizes.pop(1, None)
        if len(sizes) > 1:
            return None
        out.append(sizes.popitem()[1] if sizes else 1)
    return tuple(out)


_NAME = re.compile(r"\b[A-Za-z_]\w*")


class _Emitter:
    """Source lines plus the namespace the generated function closes over."""

    def __init__(self, bound: set):
        self.lines: list[str] = []
        self.ns: dict = {"np": np, "_asarray": np.asarray}
        self.bound = bound

    def const(self, x, hint: str = "c") -> str:
        name = f"{hint}{len(self.ns)}"
        self.ns[name] = x
        return name

    def render(self, x) -> str:
        """Source for an operand or attribute: sizes as expressions, the rest constants."""
        if isinstance(x, SymInt):
            missing = x.symbols() - self.bound
            if missing or (x.poly is None and not x.symbols()):
                raise Unsupported(f"size {x.source()} is not known from the input shapes")
            return f"({x.source()})"
        if not has_sym(x):
            return self.const(x)
        if type(x) is tuple:
            return "(" + "".join(self.render(v) + ", " for v in x) + ")"
        if type(x) is list:
            return "[" + ", ".join(self.render(v) for v in x) + "]"
        if type(x) is slice:
            return f"slice({self.render(x.start)}, {self.render(x.stop)}, " \
                   f"{self.render(x.step)})"
        raise Unsupported(f"attribute {x!r}")

    def shape(self, shape: tuple) -> str:
        return self.render(tuple(shape))

    def attrs(self, attrs: dict) -> str:
        """Source for an op's attributes as a dict: one constant when no size symbol is
        among them, else a dict literal with the sizes as expressions."""
        if not has_sym(tuple(attrs.values())):
            return self.const(dict(attrs), "a")
        return "{" + "".join(f"{k!r}: {self.render(v)}, " for k, v in attrs.items()) + "}"

    def alias(self, node, args: list, out: str, identity: bool) -> bool:
        """Emit `out = input` for an op that gives its input back unchanged (`identity`:
        the op's element is the identity) at the same shape and dtype; whether it did."""
        if identity and _same_type(node.inputs[0], node.outputs[0]):
            self.lines.append(f"{out} = {args[0]}  # {node.op}")
            return True
        return False


def size_env(region: Graph, bound: set) -> tuple:
    """(the source of a dict of the size symbols a region's ops name that a host program
    has bound, for when it runs op by op; the names it has not bound)."""
    read = set().union(*(symbols_read(n) for n in region.nodes))
    env = "{" + "".join(f"{n!r}: {n}, " for n in sorted(read & bound)) + "}"
    return env, read - bound


class HostProgram:
    """A graph compiled into one Python function; call `run(tensors)` for its outputs.

    Raises Unsupported when some part needs the interpreter (a region Numba cannot
    compile, a size known only from data, an in-place update of an input)."""

    def __init__(self, graph: Graph, make, bindings: list | None = None,
                 donate: dict | None = None):
        """`make`: what wraps an output array (the eager runtime's tensor constructor; the
        inputs are read through their `_data`). `donate`: {value: input} whose kernel may
        write the value into the input's array (a graph returning inputs' new values,
        written back into them after)."""
        if graph.mutations:
            raise Unsupported("the graph updates its inputs in place")
        self.graph = graph
        bindings = graph.size_bindings() if bindings is None else bindings
        em = _Emitter({sym for _, _, sym in bindings})
        em.ns["_make"] = make
        names: dict = {v: f"v{i}" for i, v in enumerate(graph.inputs)}
        params = [f"t{i}" for i in range(len(graph.inputs))]
        for k, node in enumerate(graph.nodes):
            args = [names[x] if isinstance(x, Value) else em.render(x) for x in node.inputs]
            outs = []
            for v in node.outputs:
                names[v] = f"v{len(names)}"
                outs.append(names[v])
            if node.op == GUARD:
                em.ns[f"g{k}"] = node
                em.lines.append(f"_guard(g{k}, {args[0]})")
            elif node.op == FUSED:
                into = [names[donate[v]] if donate and v in donate and
                        _writable_in_place(graph, k, node, donate[v]) else None
                        for v in node.outputs]
                self._emit_region(em, node, args, outs, into)
            else:
                self._emit_op(em, node, args, outs[0])
        used = set(_NAME.findall("\n".join(em.lines)))  # (one scan: a search per name
        sizes = [f"{sym} = v{i}.shape[{d}]" for i, d, sym in bindings  # took 50 ms of a
                 if sym in used]                                       # GPT's programs)
        used.update(_NAME.findall("\n".join(sizes)))
        head = [f"v{i} = t{i}._data" for i in range(len(graph.inputs)) if f"v{i}" in used]
        em.lines[:0] = head + sizes
        em.ns["_guard"] = check_guard
        result, wrapped = [], set()
        for v in graph.outputs:
            if v in graph.inputs:  # returned as it is, as the interpreter does
                result.append(params[graph.inputs.index(v)])
                continue
            result.append(f"T{names[v]}")
            if v not in wrapped:  # a value returned twice is one tensor
                wrapped.add(v)
                em.lines.append(f"T{names[v]} = _make({names[v]})")
        em.lines.append("return (" + "".join(r + ", " for r in result) + ")")
        self.source = f"def program({', '.join(params)}):\n" + "".join(
            f"    {ln}\n" for ln in em.lines)
        exec(compile(self.source, f"<host program {graph.name}>", "exec"), em.ns)  # noqa: S102
        self.run_tensors = em.ns["program"]
        self._ns = em.ns
        self._profiled = None  # the instrumented variant, made when a profiler first listens

    def run(self, tensors: list) -> list:
        token = quiet()  # inf and nan are results, as in eager ops (core/float_errors.py)
        pool = memory.enter_pool()  # the program's arrays: tracejit's pool (runtime/memory.py)
        try:
            if _EVENTS[0]:
                return self._run_profiled(tensors)
            return list(self.run_tensors(*tensors))
        finally:
            memory.leave_pool(pool)
            restore(token)

    def _run_profiled(self, tensors: list) -> list:
        if self._profiled is None:
            self._profiled = _instrumented(self.source, self._ns, self.graph.name)
        with events.span(f"tracejit::program {self.graph.name}"):
            return list(self._profiled(*tensors))

    # ---- what a backend's host program calls (backends/cuda/host.py spells them for
    # device arrays) -----------------------------------------------------------------
    def _emit_op(self, em: _Emitter, node, args: list, out: str) -> None:
        op = OPS[node.op]
        if em.alias(node, args, out, op.expr == IDENTITY and op.kind != ELEMENTWISE):
            return
        fn = em.const(loop_kernel(op) if op.loops else op.impl, "f")
        if op.kind == ELEMENTWISE:
            args = _promote(em, op, node, args)
        kw = [f"**{em.attrs(node.attrs)}"] if node.attrs else []
        call = f"{fn}({', '.join(args + kw)})"
        if not node.outputs[0].shape:  # numpy returns scalars for 0-d results
            call = f"_asarray({call})"
        em.lines.append(f"{out} = {call}  # {node.op}")

    def _emit_region_ops(self, em: _Emitter, node, args: list, outs: list) -> None:
        """A fused region without a kernel (float16, say): its ops one by one."""
        region = node.regions[0]
        names = dict(zip(region.inputs, args))
        for inner in region.nodes:
            inner_args = [names[x] if isinstance(x, Value) else em.render(x)
                          for x in inner.inputs]
            names[inner.outputs[0]] = f"{outs[0]}_{len(names)}"
            self._emit_op(em, inner, inner_args, names[inner.outputs[0]])
        em.lines.append(f"{''.join(o + ', ' for o in outs)}= "
                        f"{''.join(names[v] + ', ' for v in region.outputs)}")

    def _emit_region(self, em: _Emitter, node, args: list, outs: list, into=None) -> None:
        region = node.regions[0]
        kernel = compile_region(region, node.source, node.attrs["kind"])
        if kernel is None:
            self._emit_region_ops(em, node, args, outs)
            return
        kname = em.const(kernel, "k")
        # region inputs are the node's inputs; sizes a kernel uses as numbers and the
        # region's shapes are written over the graph's symbols
        zs = "(" + "".join(f"({src}), " for src, _ in size_params(region)) + ")"
        for src, _ in size_params(region):
            em.render(_as_sym(region, src))  # checks its symbols are bound
        if isinstance(kernel, RowKernel):
            frame = row_frame(region)
        else:
            frame = region.outputs + region.inputs
        loop = static_broadcast([v.shape for v in frame])
        loop_src = em.shape(loop) if loop is not None else "np.broadcast_shapes(" + "".join(
            (args[region.inputs.index(v)] + ".shape" if v in region.inputs else
             em.shape(v.shape)) + ", " for v in frame) + ")"
        # the sizes the region's ops name, for when it runs op by op (its kernel is
        # being compiled in the background, or Numba cannot compile it)
        env = size_env(region, em.bound)[0]
        if isinstance(kernel, RowKernel):
            call = f"{kname}.run([{', '.join(args)}], {zs}, {loop_src}, {env})"
        else:
            out_shapes = "(" + "".join(em.shape(v.shape) + ", " for v in region.outputs) + ")"
            call = f"{kname}.run([{', '.join(args)}], {zs}, {out_shapes}, {loop_src}, {env}"
            call += f", [{', '.join(x or 'None' for x in into)}])" if into and any(into) \
                else ")"
        em.lines.append(f"{''.join(o + ', ' for o in outs)}= {call}  # fused {node.source}")


def _instrumented(source: str, ns: dict, name: str):
    """The host program with an event around each op and kernel line (lines ending in
    `# <op>` or `# fused <source>`): the variant that runs while a profiler listens."""
    out = []
    for line in source.splitlines():
        code, sep, label = line.partition("  # ")
        if not sep:
            out.append(line)
            continue
        indent = code[:len(code) - len(code.lstrip())]
        event = f"tracejit::kernel {label[6:]}" if label.startswith("fused ") else \
            events.aten_name(OPS[label])
        out += [f"{indent}_t = _now()", code, f"{indent}_event({event!r}, _t)"]
    ns = dict(ns, _now=events.now, _event=_kernel_event)
    exec(compile("\n".join(out), f"<profiled host program {name}>", "exec"), ns)  # noqa: S102
    return ns["program"]


def _kernel_event(name: str, start: int) -> None:
    events.emit(events.Event(name, "compiled", start, events.now()))


def _same_type(a, b) -> bool:
    key = [(x.source() if isinstance(x, SymInt) else x) for x in a.shape]
    return isinstance(a, Value) and a.dtype == b.dtype and key == [
        (x.source() if isinstance(x, SymInt) else x) for x in b.shape]


def _as_sym(region: Graph, src: str) -> SymInt:
    for node in region.nodes:
        for x in node.inputs:
            if isinstance(x, SymInt) and x.source() == src:
                return x
    raise Unsupported(f"size {src}")


def _writable_in_place(graph: Graph, k: int, node, target: Value) -> bool:
    """Whether fused node `k` may write a new value of input `target` into its array:
    the kernel reads `target` at each point of a loop of target's shape (the other
    operands no larger, so each element is read before it is written and never after),
    and no later node or output reads the old value, and no later guard can abandon the
    run (the call then runs again from its inputs, which must still hold their old values:
    an input written before a value guard failed was updated twice)."""
    shape = tuple(map(str, target.shape))
    if target not in node.inputs or target in graph.outputs:
        return False
    for v in node.outputs + [x for x in node.inputs if isinstance(x, Value)]:
        dims = tuple(map(str, v.shape))
        if dims != shape and any(d != "1" for d in dims):
            return False
    for later in graph.nodes[k + 1:]:
        if later.op == GUARD or any(x is target for x in later.inputs) or any(
                target in r.inputs for r in later.regions):
            return False
    return True


def _promote(em: _Emitter, op, node, args: list) -> list:
    """Casts to the op's compute dtype, decided once from the value types (what eager
    dispatch decides per call)."""
    ct = compute_dtype(op, [AVal(x.shape, x.dtype) if isinstance(x, Value) else hint_of(x)
                            for x in node.inputs],
                       {k: hint_of(v) for k, v in node.attrs.items()})
    if ct is None:
        return args
    first = 1 if op.dtype_rule == "where" else 0
    out = list(args)
    for i, x in enumerate(node.inputs):
        if i >= first and isinstance(x, Value) and x.dtype.np != ct.np:
            out[i] = f"{args[i]}.astype({em.const(ct.np, 'd')})"
    return out


def host_program(graph: Graph, make, bindings: list | None = None,
                 donate: dict | None = None) -> HostProgram | None:
    """The host program of a graph, or None when it must be interpreted."""
    try:
        return HostProgram(graph, make, bindings, donate)
    except Unsupported:
        return None


def returns_views(graph: Graph) -> bool:
    """Whether an output is a view of an input (eager code would share its version
    counter, which only the interpreter's dispatch sets up)."""
    aliases = set(graph.inputs)
    for node in graph.nodes:
        if node.op in OPS and OPS[node.op].view and node.inputs and \
                node.inputs[0] in aliases:
            aliases.update(node.outputs)
    return any(v in aliases and v not in graph.inputs for v in graph.outputs)
