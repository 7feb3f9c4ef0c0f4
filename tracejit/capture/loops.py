"""One autograd node per executed loop of a script graph.

A loop whose body is compiled segments only (plus list and size bookkeeping) does not
give each iteration's segment an autograd node of its own. Its iterations run their
compiled forward parts and append what their compiled backward parts need to a tape;
when the loop ends, the tensors it lets out (its final carried values and the tensors
it appended to lists) become the outputs of one `ScriptLoopBackward` node whose inputs
are the tensors the loop read from outside. The node's backward walks the tape in
reverse, running each iteration's compiled backward and accumulating the gradients
of the values it read (a carried value's flows to the iteration before; a loop
invariant's, a weight's, is summed in place). Under `create_graph` the node replays the
loop's forward through eager autograd instead, so the gradient is differentiable again
in the loop's inputs.

The per-iteration work is then the compiled parts alone: no node, edge or engine step
per iteration, which is most of what a small step (one RNN cell) costs otherwise.
"""
from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import STATE
from ..autograd.node import FREED_MESSAGE, Node
from ..tensor.dispatch import _edge, counter
from ..tensor.tensor import Tensor, _make


class Entry:
    """One segment call of one iteration: what its backward needs."""

    __slots__ = ("seg", "bt", "ins", "saved", "outs", "float_outs", "diff")

    def __init__(self, seg, bt, ins, saved, outs, float_outs, diff):
        self.seg, self.bt, self.ins, self.saved = seg, bt, ins, saved
        self.outs, self.float_outs, self.diff = outs, float_outs, diff


class LoopTape:
    """The iterations of one loop, recorded while it runs (see the module docstring)."""

    __slots__ = ("entries", "produced")

    def __init__(self):
        self.entries: list = []
        self.produced: dict = {}  # id -> tensor: outputs that carry a gradient

    def run(self, seg, ins: list, grad_mode: bool) -> list:
        """A segment's outputs; recorded when it computes a gradient-carrying value."""
        if not grad_mode or not any(isinstance(t, Tensor) and t._rg for t in ins):
            prev, STATE.grad_enabled = STATE.grad_enabled, False
            try:
                return seg.run_forward(ins)
            finally:
                STATE.grad_enabled = prev
        bt = seg.backward_trace(ins)
        if bt is not None:
            outs, saved = bt.run_forward(ins)
            float_outs, diff = bt.float_outs, bt.diff
        else:  # no compiled backward (its budget is spent): replay this one's forward
            prev, STATE.grad_enabled = STATE.grad_enabled, False
            try:
                outs = seg.run_forward(ins)
            finally:
                STATE.grad_enabled = prev
            saved = None
            float_outs = [k for k, o in enumerate(outs) if o.dtype.is_floating_point]
            diff = [i for i, t in enumerate(ins) if isinstance(t, Tensor) and t._rg]
        for k in float_outs:
            o = outs[k]
            o._rg = True
            self.produced[id(o)] = o
        self.entries.append(Entry(seg, bt, ins, saved, outs, float_outs, diff))
        return outs

    def close(self, loop_inputs: list, results: list) -> None:
        """Give the tensors the loop lets out (in `results`, lists included) one node."""
        if not self.entries:
            return
        produced = self.produced
        outputs, seen = [], set()

        def visit(x):
            if isinstance(x, Tensor):
                if id(x) in produced and id(x) not in seen:
                    seen.add(id(x))
                    outputs.append(x)
            elif isinstance(x, (list, tuple)):
                for y in x:
                    visit(y)

        visit(results)
        inputs, taken = [], set()

        def read(x):
            if isinstance(x, Tensor):
                if x._rg and id(x) not in produced and id(x) not in taken:
                    taken.add(id(x))
                    inputs.append(x)
            elif isinstance(x, (list, tuple)):
                for y in x:
                    read(y)

        read(loop_inputs)
        for t in produced.values():  # what stays inside is no one's leaf
            if id(t) not in seen:
                t._rg = False
        node = ScriptLoopBackward(tuple(_edge(t) for t in inputs))
        node.entries, node.inputs, node.outputs = self.entries, inputs, outputs
        node.versions = [(counter(t), t._vc[0]) for t in inputs + outputs]
        node.out_meta = [(o._data.shape, o.dtype) for o in outputs]
        for k, o in enumerate(outputs):
            o.grad_fn, o._output_nr = node, k
        self.entries, self.produced = [], {}


