"""The interpreter: runs an IR graph op by op through eager dispatch, on tensors.

It is the `interpret` backend (backends/registry.py) and the oracle the compiled backends
are tested against, and it runs what no kernel covers on the others (script graphs'
branches and loops, regions a backend cannot compile). Running through dispatch means a
traced call takes part in eager autograd exactly as the eager program would (hooks,
create_graph, double backward): so it lives with the capture, above the eager runtime.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..core.modes import STATE, set_grad
from ..backends import registry
from ..backends.guards import check_guard
from ..ir.graph import (BIND, FUSED, GUARD, IF, LIST, LIST_APPEND, LIST_GET, LIST_LEN,
                        LIST_STACK, LOOP, RAISE, SIZE, Graph, Value)
from ..core.diagnostics import raise_at
from ..core.symbolic import (SymInt, compile_sizes, eval_sizes, has_sym, map_leaves, plain_symbol,
                             symbols_in)
from ..ops import OPS
from ..tensor.device import STATS
from ..tensor.dispatch import apply, apply_inplace, binary, unary
from ..tensor.tensor import Tensor
from ..tensor import functional as T
from ..ops.registry import ELEMENTWISE
from ..core.lazy import lazy

_loops = lazy("tracejit.capture.loops")        # (they import this module)
_compiled = lazy("tracejit.capture.compiled")


class _Region:
    """A fused node: its compiled kernel when the backend has one and no gradient is being
    recorded, else its ops interpreted one by one (which autograd sees)."""

    _UNSET = object()

    def __init__(self, node, backend: str):
        self.node = node
        self.interpreter = Interpreter(node.regions[0])
        self.backend = backend
        self.kernel = self._UNSET if registry.get(backend).kernels else None

    def run(self, inputs: list, env: dict, record: bool = True) -> list:
        if self.kernel is not None and not (record and STATE.modes.grad_enabled and any(
                getattr(t, "_rg", False) for t in inputs)):
            if self.kernel is self._UNSET:
                compile_region = registry.get(self.backend).compile_region()
                self.kernel = compile_region(self.node.regions[0], self.node.source,
                                             self.node.attrs["kind"])
            if self.kernel is not None:
                arrays = [t._data if isinstance(t, Tensor) else t for t in inputs]
                if registry.get(self.backend).device == "cuda":
                    STATS["kernels"][f"fused[{self.node.attrs['kind']}]"] += 1
                return [Tensor._make(a) for a in self.kernel(arrays, env)]
        return self.interpreter.run(inputs, env, record)


class Interpreter:
    """A graph prepared for repeated runs: values live in a list, each step knows the
    slots it reads and writes and which dispatch entry to call."""

    def __init__(self, graph: Graph, backend: str = "interpret", owner=None,
                 carriers: frozenset = frozenset()):
        """`owner`: the compiled script graph this is part of; on the numba backend its
        straight-line parts then run as compiled segments (forward and backward)."""
        self.graph = graph
        self.backend = backend
        slot = {v: i for i, v in enumerate(graph.inputs)}
        self.steps = []
        segments = {}
        if registry.get(backend).host_programs and owner is not None and \
                getattr(owner, "control_flow", False):
            segments = _segments(graph, owner, carriers)
        skip = set()
        for node in graph.nodes:
            if id(node) in skip:
                continue
            seg = segments.get(id(node))
            if seg is not None:  # a compiled straight-line part: its nodes are one step
                skip.update(seg.node_ids)
                reads = [(slot[v], None) for v in seg.reads] + [
                    (None, sym) for sym in seg.params]
                outs = []
                for v in seg.writes:
                    slot[v] = len(slot)
                    outs.append(slot[v])
                self.steps.append(("segment", seg.grad_mode, seg, reads, None, outs))
                continue
            reads = [slot[x] if isinstance(x, Value) else None for x in node.inputs]
            consts = [None if isinstance(x, Value) else compile_sizes(x) for x in node.inputs]
            if node.op == GUARD:
                self.steps.append(("guard", node, reads[0], None, None, None))  # op: slot
                continue
            if node.op in _SCRIPT_STEPS:  # branches, loops, sizes, lists
                outs = []
                for v in node.outputs:
                    slot[v] = len(slot)
                    outs.append(slot[v])
                self.steps.append((node.op, node, _control(node, backend, owner, carriers),
                                   list(zip(reads, consts)), None, outs))
                continue
            if node.op == FUSED:  # run the region's ops one by one
                outs = []
                for v in node.outputs:
                    slot[v] = len(slot)
                    outs.append(slot[v])
                self.steps.append(("region", node, _Region(node, backend),
                                   list(zip(reads, consts)), None, outs))
                continue
            op = OPS[node.op]
            symbolic = any(isinstance(x, SymInt) for x in node.inputs) or has_sym(
                tuple(node.attrs.values()))
            attrs = {k: compile_sizes(v) for k, v in node.attrs.items()}
            if symbolic:
                kind = "symbolic"
            elif op.kind == ELEMENTWISE and not attrs and len(reads) == 1:
                kind, op = "unary", (unary, op)
            elif op.kind == ELEMENTWISE and not attrs and len(reads) == 2 and \
                    reads[0] is not None:
                kind, op = "binary", (binary, op)
            else:
                kind = "apply"
            for v in node.outputs:
                slot[v] = len(slot)
            self.steps.append((kind, node, op, list(zip(reads, consts)), attrs,
                               slot[node.outputs[0]]))
        self.n_slots = len(slot)
        self.outputs = [slot[v] for v in graph.outputs]
        self.size_outputs = [compile_sizes(e) for e in graph.size_outputs]
        self.mutations = [(slot[t], slot[v]) for t, v in graph.mutations]
        # a loop body of compiled segments and bookkeeping only can record its iterations
        # on one tape, one autograd node for the loop (capture/loops.py)
        self.tape_safe = not self.mutations and all(s[0] in _TAPE_STEPS for s in self.steps)
        self.tapeable = self.tape_safe and any(s[0] == "segment" for s in self.steps)

    def segments(self) -> list:
        """The compiled segments of this graph and of its regions, in order."""
        out = []
        for kind, _, prepared, *_ in self.steps:
            if kind == "segment":
                out.append(prepared)
            elif kind in (IF, LOOP):
                for region in prepared[0]:
                    out += region.segments()
        return out

    def run(self, inputs: list, env: dict, record: bool = True) -> list:
        """Run with `inputs` bound to the graph inputs and size symbols bound in `env`.

        With record=False nothing is recorded for autograd whatever grad mode the ops
        were traced under (the compiled-autograd path owns the gradients)."""
        vals = list(inputs) + [None] * (self.n_slots - len(inputs))
        caller_mode = STATE.modes.grad_enabled
        try:
            self._run(vals, env, record)
        finally:
            set_grad(caller_mode)
        for target, value in self.mutations:  # every guard passed: now commit
            apply_inplace(OPS.setitem, vals[target], vals[value], index=(Ellipsis,))
        return [vals[i] for i in self.outputs]

    def run_region(self, inputs: list, env: dict, record: bool, tape=None) -> tuple[list, list]:
        """A region's (yielded values, yielded sizes); sizes it binds stay bound in env.
        With a `tape` (a tapeable loop body) its segments record on the tape."""
        vals = list(inputs) + [None] * (self.n_slots - len(inputs))
        self._run(vals, env, record, tape)
        return [vals[i] for i in self.outputs], [eval_sizes(e, env) for e in self.size_outputs]

    def _run(self, vals: list, env: dict, record: bool = True, tape=None) -> None:
        for kind, node, op, reads, attrs, out in self.steps:
            if kind == "guard":
                check_guard(node, vals[op]._data)
                if STATE.capture is not None:
                    STATE.capture.replay_guard(node, vals[op])
                continue
            if kind == "segment":
                ins = [vals[r] if r is not None else _carrier(env[c]) for r, c in reads]
                if tape is not None:
                    results = tape.run(op, ins, node)
                else:
                    set_grad(node and record)  # node: the segment's grad mode
                    results = op.call(ins)
                for i, v in zip(out, results):
                    vals[i] = v
                continue
            if kind in _SCRIPT_STEPS:
                args = [vals[r] if r is not None else eval_sizes(c, env) for r, c in reads]
                for i, v in zip(out, _SCRIPT_STEPS[kind](node, op, args, env, record)):
                    vals[i] = v
                set_grad(node.grad_mode and record)
                continue
            set_grad(node.grad_mode and record)
            if kind == "region":
                results = op.run([vals[r] if r is not None else c for r, c in reads], env,
                                 record)
                for i, v in zip(out, results):
                    vals[i] = v
                continue
            if kind == "binary":
                (r0, _), (r1, c1) = reads
                vals[out] = op[0](op[1], vals[r0], vals[r1] if r1 is not None else c1)
            elif kind == "unary":
                vals[out] = op[0](op[1], vals[reads[0][0]])
            elif kind == "apply":
                vals[out] = apply(op, *[vals[r] if r is not None else c for r, c in reads],
                                  **attrs)
            else:
                args = [vals[r] if r is not None else eval_sizes(c, env) for r, c in reads]
                vals[out] = apply(op, *args, **{k: eval_sizes(v, env) for k, v in attrs.items()})


# ---- script graphs: branches, loops and sizes from data ---------------------------------------
def _control(node, backend: str, owner=None, carriers: frozenset = frozenset()):
    """What a script node's step needs prepared: interpreters of its regions, its sizes."""
    if node.op in (IF, LOOP):
        index, start = node.attrs.get("index"), node.attrs.get("start")
        if index is not None and type(start) is int and start >= 0:
            carriers = carriers | {index}  # an index >= 0: segments may take it as a shape
        regions = [Interpreter(r, backend, owner, carriers) for r in node.regions]
        return regions, {k: compile_sizes(v) for k, v in node.attrs.items()}
    return None, {k: compile_sizes(v) for k, v in node.attrs.items()}


