"""`tj.jit.save` / `tj.jit.load`: compiled programs without their Python source.

A traced function's traces are written as their optimised graphs (fused regions
included) with what their entry guards check of the inputs (dtypes, ranks, fixed
sizes, size relations), and the parameters and captured tensors they read. The file is
one `.npz` (no pickle: `np.load(allow_pickle=False)`), the graphs as JSON in it next to
the arrays, with a format version that loading checks; nothing in it is executed.

A loaded program runs its graphs on the numba backend (kernels come from the disk cache
when warm) and joins autograd as a traced call does: its compiled backward is derived
from the loaded graph, so gradients reach its parameters (`.named_parameters()`). What
it cannot do without the source is re-trace: inputs no saved trace accepts, and a value
guard that fails (the saved path branched on a tensor's value), raise an error that
says which guard.
"""
from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from .trace import TracedFunction
from ..ir.verifier import VerificationError
from ..tensor.tensor import _make, Tensor
from .compiled import CompiledGraph
from ..backends.guards import GuardMiss
from ..tensor.creation import tensor
from .serialize import SaveError, _Reader, _size_source, _Writer  # noqa: F401 (SaveError: tj.jit's)

FORMAT = "tracejit.program"
VERSION = 1
_KEY = "__tracejit_program__"


# ---- save ----------------------------------------------------------------------------
def save(obj, f) -> None:
    """Write a traced or scripted function or module (`tj.trace`, `tj.script`) to `f`:
    every trace of it, with its control flow."""
    if not isinstance(obj, TracedFunction):
        raise SaveError(f"tj.jit.save: expected a traced or scripted function or module "
                        f"(tj.trace, tj.script), got {type(obj).__name__}")
    if not obj.traces:
        raise SaveError("tj.jit.save: the program has no trace yet: call it once first")
    w = _Writer()
    traces, params, param_index = [], [], {}
    names = {(id(store), key): name for (store, key), name in obj._param_refs()}
    for tr in obj.traces:
        layout = _positional_layout(tr.in_spec, getattr(tr.guards, "arg_consts", {}))
        n_args = sum(1 for entry in layout if entry[0] == "t")
        single = _tensor_outputs(tr.out_spec, len(tr.graph.outputs))
        refs = []
        for store, key in tr.param_refs:
            name = names.get((id(store), key), str(key))
            if name not in param_index:
                p = store[key]
                param_index[name] = len(params)
                params.append({"name": name, "array": w.array(p._data),
                               "requires_grad": p.requires_grad})
            refs.append(name)
        traces.append({
            "graph": w.graph(tr.graph),
            "bindings": [list(b) for b in tr.bindings],
            "shape_guards": [[g.lhs, g.op, g.rhs, g.expected, g.where]
                             for g in tr.shape_guards],
            "args": [{"dtype": v.dtype.name, "rank": len(v.shape),
                      "fixed": [d if isinstance(d, int) else None for d in v.shape]}
                     for v in tr.graph.inputs[:n_args]],
            "params": refs,
            # per positional argument: a tensor, or a Python value the trace holds for
            "layout": [["t"] if e[0] == "t" else ["p", w.literal(e[1])] for e in layout],
            "captured": [w.array(t._data) for t in tr.captured],
            "outputs": "tensor" if single else "tuple",
        })
    meta = {"format": FORMAT, "version": VERSION, "name": getattr(obj, "__name__", "program"),
            "params": params, "traces": traces,
            # script mode: `n: int` arguments travel as 0-d int64 tensors (data, not guards)
            "int_params": sorted(getattr(obj, "_int_params", ()))}
    record = {_KEY: np.asarray(json.dumps(meta)), **w.arrays}
    if isinstance(f, (str, os.PathLike)):  # the path as given (np.savez would add .npz)
        with open(f, "wb") as out:
            np.savez(out, **record)
    else:
        np.savez(f, **record)


