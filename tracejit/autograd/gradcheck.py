"""`gradcheck`: compare autograd's Jacobian with central finite differences."""
from __future__ import annotations

import warnings

import numpy as np

from ..tensor.engine import grad as autograd_grad
from ..tensor.tensor import Tensor


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """True if autograd's gradients of `fn` at `inputs` match finite differences.

    Use float64 inputs with requires_grad=True:
    >>> x = tj.randn(3, dtype=tj.float64, requires_grad=True)
    >>> tj.autograd.gradcheck(lambda x: (x * x).sum(), (x,))
    True
    """

    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    for i in diff:
        if inputs[i].dtype.name != "float64":
            warnings.warn(f"gradcheck: input {i} is {inputs[i].dtype.name}, not float64; "
                          "finite differences may be too imprecise", stacklevel=2)
    outputs = _as_tuple(fn(*inputs))
    for k, out in enumerate(outputs):
        if not isinstance(out, Tensor) or not out.is_floating_point():
            continue
        n_out = out.numel()
        for i in diff:
            x = inputs[i]
            numeric = np.zeros((x.numel(), n_out))
            flat = x._data.reshape(-1)
            for j in range(x.numel()):  # fn may differentiate inside: keep grad mode
                orig = flat[j]
                flat[j] = orig + eps
                plus = _as_tuple(fn(*inputs))[k]._data.astype(np.float64).ravel()
                flat[j] = orig - eps
                minus = _as_tuple(fn(*inputs))[k]._data.astype(np.float64).ravel()
                flat[j] = orig
                numeric[j] = (plus - minus) / (2 * eps)
            analytic = np.zeros((x.numel(), n_out))
            if out.requires_grad:
                for m in range(n_out):
                    seed = np.zeros(n_out, out._data.dtype)
                    seed[m] = 1
                    g, = autograd_grad(out, x, Tensor._make(seed.reshape(out._data.shape)),
                                       retain_graph=True, allow_unused=True)
                    if g is not None:
                        analytic[:, m] = g._data.reshape(-1)
            if not np.allclose(analytic, numeric, rtol=rtol, atol=atol):
                worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), analytic.shape)
                msg = (f"Jacobian mismatch for output {k} with respect to input {i}:\n"
                       f"numerical:{numeric}\nanalytical:{analytic}\n"
                       f"largest difference at {worst}: {numeric[worst]} vs {analytic[worst]}")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True
