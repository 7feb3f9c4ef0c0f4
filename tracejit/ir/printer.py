"""Deterministic text dumps of IR graphs, and graphviz `to_dot`.

Values are numbered at print time (%0, %1, ... in order of definition; inputs
keep their names), symbols print by their display names (B, T, ...), so two
traces of the same program print identically.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .structural import BIND, CONTROL, FUSED, GUARD, IF, LIST_LEN, LIST_STACK, RAISE, SIZE
from .values import Value
from ..core.symbolic import SymInt, rename_symbols

if TYPE_CHECKING:  # (the graph prints through this module)
    from .graph import Graph


def _dim(d, names: dict) -> str:
    if isinstance(d, SymInt):
        return rename_symbols(d.source(), names).replace(" ", "")
    return str(d)


def format_type(v: Value, names: dict) -> str:
    if v.dtype.short == "list":
        elem = v.dtype.elem
        return "list[" + ("?" if elem is None else f"{elem[0].short}[" + ",".join(
            _dim(d, names) for d in elem[1]) + "]") + "]"
    return f"{v.dtype.short}[{','.join(_dim(d, names) for d in v.shape)}]"


class _Namer:
    def __init__(self, graph: Graph, prefix: str = ""):
        self.prefix = prefix
        self.names: dict = {}
        used = set()
        for v in graph.inputs:
            base = v.name or "in"
            name, k = base, 1
            while name in used:
                name, k = f"{base}_{k}", k + 1
            used.add(name)
            self.names[v] = name
        self.counter = 0

    def param(self, v: Value) -> str:
        """A region's block argument: named by its hint, numbered to stay unique."""
        base = v.name or "arg"
        taken = set(self.names.values())
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        self.names[v] = name
        return name

    def define(self, v: Value) -> str:
        self.names[v] = f"{self.prefix}{self.counter}"
        self.counter += 1
        return "%" + self.names[v]

    def ref(self, x, syms: dict) -> str:
        if isinstance(x, Value):
            return "%" + self.names.get(x, "?")
        if isinstance(x, SymInt):
            return _dim(x, syms)
        return _literal(x, syms)


