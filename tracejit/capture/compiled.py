"""A graph compiled for repeated calls from eager code: the host program (or the
interpreter) for calls that record no gradient, and compiled backwards (partitioned
joint graphs) for calls that do, each call one autograd node. A trace is one (with entry
guards around it); so is each straight-line part of a script graph (a segment).
"""
from __future__ import annotations

import dataclasses
import threading

from ..core.modes import enable_grad, no_grad, STATE
from ..backends import registry as backends
from ..core.log import log  # noqa: F401 (the capture modules log through here)
from ..tensor.tensor import Tensor
from .interpreter import CARRIER_OFFSET, Interpreter
from ..ops import OPS
from ..tensor.dispatch import apply, apply_inplace, counter
from ..autograd import grad as autograd_grad
from ..core.dtypes import bool_
from ..ir.graph import Value
from ..ir.walk import subgraph, substitution
from ..core.symbolic import SymInt
from ..core.lazy import lazy

# gradients of traced calls, loaded at the first (importing tracejit does not pay for it)
autodiff = lazy("tracejit.capture.autodiff")

BACKWARD_BUDGET = 4  # compiled backwards per graph (for size relations only they decide)


def program_for(graph, backend: str, bindings: list, donate: dict | None = None):
    # (host programs call Numba's kernels: imported when a trace first runs on them)
    b = backends.get(backend)
    if not b.host_programs or graph.is_script() or b.host_module().returns_views(graph):
        return None
    return b.host_module().host_program(graph, Tensor._make, bindings, donate)


