"""The IR: golden dumps, the verifier on malformed graphs, graphviz output, the dump CLI."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import tracejit as tj
from tracejit.ir import GUARD, Graph, VerificationError, verify
from tracejit.ir.graph import Value

ROOT = Path(__file__).resolve().parents[1]


def mlp_step(x, w, b):
    h = (x @ w + b).tanh()
    if h.mean() > 0:
        h = h * 2
    return h.reshape(h.shape[0], -1).sum(1)


def test_golden_dump():
    g = tj.trace(mlp_step, (tj.ones(4, 3), tj.ones(3, 5), tj.ones(5))).traces[0].recorded
    assert str(g) == """\
# graph mlp_step  [after: trace · 9 nodes]
graph(%x: f32[B,T], %w: f32[T,M], %b: f32[M]) -> (f32[B]):
  %0: f32[B,M] = matmul(%x, %w)
  %1: f32[B,M] = add(%0, %b)
  %2: f32[B,M] = tanh(%1)
  %3: f32[] = mean(%2) {dim=None, keepdim=False}
  %4: b8[] = gt(%3, 0)
  guard[bool](%4) == True
  %5: f32[B,M] = mul(%2, 2)
  %6: f32[B,M] = reshape(%5) {shape=(B, M)}
  %7: f32[B] = sum(%6) {dim=(1,), keepdim=False}
  return %7"""


def test_golden_dump_after_the_passes():
    g = tj.trace(mlp_step, (tj.ones(4, 3), tj.ones(3, 5), tj.ones(5))).graph
    assert str(g) == """\
# graph mlp_step  [after: fuse · 5 nodes]
graph(%x: f32[B,T], %w: f32[T,M], %b: f32[M]) -> (f32[B]):
  %0: f32[B,M] = matmul(%x, %w)
  %1: f32[B,M], %2: f32[B] = fused[row](%0, %b) {
      %r0: f32[B,M] = add(%in0, %in1)
      %r1: f32[B,M] = tanh(%r0)
      %r2: f32[B,M] = mul(%r1, 2)
      %r3: f32[B] = sum(%r2) {dim=(1,), keepdim=False}
      yield %r1, %r3 }
  %3: f32[] = mean(%1) {dim=None, keepdim=False}
  %4: b8[] = gt(%3, 0)
  guard[bool](%4) == True
  return %2"""


def test_dump_is_deterministic_across_traces():
    args = (tj.ones(4, 3), tj.ones(3, 5), tj.ones(5))
    assert str(tj.trace(mlp_step, args).graph) == str(tj.trace(mlp_step, args).graph)


def test_dump_with_source_lines():
    g = tj.trace(mlp_step, (tj.ones(4, 3), tj.ones(3, 5), tj.ones(5))).graph
    text = g.format(sources=True)
    line = mlp_step.__code__.co_firstlineno + 1
    assert f"tanh(%r0)  # {__file__}:{line}" in text


def test_golden_dump_of_guards_mutations_and_index_attributes():
    def f(x, idx):
        x[1:] = x[:-1] * 0.5
        return x[idx].sum().item()

    g = tj.trace(f, (tj.ones(4), tj.tensor([0, 2]))).traces[0].recorded
    assert str(g) == """\
