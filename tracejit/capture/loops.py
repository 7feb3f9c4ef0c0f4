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

import dataclasses
import weakref

import numpy as np

from ..core.modes import enable_grad, set_grad, STATE
from ..tensor.node import FREED_MESSAGE, Node
from ..core.float_errors import quiet, restore
from ..ir.graph import Value
from ..ir.passes import PassManager
from ..tensor.dispatch import _edge, apply, counter
from ..tensor.tensor import Tensor, _make
from .autodiff import _runner, random_generators, rng_kept, rng_states
from ..autograd import grad as autograd_grad
from .interpreter import Interpreter
from ..ops import OPS


class Plan:
    """How the tape records and differentiates calls of one segment with one compiled
    backward (or none: the call's gradient then replays its forward)."""

    __slots__ = ("seg", "bt", "float_outs", "diff", "n_outputs", "_deferred")

    def __init__(self, seg, bt, float_outs, diff, n_outputs):
        self.seg, self.bt, self.float_outs, self.diff = seg, bt, float_outs, diff
        self.n_outputs = n_outputs
        self._deferred: dict = {}

    def deferred(self, outside: int):
        """The Deferred backward of this plan's segment that factors the gradients of
        the differentiated inputs from outside the loop (bit j of `outside`: the j-th)
        it can, or None; built once per compiled backward and set of positions."""
        d = self._deferred.get(outside, _UNSET)
        if d is _UNSET:
            if self.bt is None:
                d = None
            else:
                built = _DEFERRED.setdefault(self.bt, {})
                d = built.get(outside, _UNSET)
                if d is _UNSET:
                    d = built[outside] = Deferred.build(self.bt, outside)
            self._deferred[outside] = d
        return d


_UNSET = object()
_DEFERRED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class LoopTape:
    """The iterations of one loop, recorded while it runs (see the module docstring).

    An iteration's record is its arrays, not its tensors: a tuple of arrays is not
    followed by Python's garbage collector, so a long loop's tape does not make every
    collection walk it, nor trigger full collections by surviving them. Values are
    known by their array's id (the tape keeps the arrays alive); gradients go only to
    the positions a compiled backward differentiates, whose tensors require grad: an
    array computed inside the loop, or the one of the loop's inputs from outside that
    holds it (the node's k-th input, key -1 - k)."""

    __slots__ = ("plans", "records", "produced", "inputs", "input_keys", "_plans", "rngs")

    def __init__(self):
        self.plans: list = []     # per call: its Plan
        self.records: list = []   # per call: (input arrays, result arrays, outside bits)
        self.rngs: dict = {}      # call -> (generators, their states before it drew)
        self.produced: set = set()  # ids of computed arrays that carry a gradient
        self.inputs: list = []    # tensors from outside the loop that get gradients
        self.input_keys: dict = {}  # id(array of an input from outside) -> its key
        self._plans: dict = {}

    def run(self, seg, ins: list, grad_mode: bool) -> list:
        """A segment's outputs; recorded when it computes a gradient-carrying value."""
        if not grad_mode or not any(t._rg for t in ins):
            prev = set_grad(False)
            try:
                return seg.run_forward(ins)
            finally:
                set_grad(prev)
        bt = seg.backward_trace(ins)
        plan = self._plans.get((id(seg), id(bt)))
        gens = _generators(seg)
        rng = rng_states(gens) if gens else None  # a replay redraws what this call draws
        if bt is not None:
            results = bt.fwd_runner(ins)
            if plan is None:
                plan = Plan(seg, bt, bt.float_outs, bt.diff, bt.n_outputs)
        else:  # no compiled backward (its budget is spent): replay this one's forward
            prev = set_grad(False)
            try:
                results = seg.run_forward(ins)
            finally:
                set_grad(prev)
            if plan is None:
                plan = Plan(seg, None, [k for k, o in enumerate(results)
                                        if o.dtype.is_floating_point],
                            [i for i, t in enumerate(ins) if t._rg], len(results))
        self._plans[(id(seg), id(bt))] = plan
        produced, input_keys = self.produced, self.input_keys
        arrays = tuple([t._data for t in ins])
        outside = 0  # bit j: the j-th differentiated input comes from outside the loop
        for j, i in enumerate(plan.diff):  # gradients go to these: computed here, or from
            a = id(arrays[i])              # outside (known by its array)
            if a not in produced:
                outside |= 1 << j
                if a not in input_keys:
                    input_keys[a] = -1 - len(self.inputs)
                    self.inputs.append(ins[i])
        for k in plan.float_outs:
            o = results[k]
            o._rg = True
            produced.add(id(o._data))
        self.plans.append(plan)
        self.records.append((arrays, tuple([r._data for r in results]), outside))
        if rng is not None:
            self.rngs[len(self.records) - 1] = (gens, rng)
        return results[:plan.n_outputs]

    def close(self, loop_inputs: list, results: list) -> None:
        """Give the tensors the loop lets out (in `results`, lists included) one node;
        every tensor it read from outside (`loop_inputs`) is checked for in-place
        changes before the node's backward uses it, as saved tensors are."""
        if not self.records:
            return
        produced = self.produced

        def tensors(x, out, seen, keep):
            if isinstance(x, Tensor):
                if keep(x) and id(x._data) not in seen:
                    seen.add(id(x._data))
                    out.append(x)
            elif isinstance(x, (list, tuple)):
                for y in x:
                    tensors(y, out, seen, keep)
            return out

        outputs = tensors(results, [], set(), lambda t: id(t._data) in produced)
        read = tensors(loop_inputs, [], set(), lambda t: id(t._data) not in produced)
        inputs = self.inputs
        node = ScriptLoopBackward(tuple(_edge(t) for t in inputs))
        node.plans, node.records, node.rngs = self.plans, self.records, self.rngs
        node.inputs, node.input_keys, node.outputs = inputs, self.input_keys, outputs
        node.n_read = len(read)
        node.versions = [(counter(t), t._vc[0]) for t in read + outputs]
        node.out_meta = [(o._data.shape, o.dtype) for o in outputs]
        for k, o in enumerate(outputs):
            o.grad_fn, o._output_nr = node, k


