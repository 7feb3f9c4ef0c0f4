"""Entry guards of a trace, compiled into one Python function.

A trace is reused for a call only if every assumption its capture made still
holds: each tensor input's type, dtype, rank, requires_grad and static sizes;
the size relations recorded as shape guards; non-tensor arguments; Python
scalars read from globals, closures and module attributes, and the contents of
containers read there; the functions, tensors and modules read there, by
identity. The checks are generated as straight-line Python source (a few
microseconds per call).
"""
from __future__ import annotations

import inspect
import re
import types
from dataclasses import dataclass

import numpy as np

from ..core.modes import STATE
from ..core.symbolic import symbols_in
from ..tensor.tensor import Tensor
from .pyvalues import SCALARS, Contents, held_as_contents, same, same_scalar, scalar_check

MISSING = object()


def _short(value) -> str:
    if isinstance(value, Tensor):
        return f"the tensor {value.dtype.short}{list(value.shape)} at {id(value):#x}"
    if isinstance(value, types.FunctionType):
        return f"the function {value.__qualname__} at {id(value):#x}"
    return f"the {type(value).__name__} object at {id(value):#x}"


@dataclass
class Guard:
    """One assumption, for people: what it checks and where it came from."""

    what: str
    where: str = ""

    def __str__(self) -> str:
        return f"{self.what}" + (f"   ({self.where})" if self.where else "")


