"""The mutation check (tracejit/testing/mutations.py, `make mutations`) breaks one thing
at a time: each mutant must still name a file, text in it and tests that exist, or a
moved module would leave it mutating nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracejit.testing.mutations import MUTANTS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("what, path, old, new, tests", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_each_mutant_names_text_that_is_there_and_tests_that_exist(what, path, old, new,
                                                                    tests):
    target = ROOT / path
    assert target.is_file(), f"{what}: {path} is gone"
    assert old in target.read_text(), f"{what}: the text to mutate is not in {path}"
    assert old != new and tests
    for t in tests:
        assert (ROOT / t.split("::")[0]).is_file(), f"{what}: {t} is gone"
