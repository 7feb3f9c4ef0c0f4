"""Whole-graph autodiff: the backward of a trace, partitioned and compiled.

The joint graph is captured by tracing: the forward graph is replayed through
eager dispatch under a recorder and `autograd.grad` runs the op table's vjp
rules — tracejit ops — so they are recorded too, with symbolic sizes. The joint
graph is then partitioned: the forward part also returns the values the
backward needs that are expensive to recompute (matmuls, reductions, ...),
while cheap elementwise values are recomputed inside the backward's fused
kernels instead of being saved. Both parts go through the pass pipeline and
the backend like any graph. A traced call that records gradients runs the
forward part and gives its outputs one autograd node that runs the backward
part.
"""
from __future__ import annotations

import os

import numpy as np

from ..core.modes import enable_grad, STATE
from ..tensor.node import FREED_MESSAGE, Node
from ..backends import registry as backends
from .interpreter import Interpreter
from ..ir.graph import GUARD, Graph, Value
from ..core.symbolic import SymInt, symbols_in
from ..ir.passes import PassManager, Stages
from ..ir.verifier import verify as verify_graph
from ..ir.passes.outputs import copy_aliased_outputs
from ..ir.walk import subgraph
from ..ops import OPS
from ..ops.registry import CREATION, ELEMENTWISE, RANDOM
from ..tensor.creation import ones, zeros
from ..tensor.dispatch import _edge, counter
from ..tensor.tensor import FreshTensor, Tensor, _make
from .guards import EntryGuards
from .recorder import Recorder
from . import backward_cache
from .serialize import _size_source
from ..ops.creation import GENERATOR
from ..autograd import grad as autograd_grad


def _cheap(node) -> bool:
    """Recomputed in the backward rather than saved by the forward: elementwise ops
    (fused into the backward's kernels), views (free) and constants (zeros for an
    unused input's gradient) — except what jumps (see _jumps)."""
    if node.op not in OPS:
        return False
    op = OPS[node.op]
    return (op.kind == ELEMENTWISE and not _jumps(node)) or (
        op.view and node.op != "getitem") or (
        op.kind == CREATION and not any(isinstance(x, Value) for x in node.inputs))


def _jumps(node) -> bool:
    """Comparisons and other discontinuous ops. A recomputed value can differ from the
    forward's in its last bit (another kernel, another multiply-add contraction, numpy's
    exp against the kernels'), which is harmless for arithmetic but flips a mask like
    amax's `x == max` or abs'(x - min) at the minimum. So the backward reads saved
    forward values wherever they meet such an op."""
    return node.op in OPS and OPS[node.op].jumps


