"""The ONNX exporter's own spelling of each op of the op table, keyed by `OpDef`.

`LOWERINGS[op](ctx, node, ins)` adds the ONNX nodes that compute `node` from the ONNX
names of its inputs (`ins`: a name per Value operand, the Python value otherwise) and
returns the names of its outputs. `REFUSED[op]` says why an op is not exported; a test
parametrised over the op table fails when an op is in neither. Composite operations
(softmax, layer norm, cross-entropy, ...) are not here: a trace holds their primitives.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ..ir.graph import Value
from ..core.symbolic import SymInt
from ..ops import OPS
from ..ops.windows import _fill
from ..core import dtypes as dt
from ..ops.indexing import Slot
from ..ops.recurrent import state_width
from ..ops.scalar import Arg, Call, Const

ONNX_TYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
              "float16": TensorProto.FLOAT16, "int64": TensorProto.INT64,
              "int32": TensorProto.INT32, "bool": TensorProto.BOOL,
              "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
              "int16": TensorProto.INT16, "uint16": TensorProto.UINT16,
              "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64}


class ExportError(RuntimeError):
    """What cannot be exported honestly, and where in the user's code it comes from."""


def _operands(ctx, node, ins, dtype=None) -> list:
    """The ONNX names of a node's operands, each tensor cast to `dtype` (the output's by
    default) and each Python number a constant of that dtype."""
    dtype = dtype or node.outputs[0].dtype.name
    out = []
    for x, name in zip(node.inputs, ins):
        if isinstance(x, Value):
            out.append(name if x.dtype.name == dtype else ctx.cast(name, dtype))
        else:  # a number, or a size used as one (a loop's index)
            out.append(ctx.scalar(x, dtype))
    return out


def _compute_dtype(node) -> str:
    """The dtype a comparison compares in (its operands' promotion, as eager's)."""
    return dt.result_type(*node.inputs).name


def _elementwise(onnx_op: str, compare: bool = False):
    def lower(ctx, node, ins):
        dtype = _compute_dtype(node) if compare else None
        return [ctx.op(onnx_op, _operands(ctx, node, ins, dtype))]
    return lower


def _composite(build):
    """A lowering written as a function of the operands (cast to the output's dtype)."""
    def lower(ctx, node, ins):
        return [build(ctx, *_operands(ctx, node, ins))]
    return lower


def _one(ctx, dtype):
    return ctx.const(np.asarray(1, dtype=np.dtype(dtype)))


def _reduce(onnx_op: str):
    def lower(ctx, node, ins):
        x = node.inputs[0]
        dim, keep = node.attrs.get("dim"), bool(node.attrs.get("keepdim", False))
        name = ins[0] if x.dtype is node.outputs[0].dtype else ctx.cast(
            ins[0], node.outputs[0].dtype.name)
        axes = None if dim is None else [int(d) for d in dim]
        if onnx_op == "ReduceSum":  # axes are an input from opset 13
            inputs = [name] + ([ctx.const(np.asarray(axes, np.int64))] if axes else [])
            return [ctx.op(onnx_op, inputs, keepdims=int(keep))]
        kw = {"axes": axes} if axes is not None else {}
        return [ctx.op(onnx_op, [name], keepdims=int(keep), **kw)]
    return lower


def _transpose(ctx, node, ins):
    rank = len(node.inputs[0].shape)
    perm = list(range(rank))
    a, b = node.attrs["dim0"] % max(rank, 1), node.attrs["dim1"] % max(rank, 1)
    perm[a], perm[b] = perm[b], perm[a]
    return [ctx.op("Transpose", [ins[0]], perm=perm)]


def _permute(ctx, node, ins):
    return [ctx.op("Transpose", [ins[0]], perm=[int(d) for d in node.attrs["dims"]])]


def _reshape(ctx, node, ins):
    return [ctx.op("Reshape", [ins[0], ctx.shape(node.attrs["shape"], allow_infer=True)])]


def _expand(ctx, node, ins):
    return [ctx.op("Expand", [ins[0], ctx.shape(node.attrs["shape"])])]


