"""`tj.onnx.export`: a traced graph, before fusion, written as an ONNX model.

What the IR knows decides what is exported honestly:

- every size symbol of the graph is a named dynamic dimension (`B`, `T`, as the dumps
  name them; `dynamic_axes` may rename them), and a size the trace pinned to a number
  is a fixed dimension; sizes computed from symbols (a reshape to `B*T`) are computed in
  the model from its inputs' shapes (`Shape`, `Gather`, arithmetic);
- a trace that took a branch on a tensor's value or read one as a Python number (a
  value guard) is path-specific: eager would compute something else on other inputs, so
  it is refused, with the guard's source line and the advice to use `tj.script`;
- a size the trace decided something about other than an equality (`N > 1`: an LSTM
  indexing its layers' states) is a fixed dimension at the example's value, as
  PyTorch's export fixes every size not named in `dynamic_axes` (a runtime checks an
  input's fixed dimensions); the model's doc string states each such size and the
  decision that fixed it. Naming such a size in `dynamic_axes` is refused, with the
  decision's source line;
- parameters are initializers named as the module names them (`0.weight`).

The lowering of each op is `lowering.py`'s table, keyed by `OpDef`.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import GUARD, ListType, Value
from ..core.symbolic import SymInt, symbols_in
from ..ops import OPS
from .lowering import ONNX_TYPES, REFUSED, ExportError, lowering_of
from ..core.modes import no_grad
from ..capture.trace import TracedFunction, trace
from ..scripting import ScriptFunction, ScriptModule

DEFAULT_OPSET = 17


class _Context:
    """The ONNX graph being built: nodes, initializers, and the names of values."""

    def __init__(self, size_sources: dict):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.initializers: list = []
        self.known: dict = {}         # name -> dtype name, where known
        self.node_dtype = "float32"   # the output dtype of the node being lowered
        self.size_sources = size_sources  # symbol -> (input name, dimension)
        self._sizes: dict = {}
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def op(self, op_type: str, inputs: list, **attrs) -> str:
        out = self.fresh(op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def const(self, array: np.ndarray, name: str | None = None) -> str:
        name = name or self.fresh("const")
        self.initializers.append(self.numpy_helper.from_array(np.asarray(array), name))
        self.known[name] = np.asarray(array).dtype.name
        return name

    def cast(self, name: str, dtype: str) -> str:
        out = self.op("Cast", [name], to=ONNX_TYPES[dtype])
        self.known[out] = dtype
        return out

    def dtype(self, name: str) -> str:
        return self.known.get(name, self.node_dtype)

    def scalar(self, x, dtype: str) -> str:
        """A 0-d tensor of `dtype` holding a Python number or a size."""
        if isinstance(x, SymInt):
            return self.cast(self.op("Reshape", [self.size(x), self.const(
                np.asarray([], np.int64))]), dtype)
        return self.const(np.asarray(x, np.dtype(dtype)))

    def size(self, x) -> str:
        """An int64 [1] tensor holding size `x` (a number, or a symbol expression)."""
        if isinstance(x, int):
            return self.const(np.asarray([x], np.int64))
        key = x.source()
        if key in self._sizes:
            return self._sizes[key]
        if x.poly is None:
            raise ExportError(f"the size {key} is not a polynomial in the input sizes")
        total = None
        for mono, coef in sorted(x.poly.items()):
            term = None if coef == 1 and mono else self.const(np.asarray([coef], np.int64))
            for sym in mono:
                part = self._sizes.get(sym)
                if part is None and sym not in self.size_sources:
                    raise ExportError(f"the size {sym} is not an input's size")
                if part is None:
                    name, dim = self.size_sources[sym]
                    shape = self.op("Shape", [name])
                    part = self._sizes[sym] = self.op(
                        "Gather", [shape, self.const(np.asarray([dim], np.int64))])
                term = part if term is None else self.op("Mul", [term, part])
            total = term if total is None else self.op("Add", [total, term])
        self._sizes[key] = total
        return total

    def shape(self, shape, allow_infer: bool = False) -> str:
        """An int64 [rank] tensor of a shape; `allow_infer`: one size ONNX cannot be told
        (an expression that is not a polynomial) becomes -1, as Reshape allows."""
        shape = tuple(shape)
        if all(isinstance(d, int) for d in shape):
            return self.const(np.asarray(shape, np.int64))
        opaque = [d for d in shape if isinstance(d, SymInt) and d.poly is None]
        parts = []
        for d in shape:
            if allow_infer and len(opaque) == 1 and d is opaque[0]:
                parts.append(self.const(np.asarray([-1], np.int64)))
            else:
                parts.append(self.size(d))
        return self.op("Concat", parts, axis=0)


def _dim_name(size, graph, rename: dict, fixed: dict | None = None) -> str | int:
    """An ONNX dimension: a number, or the name of a dynamic size (an expression of
    them). Sizes in `fixed` are numbers: an expression of fixed sizes only is its value."""
    if isinstance(size, int):
        return size
    text = size.source()
    fixed = fixed or {}
    if symbols_in(text) <= set(fixed):
        return size.hint
    for sym in sorted(graph.symbols, key=len, reverse=True):
        text = text.replace(sym, str(fixed[sym]) if sym in fixed else
                            rename.get(sym, graph.symbols[sym]))
    return text


def _refuse_path_specific(tr, graph) -> None:
    for node in graph.nodes:
        if node.op == GUARD:
            raise ExportError(
                f"cannot export {graph.name}: the trace read a tensor's value at "
                f"{node.source or 'an unknown line'} ({node.attrs.get('kind')} == "
                f"{node.attrs.get('expected')!r}), so the model it describes holds for that "
                "value only; eager computes something else on other inputs. Script the "
                "function (`tj.script`) to keep the branch in the graph.")


def _fixed_sizes(tr, graph, arg_values: list, dynamic: set) -> dict:
    """{symbol: (example value, the guard that decided it)}: the sizes the trace decided
    something about other than an equality, and those equal to them. They are exported
    as fixed dimensions, at the example's values: the model holds for those sizes only,
    as the trace does, and a runtime refuses an input of other sizes rather than compute
    what eager would not. A size `dynamic_axes` names dynamic, or one that is not an
    input's dimension, is refused."""
    example = {}
    for v in arg_values:
        for size in v.shape:
            if isinstance(size, SymInt) and size.poly is not None and len(size.poly) == 1:
                (mono, coef), = size.poly.items()
                if len(mono) == 1 and coef == 1:
                    example.setdefault(mono[0], size.hint)
    equal = [g for g in tr.shape_guards if g.op == "==" and g.expected is True]
    # a size pinned to a number is a fixed dimension: what else was decided about it holds
    pinned = {g.lhs for g in equal if g.rhs.lstrip("-").isdigit()}
    decided: dict = {}
    for g in tr.shape_guards:
        if not (g.op == "==" and g.expected is True) and not _excludes_only_empty(g):
            for sym in sorted(symbols_in(g.source) - pinned):
                decided.setdefault(sym, g)
    grown = True
    while grown:  # `N == M`: a size equal to a fixed one is fixed with it
        grown = False
        for g in equal:
            syms = symbols_in(g.source) - pinned
            known = [sym for sym in sorted(syms) if sym in decided]
            for sym in syms:
                if known and sym not in decided:
                    decided[sym], grown = decided[known[0]], True
    fixed = {}
    for sym, g in decided.items():
        where = f"`{g.describe(graph.symbols)}` at {g.where or 'an unknown line'}"
        if sym in dynamic:
            raise ExportError(
                f"cannot export {graph.name}: `dynamic_axes` makes {dynamic[sym]} dynamic, "
                f"but the trace decided {where}, so the model holds for "
                f"{graph.symbols.get(sym, sym)} = {example.get(sym, '?')} only. Leave that "
                "axis out of `dynamic_axes`, or script the function (`tj.script`) to keep "
                "the decision in the graph.")
        if sym not in example:
            raise ExportError(f"cannot export {graph.name}: the trace decided {where}, so "
                              "it holds for those sizes only")
        fixed[sym] = (example[sym], g)
    return fixed