def _scalar(a):
    """The value of a 0-d array; a device array's is copied to the host (only it)."""
    if type(a) is not np.ndarray:
        a = a.copy_to_host()
    if a.size != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return a.reshape(()).item()


def _run_if(node, prepared, args, env, record):
    (then, orelse), _ = prepared
    region = then if _scalar(args[0]._data) else orelse
    outs, sizes = region.run_region(args[1:], env, record)
    env.update(zip(node.attrs.get("sizes", ()), sizes))
    for k, d, sym in node.attrs.get("binds", ()):  # sizes that differ between the paths
        env[sym] = outs[k]._data.shape[d]
    return outs


def _run_loop(node, prepared, args, env, record):
    regions, attrs = prepared
    k = attrs["n_carried"]
    carried, invariant = list(args[:k]), list(args[k:])
    names = attrs.get("carried_sizes") or ()
    env.update(zip(names, (eval_sizes(e, env) for e in attrs.get("sizes_init") or ())))
    if attrs.get("stop") is not None:
        steps = range(eval_sizes(attrs["start"], env), eval_sizes(attrs["stop"], env),
                      eval_sizes(attrs["step"], env))
    else:
        steps = itertools.count()
    index = attrs.get("index")
    cond = regions[0] if attrs.get("has_cond") else None
    body = regions[-1]
    tape = None
    if record and STATE.modes.grad_enabled and body.tapeable and (cond is None or cond.tape_safe):
        tape = _loops.LoopTape()
    for i in steps:
        if index is not None:
            env[index] = i
        if cond is not None:
            (go,), _ = cond.run_region(carried + invariant, env, record, tape)
            if not _scalar(go._data):
                break
        carried, sizes = body.run_region(carried + invariant, env, record, tape)
        env.update(zip(names, sizes))
    if tape is not None:
        tape.close(args, carried)
    return carried


