"""PyTorch's own op database (the OpInfo samples of torch.testing._internal) run against
tracejit: forward values, gradients, traced calls and error parity for every op tracejit
exposes under PyTorch's name; and, per op, one traced sample on CUDA tensors (Numba's CUDA
simulator, in a process of its own) and exported to ONNX (run in onnxruntime). Read by
tests/test_opinfo.py and by `python -m tracejit.testing.opinfo --markdown docs/ops.md`,
which writes the coverage table.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import tracejit as tj
from tracejit.core import dtypes
from tracejit.ops import OPS
from tracejit.core.lazy import lazy
from tracejit.tensor.device import STATS

_lowering = lazy("tracejit.onnx.lowering")  # (it imports onnx, an optional dependency)

CHECKS = ("forward", "grad", "traced", "errors")
DTYPES = ("float32", "float64", "int32", "int64", "bool")
FAST_SAMPLES = 2  # samples per dtype in the fast tier

# ops whose outputs are random or uninitialised: only dtypes and shapes are compared
UNDETERMINED = {"randn", "randn_like", "rand_like", "randint", "empty", "empty_like",
                "new_empty", "nn.functional.dropout", "nn.functional.dropout2d", "normal",
                "bernoulli", "multinomial", "nn.functional.dropout3d",
                "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout"}
# ops whose samples are random when they ask for dropout: those compare dtypes and shapes
RANDOM_WHEN: dict[str, Callable] = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0) > 0,
    "nn.functional.multi_head_attention_forward": lambda s: s.kwargs.get("training", False),
}

# OpInfo names tracejit uses for something else
NAME_CLASHES = {"trace": "tj.trace is the tracing JIT, not the matrix trace"}

# OpInfos (by name, or by entry id for one variant) whose `op` is a lambda doing more than
# calling the op of their name
ADAPTERS: dict[str, Callable] = {
    "einsum": lambda operands, equation, **kw: tj.einsum(equation, *operands, **kw),
    "normal.in_place": lambda x, *args, **kw: x.normal_(*args, **kw),
    "zero_": lambda x: x.clone().zero_(),  # PyTorch's sample clones before the in-place op
    "where": lambda x, condition, other, **kw: tj.where(condition, x, other, **kw),
    "nn.functional.embedding": lambda weight, idx, **kw: tj.nn.functional.embedding(
        idx, weight, **kw),
    "nn.functional.embedding_bag": lambda weight, idx, **kw: tj.nn.functional.embedding_bag(
        idx, weight, **kw),
}


def _known(ops: str, checks: str, reason: str) -> dict:
    return {(op, check): reason for op in ops.split() for check in checks.split()}


FWD, ALL3 = "forward traced", "forward grad traced"
NUMBER_FIRST = "accepts a Python number where PyTorch's signature takes a tensor (TypeError)"

# (entry id, check) -> why some of its samples differ from PyTorch. The test marks these
# strict xfail, so that a fix shows as an unexpected pass; docs/ops.md lists them with the
# failures of each sample.
KNOWN_FAILURES: dict[tuple[str, str], str] = {
    **_known("arange", FWD, "a float start, end or step with an integer dtype: PyTorch "
             "computes the length and values in double and truncates; lengths and values "
             "differ"),
    **_known("arange", "errors", "no error when the step's sign disagrees with end - start; "
             "ZeroDivisionError, OverflowError and TypeError where PyTorch raises RuntimeError "
             "or ValueError"),
    **_known("eye", "errors", "ValueError where PyTorch raises RuntimeError"),
    **_known("sum_to_size", "forward", "int32 and bool inputs keep their dtype (PyTorch sums "
             "integers to int64)"),
    **_known("sum_to_size", "traced", "int32 and bool inputs keep their dtype; the trace does "
             "not fit the call with a size it recorded (runs eagerly)"),
    **_known("copysign eq fmod ge gt le lt ne logaddexp max.binary maximum min.binary minimum "
             "logical_and logical_or logical_xor hypot pow remainder", "errors", NUMBER_FIRST),
    **_known("div.floor_rounding remainder __rmod__", "grad traced", "the result does not "
             "require grad (PyTorch differentiates it: 0 for floor division, 1 for "
             "remainder's dividend)"),
    **_known("linspace linspace.tensor_overload", "errors", "ValueError where PyTorch raises "
             "RuntimeError for negative steps; no error for a float steps or 1-d start and "
             "end tensors"),
    **_known("isclose", FWD, "bool inputs raise TypeError (numpy's boolean subtract)"),
    **_known("isclose", "errors", NUMBER_FIRST + "; no error for a negative rtol or atol"),
    **_known("softmax softmax.with_dtype log_softmax log_softmax.with_dtype", ALL3,
             "a zero-size dimension raises (amax over it); PyTorch returns an empty result"),
    **_known("nn.functional.normalize norm", ALL3, "p=0 raises ZeroDivisionError (PyTorch: "
             "the count of non-zeros)"),
    **_known("nn.functional.conv3d", FWD, "float32 sums of 64 products (padding='same', "
             "dilation 3, outputs up to ~440) are added in another order than PyTorch's: "
             "outputs near zero differ by ~6e-5, past the 1e-5 tolerance (both lie within "
             "7e-5 of the float64 result)"),
    **_known("nn.functional.batch_norm", ALL3, "a 1-d input of size 0 raises IndexError"),
    **_known("nn.functional.gelu", "errors", "no error for an unknown approximate= value"),
    **_known("narrow", "errors", "no error for an out-of-range start or length, a negative "
             "length or a 1-d start tensor; IndexError where PyTorch raises RuntimeError for a "
             "0-d tensor"),
    **_known("neg", "errors", "TypeError where PyTorch raises RuntimeError for a bool tensor"),
    **_known("nn.functional.rrelu", ALL3, "training=True draws the slopes from tracejit's "
             "generator: values differ from PyTorch's draws"),
    **_known("gather", ALL3, "a 0-d input (with a 0-d or 1-d index) raises"),
    **_known("gather", "errors", "out= is not supported (TypeError where PyTorch raises "
             "RuntimeError); IndexError where PyTorch raises RuntimeError for an index out of "
             "bounds"),
    **_known("index_select", ALL3, "a 0-d input raises IndexError"),
    **_known("index_select", "errors", "TypeError where PyTorch raises RuntimeError"),
    **_known("cat", ALL3, "an empty 1-d tensor beside tensors of more dimensions raises "
             "(PyTorch skips it)"),
    **_known("cat", "errors", "out= is not supported (TypeError where PyTorch raises "
             "RuntimeError); RuntimeError where PyTorch raises ValueError for an empty list; "
             "IndexError where PyTorch raises RuntimeError for 0-d tensors"),
    **_known("zero_", FWD, "zero_ of a bool tensor raises RuntimeError"),
    **_known("nonzero", FWD, "as_tuple=True on a 0-d input returns () (PyTorch: one tensor)"),
    **_known("norm.nuc", ALL3, "p='nuc' (nuclear norm) is not supported"),
    **_known("norm.inf", ALL3, "p=-inf gives the wrong value (PyTorch: the smallest |x|)"),
    **_known("nn.functional.embedding", "errors", "IndexError or no error where PyTorch "
             "raises RuntimeError for a weight that is not 2-d"),
    **_known("amax amin", "errors", "no error for a repeated dim; out= is not supported "
             "(TypeError where PyTorch raises RuntimeError); RuntimeError where PyTorch raises "
             "IndexError for a zero-size dim"),
    **_known("std.unbiased var.unbiased", ALL3, "the positional unbiased flag (std(x, True)) "
             "is read as a dim and raises TypeError"),
    **_known("prod", FWD, "dtype= is ignored for int32 and bool inputs (returns int64)"),
    **_known("topk kthvalue", FWD, "integer samples with ties: PyTorch's partial sort picks "
             "other positions among equal values (an order it does not specify); tracejit "
             "takes them by position"),
    **_known("sort argsort", FWD, "stable=False on 8000 equal bools: PyTorch's unstable sort "
             "orders ties otherwise (tracejit's sort is always stable)"),
    **_known("logcumsumexp", "grad traced", "float32 inputs near 1e4: PyTorch's gradient "
             "loses three digits (exp(x - out) in float32), tracejit's keeps them"),
    **_known("kthvalue masked_select take bernoulli", "errors", "no error for an out= tensor "
             "or an in-place update whose memory overlaps an input (TypeError: out= is not "
             "supported)"),
    **_known("aminmax multinomial", "errors", "out= is not supported (TypeError where "
             "PyTorch raises RuntimeError for an out tensor of another dtype)"),
    **_known("scatter_add", "errors", "IndexError where PyTorch raises RuntimeError for an "
             "index out of bounds"),
}


# ---- the entries: OpInfos tracejit exposes -----------------------------------------------

@dataclass
class Entry:
    """One OpInfo (name and variant) with the tracejit callable its samples are run on."""

    id: str
    opinfo: Any
    call: Callable
    where: str  # how the callable was found: "tracejit.add", "Tensor.view", ...

    @property
    def fused(self) -> str:
        """'yes' when the op table has a scalar expression for the op (kernels fuse it),
        'no' for a primitive without one, 'composite' for an op built from primitives."""
        short = self.opinfo.name.split(".")[-1]
        if short not in OPS:
            return "composite"
        return "yes" if OPS[short].expr is not None else "no"

    @property
    def is_method(self) -> bool:
        return self.where.startswith("Tensor.")


def entry_id(opinfo) -> str:
    """`name` or `name.variant`, e.g. `div.trunc_rounding`."""
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def _function(module, name: str):
    obj = getattr(module, name, None)
    if obj is None or isinstance(obj, (tj.dtype, type)) or not callable(obj):
        return None
    return obj


def _method(name: str):
    attr = getattr(tj.Tensor, name, None)
    if isinstance(attr, property):
        return lambda x: getattr(x, name)
    if callable(attr):
        return lambda x, *args, **kwargs: getattr(x, name)(*args, **kwargs)
    return None


def resolve(name: str) -> tuple[Callable, str] | None:
    """The tracejit callable PyTorch's op `name` stands for, and where it was found:
    `nn.functional.*` and `linalg.*` in those namespaces, other names in `tracejit`, then
    as Tensor methods (and properties: `T`, `mT`)."""
    if name not in NAME_CLASHES:
        for prefix, module in (("nn.functional.", tj.nn.functional),
                               ("linalg.", getattr(tj, "linalg", None))):
            if name.startswith(prefix):
                fn = _function(module, name[len(prefix):]) if module is not None else None
                return (fn, f"tracejit.{name}") if fn else None
        if "." in name:  # torch.special, torch.fft, ...: namespaces tracejit does not have
            return None
        fn = _function(tj, name)
        if fn is not None:
            return fn, f"tracejit.{name}"
    m = _method(name)
    return (m, f"Tensor.{name}") if m else None


@functools.cache
def op_db() -> tuple:
    """PyTorch's OpInfos (importing them needs torch and expecttest)."""
    from torch.testing._internal.common_methods_invocations import op_db as db

    return tuple(db)


