"""The trace recorder: while `tj.trace` runs a function, every op is executed
eagerly on concrete values and also appended to an IR graph.

Dispatch hands each op here (`STATE.capture`). Sizes of traced tensors are
SymInts, so arithmetic on them stays symbolic and every decision on a size
becomes a shape guard. Every tensor-to-Python read (bool, item, int, float,
numpy escapes) becomes a guard node in the graph. In-place updates are
recorded functionally; updates of graph inputs become `mutations`.
"""
from __future__ import annotations

import numpy as np

from ..core.modes import STATE
from ..core.errors import ScriptError
from ..ir.graph import BIND, GUARD, SIZE, Graph, Value
from ..core.symbolic import decide, has_sym, hint_of, map_leaves, rename_symbols, SymInt
from ..ops import OPS
from ..ops.registry import AVal
from ..tensor.dispatch import apply, apply_inplace, user_frame
from ..tensor.tensor import Size, Tensor
from ..ops.indexing import Slot
from ..core.dtypes import bool_, int64

DISPLAY_NAMES = ["B", "T", "N", "M", "K", "L", "P", "Q", "R", "U", "V", "W"]



_NEGATE = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}



class DryPathAbort(Exception):
    """Raised inside a path recorded but not taken when the recording gives up: the rest
    of that path must not run (it would run for real, with its effects)."""

class ShapeGuard:
    """`lhs op rhs` (size expressions) evaluated to `expected` in this trace."""

    __slots__ = ("source", "lhs", "op", "rhs", "expected", "where")

    def __init__(self, lhs: str, op: str, rhs: str, expected: bool, where: str):
        self.lhs, self.op, self.rhs, self.expected, self.where = lhs, op, rhs, expected, where
        self.source = f"({lhs}) {op} ({rhs})"

    def describe(self, names: dict) -> str:
        op = self.op if self.expected else _NEGATE[self.op]
        return f"sizes: {rename_symbols(f'{self.lhs} {op} {self.rhs}', names)}"


class Scope:
    """A region being recorded (a branch or loop body): its graph, the values defined in
    it, and the outer values it reads, which become its block arguments."""

    __slots__ = ("graph", "defined", "captures", "outer")

    def __init__(self, graph: Graph):
        self.graph = graph
        self.defined: set = set()
        self.captures: dict = {}  # value as the code knows it -> block argument
        self.outer: list = []     # per block argument: the value in the enclosing scope