def _sum_to(ctx, node, ins):
    """Sum over the dimensions broadcasting made: leading ones, and those of size 1 in
    the target (sizes as written: a symbolic size is never one of them)."""
    shape, target = node.inputs[0].shape, tuple(node.attrs["shape"])
    lead = len(shape) - len(target)
    axes = list(range(lead)) + [lead + k for k, t in enumerate(target)
                                if isinstance(t, int) and t == 1 and not (
                                    isinstance(shape[lead + k], int) and shape[lead + k] == 1)]
    if not axes:
        return [ctx.op("Identity", [ins[0]])]
    summed = ctx.op("ReduceSum", [ins[0], ctx.const(np.asarray(axes, np.int64))], keepdims=1)
    return [ctx.op("Reshape", [summed, ctx.shape(target)])]


def _squeeze(ctx, node, ins):
    dims = node.attrs.get("dims", node.attrs.get("dim"))
    dims = [dims] if isinstance(dims, int) else list(dims) if dims is not None else None
    if dims is None:
        return [ctx.op("Squeeze", [ins[0]])]
    return [ctx.op("Squeeze", [ins[0], ctx.const(np.asarray(dims, np.int64))])]


def _unsqueeze(ctx, node, ins):
    return [ctx.op("Unsqueeze", [ins[0], ctx.const(np.asarray([node.attrs["dim"]],
                                                              np.int64))])]


def _cat(ctx, node, ins):
    dtype = node.outputs[0].dtype.name
    return [ctx.op("Concat", _operands(ctx, node, ins, dtype), axis=int(node.attrs["dim"]))]


def _clamp(ctx, node, ins):
    dtype = node.outputs[0].dtype.name
    bounds = [ctx.const(np.asarray(b, np.dtype(dtype))) if b is not None else ""
              for b in (node.attrs.get("min"), node.attrs.get("max"))]
    return [ctx.op("Clip", [_operands(ctx, node, ins)[0]] + bounds)]


def _cast(ctx, node, ins):
    return [ctx.cast(ins[0], node.outputs[0].dtype.name)]


def _constant(ctx, node, ins):
    value = node.attrs["value"]
    data = getattr(value, "_data", value)
    return [ctx.const(np.asarray(data, node.outputs[0].dtype.np))]


def _getitem(ctx, node, ins):
    """Basic indexing: integers, slices of constant bounds (step >= 1), None and `...`;
    one integer tensor picking along one dimension, every other taken whole
    (`weight[ids]`, an embedding's lookup) is a Gather. Other indexing by tensors is
    refused."""
    index = node.attrs["index"]
    index = index if isinstance(index, tuple) else (index,)
    rank = len(node.inputs[0].shape)
    slots = [k for k, item in enumerate(index) if type(item) is Slot]
    if slots:
        if len(slots) > 1 or any(item != slice(None) for k, item in enumerate(index)
                                 if k != slots[0]):
            raise ExportError("getitem: indexing by tensors is exported for one integer "
                              "tensor with every other dimension taken whole "
                              "(`weight[ids]`, `x[:, ids]`)")
        picks = node.inputs[1 + index[slots[0]].k]
        if picks.dtype.category != 1:
            raise ExportError("getitem: only integer tensor indices are exported")
        # (Gather takes negative indices from the end, as eager does)
        return [ctx.op("Gather", [ins[0], ins[1 + index[slots[0]].k]], axis=slots[0])]
    if any(item is Ellipsis for item in index):
        k = index.index(Ellipsis)
        fill = rank - sum(1 for item in index if item is not None and item is not Ellipsis)
        index = index[:k] + (slice(None),) * fill + index[k + 1:]
    starts, ends, axes, steps, squeeze, new_axes = [], [], [], [], [], []
    axis = 0
    for item in index:
        if item is None:  # a new axis of size 1, at its place in the result
            new_axes.append(axis + len(new_axes) - len(squeeze))
            continue
        if isinstance(item, bool) or not isinstance(item, (int, slice)) or (
                isinstance(item, slice) and any(isinstance(b, SymInt) for b in
                                                (item.start, item.stop, item.step))):
            raise ExportError(f"getitem: index {item!r} is not exported (integers, slices "
                              "with constant bounds, None and ... are)")
        if isinstance(item, int):
            starts.append(item)
            ends.append(item + 1 if item != -1 else np.iinfo(np.int64).max)
            steps.append(1)
            squeeze.append(axis)
        else:
            step = 1 if item.step is None else item.step
            if step < 1:
                raise ExportError("getitem: negative slice steps are not exported")
            starts.append(0 if item.start is None else item.start)
            ends.append(np.iinfo(np.int64).max if item.stop is None else item.stop)
            steps.append(step)
        axes.append(axis)
        axis += 1
    out = ins[0]
    if axes:
        out = ctx.op("Slice", [out] + [ctx.const(np.asarray(v, np.int64)) for v in
                                       (starts, ends, axes, steps)])
    if squeeze:
        out = ctx.op("Squeeze", [out, ctx.const(np.asarray(squeeze, np.int64))])
    if new_axes:
        out = ctx.op("Unsqueeze", [out, ctx.const(np.asarray(new_axes, np.int64))])
    return [out if out != ins[0] else ctx.op("Identity", [out])]


