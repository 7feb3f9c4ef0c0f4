"""The script-mode fuzzer: a fixed-seed slice of random `@tj.script` programs (loops with
data-dependent counts, while, break/continue, early returns, branches on tensors and
ints, lists, helpers, closures, globals, modules), each called several times with other
sizes, counts and values, agrees with eager on values, dtypes, shapes, exceptions and
gradients (`python -m tracejit fuzz --script --n N --seed S` runs more)."""
from __future__ import annotations

import re

import pytest

from tracejit.testing import script_fuzz as sf


def test_fixed_seed_slice_has_no_mismatches():
    report = sf.fuzz(40, seed=15, backends=("interpret",))["interpret"]
    assert report.calls >= 160
    assert not report.mismatches, "\n\n".join(sf.format_mismatch(m)
                                               for m in report.mismatches[:3])
    assert not report.refused, report.refused[:3]


def test_programs_are_deterministic_and_cover_the_constructs():
    assert sf.generate(7).source == sf.generate(7).source
    used = set().union(*(sf.generate(s, sf.ALL).constructs for s in range(300)))
    assert used == sf.ALL, sorted(sf.ALL - used)
    sources = "\n".join(sf.generate(s).source for s in range(300))
    for feature in ("for i", "while j", "break", "continue", "return ", ".append(",
                    "tj.stack(", "tj.cat(", "len(hs", "HP(", "self.lin(", "self.scale", "range(n",
                    "range(x.shape[0]", "range(int(", "* C", "* G", "GN", ".sum() > 0",
                    "% 2 == 0", "- 5) % 4", "- 4) // 3"):
        assert feature in sources, feature


# what a construct writes in a program's source, where one mark tells it
MARKS = {"while": r"while ", "break": r"break", "continue": r"continue",
         "helper": r"HP\(", "scripted_helper": r"HS\(", "closure": r" C\b",
         "module": r"class Model", "list": r"hs\d+\.append\(", "out_setitem": r"o\d+\[i\d+\] =",
         "side_effect": r"LOG\.append", "float_index": r"\* 0\.25|/ 4\)", "alias": r"\* 1\.0",
         "list_setitem": r"hs\d+\[.*\] =", "if_tensor": r"\.sum\(\) > 0|\.norm\(\) >"}


@pytest.mark.parametrize("construct", sorted(sf.CONSTRUCTS))
def test_a_construct_switched_off_is_never_used(construct):
    on = sf.ALL - {construct}
    for seed in range(60):
        prog = sf.generate(seed, on)
        assert construct not in prog.constructs
        if construct in MARKS:
            body = prog.source[prog.source.index("def make"):]  # helpers have their own
            assert not re.search(MARKS[construct], body), prog.source


class _Scripted:
    """Stands in for tj.script: runs the function and changes what it returns."""

    def __init__(self, fn, change):
        self.fn, self.change = fn, change

    def __call__(self, *args):
        out = self.fn(*args)
        return (self.change(out[0]),) + tuple(out[1:])


def test_a_wrong_value_is_a_mismatch_with_the_program_and_call(monkeypatch):
    import tracejit as tj

    monkeypatch.setattr(tj, "script", lambda fn, backend: _Scripted(fn, lambda t: t * 1.01))
    report = sf.fuzz(3, seed=15)["interpret"]
    assert len(report.mismatches) == 3 and not report.refused
    seed, backend, call, diff, source = report.mismatches[0]
    assert (seed, backend, call) == (15, "interpret", 0)
    assert "values differ" in diff and source == sf.generate(15).source


@pytest.mark.parametrize("message, refused", [
    ("f.py:3: try/except is not supported in script mode", True),
    ("f.py:3: variable '__tj_ret' is tuple on one path and NoneType on the other", False)])
def test_a_clear_script_error_is_a_refusal_and_one_naming_internals_a_mismatch(
        monkeypatch, message, refused):
    import tracejit as tj

    def script(fn, backend):
        raise tj.jit.ScriptError(message)

    monkeypatch.setattr(tj, "script", script)
    report = sf.fuzz(2, seed=15)["interpret"]
    assert (len(report.refused), len(report.mismatches)) == ((2, 0) if refused else (0, 2))