class CompiledGraph:
    """`graph` ready to run on tensors; `bindings` say where each size symbol is read
    from the inputs' shapes; `shape_guards` are what the callers have checked already."""

    UNSET = object()
    donate: dict = {}  # new value -> the input whose storage its kernel may write (below)

    def __init__(self, graph, backend: str, bindings: list, shape_guards=()):
        self.graph = graph
        self.backend = backend
        self.bindings = bindings
        self.shape_guards = list(shape_guards)
        self.control_flow = graph.is_script()
        if not hasattr(self, "stats"):  # (before the runner: its segments read the owner's)
            self.stats: dict = {"backward_kernels": 0, "backward_replays": 0}
        self.runner = Interpreter(graph, backend, owner=self)
        self._program = CompiledGraph.UNSET  # the host program for calls without gradients
        self.backwards: list = []  # BackwardTraces, built by calls recording gradients
        self._functional = None  # a graph with updates: the one returning their values
        self._mutated: list = []  # the inputs it updates (indices)
        self._backward_failed = False
        self._lock = threading.Lock()

    def call(self, tensors: list) -> list:
        """The outputs; with gradients recorded (numba backend), one autograd node whose
        backward is compiled."""
        compiled_backward = backends.get(self.backend).compiled_backward
        if self.graph.mutations and compiled_backward and not self.control_flow:
            outs = self._call_functional(tensors)
            if outs is not None:
                return outs
        if compiled_backward and STATE.modes.grad_enabled and \
                not self.graph.mutations and \
                not self.control_flow and any(t._rg for t in tensors):
            bt = self.backward_trace(tensors)
            if bt is not None:
                return autodiff.traced_call(bt, self, tensors)
        return self.run_forward(tensors)

    def _call_functional(self, tensors: list):
        """A graph that updates inputs no gradient flows through (a BatchNorm's running
        statistics) runs as the same graph returning their new values, compiled
        (kernels, and a compiled backward with gradients), and so does one that updates
        any input under no_grad (an optimizer's step); the values are then written into
        the inputs as eager's in-place updates are (versions bumped). None where an
        update carries a gradient (eager autograd records it then)."""
        targets = self._mutated
        grad = STATE.modes.grad_enabled  # (under no_grad, no update carries a gradient: an
        if grad and any(tensors[i]._rg for i in targets):  # optimizer's step)
            return None
        inner = self._functional
        if inner is None:
            g = self.graph
            index = {v: i for i, v in enumerate(g.inputs)}
            targets = self._mutated = [index[t] for t, _ in g.mutations]
            plain = dataclasses.replace(g, outputs=list(g.outputs) + [v for _, v in
                                                                      g.mutations],
                                        mutations=[])
            inner = self._functional = CompiledGraph(plain, self.backend, self.bindings,
                                                     self.shape_guards)
            inner.stats = self.stats
            # a kernel may write an input's new value into the input itself (the write
            # below then only counts the version), where nothing reads the old one after
            inner.donate = {new: t for t, new in g.mutations}
            if grad and any(tensors[i]._rg for i in targets):
                return None
        n = len(self.graph.outputs)
        outs = None
        if STATE.modes.grad_enabled and any(t._rg for t in tensors):
            bt = inner.backward_trace(tensors)
            if bt is None or any(k >= n for k in bt.float_outs):
                return None  # an update that carries a gradient
            # an input this call overwrites: its backward (compiled, or the forward
            # replayed under create_graph) reads the value from before the update, a copy
            # (such an input takes no gradient: an update that does runs eagerly, above)
            args = list(tensors)
            with no_grad():
                for i in targets:
                    args[i] = tensors[i].detach().clone()
            outs = autodiff.traced_call(bt, inner, args)
        else:
            outs = inner.run_forward(tensors)
        with no_grad():
            for i, value in zip(targets, outs[n:]):
                if value._data is tensors[i]._data:  # written in place by its kernel
                    counter(tensors[i])[0] += 1
                else:
                    apply_inplace(OPS.setitem, tensors[i], value, index=(Ellipsis,))
        return outs[:n]

    def run_forward(self, tensors: list) -> list:
        program = self._program
        if program is CompiledGraph.UNSET:
            program = self._program = program_for(self.graph, self.backend, self.bindings,
                                                  self.donate)
        if program is not None and not (STATE.modes.grad_enabled and any(t._rg for t in tensors)):
            return program.run(tensors)
        env = {sym: tensors[i]._data.shape[d] for i, d, sym in self.bindings}
        return self.runner.run(tensors, env)

    def backward_trace(self, tensors: list):
        """The compiled backward whose size guards these inputs pass (built on first need,
        up to BACKWARD_BUDGET of them), or None: the call then records eager autograd."""
        needs = tuple(t._rg for t in tensors)  # which inputs get gradients: the backward's
        for bt in self.backwards:              # inputs (a trace's entry guards fix it)
            if bt.needs == needs and (bt.fwd_guards is None or bt.fwd_guards.check(*tensors)):
                return bt
        with self._lock:  # one thread traces it; the others wait for it
            return self._new_backward_trace(tensors, needs)

    def _new_backward_trace(self, tensors: list, needs: tuple):
        for bt in self.backwards:  # another thread may have built it meanwhile
            if bt.needs == needs and (bt.fwd_guards is None or bt.fwd_guards.check(*tensors)):
                return bt
        if self._backward_failed or len(self.backwards) >= BACKWARD_BUDGET:
            return None
        try:
            bt = autodiff.BackwardTrace(self.graph, tensors, self.backend,
                               (self.bindings, self.shape_guards))
        except Exception as err:  # noqa: BLE001 — gradients then replay the forward
            self._backward_failed = True
            log("recompiles", f"{self.graph.name}: backward not traced ({err})")
            return None
        bt.needs = needs
        self.backwards.append(bt)
        if len(self.backwards) > 1:
            log("recompiles", f"{self.graph.name}: backward {len(self.backwards)} traced "
                              f"for other sizes")
        return bt

    def replay_gradients(self, tensors: list, grad_outputs: list, diff: list) -> list:
        """Input gradients by replaying the forward through eager autograd (exact, and
        differentiable again under create_graph)."""
        create = STATE.modes.grad_enabled
        with enable_grad():
            # each input through an identity op: the gradients are this call's own vjp
            # (they stop at these names, not at inputs that also reach one another through
            # their history, as a loop's x and h do) and stay differentiable in the inputs
            names = [apply(OPS.expand, t, shape=t._data.shape) if t.requires_grad else t
                     for t in tensors]
            interp = Interpreter(self.graph)
            env = {sym: tensors[i]._data.shape[d] for i, d, sym in self.bindings}
            outs = interp.run(names, env)
            pairs = [(o, g) for o, g in zip(outs, grad_outputs)
                     if o.requires_grad and g is not None]
            return list(autograd_grad([o for o, _ in pairs], [names[i] for i in diff],
                                      [g for _, g in pairs], create_graph=create,
                                      allow_unused=True, materialize_grads=True))


class Segment(CompiledGraph):
    """A straight-line run of a script graph's nodes compiled as one call: forward with
    the host program, and with gradients one autograd node whose backward is compiled,
    as a traced call's. Its sizes are read from its inputs' shapes."""

    def __init__(self, graph, nodes: list, reads: list, writes: list, owner, name: str,
                 params: list = ()):
        """`params`: sizes of the enclosing loops (their indices) the nodes use; each is
        passed as an empty array whose first size is it plus CARRIER_OFFSET, so that host
        programs and the joint trace bind it as they bind any input's size."""
        self.owner = owner
        self.node_ids = {id(n) for n in nodes}
        self.reads, self.writes, self.params = reads, writes, list(params)
        self.grad_mode = nodes[0].grad_mode
        mapping, carriers = {}, []
        for k, sym in enumerate(self.params):
            shape_sym = SymInt.symbol(f"s{9000 + k}", CARRIER_OFFSET, None)
            mapping[sym] = shape_sym - CARRIER_OFFSET
            carriers.append(Value(bool_, (shape_sym, 0), None, f"size_{sym}"))
        sub = subgraph(graph, name, reads, nodes, writes, made_by="segment",
                       sizes=substitution(mapping) if mapping else None)
        if self.params:
            sub.inputs += carriers
            sub.input_kinds += ["arg"] * len(carriers)
        CompiledGraph.__init__(self, sub, owner.backend, sub.size_bindings())

    @property
    def stats(self) -> dict:
        return self.owner.stats