def _run_bind(node, prepared, args, env, record):
    env[node.attrs["symbol"]] = int(_scalar(args[0]._data))
    return ()


def _run_size(node, prepared, args, env, record):
    _, attrs = prepared
    lhs = eval_sizes(attrs["lhs"], env)
    value = lhs if attrs["op"] is None else _COMPARE[attrs["op"]](
        lhs, eval_sizes(attrs["rhs"], env))
    return (Tensor._make(np.array(value, dtype=node.outputs[0].dtype.np)),)


def _run_raise(node, prepared, args, env, record):
    raise_at(node.attrs["exc"], node.source, node.attrs.get("function", "<script>"))


_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
def _run_list(node, prepared, args, env, record):
    return (list(args),)  # a new list each run: appends update it in place


def _run_list_append(node, prepared, args, env, record):
    args[0].append(args[1])
    return (args[0],)


def _run_list_get(node, prepared, args, env, record):
    item = args[0][eval_sizes(prepared[1]["index"], env)]
    for d, sym in node.attrs.get("binds", ()):
        env[sym] = item._data.shape[d]
    return (item,)


def _run_list_len(node, prepared, args, env, record):
    env[node.attrs["symbol"]] = len(args[0])
    return ()


def _run_list_stack(node, prepared, args, env, record):
    how = T.stack if node.attrs["how"] == "stack" else T.cat
    out = how(args[0], node.attrs["dim"])
    env[node.attrs["symbol"]] = out._data.shape[node.attrs["dim"]]
    for d, sym in node.attrs.get("binds", ()):
        env[sym] = out._data.shape[d]
    return (out,)


_SCRIPT_STEPS = {IF: _run_if, LOOP: _run_loop, BIND: _run_bind, SIZE: _run_size,
                 RAISE: _run_raise, LIST: _run_list, LIST_APPEND: _run_list_append,
                 LIST_GET: _run_list_get, LIST_LEN: _run_list_len,
                 LIST_STACK: _run_list_stack}


