"""Every code block and command in README.md and docs/*.md runs and shows what it says.

A fenced block's language says what it is:

- ```python: run. The python blocks of one file run in order in one fresh process (a
  reader types them into one session), in a temporary directory with the repository on
  PYTHONPATH; a block with `>>>` lines runs as a doctest.
- ```sh (or bash, console, shell): each line is a command (`python -m tracejit ...`,
  `python examples/...`, `python benchmarks/...`, `mpiexec -n N python examples/...`),
  run with a timeout in a temporary directory that links examples/ and benchmarks/.
- ```text: not code (a layout, a diagram) unless it comes right after a block that runs
  (nothing but blank lines between): then it is that block's expected output. `...`
  stands for any text, and a figure with a unit (`2.3 ms`, `0.8x`, `95%`) for any figure
  with that unit; the rest must match (trailing spaces aside).

An HTML comment on the line before a block changes how it runs, visibly in the doc:

- `<!-- not run: REASON -->`: the block is not run (a benchmark taking minutes, a
  set-up command); the reason is required.
- `<!-- env: NAME=VALUE ...: REASON -->`: the block runs in a process of its own with
  these environment variables (the CUDA examples on Numba's CUDA simulator).

A block with no language fails the test: say what it is.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGS = {"python", "sh", "bash", "console", "shell"}
COMMAND = re.compile(r"^(mpiexec -n \d+ )?python (-m tracejit\b|examples/|benchmarks/)")
TIMEOUT = 150


@dataclass
class Block:
    doc: str            # path relative to the repository
    line: int           # line of the opening fence
    lang: str
    code: str
    not_run: str | None = None
    env: dict = field(default_factory=dict)
    expected: str | None = None   # the ```text block right after it

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def parse(path: Path) -> list[Block]:
    lines = path.read_text().split("\n")
    blocks: list[Block] = []
    previous_end = None   # index of the closing fence of the last block that runs
    i = 0
    while i < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        end = i + 1
        while not lines[end].startswith("```"):
            end += 1
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        block = Block(name, i + 1, opening.group(1),
                      "\n".join(lines[i + 1:end]) + "\n")
        marker = next((s.strip() for s in reversed(lines[:i]) if s.strip()), "")
        if m := re.fullmatch(r"<!-- not run: (.+?) -->", marker):
            block.not_run = m.group(1)
        elif m := re.fullmatch(r"<!-- env: ((?:\w+=\S+ ?)+): (.+?) -->", marker):
            block.env = dict(kv.split("=", 1) for kv in m.group(1).split())
        follows = previous_end is not None and all(not s.strip()
                                                   for s in lines[previous_end + 1:i])
        if block.lang == "text" and follows and blocks and blocks[-1].lang in RUN_LANGS:
            blocks[-1].expected = block.code
        else:
            blocks.append(block)
        previous_end = end if block.lang in RUN_LANGS and not block.not_run else None
        i = end + 1
    return blocks


ALL = [b for doc in DOCS for b in parse(doc)]


def matches(expected: str, actual: str) -> bool:
    """`...` is any text; a figure with a unit is any figure with that unit."""
    def tidy(text):
        return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))
    figure = re.compile(r"\d+(?:\.\d+)?(?=\s?(?:ms|us|µs|s|x|%)(?!\w))")
    pattern = ""
    for piece in re.split(r"(\.\.\.|" + figure.pattern + ")", tidy(expected)):
        if piece == "...":
            pattern += ".*?"
        elif re.fullmatch(r"\d+(?:\.\d+)?", piece):
            pattern += r"\d+(?:\.\d+)?"
        else:
            pattern += re.escape(piece)
    return re.fullmatch(pattern, tidy(actual), re.S) is not None


def environment(extra: dict) -> dict:
    env = dict(os.environ)   # tests/conftest.py's: the interpreter backend, the test cache
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    env.update(extra)
    return env


def workdir(tmp_path: Path) -> Path:
    for name in ("examples", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


DRIVER = textwrap.dedent(r'''
    import contextlib, doctest, io, json, sys, traceback
    blocks = json.load(open(sys.argv[1]))
    scope, results = {"__name__": "__main__"}, []
    for b in blocks:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                if ">>>" in b["code"]:
                    test = doctest.DocTestParser().get_doctest(b["code"], scope, b["where"],
                                                               b["where"], 0)
                    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                                   | doctest.NORMALIZE_WHITESPACE)
                    report = io.StringIO()
                    runner.run(test, out=report.write, clear_globs=False)
                    if runner.failures:
                        raise AssertionError(report.getvalue())
                else:
                    # compiled as lines of the doc itself: tracebacks name the doc's
                    # lines, and tj.script reads a function's source from the doc
                    code = "\n" * b["line"] + b["code"]
                    exec(compile(code, b["file"], "exec"), scope)
            results.append({"stdout": out.getvalue(), "error": None})
        except BaseException:
            results.append({"stdout": out.getvalue(), "error": traceback.format_exc()})
            break
    json.dump(results, open(sys.argv[2], "w"))
''')


def sessions() -> list:
    """The python blocks of each doc as one session; a block with `env:` alone."""
    out = []
    for doc in DOCS:
        shared = []
        for b in parse(doc):
            if b.lang != "python" or b.not_run:
                continue
            if b.env:
                out.append([b])
            else:
                shared.append(b)
        if shared:
            out.append(shared)
    return out


def compiles(code: str, env: dict) -> bool:
    return 'backend="numba"' in code or "cuda" in code or env.get(
        "TRACEJIT_BACKEND", "interpret") != "interpret"


def param(blocks, id):
    code = "".join(b.code for b in blocks)
    marks = [pytest.mark.compile] if compiles(code, blocks[0].env) else []
    return pytest.param(blocks, id=id, marks=marks)


def run_session(blocks: list[Block], cwd: Path) -> list[dict]:
    """Each block's stdout and error (a traceback, or None), up to the first that fails."""
    (cwd / "blocks.json").write_text(json.dumps(
        [{"code": b.code, "where": b.where, "file": str(ROOT / b.doc), "line": b.line}
         for b in blocks]))
    (cwd / "driver.py").write_text(DRIVER)
    r = subprocess.run([sys.executable, "driver.py", "blocks.json", "results.json"],
                       cwd=cwd, env=environment(blocks[0].env), capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return json.loads((cwd / "results.json").read_text())


@pytest.mark.parametrize("blocks", [param(s, s[0].where) for s in sessions()])
def test_python_blocks_run_and_print_what_the_doc_shows(blocks, tmp_path):
    results = run_session(blocks, workdir(tmp_path))
    for block, result in zip(blocks, results):
        assert result["error"] is None, f"{block.where} failed:\n{result['error']}"
        if block.expected is not None:
            assert matches(block.expected, result["stdout"]), (
                f"{block.where} printed\n{result['stdout']}\nwhere the doc shows\n"
                f"{block.expected}")
    assert len(results) == len(blocks)


def commands() -> list:
    out = []
    for b in ALL:
        if b.lang in RUN_LANGS - {"python"} and not b.not_run:
            for n, line in enumerate(b.code.splitlines()):
                line = line.split(" #")[0].strip()
                if line and not line.startswith("#"):
                    expected = b.expected if n == len(b.code.splitlines()) - 1 else None
                    marks = [pytest.mark.compile] if compiles(line, b.env) else []
                    out.append(pytest.param(line, b, expected, marks=marks,
                                            id=f"{b.doc}:{b.line + 1 + n}"))
    return out


@pytest.mark.parametrize("line, block, expected", commands())
def test_commands_run_and_print_what_the_doc_shows(line, block, expected, tmp_path):
    assert COMMAND.match(line), (f"{block.where}: `{line}` is not a command this test knows "
                                 "how to run; mark the block `<!-- not run: why -->`")
    argv = shlex.split(line)
    bin_dir = Path(sys.executable).parent
    for k, word in enumerate(argv):
        if word == "python":
            argv[k] = sys.executable
        elif word == "mpiexec":
            if not (bin_dir / "mpiexec").exists():
                pytest.skip("mpiexec is not installed (the `distributed` extra)")
            argv[k] = str(bin_dir / "mpiexec")
    r = subprocess.run(argv, cwd=workdir(tmp_path), env=environment(block.env),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"{block.where}: `{line}` failed:\n{r.stdout}\n{r.stderr}"
    if expected is not None:
        assert matches(expected, r.stdout), (f"{block.where}: `{line}` printed\n{r.stdout}\n"
                                             f"where the doc shows\n{expected}")


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where) for b in ALL])
def test_every_block_says_what_it_is(block):
    assert block.lang in RUN_LANGS | {"text"}, (
        f"{block.where}: a block without a language; mark it ```python, ```sh (commands) "
        "or ```text (output, layout, diagram)")


