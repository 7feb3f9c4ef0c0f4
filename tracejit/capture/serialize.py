"""Graphs as JSON and arrays, and back: the encoding `tj.jit.save` files (capture/saving.py)
and the backward cache (capture/backward_cache.py) write. Reading checks what it reads:
a size expression is only symbols, integers and arithmetic, as host programs and guards
evaluate them, and nothing else from a file reaches Python's evaluation."""
from __future__ import annotations

import math
import re

import numpy as np

from ..core import dtypes as dt
from ..core.symbolic import SymInt
from ..ir.graph import Graph, ListType, Node, Value
from ..ops.indexing import Slot
from ..tensor.tensor import _make


class SaveError(RuntimeError):
    """A program that cannot be saved, or a file that is not a loadable program."""


_SIZE_TOKEN = re.compile(r"\s*(?:([A-Za-z_]\w*)|(\d+)|(//|[-+*%()]))")
_SIZE_NAMES = re.compile(r"^[su]\d+$")


def _size_source(src) -> str:
    """A size expression read from a file, checked to be only size symbols, integers,
    arithmetic and abs/min/max: host programs and guards evaluate these, and nothing
    else from a file may reach Python's evaluation."""
    if not isinstance(src, str):
        raise SaveError("tj.jit.load: a size expression is not a string")
    pos = 0
    while pos < len(src):
        m = _SIZE_TOKEN.match(src, pos)
        if m is None or m.end() == pos:
            if src[pos:].strip() == "":
                break
            raise SaveError(f"tj.jit.load: {src!r} is not a size expression")
        name = m.group(1)
        if name is not None and not (_SIZE_NAMES.match(name) or name in ("abs", "min",
                                                                           "max")):
            raise SaveError(f"tj.jit.load: {src!r} is not a size expression")
        pos = m.end()
    return src


# ---- encoding ------------------------------------------------------------------------
class _Writer:
    def __init__(self):
        self.arrays: dict = {}

    def array(self, a: np.ndarray) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = np.ascontiguousarray(a)
        return key

    def literal(self, x):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return x
        if isinstance(x, float):
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(x, SymInt):
            poly = None if x.poly is None else [[list(m), c] for m, c in x.poly.items()]
            return {"sym": x.source(), "poly": poly, "hint": x.hint}
        if isinstance(x, tuple):
            return {"tuple": [self.literal(v) for v in x]}
        if isinstance(x, list):
            return {"list": [self.literal(v) for v in x]}
        if isinstance(x, slice):
            return {"slice": [self.literal(v) for v in (x.start, x.stop, x.step)]}
        if x is Ellipsis:
            return {"ellipsis": True}
        if isinstance(x, dt.dtype):
            return {"dtype": x.name}
        if isinstance(x, Slot):
            return {"slot": x.k}
        if isinstance(x, np.ndarray):
            return {"array": self.array(x)}
        if isinstance(x, np.generic):
            return {"scalar": self.array(np.asarray(x))}
        if isinstance(x, dict):
            return {"dict": [[k, self.literal(v)] for k, v in x.items()]}
        if hasattr(x, "_data") and isinstance(x._data, np.ndarray):  # a Tensor
            return {"tensor": self.array(x._data)}
        raise SaveError(f"tj.jit.save: a graph attribute of type {type(x).__name__} cannot "
                        "be saved")

    def value_type(self, v: Value) -> dict:
        out = {"dtype": v.dtype.name, "shape": [self.literal(d) for d in v.shape],
               "name": v.name}
        if isinstance(v.dtype, ListType):  # script mode: a list of tensors of one type
            elem = v.dtype.elem
            out["elem"] = None if elem is None else {
                "dtype": elem[0].name, "shape": [self.literal(d) for d in elem[1]]}
        return out

    def graph(self, g: Graph) -> dict:
        ids: dict = {}
        for v in g.inputs:
            ids[v] = len(ids)
        nodes = []
        for n in g.nodes:
            enc = {"op": n.op, "source": n.source, "grad_mode": n.grad_mode,
                   "inputs": [{"v": ids[x]} if isinstance(x, Value) else
                              {"lit": self.literal(x)} for x in n.inputs],
                   "attrs": {k: self.literal(a) for k, a in n.attrs.items()},
                   "outputs": [self.value_type(v) for v in n.outputs],
                   "regions": [self.graph(r) for r in n.regions]}
            for v in n.outputs:
                ids[v] = len(ids)
            nodes.append(enc)
        if g.mutations or g.size_outputs:
            raise SaveError("tj.jit.save: graphs that update their inputs in place or return "
                            "sizes are not saved yet")
        return {"name": g.name, "made_by": g.made_by, "symbols": g.symbols,
                "input_kinds": g.input_kinds, "inputs": [self.value_type(v) for v in g.inputs],
                "nodes": nodes, "outputs": [ids[v] for v in g.outputs],
                "notes": [str(n) for n in g.notes], "region": g.region}


