"""Graphs from their dumps: `parse_graph(format_graph(g))` is a graph that prints as `g`.

So a pass is tested on IR written by hand, the way its effect reads in a dump:

    g = parse_graph('''
    graph(%x: f32[B]) -> (f32[B]):
      %0: f32[B] = mul(%x, 2)
      %1: f32[B] = mul(%x, 2)
      %2: f32[B] = add(%0, %1)
      return %2''')
    cse(g)   # one mul left

The dump format (ir/printer.py) is read back for straight-line graphs: op-table nodes
with their attributes, fused kernels and their regions, value guards, in-place updates
of inputs (`mutate`) and a node's source line (`# file:line`). Sizes are symbols by
their printed names (`B`, `T`), each given a hint (the size a decision falls back on):
`hints={"B": 32}`, 2 by default. What a dump does not hold raises ParseError naming the
line: an array attribute prints as its shape only (`array[2, 3]`), and branches, loops
and lists print without the attributes that run them (which inputs a loop carries, a
list's element bindings).
"""
from __future__ import annotations

import ast
import re

from ..core import dtypes as dt
from ..core.symbolic import SymInt
from ..ops.indexing import Slot
from .graph import FUSED, GUARD, SCRIPT_OPS, Graph, ListType, Value

DEFAULT_HINT = 2


class ParseError(ValueError):
    """Text that is not a graph dump this parser reads: says which line and why."""


def parse_graph(text: str, hints: dict | None = None) -> Graph:
    """The graph a dump describes (see the module docstring)."""
    return _Parser(text, hints or {}).graph()


# ---- the text: lines, and splitting at top-level commas ---------------------------------
_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _top_level(text: str):
    """(index, character, bracket depth) of each character of `text` outside strings."""
    depth, quote, skip = 0, None, False
    for i, c in enumerate(text):
        if skip:
            skip = False
        elif quote:
            skip = c == "\\"
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        else:
            if c in ")]}":
                depth -= 1
            yield i, c, depth
            if c in _CLOSE:
                depth += 1


