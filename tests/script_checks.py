"""Helpers the script-mode soundness tests share: a scripted function checked call by call
against eager, and the line of a piece of a test program."""
from __future__ import annotations

import inspect

import tracejit as tj
from tracejit.testing.differential import Call, compare, outcome


def agree(fn, *calls: Call, scripted=None, backend: str = "auto"):
    """Script fn (or take `scripted`) and check every call against eager: values,
    gradients, errors, output types, and which outputs are the inputs themselves."""
    sf = scripted or tj.script(fn, backend=backend)
    for k, call in enumerate(calls):
        diff = compare(outcome(fn, *call.fresh()), outcome(sf, *call.fresh()))
        assert diff is None, f"call {k} {call.args}: {diff}"
    return sf


def rg(t):
    return t.requires_grad_()


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)
