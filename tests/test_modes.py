"""The modes as one immutable, interned frame per thread (core/modes.py): what the switches
do to it, what another thread sees, and a trace's entry guard comparing it once."""
from __future__ import annotations

import dataclasses
import threading

import pytest

import tracejit as tj
from tracejit.core.modes import DEFAULT, SPECIAL_THREADS, STATE, Modes
from tracejit.ops import OPS


def test_a_switch_replaces_the_frame_and_puts_its_field_back():
    assert STATE.modes is DEFAULT
    with tj.no_grad():
        inside = STATE.modes
        assert not inside.grad_enabled and inside is DEFAULT.but(grad_enabled=False)
        with tj.enable_grad():
            assert STATE.modes is DEFAULT  # the same values: the same frame
        assert STATE.modes is inside
    assert STATE.modes is DEFAULT
    with pytest.raises(dataclasses.FrozenInstanceError):
        STATE.modes.grad_enabled = False  # frames do not change: a switch replaces them


def test_equal_frames_are_one_object_and_a_hashable_key():
    a = DEFAULT.but(grad_enabled=False).but(anomaly=True)
    b = DEFAULT.but(anomaly=True).but(grad_enabled=False)
    assert a is b and hash(a) == hash(Modes(grad_enabled=False, anomaly=True))
    assert {a: 1}[Modes(grad_enabled=False, anomaly=True)] == 1


def test_a_field_set_inside_a_block_outlives_it_as_pytorchs_does():
    """Leaving no_grad puts grad mode back, not the whole frame: anomaly mode switched on
    inside stays on (torch.autograd.set_detect_anomaly is a process setting)."""
    try:
        with tj.no_grad():
            tj.autograd.set_detect_anomaly(True)
        assert STATE.modes.grad_enabled and STATE.modes.anomaly
    finally:
        tj.autograd.set_detect_anomaly(False)
    assert STATE.modes is DEFAULT


def test_autocast_and_inference_mode_are_fields_of_the_frame():
    with tj.autocast("cpu", dtype=tj.bfloat16):
        assert STATE.modes.autocast == (tj.bfloat16, None) and STATE.modes.grad_enabled
        with tj.inference_mode():
            assert STATE.modes.inference and not STATE.modes.grad_enabled
            assert STATE.modes.autocast == (tj.bfloat16, None)
        assert not STATE.modes.inference
    assert STATE.modes is DEFAULT


def test_another_threads_frame_is_its_own():
    seen = []

    def other():
        seen.append(STATE.modes)
        with tj.autocast("cpu"):
            seen.append(STATE.modes)

    with tj.no_grad():
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert not STATE.modes.grad_enabled and STATE.modes.autocast is None
    assert seen[0] is DEFAULT and seen[1].autocast is not None and seen[1].grad_enabled


def test_a_backward_runs_without_autocast_and_gives_the_frame_back():
    x = tj.randn(3, requires_grad=True)
    frames = []
    x.register_hook(lambda g: frames.append(STATE.modes))
    with tj.autocast("cpu"):
        before = STATE.modes
        (x * 2).sum().backward()
        assert STATE.modes is before
    assert frames[0].autocast is None and not frames[0].grad_enabled


def test_a_trace_is_reused_only_under_the_frame_it_was_recorded_in():
    f = tj.trace(lambda x: x * 2 + 1, tj.randn(4), backend="interpret")
    x = tj.randn(4)
    f(x)
    with tj.no_grad():
        f(x)
    with tj.autocast("cpu"):
        f(x)
    with tj.inference_mode():
        f(x)
    f(x)
    assert len(f.traces) == 4 and f.stats["cache_hits"] >= 1
    sources = [t.guards.source for t in f.traces]
    # one identity check of the frame per trace, not one per mode
    assert all(s.count("STATE.modes is MODES") == 1 and "grad_enabled" not in s
               for s in sources)
    assert "grad mode disabled, no autocast" in f.explain()


def test_nodes_carry_the_frame_they_were_recorded_under():
    def f(x):
        y = x * 2
        with tj.no_grad():
            z = y + 1
        with tj.autocast("cpu", dtype=tj.bfloat16):
            w = z.relu()
        return w, y
    with tj.autograd.detect_anomaly():
        tr = tj.trace(f, tj.randn(4, requires_grad=True), backend="interpret")
    frames = {n.op: n.modes for n in tr.traces[0].recorded.nodes}
    assert frames["mul"].anomaly and frames["mul"].grad_enabled
    assert not frames["add"].grad_enabled and frames["add"].anomaly
    assert frames["relu"].autocast is not None
    # a pass's copy keeps the frame; the grad-mode view of it reads and sets the frame
    node = tr.graph.nodes[0]
    assert node.modes in {frames["mul"], frames["add"], frames["relu"]}
    node.grad_mode = False
    assert node.modes.grad_enabled is False and node.grad_mode is False


@pytest.mark.parametrize("call", [lambda x: x.exp(), lambda x: x.pow(2.0), lambda x: x ** x],
                         ids=["unary", "binary-scalar", "binary-tensor"])
def test_the_fast_paths_autocast_as_the_dispatch_chain_does(monkeypatch, call):
    """An elementwise op with an autocast category (here given one that applies on the
    CPU) is cast under autocast whichever entry point runs it."""
    for op in (OPS.exp, OPS.pow):
        monkeypatch.setattr(op, "autocast", "fp32")
    x = tj.randn(4).to(tj.bfloat16)
    assert call(x).dtype is tj.bfloat16
    with tj.autocast("cpu", dtype=tj.bfloat16):
        assert call(x).dtype is tj.float32


def test_the_fast_paths_step_aside_while_any_thread_traces_or_autocasts(monkeypatch):
    """SPECIAL_THREADS counts the threads recording a trace or inside an autocast region:
    0 again when they leave (an exception too), and while it is above 0 every thread's
    elementwise op takes the whole chain, which computes what this thread's modes say."""
    monkeypatch.setattr(OPS.exp, "autocast", "fp32")
    assert SPECIAL_THREADS[0] == 0
    with tj.autocast("cpu", dtype=tj.bfloat16):
        with tj.autocast("cpu", dtype=tj.bfloat16):
            assert SPECIAL_THREADS[0] == 1  # one thread, however deep
        assert SPECIAL_THREADS[0] == 1
    assert SPECIAL_THREADS[0] == 0
    with pytest.raises(RuntimeError), tj.autocast("cpu", dtype=tj.bfloat16):
        raise RuntimeError("left by an exception")
    assert SPECIAL_THREADS[0] == 0

    seen = []
    tj.trace(lambda x: seen.append(SPECIAL_THREADS[0]) or x * 2, (tj.randn(3),))
    assert seen == [1] and SPECIAL_THREADS[0] == 0

    x = tj.randn(4).to(tj.bfloat16)
    inside, other = threading.Event(), threading.Event()
    results = {}

    def autocasting():
        with tj.autocast("cpu", dtype=tj.bfloat16):
            results["there"] = x.exp().dtype
            inside.set()
            other.wait(10)

    worker = threading.Thread(target=autocasting)
    worker.start()
    assert inside.wait(10)
    assert SPECIAL_THREADS[0] == 1
    results["here"] = x.exp().dtype  # the whole chain, under this thread's modes
    other.set()
    worker.join()
    assert results == {"there": tj.float32, "here": tj.bfloat16}
    assert SPECIAL_THREADS[0] == 0