def _positional_layout(spec, consts: dict) -> list:
    """Per positional argument of a trace: ("t",) for a tensor, ("p", value) for a
    Python number, string, bool or None the trace was made with (it is guarded equal)."""
    try:
        (_, args), (_, kwargs) = spec[1]
        leaves, ok = args, not kwargs
    except (TypeError, ValueError, IndexError):
        ok, leaves = False, ()
    layout, tensors = [], 0
    for leaf in leaves if ok else ():
        if leaf == ("t", tensors):
            layout.append(("t",))
            tensors += 1
        elif isinstance(leaf, tuple) and len(leaf) == 2 and leaf[0] == "p" and \
                leaf[1] in consts and type(consts[leaf[1]]) in (bool, int, float, str,
                                                                  type(None)):
            layout.append(("p", consts[leaf[1]]))
        else:
            ok = False
    if not ok:
        raise SaveError("tj.jit.save: only traces called with positional arguments (tensors, "
                        "and numbers, strings, bools or None) are saved yet")
    return layout


def _tensor_outputs(spec, n: int) -> bool:
    """Whether the trace returns one tensor (else a tuple of them, in order)."""
    if spec == ("t", 0) and n == 1:
        return True
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] is tuple and \
            list(spec[1]) == [("t", k) for k in range(n)]:
        return False
    raise SaveError("tj.jit.save: only programs returning a tensor or a tuple of tensors "
                    "are saved yet")


# ---- load ----------------------------------------------------------------------------
def load(f) -> "LoadedFunction":
    """A program `tj.jit.save` wrote; refuses other files with a clear message."""
    try:
        with np.load(f, allow_pickle=False) as z:
            if _KEY not in z.files:
                raise SaveError("tj.jit.load: not a tracejit program (no program record "
                                "in the file)")
            meta = json.loads(str(z[_KEY]))
            arrays = {k: z[k] for k in z.files if k != _KEY}
    except SaveError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, json.JSONDecodeError) as err:
        raise SaveError(f"tj.jit.load: cannot read {f!r} as a saved program "
                        f"({type(err).__name__}: {err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SaveError("tj.jit.load: not a tracejit program")
    if meta.get("version") != VERSION:
        raise SaveError(f"tj.jit.load: the file is format version {meta.get('version')}; "
                        f"this tracejit reads version {VERSION}")
    try:
        reader = _Reader(arrays)
        params = {}
        for p in meta["params"]:
            t = _make(reader.array(p["array"]))
            params[p["name"]] = t.requires_grad_() if p["requires_grad"] else t
        traces = [LoadedTrace(t, reader, params) for t in meta["traces"]]
    except SaveError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, VerificationError) as err:
        raise SaveError(f"tj.jit.load: the program record is malformed "
                        f"({type(err).__name__}: {err})") from None
    ints = meta.get("int_params", [])
    if not isinstance(ints, list) or not all(isinstance(k, int) for k in ints):
        raise SaveError("tj.jit.load: the program record is malformed (int_params)")
    return LoadedFunction(meta.get("name", "program"), traces, frozenset(ints))