@functools.cache
def entries() -> dict[str, Entry]:
    """Every OpInfo whose name (or an alias) tracejit exposes, by entry id."""
    out = {}
    for opinfo in op_db():
        eid = entry_id(opinfo)
        adapter = ADAPTERS.get(eid, ADAPTERS.get(opinfo.name))
        if adapter is not None:
            out[eid] = Entry(eid, opinfo, adapter, f"tracejit.{opinfo.name}")
            continue
        for name in [opinfo.name] + [a.name for a in opinfo.aliases]:
            found = resolve(name)
            if found:
                out[eid] = Entry(eid, opinfo, *found)
                break
    return out


def checks_of(entry: Entry) -> list[str]:
    """The checks an entry has samples for."""
    op = entry.opinfo
    out = ["forward"]
    if op.supports_autograd and any(d.startswith("float") for d in dtypes_of(entry)):
        out.append("grad")
    out.append("traced")
    if op.error_inputs_func is not None:
        out.append("errors")
    return out


def dtypes_of(entry: Entry) -> list[str]:
    import torch

    supported = entry.opinfo.supported_dtypes("cpu")
    return [d for d in DTYPES if getattr(torch, d) in supported]


# ---- converting PyTorch's samples ----------------------------------------------------------

class NotRepresentable(Exception):
    """A sample holds something tracejit has no counterpart for (a dtype, a generator)."""


_TJ_DTYPES = {d.name for d in dtypes.ALL}


def _dtype_name(torch_dtype) -> str:
    return str(torch_dtype).rsplit(".", 1)[-1]