class ScriptLoopBackward(Node):
    """The backward of one executed loop of a script graph (see the module docstring)."""

    __slots__ = ("entries", "inputs", "outputs", "versions", "out_meta")

    @property
    def num_outputs(self) -> int:
        return len(self.out_meta)

    def apply(self, grads):
        if self.entries is None:
            raise RuntimeError(FREED_MESSAGE)
        for i, (c, v) in enumerate(self.versions):
            if c[0] != v:
                what = f"input {i}" if i < len(self.inputs) else "an output"
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: {what} of a scripted loop is at version "
                    f"{c[0]}; expected version {v} instead.")
        if STATE.grad_enabled:  # create_graph: differentiable in the loop's inputs
            return self._replay(grads)
        acc = _Accumulator()
        for t, g in zip(self.outputs, grads):
            if g is not None:
                acc.add(t, g)
        for e in reversed(self.entries):
            out_grads = [None] * len(e.outs)
            live = False
            for k in e.float_outs:
                g = acc.pop(e.outs[k])
                if g is not None:
                    live = True
                else:
                    o = e.outs[k]
                    g = _make(np.zeros(o._data.shape, o._data.dtype))
                out_grads[k] = g
            if not live:
                continue
            stats = e.seg.stats
            result = None if e.bt is None else e.bt.run_backward(e.ins, e.saved, out_grads)
            if result is None:
                result = e.seg.replay_gradients(e.ins, out_grads, e.diff)
                stats["backward_replays"] += 1
            else:
                stats["backward_kernels"] += 1
            for i, g in zip(e.diff, result):
                if g is not None:
                    acc.add(e.ins[i], g)
        return tuple(acc.pop(t) for t in self.inputs)

    def _replay(self, grads):
        """The input gradients by running the loop's forward again through eager autograd
        (each segment on the interpreter) and differentiating that, under create_graph."""
        from ..autograd import grad as autograd_grad
        from ..autograd.grad_mode import enable_grad
        from ..backends.interpret import Interpreter
        from ..ops import OPS
        from ..tensor.dispatch import apply

        with enable_grad():
            names = {id(t): apply(OPS.expand, t, shape=t._data.shape) for t in self.inputs}
            interpreters: dict = {}
            for e in self.entries:
                args = [names.get(id(t), t) if isinstance(t, Tensor) else t for t in e.ins]
                interp = interpreters.get(id(e.seg))
                if interp is None:
                    interp = interpreters[id(e.seg)] = Interpreter(e.seg.graph)
                env = {sym: args[i]._data.shape[d] for i, d, sym in e.seg.bindings}
                for o, n in zip(e.outs, interp.run(args, env)):
                    names[id(o)] = n
            pairs = [(names[id(t)], g) for t, g in zip(self.outputs, grads)
                     if g is not None and names[id(t)].requires_grad]
            return tuple(autograd_grad([o for o, _ in pairs],
                                       [names[id(t)] for t in self.inputs],
                                       [g for _, g in pairs], create_graph=True,
                                       allow_unused=True, materialize_grads=True))

    def release(self):
        self.entries = self.inputs = self.outputs = None


class _Accumulator:
    """Gradients by tensor identity; sums of two or more are made once and then added to
    in place (a weight read by every iteration costs one buffer, not one per step)."""

    __slots__ = ("grads", "owned")

    def __init__(self):
        self.grads: dict = {}
        self.owned: set = set()

    def add(self, t: Tensor, g: Tensor) -> None:
        key = id(t)
        prev = self.grads.get(key)
        if prev is None:
            self.grads[key] = g
            return
        a, b = prev._data, g._data
        if key in self.owned and a.shape == b.shape and a.dtype == b.dtype and \
                type(a) is np.ndarray and type(b) is np.ndarray:
            np.add(a, b, out=a)
            return
        self.grads[key] = prev + g
        self.owned.add(key)

    def pop(self, t: Tensor):
        self.owned.discard(id(t))
        return self.grads.pop(id(t), None)