class ScriptLoopBackward(Node):
    """The backward of one executed loop of a script graph (see the module docstring)."""

    __slots__ = ("plans", "records", "rngs", "inputs", "input_keys", "outputs", "n_read",
                 "versions", "out_meta")

    @property
    def num_outputs(self) -> int:
        return len(self.out_meta)

    def apply(self, grads):
        if self.records is None:
            raise RuntimeError(FREED_MESSAGE)
        for i, (c, v) in enumerate(self.versions):
            if c[0] != v:
                what = "a tensor read by" if i < self.n_read else "an output of"
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: {what} a scripted loop is at version "
                    f"{c[0]}; expected version {v} instead.")
        if STATE.modes.grad_enabled:  # create_graph: differentiable in the loop's inputs
            return self._replay(grads)
        acc, sums = _Accumulator(), _Sums()
        for t, g in zip(self.outputs, grads):
            if g is not None:
                acc.add(id(t._data), g)
        keys = self.input_keys
        last = len(self.records) - 1
        for back, (plan, (ins, results, outside)) in enumerate(zip(reversed(self.plans),
                                                                   reversed(self.records))):
            out_grads = [None] * plan.n_outputs
            live = []
            for k in plan.float_outs:
                g = acc.pop(id(results[k]))
                if g is not None:
                    live.append(k)
                else:
                    g = _make(np.zeros(results[k].shape, results[k].dtype))
                out_grads[k] = g
            if not live:
                continue
            # inputs only outputs without a gradient reach get none (not zeros), as in eager
            unreached = _unreached(plan.bt, live)
            tensors = [_make(a) for a in ins]
            saved = [_make(a) for a in results[plan.n_outputs:]]
            stats, bt = plan.seg.stats, plan.bt
            d = plan.deferred(outside)
            got = d.run(tensors, saved, out_grads) if d is not None else None
            if got is not None:
                stats["backward_kernels"] += 1
                now, factors = got
                for j, g in now:
                    if plan.diff[j] in unreached:
                        continue
                    a = id(ins[plan.diff[j]])
                    acc.add(keys.get(a, a), g)
                for j, form, parts in factors:
                    if plan.diff[j] in unreached:
                        continue
                    sums.add(keys[id(ins[plan.diff[j]])], form, parts)
                continue
            result = bt.run_backward(tensors, saved, out_grads) if bt is not None else None
            if result is None:
                for i in plan.diff:
                    tensors[i]._rg = True
                with rng_kept(*self.rngs.get(last - back, ((), None))):
                    result = plan.seg.replay_gradients(tensors, out_grads, plan.diff)
                stats["backward_replays"] += 1
            else:
                stats["backward_kernels"] += 1
            for i, g in zip(plan.diff, result):
                if g is not None and i not in unreached:
                    a = id(ins[i])
                    acc.add(keys.get(a, a), g)
        sums.finish(acc)
        return tuple(acc.pop(-1 - k) for k in range(len(self.inputs)))

    def _replay(self, grads):
        """The input gradients by running the loop's forward again through eager autograd
        (each segment on the interpreter) and differentiating that, under create_graph."""
        with enable_grad():
            names = {-1 - k: apply(OPS.expand, t, shape=t._data.shape)
                     for k, t in enumerate(self.inputs)}
            interpreters: dict = {}
            keys = self.input_keys
            for call, (plan, (ins, results, _)) in enumerate(zip(self.plans, self.records)):
                args = [names.get(keys.get(id(a), id(a))) for a in ins]
                args = [n if n is not None else _make(a) for n, a in zip(args, ins)]
                seg = plan.seg
                interp = interpreters.get(id(seg))
                if interp is None:
                    interp = interpreters[id(seg)] = Interpreter(seg.graph)
                env = {sym: args[i]._data.shape[d] for i, d, sym in seg.bindings}
                with rng_kept(*self.rngs.get(call, ((), None))):  # the call's draws
                    replayed = interp.run(args, env)
                for a, n in zip(results, replayed):
                    names[id(a)] = n
            outs = [names[id(t._data)] for t in self.outputs]
            pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
            return tuple(autograd_grad([o for o, _ in pairs],
                                       [names[-1 - k] for k in range(len(self.inputs))],
                                       [g for _, g in pairs], create_graph=True,
                                       allow_unused=True))  # no path: None, as in eager

    def release(self):
        self.plans = self.records = self.inputs = self.input_keys = self.outputs = None
        self.rngs = None