def _excludes_only_empty(g) -> bool:
    """`s != 0`, `s > 0`, `s >= 1` (stored as ==, <= and < with expected False): a size
    that is not 0 only separates eager's error for an empty input (a reshape with -1),
    which the model's dimensions assume away; every other size takes the traced path."""
    return g.expected is False and (g.op, g.rhs) in (("==", "0"), ("<=", "0"), ("<", "1"))


def export(model_or_fn, args, path=None, input_names=None, output_names=None,
           dynamic_axes=None, opset_version=None):
    """Trace `model_or_fn` on `args` (or take an already traced function) and write its
    graph to `path` as an ONNX model (PyTorch's signature); returns the ModelProto."""
    import onnx

    args = args if isinstance(args, tuple) else (args,)
    if isinstance(model_or_fn, (ScriptFunction, ScriptModule)):
        traced = model_or_fn
        if not traced.traces:  # a scripted function compiles at its first call
            with no_grad():
                traced(*args)
    else:
        traced = model_or_fn if isinstance(model_or_fn, TracedFunction) else trace(
            model_or_fn, args, backend="interpret")
    tr = traced.traces[0]
    stages = tr.stages.materialize()  # the graph before fusion: its primitives
    names = [name for name, _, _ in stages]
    graph = stages[names.index("fuse") - 1][1] if "fuse" in names else tr.graph
    _refuse_path_specific(tr, graph)
    rename = {}
    n_args = graph.input_kinds.count("arg")
    arg_values = [v for v, k in zip(graph.inputs, graph.input_kinds) if k == "arg"]
    names = list(input_names or []) + [v.name or f"input{i}" for i, v in
                                       enumerate(arg_values)][len(input_names or []):]
    for i, name in enumerate(names[:n_args]):
        for d, axis_name in _axes(dynamic_axes, name, i):
            size = arg_values[i].shape[d]
            if isinstance(size, SymInt) and size.poly is not None and len(size.poly) == 1:
                (mono, _), = size.poly.items()
                if len(mono) == 1:
                    rename[mono[0]] = axis_name
    fixed = _fixed_sizes(tr, graph, arg_values, rename)
    size_sources = {sym: (names[i], d) for i, d, sym in tr.bindings if i < n_args}
    params = [store[key] for store, key in tr.param_refs]
    constants = iter(params + list(tr.captured))
    held = {v: np.asarray(next(constants)._data, v.dtype.np)
            for v, kind in zip(graph.inputs, graph.input_kinds) if kind != "arg"}
    model = build_model(graph, names, held, size_sources, rename, output_names,
                        opset_version, fixed, _results(tr.out_spec, graph, arg_values))
    if path is not None:
        onnx.save(model, str(path))
    return model