class Recorder:
    def __init__(self, name: str):
        self.graph = Graph(name)
        self.scopes = [Scope(self.graph)]      # the graph, then regions being recorded
        self.scope_of: dict = {}               # Value -> the Scope defining it
        self.script = 0                        # > 0 while converted (@script) code runs
        self.dry = 0                           # > 0 while recording a path not taken
        self.n_data_symbols = 0
        self.paused = 0                        # > 0 while script helpers run eagerly
        self.passthrough: dict = {}            # id(alias) -> the tensor a path passed on
        self.entry_values: dict = {}           # id(alias) -> the Value it started as
        self.lists: dict = {}                  # id(list) -> its list Value (script mode)
        self.varying_symbols: set = set()      # sizes that differ between a list's elements
        self.ranges: dict = {}                 # loop index -> (first, last) while recorded
        self.nonneg: set = set()               # symbols known >= 0 (shapes, lengths)
        self.values: dict[int, Value] = {}     # id(tensor) -> Value
        self.keep: dict = {}                   # id -> tensor: keeps ids unique while tracing
        self.shape_guards: dict[str, ShapeGuard] = {}
        self.bindings: list = []               # (input index, dim, symbol)
        self.inputs: list = []                 # the tensor behind each graph input
        self.view_chains: dict = {}            # id(view) -> (base tensor, ((op, attrs), ...))
        self.stale: dict = {}                  # id(view) -> view whose base was written since
        self.input_values: dict[int, Value] = {}  # id(input tensor) -> its graph input
        self.letters: dict[str, str] = {}      # symbol -> letter, for guard descriptions
        self.arrays: dict[int, Value] = {}     # id(ndarray) -> Value (saved outputs)
        self.allow_backward = False            # set when tracing a backward on purpose
        self.closed = False
        self.aborted: str | None = None
        self.abort_is_final = True             # False: later calls may trace again
        self.saved_counters: dict = {}         # id(version counter) -> (op, counter)
        # sizes a reshape's view-or-copy decision rests on (a strided source: whether its
        # sizes are 1), guarded once something is updated in place (then aliasing counts)
        self.layout_sizes: list = []
        self.modes = STATE.modes                # the frame at the call: its entry guard
        self.grad_mode = self.modes.grad_enabled

    def release(self) -> None:
        """Drop what only recording needed: the tensors seen and the maps keyed by their
        ids. The graph's symbolic sizes keep their recorder (decisions after the recording
        closed are not guards), so a kept trace would otherwise keep every tensor of the
        call that recorded it, and its autograd graph."""
        self.closed = True
        for name in ("values", "keep", "view_chains", "input_values", "arrays",
                     "saved_counters", "passthrough", "entry_values", "lists", "scope_of"):
            setattr(self, name, {})
        self.inputs = []
        self.scopes = []

    # ---- inputs ----------------------------------------------------------------------------
    def add_input(self, t: Tensor, name: str, kind: str, symbolic: bool,
                  like: tuple = ()) -> Value:
        """A graph input for `t`. Its sizes are symbols when `symbolic`, but for 0 and 1,
        which stay static (they change broadcasting) unless `like` (a symbolic shape of
        the same rank: the forward trace's type of this input) has a symbol there."""
        index = len(self.graph.inputs)
        shape = []
        for d, size in enumerate(t._data.shape):
            if symbolic and (size > 1 or (size == 1 and len(like) > d and
                                          isinstance(like[d], SymInt))):
                sym = f"s{len(self.bindings)}"
                self.letters[sym] = self.graph.symbols[sym] = DISPLAY_NAMES[
                    len(self.bindings)] if len(self.bindings) < len(DISPLAY_NAMES) else sym
                self.bindings.append((index, d, sym))
                shape.append(SymInt.symbol(sym, size, self))
            else:
                shape.append(size)
        v = Value(t.dtype, tuple(shape), None, name)
        self.scope_of[v] = self.scopes[0]
        self.scopes[0].defined.add(v)
        self.graph.inputs.append(v)
        self.graph.input_kinds.append(kind)
        self.inputs.append(t)
        self.input_values[id(t)] = v
        self._bind(t, v)
        return v

    def canonicalize_sizes(self) -> None:
        """Apply the size equalities the trace proved (`T == N`, `T == 784`): one symbol
        per size class, constants where a size was pinned, so types compare equal."""
        mapping: dict = {}

        def find(sym):
            while isinstance(mapping.get(sym), str):
                sym = mapping[sym]
            return mapping.get(sym, sym)

        for g in self.shape_guards.values():
            if g.op != "==" or g.expected is not True or g.lhs not in self.letters:
                continue
            a = find(g.lhs)
            if g.rhs.lstrip("-").isdigit():
                if isinstance(a, str):
                    mapping[a] = int(g.rhs)
            elif g.rhs in self.letters:
                b = find(g.rhs)
                if isinstance(a, str) and isinstance(b, str) and a != b:
                    first, second = sorted((a, b), key=lambda s: int(s[1:]))
                    mapping[second] = first
                elif isinstance(a, str) != isinstance(b, str):  # one side already pinned
                    sym, const = (a, b) if isinstance(a, str) else (b, a)
                    mapping[sym] = const
        # a size expression the trace found equal to a number (`N // 3 == 1`) is that
        # number in the types too: a kernel must not index a dimension of size 1 as if
        # it spanned the loop
        pinned = {g.lhs: int(g.rhs) for g in self.shape_guards.values()
                  if g.op == "==" and g.expected is True and g.lhs not in self.letters and
                  g.rhs.lstrip("-").isdigit()}
        if not mapping and not pinned:
            return
        final = {sym: find(sym) for sym in mapping}

        def pin(s):
            if s.source() in pinned:
                return pinned[s.source()]
            out = s.substitute(final)
            return pinned.get(out.source(), out) if isinstance(out, SymInt) else out

        def sub(x):
            return map_leaves(x, SymInt, pin)

        graphs = [self.graph]
        for graph in graphs:
            for v in graph.inputs:
                v.shape = sub(tuple(v.shape))
            graph.size_outputs = [sub(x) for x in graph.size_outputs]
            for node in graph.nodes:
                node.inputs = [sub(x) if not isinstance(x, Value) else x for x in node.inputs]
                node.attrs = {k: sub(x) for k, x in node.attrs.items()}
                for v in node.outputs:
                    v.shape = sub(tuple(v.shape))
                graphs += node.regions

    def _bind(self, t: Tensor, v: Value) -> None:
        self.values[id(t)] = v
        self.keep[id(t)] = t
        self.arrays[id(t._data)] = v

    def value_of(self, t: Tensor) -> Value:
        if self.stale and id(t) in self.stale:
            self._rederive(self.stale.pop(id(t)))
        v = self.values.get(id(t))
        if v is None:  # a backward rule re-wrapping a saved output's array
            v = self.arrays.get(id(t._data))
            if v is not None and v.dtype is t.dtype and len(v.shape) == t.ndim:
                self._bind(t, v)
        if v is None:  # a tensor from outside the trace: read it at every call
            v = self.add_input(t, f"c{sum(k == 'captured' for k in self.graph.input_kinds)}",
                               "captured", symbolic=False)
        return v

    def shape_of(self, t: Tensor) -> Size:
        return Size(self.value_of(t).shape)

    # ---- guards ----------------------------------------------------------------------------
    def add_shape_guard(self, lhs: str, op: str, rhs: str, expected: bool) -> None:
        if op in ("!=", ">", ">="):  # one spelling per relation, so duplicates merge
            op, expected = _NEGATE[op], not expected
        g = ShapeGuard(lhs, op, rhs, expected, "")
        if self.closed or self.paused or g.source in self.shape_guards:
            return
        g.where = user_frame()
        self.shape_guards[g.source] = g
        syms = self.graph.symbols
        if op == "==" and expected and lhs in syms:
            if rhs.isdigit():
                syms[lhs] = rhs  # a size pinned to a constant prints as the constant
            elif rhs in syms:  # sizes found equal print with one name
                first, second = sorted((lhs, rhs), key=lambda s: int(s[1:]))
                for sym, shown in syms.items():
                    if shown == syms[second]:
                        syms[sym] = syms[first]

    def _guard_node(self, t: Tensor, kind: str, expected) -> None:
        self._add(GUARD, [self.value_of(t)], {"kind": kind, "expected": expected}, [],
                  user_frame())

    def read(self, t: Tensor, kind: str):
        """bool(t), t.item(), int(t), float(t): the value becomes a guard in the graph —
        except an integer read by scripted code, which becomes a size from data."""
        data = t._data if isinstance(t._data, np.ndarray) else t._data.copy_to_host()
        value = data.reshape(()).item()
        if self.script and ((kind in ("int", "item") and t._data.dtype.kind in "iu") or
                            (kind == "int" and t._data.dtype.kind == "f")):
            return self.data_size(t, int(value))
        self._guard_node(t, kind, value)
        return value

    # ---- sizes from data (script mode) ---------------------------------------------------
    def new_symbol(self, hint: int) -> SymInt:
        """A fresh size symbol bound while the program runs (u0, u1, ...)."""
        name = f"u{self.n_data_symbols}"
        self.n_data_symbols += 1
        return SymInt.symbol(name, hint, self)

    def data_size(self, t: Tensor, value: int) -> SymInt:
        """An integer read from a tensor as a size: the program binds it when it runs."""
        sym = self.new_symbol(value)
        self._add(BIND, [self.value_of(t)], {"symbol": sym.source()}, [], user_frame())
        return sym

    def size_value(self, lhs, op: str | None = None, rhs=None, value=None) -> Tensor:
        """A 0-d tensor holding a size (op None) or a comparison of sizes, computed when
        the program runs; `value` is what it is in this call."""
        if value is None:
            value = hint_of(lhs)
        dtype = int64 if op is None and not isinstance(value, bool) else bool_
        t = Tensor._make(np.array(value, dtype=dtype.np))
        node = self._add(SIZE, [], {"lhs": lhs, "op": op, "rhs": rhs}, [(dtype, ())],
                         user_frame())
        self._bind(t, node.output)
        return t

    def size_decision(self, lhs: SymInt, op: str, rhs, hint: bool):
        """A comparison of sizes from data: a bool tensor the program computes (the
        script helpers branch on it; anything else reading it as a bool guards it)."""
        if self.closed or self.aborted or self.paused:
            return hint
        known = decide(lhs, op, rhs, self.ranges, self._nonneg)
        if known is not None:  # the loop bounds prove it: nothing to compute or check
            assert known == hint, f"{lhs.source()} {op} {rhs}: proved {known}, saw {hint}"
            return known
        return self.size_value(lhs, op, rhs, hint)

    def _nonneg(self, sym: str) -> bool:
        return sym.startswith("s") or sym in self.nonneg

    def size_check(self, size: SymInt) -> None:
        """A size from data used as a plain number: checked where it is used."""
        if self.closed or self.aborted or self.paused:
            return
        t = self.size_value(size, "==", size.hint, True)
        self._guard_node(t, "bool", True)

    def read_size(self, t: Tensor, dim: int, kind: str) -> int:
        size = self.shape_of(t)[dim]
        return size.specialize(kind) if isinstance(size, SymInt) else size

    def replay_guard(self, node, t: Tensor) -> None:
        """A guard of a graph being replayed under this recorder (the joint forward and
        backward trace): it stays a guard of the graph recorded."""
        self._add(GUARD, [self.value_of(t)], dict(node.attrs), [], node.source)

    def escape(self, t: Tensor, how: str) -> None:
        """t.numpy(), t.tolist(), np.asarray(t): guard the whole value seen."""
        self._guard_node(t, "array", np.array(t._data, copy=True))

    def unsupported(self, what: str) -> None:
        """Called for things a trace cannot replay."""
        if what.startswith("backward") and self.allow_backward:
            return
        self.abort(f"{what} inside a traced function is not captured by tj.trace (at "
                   f"{user_frame()})")

    def abort(self, reason: str, final: bool = True) -> None:
        """Stop recording: the rest of this call runs purely eagerly (each side effect
        once) and the function is not traced; `reason` is reported. Unless `final`, only
        this call's path is not kept: a later call may trace again."""
        if self.aborted is None:
            self.aborted = reason
            self.abort_is_final = final
        if STATE.capture is self:
            STATE.capture = None
        if self.dry:  # inside a path not taken: stop it before anything runs for real
            raise DryPathAbort(reason)

    # ---- ops -------------------------------------------------------------------------------
    def apply(self, op, args, attrs):
        if attrs and any(isinstance(v, Tensor) for v in attrs.values()):
            attrs = self._read_tensor_attrs(op, attrs)
        STATE.capture = None
        try:
            out = apply(op, *hint_of(args), **_hint_attrs(attrs))
        finally:
            STATE.capture = self
        self._record(op, args, attrs, out)
        node = out.grad_fn
        for counter, _ in getattr(node, "versions", None) or ():
            self.saved_counters[id(counter)] = (op.name, counter)
        if self.allow_backward and node is not None and not self.aborted and \
                getattr(node, "metas", None) is not None:
            # this node exists only for the backward being traced, whose rules must see
            # symbolic sizes: of the inputs, of attributes (a slice up to a size) and of
            # sizes used as numbers (`x * x.shape[0]`). (A plain trace's nodes serve the
            # eager backward of the call being traced: they keep that call's numbers.)
            node.metas = [m if m is None or not isinstance(a, Tensor) else
                          (tuple(self.value_of(a).shape), m[1], m[2])
                          for m, a in zip(node.metas, args)]
            if has_sym(tuple(attrs.values())):
                node.attrs = dict(attrs)
            if node.saved is not None and any(isinstance(a, SymInt) for a in args):
                node.saved = [a if isinstance(a, SymInt) else s
                              for s, a in zip(node.saved, args)]
        if op.view and not self.aborted and op is OPS.reshape and isinstance(
                args[0], Tensor) and (args[0]._base is not None or
                                      not _contiguous(args[0]._data)):
            # a reshape of a strided tensor is a view or a copy depending on which of its
            # sizes are 1 (x.t() of a [1, N] x is contiguous): another call's sizes could
            # alias where this one copied, or the reverse
            self.layout_sizes += [d for d in self.value_of(args[0]).shape
                                  if isinstance(d, SymInt)]
        if op.view and out._base is not None and not self.aborted:
            src = args[0]
            base, chain = self.view_chains.get(id(src), (src, ()))
            self.view_chains[id(out)] = (base, chain + ((op, attrs),))
        return out

    def _guard_layouts(self) -> None:
        """Aliasing decides what an in-place update changes: the sizes each reshape's
        view-or-copy decision rested on keep being 1, or not, as they were."""
        sizes, self.layout_sizes = self.layout_sizes, []
        for d in sizes:
            _ = d != 1  # (a shape guard: the comparison records it)

    def _read_tensor_attrs(self, op, attrs: dict) -> dict:
        """A tensor passed where an op takes a number (`full(shape, t)`, a script's
        `n * 0.5`): the op reads its value, so the value is read as `t.item()` is (a guard,
        or in a script an int from data), never kept as the tensor seen while recording."""
        out = {}
        for k, v in attrs.items():
            if isinstance(v, Tensor):
                if v.numel() == 1:
                    v = self.read(v, "item")
                else:
                    self.escape(v, f"{op.name}({k}=...)")
            out[k] = v
        return out

    # ---- scopes: regions of branches and loops -------------------------------------------
    def _add(self, op: str, inputs: list, attrs: dict, out_types: list, source: str,
             regions: list = ()):
        """Append a node to the innermost scope; outer values it reads become block
        arguments of the regions in between."""
        scope = self.scopes[-1]
        inputs = [self.local(x) if isinstance(x, Value) else x for x in inputs]
        node = scope.graph.add_node(op, inputs, attrs, out_types, source)
        node.regions = list(regions)
        for v in node.outputs:
            scope.defined.add(v)
            self.scope_of[v] = scope
        return node

    def local(self, v: Value, depth: int | None = None) -> Value:
        """`v` as the scope at `depth` (the innermost by default) sees it."""
        depth = len(self.scopes) - 1 if depth is None else depth
        scope = self.scopes[depth]
        if v in scope.defined:
            return v
        inner = scope.captures.get(v)
        if inner is not None:
            return inner
        home = self.scope_of.get(v)
        if home is not None and home not in self.scopes:  # a value of a closed region
            self.abort("a tensor computed inside a branch or loop body is used outside it "
                       "without being one of the variables the body assigns", final=False)
            return v
        if depth == 0 or home is None:
            return v
        outer = self.local(v, depth - 1)
        inner = scope.captures.get(outer)
        if inner is not None:  # captured already under the enclosing scope's name for it
            scope.captures[v] = inner
            return inner
        inner = Value(v.dtype, v.shape, None, v.name)
        scope.graph.inputs.append(inner)
        scope.graph.input_kinds.append("arg")
        scope.captures[v] = scope.captures[outer] = inner
        scope.outer.append(outer)
        scope.defined.add(inner)
        self.scope_of[inner] = scope
        return inner

    def open_scope(self, name: str) -> Scope:
        scope = Scope(Graph(name, made_by="script", symbols=self.graph.symbols, region=True))
        self.scopes.append(scope)
        return scope

    def close_scope(self, scope: Scope) -> None:
        assert self.scopes[-1] is scope, "scopes close in the order they opened"
        self.scopes.pop()

    def block_arg(self, scope: Scope, dtype, shape, name: str = "") -> Value:
        """A block argument of `scope` that no outer value stands behind yet (a loop's
        carried value: the node passes its initial value)."""
        v = Value(dtype, tuple(shape), None, name)
        scope.graph.inputs.append(v)
        scope.graph.input_kinds.append("arg")
        scope.defined.add(v)
        self.scope_of[v] = scope
        return v

    def bind(self, t: Tensor, v: Value, passed=None) -> None:
        """Bind a branch's or loop's result `t` to the node output `v`; `passed`: the
        tensor object this call's path handed on unchanged (an input, say), which the
        recording call returns in its place, as eager does."""
        self._bind(t, v)
        self.entry_values[id(t)] = v
        if passed is not None:
            self.passthrough[id(t)] = passed

    def passthrough_of(self, t: Tensor) -> Tensor:
        while id(t) in self.passthrough:
            t = self.passthrough[id(t)]
        return t

    def _node(self, op, inputs: list, attrs: dict) -> Value:
        """Append `op(inputs)`; inputs are Values or scalars. Returns the output Value."""
        avals = [AVal(x.shape, x.dtype) if isinstance(x, Value) else x for x in inputs]
        aval = op.infer(*avals, **attrs)
        node = self._add(op.name, inputs, attrs, [(aval.dtype, aval.shape)], user_frame())
        node.modes = STATE.modes
        return node.output

    def _record(self, op, args, attrs, out: Tensor) -> Value:
        inputs = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        if op.data_dependent:  # the size comes from the data: guard the count seen
            return self._record_data_dependent(op, inputs, attrs, out)
        value = self._node(op, inputs, attrs)
        if hint_of(tuple(value.shape)) != out._data.shape or value.dtype is not out.dtype:
            self.abort(f"{op.name}: the shape rule gives {value.dtype.short}"
                       f"{list(hint_of(tuple(value.shape)))} but the op produced "
                       f"{out.dtype.short}{list(out._data.shape)}")
        self._bind(out, value)
        return value

    def _record_data_dependent(self, op, inputs, attrs, out: Tensor) -> Value:
        nz = self._node(OPS.ne, [inputs[0], 0], {})
        count = self._node(OPS.sum, [nz], {"dim": None, "keepdim": False})
        self._add(GUARD, [count], {"kind": "item", "expected": out._data.shape[0]}, [],
                  user_frame())
        node = self._add(op.name, inputs, attrs, [(out.dtype, out._data.shape)], user_frame())
        node.modes = STATE.modes
        self._bind(out, node.output)
        return node.output

    def apply_inplace(self, op, target: Tensor, others, attrs):
        """Record `target.op_(*others)` functionally: the target (and, through a view,
        its base) gets a new value; every other view of that base is re-derived."""
        if attrs and any(isinstance(v, Tensor) for v in attrs.values()):
            attrs = self._read_tensor_attrs(op, attrs)
        base, chain = self.view_chains.get(id(target), (None, ()))
        if self.lists:
            _refuse_update_of_element(self, target, op.name)
        if len(self.scopes) > 1 and self.scope_of.get(self.value_of(
                base if base is not None else target)) is not self.scopes[-1]:
            self.abort(f"in-place {op.name} inside a branch or loop body of a tensor from "
                       "outside it (script mode records updates of values the body "
                       "assigns only)", final=False)
            return apply_inplace(op, target, *hint_of(others), **_hint_attrs(attrs))
        saved = self.saved_counters.get(id(target._vc)) if target._vc is not None else None
        if saved is not None:
            # eager autograd raises at backward() if it reaches the node that saved it;
            # a trace records updates functionally and would not, so this path runs eagerly
            self.abort(f"in-place {op.name} of a value saved for the backward of "
                       f"{saved[0]}", final=False)
            return apply_inplace(op, target, *hint_of(others), **_hint_attrs(attrs))
        if base is not None and not _is_plain_slice(chain) and not _is_reshape(chain):
            self.abort(f"in-place {op.name} through a view made by "
                       f"{' -> '.join(o.name for o, _ in chain)}: tracing records writes "
                       "through basic-indexing views and reshapes only")
            return apply_inplace(op, target, *hint_of(others), **_hint_attrs(attrs))
        self.value_of(target)  # a tensor from outside the trace becomes an input first
        if base is not None:
            self.value_of(base)
        self._guard_layouts()
        if not self.dry:  # a path recorded but not taken writes nothing
            STATE.capture = None
            try:
                apply_inplace(op, target, *hint_of(others), **_hint_attrs(attrs))
            finally:
                STATE.capture = self
        value = self._record_functional(op, target, others, attrs)
        root = target
        if base is not None:  # write the view's new value into its base
            root = base
            if _is_reshape(chain):  # every element of the base, in its order
                new_base = self._node(OPS.reshape, [value],
                                      {"shape": tuple(self.value_of(base).shape)})
            else:
                (_, index_attrs), = chain
                new_base = self._node(OPS.setitem, [self.value_of(base), value],
                                      {"index": index_attrs["index"]})
            self._bind(base, new_base)
        original = self.input_values.get(id(root))
        if original is not None:  # an update of a graph input: committed after the run
            self.graph.mutations = [(t, v) for t, v in self.graph.mutations
                                    if t is not original]
            self.graph.mutations.append((original, self.value_of(root)))
        self._rederive_views(root, skip=target if base is None else None)
        return target

    def commit_update(self, t: Tensor, v: Value) -> None:
        """A branch or loop updated the tensor `t` in place: from here on it holds `v`
        (an update of a graph input is committed after the run, as any other)."""
        if id(t) in self.view_chains:
            self.abort("a branch or loop updates a view in place; script mode records "
                       "in-place updates of whole variables only", final=False)
            return
        self._bind(t, v)
        original = self.input_values.get(id(t))
        if original is not None:
            self.graph.mutations = [(i, w) for i, w in self.graph.mutations
                                    if i is not original]
            self.graph.mutations.append((original, v))
        self._rederive_views(t, skip=None)

    def _rederive_views(self, root: Tensor, skip) -> None:
        """After a write into `root`, its other views read the new value: each is derived
        again from it (through its chain of view ops) when next used, where it is used; a
        view never used again records nothing (one made inside a helper's loop would
        otherwise be re-derived with that loop's index, after the loop)."""
        for t in list(self.keep.values()):
            entry = self.view_chains.get(id(t))
            if entry is not None and entry[0] is root and t is not skip:
                self.stale[id(t)] = t

    def _rederive(self, view: Tensor) -> None:
        base, chain = self.view_chains[id(view)]
        v = self.value_of(base)
        for op, attrs in chain:
            v = self._node(op, [v], attrs)
        self._bind(view, v)

    def _record_functional(self, op, target, others, attrs) -> Value:
        """The value `target` holds after `target.op_(*others)`, recorded out of place."""
        args = (target,) + tuple(others)
        value = self._node(op, [self.value_of(a) if isinstance(a, Tensor) else a for a in args],
                           attrs)
        if value.dtype is not target.dtype:  # in-place results keep the target's dtype
            value = self._node(OPS.cast, [value], {"dtype": target.dtype})
        self._bind(target, value)
        return value