def _generators(seg) -> list:
    """The random generators a segment's graph draws from (found once per segment)."""
    gens = seg.__dict__.get("_generators")
    if gens is None:
        gens = seg._generators = random_generators(seg.graph)
    return gens


def _unreached(bt, live: list) -> frozenset:
    """The differentiated inputs of `bt` that none of the outputs in `live` reaches."""
    if bt is None:
        return frozenset()
    reached = set()
    for k in live:
        reached |= bt.reach[k]
    return frozenset(i for i in bt.diff if i not in reached)


class _Accumulator:
    """Gradients by value key; sums of two or more are made once and then added to in
    place (a weight read by every iteration costs one buffer, not one per step)."""

    __slots__ = ("grads", "owned")

    def __init__(self):
        self.grads: dict = {}
        self.owned: set = set()

    def add(self, key: int, g: Tensor) -> None:
        prev = self.grads.get(key)
        if prev is None:
            self.grads[key] = g
            return
        if key in self.owned:
            a, b = prev._data, g._data
            if a.shape == b.shape and a.dtype == b.dtype and type(a) is np.ndarray and \
                    type(b) is np.ndarray:
                np.add(a, b, out=a)
                return
        self.grads[key] = prev + g
        self.owned.add(key)

    def pop(self, key: int):
        self.owned.discard(key)
        return self.grads.pop(key, None)


