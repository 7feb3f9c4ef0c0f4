"""`python -m tracejit`: `--help` answers without importing numpy or Numba; a mistake in
what a command is given is one line on stderr, `error: ...`, and exit status 2 (the
traceback with `--debug`)."""
from __future__ import annotations

import pathlib
import shlex
import subprocess
import sys
import tomllib

import pytest

import tracejit
from tracejit.cli import InputError, main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _command_line(*args: str, python_options: tuple = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *python_options, "-m", "tracejit", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_help_imports_neither_numpy_nor_numba_nor_the_op_table():
    done = _command_line("--help", python_options=("-X", "importtime"))
    assert done.returncode == 0 and done.stdout.startswith("usage: tracejit")
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "tracejit.cli" in imported
    assert not {"numpy", "numba", "tracejit.ops", "tracejit._api"} & imported


def test_the_version_is_the_package_metadatas():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert tracejit.__version__ == project["version"]
    done = _command_line("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"tracejit {project['version']}"


def test_a_command_sees_the_whole_package():
    """The command line imports the package's names itself: a command finds them all."""
    done = _command_line("dump", "examples/mlp.py:MLP", "--input", "f32[2,784]")
    assert done.returncode == 0, done.stderr
    assert "matmul" in done.stdout or "addmm" in done.stdout


def test_the_export_command_of_the_docs_runs(tmp_path):
    pytest.importorskip("onnx")
    line, = [ln for ln in (ROOT / "docs" / "export.md").read_text().splitlines()
             if ln.startswith("python -m tracejit ")]
    args = shlex.split(line)[3:]
    args[args.index("-o") + 1] = str(tmp_path / "mlp.onnx")
    done = _command_line(*args)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mlp.onnx").stat().st_size > 0


def test_an_input_error_is_one_line_and_status_2():
    done = _command_line("dump", "examples/mlp.py:MLP")  # forward(x) needs an --input
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: dump: MLP.forward(x) takes 1 input, 0 given: one --input per argument, "
        "e.g. --input f32[8,784]"]


@pytest.mark.parametrize("args, says", [
    (["dump", "examples/no_such_file.py:MLP", "--input", "f32[2,784]"],
     "dump: examples/no_such_file.py: no such file"),
    (["export", "model.py:MLP", "--input", "f32[B,784]", "-o", "mlp.onnx"],
     "export: model.py: no such file"),
    (["dump", "examples/mlp.py:MLPX", "--input", "f32[2,784]"],
     "dump: examples/mlp.py defines no 'MLPX' (it defines MLP, gated)"),
    (["dump", "examples/mlp.py", "--input", "f32[2,784]"],
     "dump: expected FILE.py:NAME, got 'examples/mlp.py'"),
    (["dump", "examples/mlp.py:gated", "--input", "f32[3]"],
     "dump: gated(x, w) takes 2 inputs, 1 given"),
    (["dump", "examples/mlp.py:MLP", "--input", "f32[2,784]", "--input", "f32[3]"],
     "dump: MLP.forward(x) takes 1 input, 2 given"),
    (["dump", "examples/mlp.py:MLP", "--input", "f32(2,784)"],
     "--input 'f32(2,784)': expected DTYPE[SIZES], for example f32[8,784]"),
    (["dump", "examples/mlp.py:MLP", "--input", "q7[2,784]"],
     "--input 'q7[2,784]': unknown dtype name 'q7'"),
    (["bench", "no_such_benchmark"], "bench: no benchmark named 'no_such_benchmark'"),
    (["fuzz", "--script", "--with", "no_such_construct"],
     "fuzz: no construct named 'no_such_construct'"),
])
def test_each_input_error_says_what_is_wrong(args, says, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {says}") and err.count("\n") == 1


def test_debug_shows_the_traceback(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(InputError, match="no such file"):
        main(["dump", "examples/no_such_file.py:MLP", "--debug"])
    with pytest.raises(InputError, match="no such file"):
        main(["--debug", "dump", "examples/no_such_file.py:MLP"])
