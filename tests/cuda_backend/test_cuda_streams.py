"""CUDA streams and events (PyTorch's tj.cuda.Stream, tj.cuda.stream, tj.cuda.Event) and
the device queries, on the simulator or a GPU."""
from __future__ import annotations

import time

import pytest

import tracejit as tj


def test_stream_context_makes_a_stream_current_and_restores_the_last():
    s = tj.cuda.Stream()
    before = tj.cuda.current_stream()
    with tj.cuda.stream(s):
        assert tj.cuda.current_stream() is s
        with tj.cuda.stream(None):  # PyTorch's no-op
            assert tj.cuda.current_stream() is s
    assert tj.cuda.current_stream() is not s
    assert type(before) is tj.cuda.Stream
    with s:
        assert tj.cuda.current_stream() is s
    s.synchronize()
    s.wait_stream(tj.cuda.default_stream())
    assert s.query()


def test_events_time_the_work_between_them():
    start, end = tj.cuda.Event(enable_timing=True), tj.cuda.Event(enable_timing=True)
    start.record()
    y = tj.ones(1000, device="cuda") * 2
    time.sleep(0.005)
    end.record()
    end.synchronize()
    assert end.query() and y.sum().item() == 2000
    assert start.elapsed_time(end) > 0


def test_elapsed_time_needs_timing_and_recorded_events():
    plain, timed = tj.cuda.Event(), tj.cuda.Event(enable_timing=True)
    plain.record(), timed.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        plain.elapsed_time(timed)
    with pytest.raises(RuntimeError, match="recorded"):
        timed.elapsed_time(tj.cuda.Event(enable_timing=True))


def test_memory_reserved_counts_live_device_tensors():
    base = tj.cuda.memory_reserved()
    x = tj.zeros(256, device="cuda")
    assert tj.cuda.memory_reserved() >= base + 1024 and x.is_cuda
    assert tj.cuda.max_memory_reserved() >= tj.cuda.memory_reserved()


def test_accelerator_is_cuda():
    assert tj.accelerator.is_available()
    assert tj.accelerator.current_accelerator() == tj.device("cuda")
    assert tj.accelerator.device_count() >= 1 and tj.accelerator.current_device_index() == 0
    assert tj.zeros(2, device=tj.accelerator.current_accelerator()).is_cuda