class Deferred:
    """A segment's compiled backward that leaves the sum over the loop's iterations of
    its invariants' weight-like gradients to the loop: where an invariant's gradient is
    a product `x @ y` of per-iteration matrices (a weight's gradient `h^T @ g`) or a sum
    over rows `sum_to(y)` (a bias's), each iteration returns the factors instead, and
    the loop computes one product of the stacked factors at the end (a matrix product
    over every step, instead of one outer product and one in-place sum per step)."""

    __slots__ = ("runner", "guards", "float_outs", "forms")

    @staticmethod
    def build(bt, outside: int):
        g = bt.recorded
        producer = {v: n for n in g.nodes for v in n.outputs}

        def through_detach(v):
            n = producer.get(v)
            while n is not None and n.op == "detach":
                v = n.inputs[0]
                n = producer.get(v)
            return v, n

        outputs, forms, factored = [], [], []
        for j, v in enumerate(g.outputs):
            inner, n = through_detach(v)
            if not outside >> j & 1:
                n = None  # a gradient the loop needs at once (a carried value's)
            if n is not None and n.op == "matmul" and all(
                    isinstance(x, Value) and len(x.shape) == 2 for x in n.inputs):
                forms.append(("mm", len(outputs), len(outputs) + 1, None))
                outputs += list(n.inputs)
                factored.append(j)
            elif n is not None and n.op == "sum_to" and isinstance(n.inputs[0], Value) and \
                    len(n.inputs[0].shape) == 2 and len(n.attrs["shape"]) in (1, 2):
                forms.append(("sum", len(outputs), None, tuple(n.attrs["shape"])))
                outputs.append(n.inputs[0])
                factored.append(j)
            else:
                forms.append(("now", len(outputs), None, None))
                outputs.append(v)
        if not factored:
            return None
        graph = dataclasses.replace(g, outputs=outputs)
        final = PassManager().run(graph)[-1][1]
        d = Deferred()
        d.runner = _runner(final, bt.backend, bt.bindings)
        d.guards, d.float_outs = bt.guards, bt.float_outs
        d.forms = forms
        return d

    def run(self, inputs: list, saved: list, grad_outputs: list):
        """([(diff position, gradient)], [(diff position, form, factor arrays)]), or None
        if a size guard does not hold."""
        grads = [grad_outputs[k] for k in self.float_outs]
        if not self.guards.check(*inputs, *grads):
            return None
        outs = self.runner(list(inputs) + grads + list(saved))
        now, factors = [], []
        for j, (form, a, b, shape) in enumerate(self.forms):
            if form == "now":
                now.append((j, outs[a]))
            elif form == "mm":
                factors.append((j, ("mm", None), (outs[a]._data, outs[b]._data)))
            else:
                factors.append((j, ("sum", shape), (outs[a]._data,)))
        return now, factors


class _Sums:
    """Factors of deferred gradients by (value key, form); `finish` adds each sum."""

    __slots__ = ("parts",)

    def __init__(self):
        self.parts: dict = {}

    def add(self, key: int, form: tuple, parts: tuple) -> None:
        self.parts.setdefault((key, form), []).append(parts)

    def finish(self, acc: _Accumulator) -> None:
        for (key, (kind, shape)), parts in self.parts.items():
            token = quiet()  # inf and nan are results (core/float_errors.py)
            try:
                if kind == "mm":  # sum of x_t @ y_t = [x_1 ... x_T] @ [y_1; ...; y_T]
                    x = np.concatenate([p[0] for p in parts], axis=1)
                    y = np.concatenate([p[1] for p in parts], axis=0)
                    total = OPS.matmul.impl(x, y)
                else:
                    total = OPS.sum_to.impl(np.concatenate([p[0] for p in parts], axis=0),
                                            shape)
            finally:
                restore(token)
            acc.add(key, _make(np.ascontiguousarray(total)))