def _unfold2d(ctx, node, ins):
    """A convolution's or a pool's windows [N, C, KH, KW, OH, OW]: the input padded with
    the fill value, then one strided Slice per kernel offset, the offsets stacked. Each
    Slice ends (k-1-i)*d before the padded end, which leaves exactly the floor-mode window
    count for any size; ceil mode's last partial window needs fixed spatial sizes."""
    attrs = node.attrs
    kernel, stride, padding, dilation = (tuple(attrs[k]) for k in
                                         ("kernel", "stride", "padding", "dilation"))
    after = list(padding)
    if attrs.get("ceil_mode"):
        size, out = node.inputs[0].shape[2:], node.outputs[0].shape[4:]
        if not all(isinstance(d, int) for d in tuple(size) + tuple(out)):
            raise ExportError("unfold2d: ceil mode's windows of an input whose height or "
                              "width is dynamic are not exported (a fixed image size is)")
        # past the right padding as far as the last window reads
        after = [max(p, (o - 1) * s + (k - 1) * d + 1 - p - n)
                 for n, o, k, s, p, d in zip(size, out, kernel, stride, padding, dilation)]
        ends = [[i * d + (o - 1) * s + 1 for i in range(k)]
                for o, k, s, d in zip(out, kernel, stride, dilation)]
    else:
        ends = [[-(k - 1 - i) * d or np.iinfo(np.int64).max for i in range(k)]
                for k, d in zip(kernel, dilation)]
    x, dtype = ins[0], node.inputs[0].dtype
    if any(padding) or any(after):
        fill = np.asarray(_fill(attrs.get("value", 0.0), dtype.np), dtype.np)
        x = ctx.op("Pad", [x, ctx.const(np.asarray([0, 0, *padding, 0, 0, *after], np.int64)),
                           ctx.const(fill)])
    axes = ctx.const(np.asarray([2, 3], np.int64))
    steps = ctx.const(np.asarray(stride, np.int64))
    rows = []
    for i in range(kernel[0]):
        cols = []
        for j in range(kernel[1]):
            starts = np.asarray([i * dilation[0], j * dilation[1]], np.int64)
            window = ctx.op("Slice", [x, ctx.const(starts), ctx.const(np.asarray(
                [ends[0][i], ends[1][j]], np.int64)), axes, steps])
            cols.append(ctx.op("Unsqueeze", [window, axes]))
        rows.append(cols[0] if len(cols) == 1 else ctx.op("Concat", cols, axis=3))
    return [rows[0] if len(rows) == 1 else ctx.op("Concat", rows, axis=2)]


def _gather(ctx, node, ins):
    return [ctx.op("GatherElements", [ins[0], ins[1]], axis=int(node.attrs["dim"]))]


def _full(ctx, node, ins):
    from onnx import numpy_helper

    value = np.asarray([node.attrs["value"]], node.outputs[0].dtype.np)
    return [ctx.op("ConstantOfShape", [ctx.shape(node.attrs["shape"])],
                   value=numpy_helper.from_array(value))]


def _arg_reduce(onnx_op: str):
    """ArgMax/ArgMin: the first index of the extreme, as PyTorch; over every element
    when dim is None (of the flattened input)."""
    def lower(ctx, node, ins):
        dim, keep = node.attrs.get("dim"), int(bool(node.attrs.get("keepdim", False)))
        x = ins[0]
        if dim is None:
            x = ctx.op("Reshape", [x, ctx.const(np.asarray([-1], np.int64))])
            axis, keep = 0, 0
        else:
            axis = int(dim[0] if isinstance(dim, (tuple, list)) else dim)
        return [ctx.op(onnx_op, [x], axis=axis, keepdims=keep, select_last_index=0)]
    return lower


