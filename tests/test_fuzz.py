"""The differential fuzzer: a fixed-seed slice of random programs, each traced and called
again with other inputs, agrees with eager on values, gradients, exceptions, requires_grad
and aliasing, on both backends (`python -m tracejit fuzz --n N --seed S` runs more)."""
from __future__ import annotations

import numpy as np
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
                    "@ W", "x.shape[0] ** 2", "(x.shape[0] - 1) // 2", "view(-1)",
                    "tj.cat(", "[1:].mul_(", ".t().contiguous()", ".sum(0, keepdim=True)"):
        assert feature in sources, feature
    dtypes = {generate(s).dtype for s in range(300)}
    assert dtypes == {"float16", "float32", "float64"}


def test_rounding_is_told_apart_from_a_wrong_number():
    import tracejit as tj
    from tracejit.testing.differential import compare, outcome, rounding_explains

    x32 = tj.tensor([-4.9, -5.3, 0.5])
    x64 = x32.double()

    def f(x):
        return ((x * 2).tanh() + 1).log()  # ill-conditioned where tanh nears -1

    def nudged(x):  # the same, with tanh one float32 ulp off: rounding, not a bug
        t = (x * 2).tanh()
        return (tj.from_numpy(np.nextafter(t.numpy(), np.float32(0))) + 1).log()

    def wrong(x):
        return ((x * 2).tanh() + 1).log() * 1.01

    eager, reference = outcome(f, (x32,)), outcome(f, (x64,))
    rounded, bad = outcome(nudged, (x32,)), outcome(wrong, (x32,))
    assert compare(eager, rounded) is not None and rounding_explains(eager, rounded, reference)
    assert compare(eager, bad) is not None and not rounding_explains(eager, bad, reference)


# programs the fuzzer once found a mismatch in, kept as they were generated: 7072 updates
# an input after reshaping its transpose (aliasing for a batch of one, a copy otherwise)
# and differentiates a layer norm of it with create_graph (the replayed forward read the
# updated input)
REGRESSIONS = [7072]


@pytest.mark.parametrize("backend", ["interpret", "numba"])
@pytest.mark.parametrize("seed", REGRESSIONS)
def test_programs_that_once_mismatched_agree_with_eager(seed, backend):
    from tracejit.testing.fuzz import run_program

    report = run_program(seed, backend)
    assert report.calls and not report.mismatches, format_mismatch(report.mismatches[0])
