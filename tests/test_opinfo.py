"""PyTorch's OpInfo samples against tracejit, one test per op and check (tracejit/testing/
opinfo.py): forward values, dtypes and shapes; gradients; the traced call and its backward;
the errors PyTorch raises. The default runs the first samples of each dtype; `pytest
--opinfo-full` runs them all. Known differences (KNOWN_FAILURES, listed in docs/ops.md) are
strict xfails: a fix shows as an unexpected pass, and the entry is then removed."""
from __future__ import annotations

import importlib.util
import warnings

import pytest

from conftest import has_opinfo, requires_opinfo

pytestmark = requires_opinfo

if has_opinfo():
    from tracejit.testing import opinfo

    CASES = [pytest.param(eid, check, id=f"{eid}-{check}", marks=[pytest.mark.xfail(
                 strict=True, reason=opinfo.KNOWN_FAILURES[eid, check])]
             if (eid, check) in opinfo.KNOWN_FAILURES else [])
             for eid, entry in opinfo.entries().items() for check in opinfo.checks_of(entry)]
else:
    CASES = [pytest.param(None, None, id="op_db")]


@pytest.fixture(scope="module")
def runner():
    return opinfo.Runner(backend="interpret")


@pytest.mark.parametrize("eid,check", CASES)
def test_opinfo_samples_match_pytorch(eid, check, runner, request):
    entry = opinfo.entries()[eid]
    known = (eid, check) in opinfo.KNOWN_FAILURES
    full = request.config.getoption("--opinfo-full")
    # a known failure looks at every sample until one fails, so that its strict xfail
    # holds whichever samples show the difference
    limit = None if full or known else opinfo.FAST_SAMPLES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's and numpy's warnings about the samples
        results = runner.results(entry, check, limit, until_failure=known)
    failed = [r for r in results if r.reason]
    assert not failed, f"{eid} {check}: {len(failed)} of {len(results)} samples differ " \
                       f"from PyTorch: {opinfo.failure_summary(failed)}"


def test_every_known_failure_names_an_entry_and_check():
    for eid, check in opinfo.KNOWN_FAILURES:
        assert eid in opinfo.entries() and check in opinfo.checks_of(opinfo.entries()[eid])


def test_names_resolve_as_pytorch_spells_them():
    found = {eid: e.where for eid, e in opinfo.entries().items()}
    assert found["add"] == "tracejit.add"
    assert found["nn.functional.relu"] == "tracejit.nn.functional.relu"
    assert found["T"] == "Tensor.T"                          # a property
    assert found["div.trunc_rounding"] == "tracejit.div"     # variants are entries of their own
    assert "trace" not in found                              # tj.trace is the tracing JIT


def test_the_coverage_table_gives_rates_fusion_and_reasons(tmp_path, capsys):
    path = tmp_path / "ops.md"
    opinfo.main(["--markdown", str(path), "--ops", r"^(sin|zero_)$", "--samples", "1"])
    text = path.read_text()
    assert "| sin | `tracejit.sin` | 5/5 (100%) | 2/2 (100%) | 5/5 (100%) | - | yes |" in text
    assert "**zero_**" in text
    assert opinfo.KNOWN_FAILURES["zero_", "forward"] in text
    assert "- forward: 9/10 (90%) of samples" in capsys.readouterr().out


def test_the_cuda_and_onnx_columns_run_a_traced_sample(tmp_path, monkeypatch):
    """The columns are measured: the first traced sample exported and run in onnxruntime
    (here), and traced on CUDA tensors in the simulator's process, against eager."""
    if opinfo.onnx_missing() or importlib.util.find_spec("numba.cuda") is None:
        pytest.skip("needs onnx, onnxruntime and Numba's CUDA simulator")
    from tracejit.onnx.lowering import LOWERINGS, _elementwise
    from tracejit.ops import OPS

    path = tmp_path / "ops.md"
    opinfo.main(["--markdown", str(path), "--ops", r"^(add|randn|item|nonzero|sin)$",
                 "--samples", "1"])
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[-2:]
            for line in path.read_text().splitlines() if line.startswith("| ")}
    assert rows["op"] == ["CUDA", "ONNX |"]
    assert rows["add"] == ["yes", "yes |"]      # a kernel on the device; Add in onnxruntime
    assert rows["item"][1] == "no: returns a Python float (a model returns tensors) |"
    assert rows["randn"][1] == "no: randn: random numbers: an exported model would not " \
                               "draw eager's |"  # the exporter's refusal, without its line
    cuda, onnx = rows["nonzero"]
    assert cuda.startswith("host: ") and "nonzero" in cuda  # copied through the host
    assert onnx == "no: the trace read a tensor's value (item) |"
    assert "Numba's CUDA simulator" in path.read_text()
    # a wrong lowering shows as different values
    monkeypatch.setitem(LOWERINGS, OPS["sin"], _elementwise("Cos"))
    runner, entry = opinfo.Runner(), opinfo.entries()["sin"]
    chosen = opinfo.traced_sample(runner, entry, 1)
    assert chosen == ("float32", 0)
    assert opinfo.onnx_cell(entry, runner._sample(entry, *chosen)) == \
        "no: onnxruntime: values differ"


def test_a_column_that_cannot_be_measured_says_why(monkeypatch):
    monkeypatch.setattr(opinfo, "onnx_missing", lambda: "onnxruntime not installed")
    columns = opinfo.Columns(1, cuda=False)
    cov = opinfo.coverage(1, select=r"^add$", on_entry=columns.add)
    text = opinfo.markdown(cov, 1, columns=columns.finish())
    assert "| add | `tracejit.add` | 5/5 (100%) | 2/2 (100%) | 5/5 (100%) | - | yes | n/a | " \
           "n/a |" in text
    assert "Not measured here: onnxruntime not installed (cells `n/a`)" in text
    assert "Not measured here: left out of this run (cells `n/a`)" in text
