"""Constant folding: ops whose inputs are all known become `constant` nodes.

Only small results are folded (a large `zeros` stays a creation op, so the
graph does not carry big arrays)."""
from __future__ import annotations

import numpy as np

from ...ops import OPS
from ...ops.rules import run_on_arrays
from ..effects import foldable
from ..graph import Graph, Value
from ...core.symbolic import has_sym
from .rewrite import Builder

MAX_FOLDED_ELEMENTS = 4096


def fold_constants(graph: Graph) -> Graph:
    b = Builder(graph, "fold_constants", recurse=fold_constants)
    known: dict = {}  # new Value -> ndarray
    for node in graph.nodes:
        inputs = [b.get(x) for x in node.inputs]
        pure = foldable(node)
        concrete = not has_sym(tuple(node.attrs.values())) and not has_sym(tuple(inputs))
        known_inputs = all(not isinstance(x, Value) or x in known for x in inputs)
        if pure and concrete and known_inputs:
            out = node.outputs[0]
            size = int(np.prod([int(d) for d in out.shape])) if out.shape else 1
            if size <= MAX_FOLDED_ELEMENTS:
                args = [known[x] if isinstance(x, Value) else x for x in inputs]
                value = run_on_arrays(OPS[node.op], args, node.attrs)
                new = b.emit("constant", [], {"value": np.array(value, copy=True)},
                             [(out.dtype, out.shape)], node)
                b.map[out] = new.outputs[0]
                known[new.outputs[0]] = value
                continue
        new = b.copy(node)
        if node.op == "constant":
            known[new.outputs[0]] = node.attrs["value"]
    return b.finish()