def _is_plain_slice(chain) -> bool:
    """A single basic-indexing getitem (no tensor indices): writable as setitem."""
    if len(chain) != 1 or chain[0][0] is not OPS.getitem:
        return False
    return not any(isinstance(i, Slot) for i in chain[0][1]["index"])


def _is_reshape(chain) -> bool:
    """Reshapes only: the view holds every element of its base, in the base's order, so a
    write into it is the base reshaped (a convolution's output, written by an in-place
    activation)."""
    return bool(chain) and all(op is OPS.reshape for op, _ in chain)


def _hint_attrs(attrs: dict) -> dict:
    return {k: hint_of(v) for k, v in attrs.items()} if attrs else attrs


def _refuse_update_of_element(rec, target: Tensor, what: str) -> None:
    """An in-place update of a tensor a list value holds (or of a tensor it is a view of,
    or of an element read from the list): the list value would keep the old element."""
    def roots(t):
        return {id(t)} | ({id(t._base)} if t._base is not None else set())

    mine = roots(target)
    for key in rec.lists:
        xs = rec.keep.get(key)
        if type(xs) is list and any(mine & roots(t) for t in xs if isinstance(t, Tensor)):
            raise ScriptError(
                f"{user_frame()}: in-place {what} of a tensor that a list built in a loop or "
                "a branch on a tensor holds is not supported by tj.script; use the "
                "out-of-place form (`y = y * 2`) before appending")


def _contiguous(a) -> bool:
    flags = getattr(a, "flags", None)
    return bool(flags.c_contiguous) if isinstance(a, np.ndarray) else bool(
        a.is_c_contiguous())