def _results(spec, graph, arg_values: list) -> list:
    """The values the traced call returns, in order: graph outputs, and the inputs it
    returns as they are (`x.contiguous()`, an identity dropout: no node computes them)."""
    tag, body = spec
    if tag == "t":
        return [graph.outputs[body]]
    if tag == "i":
        return [arg_values[body]]
    if tag == "p":
        return []
    return [v for item in body for v in _results(item[1] if tag is dict else item, graph,
                                                   arg_values)]


def build_model(graph, arg_names: list, held: dict, size_sources: dict | None = None,
                rename: dict | None = None, output_names=None, opset_version=None,
                fixed: dict | None = None, results: list | None = None):
    """The ONNX model of `graph`: inputs of kind "arg" are model inputs named
    `arg_names`; the others are initializers with the values `held` gives them (named as
    the graph names them: a module's parameter names). `fixed` ({symbol: (value, the
    guard that decided it)}) are sizes exported as fixed dimensions, stated in the
    model's doc string. `results`: the values the model returns (default: the graph's
    outputs)."""
    import onnx
    from onnx import helper

    rename = rename or {}
    fixed = fixed or {}
    numbers = {sym: value for sym, (value, _) in fixed.items()}
    ctx = _Context(size_sources or {})
    values: dict = {}
    inputs = []
    args = iter(arg_names)
    for k, (v, kind) in enumerate(zip(graph.inputs, graph.input_kinds)):
        if kind == "arg":
            name = next(args)
            inputs.append(helper.make_tensor_value_info(
                name, ONNX_TYPES[v.dtype.name],
                [_dim_name(d, graph, rename, numbers) for d in v.shape]))
            ctx.known[name] = v.dtype.name
        else:
            name = v.name if kind == "param" and v.name else f"constant{k}"
            ctx.const(held[v], name)
        values[v] = name
    _lower_nodes(ctx, graph.nodes, values)
    results = graph.outputs if results is None else results
    out_names = list(output_names or []) + [f"output{i}" for i in range(len(results))][
        len(output_names or []):]
    outputs = []
    for v, name in zip(results, out_names):
        ctx.nodes.append(helper.make_node("Identity", [values[v]], [name]))
        outputs.append(helper.make_tensor_value_info(
            name, ONNX_TYPES[v.dtype.name], [_dim_name(d, graph, rename, numbers)
                                              for d in v.shape]))
    onnx_graph = helper.make_graph(ctx.nodes, graph.name or "tracejit", inputs, outputs,
                                   ctx.initializers)
    opsets = [helper.make_opsetid("", opset_version or DEFAULT_OPSET)]
    # the oldest IR version the opset needs: runtimes lag the onnx package's newest
    model = helper.make_model(onnx_graph, opset_imports=opsets, producer_name="tracejit",
                              ir_version=helper.find_min_ir_version_for(opsets))
    if fixed:
        model.doc_string = "Sizes fixed at the export example's: " + "; ".join(
            f"{graph.symbols.get(sym, sym)} = {value} (the trace decided "
            f"`{g.describe(graph.symbols)}` at {g.where or 'an unknown line'})"
            for sym, (value, g) in sorted(fixed.items()))
    onnx.checker.check_model(model, full_check=True)
    return model