class _Decoded:
    """A graph attribute of a BackwardTrace that may hold the graph's encoding (from the
    backward cache) until it is first read."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, bt, owner=None):
        if bt is None:
            return self
        graph = getattr(bt, self.slot)
        if isinstance(graph, dict):
            graph = bt._decode(graph)
            setattr(bt, self.slot, graph)
        return graph

    def __set__(self, bt, graph) -> None:
        setattr(bt, self.slot, graph)


class BackwardTrace:
    """The partitioned joint graph of one trace: `forward` and `backward` parts."""

    def __init__(self, forward: Graph, inputs: list, backend: str, known=None):
        """`known`: (bindings, shape guards) of the forward trace, whose entry guards every
        call using this backward has passed."""
        self.backend = backend
        self.n_in = len(inputs)
        name = backward_cache.key(forward, inputs, backend, known)
        entry = backward_cache.load(name) if name is not None else None
        self.loaded = False
        if entry is not None:
            try:
                self._restore(entry)
                self.loaded = True
            except Exception:  # noqa: BLE001 — an entry that does not restore is a miss
                pass
        if not self.loaded:
            self._derive(forward, inputs, known)
            entry = self._entry() if name is not None else None
            if entry is not None:
                backward_cache.store(name, entry)
        self.generators = random_generators(forward)  # (a replay draws what the call drew)
        self.fwd_bindings = [b for b in self.bindings if b[0] < self.n_in]
        self.fwd_runner = _runner(self.fwd_final, backend, self.fwd_bindings)
        self.bwd_runner = _runner(self.graph, backend, self.bindings)

    def _derive(self, forward: Graph, inputs: list, known) -> None:
        # the replay draws the forward's random numbers once more: the generators go back
        # to where they were, so that the call's own forward part draws what eager would
        with rng_kept(random_generators(forward)):
            joint, out_values, self.diff, self.float_outs, self.reach, rec = _trace_joint(
                forward, inputs)
        n_in = len(inputs)
        fwd_inputs = joint.inputs[:n_in]
        grad_inputs = joint.inputs[n_in:]
        fwd_nodes, bwd_nodes = _split(joint, grad_inputs)
        recompute, saved = _plan(fwd_nodes, bwd_nodes, set(fwd_inputs), set(out_values),
                                 joint.outputs, {x for n in joint.nodes if _jumps(n)
                                                 for x in n.inputs if isinstance(x, Value)})
        self.forward_graph = _subgraph(joint, forward.name + "_fwd", fwd_inputs, fwd_nodes,
                                       out_values + saved)
        self.recorded = _subgraph(joint, forward.name + "_backward",
                                  fwd_inputs + grad_inputs + saved, recompute + bwd_nodes,
                                  joint.outputs)
        self.n_outputs = len(out_values)
        fwd_stages = PassManager().run(self.forward_graph)
        distinct = copy_aliased_outputs(fwd_stages[-1][1], self.n_outputs)
        if distinct is not fwd_stages[-1][1]:
            fwd_stages.append(("copy_aliased_outputs", distinct, 0.0))
        self.fwd_stages = Stages(self.forward_graph, fwd_stages, self._copy_outputs())
        self.fwd_final = fwd_stages[-1][1]
        stages = PassManager().run(self.recorded)
        self.stages = Stages(self.recorded, stages)
        self.graph = stages[-1][1]
        self.bindings = rec.bindings
        # the sizes the forward part was specialised to (the joint trace may have decided
        # more about the inputs' sizes than the forward trace did); the inputs' types are
        # the forward trace's, whose entry guards a call has passed
        implied, pinned = _implied(rec, n_in, forward, *known) if known else ((), ())
        guards = EntryGuards(rec, 0, {}, [], grad_mode=False, n_inputs=n_in,
                             types_from=n_in, skip=frozenset(implied) | frozenset(pinned))
        self.fwd_guards = guards if guards.n_relations else None
        # at backward time the inputs are the ones the forward part ran on (their versions
        # are checked): what is left to check is the output gradients' types and sizes
        fwd_symbols = {sym for i, _, sym in rec.bindings if i < n_in}
        among_inputs = {g.source for g in rec.shape_guards.values()
                        if symbols_in(g.source) <= fwd_symbols}
        fixed = {(i, d) for i in range(n_in) for d in range(len(joint.inputs[i].shape))}
        self.guards = EntryGuards(rec, 0, {}, [], grad_mode=False, types_from=n_in,
                                  skip=frozenset(among_inputs) | frozenset(fixed),
                                  layout=False)
        rec.release()

    def _copy_outputs(self):
        n_outputs = self.n_outputs

        def copy_outputs(graph):
            return copy_aliased_outputs(graph, n_outputs)

        copy_outputs.__name__ = "copy_aliased_outputs"
        return copy_outputs

    def _entry(self) -> dict | None:
        """What the backward cache keeps of a derivation (see backward_cache.py)."""
        guards = self.guards.spec()
        fwd_guards = None if self.fwd_guards is None else self.fwd_guards.spec()
        if guards is None or (self.fwd_guards is not None and fwd_guards is None):
            return None
        return {"forward": self.forward_graph, "recorded": self.recorded,
                "forward_final": self.fwd_final, "backward_final": self.graph,
                "forward_summary": self.fwd_stages.summary, "summary": self.stages.summary,
                "n_outputs": self.n_outputs, "diff": self.diff, "float_outs": self.float_outs,
                "reach": [[k, sorted(r)] for k, r in self.reach.items()],
                "bindings": [list(b) for b in self.bindings], "guards": guards,
                "forward_guards": fwd_guards}

    # the graphs as recorded (before the passes), which a loaded entry decodes on first
    # use: dumps, `explain()` and script loops read them, a call does not
    forward_graph = _Decoded()
    recorded = _Decoded()

    def _restore(self, entry: dict) -> None:
        self._decode = entry["decode"]
        self.forward_graph, self.recorded = entry["forward"], entry["recorded"]
        self.n_outputs = int(entry["n_outputs"])
        self.diff = [int(i) for i in entry["diff"]]
        self.float_outs = [int(k) for k in entry["float_outs"]]
        self.reach = {int(k): frozenset(int(i) for i in r) for k, r in entry["reach"]}
        self.fwd_stages = Stages.from_summary(lambda: self.forward_graph,
                                              entry["forward_summary"], self._copy_outputs())
        self.fwd_final = entry["forward_final"]
        self.stages = Stages.from_summary(lambda: self.recorded, entry["summary"])
        self.graph = entry["backward_final"]
        if os.environ.get("TRACEJIT_VERIFY"):  # as the pass manager verifies what it makes
            for g in (self.forward_graph, self.recorded, self.fwd_final, self.graph):
                verify_graph(g)
        self.bindings = [(int(i), int(d), _size_source(sym)) for i, d, sym in entry["bindings"]]
        self.guards = EntryGuards.from_spec(entry["guards"])
        spec = entry["forward_guards"]
        self.fwd_guards = None if spec is None else EntryGuards.from_spec(spec)

    def run_forward(self, inputs: list) -> tuple[list, list]:
        """(outputs, values saved for the backward)."""
        results = self.fwd_runner(inputs)
        return results[:self.n_outputs], results[self.n_outputs:]

    @property
    def read_inputs(self) -> frozenset:
        """Positions of the inputs whose values the backward part reads (an input only the
        forward reads, as a running statistic, may change before backward)."""
        reads = getattr(self, "_read_inputs", None)
        if reads is None:
            g = self.graph
            used = {id(x) for n in g.nodes for x in n.inputs if isinstance(x, Value)}
            used |= {id(v) for v in g.outputs}
            reads = self._read_inputs = frozenset(
                k for k, v in enumerate(g.inputs[:self.n_in]) if id(v) in used)
        return reads

    def run_backward(self, inputs: list, saved: list, grad_outputs: list) -> list | None:
        """Input gradients (in `diff` order), or None if a size guard does not hold."""
        grads = [grad_outputs[k] for k in self.float_outs]
        if not self.guards.check(*inputs, *grads):
            return None
        return self.bwd_runner(list(inputs) + grads + list(saved))


def random_generators(graph: Graph) -> list:
    """The generators the random ops of `graph` draw from (none if it has no random op)."""
    found = []
    for node in graph.walk():
        if node.op in OPS and OPS[node.op].kind == RANDOM:
            gen = node.attrs.get("generator") or GENERATOR
            if all(gen is not g for g in found):
                found.append(gen)
    return found


def rng_states(generators: list) -> list:
    return [(g, g.rng, g.rng.bit_generator.state) for g in generators]


class rng_kept:
    """Run a block, then put `generators` back to the states they had before it."""

    def __init__(self, generators: list, states: list | None = None):
        self.before = rng_states(generators)
        self.states = states  # states to run the block from (None: the current ones)

    def __enter__(self):
        for g, rng, state in self.states or ():
            g.rng = rng
            rng.bit_generator.state = state
        return self

    def __exit__(self, *exc):
        for g, rng, state in self.before:
            g.rng = rng
            rng.bit_generator.state = state
        return False


def _runner(graph: Graph, backend: str, bindings: list):
    """A function running `graph` on a list of tensors without recording autograd: its
    host program on the numba backend, else the interpreter."""
    if backends.get(backend).host_programs:
        program = backends.get(backend).host_module().host_program(graph, Tensor._make,
                                                                   bindings)
        if program is not None:
            return program.run
    interp = Interpreter(graph, backend)
    return lambda args: interp.run(
        args, {sym: args[i]._data.shape[d] for i, d, sym in bindings}, record=False)


def _trace_joint(forward: Graph, inputs: list):
    rec = Recorder(forward.name + "_joint")
    rec.allow_backward = True
    xs = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
    for t, v in zip(xs, forward.inputs):
        # a size the forward trace keeps symbolic stays symbolic here even when this call
        # has 1 there: the backward then serves every size the forward does
        rec.add_input(t, v.name, "arg", symbolic=True, like=v.shape)
    diff = [i for i, t in enumerate(inputs) if t.requires_grad]
    STATE.capture = rec
    try:
        with enable_grad():
            # sizes stay symbolic in the replay: bind the forward's symbols to ours
            env = {sym: rec.shape_of(xs[i])[d] for i, d, sym in forward.size_bindings()}
            outs = Interpreter(forward).run(xs, env)
            # the outputs that take part in autograd: those eager execution gives a
            # history (a detached output or an integer one has none)
            float_outs = [k for k, o in enumerate(outs) if o.requires_grad]
            STATE.capture = None
            # the output gradients where the outputs are (a CUDA trace's on the device)
            gs = [ones(*outs[k]._data.shape, dtype=outs[k].dtype, device=outs[k].device)
                  for k in float_outs]
            for k, g in zip(float_outs, gs):
                rec.add_input(g, f"grad_out{k}", "arg", symbolic=True,
                              like=rec.value_of(outs[k]).shape)
            STATE.capture = rec
            reach = {k: _inputs_reached(outs[k], xs) for k in float_outs}
            pairs = [(outs[k], g) for k, g in zip(float_outs, gs) if outs[k].requires_grad]
            grads = autograd_grad([o for o, _ in pairs], [xs[i] for i in diff],
                                  [g for _, g in pairs], allow_unused=True) if pairs else []
    finally:
        STATE.capture = None
    rec.closed = True
    if rec.aborted or len(grads) != len(diff):
        raise RuntimeError(f"backward of {forward.name} could not be traced: {rec.aborted}")
    # an input no output depends on gets no gradient (and no edge), as in eager autograd
    diff = [i for i, g in zip(diff, grads) if g is not None]
    grads = [g for g in grads if g is not None]
    out_values = [rec.value_of(o) for o in outs]
    rec.graph.outputs = [rec.value_of(g) for g in grads]
    rec.canonicalize_sizes()
    return rec.graph, out_values, diff, float_outs, reach, rec


def _inputs_reached(out: Tensor, xs: list) -> frozenset:
    """The inputs whose gradients eager autograd computes from `out`'s: those its graph
    leads to. An input that reaches only outputs a backward leaves without a gradient
    keeps `.grad` None, as in eager, rather than getting zeros."""
    held = [(x._grad_accumulator(), i) for i, x in enumerate(xs) if x.requires_grad]
    accs = {id(acc): i for acc, i in held}  # (held: ids of live nodes only)
    found = {i for i, x in enumerate(xs) if x is out}
    if out.grad_fn is None:
        return frozenset(found)
    seen, stack = {out.grad_fn}, [out.grad_fn]
    while stack:
        for edge in stack.pop()._edges:
            child = edge[0] if edge is not None else None
            if child is None or child in seen:
                continue
            seen.add(child)
            if id(child) in accs:
                found.add(accs[id(child)])
            stack.append(child)
    return frozenset(found)


_RELATIONS = {"==": lambda a, b: a == b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


def _implied(rec, n_in: int, forward: Graph, fwd_bindings: list, fwd_guards) -> tuple:
    """What the forward trace's guards already imply of the joint trace's guards about
    the inputs: (sources of size relations, (input, dim) of pinned sizes). Sizes are
    compared by class: equal sizes share a symbol, or a constant, in the forward graph's
    input types; a relation the forward checked itself carries over as it is."""
    def size_class(pos):
        size = forward.inputs[pos[0]].shape[pos[1]]
        return size.source() if isinstance(size, SymInt) else size

    def relation(g, positions):
        """(op, a, b, expected) over size classes, or None if a side is not an input's."""
        if g.lhs not in positions:
            return None
        if g.rhs.lstrip("-").isdigit():
            b = int(g.rhs)
        elif g.rhs in positions:
            b = size_class(positions[g.rhs])
        else:
            return None
        return g.op, size_class(positions[g.lhs]), b, g.expected

    fwd_pos = {sym: (i, d) for i, d, sym in fwd_bindings}
    known = {r for r in (relation(g, fwd_pos) for g in fwd_guards) if r is not None}
    joint_pos = {sym: (i, d) for i, d, sym in rec.bindings if i < n_in}
    implied = set()
    for g in rec.shape_guards.values():
        r = relation(g, joint_pos)
        if r is None or g.op not in _RELATIONS:
            continue
        op, a, b, expected = r
        if r in known or (op == "==" and expected is True and a == b) or (
                isinstance(a, int) and isinstance(b, int) and _RELATIONS[op](a, b) == expected):
            implied.add(g.source)
    pinned = {(i, d) for i, v in enumerate(rec.graph.inputs[:n_in])
              for d, size in enumerate(v.shape)
              if isinstance(size, int) and size_class((i, d)) == size}
    return frozenset(implied), frozenset(pinned)


