"""The `Tensor`: a numpy array plus autograd state (PyTorch semantics).

Math methods are installed by `tracejit.tensor.functional` (one definition per
operation, shared by `tj.exp(x)` and `x.exp()`); this module holds state,
conversion, autograd entry points and printing.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..core import dtypes as dt
from ..core.modes import no_grad, STATE
from . import engine as _engine
from .node import AccumulateGrad, FRESH_VIEW, STALE_VIEWS
from ..ops.rules import normalize_dim
from ..ops import OPS
from ..core.lazy import lazy

_dispatch = lazy("tracejit.tensor.dispatch")  # (it imports this module)

_from_np = dt._BY_NP


class Size(tuple):
    """A tensor's shape (a tuple), printed like PyTorch's `torch.Size`."""

    def __repr__(self) -> str:
        return f"tracejit.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


class device:
    """Where a tensor lives: `device('cpu')` or `device('cuda')`; compares equal to its name."""

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        kind, _, idx = str(spec).partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device "
                               f"string: {spec}")
        self.type = kind
        self.index = int(idx) if idx else index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"


CPU = device("cpu")
CUDA = device("cuda", 0)


def _make(data: np.ndarray) -> "Tensor":
    t = _new(Tensor)
    t._data = data
    t._rg = False
    t.grad_fn = None
    t._vc = None
    t._base = None
    t._output_nr = 0
    return t


def _copy_memory(t: "Tensor", memo: dict):
    """A copy of t's array for a deep copy: a view of a numpy base is laid out over the
    copy of that base (made once per deep copy, kept in `memo` under the base's id), so
    copied views alias as their originals do; any other array is copied alone."""
    a = t._data
    if not isinstance(a, np.ndarray):  # device memory
        with no_grad():
            return t.detach().clone()._data
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is a or not root.flags.c_contiguous:
        return a.copy(order="K")
    copied = memo.get(id(root))
    if copied is None:
        copied = memo[id(root)] = root.copy()
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    try:
        return np.ndarray(a.shape, a.dtype, buffer=copied, offset=offset, strides=a.strides)
    except (TypeError, ValueError):  # a layout the buffer cannot express (negative strides)
        return a.copy(order="K")


_new = object.__new__


class Tensor:
    """An n-dimensional array with optional autograd history.

    >>> x = tj.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward(); x.grad
    tensor([2., 4.])
    """

    __slots__ = ("_data", "_rg", "grad_fn", "_vc", "_base", "_output_nr", "_view", "_accum",
                 "_grad", "_retains", "_views", "__weakref__")
    __array_priority__ = 1000  # numpy defers `ndarray op Tensor` to us

    _make = staticmethod(_make)

    # ---- state -----------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        if STATE.capture is not None:  # tracing: sizes are symbolic (SymInt)
            return STATE.capture.shape_of(self)
        return Size(self._data.shape)

    @property
    def dtype(self) -> dt.dtype:
        return _from_np[self._data.dtype]

    @property
    def device(self) -> device:
        return CPU if isinstance(self._data, np.ndarray) else CUDA

    @property
    def is_cuda(self) -> bool:
        return not isinstance(self._data, np.ndarray)

    @property
    def is_cpu(self) -> bool:
        return isinstance(self._data, np.ndarray)

    # devices and layouts tracejit has no tensors for (PyTorch's queries): always False
    is_xpu = is_mps = is_meta = is_xla = is_ipu = is_hpu = is_mtia = is_maia = is_vulkan = \
        is_mkldnn = is_sparse = is_sparse_csr = is_quantized = is_nested = \
        property(lambda self: False)

    def _host_data(self) -> np.ndarray:
        """The values as a numpy array (copied from the device for a CUDA tensor)."""
        d = self._data
        return d if isinstance(d, np.ndarray) else d.copy_to_host()

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def requires_grad(self) -> bool:
        if STALE_VIEWS and id(self) in STALE_VIEWS:  # a view of a base written since
            FRESH_VIEW[0](self)
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        value = bool(value)
        if STATE.capture is not None and value != self._rg:
            STATE.capture.unsupported("changing requires_grad")
        if self.grad_fn is not None:
            if not value:
                raise RuntimeError("you can only change requires_grad flags of leaf variables. "
                                   "If you want to use a computed variable in a subgraph that "
                                   "doesn't require differentiation use "
                                   "var_no_grad = var.detach().")
            return
        if value and not self.is_floating_point():
            raise RuntimeError("only Tensors of floating point dtype can require gradients "
                               f"(got {self.dtype.name})")
        self._rg = value

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self):
        try:
            return self._grad
        except AttributeError:
            return None

    @grad.setter
    def grad(self, value) -> None:
        if value is not None and tuple(value.shape) != self._data.shape:
            raise RuntimeError(f"assigned grad has data of a different size: expected "
                               f"{list(self._data.shape)}, got {list(value.shape)}")
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        return getattr(self, "_retains", False)

    @property
    def data(self) -> "Tensor":
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        self._data = value._data

    @property
    def _version(self) -> int:
        return 0 if self._vc is None else self._vc[0]

    @property
    def T(self) -> "Tensor":
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self) -> "Tensor":
        return self.transpose(-2, -1)

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        return self.shape[normalize_dim(dim, self._data.ndim, "size")]

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        if STATE.capture is not None:
            n = 1
            for s in self.shape:
                n = n * s
            return n
        return self._data.size

    def element_size(self) -> int:
        return self._data.itemsize

    def is_floating_point(self) -> bool:
        d = self._data.dtype
        return d.kind == "f" or d is dt.BF16_NP

    def is_contiguous(self) -> bool:
        return self._data.flags.c_contiguous

    def data_ptr(self) -> int:
        return self._data.ctypes.data

    # ---- conversion ------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a numpy array sharing memory (like PyTorch, refuses if it needs grad)."""
        if self._rg and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if STATE.capture is not None:
            STATE.capture.escape(self, "numpy()")
        if not isinstance(self._data, np.ndarray):
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                            "Tensor.cpu() to copy the tensor to host memory first.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if STATE.capture is not None:
            STATE.capture.escape(self, "__array__")
        if not isinstance(self._data, np.ndarray):
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                            "Tensor.cpu() to copy the tensor to host memory first.")
        return self._data if dtype is None else self._data.astype(dtype)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               "to Scalar")
        if STATE.capture is not None:
            return STATE.capture.read(self, "item")
        return self._host_data().reshape(()).item()

    def tolist(self):
        if STATE.capture is not None:
            STATE.capture.escape(self, "tolist()")
        return self._host_data().tolist()

    def _scalar(self, kind: str, conv):
        if self._data.size != 1:
            raise RuntimeError(f"only one element tensors can be converted to Python scalars "
                               f"(got {self._data.size} elements for {kind}())")
        if STATE.capture is not None:
            return conv(STATE.capture.read(self, kind))
        data = self._data if isinstance(self._data, np.ndarray) else \
            self._data.copy_to_host()  # a CUDA device array
        return conv(data.reshape(()).item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._data.size} values is "
                               "ambiguous")
        return self._scalar("bool", bool)

    def __float__(self) -> float:
        return self._scalar("float", float)

    def __int__(self) -> int:
        return self._scalar("int", int)

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub":
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return self._scalar("int", int)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        if STATE.capture is not None:
            STATE.capture.read_size(self, 0, "len")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self)))

    def __hash__(self) -> int:
        return id(self)

    def __reduce__(self):
        raise TypeError("tracejit tensors are not pickled; use tj.save / tj.load (.npz files)")

    def __deepcopy__(self, memo: dict) -> "Tensor":
        """`copy.deepcopy`: a leaf with its values in new memory, its requires_grad and a
        copy of its grad (PyTorch's rule). Tensors that share memory (views of one base)
        share the copied memory, as the originals do. Pickling stays refused (see
        __reduce__): the copy never leaves the process.

        >>> w = tj.randn(3, requires_grad=True); w2 = copy.deepcopy(w)
        >>> w2.requires_grad, w2.is_leaf, tj.equal(w, w2), w2.data_ptr() == w.data_ptr()
        (True, True, True, False)
        """
        if id(self) in memo:
            return memo[id(self)]
        if STATE.capture is not None:  # the copy would freeze this call's values
            STATE.capture.unsupported("copy.deepcopy of a tensor")
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment; this tensor has "
                               f"grad_fn {type(self.grad_fn).__name__}. Copy "
                               "tensor.detach() instead.")
        new = _make(_copy_memory(self, memo))
        new._rg = self._rg
        memo[id(self)] = new
        if self.grad is not None:
            new._grad = self.grad.__deepcopy__(memo)
        return new

    # ---- autograd --------------------------------------------------------------------------
    def _grad_accumulator(self, keep: bool = False):
        """This leaf's AccumulateGrad node: held weakly (the graph holds it, and it holds
        the leaf), or for good with `keep` (it carries hooks registered on the leaf)."""
        ref = getattr(self, "_accum", None)
        acc = ref() if type(ref) is weakref.ref else ref
        if acc is None:
            acc = AccumulateGrad(self)
            self._accum = weakref.ref(acc)
        if keep:
            self._accum = acc
        return acc

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        self.requires_grad = requires_grad
        return self

    def detach(self) -> "Tensor":
        """A tensor sharing data (and version counter) with no history."""
        return _dispatch.apply(OPS.detach, self)

    def detach_(self) -> "Tensor":
        if self._base is not None and self._base._rg:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn = None
        self._rg = False
        return self

    def retain_grad(self) -> None:
        """Keep `.grad` for a non-leaf tensor after backward."""
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if STATE.capture is not None:  # a trace's backward keeps no intermediate's .grad
            STATE.capture.unsupported("retain_grad() (call it outside, on an output)")
        if self.grad_fn is None or getattr(self, "_retains", False):
            return
        self._retains = True
        self.grad_fn.retain_output(self._output_nr, self)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor), called after a backward pass has accumulated into this leaf's
        `.grad` (PyTorch's name); returns a handle."""
        if not self._rg or self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors or tensors that do not require grad")
        if STATE.capture is not None:
            STATE.capture.unsupported("register_post_accumulate_grad_hook()")
        return self._grad_accumulator(keep=True).register_hook(hook)

    def register_hook(self, hook):
        """hook(grad) -> Tensor or None, called with this tensor's gradient; returns a handle."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if STATE.capture is not None:  # a compiled backward would not call it
            STATE.capture.unsupported("register_hook() (register hooks outside it, on an "
                                      "input or an output)")
        if self.grad_fn is None:
            return self._grad_accumulator(keep=True).add_tensor_hook(0, hook)
        return self.grad_fn.add_tensor_hook(self._output_nr, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into every leaf's `.grad` (see tj.autograd.backward)."""
        if STALE_VIEWS and id(self) in STALE_VIEWS:  # a view of a base written since
            FRESH_VIEW[0](self)
        fn = self.grad_fn
        if gradient is None and inputs is None and fn is not None and self._data.size == 1 \
                and isinstance(self._data, np.ndarray):
            # loss.backward(): the common case, without the general argument handling
            d = self._data
            _engine.run_backward([(fn, self._output_nr)], [_make(np.ones(d.shape, d.dtype))],
                                   bool(retain_graph) or create_graph, create_graph)
            return
        _engine.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    # ---- printing --------------------------------------------------------------------------
    def __repr__(self) -> str:
        return format_tensor(self)

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0 and spec:
            return format(self._host_data().item(), spec)
        return repr(self)


class FreshTensor(Tensor):
    """A gradient whose array nothing else holds (a compiled backward's own result):
    AccumulateGrad may keep it as `.grad` without copying."""

    __slots__ = ()


def format_tensor(t: Tensor) -> str:
    """`tensor([1., 2.], requires_grad=True)` like PyTorch."""
    a = t._host_data()
    prefix = "tensor("
    if a.size == 0:
        body = "[]" if a.ndim == 1 else f"[], size={tuple(a.shape)}"
    else:
        body = np.array2string(a, separator=", ", prefix=prefix, threshold=1000, edgeitems=3,
                               formatter=_formatter(a), max_line_width=80)
    extras = [] if t.device.type == "cpu" else [f"device='{t.device}'"]
    dtype = _from_np[a.dtype]
    if dtype not in (dt.float32, dt.int64, dt.bool_):
        extras.append(f"dtype={dtype!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._rg:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"


def _formatter(a: np.ndarray):
    """Element format like PyTorch's: 4 decimals, or `1.` for whole numbers, or
    scientific for wide ranges; every element padded to the same width."""
    if a.dtype.kind == "b":
        return {"bool": lambda v: "True" if v else "False"}
    if a.dtype.kind != "f" and a.dtype is not dt.BF16_NP:
        width = max(len(str(v)) for v in (a.min(), a.max()))
        return {"int": lambda v: str(v).rjust(width)}
    finite = np.abs(a[np.isfinite(a)].astype(np.float64))
    nonzero = finite[finite != 0]
    ints = finite.size == 0 or bool(np.all(finite == np.round(finite)))
    sci = nonzero.size > 0 and (nonzero.max() >= 1e8 or nonzero.min() < 1e-4 or
                                nonzero.max() / nonzero.min() > 1000) and not (
        ints and nonzero.max() < 1e8)
    if sci:
        fmt = lambda v: f"{v:.4e}" if np.isfinite(v) else str(v)
    elif ints:
        fmt = lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
    else:
        fmt = lambda v: f"{v:.4f}" if np.isfinite(v) else str(v)
    sample = a.reshape(-1)
    if sample.size > 1000:
        sample = np.concatenate([sample[:3], sample[-3:]])
    width = max(len(fmt(v)) for v in sample)
    return {"float_kind": lambda v: fmt(v).rjust(width)}
