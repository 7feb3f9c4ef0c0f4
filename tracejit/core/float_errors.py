"""Floating-point errors inside ops are results, as in PyTorch: log(0) = -inf, 0/0 = nan,
exp(1000) = inf, with no warning. numpy warns of each; op impls run with its error checks
off for the call only, so the caller's own numpy keeps the error state it set.

    token = quiet()
    try:
        out = op.impl(*arrays)
    finally:
        restore(token)
"""
from __future__ import annotations

import functools

import numpy as np

try:  # numpy 2: the error state is a context variable (set and reset: ~0.1 us each)
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE
except ImportError:  # numpy 1.26: np.seterr, per thread
    _ERRSTATE = None

if _ERRSTATE is not None:
    with np.errstate(all="ignore"):
        _IGNORE_ALL = _ERRSTATE.get()
    # np.errstate itself builds its state on every entry, ~1 us (an eager op costs ~1.5 us)
    quiet = functools.partial(_ERRSTATE.set, _IGNORE_ALL)
    restore = _ERRSTATE.reset
else:
    quiet = functools.partial(np.seterr, all="ignore")

    def restore(token) -> None:
        np.seterr(**token)
