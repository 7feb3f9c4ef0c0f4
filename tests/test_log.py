"""TRACEJIT_LOG: the channels print to stderr; a name that is not a channel is an error
listing them."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import tracejit as tj
from tracejit.core import log


def test_a_misspelt_channel_is_an_error_that_lists_the_channels(monkeypatch):
    monkeypatch.setenv("TRACEJIT_LOG", "recompiles,pases")
    with pytest.raises(ValueError, match="'pases', which is not a channel") as err:
        tj.trace(lambda x: x * 2, (tj.ones(3),))
    assert all(name in str(err.value) for name in log.CHANNELS)
    assert "did you mean 'passes'?" in str(err.value)


def test_channels_print_what_they_name(monkeypatch, capsys):
    monkeypatch.setenv("TRACEJIT_LOG", " passes , recompiles")
    assert log.channels() == {"passes", "recompiles"}
    t = tj.trace(lambda x: x * 2 + 1, (tj.ones(3),))
    t(tj.ones(3, 2))  # another rank: a new trace
    err = capsys.readouterr().err
    assert "[tracejit:passes] after dce" in err and "[tracejit:recompiles]" in err
    monkeypatch.setenv("TRACEJIT_LOG", "")
    tj.trace(lambda x: x * 3, (tj.ones(3),))
    assert capsys.readouterr().err == ""


def test_each_pass_is_labelled_by_its_own_name_and_unchanged_graphs_are_not_reprinted(
        monkeypatch, capsys):
    monkeypatch.setenv("TRACEJIT_LOG", "passes")
    t = tj.trace(lambda x: ((x * 2).relu().mean(), x.sum()), (tj.ones(4, 3),))
    blocks = capsys.readouterr().err.split("[tracejit:passes] after ")[1:]
    names = [b.split(" ", 1)[0] for b in blocks]
    assert names == ["dce", "cse", "fold_constants", "simplify", "hoist_invariants", "dce",
                     "fuse"]
    for name, block in zip(names, blocks):
        header = block.split("\n")[1] if "\n" in block.strip() else ""
        assert ": no change" in block.split("\n")[0] or f"[after: {name} " in header
    assert "hoist_invariants (" in blocks[4] and ": no change" in blocks[4]
    # a fusion note names the dimensions a reduction covers, in words
    assert "mean reduces over every dimension, not only the last one" in t.explain()


@pytest.mark.compile
def test_the_compile_channel_names_each_kernel_and_whether_the_cache_had_it(
        monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEJIT_LOG", "compile")
    x = tj.randn(4, 3)
    t = tj.trace(lambda a: (a * 2.5).tanh() + 1, (x,), backend="numba")
    t(x)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "[tracejit:compile]" in ln]
    assert lines and all(" in " in ln and " s (disk cache " in ln for ln in lines)
    assert any("compiled" in ln and "miss" in ln for ln in lines)


@pytest.mark.compile
def test_the_compile_channel_says_a_new_process_loads_each_kernel_from_the_disk_cache(
        tmp_path):
    program = ("import tracejit as tj\n"
               "x = tj.randn(4, 3)\n"
               "tj.trace(lambda a: (a * 2.5).tanh() + 1, (x,), backend='numba')(x)\n")
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path), TRACEJIT_LOG="compile")
    runs = [subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                           text=True, timeout=300, cwd=pathlib.Path(__file__).parents[1])
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    first, second = ([ln for ln in r.stderr.splitlines() if ln.startswith("[tracejit:compile]")]
                     for r in runs)
    assert first and all(ln.endswith("(disk cache miss)") and " compiled " in ln
                         for ln in first)
    assert len(second) == len(first)
    assert all(ln.endswith("(disk cache hit)") and " loaded " in ln for ln in second)