class LoadedTrace:
    """One saved trace: its graph compiled for calls, and what it checks of inputs."""

    def __init__(self, enc: dict, reader: _Reader, params: dict):
        graph = reader.graph(enc["graph"])
        graph.verify()
        self.bindings = [(int(i), int(d), _size_source(sym)) for i, d, sym in enc["bindings"]]
        self.shape_guards = [(_size_source(lhs), op, _size_source(rhs), bool(expected),
                              str(where)) for lhs, op, rhs, expected, where in
                             enc["shape_guards"]]
        self.args = enc["args"]
        self.layout = enc.get("layout") or [["t"]] * len(self.args)
        if sum(1 for e in self.layout if e[0] == "t") != len(self.args) or any(
                e[0] not in ("t", "p") for e in self.layout):
            raise SaveError("tj.jit.load: the program record is malformed (layout)")
        self.params = [(name, params[name]) for name in enc["params"]]
        self.captured = [_make(reader.array(k)) for k in enc["captured"]]
        self.single = enc["outputs"] == "tensor"
        self.compiled = CompiledGraph(graph, "numba", self.bindings)
        self.check = _relations(self.shape_guards)

    def _tensors(self, args: tuple):
        """The tensor arguments, or why the call does not fit this trace's arguments."""
        if len(args) != len(self.layout):
            return None, f"{len(self.layout)} arguments, got {len(args)}"
        tensors = []
        for k, (a, entry) in enumerate(zip(args, self.layout)):
            if entry[0] == "t":
                tensors.append(a)
                continue
            want = entry[1]
            if type(a) is not type(want) or a != want:
                return None, f"argument {k}: the trace holds for {want!r}, got {a!r}"
        return tensors, None

    def accepts(self, args: tuple) -> str | None:
        """None when these inputs pass the saved trace's entry checks, else why not."""
        args, why = self._tensors(args)
        if why is not None:
            return why
        for k, (a, want) in enumerate(zip(args, self.args)):
            if not isinstance(a, Tensor):
                return f"argument {k}: a tensor, got {type(a).__name__}"
            if a.dtype.name != want["dtype"] or a.ndim != want["rank"]:
                return (f"argument {k}: {want['dtype']} of rank {want['rank']}, got "
                        f"{a.dtype.name} of rank {a.ndim}")
            for d, size in enumerate(want["fixed"]):
                if size is not None and a._data.shape[d] != size:
                    return f"argument {k}: size {size} at dimension {d}, got {a._data.shape[d]}"
        env = {sym: args[i]._data.shape[d] for i, d, sym in self.bindings if i < len(args)}
        return self.check(env)

    def run(self, args: tuple):
        inputs = self._tensors(args)[0] + [t for _, t in self.params] + self.captured
        try:
            outs = self.compiled.call(inputs)
        except GuardMiss as miss:
            raise RuntimeError(
                f"tj.jit.load: the saved program read a tensor's value at "
                f"{miss.node.source or 'an unknown line'} and holds for the value it saw "
                f"then only ({miss.node.attrs.get('expected')!r}, now {miss.seen!r}); "
                "without the source it cannot trace the other path") from None
        return outs[0] if self.single else tuple(outs)


def _relations(guards: list):
    """A check of the saved size relations: None when they hold, else the first failing."""
    ops = {"==": lambda a, b: a == b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}
    compiled = []
    for lhs, op, rhs, expected, where in guards:
        if op not in ops:
            raise SaveError(f"tj.jit.load: unknown relation {op!r}")
        compiled.append((compile(lhs, "<size>", "eval"), op, compile(rhs, "<size>", "eval"),
                         expected, f"{lhs} {op} {rhs} is {expected} ({where})"))

    def check(env: dict) -> str | None:
        for lhs, op, rhs, expected, text in compiled:
            try:
                ok = ops[op](eval(lhs, {"__builtins__": {}}, env),  # noqa: S307 — sizes only
                             eval(rhs, {"__builtins__": {}}, env)) == expected  # noqa: S307
            except Exception:  # noqa: BLE001 — a symbol this call does not bind
                ok = False
            if not ok:
                return f"sizes: {text}"
        return None
    return check


class LoadedFunction:
    """A loaded program: call it like the traced function it was saved from."""

    def __init__(self, name: str, traces: list, int_params=frozenset()):
        self.__name__ = name
        self.traces = traces
        self._int_params = int_params

    def __call__(self, *args):
        if self._int_params:  # as the scripted program took them: a Python int as data
            args = tuple(tensor(a) if k in self._int_params and type(a) is int else a
                         for k, a in enumerate(args))
        reasons = []
        for tr in self.traces:
            why = tr.accepts(args)
            if why is None:
                return tr.run(args)
            reasons.append(why)
        raise RuntimeError(f"tj.jit.load: no saved trace of {self.__name__} accepts these "
                           f"inputs (without the source it cannot trace a new one): "
                           + "; ".join(reasons))

    def named_parameters(self):
        seen = set()
        for tr in self.traces:
            for name, t in tr.params:
                if name not in seen:
                    seen.add(name)
                    yield name, t

    def parameters(self):
        return [t for _, t in self.named_parameters()]

    @property
    def guards(self) -> list:
        out = []
        for tr in self.traces:
            for k, a in enumerate(tr.args):
                out.append(f"argument {k}: {a['dtype']}, rank {a['rank']}" + "".join(
                    f", size {s} at {d}" for d, s in enumerate(a["fixed"]) if s is not None))
            out += [f"sizes: {lhs} {op} {rhs} is {e}" for lhs, op, rhs, e, _ in
                    tr.shape_guards]
        return out
