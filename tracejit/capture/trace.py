"""`tj.trace`: capture a function or module into guarded traces, grown into a tree.

A call first looks for a trace whose entry guards hold and runs it; a value
guard inside the trace may still miss. On any miss the call runs eagerly —
by tracing it, which is eager execution plus recording — and the new trace
joins the others. Past the budget of traces, misses just run eagerly and one
warning names the guard that kept failing.
"""
from __future__ import annotations

import inspect
import threading
import warnings
from collections import Counter

import numpy as np

from ..core.modes import STATE
from ..backends import registry as backends
from ..backends.guards import GuardMiss
from ..core.symbolic import SymInt, compile_sizes, eval_sizes, has_sym, hint_of, map_leaves
from ..core import events
from ..core.events import ACTIVE as _EVENTS
from ..core.diagnostics import user_stacklevel
from ..tensor.tensor import Tensor
from .compiled import CompiledGraph, log, program_for as _program_for
from .guards import EntryGuards, Guard
from .pyvalues import function_reads, module_reads
from .recorder import Recorder
from ..ir.graph import BIND, LOOP
from ..core.lazy import lazy
from ..nn.module import Module
from ..codegen.plan import Unsupported

# the passes, loaded with the first trace (importing tracejit does not pay for them)
passes = lazy("tracejit.ir.passes")
outputs = lazy("tracejit.ir.passes.outputs")

DEFAULT_BUDGET = 8
_SCALAR_TYPES = frozenset({int, float, bool, str, type(None)})