def _literal(x, syms) -> str:
    if isinstance(x, SymInt):
        return _dim(x, syms)
    if isinstance(x, tuple):
        return "(" + ", ".join(_literal(v, syms) for v in x) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, list):
        return "[" + ", ".join(_literal(v, syms) for v in x) + "]"
    if isinstance(x, slice):
        parts = [_literal(v, syms) if v is not None else "" for v in (x.start, x.stop, x.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if x.step is not None else "")
    if x is Ellipsis:
        return "..."
    if hasattr(x, "short") and hasattr(x, "np"):
        return x.name
    if hasattr(x, "shape") and hasattr(x, "tolist"):
        return f"array{list(x.shape)}"
    return repr(x)


def _attrs(attrs: dict, syms: dict) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join(f"{k}={_literal(v, syms)}" for k, v in attrs.items()) + "}"


def format_graph(graph: Graph, sources: bool = False) -> str:
    """The dump: a header naming the pass that made the graph, then one line per node;
    branches and loops print their regions indented under them."""
    syms = graph.symbols
    namer = _Namer(graph)
    sig = ", ".join(f"%{namer.names[v]}: {format_type(v, syms)}" for v in graph.inputs)
    outs = ", ".join(format_type(v, syms) for v in graph.outputs)
    lines = [f"# graph {graph.name}  [after: {graph.made_by} · {_count(graph)} nodes]",
             f"graph({sig}) -> ({outs}):"]
    _body_lines(graph, namer, syms, sources, "  ", lines)
    for target, value in graph.mutations:
        lines.append(f"  mutate %{namer.names[target]} <- {namer.ref(value, syms)}")
    lines.append("  return " + ", ".join(namer.ref(v, syms) for v in graph.outputs))
    return "\n".join(lines)


def _count(graph: Graph) -> str:
    """Nodes at the top level, and in regions of branches and loops when there are any."""
    inner = sum(1 for _ in graph.walk()) - len(graph.nodes)
    return f"{len(graph.nodes)}" + (f" + {inner} in regions" if inner else "")


def _body_lines(graph: Graph, namer, syms: dict, sources: bool, indent: str, lines: list):
    for node in graph.nodes:
        args = ", ".join(namer.ref(x, syms) for x in node.inputs)
        defs = ", ".join(f"{namer.define(v)}: {format_type(v, syms)}" for v in node.outputs)
        if node.op == GUARD:
            expected = _literal(node.attrs["expected"], syms)
            line = f"{indent}guard[{node.attrs['kind']}]({args}) == {expected}"
        elif node.op == FUSED:
            lines.append(f"{indent}{defs} = fused[{node.attrs['kind']}]({args}) {{")
            lines += _region_lines(node.regions[0], syms, sources, indent + "    ")
            continue
        elif node.op in CONTROL:
            head = f"{defs} = " if defs else ""
            sizes = node.attrs.get("sizes") or node.attrs.get("carried_sizes") or ()
            if sizes:
                head += ", ".join(_dim(_sym(s), syms) for s in sizes) + " := "
            line = f"{indent}{head}{node.op}({args}){_attrs(_control_attrs(node), syms)}"
            if sources and node.source:
                line += f"  # {node.source}"
            lines.append(line)
            names = ("then", "else") if node.op == IF else (
                ("cond", "body") if node.attrs.get("has_cond") else ("body",))
            for name, region in zip(names, node.regions):
                params = ", ".join(f"%{namer.param(v)}: {format_type(v, syms)}"
                                   for v in region.inputs)
                lines.append(f"{indent}  {name}({params}):")
                _body_lines(region, namer, syms, sources, indent + "    ", lines)
                yields = [namer.ref(v, syms) for v in region.outputs] + [
                    _dim(x, syms) for x in region.size_outputs]
                lines.append(f"{indent}    yield " + ", ".join(yields))
            continue
        elif node.op == BIND:
            line = f"{indent}{_dim(_sym(node.attrs['symbol']), syms)} := size({args})"
        elif node.op == SIZE:
            a = node.attrs
            expr = _literal(a["lhs"], syms) + (
                f" {a['op']} {_literal(a['rhs'], syms)}" if a["op"] else "")
            line = f"{indent}{defs} = size({expr})"
        elif node.op == RAISE:
            line = f"{indent}raise {node.attrs['exc']!r}"
        elif node.op in (LIST_LEN, LIST_STACK) and "symbol" in node.attrs:
            bound = _dim(_sym(node.attrs["symbol"]), syms)
            rest = {k: v for k, v in node.attrs.items() if k != "symbol"}
            line = f"{indent}{defs + ' = ' if defs else ''}{node.op}({args})" \
                   f"{_attrs(rest, syms)}  # binds {bound}"
        else:
            line = f"{indent}{defs} = {node.op}({args}){_attrs(node.attrs, syms)}"
        if sources and node.source:
            line += f"  # {node.source}"
        lines.append(line)


def _sym(name: str):
    return SymInt(0, {(name,): 1}, None)


def _control_attrs(node) -> dict:
    if node.op == IF:
        return {}
    a = node.attrs
    out = {}
    if a.get("index") is not None:
        out["index"] = _sym(a["index"])
    if a.get("stop") is not None:
        out["range"] = slice(a["start"], a["stop"], a["step"] if a["step"] != 1 else None)
    if a.get("carried_sizes"):
        out["init"] = tuple(a["sizes_init"])
    return out


def _region_lines(region: Graph, syms: dict, sources: bool, indent: str = "      ") -> list:
    """A fused node's ops, indented under it; region values are %r0, %r1, ...
    and its inputs %in0, %in1, ... in the order of the fused node's arguments."""
    namer = _Namer(region, prefix="r")
    lines = []
    for node in region.nodes:
        args = ", ".join(namer.ref(x, syms) for x in node.inputs)
        defs = ", ".join(f"{namer.define(v)}: {format_type(v, syms)}" for v in node.outputs)
        line = f"{indent}{defs} = {node.op}({args}){_attrs(node.attrs, syms)}"
        if sources and node.source:
            line += f"  # {node.source}"
        lines.append(line)
    lines.append(f"{indent}yield " + ", ".join(namer.ref(v, syms) for v in region.outputs) + " }")
    return lines


def to_dot(graph: Graph) -> str:
    """Graphviz source: one box per node, edges along values."""
    syms = graph.symbols
    namer = _Namer(graph)
    lines = [f'digraph "{graph.name}" {{', "  node [shape=box, fontname=monospace];"]
    ids = {}
    for i, v in enumerate(graph.inputs):
        ids[v] = f"in{i}"
        lines.append(f'  in{i} [label="{namer.names[v]}\\n{format_type(v, syms)}", shape=ellipse];')
    for k, node in enumerate(graph.nodes):
        label = node.op if node.op not in (GUARD, FUSED) else \
            f"{node.op}[{node.attrs['kind']}]" + (
                "\\n" + " ".join(n.op for n in node.regions[0].nodes) if node.regions else "")
        types = ", ".join(format_type(v, syms) for v in node.outputs)
        lines.append(f'  n{k} [label="{label}\\n{types}"];')
        for x in node.inputs:
            if isinstance(x, Value) and x in ids:
                lines.append(f"  {ids[x]} -> n{k};")
        for v in node.outputs:
            ids[v] = f"n{k}"
    for j, v in enumerate(graph.outputs):
        lines.append(f'  out{j} [label="output {j}", shape=ellipse];')
        if v in ids:
            lines.append(f"  {ids[v]} -> out{j};")
    lines.append("}")
    return "\n".join(lines)