def _split(joint: Graph, grad_inputs: list):
    """Nodes that do not depend on the output gradients (the forward part) and the rest."""
    tainted = set(grad_inputs)
    fwd, bwd = [], []
    for node in joint.nodes:
        if any(isinstance(x, Value) and x in tainted for x in node.inputs):
            tainted.update(node.outputs)
            bwd.append(node)
        else:
            fwd.append(node)
    return fwd, bwd


def _plan(fwd_nodes, bwd_nodes, inputs: set, outputs: set = frozenset(),
          grads: list = (), exact: set = frozenset()):
    """(forward nodes the backward recomputes, forward values it needs saved). A value the
    forward returns anyway is saved rather than recomputed: it costs no extra memory;
    so is a value in `exact` (an operand of a discontinuous op, see _jumps). `grads` (the
    joint graph's outputs) are needed too, even when they do not depend on the output
    gradients (zeros for an input that does not reach the outputs)."""
    producer = {v: n for n in fwd_nodes for v in n.outputs}
    recompute, saved, seen = {}, {}, set()
    stack = [x for n in bwd_nodes for x in n.inputs if isinstance(x, Value)] + list(grads)
    while stack:
        v = stack.pop()
        if v in seen or v in inputs or v not in producer:
            continue
        seen.add(v)
        node = producer[v]
        if _cheap(node) and node.op != GUARD and v not in outputs and v not in exact:
            recompute[id(node)] = node
            stack += [x for x in node.inputs if isinstance(x, Value)]
        else:
            saved[v] = None
    order = {id(n): i for i, n in enumerate(fwd_nodes)}
    return sorted(recompute.values(), key=lambda n: order[id(n)]), list(saved)