def _bool_reduce(onnx_op: str):
    """any/all as ReduceMax/ReduceMin over the values cast to int32 (onnxruntime has no
    boolean reductions), cast back to bool."""
    def lower(ctx, node, ins):
        x = ctx.cast(ctx.cast(ins[0], "bool"), "int32")
        dim, keep = node.attrs.get("dim"), int(bool(node.attrs.get("keepdim", False)))
        kw = {"axes": [int(d) for d in dim]} if dim is not None else {}
        return [ctx.cast(ctx.op(onnx_op, [x], keepdims=keep, **kw), "bool")]
    return lower


def _floor_divide(ctx, node, ins):
    """Floor division: floats Floor(a / b); integers (a - a mod b) / b, exact, with ONNX's
    Mod taking the divisor's sign as PyTorch does."""
    a, b = _operands(ctx, node, ins)
    if node.outputs[0].dtype.category == 2:
        return [ctx.op("Floor", [ctx.op("Div", [a, b])])]
    return [ctx.op("Div", [ctx.op("Sub", [a, ctx.op("Mod", [a, b], fmod=0)]), b])]


def _remainder(ctx, node, ins):
    """PyTorch's remainder (the divisor's sign): integers ONNX Mod; floats a - floor(a/b)*b
    (ONNX Mod of floats is C's fmod, the dividend's sign)."""
    a, b = _operands(ctx, node, ins)
    if node.outputs[0].dtype.category == 2:
        return [ctx.op("Sub", [a, ctx.op("Mul", [ctx.op("Floor", [ctx.op("Div", [a, b])]),
                                                b])])]
    return [ctx.op("Mod", [a, b], fmod=0)]


def _logical(onnx_op: str):
    def lower(ctx, node, ins):
        return [ctx.op(onnx_op, _operands(ctx, node, ins, "bool"))]
    return lower


