"""Differential checking: a traced call against eager execution of the same program.

`outcome` runs one call and records everything a user can observe: the exception
type, every output (dtype, shape, values, requires_grad, whether it has a grad_fn,
whether it *is* one of the inputs), the inputs' values afterwards (in-place updates)
and the gradients a weighted-sum backward gives. `compare` says how two outcomes
differ, or returns None. The regression tests and `python -m tracejit fuzz` share it.
"""
from __future__ import annotations

import numpy as np

from ..core.modes import STATE
from ..tensor.tensor import Size, Tensor
from .. import autograd
from ..tensor.creation import from_numpy


def _leaves(obj, out: list) -> list:
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for k in obj:
            _leaves(obj[k], out)
    elif isinstance(obj, (tuple, list)) and not isinstance(obj, Size):
        for v in obj:
            _leaves(v, out)
    else:
        out.append(obj)
    return out


def _structure(obj):
    if isinstance(obj, Tensor):
        return "T"
    if isinstance(obj, dict):
        return ("dict", tuple((k, _structure(v)) for k, v in obj.items()))
    if isinstance(obj, (tuple, list)) and not isinstance(obj, Size):
        return (type(obj).__name__, tuple(_structure(v) for v in obj))
    return type(obj).__name__


def _array(t: Tensor) -> np.ndarray:
    return np.array(t.detach().numpy(), copy=True)


class Outcome:
    """What one call did, as plain data."""

    def __init__(self):
        self.error: str | None = None
        self.message = ""
        self.structure = None
        self.outputs: list = []   # per leaf: dict of observations, or the Python value
        self.inputs_after: list = []
        self.grads: list = []
        self.backward_error: str | None = None

    def __repr__(self) -> str:
        return (f"Outcome(error={self.error} {self.message!r}, outputs={self.outputs}, "
                f"grads={self.grads}, backward_error={self.backward_error})")


def outcome(fn, args: tuple, kwargs: dict | None = None, *, backward: bool = True,
            create_graph: bool = False, weights_seed: int = 0, params=()) -> Outcome:
    """Call fn(*args, **kwargs) and observe it; with `backward`, run backward of a fixed
    weighted sum of the float outputs that require grad and read the gradients of the
    inputs and `params` (and, with `create_graph`, the gradient of the gradients' sum)."""
    kwargs = kwargs or {}
    res = Outcome()
    inputs = [t for t in _leaves((args, kwargs), []) if isinstance(t, Tensor)]
    try:
        result = fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 — the exception type is an observation
        res.error, res.message = type(err).__name__, str(err)[:200]
        return res
    res.structure = _structure(result)
    leaves = _leaves(result, [])
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            res.outputs.append({
                "dtype": leaf.dtype.name, "shape": tuple(leaf.shape), "value": _array(leaf),
                "requires_grad": leaf.requires_grad, "has_grad_fn": leaf.grad_fn is not None,
                "is_input": next((i for i, t in enumerate(inputs) if t is leaf), None)})
        else:
            res.outputs.append(tuple(leaf) if isinstance(leaf, Size) else leaf)
    res.inputs_after = [_array(t) for t in inputs]
    if not backward or not STATE.modes.grad_enabled:
        return res
    rng = np.random.default_rng(weights_seed)
    diff = [t for t in inputs + list(params) if t.requires_grad]
    terms = []
    for leaf in leaves:
        if isinstance(leaf, Tensor) and leaf.requires_grad and leaf.is_floating_point():
            w = rng.standard_normal(tuple(leaf.shape)).astype(leaf.dtype.np)
            terms.append((leaf * Tensor._make(w)).sum())
    if not terms or not diff:
        return res
    try:
        loss = terms[0]
        for t in terms[1:]:
            loss = loss + t
        grads = autograd.grad([loss], diff, allow_unused=True, create_graph=create_graph)
        res.grads = [None if g is None else _array(g) for g in grads]
        if create_graph:
            used = [g for g in grads if g is not None and g.requires_grad]
            if used:
                total = used[0].sum()
                for g in used[1:]:
                    total = total + g.sum()
                second = autograd.grad([total], diff, allow_unused=True)
                res.grads += [None if g is None else _array(g) for g in second]
    except Exception as err:  # noqa: BLE001
        res.backward_error = type(err).__name__
        res.message = str(err)[:300]
    return res