# ---- argument flattening (tensors anywhere in tuples, lists, dicts) -------------------------
def flatten(obj, tensors: list, others: list):
    """Replace tensors by ('t', k) and other leaves by ('p', k); returns the structure, a
    hashable value: two calls that differ in structure (keyword order, dict keys, where the
    tensors are) never share a trace."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("t", len(tensors) - 1)
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(flatten(v, tensors, others) for v in obj))
    if isinstance(obj, dict):
        return (dict, tuple((k, flatten(v, tensors, others)) for k, v in obj.items()))
    others.append(obj)
    return ("p", len(others) - 1)


def flatten_outputs(obj, inputs: list, tensors: list, others: list):
    """Like flatten, for results: a tensor that *is* an input becomes ('i', index) and is
    returned itself, and a tensor returned twice is one output."""
    if isinstance(obj, Tensor):
        for i, t in enumerate(inputs):
            if t is obj:
                return ("i", i)
        for k, t in enumerate(tensors):
            if t is obj:
                return ("t", k)
        tensors.append(obj)
        return ("t", len(tensors) - 1)
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(flatten_outputs(v, inputs, tensors, others) for v in obj))
    if isinstance(obj, dict):
        return (dict, tuple((k, flatten_outputs(v, inputs, tensors, others))
                            for k, v in obj.items()))
    others.append(obj)
    return ("p", len(others) - 1)


def _as_eager(rec: Recorder, result):
    """What a call that finished eagerly after its recording gave up returns: eager's
    objects. The sizes it computed before (an `n: int`, a loop's counter) are the ints
    they stand for, and a branch's or loop's result that this call's path handed on
    unchanged (an input) is that tensor itself."""
    tensors, others = [], []
    spec = flatten_outputs(result, rec.inputs, tensors, others)
    passed = [rec.passthrough_of(t) for t in tensors]
    if not has_sym(others) and all(p is t for p, t in zip(passed, tensors)):
        return result
    return unflatten(spec, passed, hint_of(others), rec.inputs)


def unflatten(spec, tensors: list, others: list, inputs: list = ()):
    tag, body = spec
    if tag == "t":
        return tensors[body]
    if tag == "p":
        return others[body]
    if tag == "i":
        return inputs[body]
    if tag is dict:
        return {k: unflatten(v, tensors, others, inputs) for k, v in body}
    items = [unflatten(v, tensors, others, inputs) for v in body]
    if tag is list:
        return items
    return tag(*items) if hasattr(tag, "_fields") else tag(items)  # namedtuples by field


class Trace(CompiledGraph):
    """One captured path: graph, entry guards and the prepared backend."""
    def __init__(self, recorder: Recorder, guards: EntryGuards, in_spec, out_spec, out_others,
                 n_user_tensors: int, backend: str = "interpret", param_refs=(),
                 out_tensors=()):
        stages = passes.PassManager().run(recorder.graph)  # [(pass, graph, seconds)]
        distinct = outputs.copy_aliased_outputs(stages[-1][1])
        if distinct is not stages[-1][1]:
            stages.append(("copy_aliased_outputs", distinct, 0.0))
        self.stages = passes.Stages(recorder.graph, stages, outputs.copy_aliased_outputs)
        self.in_spec = in_spec
        self.param_refs = param_refs  # (store, key) of each parameter input, read per call
        self.recorded = recorder.graph
        self.graph = stages[-1][1]
        self.guards = guards
        self.bindings = recorder.bindings
        self.shape_guards = list(recorder.shape_guards.values())
        self.captured = recorder.inputs[n_user_tensors:]
        self.out_spec = out_spec
        # outputs eager execution left in another memory order than row-major (an
        # elementwise op of a transposed input keeps its strides, as in PyTorch): the
        # order of their dimensions in memory, outermost first, given to the kernels'
        # row-major results (the inputs' layouts are guarded, so eager's is the same)
        self.out_layouts = [(k, tuple(np.argsort([-st for st in t._data.strides],
                                                 kind="stable")))
                            for k, t in enumerate(out_tensors)
                            if t._data.ndim > 1 and t._data.size > 1 and
                            not _c_contiguous(t._data)]
        self.out_others = [compile_sizes(v) for v in out_others]
        self._sized_outs = any(has_sym(v) for v in out_others)
        self.stats: dict = {}  # the owning TracedFunction's stats (set by it)
        CompiledGraph.__init__(self, self.graph, backend, self.bindings, self.shape_guards)

    def value_guards(self) -> list[Guard]:
        return [Guard(f"value of {n.attrs['kind']}() read == {_short(n.attrs['expected'])}",
                      n.source) for n in self.recorded.nodes if n.op == "guard"]

    def run(self, tensors: list):
        env = None
        if self.control_flow:  # sizes from data are bound in env as the program runs
            env = {sym: tensors[i]._data.shape[d] for i, d, sym in self.bindings}
            outs = self.runner.run(tensors, env)
        else:
            outs = self.call(tensors)
        for k, order in self.out_layouts:  # kernels write row-major; eager kept a layout
            d = outs[k]._data
            if d.flags.c_contiguous and d.ndim > 1 and d.size > 1:
                outs[k]._data = np.ascontiguousarray(d.transpose(order)).transpose(
                    np.argsort(order))
        others = self.out_others
        if self._sized_outs:
            if env is None:
                env = {sym: tensors[i]._data.shape[d] for i, d, sym in self.bindings}
            others = [eval_sizes(v, env) for v in others]
        return unflatten(self.out_spec, outs, others, tensors)

_UNSET = CompiledGraph.UNSET
LAZY = object()  # no example inputs: the first call records the first trace


def _guardable(value) -> bool:
    """Arguments a trace can check at every call: scalars, by value; dtypes, devices,
    functions, modules and other objects by identity. A numpy array's contents can
    change without its identity, so a call passing one runs eagerly."""
    return not isinstance(value, np.ndarray)


def _short(v) -> str:
    return f"array of shape {list(v.shape)}" if hasattr(v, "shape") else repr(v)


class TracedFunction:
    """A function with its trace tree. Call it like the function.

    Attributes: `graph` (the first trace's IR), `graph_for(*args)`, `guards`,
    `stats`, `explain()`.
    """

    _made_by = "trace"  # the first stage's name in dumps

    def __init__(self, fn, example_inputs, *, backend: str = "auto",
                 budget: int = DEFAULT_BUDGET, name: str | None = None):
        if backend != backends.AUTO:
            backends.get(backend)  # an unknown name raises, listing the known ones
        self.fn = fn
        self.backend = backend
        self.budget = budget
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.traces: list[Trace] = []
        self.stats = {"compiles": 0, "guard_failures": 0, "cache_hits": 0, "eager_fallbacks": 0,
                      "backward_kernels": 0, "backward_replays": 0}
        self.events: list[str] = []
        self._miss_counts: Counter = Counter()
        self._warned = False
        self._aborted: str | None = None
        self._last: Trace | None = None
        self._lock = threading.RLock()  # tracing and lazy compiles; calls run concurrently
        self._flat_specs: dict = {}
        if example_inputs is LAZY:  # script mode: compiled at the first call
            return
        if not isinstance(example_inputs, tuple):
            example_inputs = (example_inputs,)
        self._trace_call(example_inputs, {}, reason="example inputs")

    # ---- subclasses provide parameters and Python reads ---------------------------------
    def _param_refs(self) -> list:
        """[((store, key), name)]: where each parameter input is read from at a call."""
        return []

    def _param_inputs(self) -> list:
        return [(name, store[key]) for (store, key), name in self._param_refs()]

    def _pyreads(self) -> list:
        return function_reads(self.fn)

    def _call_eager(self, args, kwargs):
        return self.fn(*args, **kwargs)

    def _signature_fn(self):
        return self.fn

    def _backend_name(self) -> str:
        """'numba' for compiled kernels, 'interpret' for the reference interpreter.
        `auto` picks numba unless TRACEJIT_BACKEND says otherwise."""
        return backends.resolve(self.backend)

    # ---- calling ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if STATE.capture is not None:  # inside another trace: inline, so it is recorded
            return self._call_eager(args, kwargs)
        if _EVENTS[0]:
            with events.span(f"tracejit::call {self.name}"):
                return self._call(args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        tensors, others = [], []
        spec = self._flat_spec(args, tensors, others) if not kwargs else None
        if spec is None:
            tensors, others = [], []
            spec = flatten((args, kwargs), tensors, others)
        miss = None
        for tr in self.traces:
            if tr.in_spec != spec:
                continue
            inputs = tensors + [store[key] for store, key in tr.param_refs] + tr.captured
            if _EVENTS[0]:
                with events.span(f"tracejit::guards {self.name}"):
                    fits = tr.guards.check(*inputs, *others)
            else:
                fits = tr.guards.check(*inputs, *others)
            if fits:
                try:
                    out = tr.run(inputs)
                except GuardMiss as m:  # a side exit: another trace may take this path
                    miss = Guard(f"value read by {m.node.attrs['kind']}(): expected "
                                 f"{_short(m.node.attrs['expected'])}, saw {m.seen!r}",
                                 m.node.source)
                    continue
                self.stats["cache_hits"] += 1
                self._last = tr
                return out
        if self.traces:  # (a scripted function's first call records: no guard failed)
            self.stats["guard_failures"] += 1
        if miss is None and self.traces:
            tr = self.traces[0]
            if tr.in_spec != spec:
                miss = Guard("the structure of the arguments changed (which arguments are "
                             "tensors, keyword names and order, dict keys)")
            else:
                inputs = tensors + [store[key] for store, key in tr.param_refs] + tr.captured
                miss = tr.guards.first_failure(inputs + others)
        miss = miss or Guard("first call" if not self.traces else "no trace")
        self._miss_counts[(miss.what, miss.where)] += 1
        log("guards", f"{self.name}: guard failed: {miss}")
        events.instant(f"tracejit::guard_miss {self.name}", args={"guard": str(miss)})
        if self._aborted or len(self.traces) >= self.budget:
            self.stats["eager_fallbacks"] += 1
            self._warn_budget(miss)
            return self._call_eager(args, kwargs)
        unguardable = next((o for o in others if not _guardable(o)), None)
        if unguardable is not None:  # its value cannot be checked: every such call is eager
            self.stats["eager_fallbacks"] += 1
            log("guards", f"{self.name}: an argument of type {type(unguardable).__name__} "
                          "cannot be guarded; the call runs eagerly")
            return self._call_eager(args, kwargs)
        with self._lock, events.span(f"tracejit::trace {self.name}"):
            return self._trace_call(args, kwargs, reason=str(miss))

    def _flat_spec(self, args: tuple, tensors: list, others: list):
        """The structure of a call of tensors and scalars only (the common call), from a
        table keyed by which positions hold tensors: what `flatten` would return, at a
        fraction of its cost. None for any other call."""
        key = 0
        for a in args:
            key <<= 1
            if isinstance(a, Tensor):
                tensors.append(a)
                key |= 1
            elif type(a) in _SCALAR_TYPES:
                others.append(a)
            else:
                return None
        key |= 1 << len(args)  # the length, so that (t,) and (p, t) differ
        spec = self._flat_specs.get(key)
        if spec is None:
            spec = self._flat_specs[key] = flatten((args, {}), [], [])
        return spec

    def _warn_budget(self, miss: Guard) -> None:
        if self._warned:
            return
        self._warned = True
        if self._aborted:
            msg = f"tracejit: {self.name} runs eagerly: {self._aborted}"
        else:
            (what, where), _ = self._miss_counts.most_common(1)[0]
            msg = (f"tracejit: {self.name} reached its budget of {self.budget} traces and now "
                   f"runs eagerly when no trace fits; the guard that kept failing: {what}"
                   + (f" (at {where})" if where else ""))
        self.events.append(msg)
        log("recompiles", msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=user_stacklevel())

    def _trace_call(self, args, kwargs, reason: str):
        """Run the call eagerly while recording it; keep the new trace."""
        tensors, others = [], []
        spec = flatten((args, kwargs), tensors, others)
        # (a 0-d CPU tensor may join CUDA ones, as in PyTorch: a scripted `n: int` is one)
        on_device = [not isinstance(t._data, np.ndarray) for t in tensors if t._data.ndim or
                     not isinstance(t._data, np.ndarray)] + [
            not isinstance(p._data, np.ndarray) for _, p in self._param_inputs()]
        if any(on_device) and not all(on_device):
            raise RuntimeError(f"{self.name}: the inputs and parameters of a traced call must "
                               "all be on one device (CUDA or the CPU): move them with .to()")
        rec = Recorder(self.name)
        rec.graph.made_by = self._made_by
        for k, t in enumerate(tensors):
            rec.add_input(t, _arg_name(self._signature_fn(), k, spec), "arg", symbolic=True)
        params = self._param_inputs()
        for pname, p in params:
            rec.add_input(p, pname, "param", symbolic=False)
        if STATE.capture is not None:
            raise RuntimeError("tj.trace cannot be nested inside another trace")
        pyreads = self._pyreads()  # before the call: what the call reads is what it saw
        STATE.capture = rec
        try:
            call_args = unflatten(spec, tensors, others)
            result = self._call_eager(*call_args)
        finally:
            STATE.capture = None
        rec.closed = True
        if not rec.aborted:
            rec.canonicalize_sizes()
        if rec.aborted:  # the call itself completed eagerly; keep no trace
            self.stats["eager_fallbacks"] += 1
            if rec.abort_is_final:
                self._aborted = rec.aborted
                self._warn_budget(Guard(rec.aborted))
            else:
                self.events.append(f"a call ran eagerly: {rec.aborted}")
                log("recompiles", f"{self.name}: a call ran eagerly: {rec.aborted}")
            return _as_eager(rec, result)
        out_tensors, out_others = [], []
        out_spec = flatten_outputs(result, rec.inputs, out_tensors, out_others)
        if any(has_sym(v) for v in out_others):  # this call's sizes, as eager gives them
            result = unflatten(out_spec, out_tensors, hint_of(out_others), rec.inputs)
        rec.graph.outputs = [rec.value_of(t) for t in out_tensors]
        # sizes the call returns as Python ints are read from the run's sizes: a pass must
        # keep what binds them
        rec.graph.size_outputs = [s for v in out_others for s in _sizes_in(v)]
        guards = EntryGuards(rec, len(others), dict(enumerate(others)), pyreads)
        backend = "cuda" if on_device and all(on_device) else self._backend_name()
        trace = Trace(rec, guards, spec, out_spec, out_others, len(tensors) + len(params),
                      backend, [ref for ref, _ in self._param_refs()], out_tensors)
        trace.stats = self.stats
        self.traces.append(trace)
        self._last = trace
        self.stats["compiles"] += 1
        event = f"trace {len(self.traces)} recorded ({len(rec.graph.nodes)} nodes); reason: " \
                f"{reason}"
        self.events.append(event)
        log("recompiles", f"{self.name}: {event}")
        log("graph", "\n" + rec.graph.format(sources=True))
        if rec.passthrough:  # script mode: eager returned an input itself on this path
            result = unflatten(out_spec, [rec.passthrough_of(t) for t in out_tensors],
                               hint_of(out_others) if any(has_sym(v) for v in out_others)
                               else out_others, rec.inputs)
        rec.release()
        return result

    # ---- introspection ------------------------------------------------------------------
    @property
    def code(self) -> str:
        """The generated source of the first trace: its host program (the numba backend
        runs a call that records no gradient as this one function), then the kernel of
        every fused region."""
        parts = []
        tr = self.traces[0]
        if tr._program is _UNSET:
            tr._program = _program_for(tr.graph, tr.backend, tr.bindings)
        if tr._program is not None:
            parts.append(f"# host program of {self.name}\n{tr._program.source}")
        for seg in tr.runner.segments():  # a script graph: each straight-line part's
            if seg._program is _UNSET:
                seg._program = _program_for(seg.graph, seg.backend, seg.bindings)
            if seg._program is not None:
                parts.append(f"# host program of segment {seg.graph.name}\n"
                             f"{seg._program.source}")
        # the kernels' source: the trace's backend's, the CPU's where it compiles none
        backend = backends.get(tr.backend)
        if backend.kernels is None:
            backend = backends.get("numba")
        for node in self.graph.walk():
            if node.op == "fused":
                try:
                    parts.append(backend.kernel_source(node.regions[0], node.attrs["kind"]))
                except Unsupported as why:
                    parts.append(f"# fused region at {node.source}: interpreted ({why})\n")
        return "\n".join(parts)

    @property
    def graph(self):
        if not self.traces:
            why = self._aborted or "it has not been called yet: a scripted function is " \
                "compiled at its first call, for the types of its arguments"
            raise RuntimeError(f"{self.name} has no graph ({why})")
        return self.traces[0].graph

    def graph_for(self, *args, **kwargs):
        """The graph a call with these arguments takes. It makes the call (value guards
        can only be decided by running), tracing a new path if none fits."""
        self._last = None
        self(*args, **kwargs)
        if self._last is None:
            raise RuntimeError(f"{self.name} ran these inputs eagerly (no trace fits)")
        return self._last.graph

    @property
    def backward_graph(self):
        """The optimised backward graph of the first trace (built by its first call that
        records gradients on the numba backend), or None before that. A script graph with
        control flow has no single backward: each straight-line part has its own, and
        this is a `SegmentBackwards` that prints them all, each under a header saying
        which part of the function it differentiates."""
        if not self.traces:
            return None
        tr = self.traces[0]
        if tr.runner is not None and getattr(tr, "control_flow", False):
            parts = [(c, bt) for c in [tr] + tr.runner.segments() for bt in c.backwards]
            return SegmentBackwards(parts) if parts else None
        return tr.backwards[0].graph if tr.backwards else None

    @property
    def backward_graphs(self) -> list:
        """Every compiled backward graph of the first trace: one, or for a script graph
        one per segment (and per pattern of inputs needing gradients) built so far."""
        if not self.traces:
            return []
        tr = self.traces[0]
        return [bt.graph for c in [tr] + tr.runner.segments() for bt in c.backwards]

    @property
    def guards(self) -> list[Guard]:
        """Every guard of the first trace: entry guards, then value guards."""
        tr = self.traces[0]
        return tr.guards.guards + tr.value_guards()

    def explain(self) -> str:
        lines = [f"tracejit report for {self.name}: {len(self.traces)} trace(s), "
                 f"stats {self.stats}"]
        for k, tr in enumerate(self.traces, 1):
            passes = " -> ".join(f"{name} ({n})" for name, n, _ in tr.stages.summary)
            lines.append(f"\ntrace {k}: {passes} nodes; guards:")
            for g in tr.guards.guards + tr.value_guards():
                lines.append(f"  - {g}")
            data_sizes = _data_sizes(tr.graph)
            if data_sizes:
                lines.append("  sizes from data (bound when the program runs, never "
                             "guarded):")
                lines += [f"  - {d}" for d in data_sizes]
            if tr.graph.notes:
                lines.append("  pass decisions:")
                lines += [f"  - {n}" for n in tr.graph.notes]
            for j, bt in enumerate(tr.backwards, 1):
                passes = " -> ".join(f"{name} ({n})" for name, n, _ in bt.stages.summary)
                lines.append(f"  compiled backward {j}: {passes} nodes" + (
                    " (loaded from the backward cache)" if bt.loaded else ""))
                if bt.fwd_guards is not None:
                    lines.append("    size guards the backward added:")
                    lines += [f"    - {g}" for g in bt.fwd_guards.guards]
                if bt.graph.notes:
                    lines.append("    fusion decisions:")
                    lines += [f"    - {n}" for n in bt.graph.notes]
        lines.append("\nevents:")
        lines += [f"  - {e}" for e in self.events]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<TracedFunction {self.name}: {len(self.traces)} trace(s)>"


def _sizes_in(value) -> list:
    found: list = []
    map_leaves(value, SymInt, found.append)
    return found


def _data_sizes(graph) -> list[str]:
    """What binds each size symbol of a script graph: a tensor read, a loop's counter, a
    list's length."""
    names = {v: v.name for v in graph.inputs}
    out = []
    for n in graph.walk():
        if n.op == BIND:
            src = names.get(n.inputs[0], "a value")
            out.append(f"{n.attrs['symbol']} = size({src})  ({n.source})")
        elif n.op == LOOP and n.attrs.get("index"):
            out.append(f"{n.attrs['index']} = the iteration of the loop at {n.source}")
    return out


def _arg_name(fn, k: int, spec) -> str:
    try:
        params = [p for p in inspect.signature(fn).parameters]
    except (TypeError, ValueError):
        params = []
    args_spec = spec[1][0][1]  # structure of positional args
    flat = []
    for i, s in enumerate(args_spec):
        if s[0] == "t":
            flat.append(params[i] if i < len(params) else f"arg{i}")
    return flat[k] if k < len(flat) else f"in{k}"


class TracedModule(TracedFunction):
    """A module with its trace tree; parameters and buffers are graph inputs."""
    def __init__(self, module, example_inputs, **kw):
        self.module = module
        super().__init__(module, example_inputs, name=type(module).__name__, **kw)

    def _param_refs(self) -> list:
        # read anew at each trace: a swapped submodule (guarded by identity) brings its own
        return [((m._parameters if kind == "p" else m._buffers, attr), name)
                for name, m, attr, kind in _named_tensors(self.module)]

    def _pyreads(self) -> list:
        return module_reads(self.module, stores=("_modules",))

    def _call_eager(self, args, kwargs):
        return self.module(*args, **kwargs)

    def _signature_fn(self):
        return self.module.forward

    def __getattr__(self, name):
        return getattr(self.__dict__["module"], name)


def _named_tensors(module):
    for prefix, m in module.named_modules():
        for attr, p in m._parameters.items():
            if p is not None:
                yield (f"{prefix}.{attr}" if prefix else attr), m, attr, "p"
        for attr, b in m._buffers.items():
            if b is not None:
                yield (f"{prefix}.{attr}" if prefix else attr), m, attr, "b"


def trace(fn_or_module, example_inputs, *, backend: str = "auto",
          budget: int = DEFAULT_BUDGET):
    """Trace `fn_or_module` on `example_inputs` into a guarded, reusable callable.

    >>> f = tj.trace(lambda x: (x * 2).relu().sum(), (tj.randn(4, 3),))
    >>> f(tj.randn(16, 3))   # same trace: sizes are symbolic
    >>> print(f.graph); print(f.explain())
    """
    if isinstance(fn_or_module, Module):
        return TracedModule(fn_or_module, example_inputs, backend=backend, budget=budget)
    if not callable(fn_or_module):
        raise TypeError(f"tj.trace expects a function or nn.Module, got "
                        f"{type(fn_or_module).__name__}")
    return TracedFunction(fn_or_module, example_inputs, backend=backend, budget=budget)


class SegmentBackwards:
    """The backward graphs of a script graph's straight-line parts (`Segment`s), as
    `.backward_graph` shows them: printed one after another, each under a header naming
    the part, the lines of the function it covers and the inputs it differentiates."""

    def __init__(self, parts: list):
        self.parts = parts  # [(the compiled part, its BackwardTrace)]

    @property
    def graphs(self) -> list:
        return [bt.graph for _, bt in self.parts]

    def __iter__(self):
        return iter(self.graphs)

    def __len__(self) -> int:
        return len(self.parts)

    def __getitem__(self, k):
        return self.graphs[k]

    @staticmethod
    def header(part, bt) -> str:
        graph = part.graph
        lines = sorted({n.source for n in graph.nodes if n.source})
        where = (f"line {lines[0]}" if len(lines) == 1 else
                 f"lines {lines[0]} .. {lines[-1]}") if lines else "no source lines"
        wrt = [v.name for v, need in zip(graph.inputs, bt.needs or ()) if need]
        return (f"# backward of {graph.name} ({where}); gradients for: "
                f"{', '.join(wrt) or 'none'}")

    def __str__(self) -> str:
        return "\n\n".join(f"{self.header(part, bt)}\n{bt.graph}"
                            for part, bt in self.parts)

    __repr__ = __str__


def _c_contiguous(array) -> bool:
    """Row-major? (a CUDA device array's flags are a dict)"""
    flags = array.flags
    return flags["C_CONTIGUOUS"] if isinstance(flags, dict) else flags.c_contiguous