def _split(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` where no bracket or string is open (parts stripped)."""
    parts, start = [], 0
    for i, c, depth in _top_level(text):
        if c == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    if last or parts:
        parts.append(last)
    return parts


def _strip_comment(line: str) -> tuple[str, str]:
    """(the line without a trailing `# ...`, the comment) where the # is outside strings."""
    for i, c, _ in _top_level(line):
        if c == "#":
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


_HEADER = re.compile(r"#\s*graph\s+(?P<name>\S+)\s+\[after:\s*(?P<made_by>[^·\]]+?)\s*(·.*)?\]")
_SIGNATURE = re.compile(r"graph\((?P<params>.*)\)\s*->\s*\((?P<outs>.*)\):\s*$")
_DEF = re.compile(r"%(?P<name>[\w.]+)\s*:\s*(?P<type>.+)")
_NODE = re.compile(r"(?P<defs>.*?)\s*=\s*(?P<op>[a-z_][\w]*)(\[(?P<kind>\w+)\])?\((?P<args>.*)\)"
                   r"(?P<attrs>\s*\{.*\})?\s*(?P<open>\{)?$")
_GUARD = re.compile(r"guard\[(?P<kind>\w+)\]\((?P<arg>%[\w.]+)\)\s*==\s*(?P<expected>.+)$")


class _Parser:
    def __init__(self, text: str, hints: dict):
        self.lines = [(k + 1, line) for k, line in enumerate(text.splitlines())
                      if line.strip()]
        self.hints = hints
        self.symbols: dict = {}
        self.pos = 0

    def fail(self, lineno: int, why: str):
        raise ParseError(f"line {lineno}: {why}")

    # ---- sizes and types ---------------------------------------------------------------
    def symbol(self, name: str) -> SymInt:
        if name not in self.symbols:
            self.symbols[name] = SymInt.symbol(name, int(self.hints.get(name, DEFAULT_HINT)),
                                               None)
        return self.symbols[name]

    def size(self, text: str, lineno: int):
        """An int or a size expression over symbols (`B`, `2*T+1`)."""
        text = text.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            self.fail(lineno, f"not a size: {text!r}")
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant,
                   ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.Pow)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        if not all(isinstance(n, allowed) or n in calls for n in ast.walk(tree)) or any(
                not isinstance(c.func, ast.Name) or c.func.id != "abs" or c.keywords
                for c in calls):
            self.fail(lineno, f"not a size expression: {text!r}")
        names.discard("abs")
        return eval(compile(tree, "<size>", "eval"),  # noqa: S307 — arithmetic and abs
                    {"__builtins__": {}, "abs": abs}, {n: self.symbol(n) for n in names})

    def dtype(self, short: str, lineno: int):
        if short == "bf16":
            return dt.bfloat16_dtype()
        try:
            return dt.as_dtype(short)
        except (TypeError, KeyError, ValueError):
            self.fail(lineno, f"unknown dtype {short!r}")

    def type(self, text: str, lineno: int) -> tuple:
        """(dtype, shape) of `f32[B,784]`, or (ListType, ()) of `list[f32[B]]`."""
        text = text.strip()
        m = re.fullmatch(r"list\[(.*)\]", text)
        if m:
            if m.group(1) == "?":
                return ListType(), ()
            elem = self.type(m.group(1), lineno)
            return ListType((elem[0], elem[1])), ()
        m = re.fullmatch(r"(\w+)\[(.*)\]", text)
        if not m:
            self.fail(lineno, f"not a type: {text!r}")
        shape = tuple(self.size(d, lineno) for d in _split(m.group(2))) if m.group(2) else ()
        return self.dtype(m.group(1), lineno), shape

    # ---- operands and attribute values ------------------------------------------------
    def value(self, text: str, lineno: int):
        text = text.strip()
        if text.startswith("%"):
            v = self.env.get(text[1:])
            if v is None:
                self.fail(lineno, f"{text} is not defined above")
            return v
        return self.literal(text, lineno)

    def literal(self, text: str, lineno: int):
        text = text.strip()
        if text.startswith("array["):
            self.fail(lineno, f"an array attribute ({text}) prints without its values")
        items = _split(text[1:-1]) if text[:1] in "([" and self._closes_at_end(text) else None
        if items is not None and (text[0] == "[" or not items or len(items) > 1):
            # a list, or a tuple: `()`, `(3,)`, `(1, 2)` (a parenthesised size is not one)
            if text[0] == "(":
                if items and items[-1] == "":
                    items = items[:-1]  # a one-element tuple: `(3,)`
                return tuple(self.literal(t, lineno) for t in items)
            return [self.literal(t, lineno) for t in items]
        parts = _split(text, ":")
        if len(parts) > 1:  # a slice: `1:`, `:n`, `::2`
            if len(parts) > 3:
                self.fail(lineno, f"not a slice: {text!r}")
            bounds = [None if p == "" else self.literal(p, lineno) for p in parts]
            return slice(*(bounds + [None] * (3 - len(bounds))))
        if text == "...":
            return Ellipsis
        slot = re.fullmatch(r"%idx(\d+)", text)
        if slot:  # an index template's k-th tensor operand (ops/indexing.py)
            return Slot(int(slot.group(1)))
        if text in ("inf", "-inf", "nan"):  # how repr writes them
            return float(text)
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            pass
        if re.fullmatch(r"[A-Za-z_]\w*", text):
            try:
                return dt.as_dtype(text) if text != "bfloat16" else dt.bfloat16_dtype()
            except (TypeError, KeyError, ValueError, AttributeError):
                pass
        return self.size(text, lineno)

    @staticmethod
    def _closes_at_end(text: str) -> bool:
        """Whether the bracket opening `text` is the one its last character closes."""
        for i, c, depth in _top_level(text):
            if c in ")]}" and depth == 0:
                return i == len(text) - 1
        return False

    def attrs(self, text: str, lineno: int) -> dict:
        text = text.strip()
        if not text:
            return {}
        out = {}
        for item in _split(text[1:-1]):
            key, eq, val = item.partition("=")
            if not eq or not key.strip().isidentifier():
                self.fail(lineno, f"not an attribute: {item!r}")
            out[key.strip()] = self.literal(val, lineno)
        return out

    # ---- lines -----------------------------------------------------------------------
    def next_line(self):
        if self.pos >= len(self.lines):
            raise ParseError("the dump ends before its `return`")
        line = self.lines[self.pos]
        self.pos += 1
        return line

    def graph(self) -> Graph:
        name, made_by = "parsed", "trace"
        lineno, line = self.next_line()
        m = _HEADER.match(line.strip())
        if m:
            name, made_by = m.group("name"), m.group("made_by").strip()
            lineno, line = self.next_line()
        m = _SIGNATURE.match(line.strip())
        if not m:
            self.fail(lineno, "expected `graph(%name: type, ...) -> (types):`")
        g = Graph(name, made_by=made_by)
        self.env: dict = {}
        for param in _split(m.group("params")):
            d = _DEF.fullmatch(param)
            if not d:
                self.fail(lineno, f"not a parameter: {param!r}")
            dtype, shape = self.type(d.group("type"), lineno)
            v = Value(dtype, shape, None, d.group("name"))
            g.inputs.append(v)
            g.input_kinds.append("arg")
            self.env[d.group("name")] = v
        out_types = [self.type(t, lineno) for t in _split(m.group("outs"))]
        while True:
            lineno, raw = self.next_line()
            line, comment = _strip_comment(raw.strip())
            if line.startswith("return"):
                rest = line[len("return"):].strip()
                g.outputs = [self.value(t, lineno) for t in _split(rest)] if rest else []
                break
            if line.startswith("mutate "):
                target, arrow, value = line[len("mutate "):].partition("<-")
                if not arrow:
                    self.fail(lineno, "expected `mutate %input <- %value`")
                g.mutations.append((self.value(target, lineno), self.value(value, lineno)))
                continue
            self.node(g, line, comment, lineno)
        if len(out_types) != len(g.outputs):
            self.fail(lineno, f"the signature names {len(out_types)} outputs, the return "
                              f"{len(g.outputs)}")
        for v, (dtype, shape) in zip(g.outputs, out_types):
            if v.dtype is not dtype or not _same_shape(v.shape, shape):
                self.fail(lineno, "an output's type differs from the signature's")
        g.symbols = {s: s for s in self.symbols}
        return g

    def node(self, g: Graph, line: str, comment: str, lineno: int) -> None:
        m = _GUARD.match(line)
        if m:
            expected = self.literal(m.group("expected"), lineno)
            node = g.add_node(GUARD, [self.value(m.group("arg"), lineno)],
                              {"kind": m.group("kind"), "expected": expected}, [], comment)
            return
        m = _NODE.match(line)
        if not m or ":=" in line:
            self.fail(lineno, f"not a node: {line!r}")
        op = m.group("op")
        if op in SCRIPT_OPS:
            self.fail(lineno, f"`{op}` nodes (branches, loops, sizes from data, lists) are "
                              "not read back: their dump lacks what runs them")
        defs = []
        for d in _split(m.group("defs")):
            dm = _DEF.fullmatch(d)
            if not dm:
                self.fail(lineno, f"not a definition: {d!r}")
            defs.append((dm.group("name"), self.type(dm.group("type"), lineno)))
        args = [self.value(a, lineno) for a in _split(m.group("args"))]
        attrs = self.attrs(m.group("attrs") or "", lineno)
        if op == FUSED:
            if not m.group("open") or m.group("attrs"):
                self.fail(lineno, "a fused node's region opens with `{` on its line")
            attrs = {"kind": m.group("kind")}
            region = self.region(args, lineno)
        elif m.group("kind") or m.group("open"):
            self.fail(lineno, f"only fused nodes have a [kind] and a region, not {op}")
        node = g.add_node(op, args, attrs, [t for _, t in defs], comment)
        if op == FUSED:
            node.regions = [region]
        for (name, _), v in zip(defs, node.outputs):
            if name in self.env:
                self.fail(lineno, f"%{name} is defined twice")
            self.env[name] = v

    def region(self, args: list, lineno: int) -> Graph:
        """A fused node's region: its inputs %in0, %in1, ... are the node's operands."""
        outer = self.env
        region = Graph("region")
        self.env = {}
        for k, a in enumerate(args):
            if not isinstance(a, Value):
                self.fail(lineno, "a fused node's operands are values")
            v = Value(a.dtype, a.shape, None, f"in{k}")
            region.inputs.append(v)
            self.env[f"in{k}"] = v
        while True:
            lineno, raw = self.next_line()
            line, comment = _strip_comment(raw.strip())
            if line.startswith("yield"):
                rest = line[len("yield"):].strip()
                if not rest.endswith("}"):
                    self.fail(lineno, "a fused region ends with `yield ... }`")
                region.outputs = [self.value(t, lineno) for t in _split(rest[:-1])]
                break
            self.node(region, line, comment, lineno)
        self.env = outer
        return region


def _same_shape(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        (x.source() if isinstance(x, SymInt) else x) == (y.source() if isinstance(y, SymInt)
                                                          else y) for x, y in zip(a, b))