def _close(a, b, rtol: float, atol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        return bool(np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(a, b))


def tolerance(dtype_name: str) -> tuple[float, float]:
    return {"float16": (2e-2, 2e-2), "float32": (2e-4, 2e-5)}.get(dtype_name, (1e-7, 1e-9))


def compare(expected: Outcome, got: Outcome, rtol: float | None = None,
            atol: float | None = None, values: bool = True) -> str | None:
    """How `got` differs from `expected`, or None when a user could not tell them apart.
    With values=False, numbers are not compared (everything else is)."""
    if expected.error != got.error:
        return f"exception: eager {expected.error} ({expected.message}), traced {got.error} " \
               f"({got.message})"
    if expected.error:
        return None
    if expected.structure != got.structure:
        return f"structure: eager {expected.structure}, traced {got.structure}"
    for k, (e, g) in enumerate(zip(expected.outputs, got.outputs)):
        if isinstance(e, dict) != isinstance(g, dict):
            return f"output {k}: eager {type(e).__name__}, traced {type(g).__name__}"
        if not isinstance(e, dict):
            if type(e) is not type(g) or e != g:
                return f"output {k}: eager {e!r}, traced {g!r}"
            continue
        for key in ("dtype", "shape", "requires_grad", "has_grad_fn", "is_input"):
            if e[key] != g[key]:
                return f"output {k}: {key} eager {e[key]}, traced {g[key]}"
        r, a = tolerance(e["dtype"])
        if values and not _close(e["value"], g["value"], rtol or r, atol or a):
            return f"output {k}: values differ: eager {e['value']!r}, traced {g['value']!r}"
    for k, (e, g) in enumerate(zip(expected.inputs_after, got.inputs_after)):
        r, a = tolerance(e.dtype.name)
        if not (_close(e, g, rtol or r, atol or a) if values else e.shape == g.shape):
            return f"input {k} after the call: eager {e!r}, traced {g!r}"
    if expected.backward_error != got.backward_error:
        return (f"backward: eager {expected.backward_error} ({expected.message}), traced "
                f"{got.backward_error} ({got.message})")
    if len(expected.grads) != len(got.grads):
        return f"gradients: eager {len(expected.grads)}, traced {len(got.grads)}"
    for k, (e, g) in enumerate(zip(expected.grads, got.grads)):
        r, a = tolerance(e.dtype.name) if e is not None else (0, 0)
        if (e is None) != (g is None) or (values and not _close(e, g, (rtol or r) * 5,
                                                               (atol or a) * 5)):
            return f"gradient {k}: eager {e!r}, traced {g!r}"
    return None


def rounding_explains(expected: Outcome, got: Outcome, reference: Outcome) -> bool:
    """Whether every number in which `got` differs from `expected` is as close to the
    float64 `reference` as eager's own (within a factor of 4 and a few ulps): the two
    round differently in an ill-conditioned expression (log(1 + tanh(x)) at x < -4),
    and neither is more right. Everything but the numbers must already agree."""
    if compare(expected, got, values=False) is not None or reference.error is not None or \
            reference.structure != expected.structure:
        return False
    pairs = [(e["value"], g["value"], r["value"]) for e, g, r in zip(
        expected.outputs, got.outputs, reference.outputs) if isinstance(e, dict)]
    pairs += [(e, g, r) for e, g, r in zip(expected.inputs_after, got.inputs_after,
                                           reference.inputs_after)]
    pairs += [(e, g, r) for e, g, r in zip(expected.grads, got.grads, reference.grads)
              if e is not None and r is not None]
    for e, g, r in pairs:
        if r.shape != e.shape:
            return False
        e64, g64, r64 = (np.asarray(v, np.float64) for v in (e, g, r))
        ulp = np.spacing(np.abs(r64).astype(e.dtype)).astype(np.float64)
        finite = np.isfinite(r64)
        err_e, err_g = np.abs(e64 - r64)[finite], np.abs(g64 - r64)[finite]
        if not np.all(err_g <= 4 * err_e + 8 * ulp[finite]):
            return False
        if not np.array_equal(np.isnan(e64[~finite]), np.isnan(g64[~finite])):
            return False
    return True


def clone(obj, memo=None):
    """Fresh tensors with the same values, layout, requires_grad and sharing structure."""
    memo = {} if memo is None else memo
    if isinstance(obj, Tensor):
        if id(obj) not in memo:
            data = obj.detach().numpy().copy(order="K")
            memo[id(obj)] = from_numpy(data).requires_grad_(obj.requires_grad)
        return memo[id(obj)]
    if hasattr(obj, "_fields"):  # a namedtuple (PackedSequence)
        return type(obj)(*(clone(v, memo) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(clone(v, memo) for v in obj)
    if isinstance(obj, dict):
        return {k: clone(v, memo) for k, v in obj.items()}
    return obj


class Call:
    """One call's arguments, handed out as fresh copies for each run."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def fresh(self):
        memo = {}
        return clone(self.args, memo), clone(self.kwargs, memo)