# ---- decoding ------------------------------------------------------------------------
class _Reader:
    def __init__(self, arrays):
        self.arrays = arrays

    def array(self, key: str) -> np.ndarray:
        if key not in self.arrays:
            raise SaveError(f"tj.jit.load: the file lacks the array {key!r}")
        return np.array(self.arrays[key])

    def literal(self, x):
        if not isinstance(x, dict):
            if isinstance(x, list):
                raise SaveError("tj.jit.load: malformed literal")
            return x
        if "sym" in x:
            poly = None if x["poly"] is None else {
                tuple(_size_source(s) for s in m): int(c) for m, c in x["poly"]}
            return SymInt(int(x["hint"]), poly, None,
                          None if poly is not None else _size_source(x["sym"]))
        if len(x) != 1:
            raise SaveError("tj.jit.load: malformed literal")
        (kind, body), = x.items()
        if kind == "float":
            return float(body)
        if kind == "tuple":
            return tuple(self.literal(v) for v in body)
        if kind == "list":
            return [self.literal(v) for v in body]
        if kind == "slice":
            return slice(*[self.literal(v) for v in body])
        if kind == "ellipsis":
            return Ellipsis
        if kind == "dtype":
            return dt.as_dtype(body)
        if kind == "slot":
            return Slot(int(body))
        if kind == "array":
            return self.array(body)
        if kind == "scalar":
            return self.array(body)[()]
        if kind == "dict":
            return {k: self.literal(v) for k, v in body}
        if kind == "tensor":
            return _make(self.array(body))
        raise SaveError(f"tj.jit.load: unknown literal {kind!r}")

    def value(self, t: dict, producer=None) -> Value:
        if t["dtype"] == "list":
            elem = t.get("elem")
            dtype = ListType(None if elem is None else (
                dt.as_dtype(elem["dtype"]), tuple(self.literal(d) for d in elem["shape"])))
        else:
            dtype = dt.as_dtype(t["dtype"])
        return Value(dtype, tuple(self.literal(d) for d in t["shape"]), producer,
                     t.get("name", ""))

    def graph(self, enc: dict) -> Graph:
        g = Graph(enc["name"], made_by=enc.get("made_by", "load"),
                  symbols=dict(enc.get("symbols", {})),
                  input_kinds=list(enc.get("input_kinds", [])),
                  region=bool(enc.get("region", False)))
        values = [self.value(t) for t in enc["inputs"]]
        g.inputs = list(values)
        for n in enc["nodes"]:
            inputs = [values[x["v"]] if "v" in x else self.literal(x["lit"])
                      for x in n["inputs"]]
            # a node's source line is shown in generated code as a comment: one line only
            source = " ".join(str(n.get("source", "")).split())
            node = Node(str(n["op"]), inputs,
                        {str(k): self.literal(a) for k, a in n["attrs"].items()}, [], source)
            node.grad_mode = n.get("grad_mode", node.grad_mode)
            node.outputs = [self.value(t, node) for t in n["outputs"]]
            node.regions = [self.graph(r) for r in n.get("regions", [])]
            g.nodes.append(node)
            values += node.outputs
        g.outputs = [values[k] for k in enc["outputs"]]
        g.notes = [str(n) for n in enc.get("notes", [])]
        return g