def _lower_nodes(ctx, nodes, values: dict) -> None:
    """Add the ONNX nodes of `nodes` to ctx.nodes; `values` maps IR values to names."""
    for node in nodes:
        if node.op in _CONTROL:
            _CONTROL[node.op](ctx, node, values)
            continue
        op = OPS[node.op] if node.op in OPS else None
        lower = lowering_of(op) if op is not None else None
        if lower is None:
            why = REFUSED.get(op, "no lowering") if op is not None else \
                _STRUCTURAL_REFUSED.get(node.op, "not an op of the IR")
            raise ExportError(f"cannot export {node.op} (at {node.source or 'an unknown line'})"
                              f": {why}")
        ctx.node_dtype = node.outputs[0].dtype.name
        ins = [values[x] if isinstance(x, Value) else x for x in node.inputs]
        try:
            outs = lower(ctx, node, ins)
        except ExportError as err:
            raise ExportError(f"{err} (at {node.source or 'an unknown line'})") from None
        for v, name in zip(node.outputs, outs):
            values[v] = name
            ctx.known[name] = v.dtype.name


def _subgraph(ctx, region, values: dict, name: str, inputs: list = ()):
    """An ONNX graph for `region`: its nodes (outer values referenced by name, as ONNX
    subgraphs may) and its yields as outputs; `inputs` are value infos it takes."""
    from onnx import helper

    outer_nodes, ctx.nodes = ctx.nodes, []
    outer_sizes = dict(ctx._sizes)  # sizes computed inside stay inside
    try:
        _lower_nodes(ctx, region.nodes, values)
        outputs = []
        for v in region.outputs:
            out = ctx.fresh(f"{name}_out")
            ctx.nodes.append(helper.make_node("Identity", [values[v]], [out]))
            outputs.append(_value_info(out, v))
        return helper.make_graph(ctx.nodes, ctx.fresh(name), list(inputs), outputs)
    finally:
        ctx.nodes, ctx._sizes = outer_nodes, outer_sizes