def _rnn_scan(ctx, node, ins):
    """A recurrent layer's steps as an ONNX Loop over the sequence (its length is the
    input's, dynamic as in the trace): the body computes one step's gates with ONNX's
    own operators, carries h (and c) and emits the step's row of the history; row 0, the
    initial state, is put in front of the rows."""
    from onnx import TensorProto, helper

    mode = node.attrs["mode"]
    H = node.inputs[1].shape[-1]
    dtype = node.outputs[0].dtype.name
    xg, h0, c0, w_hh, b_hh = _operands(ctx, node, ins)
    wt = ctx.op("Transpose", [w_hh], perm=[1, 0])
    lstm = mode == "LSTM"
    one = _one(ctx, dtype)

    def cols(x, start, stop):
        return ctx.op("Slice", [x] + [ctx.const(np.asarray(v, np.int64))
                                      for v in ([start], [stop], [1])])

    first = [h0, c0] if lstm else [h0]
    blocks = state_width(mode, H) // H - len(first)  # the gates' columns of row 0: zeros
    if blocks:
        like = ctx.op("Concat", [h0] * blocks, axis=1) if blocks > 1 else h0
        first.append(ctx.op("Mul", [like, ctx.scalar(0, dtype)]))
    row0 = ctx.op("Concat", first, axis=1) if len(first) > 1 else first[0]
    trips = ctx.op("Reshape", [ctx.op("Gather", [ctx.op("Shape", [xg]), ctx.const(
        np.asarray([0], np.int64))]), ctx.const(np.asarray([], np.int64))])

    elem = ONNX_TYPES[dtype]
    iteration, cond = ctx.fresh("iteration"), ctx.fresh("cond")
    h, c = ctx.fresh("h"), ctx.fresh("c")
    carried = [h, c] if lstm else [h]
    inputs = [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
              helper.make_tensor_value_info(cond, TensorProto.BOOL, [])] + \
        [helper.make_tensor_value_info(x, elem, None) for x in carried]
    outer, ctx.nodes = ctx.nodes, []
    try:
        x_t = ctx.op("Gather", [xg, iteration], axis=0)
        gh = ctx.op("Add", [ctx.op("MatMul", [h, wt]), b_hh])
        if lstm:
            pre = ctx.op("Add", [x_t, gh])
            i, f, o = (ctx.op("Sigmoid", [cols(pre, k * H, (k + 1) * H)]) for k in (0, 1, 3))
            g = ctx.op("Tanh", [cols(pre, 2 * H, 3 * H)])
            c_new = ctx.op("Add", [ctx.op("Mul", [f, c]), ctx.op("Mul", [i, g])])
            h_new = ctx.op("Mul", [o, ctx.op("Tanh", [c_new])])
            parts, new = [h_new, c_new, i, f, g, o], [h_new, c_new]
        elif mode == "GRU":
            r = ctx.op("Sigmoid", [ctx.op("Add", [cols(x_t, 0, H), cols(gh, 0, H)])])
            z = ctx.op("Sigmoid", [ctx.op("Add", [cols(x_t, H, 2 * H), cols(gh, H, 2 * H)])])
            hn = cols(gh, 2 * H, 3 * H)
            n = ctx.op("Tanh", [ctx.op("Add", [cols(x_t, 2 * H, 3 * H),
                                               ctx.op("Mul", [r, hn])])])
            h_new = ctx.op("Add", [ctx.op("Mul", [ctx.op("Sub", [one, z]), n]),
                                   ctx.op("Mul", [z, h])])
            parts, new = [h_new, r, z, n, hn], [h_new]
        else:
            h_new = ctx.op("Tanh" if mode == "RNN_TANH" else "Relu", [ctx.op("Add", [x_t, gh])])
            parts, new = [h_new], [h_new]
        row = ctx.op("Concat", parts, axis=1) if len(parts) > 1 else ctx.op("Identity", parts)
        cond_out = ctx.op("Identity", [cond])
        outs = [cond_out] + [ctx.op("Identity", [x]) for x in new] + [row]
        body = helper.make_graph(ctx.nodes, ctx.fresh("rnn_step"), inputs, [
            helper.make_tensor_value_info(outs[0], TensorProto.BOOL, [])] + [
            helper.make_tensor_value_info(x, elem, None) for x in outs[1:]])
    finally:
        ctx.nodes = outer
    results = [ctx.fresh("rnn") for _ in outs[1:]]
    ctx.nodes.append(helper.make_node("Loop", [trips, ""] + ([h0, c0] if lstm else [h0]),
                                      results, body=body))
    first_row = ctx.op("Unsqueeze", [row0, ctx.const(np.asarray([0], np.int64))])
    return [ctx.op("Concat", [first_row, results[-1]], axis=0)]


