"""Whole-graph autodiff: the backward of a trace, as a graph compiled like the forward.

The backward graph is captured by tracing: the forward graph is replayed through
eager dispatch under a recorder, then `autograd.grad` runs the op table's vjp
rules — which are tracejit ops — so they are recorded too. The result maps
(inputs, output gradients) to input gradients; dead-code elimination keeps the
forward values the gradients need, which are recomputed inside the backward
(fused into its kernels) rather than saved. A traced call that records gradients
runs the compiled forward and gives its outputs one backward node that runs
this graph.
"""
from __future__ import annotations

from ..autograd.function import Function
from ..autograd.grad_mode import STATE
from ..backends.interpret import Interpreter
from ..ir.passes import PassManager
from ..tensor.tensor import Tensor
from .guards import EntryGuards
from .recorder import Recorder


class BackwardTrace:
    """The backward graph of one trace, its runner and its size guards."""

    def __init__(self, forward, inputs: list, backend: str):
        from ..autograd import grad as autograd_grad
        from ..autograd.grad_mode import enable_grad
        from ..tensor.creation import ones

        rec = Recorder(forward.name + "_backward")
        rec.allow_backward = True
        xs = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
        for t, v in zip(xs, forward.inputs):
            rec.add_input(t, v.name, "arg", symbolic=True)
        self.diff = [i for i, t in enumerate(inputs) if t.requires_grad]
        STATE.capture = rec
        try:
            with enable_grad():
                # sizes stay symbolic in the replay: bind the forward's symbols to ours
                env = {sym: rec.shape_of(xs[i])[d] for i, d, sym in _bindings(forward, xs)}
                outs = Interpreter(forward).run(xs, env)
                float_outs = [k for k, o in enumerate(outs) if o.is_floating_point()]
                STATE.capture = None
                gs = [ones(*outs[k]._data.shape, dtype=outs[k].dtype) for k in float_outs]
                for k, g in zip(float_outs, gs):
                    rec.add_input(g, f"grad_out{k}", "arg", symbolic=True)
                STATE.capture = rec
                pairs = [(outs[k], g) for k, g in zip(float_outs, gs) if outs[k].requires_grad]
                grads = autograd_grad([o for o, _ in pairs], [xs[i] for i in self.diff],
                                      [g for _, g in pairs], materialize_grads=True,
                                      allow_unused=True) if pairs else []
        finally:
            STATE.capture = None
        rec.closed = True
        if rec.aborted or len(grads) != len(self.diff):
            raise RuntimeError(f"backward of {forward.name} could not be traced: {rec.aborted}")
        rec.graph.outputs = [rec.value_of(g) for g in grads]
        rec.canonicalize_sizes()
        self.recorded = rec.graph
        self.stages = PassManager().run(rec.graph)
        self.graph = self.stages[-1][1]
        self.float_outs = float_outs
        self.bindings = rec.bindings
        self.guards = EntryGuards(rec, 0, {}, [])
        self.runner = Interpreter(self.graph, backend)

    def run(self, inputs: list, grad_outputs: list) -> list | None:
        """Input gradients (in `diff` order), or None if a size guard does not hold."""
        args = list(inputs) + [grad_outputs[k] for k in self.float_outs]
        if not self.guards.check(*args):
            return None
        env = {sym: args[i]._data.shape[d] for i, d, sym in self.bindings}
        return self.runner.run(args, env)


def _bindings(graph, tensors):
    """(input index, dim, symbol) for every symbolic size of the graph's inputs."""
    from ..ir.symbolic import SymInt

    out = []
    for i, v in enumerate(graph.inputs):
        for d, size in enumerate(v.shape):
            if isinstance(size, SymInt) and size.poly is not None and len(size.poly) == 1:
                (mono, coef), = size.poly.items()
                if len(mono) == 1 and coef == 1:
                    out.append((i, d, mono[0]))
    return out


class TracedCall(Function):
    """One traced call as one autograd node: compiled forward, compiled backward."""

    @staticmethod
    def forward(ctx, trace, inputs, *diff_inputs):
        outs = trace.run_forward(inputs)
        ctx.trace, ctx.inputs = trace, inputs
        ctx.mark_non_differentiable(*[o for o in outs if not o.is_floating_point()])
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        trace, inputs = ctx.trace, ctx.inputs
        bt = trace.backward_trace(inputs)
        grads = None
        if not STATE.grad_enabled and bt is not None:  # create_graph replays instead
            grads = bt.run(inputs, list(grad_outputs))
        if grads is None:
            grads = trace.replay_gradients(inputs, list(grad_outputs), bt.diff if bt else
                                           [i for i, t in enumerate(inputs) if t.requires_grad])
        return (None, None) + tuple(grads)


__all__ = ["BackwardTrace", "TracedCall", "Tensor"]