# graph f  [after: trace · 6 nodes]
graph(%x: f32[B], %idx: i64[T]) -> ():
  %0: f32[B-1] = getitem(%x) {index=(:-1,)}
  %1: f32[B-1] = mul(%0, 0.5)
  %2: f32[B] = setitem(%x, %1) {index=(1:,)}
  %3: f32[T] = getitem(%2, %idx) {index=(%idx0,)}
  %4: f32[] = sum(%3) {dim=None, keepdim=False}
  guard[item](%4) == 1.5
  mutate %x <- %2
  return """


def test_traced_graphs_pass_the_verifier():
    g = tj.trace(mlp_step, (tj.ones(4, 3), tj.ones(3, 5), tj.ones(5))).graph
    verify(g)


def _valid_graph():
    g = Graph("g")
    x = Value(tj.float32, (3,), None, "x")
    g.inputs.append(x)
    n = g.add_node("exp", [x], {}, [(tj.float32, (3,))])
    g.outputs.append(n.output)
    verify(g)
    return g, x, n


def test_verifier_rejects_use_before_definition():
    g, x, n = _valid_graph()
    orphan = Value(tj.float32, (3,))
    g.add_node("neg", [orphan], {}, [(tj.float32, (3,))])
    with pytest.raises(VerificationError, match="before it is defined"):
        verify(g)


def test_verifier_rejects_redefinition():
    g, x, n = _valid_graph()
    g.nodes.append(n)
    with pytest.raises(VerificationError, match="SSA"):
        verify(g)


def test_verifier_rejects_unknown_ops_and_wrong_arity():
    g, x, n = _valid_graph()
    n.op = "frobnicate"
    with pytest.raises(VerificationError, match="unknown op"):
        verify(g)
    g, x, n = _valid_graph()
    n.inputs.append(x)
    with pytest.raises(VerificationError, match="takes 1 inputs, got 2"):
        verify(g)


def test_verifier_rejects_wrong_output_types():
    g, x, n = _valid_graph()
    n.outputs[0].dtype = tj.float64
    with pytest.raises(VerificationError, match="dtype"):
        verify(g)
    g, x, n = _valid_graph()
    n.outputs[0].shape = (4,)
    with pytest.raises(VerificationError, match="shape"):
        verify(g)


def test_verifier_rejects_bad_outputs_mutations_and_guards():
    g, x, n = _valid_graph()
    g.outputs.append(Value(tj.float32, (3,)))
    with pytest.raises(VerificationError, match="output is not defined"):
        verify(g)
    g, x, n = _valid_graph()
    g.mutations.append((n.output, n.output))
    with pytest.raises(VerificationError, match="not a graph input"):
        verify(g)
    g, x, n = _valid_graph()
    g.add_node(GUARD, [x, x], {"kind": "bool", "expected": True}, [])
    with pytest.raises(VerificationError, match="guard reads one value"):
        verify(g)


def test_to_dot():
    g = tj.trace(mlp_step, (tj.ones(4, 3), tj.ones(3, 5), tj.ones(5))).graph
    dot = g.to_dot()
    assert dot.startswith('digraph "mlp_step" {') and dot.rstrip().endswith("}")
    assert 'label="matmul\\nf32[B,M]"' in dot and "in0 -> n0;" in dot
    assert dot.count("->") >= len(g.nodes)


def test_dump_command_on_the_example():
    r = subprocess.run([sys.executable, "-m", "tracejit", "dump", "examples/mlp.py:MLP",
                        "--input", "f32[8,784]", "--guards"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "graph(%x: f32[B,784], %fc1.weight: f32[128,784]" in r.stdout
    # a guard on a size names the input dim it reads (the graph shows no symbol for it)
    assert "sizes: x.shape[1] == 784" in r.stdout


def test_dump_command_shows_the_backward_and_the_generated_code():
    r = subprocess.run([sys.executable, "-m", "tracejit", "dump", "examples/mlp.py:MLP",
                        "--input", "f32[8,784]", "--backward", "--code"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "# graph MLP_backward  [after: fuse" in r.stdout
    assert "# host program of MLP" in r.stdout and "@numba.njit(parallel=True" in r.stdout
    # the backward is derived for any sizes: the dump says which its symbols are here
    pinned = re.search(r"this trace's guards fix (\w) = 784, (\w) = 128, (\w) = 10", r.stdout)
    assert pinned and f"%fc1.weight: f32[{pinned[2]},{pinned[1]}]" in r.stdout


def test_dump_stages_prints_each_pass_that_changed_the_graph_once():
    r = subprocess.run([sys.executable, "-m", "tracejit", "dump", "examples/mlp.py:MLP",
                        "--input", "f32[8,784]", "--stages"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    headers = [ln for ln in r.stdout.splitlines() if ln.startswith("# ")]
    assert headers[0].startswith("# graph MLP  [after: trace")
    assert headers[-1].startswith("# graph MLP  [after: fuse")
    assert "# after hoist_invariants: no change" in headers
    bodies = r.stdout.split("# graph MLP")[1:]
    assert len({b.split("\n", 1)[1] for b in bodies}) == len(bodies)  # none printed twice


def test_dump_command_reports_bad_targets():
    r = subprocess.run([sys.executable, "-m", "tracejit", "dump", "examples/mlp.py:nothing"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "defines no 'nothing'" in r.stderr