LOWERINGS = {
    OPS["neg"]: _elementwise("Neg"), OPS["abs"]: _elementwise("Abs"),
    OPS["exp"]: _elementwise("Exp"), OPS["log"]: _elementwise("Log"),
    OPS["sqrt"]: _elementwise("Sqrt"), OPS["sin"]: _elementwise("Sin"),
    OPS["cos"]: _elementwise("Cos"), OPS["tanh"]: _elementwise("Tanh"),
    OPS["sigmoid"]: _elementwise("Sigmoid"), OPS["relu"]: _elementwise("Relu"),
    OPS["erf"]: _elementwise("Erf"), OPS["sign"]: _elementwise("Sign"),
    OPS["floor"]: _elementwise("Floor"),
    OPS["log1p"]: _composite(lambda c, x: c.op("Log", [c.op("Add", [x, _one(c, c.dtype(x))])])),
    OPS["rsqrt"]: _composite(lambda c, x: c.op("Reciprocal", [c.op("Sqrt", [x])])),
    OPS["isnan"]: lambda c, n, ins: [c.op("IsNaN", [ins[0]])],
    OPS["isfinite"]: lambda c, n, ins: [c.op("Not", [c.op("Or", [c.op("IsNaN", [ins[0]]),
                                                                 c.op("IsInf", [ins[0]])])])],
    OPS["logical_not"]: _logical("Not"), OPS["logical_and"]: _logical("And"),
    OPS["logical_or"]: _logical("Or"), OPS["logical_xor"]: _logical("Xor"),
    OPS["add"]: _elementwise("Add"), OPS["sub"]: _elementwise("Sub"),
    OPS["mul"]: _elementwise("Mul"), OPS["div"]: _elementwise("Div"),
    OPS["pow"]: _elementwise("Pow"), OPS["maximum"]: _elementwise("Max"),
    OPS["minimum"]: _elementwise("Min"),
    OPS["lt"]: _elementwise("Less", True), OPS["le"]: _elementwise("LessOrEqual", True),
    OPS["gt"]: _elementwise("Greater", True), OPS["ge"]: _elementwise("GreaterOrEqual", True),
    OPS["eq"]: _elementwise("Equal", True),
    OPS["ne"]: lambda c, n, ins: [c.op("Not", [_elementwise("Equal", True)(c, n, ins)[0]])],
    OPS["where"]: lambda c, n, ins: [c.op("Where", [_operands(c, n, ins, "bool")[0]] +
                                          _operands(c, n, ins)[1:])],
    OPS["tanh_backward"]: _composite(lambda c, g, y: c.op("Mul", [g, c.op("Sub", [
        _one(c, c.dtype(y)), c.op("Mul", [y, y])])])),
    OPS["sigmoid_backward"]: _composite(lambda c, g, y: c.op("Mul", [g, c.op("Mul", [
        y, c.op("Sub", [_one(c, c.dtype(y)), y])])])),
    OPS["threshold_backward"]: lambda c, n, ins: [c.op("Where", [
        c.op("Greater", [ins[1], c.const(np.asarray(0, n.inputs[1].dtype.np))]),
        ins[0], c.const(np.asarray(0, n.outputs[0].dtype.np))])],
    OPS["cast"]: _cast, OPS["clone"]: lambda c, n, ins: [c.op("Identity", [ins[0]])],
    OPS["detach"]: lambda c, n, ins: [c.op("Identity", [ins[0]])],
    OPS["clamp"]: _clamp,
    OPS["sum"]: _reduce("ReduceSum"), OPS["mean"]: _reduce("ReduceMean"),
    OPS["prod"]: _reduce("ReduceProd"), OPS["amax"]: _reduce("ReduceMax"),
    OPS["amin"]: _reduce("ReduceMin"), OPS["sum_to"]: _sum_to,
    OPS["matmul"]: lambda c, n, ins: [c.op("MatMul", ins[:2])],
    OPS["transpose"]: _transpose, OPS["permute"]: _permute, OPS["reshape"]: _reshape,
    OPS["expand"]: _expand, OPS["squeeze"]: _squeeze, OPS["unsqueeze"]: _unsqueeze,
    OPS["cat"]: _cat, OPS["getitem"]: _getitem, OPS["constant"]: _constant,
    OPS["unfold2d"]: _unfold2d,
    OPS["gather"]: _gather, OPS["full"]: _full,
    OPS["argmax"]: _arg_reduce("ArgMax"), OPS["argmin"]: _arg_reduce("ArgMin"),
    OPS["any"]: _bool_reduce("ReduceMax"), OPS["all"]: _bool_reduce("ReduceMin"),
    OPS["floor_divide"]: _floor_divide, OPS["remainder"]: _remainder,
    OPS["rnn_scan"]: _rnn_scan,
}

