"""The differential fuzzer: a fixed-seed slice of random programs, each traced and called
again with other inputs, agrees with eager on values, gradients, exceptions, requires_grad
and aliasing, on both backends (`python -m tracejit fuzz --n N --seed S` runs more)."""
from __future__ import annotations

import pytest

from tracejit.testing.fuzz import format_mismatch, fuzz, generate


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_fixed_seed_slice_has_no_mismatches(backend):
    report = fuzz(60, seed=1000, backends=(backend,))[backend]
    assert report.calls >= 250  # programs that fail eagerly on their example are few
    assert not report.mismatches, "\n\n".join(format_mismatch(m)
                                               for m in report.mismatches[:3])


def test_programs_are_deterministic_and_cover_the_dimensions():
    assert generate(7).source == generate(7).source
    sources = "\n".join(generate(s).source for s in range(300))
    for feature in (".item()", "if ", "range(x.shape[0]", "range(int(", " G", " C", "GT",
                    "self.scale", ".add_(", "INNER(", "d['x']", "[0] =", ".detach()",
                    "@ W", "x.shape[0] ** 2", "(x.shape[0] - 1) // 2", "view(-1)"):
        assert feature in sources, feature
    dtypes = {generate(s).dtype for s in range(300)}
    assert dtypes == {"float16", "float32", "float64"}