def _value_info(name: str, v):
    """An ONNX value info for a value: a tensor, or (script mode's lists) a sequence."""
    from onnx import helper

    if isinstance(v.dtype, ListType):
        if v.dtype.elem is None:
            raise ExportError("a list that never holds a tensor is not exported")
        return helper.make_tensor_sequence_value_info(name, ONNX_TYPES[v.dtype.elem[0].name],
                                                      None)
    return helper.make_tensor_value_info(name, ONNX_TYPES[v.dtype.name], None)


def _no_sizes(node) -> None:
    if node.attrs.get("sizes") or node.attrs.get("binds") or node.attrs.get(
            "carried_sizes") or (node.regions and any(r.size_outputs for r in node.regions)):
        raise ExportError(f"cannot export the {node.op} at {node.source or 'an unknown line'}:"
                          " sizes that differ between its paths or iterations are not "
                          "exported yet")


def _lower_if(ctx, node, values: dict) -> None:
    from onnx import helper

    _no_sizes(node)
    operands = node.inputs[1:]
    branches = []
    for region, label in zip(node.regions, ("then", "else")):
        inner = dict(values)
        for arg, outer in zip(region.inputs, operands):
            inner[arg] = values[outer] if isinstance(outer, Value) else ctx.scalar(
                outer, arg.dtype.name)
        branches.append(_subgraph(ctx, region, inner, label))
    outs = [ctx.fresh("if") for _ in node.outputs]
    cond = values[node.inputs[0]]
    if node.inputs[0].dtype.name != "bool":
        cond = ctx.cast(cond, "bool")
    ctx.nodes.append(helper.make_node("If", [cond], outs, then_branch=branches[0],
                                      else_branch=branches[1]))
    for v, name in zip(node.outputs, outs):
        values[v] = name
        ctx.known[name] = v.dtype.name


def _lower_cond(ctx, cond, names: list, index, index_name, values: dict) -> str:
    """The nodes of a loop's condition region on `names` (carried values, then the
    invariants), with the loop index at `index_name`: the name of its bool."""
    inner = dict(values)
    for arg, name in zip(cond.inputs, names):
        inner[arg] = name
    saved = dict(ctx._sizes)
    if index:
        ctx._sizes[index] = index_name
    try:
        _lower_nodes(ctx, cond.nodes, inner)
    finally:
        ctx._sizes = saved
    out = inner[cond.outputs[0]]
    return out if cond.outputs[0].dtype.name == "bool" else ctx.cast(out, "bool")