def _subgraph(src: Graph, name: str, inputs: list, nodes: list, outputs: list) -> Graph:
    """A graph over `inputs` running `nodes` (in order) and returning `outputs`."""
    return subgraph(src, name, inputs, nodes, outputs, made_by="autodiff")


FRESH_MIN_SIZE = 1 << 16


def _mark_fresh(grads: list, others: list) -> None:
    """Mark gradients whose arrays the backward made and nobody else holds, so leaves can
    keep them without a copy."""
    if not any(isinstance(g, Tensor) and g._data.size >= FRESH_MIN_SIZE for g in grads):
        return  # copying small gradients costs less than proving they are unshared
    if not all(isinstance(t._data, np.ndarray) for t in grads + others
               if isinstance(t, Tensor)):
        return  # CUDA device arrays: no bases to prove it with
    taken = {id(t._data) for t in others if isinstance(t, Tensor)}
    taken |= {id(t._data.base) for t in others if isinstance(t, Tensor) and
              t._data.base is not None}
    owners = [id(g._data.base if g._data.base is not None else g._data) for g in grads
              if isinstance(g, Tensor)]
    for g in grads:
        if type(g) is not Tensor or g.grad_fn is not None:
            continue
        d = g._data
        owner = d.base if d.base is not None else d  # a detach() view of a kernel result
        if owner.base is None and id(owner) not in taken and owners.count(id(owner)) == 1:
            g.__class__ = FreshTensor


