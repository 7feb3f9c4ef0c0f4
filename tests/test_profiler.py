"""tj.profiler: eager ops, backward nodes, user spans and compiled programs' events,
key averages and their table, schedules, memory and shapes, and the Chrome trace."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tracejit as tj
from tracejit.profiler import ProfilerActivity, profile, record_function, schedule
from tracejit.core import events


def _mlp():
    return tj.nn.Sequential(tj.nn.Linear(8, 16), tj.nn.ReLU(), tj.nn.Linear(16, 4))


def test_eager_ops_backward_nodes_and_user_spans_are_events():
    m, x, y = _mlp(), tj.randn(5, 8), tj.randint(0, 4, (5,))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("step"):
            loss = tj.nn.functional.cross_entropy(m(x), y)
            loss.backward()
    assert not events.ACTIVE[0]  # unsubscribed on exit
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts["aten::linear"] == 2 and counts["aten::addmm"] == 2
    assert counts["aten::relu"] == 1 and counts["aten::cross_entropy"] == 1
    assert counts["step"] == 1
    assert counts["autograd::engine::evaluate_function: AddmmBackward0"] == 2
    assert counts["autograd::engine::evaluate_function: AccumulateGrad"] == 4
    evs = prof.events()
    step = next(e for e in evs if e.name == "step")
    assert step.cpu_parent is None
    linear = [e for e in evs if e.name == "aten::linear"]
    assert all(e.cpu_parent is step for e in linear)
    # an addmm runs inside its linear: linear's total holds it, its self time does not
    addmm = [e for e in evs if e.name == "aten::addmm"]
    assert all(e.cpu_parent in linear for e in addmm)
    for e in linear:
        assert e.self_cpu_time_total < e.cpu_time_total
        assert e.self_cpu_time_total == pytest.approx(
            e.cpu_time_total - sum(c.cpu_time_total for c in e.cpu_children))
    # events nest in time
    for e in evs:
        if e.cpu_parent is not None:
            assert e.cpu_parent.start_ns <= e.start_ns <= e.end_ns <= e.cpu_parent.end_ns


def test_table_is_sorted_and_limited():
    m, x = _mlp(), tj.randn(64, 8)
    with profile() as prof:
        for _ in range(3):
            m(x).sum().backward()
    text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    lines = text.splitlines()
    assert "Self CPU %" in lines[1] and "# of Calls" in lines[1]
    rows = lines[3:8]
    assert len(rows) == 5 and lines[8].startswith("---")
    avgs = sorted(prof.key_averages(), key=lambda r: r.self_cpu_time_total, reverse=True)
    assert [r.split("  ")[0].strip() for r in rows] == [a.key[:55] for a in avgs[:5]]
    assert "Self CPU time total:" in text
    with pytest.raises(AttributeError, match="no such attribute"):
        prof.key_averages().table(sort_by="nonsense")


def test_shapes_and_memory():
    x = tj.randn(256, 256)
    with profile(record_shapes=True, profile_memory=True) as prof:
        y = x * 2  # 256 KiB
        z = y.t() @ y
        del y, z
    rows = {(r.key, str(r.input_shapes)): r for r in prof.key_averages(
        group_by_input_shape=True)}
    mul = rows[("aten::mul", "[[256, 256], []]")]
    assert mul.cpu_memory_usage == 256 * 256 * 4
    assert ("aten::matmul", "[[256, 256], [256, 256]]") in rows
    table = prof.key_averages(group_by_input_shape=True).table(row_limit=3)
    assert "Input Shapes" in table and "CPU Mem" in table


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_compiled_programs_report_calls_guards_kernels_and_misses(backend, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", backend)
    m = _mlp()
    f = tj.trace(lambda a: m(a).tanh().sum(), (tj.randn(4, 8),))
    with profile() as prof:
        f(tj.randn(6, 8)).backward()
        f(tj.randn(2, 3, 8))  # a rank the trace did not see: a miss, and a new trace
    names = [e.name for e in prof.events()]
    assert names.count("tracejit::call <lambda>") == 2
    assert "tracejit::guards <lambda>" in names
    miss = next(e for e in prof.events() if e.name == "tracejit::guard_miss <lambda>")
    assert "ndim" in miss.args["guard"] or "rank" in miss.args["guard"], miss.args
    assert "tracejit::trace <lambda>" in names
    if backend == "numba":
        assert any(n.startswith("tracejit::program") for n in names)
        kernels = [e for e in prof.events() if e.name.startswith("tracejit::kernel")]
        assert kernels and all(e.cat == "compiled" for e in kernels)


@pytest.mark.compile
def test_compile_and_cache_load_events(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")
    x = tj.randn(7, 5)

    def fresh(a):  # a kernel no other test compiles
        return (a * 0.123456 + 0.654321).sin().sum()

    f = tj.trace(fresh, (x,))
    with profile() as prof:
        f(x)
    got = [e.name for e in prof.events() if e.cat == "compile"]
    assert got and all(n.startswith(("tracejit::compile", "tracejit::cache_load"))
                       for n in got)


def test_schedule_keeps_the_active_steps_and_calls_on_trace_ready():
    saved = []
    x = tj.randn(4, 4)
    sched = schedule(wait=1, warmup=1, active=2, repeat=2)
    assert [sched(i).name for i in range(9)] == [
        "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE", "NONE", "WARMUP", "RECORD",
        "RECORD_AND_SAVE", "NONE"]
    with profile(schedule=sched, on_trace_ready=lambda p: saved.append(
            sorted(e.name for e in p.events()))) as prof:
        for step in range(9):
            with record_function(f"step {step}"):
                (x * step).sum()
            prof.step()
    assert saved == [sorted(["step 2", "aten::mul", "aten::sum", "step 3", "aten::mul",
                             "aten::sum"]),
                     sorted(["step 6", "aten::mul", "aten::sum", "step 7", "aten::mul",
                             "aten::sum"])]
    with pytest.raises(ValueError):
        schedule(wait=0, warmup=0, active=0)


def test_chrome_trace_loads(tmp_path):
    m, x = _mlp(), tj.randn(3, 8)
    with profile(record_shapes=True) as prof:
        m(x).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    evs = data["traceEvents"]
    assert evs and all({"name", "ph", "ts", "pid", "tid"} <= set(e) for e in evs)
    complete = [e for e in evs if e["ph"] == "X"]
    assert all(isinstance(e["dur"], float) and e["dur"] >= 0 for e in complete)
    assert any(e["name"] == "aten::matmul" and e["args"]["Input Dims"] == [[3, 8], [8, 16]]
               for e in complete)


def test_no_events_without_a_profiler():
    seen = []
    x = tj.randn(3)
    (x * 2).sum()
    assert not events.ACTIVE[0]
    events.subscribe(seen.append)
    try:
        (x * 2).sum()
    finally:
        events.unsubscribe(seen.append)
    (x * 3).sum()
    assert [e.name for e in seen] == ["aten::mul", "aten::sum"]
    np.testing.assert_allclose((x * 3).sum().item(), 3 * x.sum().item(), rtol=1e-6)