def _lower_loop(ctx, node, values: dict) -> None:
    """A loop: ONNX Loop, the trip count from a range's bounds, the index symbol
    start + iteration * step inside the body; a loop with a condition (`while`, `break`)
    checks it before the first iteration and at the end of each, for the next."""
    from onnx import TensorProto, helper

    _no_sizes(node)
    a = node.attrs
    has_cond = bool(a.get("has_cond"))
    if a.get("stop") is None and not has_cond:
        raise ExportError(f"cannot export the loop at {node.source or 'an unknown line'}: "
                          "it has neither a range nor a condition")
    one = ctx.const(np.asarray([1], np.int64))
    if a.get("stop") is not None:
        start, stop, step = (ctx.size(x) for x in (a["start"], a["stop"], a["step"]))
        span = ctx.op("Sub", [ctx.op("Add", [stop, step]), ctx.op("Add", [start, one])])
        trips = ctx.op("Max", [ctx.op("Div", [span, step]),
                               ctx.const(np.asarray([0], np.int64))])
        trips = ctx.op("Reshape", [trips, ctx.const(np.asarray([], np.int64))])
    else:  # a while loop: the condition alone ends it
        start, step = ctx.const(np.asarray([0], np.int64)), one
        trips = ""
    n = a["n_carried"]
    body = node.regions[-1]
    carried, invariants = node.inputs[:n], node.inputs[n:]
    cond0 = ""
    if has_cond:  # whether the first iteration runs
        cond0 = _lower_cond(ctx, node.regions[0], [values[x] for x in node.inputs],
                            a.get("index"), start, values)
    inner = dict(values)
    iteration, cond_in = ctx.fresh("iteration"), ctx.fresh("cond")
    body_inputs = [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
                   helper.make_tensor_value_info(cond_in, TensorProto.BOOL, [])]
    for arg in body.inputs[:n]:
        name = ctx.fresh("carried")
        inner[arg] = name
        ctx.known[name] = arg.dtype.name
        body_inputs.append(_value_info(name, arg))
    for arg, outer in zip(body.inputs[n:], invariants):
        inner[arg] = values[outer]
    outer_sizes = dict(ctx._sizes)
    outer_nodes, ctx.nodes = ctx.nodes, []
    if a.get("index"):  # the index as a size of the body: start + iteration * step
        ctx._sizes[a["index"]] = ctx.op("Add", [start, ctx.op("Mul", [ctx.op(
            "Reshape", [iteration, ctx.const(np.asarray([1], np.int64))]), step])])
    index_nodes, ctx.nodes = ctx.nodes, outer_nodes
    try:
        graph = _subgraph(ctx, body, inner, "body", body_inputs)
    finally:
        ctx._sizes = outer_sizes
    cond_out = ctx.fresh("cond_out")
    rest = list(graph.node)
    if has_cond:  # the next iteration's condition, on this iteration's results
        outer_nodes, ctx.nodes = ctx.nodes, []
        outer_sizes = dict(ctx._sizes)
        try:
            following = ctx.op("Add", [start, ctx.op("Mul", [ctx.op("Add", [ctx.op(
                "Reshape", [iteration, one]), one]), step])]) if a.get("index") else ""
            new = [inner[v] for v in body.outputs] + [values[x] for x in invariants]
            go = _lower_cond(ctx, node.regions[0], new, a.get("index"), following, inner)
            tail = ctx.nodes + [helper.make_node("Identity", [go], [cond_out])]
        finally:
            ctx.nodes, ctx._sizes = outer_nodes, outer_sizes
        first = index_nodes
    else:
        first = index_nodes + [helper.make_node("Identity", [cond_in], [cond_out])]
        tail = []
    del graph.node[:]
    graph.node.extend(first + rest + tail)
    graph.output.insert(0, helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []))
    outs = [ctx.fresh("loop") for _ in node.outputs]
    ctx.nodes.append(helper.make_node("Loop", [trips, cond0] + [values[x] for x in carried],
                                      outs, body=graph))
    for v, name in zip(node.outputs, outs):
        values[v] = name
        ctx.known[name] = v.dtype.name


def _lower_bind(ctx, node, values: dict) -> None:
    """A size from data (`n: int`, `.item()` as a bound): the integer as a [1] tensor."""
    x = node.inputs[0]
    name = values[x] if x.dtype.name == "int64" else ctx.cast(values[x], "int64")
    ctx._sizes[node.attrs["symbol"]] = ctx.op("Reshape", [name, ctx.const(
        np.asarray([1], np.int64))])


_COMPARE = {"==": "Equal", "<": "Less", "<=": "LessOrEqual", ">": "Greater",
            ">=": "GreaterOrEqual"}


def _lower_size(ctx, node, values: dict) -> None:
    """A size as a 0-d tensor (a loop's index used as a number), or a comparison of sizes
    (a loop's `i < n` in a condition)."""
    a = node.attrs
    lhs = ctx.size(a["lhs"])
    if a["op"] is None:
        out = lhs
    elif a["op"] == "!=":
        out = ctx.op("Not", [ctx.op("Equal", [lhs, ctx.size(a["rhs"])])])
    elif a["op"] in _COMPARE:
        out = ctx.op(_COMPARE[a["op"]], [lhs, ctx.size(a["rhs"])])
    else:
        raise ExportError(f"cannot export the size comparison {a['op']!r} at "
                          f"{node.source or 'an unknown line'}")
    out = ctx.op("Reshape", [out, ctx.const(np.asarray([], np.int64))])
    dtype = node.outputs[0].dtype.name
    want = "bool" if a["op"] is not None else "int64"
    if dtype != want:
        out = ctx.cast(out, dtype)
    values[node.outputs[0]] = out
    ctx.known[out] = dtype


