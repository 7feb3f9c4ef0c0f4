"""`tj.save` / `tj.load`: tensors and nested containers of them in a numpy .npz file.

No pickle: the structure is stored as JSON next to the arrays and loading
never executes code from the file (`np.load(..., allow_pickle=False)`).
"""
from __future__ import annotations

import json
import os
from collections import OrderedDict

import numpy as np

from .tensor.tensor import Tensor
from .tensor.creation import from_numpy

_META = "__tracejit_structure__"


def _encode(obj, arrays: dict):
    if isinstance(obj, Tensor):
        key = f"t{len(arrays)}"
        arrays[key] = np.ascontiguousarray(obj.detach()._data)
        return {"tensor": key, "requires_grad": obj.requires_grad}
    if isinstance(obj, np.ndarray):
        key = f"t{len(arrays)}"
        arrays[key] = obj
        return {"ndarray": key}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)):
                raise TypeError(f"tj.save: dict keys must be str or int, got {type(k).__name__}")
        return {"dict": [[k, _encode(v, arrays)] for k, v in obj.items()],
                "ordered": isinstance(obj, OrderedDict)}
    if isinstance(obj, (list, tuple)):
        return {"list" if isinstance(obj, list) else "tuple": [_encode(v, arrays) for v in obj]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    raise TypeError(f"tj.save: cannot store an object of type {type(obj).__name__}; tensors, "
                    "numpy arrays, numbers, strings and dicts/lists/tuples of them are supported")


def _decode(node, arrays):
    if "tensor" in node:
        t = from_numpy(np.array(arrays[node["tensor"]]))
        return t.requires_grad_() if node.get("requires_grad") else t
    if "ndarray" in node:
        return np.array(arrays[node["ndarray"]])
    if "dict" in node:
        items = [(k, _decode(v, arrays)) for k, v in node["dict"]]
        return OrderedDict(items) if node.get("ordered") else dict(items)
    if "list" in node:
        return [_decode(v, arrays) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays) for v in node["tuple"])
    return node["value"]


def save(obj, f) -> None:
    """Write tensors / state dicts / nested containers to `f` (a path or binary file)."""
    arrays: dict = {}
    structure = _encode(obj, arrays)
    arrays[_META] = np.frombuffer(json.dumps(structure).encode(), dtype=np.uint8)
    if isinstance(f, (str, os.PathLike)):
        tmp = f"{os.fspath(f)}.tmp{os.getpid()}"
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, f)  # atomic: a reader never sees half a file
    else:
        np.savez(f, **arrays)


def load(f):
    """Read what `tj.save` wrote. Never unpickles: the file cannot run code."""
    with np.load(f, allow_pickle=False) as data:
        if _META not in data.files:
            raise ValueError("tj.load: not a tracejit file (no structure record); files "
                             "written by other tools need np.load")
        arrays = {k: data[k] for k in data.files}
    try:
        structure = json.loads(arrays.pop(_META).tobytes().decode())
        return _decode(structure, arrays)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as err:
        raise ValueError(f"tj.load: the file's structure record is broken ({type(err).__name__}"
                         f": {err}); it was not written by tj.save, or it was damaged") from None
