"""The op table: one `OpDef` per primitive, holding every rule about it.

Eager dispatch, autograd, tracing, the IR interpreter and the code generators
all read these entries; no other module keeps a table keyed by op name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from ..core import dtypes as dt


class AVal(NamedTuple):
    """Abstract value: what a shape rule knows about a tensor."""

    shape: tuple
    dtype: dt.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


# kinds of op; code generators group ops by kind
ELEMENTWISE = "elementwise"
REDUCE = "reduce"
SCAN = "scan"          # running reductions along one dim (cumsum, cumprod)
SHAPE = "shape"        # views and other data movement
INDEX = "index"
LINALG = "linalg"
CREATION = "creation"
RANDOM = "random"

# how an elementwise op derives its dtypes from its inputs
PROMOTE = "promote"    # compute and return the promoted dtype
FLOAT = "float"        # promote, then integers compute in the default float
COMPARE = "compare"    # compute in the promoted dtype, return bool
LOGICAL = "logical"    # compute in and return bool


@dataclass(frozen=True)
class Loops:
    """An op as one loop nest over arrays, for the ops a kernel plan cannot express (a
    gather through window offsets, the sum of overlapping windows).

    `body(*args)` is plain Python over numpy arrays and numbers, writing its outputs in
    place: loops, indexing, arithmetic, `prange` (numba's; `range` outside a compiled
    kernel) over the loop whose iterations may run on threads (each writes its own
    elements). It is device-neutral source: the Numba CPU backend compiles it as it is
    (a threaded and a serial twin, in the disk cache, in the background), and it runs
    uncompiled in the tests as the oracle's twin. `args(*arrays, **attrs)` makes the
    outputs and the body's arguments for one call — (outputs, args) — or returns None
    where the body does not apply (a dtype it does not handle): impl runs then, as it
    does in eager execution, on the interpreter and while the body compiles.

    Besides arithmetic a body may call what ops/looplang.py names (`gemm`, a matrix
    product) and its `helpers`: functions of numbers in the same language (a stable
    sigmoid), compiled with it."""

    body: Callable
    args: Callable
    helpers: tuple = ()


@dataclass(eq=False, slots=True)
class OpDef:
    """Everything tracejit knows about one primitive.

    impl(*arrays, **attrs) -> ndarray       numpy implementation
    infer(*avals, **attrs) -> AVal          shape/dtype rule (no data)
    vjp(g, out, *inputs, **attrs) -> tuple  gradient per input, written in
        tracejit ops so it runs eagerly, traces into backward graphs and
        differentiates again for higher-order gradients. Inputs the op does
        not save arrive as shape/dtype-only stand-ins; `out` is None unless
        `save_out`.
    expr                                    what one element computes, for the
        code generators: an expression of ops/scalar.py over the operands X, Y, Z
        (IDENTITY for view ops that are the identity on the element a kernel
        reads: detach, expand), or a function of the op's attributes returning one
        (clamp's bounds); None: no kernel computes it per element
    monoid                                  reductions: how elements combine
        (ops/scalar.py: SUM, MEAN, PROD, MAX, MIN); None: not a fusable reduction
    loops                                   an op no plan expresses (im2col, col2im) as
        a loop nest over arrays (`Loops`): compiled backends run it instead of impl
    saves / save_out                        which inputs (and whether the output)
        the vjp reads: these are kept alive and version-checked
    """

    name: str
    kind: str
    impl: Callable[..., Any]
    infer: Callable[..., AVal]
    vjp: Callable[..., tuple] | None = None
    saves: tuple[int, ...] = ()
    save_out: bool = False
    expr: Any = None             # Expr, attrs -> Expr, or None (above)
    monoid: Any = None           # Monoid or None (above)
    dtype_rule: str = PROMOTE
    grad_name: str = ""
    grad_inputs: tuple | None = None  # inputs PyTorch's node lists in next_functions (the
                                      # differentiable ones of its schema); None: all
    autocast: str | None = None  # under autocast (tracejit.amp): "low" runs in the region's
                                 # low precision, "fp32" in float32, "fp32 cuda" in float32
                                 # on CUDA only (PyTorch's CPU and CUDA op lists)
    scalar_edges: bool = True    # a Python scalar operand is listed as (None, 0), as
                                 # PyTorch's Tensor overloads wrap it (False: a Scalar
                                 # overload, as pow's and remainder's)
    arity: int = 1
    save_when: dict | None = None  # {saved input: inputs whose gradient needs it}; save
                                   # only when one of those requires grad (as PyTorch does)
    meta_inputs: bool = True     # vjp reads shape/dtype/requires_grad of unsaved inputs
    promote_attrs: tuple = ()    # scalar attributes that take part in type promotion
    # algebraic facts the simplifier uses
    right_identity: float | None = None  # op(x, c) == x for this scalar c (x + 0, x * 1)
    left_identity: float | None = None   # op(c, x) == x (0 + x, 1 * x)
    involution: bool = False     # op(op(x)) == x with the same attributes (neg, transpose)
    noop: object = None          # "same_type": a no-op when the output type equals the
                                 # input's; or attrs -> bool (permute by identity dims)
    discontinuous: bool = False  # jumps (sign, floor, a threshold): a last-bit change of
                                 # an input can change the result (comparisons are too)
    view: bool = False           # result may alias the first input's memory
    data_dependent: bool = False  # output size depends on input values (shape rule: None)
    checks_indices: bool = False  # raises for out-of-range values of its index tensors (no
                                  # shape rule can tell): kept even when its result is unused
    inplace: Callable | None = None  # writes into its first array (setitem); else copy back
    loops: Loops | None = None   # the op as a loop nest that compiled backends run (below)
    api: tuple = ()              # what the frontend makes of it without a line of its own:
                                 # "function" (tj.NAME), "method" (Tensor.NAME), "inplace"
                                 # (Tensor.NAME_); elementwise ops of one or two operands
    node_cls: type | None = field(default=None, repr=False)
    save_plans: dict = field(default_factory=dict, repr=False)  # cache for eager dispatch

    def scalar(self, attrs: dict):
        """The element expression of one use of the op (its attributes applied)."""
        return self.expr(**attrs) if callable(self.expr) else self.expr

    @property
    def jumps(self) -> bool:
        """Discontinuous: comparisons, and ops marked `discontinuous`."""
        return self.discontinuous or self.dtype_rule == COMPARE

    def __repr__(self) -> str:
        return f"OpDef({self.name})"


class OpTable:
    """Attribute access (`OPS.add`) for speed, item access for names from IR."""

    def __init__(self):
        self._ops: dict[str, OpDef] = {}

    def __getitem__(self, name: str) -> OpDef:
        return self._ops[name]

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def get(self, name: str, default=None):
        return self._ops.get(name, default)

    def __iter__(self):
        return iter(self._ops.values())

    def __len__(self) -> int:
        return len(self._ops)

    def declare(self, op: OpDef) -> OpDef:
        if op.name in self._ops:
            raise ValueError(f"op {op.name!r} is declared twice")
        if not op.grad_name:
            op.grad_name = "".join(p.capitalize() for p in op.name.split("_")) + "Backward0"
        self._ops[op.name] = op
        setattr(self, op.name, op)
        return op


OPS = OpTable()


def register(name: str, kind: str, impl, infer, vjp=None, **kw) -> OpDef:
    """Declare a primitive; see `OpDef` for the meaning of each rule."""
    return OPS.declare(OpDef(name, kind, impl, infer, vjp, **kw))