# the steps a tapeable loop body may have besides segments: none records autograd
_TAPE_STEPS = frozenset({"segment", "guard", BIND, SIZE, RAISE, LIST, LIST_APPEND, LIST_GET,
                         LIST_LEN})


# ---- compiled segments of script graphs -------------------------------------------------------
MIN_SEGMENT_NODES = 2


def _segmentable(node) -> bool:
    if node.op == FUSED:
        return True
    op = OPS[node.op] if node.op in OPS else None
    return op is not None and not op.data_dependent


def _size_symbols(node) -> set:
    found: set = set()
    map_leaves((node.inputs, tuple(node.attrs.values()), [v.shape for v in node.outputs]),
               SymInt, lambda s: found.update(symbols_in(s.source())))
    return found


def _kernel_symbols(node) -> set:
    found: set = set()
    for inner in node.regions[0].nodes:
        found |= _size_symbols(inner)
    return found


def _needed_symbols(node) -> set:
    """The size symbols a node needs when it runs: a fused kernel's also those its inner
    nodes use as numbers (`mul(%in0, u0)`, a loop index as a factor)."""
    found = _size_symbols(node)
    return found | _kernel_symbols(node) if node.op == FUSED else found


def _plain_symbols(values) -> set:
    return {plain_symbol(d) for v in values for d in v.shape} - {None}


CARRIER_OFFSET = 2  # a carried size k travels as an empty array of shape (k + 2, 0):
                    # always symbolic (sizes 0 and 1 of inputs are specialised)


def _carrier(size: int):
    """The carrier of a loop index (an empty array nothing writes: shared per size)."""
    t = _CARRIERS.get(size)
    if t is None:
        if len(_CARRIERS) > 4096:
            _CARRIERS.clear()
        t = _CARRIERS[size] = Tensor._make(np.empty((size + CARRIER_OFFSET, 0),
                                                     dtype=np.bool_))
    return t


_CARRIERS: dict = {}


def _segments(graph: Graph, owner, carriers: frozenset = frozenset()) -> dict:
    """{id(first node): Segment} for the maximal runs of table ops (and fused kernels)
    whose sizes their inputs' shapes give, or that are `carriers` (loop indices the
    segment receives as the shape of an empty array): each runs as one compiled call."""
    runs, run = [], []
    inside, external = set(), []

    def close():
        if len(run) >= MIN_SEGMENT_NODES:
            runs.append(list(run))
        run.clear()
        inside.clear()
        external.clear()

    for node in graph.nodes:
        if not _segmentable(node) or (run and node.grad_mode != run[0].grad_mode):
            close()
            if not _segmentable(node):
                continue
        ext = [x for x in node.inputs if isinstance(x, Value) and x not in inside]
        usable = carriers
        if node.op == FUSED and _kernel_symbols(node) & carriers:
            usable = frozenset()  # a kernel reads its sizes by name: no carried size
        needed = _needed_symbols(node)
        if not needed <= _plain_symbols(external + ext) | usable:
            close()
            ext = [x for x in node.inputs if isinstance(x, Value)]
            if not needed <= _plain_symbols(ext) | usable:
                continue  # its sizes come from elsewhere: it runs as a step of its own
        run.append(node)
        external.extend(x for x in ext if not any(x is e for e in external))
        inside.update(node.outputs)
    close()
    if not runs:
        return {}
    Segment = _compiled.Segment
    later: dict = {}  # value -> index of the last node reading it (or len: an output)
    order = {id(n): k for k, n in enumerate(graph.nodes)}
    for n in graph.nodes:
        for x in n.inputs:
            if isinstance(x, Value):
                later[x] = max(later.get(x, -1), order[id(n)])
    for v in list(graph.outputs) + [v for _, v in graph.mutations]:
        later[v] = len(graph.nodes)
    out = {}
    for k, nodes in enumerate(runs):
        last = order[id(nodes[-1])]
        produced = [v for n in nodes for v in n.outputs]
        writes = [v for v in produced if later.get(v, -1) > last]
        seen, reads = set(produced), []
        for n in nodes:
            for x in n.inputs:
                if isinstance(x, Value) and x not in seen:
                    seen.add(x)
                    reads.append(x)
        params = sorted(set().union(*(_size_symbols(n) for n in nodes)) & carriers -
                        _plain_symbols(reads))
        out[id(nodes[0])] = Segment(graph, nodes, reads, writes, owner,
                                    f"{graph.name}_part{k}", params)
    return out