_LATER = "not lowered yet"
REFUSED = {
    OPS["rnn_scan_backward"]: "a recurrent layer's gradient: ONNX export writes forward "
                              "graphs",
    OPS["rand"]: "random numbers: an exported model would not draw eager's",
    OPS["randn"]: "random numbers: an exported model would not draw eager's",
    OPS["randint"]: "random numbers: an exported model would not draw eager's",
    OPS["randperm"]: "random numbers: an exported model would not draw eager's",
    OPS["view_dtype"]: "a bitcast (view(dtype)): ONNX has no operator reinterpreting bits",
    OPS["nonzero"]: f"{_LATER} (ONNX NonZero returns indices transposed)",
    OPS["arange"]: f"{_LATER} (Range)", OPS["linspace"]: f"{_LATER} (Range)",
    OPS["eye"]: f"{_LATER} (EyeLike)",
    OPS["index_scatter"]: f"{_LATER} (ScatterND)",
    OPS["scatter_add"]: f"{_LATER} (ScatterElements with reduction='add')",
    OPS["setitem"]: f"{_LATER} (an in-place update: ScatterND)",
    OPS["fold2d"]: f"{_LATER} (Col2Im, opset 18)",
    OPS["argsort"]: f"{_LATER} (TopK over the whole dimension)",
    OPS["topk"]: f"{_LATER} (TopK)",
    OPS["cumsum"]: f"{_LATER} (CumSum)",
    OPS["cumprod"]: f"{_LATER} (no ONNX operator: a loop)",
    OPS["argcummax"]: f"{_LATER} (no ONNX operator: a loop)",
    OPS["argcummin"]: f"{_LATER} (no ONNX operator: a loop)",
    OPS["searchsorted"]: f"{_LATER} (no ONNX operator: comparisons and a sum)",
    OPS["unique_values"]: f"{_LATER} (Unique)",
    OPS["bincount"]: f"{_LATER} (ScatterElements into zeros of a data-dependent size)",
    OPS["repeat_index"]: f"{_LATER} (a data-dependent size)",
    OPS["scatter"]: f"{_LATER} (ScatterElements)",
    OPS["scatter_reduce"]: f"{_LATER} (ScatterElements with reduction='mul', 'max' or 'min')",
    OPS["copysign"]: "ONNX cannot read the sign of a negative zero",
    OPS["signbit"]: "ONNX cannot read the sign of a negative zero",
    **{OPS[name]: "ONNX's bitwise operators need opset 18 (the export writes opset 17)"
       for name in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    **{OPS[name]: "ONNX's BitShift takes unsigned integers only"
       for name in ("bitwise_left_shift", "bitwise_right_shift")},
    **{OPS[name]: f"ONNX has no {name}" for name in ("lgamma", "digamma", "trigamma",
                                                     "erfinv")},
}


# ---- elementwise ops by their element expression (ops/scalar.py) ------------------------
#
# An elementwise op without an entry above is lowered from its expression: each scalar
# function has ONNX's spelling here (a test over ops.scalar.FUNCTIONS fails when one is
# missing), so a new elementwise op built from existing functions exports with no edit.

def _unary_code(onnx_op: str):
    return lambda c, x: c.op(onnx_op, [x])


def _binary_code(onnx_op: str):
    return lambda c, x, y: c.op(onnx_op, [x, y])


def _float_const(c, like: str, value: float) -> str:
    return c.const(np.asarray(value, np.dtype(c.dtype(like))))


def _fn_floordiv(c, a, b):
    if np.dtype(c.dtype(a)).kind == "f":
        return c.op("Floor", [c.op("Div", [a, b])])
    return c.op("Div", [c.op("Sub", [a, c.op("Mod", [a, b], fmod=0)]), b])


def _fn_mod(c, a, b):
    if np.dtype(c.dtype(a)).kind == "f":
        return c.op("Sub", [a, c.op("Mul", [c.op("Floor", [c.op("Div", [a, b])]), b])])
    return c.op("Mod", [a, b], fmod=0)


CODE_FOR_FN = {
    **{fn: _unary_code(fn.capitalize()) for fn in (
        "neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan",
        "sinh", "cosh", "asinh", "acosh", "atanh", "tanh", "erf", "floor", "ceil", "round",
        "not")},
    **{fn: _binary_code(onnx_op) for fn, onnx_op in (
        ("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("div", "Div"), ("pow", "Pow"),
        ("max", "Max"), ("min", "Min"), ("lt", "Less"), ("le", "LessOrEqual"),
        ("gt", "Greater"), ("ge", "GreaterOrEqual"), ("eq", "Equal"), ("and", "And"),
        ("or", "Or"), ("xor", "Xor"))},
    "ne": lambda c, x, y: c.op("Not", [c.op("Equal", [x, y])]),
    "select": lambda c, k, x, y: c.op("Where", [k, x, y]),
    "isnan": _unary_code("IsNaN"), "isinf": _unary_code("IsInf"),
    "isfinite": lambda c, x: c.op("Not", [c.op("Or", [c.op("IsNaN", [x]),
                                                      c.op("IsInf", [x])])]),
    "log1p": lambda c, x: c.op("Log", [c.op("Add", [x, _float_const(c, x, 1)])]),
    "expm1": lambda c, x: c.op("Sub", [c.op("Exp", [x]), _float_const(c, x, 1)]),
    "log2": lambda c, x: c.op("Div", [c.op("Log", [x]), _float_const(c, x, np.log(2))]),
    "log10": lambda c, x: c.op("Div", [c.op("Log", [x]), _float_const(c, x, np.log(10))]),
    "exp2": lambda c, x: c.op("Pow", [_float_const(c, x, 2), x]),
    "erfc": lambda c, x: c.op("Sub", [_float_const(c, x, 1), c.op("Erf", [x])]),
    "trunc": lambda c, x: c.op("Where", [c.op("Less", [x, _float_const(c, x, 0)]),
                                         c.op("Ceil", [x]), c.op("Floor", [x])]),
    "floordiv": _fn_floordiv, "mod": _fn_mod,
    "bitwise_not": lambda c, x: c.op("Sub", [c.op("Neg", [x]), c.scalar(1, c.dtype(x))]),
    "fmod": lambda c, x, y: c.op("Mod", [x, y], fmod=1),
    "hypot": lambda c, x, y: c.op("Sqrt", [c.op("Add", [c.op("Mul", [x, x]),
                                                        c.op("Mul", [y, y])])]),
}
REFUSED_FNS = {
    **{fn: f"ONNX has no {fn}" for fn in ("lgamma", "digamma", "trigamma", "erfinv")},
    **{fn: "ONNX's bitwise operators need opset 18 (the export writes opset 17)"
       for fn in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    **{fn: "ONNX's BitShift takes unsigned integers only"
       for fn in ("left_shift", "right_shift")},
    "atan2": "ONNX has no two-argument arctangent",
    "copysign": "ONNX cannot read the sign of a negative zero",
}
_BOOL_OPERANDS = {"not", "and", "or", "xor"}
_BOOL_RESULTS = {"lt", "le", "gt", "ge", "eq", "ne", "isnan", "isinf", "isfinite"} | \
    _BOOL_OPERANDS


def expressible(op) -> bool:
    """Whether `op` can be lowered from its element expression."""
    if op is None or op.expr is None or op.kind != "elementwise":
        return False
    if callable(op.expr):  # depends on attributes: every function may appear
        return True
    return all(fn in CODE_FOR_FN for fn in op.expr.calls())


def lower_expression(ctx, node, ins):
    """The ONNX nodes of an elementwise node's element expression: arithmetic in the
    output's dtype (a comparison's in its operands' promotion), logic in bool."""
    op = OPS[node.op]
    out_dtype = node.outputs[0].dtype.name
    value_dtype = _compute_dtype(node) if out_dtype == "bool" else out_dtype
    operands: dict = {}

    def operand(i: int, dtype: str) -> str:
        if (i, dtype) not in operands:
            x = node.inputs[i]
            if isinstance(x, Value):
                name = ins[i] if x.dtype.name == dtype else ctx.cast(ins[i], dtype)
            else:
                name = ctx.scalar(x, dtype)
            ctx.known[name] = dtype
            operands[i, dtype] = name
        return operands[i, dtype]

    def lower(e, dtype: str) -> str:
        """`e` as an ONNX name of `dtype` ("bool" or the value dtype)."""
        if isinstance(e, Arg):
            return operand(e.index, dtype)
        if isinstance(e, Const):
            return ctx.scalar(e.value, dtype)
        if not isinstance(e, Call):
            raise ExportError(f"{node.op}: an operand ONNX export does not know ({e!r})")
        if e.fn in REFUSED_FNS or e.fn not in CODE_FOR_FN:
            raise ExportError(f"cannot export {node.op}: {e.fn}: "
                              f"{REFUSED_FNS.get(e.fn, 'no ONNX spelling')}")
        if e.fn == "select":
            args = [lower(e.args[0], "bool"), lower(e.args[1], value_dtype),
                    lower(e.args[2], value_dtype)]
        else:
            arg_dtype = "bool" if e.fn in _BOOL_OPERANDS else value_dtype
            args = [lower(a, arg_dtype) for a in e.args]
        result = CODE_FOR_FN[e.fn](ctx, *args)
        made = "bool" if e.fn in _BOOL_RESULTS else value_dtype
        ctx.known[result] = made
        return result if made == dtype else ctx.cast(result, dtype)

    return [lower(op.scalar(node.attrs), out_dtype)]


def lowering_of(op):
    """How `op` is exported: its entry in LOWERINGS, else its element expression, else
    None (REFUSED says why)."""
    lower = LOWERINGS.get(op)
    if lower is None and op not in REFUSED and expressible(op):
        return lower_expression
    return lower
