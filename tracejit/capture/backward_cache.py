"""The backward cache: partitioned joint graphs kept on disk between processes.

Deriving a trace's compiled backward (autodiff.BackwardTrace) replays the forward graph
through eager autograd under a recorder, partitions the joint graph and runs the pass
pipeline on both parts: 25-35 ms of the MLP benchmark's warm start, every start, for the
same result. What it computes depends only on the forward graph, on the inputs' types
(dtype, shape, strides, requires_grad), on the size facts the forward trace's guards
hold (bindings and shape guards), on the autocast state and on tracejit's own code; so
those, hashed (with numpy's and Python's versions, for safety), are the key, and the
value is everything the derivation made: both parts as recorded and as optimised (in
`tj.jit.save`'s graph encoding), the pass summaries, the bindings and the entry guards'
generated source.

A hit skips the derivation; the host programs and kernels are then made from the loaded
graphs as from derived ones (kernels come from the kernel cache). What is not kept:
graphs with array constants of more than ARRAY_BYTES in all (or of a dtype numpy's
own format cannot name), in-place updates or sizes as outputs, guards that check Python
objects by identity, and anything on CUDA (`key` returns None and the
derivation runs). The files live in the kernel cache folder, with its rules (a folder
only its owner can write; TRACEJIT_DISABLE_CACHE=1 turns both off): loading an entry runs
its guard source, as loading a kernel runs its module. An entry's file starts with the
SHA-256 digest of the rest: a damaged entry (a flipped bit that still decodes, a constant
2.0 read as 3.0) fails it and, like an unreadable one, is a miss, and is written again.
`TRACEJIT_LOG=passes` (which prints every pass) bypasses it.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from ..core.log import enabled
from ..backends import registry as backends
from ..core.modes import STATE
from ..runtime.kernel_cache import atomic_write_bytes, cache_dir
from .serialize import SaveError, _Reader, _Writer

FORMAT = "tracejit.backward"
VERSION = 2
ARRAY_BYTES = 16 << 20  # array constants kept in an entry, at most (a GPT's causal mask)
_FINGERPRINT: list = []


def _code_fingerprint() -> str:
    """tracejit's source files, by path, size and modification time (once per process)."""
    if not _FINGERPRINT:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        stack = [root]
        while stack:
            folder = stack.pop()
            with os.scandir(folder) as entries:
                for e in sorted(entries, key=lambda e: e.name):
                    if e.is_dir() and e.name != "__pycache__":
                        stack.append(e.path)
                    elif e.name.endswith(".py"):
                        st = e.stat()
                        h.update(f"{e.path}:{st.st_size}:{st.st_mtime_ns};".encode())
        _FINGERPRINT.append(h.hexdigest())
    return _FINGERPRINT[0]


def key(forward, inputs: list, backend: str, known) -> str | None:
    """The entry's name for deriving `forward`'s backward for these inputs, or None when
    the derivation is not kept."""
    if not backends.get(backend).backward_cache or enabled("passes"):
        return None
    if cache_dir() is None:
        return None
    parts = []
    for t in inputs:
        d = t._data
        if type(d) is not np.ndarray:
            return None
        parts.append([d.dtype.str, list(d.shape), list(d.strides), bool(t.requires_grad)])
    writer = _Writer()
    try:
        graph = writer.graph(forward)
    except SaveError:
        return None
    arrays = _arrays(writer.arrays)
    if arrays is None:
        return None
    bindings, shape_guards = known if known else ((), ())
    facts = [[list(b) for b in bindings],
             [[g.lhs, g.op, g.rhs, bool(g.expected)] for g in shape_guards]]
    text = json.dumps([FORMAT, VERSION, _code_fingerprint(), np.__version__, sys.version,
                       graph, parts, facts, repr(STATE.modes.autocast),
                       {k: [v["dtype"], v["shape"], hashlib.sha256(v["data"].encode())
                            .hexdigest()] for k, v in arrays.items()}], sort_keys=True,
                      default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _arrays(arrays: dict) -> dict | None:
    """A graph's array constants as JSON (dtype, shape, base64 bytes), or None when they
    are too large to keep or of a dtype numpy cannot name by its string (bfloat16)."""
    if sum(a.nbytes for a in arrays.values()) > ARRAY_BYTES:
        return None
    out = {}
    for k, a in arrays.items():
        if a.dtype.kind not in "biufc" or np.dtype(a.dtype.str) != a.dtype:
            return None
        out[k] = {"dtype": a.dtype.str, "shape": list(a.shape),
                  "data": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()}
    return out


def _decode_arrays(arrays: dict) -> dict:
    return {k: np.frombuffer(base64.b64decode(v["data"]), dtype=np.dtype(v["dtype"]))
            .reshape(v["shape"]) for k, v in arrays.items()}


def _path(name: str) -> Path | None:
    root = cache_dir()
    return None if root is None else root / f"bwd_{name}.json"


def load(name: str) -> dict | None:
    """The entry (the optimised graphs decoded; `decode` decodes the recorded ones), or
    None when there is none or it does not decode."""
    path = _path(name)
    if path is None:
        return None
    try:
        data = path.read_bytes()
        digest, _, body = data.partition(b"\n")
        if digest != hashlib.sha256(body).hexdigest().encode():
            return None
        entry = json.loads(body)
        if entry.get("format") != FORMAT or entry.get("version") != VERSION or \
                entry.get("key") != name:
            return None
        reader = _Reader(_decode_arrays(entry.get("arrays", {})))
        for k in ("forward_final", "backward_final"):  # what a call runs
            entry[k] = reader.graph(entry[k])
        entry["decode"] = reader.graph  # the graphs as recorded: on first use
        return entry
    except Exception:  # noqa: BLE001 — a damaged entry is a miss (and is written again)
        return None


def store(name: str, entry: dict) -> bool:
    """Write an entry (graphs as Graph objects); False when it cannot be encoded."""
    path = _path(name)
    if path is None:
        return False
    writer = _Writer()
    try:
        out = dict(entry)
        for k in ("forward", "recorded", "forward_final", "backward_final"):
            out[k] = writer.graph(entry[k])
    except SaveError:
        return False
    arrays = _arrays(writer.arrays)
    if arrays is None:
        return False
    out.update(format=FORMAT, version=VERSION, key=name, arrays=arrays)
    try:
        body = json.dumps(out).encode()
        atomic_write_bytes(path, hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    except (OSError, TypeError, ValueError):
        return False
    return True