def test_the_blocks_left_unrun_are_few_and_say_why():
    unrun = [f"{b.where}: {b.not_run}" for b in ALL if b.not_run]
    assert len(unrun) <= 4, "\n".join(unrun)


def test_a_doc_says_how_each_block_runs_and_what_it_prints(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(textwrap.dedent("""\
        ```python
        print(1 + 1)
        ```

        ```text
        2
        ```
        <!-- not run: takes minutes -->
        ```sh
        python benchmarks/long.py
        ```
        <!-- env: NUMBA_ENABLE_CUDASIM=1: the simulator stands in for a GPU -->
        ```python
        >>> 6 * 7
        42
        ```

        Prose between: the next block is no output.

        ```text
        a layout
        ```
        """))
    printed, unrun, simulated, layout = parse(doc)
    assert printed.expected == "2\n" and printed.not_run is None
    assert unrun.not_run == "takes minutes" and unrun.expected is None
    assert simulated.env == {"NUMBA_ENABLE_CUDASIM": "1"} and simulated.expected is None
    assert layout.lang == "text" and layout.code == "a layout\n"


def test_blocks_share_one_session_and_doctests_compare_their_outputs(tmp_path):
    blocks = [Block(str(tmp_path / "doc.md"), 1, "python", "x = 6\n"),
              Block(str(tmp_path / "doc.md"), 5, "python", ">>> x * 7\n42\n"),
              Block(str(tmp_path / "doc.md"), 9, "python", ">>> x * 7\n41\n"),
              Block(str(tmp_path / "doc.md"), 13, "python", "print('not reached')\n")]
    ran, doctest, wrong = run_session(blocks, tmp_path)
    assert ran["error"] is None and doctest["error"] is None
    assert "Expected:\n    41\nGot:\n    42" in wrong["error"]


@pytest.mark.parametrize("expected, actual, same", [
    ("a 2.3 ms, 0.8x, 95% done\n", "a 11.25 ms, 1.1x, 100% done  \n", True),
    ("graph(...) -> (f32[B])", "graph(%x: f32[B]) -> (f32[B])", True),
    ("mul(%x, 0.5)", "mul(%x, 0.25)", False),
    ("3 compiles", "4 compiles", False),
])
def test_expected_outputs_compare_text_exactly_and_figures_by_shape(expected, actual, same):
    assert matches(expected, actual) is same