def to_tracejit(obj):
    """PyTorch values (tensors, dtypes, sizes, devices, nested in lists, tuples and dicts) as
    tracejit values; tensors are copied and keep their requires_grad."""
    import torch

    if isinstance(obj, torch.Tensor):
        name = _dtype_name(obj.dtype)
        if name not in _TJ_DTYPES:
            raise NotRepresentable(f"a {name} tensor")
        try:
            t = tj.tensor(obj.detach().cpu().numpy())
        except ValueError as err:  # numpy's limits (more than 64 dimensions)
            raise NotRepresentable(f"a tensor numpy cannot hold ({err})") from None
        return t.requires_grad_() if obj.requires_grad else t
    if isinstance(obj, torch.dtype):
        name = _dtype_name(obj)
        if name not in _TJ_DTYPES:
            raise NotRepresentable(f"dtype {name}")
        return dtypes.as_dtype(name)
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if isinstance(obj, (torch.memory_format, torch.layout, torch.Generator)):
        raise NotRepresentable(str(obj))
    if isinstance(obj, dict):
        return {k: to_tracejit(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_tracejit(v) for v in obj)
    return obj


def _is_torch(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def _is_tj(x) -> bool:
    return isinstance(x, tj.Tensor)


def _leaves(obj, is_tensor) -> list:
    """Output leaves in order: tensors and other values from nested tuples and lists."""
    if is_tensor(obj) or not isinstance(obj, (list, tuple)):
        return [obj]
    return [leaf for v in obj for leaf in _leaves(v, is_tensor)]


def _tensors(obj, is_tensor, out: list) -> list:
    """The tensors of (input, args, kwargs), in order."""
    if is_tensor(obj):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors(v, is_tensor, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors(v, is_tensor, out)
    return out


def _rebuild(obj, tensors):
    """obj with its tensors replaced, in order, by those the iterator `tensors` yields."""
    if _is_tj(obj):
        return next(tensors)
    if isinstance(obj, dict):
        return {k: _rebuild(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_rebuild(v, tensors) for v in obj)
    return obj


# ---- comparing -----------------------------------------------------------------------------

TOLERANCE = {"float32": (1e-5, 1e-5), "float64": (1e-7, 1e-7)}  # (rtol, atol)
GRAD_TOLERANCE = {"float32": (1e-4, 1e-4), "float64": (1e-6, 1e-6)}
LOW_PRECISION = (1e-2, 1e-2)  # float16 and bfloat16 outputs (casts)


def _numpy(t) -> np.ndarray:
    """A tensor's values; half-precision ones widened (numpy has no bfloat16)."""
    floating = t.dtype.is_floating_point if _is_torch(t) else t.is_floating_point()
    if floating and t.element_size() < 4:
        return t.detach().float().numpy().astype(np.float64)
    return t.detach().numpy()


def _mismatch(want, got, dtype: str, tol: dict, what: str) -> str | None:
    """How tracejit's values `got` differ from PyTorch's `want`, or None."""
    if want.shape != got.shape:
        return f"{what}: shape {got.shape}, PyTorch {want.shape}"
    if want.dtype.kind == "f":
        if not np.array_equal(np.isnan(want), np.isnan(got)):
            return f"{what}: NaN positions differ"
        rtol, atol = tol.get(dtype, LOW_PRECISION)
        if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            return f"{what}: values differ"
        return None
    return None if np.array_equal(want, got) else f"{what}: values differ"


def compare_outputs(want, got, values: bool = True, what: str = "output") -> str | None:
    """How tracejit's outputs differ from PyTorch's (structure, dtype, shape, values,
    NaN positions), or None. values=False compares everything but the numbers."""
    w, g = _leaves(want, _is_torch), _leaves(got, _is_tj)
    if len(w) != len(g):
        return f"{what}: {len(g)} values, PyTorch {len(w)}"
    for k, (a, b) in enumerate(zip(w, g)):
        name = what if len(w) == 1 else f"{what} {k}"
        if _is_torch(a) != _is_tj(b):
            return f"{name}: {type(b).__name__}, PyTorch {type(a).__name__}"
        if not _is_torch(a):
            same = a == b or (isinstance(a, float) and isinstance(b, (int, float)) and
                              np.isclose(a, b, equal_nan=True))
            if not same or type(a) is not type(b):
                return f"{name}: {type(b).__name__} {b!r}, PyTorch {type(a).__name__} {a!r}"
            continue
        dtype = _dtype_name(a.dtype)
        if dtype != b.dtype.name:
            return f"{name}: dtype {b.dtype.name}, PyTorch {dtype}"
        want_arr, got_arr = _numpy(a), _numpy(b)
        if not values:
            want_arr, got_arr = np.zeros(want_arr.shape), np.zeros(got_arr.shape)
        found = _mismatch(want_arr, got_arr, dtype, TOLERANCE, name)
        if found:
            return found
    return None


def compare_grads(want: list, got: list, values: bool = True, what: str = "gradient"
                  ) -> str | None:
    """Input gradients, PyTorch's against tracejit's; a missing gradient counts as zeros."""
    for k, (a, b) in enumerate(zip(want, got)):
        if a is None and b is None:
            continue
        name = f"{what} {k}" if len(want) > 1 else what
        if a is not None and b is not None and _dtype_name(a.dtype) != b.dtype.name:
            return f"{name}: dtype {b.dtype.name}, PyTorch {_dtype_name(a.dtype)}"
        dtype = _dtype_name(a.dtype) if a is not None else b.dtype.name
        a = _numpy(a) if a is not None else np.zeros(tuple(b.shape))
        b = _numpy(b) if b is not None else np.zeros(a.shape)
        if not values:
            a, b = np.zeros(a.shape), np.zeros(b.shape)
        found = _mismatch(a, b, dtype, GRAD_TOLERANCE, name)
        if found:
            return found
    return None


_NUMBER = re.compile(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?(?!\w)")


def describe(err: BaseException) -> str:
    """An exception as a failure reason: its type and first line, numbers written N so that
    samples of different sizes share a reason."""
    text = str(err).strip()
    msg = _NUMBER.sub("N", text.splitlines()[0]) if text else ""
    return f"{type(err).__name__}: {msg[:110]}"


# ---- checking samples ----------------------------------------------------------------------

@dataclass
class Result:
    """One check of one sample: passed, failed (with the reason), or not comparable."""

    check: str
    dtype: str
    sample: int
    reason: str | None = None   # why it failed; None: passed
    skipped: str | None = None  # why it cannot be compared (tracejit lacks the dtype, ...)

    @property
    def passed(self) -> bool:
        return self.reason is None and self.skipped is None


def _call(fn, sample_args):
    inp, args, kwargs = sample_args
    return fn(inp, *args, **kwargs)


def _cotangents(outs: list, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(o.shape)).astype(_numpy(o).dtype) for o in outs]


class Runner:
    """Runs an entry's samples lazily and keeps every result, so that the checks of one op
    (and repeated questions about it) share one run of each sample."""

    def __init__(self, backend: str = "interpret"):
        self.backend = backend
        self._samples: dict = {}   # (entry id, dtype) -> [generator, samples, rng state]
        self._results: dict = {}   # (entry id, dtype, index) -> [Result]
        self._errors: dict = {}    # entry id -> [Result]

    def _sample(self, entry: Entry, dtype: str, k: int):
        """Sample k of PyTorch's generator for the entry and dtype. The generator draws from
        a random state of its own, so that sample k is the same whichever samples and ops
        ran before (the test and the coverage table see the same samples)."""
        import torch

        key = (entry.id, dtype)
        with torch.random.fork_rng(devices=[]):
            if key not in self._samples:
                torch.manual_seed(0)
                op = entry.opinfo
                grad = op.supports_autograd and dtype.startswith("float")
                gen = op.sample_inputs("cpu", getattr(torch, dtype), requires_grad=grad)
                self._samples[key] = [iter(gen), [], torch.get_rng_state()]
            gen, got, state = self._samples[key]
            torch.set_rng_state(state)
            while len(got) <= k:
                nxt = next(gen, None)
                if nxt is None:
                    return None
                got.append(nxt)
            self._samples[key][2] = torch.get_rng_state()
        return got[k]

    def results(self, entry: Entry, check: str, limit: int | None = None,
                until_failure: bool = False) -> list[Result]:
        """The results of `check` on the first `limit` samples of each dtype (None: all);
        with until_failure, stop at the first failure."""
        if check == "errors":
            if entry.id not in self._errors:
                self._errors[entry.id] = check_errors(entry)
            return self._errors[entry.id]
        out = []
        for dtype in dtypes_of(entry):
            for k in itertools.count() if limit is None else range(limit):
                found = self._sample_results(entry, dtype, k)
                if found is None:  # no more samples
                    break
                found = [r for r in found if r.check == check]
                out += found
                if until_failure and any(r.reason for r in found):
                    return out
        return out

    def _sample_results(self, entry: Entry, dtype: str, k: int) -> list[Result] | None:
        key = (entry.id, dtype, k)
        if key not in self._results:
            try:
                sample = self._sample(entry, dtype, k)
            except Exception as err:  # noqa: BLE001 — PyTorch's generator broke (and ended)
                self._results[key] = [Result(c, dtype, k, skipped="sample inputs raise "
                                             f"{describe(err)}") for c in CHECKS[:3]]
                return self._results[key]
            self._results[key] = None if sample is None else check_sample(
                entry, sample, dtype, k, self.backend)
        return self._results[key]


def compares_values(entry: Entry, sample) -> bool:
    """Whether a sample's outputs are compared by value (not for random or uninitialised
    ones: their dtypes and shapes only)."""
    name = entry.opinfo.name
    return name not in UNDETERMINED and not (name in RANDOM_WHEN and RANDOM_WHEN[name](sample))


def _program(entry: Entry, args) -> Callable:
    """The call of a sample as a function of its tensors (everything else constants)."""
    def program(*ts):
        return _call(entry.call, _rebuild(args, iter(ts)))
    return program


def check_sample(entry: Entry, sample, dtype: str, index: int, backend: str = "interpret"
                 ) -> list[Result]:
    """Forward, gradient and traced checks of one PyTorch sample."""
    values = compares_values(entry, sample)
    torch_args = (sample.input, sample.args, sample.kwargs)
    try:
        want = _call(entry.opinfo.op, torch_args)
    except Exception as err:  # noqa: BLE001 — PyTorch itself rejects it: nothing to compare
        return [Result(c, dtype, index, skipped=f"PyTorch raises {describe(err)}")
                for c in CHECKS[:3]]
    grad = _torch_grad(want, torch_args, seed=index)
    results = []

    def record(check, reason=None, skipped=None):
        results.append(Result(check, dtype, index, reason, skipped))

    try:
        eager_args, traced_args = to_tracejit(torch_args), to_tracejit(torch_args)
    except NotRepresentable as why:
        for check in ("forward", "grad", "traced") if grad else ("forward", "traced"):
            record(check, skipped=f"sample holds {why}")
        return results
    try:
        got = _call(entry.call, eager_args)
        record("forward", compare_outputs(want, got, values))
    except Exception as err:  # noqa: BLE001 — the exception is the finding
        got = None
        record("forward", f"raises {describe(err)}")
    if grad:
        record("grad", _grad_reason(got, eager_args, grad, values) if got is not None
               else results[-1].reason)
    record("traced", _traced_reason(entry, traced_args, want, grad, values, backend))
    return results


@dataclass
class _Grad:
    """PyTorch's gradients of one sample: which inputs and output leaves take part, the
    cotangents and the input gradients."""

    inputs: list
    outputs: list
    cotangents: list
    grads: list


def _torch_grad(want, torch_args, seed: int) -> _Grad | None:
    import torch

    ins = [k for k, t in enumerate(_tensors(torch_args, _is_torch, [])) if t.requires_grad]
    leaves = _leaves(want, _is_torch)
    outs = [k for k, o in enumerate(leaves) if _is_torch(o) and o.requires_grad and
            o.is_floating_point()]
    if not ins or not outs:
        return None
    cots = _cotangents([leaves[k] for k in outs], seed)
    tensors = _tensors(torch_args, _is_torch, [])
    try:
        grads = torch.autograd.grad([leaves[k] for k in outs], [tensors[k] for k in ins],
                                    [torch.from_numpy(c).to(leaves[k].dtype)
                                     for c, k in zip(cots, outs)], allow_unused=True)
    except Exception:  # noqa: BLE001 — PyTorch has no derivative here: nothing to compare
        return None
    return _Grad(ins, outs, cots, list(grads))


def _grad_reason(got, args, grad: _Grad, values: bool, what: str = "gradient") -> str | None:
    leaves = _leaves(got, _is_tj)
    if len(leaves) <= max(grad.outputs):
        return f"{what}: output missing"
    outs = [leaves[k] for k in grad.outputs]
    if not all(_is_tj(o) and o.requires_grad for o in outs):
        return f"{what}: output does not require grad"
    tensors = _tensors(args, _is_tj, [])
    try:
        grads = tj.autograd.grad(outs, [tensors[k] for k in grad.inputs],
                                 [tj.tensor(c).to(o.dtype) for c, o in zip(grad.cotangents,
                                                                            outs)],
                                 allow_unused=True)
    except Exception as err:  # noqa: BLE001
        return f"{'traced ' if 'traced' in what else ''}backward raises {describe(err)}"
    return compare_grads(grad.grads, list(grads), values, what)


def _traced_reason(entry: Entry, args, want, grad: _Grad | None, values: bool,
                   backend: str) -> str | None:
    """Trace the call (its tensors are the trace's inputs, everything else constants), call
    the trace on fresh copies and compare values and gradients with PyTorch's."""
    tensors = _tensors(args, _is_tj, [])
    try:
        traced = tj.trace(_program(entry, args), tuple(tensors), backend=backend)
    except Exception as err:  # noqa: BLE001
        return f"trace raises {describe(err)}"
    fresh = [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]
    try:
        got = traced(*fresh)
    except Exception as err:  # noqa: BLE001
        return f"traced call raises {describe(err)}"
    if traced.stats["eager_fallbacks"]:
        return "traced call ran eagerly (no trace fits)"
    found = compare_outputs(want, got, values, "traced output")
    if found or grad is None:
        return found
    return _grad_reason(got, _rebuild(args, iter(fresh)), grad, values, "traced gradient")


def _torch_accepts(entry: Entry, s) -> bool:
    """Whether PyTorch runs an error input without raising (an input the OpInfo lists
    for the op's relatives: clamp_min(tensor, 2))."""
    try:
        _call(entry.opinfo.op, (s.input, s.args, s.kwargs))
    except Exception:  # noqa: BLE001 — the expected outcome
        return False
    return True


def check_errors(entry: Entry) -> list[Result]:
    """Error parity: tracejit raises the exception type PyTorch raises on each error input."""
    results = []
    if entry.opinfo.error_inputs_func is None:
        return results
    try:
        error_inputs = list(entry.opinfo.error_inputs("cpu"))
    except Exception as err:  # noqa: BLE001
        return [Result("errors", "-", 0, skipped=f"error inputs raise {describe(err)}")]
    for k, ei in enumerate(error_inputs):
        s = ei.sample_input
        if entry.is_method and not _is_torch(s.input):
            # PyTorch's unbound method rejects a non-tensor self; a Python method cannot
            results.append(Result("errors", "-", k, skipped="self is not a tensor"))
            continue
        try:
            args = to_tracejit((s.input, s.args, s.kwargs))
        except NotRepresentable as why:
            results.append(Result("errors", "-", k, skipped=f"sample holds {why}"))
            continue
        if _torch_accepts(entry, s):
            results.append(Result("errors", "-", k, skipped="PyTorch raises no error"))
            continue
        want = ei.error_type.__name__ + (f" ({_NUMBER.sub('N', ei.error_regex)[:80]})"
                                         if ei.error_regex else "")
        if not _is_torch(s.input):
            want += f" for a Python {type(s.input).__name__} input"
        try:
            _call(entry.call, args)
        except ei.error_type:
            results.append(Result("errors", "-", k))
        except Exception as err:  # noqa: BLE001
            results.append(Result("errors", "-", k, f"raises {type(err).__name__} where "
                                                    f"PyTorch raises {want}"))
        else:
            results.append(Result("errors", "-", k, f"no error where PyTorch raises {want}"))
    return results


# ---- the CUDA and ONNX columns: one traced sample of each entry, elsewhere ---------------
#
# Both columns run the entry's first sample whose traced check passed (its first float32
# one where there is one: dtypes are tried in DTYPES' order) and compare with tracejit's
# own eager output on the CPU, with the tolerances above.

def traced_sample(runner: Runner, entry: Entry, limit: int | None = None
                  ) -> tuple[str, int] | None:
    """(dtype, index) of the entry's first sample that passes the traced check, or None."""
    for r in runner.results(entry, "traced", limit):
        if r.passed:
            return r.dtype, r.sample
    return None


def _plain(x) -> tuple[str | None, Any]:
    """(dtype name, numpy values) of a tensor (on any device) or an array; (None, x) for
    other values."""
    if _is_tj(x):
        return x.dtype.name, _numpy(x.detach().cpu())
    if isinstance(x, np.ndarray):
        return x.dtype.name, x
    return None, x


def compare_runs(want: list, got: list, values: bool = True, what: str = "output"
                 ) -> str | None:
    """How another run's outputs `got` (tensors, arrays, Python values) differ from
    tracejit's eager outputs `want` (leaves, in order), or None."""
    if len(want) != len(got):
        return f"{what}: {len(got)} values, eager {len(want)}"
    for k, (a, b) in enumerate(zip(want, got)):
        name = what if len(want) == 1 else f"{what} {k}"
        (da, va), (db, vb) = _plain(a), _plain(b)
        if (da is None) != (db is None):
            return f"{name}: {type(b).__name__}, eager {type(a).__name__}"
        if da is None:
            try:
                same = bool(va == vb) or (isinstance(va, float) and isinstance(vb, float)
                                          and np.isnan(va) and np.isnan(vb))
            except Exception:  # noqa: BLE001 — values that do not compare: different
                same = False
            if not same:
                return f"{name}: {type(vb).__name__} {vb!r}, eager {type(va).__name__} {va!r}"
            continue
        if da != db:
            return f"{name}: dtype {db}, eager {da}"
        va, vb = np.asarray(va), np.asarray(vb)
        if va.dtype.kind == "f" and va.dtype.itemsize < 4:
            va, vb = va.astype(np.float64), vb.astype(np.float64)
        if not values:
            va, vb = np.zeros(va.shape), np.zeros(vb.shape)
        found = _mismatch(va, vb, da, TOLERANCE, name)
        if found:
            return found
    return None


def _eager(entry: Entry, args) -> tuple[list, Any]:
    """The sample's tensors (detached) and tracejit's eager output on fresh copies of them
    (an in-place op leaves the originals as they were)."""
    tensors = [t.detach() for t in _tensors(args, _is_tj, [])]
    with tj.no_grad():
        return tensors, _program(entry, args)(*[t.clone() for t in tensors])


def _short(text: str, n: int = 110) -> str:
    """A reason cut to n characters: a closing parenthesis that does not fit goes first."""
    text = " ".join(text.split())
    if len(text) > n:
        text = re.sub(r" \([^()]*\)$", "", text)
    return text if len(text) <= n else text[:n - 3].rstrip() + "..."


def _raised(err: BaseException, n: int = 110) -> str:
    """An exception as a cell's reason: `describe`'s, with room for a longer line."""
    text = _NUMBER.sub("N", (str(err).strip().splitlines() or [""])[0])
    text = re.sub(r"Expected all tensors to be on the same device, but found at least two "
                  r"devices, (\S+) and (\S+)!", r"tensors on \1 and \2", text)
    return _short(f"{type(err).__name__}: {text}", n)


def onnx_missing() -> str | None:
    """Why the ONNX column cannot be measured here, or None."""
    lacking = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    return f"{' and '.join(lacking)} not installed" if lacking else None


def _export_reason(err: Exception) -> str:
    """An ExportError as a short reason: the op and why, without source lines."""
    text = str(err).strip().splitlines()[0].split(", so ")[0]
    text = re.split(r"(?<!\.)\.\s+(?=[A-Z`])", text)[0]  # its first sentence
    # a value guard: "read a tensor's value at <line> (item == 0.5)"
    text = re.sub(r"value at .*? \((\w+) == .*$", r"value (\1)", text)
    text = re.sub(r"\s*\(at [^()]*\)| at (an unknown line|<[^>]*>:\d+|\S+:\d+)", "", text)
    return _short(re.sub(r"^cannot export (program: )?", "", text))


def _ort_reason(err: Exception) -> str:
    """An onnxruntime error as a short reason: its status and first words."""
    text = str(err).strip()
    m = re.search(r"\[ONNXRuntimeError\] : \d+ : (\w+) : (.*)", text, re.S)
    if not m:
        return _raised(err, 90)
    detail = re.split(r"\s/\S+\.(?:cc|h):\d+|\s\S+::\S+\(", m[2])[0]
    return _short(f"{m[1]}: {detail.rstrip(' :')}", 90)


def _eager_call(entry: Entry, sample):
    """(tracejit arguments, their tensors, eager's result) of a sample, or the cell that
    says why there are none."""
    try:
        args = to_tracejit((sample.input, sample.args, sample.kwargs))
    except NotRepresentable as why:
        return f"no: sample holds {why}"
    try:
        tensors, want = _eager(entry, args)
    except Exception as err:  # noqa: BLE001
        return f"no: eager raises {_raised(err)}"
    return args, tensors, want


def onnx_cell(entry: Entry, sample) -> str:
    """The ONNX column of one sample: its traced call exported with `tj.onnx.export` and
    run in onnxruntime, against tracejit's eager output."""
    import onnxruntime as ort

    ExportError = _lowering.ExportError

    called = _eager_call(entry, sample)
    if isinstance(called, str):
        return called
    args, tensors, want = called
    leaves = _leaves(want, _is_tj)
    others = [x for x in leaves if not _is_tj(x)]
    if others:
        return f"no: returns a Python {type(others[0]).__name__} (a model returns tensors)"
    try:
        model = tj.onnx.export(_program(entry, args), tuple(t.clone() for t in tensors))
    except ExportError as err:
        return f"no: {_export_reason(err)}"
    except Exception as err:  # noqa: BLE001 — the exporter's own failure is the finding
        return f"no: export raises {_raised(err)}"
    if len(model.graph.output) != len(leaves):
        return f"no: the model has {len(model.graph.output)} outputs, the call {len(leaves)}"
    options = ort.SessionOptions()
    options.log_severity_level = 4  # the failure is reported here, not logged
    try:
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        if len(names) != len(tensors):
            return f"no: the model takes {len(names)} inputs, the call {len(tensors)}"
        got = session.run(None, dict(zip(names, [t.numpy() for t in tensors])))
    except Exception as err:  # noqa: BLE001
        return f"no: onnxruntime {_ort_reason(err)}"
    found = compare_runs(leaves, list(got), compares_values(entry, sample), "onnxruntime")
    return f"no: {found}" if found else "yes"


def cuda_cell(entry: Entry, sample) -> str:
    """The CUDA column of one sample: its call traced with its tensors on the device (the
    `cuda` backend: fused CUDA kernels, the other ops as eager device kernels or through
    the host), against tracejit's eager output on the CPU. Runs where Numba's CUDA target
    (or its simulator) is: see CudaColumn."""
    called = _eager_call(entry, sample)
    if isinstance(called, str):
        return called
    args, tensors, want = called
    inp, rest, kwargs = args
    device_kw = kwargs.get("device") == "cpu"  # a factory's device=: the device's instead
    if not tensors and not device_kw:
        return "-"  # no tensor and no device= argument: nothing goes to the device
    program = _program(entry, (inp, rest, dict(kwargs, device="cuda")) if device_kw
                       else args)
    try:
        traced = tj.trace(program, tuple(t.cuda() for t in tensors))
        before = Counter(STATS["host"])
        got = traced(*[t.cuda() for t in tensors])
    except Exception as err:  # noqa: BLE001
        return f"no: raises {_raised(err)}"
    if traced.stats["eager_fallbacks"]:
        return "no: ran eagerly (no trace fits)"
    got = _leaves(got, _is_tj)
    on_cpu = [k for k, t in enumerate(got) if _is_tj(t) and t.device.type != "cuda"]
    if on_cpu:
        return f"no: output {on_cpu[0]} on the CPU" if len(got) > 1 else "no: output on the CPU"
    found = compare_runs(_leaves(want, _is_tj), got, compares_values(entry, sample))
    if found:
        return f"no: {found}"
    host = sorted(Counter(STATS["host"]) - before)
    return f"host: {', '.join(host)}" if host else "yes"


class CudaColumn:
    """The CUDA column, computed in a process of its own on Numba's CUDA simulator (which
    must be switched on before Numba's first import: NUMBA_ENABLE_CUDASIM=1), while this
    process goes on: `submit` each entry's traced sample as it is known, `cells()` waits
    for the cells. `cells()` says "n/a" (and `missing` why) where the simulator cannot run."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="tracejit-opinfo-cuda-")
        self._out = os.path.join(self._dir.name, "cells.jsonl")
        self._log = open(os.path.join(self._dir.name, "log.txt"), "w+")  # noqa: SIM115
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", TRACEJIT_BACKEND="interpret",
                   TRACEJIT_BACKGROUND_COMPILE="0")
        self.missing: str | None = None
        self._asked: list = []
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tracejit.testing.opinfo", "--cuda-worker", self._out],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT, env=env,
            text=True)

    def submit(self, eid: str, chosen: tuple[str, int] | None) -> None:
        self._asked.append(eid)
        if chosen is None or self._proc.poll() is not None:
            return
        try:
            self._proc.stdin.write(json.dumps([eid, *chosen]) + "\n")
            self._proc.stdin.flush()
        except OSError:  # the process ended: cells() says why
            pass

    def cells(self, timeout: float = 900) -> dict:
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            self.missing = f"the simulator's process ran past {timeout:.0f} s"
        got = {}
        if os.path.exists(self._out):
            with open(self._out) as f:
                for line in f:
                    if line.endswith("\n"):
                        eid, cell = json.loads(line)
                        got[eid] = cell
        self._log.seek(0)
        log = self._log.read().strip().splitlines()
        self._log.close()
        self._dir.cleanup()
        if got.get(None):  # the worker's first line: why it cannot run
            self.missing = got.pop(None)
        elif self._proc.returncode and not self.missing:
            self.missing = "the simulator's process failed" + (f" ({_short(log[-1], 80)})"
                                                               if log else "")
        return {eid: got.get(eid, "n/a" if self.missing else "-") for eid in self._asked}


def cuda_worker(path: str) -> int:
    """The CUDA column's process: reads `[entry id, dtype, index]` lines from stdin and
    appends `[entry id, cell]` lines to `path` (a first `[null, why]` line when Numba's
    CUDA target cannot run here)."""
    warnings.simplefilter("ignore")
    with open(path, "w") as out:
        if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
            out.write(json.dumps([None, "NUMBA_ENABLE_CUDASIM=1 is not set"]) + "\n")
            return 1
        try:
            available = tj.cuda.is_available()
        except Exception as err:  # noqa: BLE001
            available, why = False, describe(err)
        else:
            why = "Numba's CUDA simulator is not available"
        if not available:
            out.write(json.dumps([None, why]) + "\n")
            return 1
        runner, ents = Runner(), entries()
        for line in sys.stdin:
            eid, dtype, index = json.loads(line)
            try:
                sample = runner._sample(ents[eid], dtype, index)
                cell = "-" if sample is None else cuda_cell(ents[eid], sample)
            except Exception as err:  # noqa: BLE001
                cell = f"n/a: {_raised(err)}"
            out.write(json.dumps([eid, cell]) + "\n")
            out.flush()
    return 0


def cause(reason: str) -> str:
    """A failure reason without the word saying it was the traced call's, so that eager and
    traced failures of one cause count together."""
    return re.sub(r"^(trace |traced )(?!call)", "", reason)


def failure_summary(results: list[Result]) -> str:
    """The distinct failure reasons of some results, most common first, with the first
    sample (dtype and index) showing each."""
    first: dict = {}
    counts = Counter(r.reason for r in results if r.reason)
    for r in results:
        if r.reason and r.reason not in first:
            first[r.reason] = f"{r.dtype} sample {r.sample}"
    return "; ".join(f"{reason} (x{n}, first: {first[reason]})"
                     for reason, n in counts.most_common())


# ---- the coverage table --------------------------------------------------------------------

def _rate(results: list[Result]) -> tuple[int, int]:
    counted = [r for r in results if r.skipped is None]
    return sum(r.passed for r in counted), len(counted)


def _cell(passed: int, total: int) -> str:
    return "-" if total == 0 else f"{passed}/{total} ({100 * passed / total:.0f}%)"


def coverage(limit: int | None = None, backend: str = "interpret", select=None,
             progress=None, on_entry=None) -> dict:
    """Every entry's results per check: {entry id: {check: [Result]}}. `on_entry(runner,
    entry)` is called after each entry's checks (Columns.add: its traced sample)."""
    runner = Runner(backend)
    out = {}
    for eid, entry in entries().items():
        if select and not re.search(select, eid):
            continue
        start = time.perf_counter()
        out[eid] = {c: runner.results(entry, c, limit) for c in checks_of(entry)}
        if on_entry:
            on_entry(runner, entry)
        if progress:
            progress(f"{eid}: {time.perf_counter() - start:.1f} s")
    return out


class Columns:
    """The CUDA and ONNX columns of the entries `coverage` checks: `add` (coverage's
    on_entry) runs each entry's traced sample in onnxruntime here and hands it to the
    simulator's process (CudaColumn), which works meanwhile; `finish` collects the cells.
    onnx=False or cuda=False leaves a column out ("n/a", `missing` saying why)."""

    def __init__(self, limit: int | None = None, onnx: bool = True, cuda: bool = True):
        self.limit = limit
        self.missing = {"ONNX": onnx_missing() if onnx else "left out of this run",
                        "CUDA": None if cuda else "left out of this run"}
        self.cells: dict = {"CUDA": {}, "ONNX": {}}
        self.seconds = {"CUDA": 0.0, "ONNX": 0.0}  # ONNX: its checks; CUDA: the wait
        self._cuda = CudaColumn() if cuda else None

    def add(self, runner: Runner, entry: Entry) -> None:
        chosen = traced_sample(runner, entry, self.limit)
        if self._cuda is not None:
            self._cuda.submit(entry.id, chosen)
        else:
            self.cells["CUDA"][entry.id] = "n/a"
        start = time.perf_counter()
        if self.missing["ONNX"]:
            cell = "n/a"
        elif chosen is None:
            cell = "-"
        else:
            try:
                cell = onnx_cell(entry, runner._sample(entry, *chosen))
            except Exception as err:  # noqa: BLE001 — onnx's own failure is a finding
                cell = f"no: {_raised(err)}"
        self.cells["ONNX"][entry.id] = cell
        self.seconds["ONNX"] += time.perf_counter() - start

    def finish(self) -> Columns:
        if self._cuda is not None:
            start = time.perf_counter()
            self.cells["CUDA"] = self._cuda.cells()
            self.missing["CUDA"] = self._cuda.missing
            self.seconds["CUDA"] = time.perf_counter() - start
            self._cuda = None
        return self


COLUMNS = ("CUDA", "ONNX")


def _tally(cells: dict) -> str:
    """A column's cells counted by kind: yes, host, no, -, n/a."""
    kinds = Counter(c.split(":")[0] for c in cells.values())
    return ", ".join(f"{kind} {kinds[kind]}" for kind in ("yes", "host", "no", "-", "n/a")
                     if kinds[kind])


def markdown(cov: dict, limit: int | None, backend: str = "interpret",
             columns: Columns | None = None) -> str:
    """The coverage table of `coverage()`'s results, as docs/ops.md has it, with the CUDA
    and ONNX columns of `columns` (None: "n/a")."""
    import torch

    ents = entries()
    if columns is None:
        columns = Columns(onnx=False, cuda=False)
    cells = {col: {eid: columns.cells[col].get(eid, "n/a") for eid in cov} for col in COLUMNS}
    totals = {c: [0, 0] for c in CHECKS}
    reasons: Counter = Counter()
    reason_ops: dict = defaultdict(set)
    for eid, by_check in cov.items():
        for check, results in by_check.items():
            p, n = _rate(results)
            totals[check][0] += p
            totals[check][1] += n
            for r in results:
                if r.reason:
                    reasons[cause(r.reason)] += 1
                    reason_ops[cause(r.reason)].add(eid)
    clean = sum(all(_rate(rs)[0] == _rate(rs)[1] for rs in by.values()) for by in cov.values())
    matched = {e.opinfo.name for e in ents.values()}
    unmatched = sorted({o.name for o in op_db()} - matched)
    lines = [
        "# Op coverage against PyTorch's OpInfo samples",
        "",
        "Generated by `python -m tracejit.testing.opinfo --markdown docs/ops.md` "
        f"(PyTorch {torch.__version__.split('+')[0]}; traced calls on the "
        f"`{backend}` backend; "
        + ("every sample" if limit is None else f"the first {limit} samples of each dtype")
        + "). Do not edit by hand.",
        "",
        "Each OpInfo of `torch.testing._internal.common_methods_invocations.op_db` whose name "
        "(or an alias) tracejit exposes (in `tracejit`, `tracejit.nn.functional`, or as a "
        "Tensor method) runs its samples for the dtypes "
        f"{', '.join(DTYPES)} where PyTorch supports them. A sample passes *eager* when "
        "tracejit's outputs have PyTorch's structure, dtypes, shapes, NaN positions and "
        "values; *grad* when the gradients of the float inputs for a random cotangent match; "
        "*traced* when `tj.trace` of the same call gives the same values and gradients; "
        "*errors* when tracejit raises the exception type PyTorch raises on the OpInfo's "
        "error inputs. *fused*: the op table has a scalar expression for the op "
        "(`OPS[name].expr`), *composite*: the op is built from primitives. Samples tracejit "
        "cannot represent (dtypes it lacks) are not counted. tests/test_opinfo.py checks "
        "the same samples; the differences listed below are its strict xfails.",
        "",
        "*CUDA* and *ONNX* run one sample per op: the first that passes *traced* (a float32 "
        "one where there is one), compared with tracejit's own eager output on the CPU "
        "(the tolerances of *eager*); `-`: no sample passes *traced*. *CUDA*: the call "
        "traced with the sample's tensors on the CUDA device (a factory's `device=` "
        "saying `cuda`), on the `cuda` backend: fused regions as CUDA kernels "
        "(`backends/cuda/kernels.py`), other ops as eager device kernels "
        "(`tracejit/tensor/device.py`) or, where they have none, through the host. It runs "
        "on Numba's CUDA simulator (`NUMBA_ENABLE_CUDASIM=1`, in a process of its own), "
        "not on GPU hardware: it checks that the kernels are generated, launched and "
        "compute the values, not their speed. `yes`: the outputs are on the device and "
        "equal the CPU's, every op on the device; `host: <ops>`: equal, but those ops "
        "copied their operands to the host and back (no device kernel for them yet, "
        "counted in `tj.cuda.stats()['host_round_trips']`); `no: <reason>`: the call "
        "raises, runs eagerly, leaves an output on the CPU or differs; `-` also where the "
        "sample has no tensor and no `device=` to put on the device"
        + (f". Not measured here: {columns.missing['CUDA']} (cells `n/a`)"
           if columns.missing["CUDA"] else "")
        + ". *ONNX*: the traced call exported with `tj.onnx.export` (docs/export.md) and "
        "run in onnxruntime (CPU); `yes`: its outputs equal eager's; `no: <reason>`: the "
        "exporter refuses (its `ExportError`: an op without a lowering, a trace that read "
        "a tensor's value), onnxruntime fails, or the values differ"
        + (f". Not measured here: {columns.missing['ONNX']} (cells `n/a`)"
           if columns.missing["ONNX"] else "") + ".",
        "",
        "## Summary",
        "",
        f"- OpInfos in PyTorch's database: {len(op_db())}; matched a tracejit name: "
        f"{len(ents)} ({len(matched)} distinct op names)",
        f"- OpInfos with every sample passing: {clean} of {len(cov)}",
    ]
    for check in CHECKS:
        p, n = totals[check]
        rates = [p / n for p, n in (_rate(by[check]) for by in cov.values() if check in by)
                 if n]
        lines.append(f"- {check}: {_cell(p, n)} of samples; mean pass rate per op "
                     f"{100 * sum(rates) / len(rates):.1f}% over {len(rates)} ops" if n
                     else f"- {check}: no samples")
    lines += [f"- CUDA (on Numba's CUDA simulator), ops: {_tally(cells['CUDA'])}",
              f"- ONNX (in onnxruntime), ops: {_tally(cells['ONNX'])}"]
    lines += ["", "## Most common failure reasons", "",
              "Eager and traced failures of the same cause counted together.", "",
              "| checks failed | reason | ops |", "|---|---|---|"]
    for reason, n in reasons.most_common(15):
        ops = sorted(reason_ops[reason])
        lines.append(f"| {n} | {_md(reason)} | {len(ops)}: {', '.join(ops[:8])}"
                     f"{f' (+{len(ops) - 8})' if len(ops) > 8 else ''} |")
    lines += ["", "## Per op", "",
              "| op | found as | eager | grad | traced | errors | fused | CUDA | ONNX |",
              "|---|---|---|---|---|---|---|---|---|"]
    for eid, by_check in cov.items():
        rates = [_cell(*_rate(by_check[c])) if c in by_check else "-" for c in CHECKS]
        lines.append(f"| {eid} | `{ents[eid].where}` | " + " | ".join(rates)
                     + f" | {ents[eid].fused} | "
                     + " | ".join(_md(cells[col][eid]) for col in COLUMNS) + " |")
    lines += _column_reasons(cells)
    lines += ["", "## Why samples fail", "",
              "Per op and check: the known reason (the test's xfail), then each failure "
              "class with its sample count.", ""]
    for eid, by_check in cov.items():
        parts = []
        for check, results in by_check.items():
            counts = Counter(r.reason for r in results if r.reason)
            if not counts and (eid, check) not in KNOWN_FAILURES:
                continue
            known = KNOWN_FAILURES.get((eid, check))
            parts.append(f"  - {check}" + (f": {_md(known)}" if known else "") + "".join(
                f"\n    - {n} x {_md(r)}" for r, n in counts.most_common()))
        if parts:
            lines.append(f"- **{eid}**")
            lines += parts
    skipped: Counter = Counter()
    skipped_ops: dict = defaultdict(set)
    for eid, by_check in cov.items():
        for r in (r for rs in by_check.values() for r in rs if r.skipped):
            skipped[r.skipped] += 1
            skipped_ops[r.skipped].add(eid)
    if skipped:
        lines += ["", "## Samples not compared", "",
                  "Checks of samples holding what tracejit has no counterpart for, by cause; "
                  "an op whose row shows `-` for every check had no other samples.", ""]
        lines += [f"- {n} x {_md(s)}: {', '.join(sorted(skipped_ops[s]))}"
                  for s, n in skipped.most_common()]
    lines += ["", "## OpInfos tracejit does not expose", "",
              ", ".join(f"`{n}`" for n in unmatched)]
    if NAME_CLASHES:
        lines += ["", "Names tracejit uses for something else: " + "; ".join(
            f"`{n}` ({why})" for n, why in NAME_CLASHES.items())]
    return "\n".join(lines) + "\n"


def _column_reasons(cells: dict) -> list[str]:
    """The CUDA and ONNX cells other than `yes`, by reason (CUDA's host round trips by
    op), each with its ops."""
    lines = []
    for col in COLUMNS:
        why: dict = defaultdict(list)
        for eid, cell in cells[col].items():
            if cell.startswith("host: "):
                for op in cell[len("host: "):].split(", "):
                    why[f"`{op}` through the host"].append(eid)
            elif cell.startswith("no: "):
                why[cell[len("no: "):]].append(eid)
        if why:
            lines += ["", f"## {col}: why not `yes`", ""]
            lines += [f"- {len(ops)} x {_md(reason)}: {', '.join(ops)}"
                      for reason, ops in sorted(why.items(), key=lambda kv: -len(kv[1]))]
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracejit.testing.opinfo",
                                     description=__doc__)
    parser.add_argument("--markdown", metavar="PATH", help="write the coverage table here")
    parser.add_argument("--samples", type=int, default=None,
                        help="samples per dtype (default: all)")
    parser.add_argument("--ops", metavar="REGEX", help="only the entries matching this")
    parser.add_argument("--backend", default="interpret", help="the traced calls' backend")
    parser.add_argument("-v", "--verbose", action="store_true", help="time of each op")
    parser.add_argument("--no-cuda", action="store_true", help="leave the CUDA column out")
    parser.add_argument("--no-onnx", action="store_true", help="leave the ONNX column out")
    parser.add_argument("--cuda-worker", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cuda_worker:  # the CUDA column's own process (CudaColumn)
        return cuda_worker(args.cuda_worker)
    warnings.simplefilter("ignore")  # PyTorch's and numpy's warnings about the samples
    start = time.perf_counter()
    columns = Columns(args.samples, onnx=not args.no_onnx, cuda=not args.no_cuda)
    cov = coverage(args.samples, args.backend, args.ops,
                   progress=(lambda s: print(s, file=sys.stderr)) if args.verbose else None,
                   on_entry=columns.add)
    text = markdown(cov, args.samples, args.backend, columns.finish())
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    summary = text.split("## Most common failure reasons")[0].split("## Summary")[1]
    print(summary.strip())
    print(f"({time.perf_counter() - start:.0f} s; the ONNX column {columns.seconds['ONNX']:.0f}"
          f" s, then {columns.seconds['CUDA']:.0f} s waiting for the CUDA column)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