class EntryGuards:
    def __init__(self, recorder, n_args: int, arg_consts: dict, pyreads: list,
                 grad_mode: bool = True, n_inputs: int | None = None,
                 types_from: int = 0, skip: frozenset = frozenset(), layout: bool = True):
        """`n_inputs`: check only the first inputs and the size relations among them;
        `types_from`: the types of the inputs before this index are known (checked by the
        caller); `skip`: size relations (by source) and pinned sizes (by (input, dim))
        known to hold already; `layout`: check requires_grad and contiguity (a compiled
        backward reads neither of its output gradients)."""
        self.guards: list[Guard] = []
        self.arg_consts = dict(arg_consts)  # the non-tensor arguments' values, checked
        self.n_relations = 0                         # size checks (static sizes, relations)
        ns = {"Tensor": Tensor, "MISSING": MISSING, "NDARRAY": np.ndarray}
        graph = recorder.graph
        names = recorder.letters
        n_inputs = len(graph.inputs) if n_inputs is None else n_inputs
        bindings = [b for b in recorder.bindings if b[0] < n_inputs]
        bound = {sym for _, _, sym in bindings}
        lines = []
        for i, (t, v) in enumerate(zip(recorder.inputs[:n_inputs], graph.inputs)):
            a, d = f"a{i}", f"d{i}"
            ns[f"DT{i}"] = t._data.dtype
            label = v.name
            # the layout too: eager code decides on it (`view` of a transposed tensor
            # raises, `reshape` copies instead of aliasing)
            on_host = type(t._data) is np.ndarray
            contiguous = bool(t._data.flags.c_contiguous) if on_host else \
                bool(t._data.is_c_contiguous())
            # `type(d) is NDARRAY`: the input is on the CPU as when recorded (a CUDA
            # tensor's storage is a device array: a trace made on CUDA checks that type)
            if on_host:
                array_type = "NDARRAY"
            else:
                ns[f"AT{i}"] = type(t._data)
                array_type = f"AT{i}"
            cond = (f"isinstance({a}, Tensor) and type({d}) is {array_type} and "
                    f"{d}.dtype is DT{i} and {d}.ndim == {t.ndim}")
            what = f"{label}: {t.dtype.name} on {t.device}, rank {t.ndim}"
            if layout:
                cond += (f" and {a}._rg is {t.requires_grad} and " + (
                    f"{d}.flags.c_contiguous is {contiguous}" if on_host else
                    f"{d}.is_c_contiguous() is {contiguous}"))
                what += (f", requires_grad={t.requires_grad}, "
                         f"{'contiguous' if contiguous else 'not contiguous'}")
            lines.append((f"{d} = {a}._data if isinstance({a}, Tensor) else None", None))
            if i >= types_from:
                self._add(lines, cond, Guard(what))
            for dim, size in enumerate(v.shape):
                if isinstance(size, int) and (i, dim) not in skip:
                    self._add(lines, f"{d}.shape[{dim}] == {size}",
                              Guard(f"{label}.shape[{dim}] == {size}"))
                    self.n_relations += 1
        ns["STATE"] = STATE
        if grad_mode:
            ns["MODES"] = recorder.modes  # one interned frame: one identity check
            self._add(lines, "STATE.modes is MODES", Guard(recorder.modes.describe()))
        for index, dim, sym in bindings:
            lines.append((f"{sym} = d{index}.shape[{dim}]", None))
        # a relation reads as the input dims it relates (`x.shape[1] == 784`): the graph
        # may show no symbol for a size its guards fix
        read_at = dict(names)
        for index, dim, sym in reversed(bindings):
            read_at[sym] = f"{graph.inputs[index].name}.shape[{dim}]"
        for g in recorder.shape_guards.values():
            if g.source not in skip and symbols_in(g.source) <= bound:
                self._add(lines, f"(({g.source}) == {g.expected!r})",
                          Guard(g.describe(read_at), g.where))
                self.n_relations += 1
        for i, value in arg_consts.items():
            ns[f"C{i}"] = value
            if isinstance(value, SCALARS):
                ns["SAME_SCALAR"] = same_scalar
                self._add(lines, scalar_check(f"p{i}", f"C{i}", value),
                          Guard(f"argument {i} == {value!r}"))
            elif held_as_contents(value):  # a config object, a set, a numpy scalar
                snap = Contents(value)
                ns["SAME"], ns[f"C{i}"] = same, snap.snapshot
                self._add(lines, f"SAME(p{i}, C{i})", Guard(f"argument {i} holds {snap.shown}"))
            else:  # another object: the same one
                self._add(lines, f"p{i} is C{i}", Guard(f"argument {i} is {_short(value)}"))
        for k, (what, (kind, holder, name), value) in enumerate(pyreads):
            ns[f"H{k}"], ns[f"V{k}"] = holder, value
            if kind == "cell":
                get = f"H{k}.cell_contents"
            elif kind == "getattr":  # a function's defaults, a class's forward
                get = f"getattr(H{k}, {name!r}, MISSING)"
            elif kind == "item" and not isinstance(holder, dict):  # a list element
                get = f"(H{k}[{name}] if len(H{k}) > {name} else MISSING)"
            else:
                get = f"H{k}.get({name!r}, MISSING)"
            if isinstance(value, SCALARS):
                ns["SAME_SCALAR"] = same_scalar
                self._add(lines, scalar_check(get, f"V{k}", value),
                          Guard(f"{what} == {value!r}"))
            elif isinstance(value, Contents):  # a container: what it holds now
                ns["SAME"], ns[f"V{k}"] = same, value.snapshot
                self._add(lines, f"SAME({get}, V{k})", Guard(f"{what} holds {value.shown}"))
            else:  # a tensor, module or function read from outside: the same object
                self._add(lines, f"{get} is V{k}", Guard(f"{what} is {_short(value)}"))
        params = ", ".join([f"a{i}" for i in range(n_inputs)] +
                           [f"p{i}" for i in range(n_args)])
        kept, needed = [], set()
        for stmt, guard in reversed(lines):  # assignments only where a check reads them
            if guard is None:
                name, value = stmt.split(" = ", 1)
                if name not in needed:
                    continue
                kept.append(f"    {stmt}")
                needed |= set(re.findall(r"\b[ds]\d+\b", value))
            else:
                kept.append(f"    if not ({stmt}): return False")
                needed |= set(re.findall(r"\b[ds]\d+\b", stmt))
        body = [f"def check({params}):"] + kept[::-1]
        body.append("    return True")
        self.source = "\n".join(body)
        self._filename = f"<guards of {graph.name}>"
        exec(compile(self.source, self._filename, "exec"), ns)  # noqa: S102
        self.check = ns["check"]
        self._ns = ns
        self._lines = lines

    # ---- kept on disk by the backward cache (capture/backward_cache.py) ----------------
    _PLAIN = {"Tensor", "MISSING", "NDARRAY", "STATE"}

    def spec(self) -> dict | None:
        """What rebuilds these guards without their recorder, as JSON; None where they
        check Python objects by identity (arguments, globals, device array types), which
        another process does not have."""
        dtypes = {}
        for name, value in self._ns.items():
            if name in self._PLAIN or name in ("__builtins__", "check"):
                continue
            if not (name.startswith("DT") and isinstance(value, np.dtype) and
                    np.dtype(value.str) is value):
                return None
            dtypes[name] = value.str
        return {"source": self.source, "filename": self._filename, "dtypes": dtypes,
                "n_relations": self.n_relations,
                "lines": [[stmt, None if g is None else [g.what, g.where]]
                          for stmt, g in self._lines]}

    @classmethod
    def from_spec(cls, spec: dict) -> "EntryGuards":
        self = cls.__new__(cls)
        ns = {"Tensor": Tensor, "MISSING": MISSING, "NDARRAY": np.ndarray, "STATE": STATE}
        ns.update({name: np.dtype(s) for name, s in spec["dtypes"].items()})
        self._lines = [(stmt, None if g is None else Guard(*g)) for stmt, g in spec["lines"]]
        self.guards = [g for _, g in self._lines if g is not None]
        self.arg_consts, self.n_relations = {}, int(spec["n_relations"])
        self.source, self._filename = spec["source"], spec["filename"]
        exec(compile(self.source, self._filename, "exec"), ns)  # noqa: S102
        self.check, self._ns = ns["check"], ns
        return self

    def _add(self, lines, cond: str, guard: Guard) -> None:
        lines.append((cond, guard))
        self.guards.append(guard)

    def first_failure(self, args) -> Guard | None:
        """The first guard these arguments fail (slow; for reports only)."""
        env = dict(self._ns)
        env.update(self._arg_env(args))
        for stmt, guard in self._lines:
            if guard is None:
                try:
                    exec(stmt, env)  # noqa: S102
                except Exception:  # noqa: BLE001
                    continue
            else:
                try:
                    ok = eval(stmt, env)  # noqa: S307
                except Exception:  # noqa: BLE001
                    ok = False
                if not ok:
                    return guard
        return None

    def _arg_env(self, args) -> dict:
        params = list(inspect.signature(self.check).parameters)
        return dict(zip(params, args))