class TracedCallBackward(Node):
    """One traced call as one autograd node: the forward part has run, `apply` runs the
    compiled backward part (or replays the forward differentiably under create_graph)."""

    __slots__ = ("bt", "trace", "inputs", "versions", "saved", "out_meta", "rng")

    @property
    def num_outputs(self) -> int:
        return len(self.out_meta)

    def apply(self, grads):
        inputs = self.inputs
        if inputs is None:
            raise RuntimeError(FREED_MESSAGE)
        for i, (c, v) in enumerate(self.versions):
            if c[0] != v:
                what = f"input {i}" if i < len(inputs) else "an output"
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: {what} of a traced call of "
                    f"{self.trace.graph.name} is at version {c[0]}; expected version {v} "
                    "instead.")
        bt, stats = self.bt, self.trace.stats
        unreached = ()
        if any(g is None for g in grads):
            # inputs that only reach outputs no gradient came to: None, as in eager
            live = set()
            for k in bt.float_outs:
                if grads[k] is not None:
                    live |= bt.reach[k]
            unreached = [j for j, i in enumerate(bt.diff) if i not in live]
            grads = [g if g is not None else zeros(*shape, dtype=dtype)
                     for g, (shape, dtype) in zip(grads, self.out_meta)]
        result = None
        if not STATE.modes.grad_enabled:  # create_graph replays instead, differentiably
            result = bt.run_backward(inputs, self.saved, grads)
        if result is None:
            # the replayed forward draws the random numbers the call's forward drew
            with rng_kept(bt.generators, self.rng):
                result = self.trace.replay_gradients(inputs, grads, bt.diff)
            stats["backward_replays"] += 1
        else:
            stats["backward_kernels"] += 1
            _mark_fresh(result, inputs + grads + self.saved)
        if unreached:
            result = list(result)
            for j in unreached:
                result[j] = None
        return result

    def release(self):
        self.inputs = self.saved = None