def _out(ctx, node, values: dict, name: str) -> None:
    values[node.outputs[0]] = name
    ctx.known[name] = node.outputs[0].dtype.name


def _scalar_index(ctx, size) -> str:
    return ctx.op("Reshape", [ctx.size(size), ctx.const(np.asarray([], np.int64))])


def _no_element_sizes(node) -> None:
    if node.attrs.get("binds"):
        raise ExportError(f"cannot export the {node.op} at {node.source or 'an unknown line'}:"
                          " list elements whose sizes differ are not exported yet")


def _lower_list(ctx, node, values: dict) -> None:
    """A list of tensors (script mode) is an ONNX sequence."""
    from onnx import helper

    if node.inputs:
        _out(ctx, node, values, ctx.op("SequenceConstruct", [values[x] for x in node.inputs]))
        return
    elem = node.outputs[0].dtype.elem
    if elem is None:
        raise ExportError(f"cannot export the list at {node.source or 'an unknown line'}: "
                          "it never holds a tensor")
    out = ctx.fresh("list")
    ctx.nodes.append(helper.make_node("SequenceEmpty", [], [out],
                                      dtype=ONNX_TYPES[elem[0].name]))
    _out(ctx, node, values, out)


def _lower_list_append(ctx, node, values: dict) -> None:
    _out(ctx, node, values, ctx.op("SequenceInsert", [values[node.inputs[0]],
                                                      values[node.inputs[1]]]))


def _lower_list_get(ctx, node, values: dict) -> None:
    _no_element_sizes(node)
    _out(ctx, node, values, ctx.op("SequenceAt", [values[node.inputs[0]], _scalar_index(
        ctx, node.attrs["index"])]))


def _lower_list_len(ctx, node, values: dict) -> None:
    length = ctx.op("SequenceLength", [values[node.inputs[0]]])
    ctx._sizes[node.attrs["symbol"]] = ctx.op("Reshape", [length, ctx.const(
        np.asarray([1], np.int64))])


def _lower_list_stack(ctx, node, values: dict) -> None:
    from onnx import helper

    _no_element_sizes(node)
    seq = values[node.inputs[0]]
    if node.attrs.get("symbol"):
        length = ctx.op("SequenceLength", [seq])
        ctx._sizes[node.attrs["symbol"]] = ctx.op("Reshape", [length, ctx.const(
            np.asarray([1], np.int64))])
    out = ctx.fresh("stack")
    ctx.nodes.append(helper.make_node("ConcatFromSequence", [seq], [out],
                                      axis=int(node.attrs["dim"]),
                                      new_axis=int(node.attrs["how"] == "stack")))
    _out(ctx, node, values, out)


# the structural ops (ir/structural.py): lowered, or refused with the reason
_CONTROL = {"if": _lower_if, "loop": _lower_loop, "bind_size": _lower_bind,
            "size": _lower_size, "list": _lower_list, "list_append": _lower_list_append,
            "list_get": _lower_list_get, "list_len": _lower_list_len,
            "list_stack": _lower_list_stack}
_STRUCTURAL_REFUSED = {
    "guard": "the trace read a tensor's value (refused before lowering, with its line)",
    "fused": "the graph is exported before fusion (ONNX runtimes fuse on their own)",
    "raise": "a scripted `raise` has no ONNX form yet",
}


def _axes(dynamic_axes, name: str, index: int) -> list:
    """(dimension, name) pairs `dynamic_axes` gives input `name` (PyTorch's forms: a
    dict {dim: name} or a list of dims)."""
    if not dynamic_axes or name not in dynamic_axes:
        return []
    spec = dynamic_axes[name]
    if isinstance(spec, dict):
        return [(int(d), str(n)) for d, n in spec.items()]
    return [(int(d), f"{name}_dynamic_axes_{j + 1}") for j, d in enumerate(spec)]