_UNREAD = ([0], 0)  # a version entry that never changes: an input backward does not read


def _memory_roots(saved: list) -> set:
    """The ids of the arrays the saved tensors' memory belongs to (their own and their
    bases): an input whose array or base is among them shares memory with one."""
    roots = set()
    for s in saved:
        if isinstance(s, Tensor):
            roots.add(id(s._data))
            base = getattr(s._data, "base", None)  # (a CUDA device array has none)
            if base is not None:
                roots.add(id(base))
    return roots


def _shares_memory(t: Tensor, roots: set) -> bool:
    base = getattr(t._data, "base", None)
    return id(t._data if base is None else base) in roots


def traced_call(bt: BackwardTrace, trace, inputs: list) -> list:
    """Run the forward part of `bt` and give its float outputs one autograd node."""
    rng = rng_states(bt.generators) if bt.generators else None
    outs, saved = bt.run_forward(inputs)
    node = TracedCallBackward(tuple(_edge(inputs[i]) for i in bt.diff))
    # the versions backward checks: of the inputs it reads (itself or through a saved
    # value sharing the input's memory); an input the forward part alone reads may be
    # updated in place meanwhile (a script graph commits a module's running statistics
    # after the segments that read them have run)
    reads = bt.read_inputs
    roots = _memory_roots(saved) if len(reads) < len(inputs) else ()
    versions = [(counter(t), t._vc[0]) if k in reads or _shares_memory(t, roots)
                else _UNREAD for k, t in enumerate(inputs)]
    for k, t in enumerate(saved):
        if any(t is o for o in outs):  # an output the backward reads: a separate handle
            c = counter(t)             # sharing its version counter, so that an in-place
            versions.append((c, c[0]))  # change of the output before backward is caught
            saved[k] = _make(t._data)
            saved[k]._vc = c
    node.bt, node.trace, node.inputs, node.saved = bt, trace, inputs, saved
    node.versions, node.rng = versions, rng
    node.out_meta = [(o._data.shape, o.dtype) for o in outs]
    for nr in bt.float_outs:
        o = outs[nr]
        o._rg, o.grad_fn, o._output_nr = True, node, nr
    return outs
