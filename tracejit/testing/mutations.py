"""Mutation check: break one thing the test suite must notice, run the tests that cover it,
and report whether they failed (the mutant was killed) or passed (it survived).

    python -m tracejit.testing.mutations          # from a source checkout

Each mutant is applied to a copy of the checkout, never to the checkout itself.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# (what it breaks, file, text, replacement, tests that must fail)
MUTANTS = [
    ("clamp's element expression drops its upper bound", "tracejit/ops/elementwise.py",
     "        e = select(e > max, max, e)", "        e = e",
     ["tests/test_scalar_language.py"]),
    ("the CPU renderer spells select with its branches swapped",
     "tracejit/backends/numba_cpu.py", '"select": "({1} if {0} else {2})"',
     '"select": "({2} if {0} else {1})"', ["tests/test_scalar_language.py"]),
    ("ONNX export of an expression computes comparisons in the output's dtype",
     "tracejit/onnx/lowering.py",
     '    value_dtype = _compute_dtype(node) if out_dtype == "bool" else out_dtype',
     "    value_dtype = out_dtype", ["tests/test_onnx.py"]),
    ("the backward cache's key leaves out the inputs' strides",
     "tracejit/capture/backward_cache.py", "list(d.strides), ", "",
     ["tests/test_backward_cache.py"]),
    ("a loaded backward leaves out the forward part's size guards",
     "tracejit/capture/autodiff.py",
     "self.fwd_guards = None if spec is None else EntryGuards.from_spec(spec)",
     "self.fwd_guards = None", ["tests/test_backward_cache.py"]),
    ("a few rows times a transposed weight returned column-major", "tracejit/ops/linalg.py",
     "return np.ascontiguousarray(np.matmul(b.T, a.T).T)", "return np.matmul(b.T, a.T).T",
     ["tests/test_ops.py"]),
    ("grad mode dropped from the CSE key", "tracejit/ir/passes/cse.py",
     "key = (node.op, node.grad_mode, ", "key = (node.op, ",
     ["tests/test_passes.py", "tests/test_soundness.py"]),
    ("CSE keys sizes by the number they had when traced", "tracejit/ir/passes/rewrite.py",
     '        return ("size", x.source())', '        return ("int", x.hint)',
     ["tests/test_soundness.py"]),
    ("CSE keys arrays by their shape only", "tracejit/ir/passes/rewrite.py",
     '        return ("array", x.dtype.str, x.shape, x.tobytes())',
     '        return ("array", x.shape)', ["tests/test_passes.py"]),
    ("row-kernel spill disabled", "tracejit/codegen/plan.py",
     "    if not reductions or not per_element:\n        return None", "    return None",
     ["tests/test_numba_cpu.py"]),
    ("per-row reciprocal disabled", "tracejit/codegen/plan.py",
     "            if isinstance(divisor, Value) and divisor in ready and \\",
     "            if False and isinstance(divisor, Value) and divisor in ready and \\",
     ["tests/test_numba_cpu.py"]),
    ("value guards left out of host programs", "tracejit/backends/host.py",
     '                em.lines.append(f"_guard(g{k}, {args[0]})")', "                pass",
     ["tests/test_soundness.py", "tests/test_trace.py"]),
    ("value guards left out of the compiled forward part", "tracejit/capture/autodiff.py",
     "        if any(isinstance(x, Value) and x in tainted for x in node.inputs):",
     "        if node.op == GUARD:\n            continue\n"
     "        if any(isinstance(x, Value) and x in tainted for x in node.inputs):",
     ["tests/test_soundness.py"]),
    ("guards not replayed into the joint trace", "tracejit/backends/interpret.py",
     "                    STATE.capture.replay_guard(node, vals[op])", "                    pass",
     ["tests/test_soundness.py"]),
    ("argument structure not compared", "tracejit/capture/trace.py",
     "            if tr.in_spec != spec:\n                continue",
     "            if False:\n                continue",
     ["tests/test_soundness.py"]),
    ("identity guards on objects read from outside dropped", "tracejit/capture/guards.py",
     '                self._add(lines, f"{get} is V{k}", Guard(f"{what} is {_short(value)}"))',
     "                pass", ["tests/test_soundness.py"]),
    ("contiguity not guarded", "tracejit/capture/guards.py",
     '                    f"{d}.flags.c_contiguous is {contiguous}" if on_host else',
     '                    "True" if on_host else', ["tests/test_soundness.py"]),
    ("a row value reduced again inside its row kernel", "tracejit/ir/passes/fuse.py",
     "            if not same_dim(n.inputs[0].shape[-1], frame[1]):", "            if False:",
     ["tests/test_soundness.py"]),
    ("empty loops leave smaller outputs unwritten", "tracejit/backends/numba_cpu.py",
     "        if n == 0 and any(o.size for o in outs):", "        if False:",
     ["tests/test_soundness.py"]),
    ("kernel tanh rounds to 1 short of eager's saturation point",
     "tracejit/backends/scalar_math.py",
     "    out = min(max(p / q, -_BELOW_ONE), _BELOW_ONE)", "    out = p / q",
     ["tests/test_soundness.py", "tests/test_scalar_math.py"]),
    ("autograd.grad frees nodes it did not run", "tracejit/autograd/engine.py",
     "            if not retain_graph and run:", "            if not retain_graph:",
     ["tests/test_autograd.py"]),
    ("a group joins one that depends on it through another group",
     "tracejit/ir/passes/fuse.py",
     "(reach_of(q) | group_reach.get(group(q), 0)) & members_mask[g]",
     "reach_of(q) & members_mask[g]", ["tests/test_passes.py"]),
    ("DCE drops indexing by tensors whose result is unused", "tracejit/ir/passes/dce.py",
     "    return any(isinstance(i, Slot) for i in node.attrs[\"index\"])",
     "    return False", ["tests/test_soundness.py"]),
    ("relu's gradient multiplies by the mask (0 * inf is NaN)",
     "tracejit/ops/elementwise.py",
     "lambda g, y: np.where(y > 0, g, np.zeros((), g.dtype))", "lambda g, y: g * (y > 0)",
     ["tests/test_soundness.py"]),
    ("a size expression guarded equal to a number stays symbolic in the types",
     "tracejit/capture/recorder.py",
     '                  if g.op == "==" and g.expected is True and g.lhs not in self.letters and',
     "                  if False and", ["tests/test_soundness.py"]),
    ("kernel outputs left row-major where eager kept another layout",
     "tracejit/capture/trace.py",
     "        for k, order in self.out_layouts:  # kernels write row-major; eager kept a layout",
     "        for k, order in ():", ["tests/test_soundness.py"]),
    ("row kernels take the row length from their inputs and outputs only",
     "tracejit/backends/numba_cpu.py",
     "        n.inputs[0] for n in region.nodes if column_sum(n) or _is_reduction(n)]",
     "        n.inputs[0] for n in region.nodes if False]",
     ["tests/test_soundness.py"]),
    ("a compiled segment's backward reused whatever inputs need gradients",
     "tracejit/capture/compiled.py",
     "            if bt.needs == needs and (bt.fwd_guards is None or "
     "bt.fwd_guards.check(*tensors)):\n                return bt\n        with self._lock:",
     "            if bt.fwd_guards is None or bt.fwd_guards.check(*tensors):\n"
     "                return bt\n        with self._lock:",
     ["tests/test_script_nn.py"]),
    ("loop-invariant code motion ignores sizes bound by the iteration",
     "tracejit/ir/passes/licm.py", "                not sizes & varying:", "                True:",
     ["tests/test_script.py", "tests/test_script_nn.py"]),
    ("the path not taken writes in place for real", "tracejit/capture/recorder.py",
     "        if not self.dry:  # a path recorded but not taken writes nothing",
     "        if True:", ["tests/test_script.py"]),
    ("loop bounds prove comparisons they do not decide", "tracejit/ir/symbolic.py",
     "        if not all(nonneg(s) for s in mono) or (coef > 0) == upper:",
     "        if (coef > 0) == upper:", ["tests/test_script.py", "tests/test_script_nn.py"]),
    ("DCE drops size bindings that something reads", "tracejit/ir/passes/dce.py",
     "    if node.op in _BINDERS and symbols_bound(node) & used:", "    if False:",
     ["tests/test_script.py"]),
    ("a segment ignores the loop index it is given", "tracejit/backends/interpret.py",
     "                ins = [vals[r] if r is not None else _carrier(env[c]) for r, c in reads]",
     "                ins = [vals[r] if r is not None else _carrier(0) for r, c in reads]",
     ["tests/test_script.py"]),
    ("a loop's deferred weight gradient keeps its first iteration's factors only",
     "tracejit/capture/loops.py",
     "        self.parts.setdefault((key, form), []).append(parts)",
     "        self.parts.setdefault((key, form), [parts])", ["tests/test_script_loops.py"]),
    ("a carried value's gradient does not reach the iteration before",
     "tracejit/capture/loops.py",
     "                    a = id(ins[plan.diff[j]])\n"
     "                    acc.add(keys.get(a, a), g)",
     "                    a = id(ins[plan.diff[j]])\n                    acc.add(-1, g)",
     ["tests/test_script_loops.py"]),
    ("fusion puts values of different iteration spaces in one kernel",
     "tracejit/ir/passes/fuse.py",
     "            elif not same_dim(size, x):\n                return False",
     "            elif False:\n                return False", ["tests/test_autodiff.py"]),
    ("a product with an inner size of 1 multiplies without broadcasting its rows",
     "tracejit/ir/passes/simplify.py",
     '    return b.emit("mul", [x, y], {}, [(out.dtype, out.shape)], node).outputs[0]',
     '    return b.emit("mul", [y, y], {}, [(out.dtype, out.shape)], node).outputs[0]',
     ["tests/test_autodiff.py"]),
    ("integer row max starts from an infinity cast to an integer",
     "tracejit/backends/numba_cpu.py", 'lines.append(f"        acc = {acc_type}({int(first)})")',
     'lines.append(f"        acc = {acc_type}(-np.inf)")', ["tests/test_numba_cpu.py"]),
    ("float32 sums over rows never join the float64 accumulator",
     "tracejit/backends/numba_cpu.py",
     'out += [f"            if (r + 1) % {FLUSH_ROWS} == 0:"] + flush(" " * 16)',
     "out += []", ["tests/test_numba_cpu.py"]),
    ("broadcasting takes a symbolic size as the result whatever the others are",
     "tracejit/ops/rules.py",
     "if present and isinstance(present[0], SymInt) and all(known_same(d, present[0])",
     "if present and isinstance(present[0], SymInt) and all(True or known_same(d, present[0])",
     ["tests/test_soundness.py", "tests/test_trace.py"]),
    ("export writes a trace that branched on a tensor's value", "tracejit/onnx/exporter.py",
     "        if node.op == GUARD:", "        if False:", ["tests/test_onnx.py"]),
    ("guarded reads: a helper function's identity not guarded", "tracejit/capture/pyvalues.py",
     "        out = [(what, getter, value)]\n        if not _library(value.__module__):",
     "        out = []\n        if not _library(value.__module__):", ["tests/test_guards.py"]),
    ("guarded reads: a container's contents not compared", "tracejit/capture/guards.py",
     '                self._add(lines, f"SAME({get}, V{k})", Guard(f"{what} holds {value.shown}"))',
     "                pass", ["tests/test_guards.py"]),
    ("guarded reads: scalars in a container compared by type only",
     "tracejit/capture/pyvalues.py",
     "        return same_scalar(value, snap[2])",
     "        return type(value) is snap[1]", ["tests/test_guards.py"]),
    ("script: a kernel may move before the loop that binds a size it reads",
     "tracejit/ir/passes/fuse.py", "        if reads:\n            after[id(n)] = reads",
     "        pass", ["tests/test_script_fuzz_regressions.py"]),
    ("script: a value captured under two names gets two block arguments",
     "tracejit/capture/recorder.py",
     "        scope.captures[v] = scope.captures[outer] = inner",
     "        scope.captures[v] = inner", ["tests/test_script_fuzz_regressions.py"]),
    ("script: views of a written base keep their old value", "tracejit/capture/recorder.py",
     "                self.stale[id(t)] = t", "                pass",
     ["tests/test_script_fuzz_regressions.py", "tests/test_script_soundness.py"]),
    ("eager: the binary fast path ignores views of a written base",
     "tracejit/tensor/dispatch.py",
     "    if STATE.capture is not None or _DEVICES[0] or _EVENTS[0] or STALE_VIEWS:",
     "    if STATE.capture is not None or _DEVICES[0] or _EVENTS[0]:",
     ["tests/test_autograd.py"]),
    ("guarded reads: an outside object's attributes not compared",
     "tracejit/capture/pyvalues.py",
     "        return value is snap[1] and same(dict(vars(value)), snap[2])",
     "        return value is snap[1]", ["tests/test_guards.py"]),
    ("guarded reads: a set's members not compared", "tracejit/capture/pyvalues.py",
     "        return type(value) is snap[1] and value == snap[2]",
     "        return type(value) is snap[1]", ["tests/test_guards.py"]),
    ("guarded reads: a numpy array's values not compared", "tracejit/capture/pyvalues.py",
     "        return value is snap[1] and np.array_equal(",
     "        return value is snap[1] or np.array_equal(", ["tests/test_guards.py"]),
    ("guarded reads: a module's class attributes not read", "tracejit/capture/pyvalues.py",
     "            out += _class_attribute_reads(m, where)", "            pass",
     ["tests/test_guards.py"]),
    ("guarded reads: a config object argument guarded by identity only",
     "tracejit/capture/guards.py",
     "            elif held_as_contents(value):  # a config object, a set, a numpy scalar",
     "            elif False:", ["tests/test_guards.py"]),
    ("guarded reads: installed packages' code followed", "tracejit/capture/pyvalues.py",
     '        known = _INSTALLED[top] = "site-packages" in path or "dist-packages" in path',
     "        known = _INSTALLED[top] = False", ["tests/test_guards.py"]),
    ("guarded reads: a hook registered inside a compiled function is dropped",
     "tracejit/tensor/tensor.py",
     '            STATE.capture.unsupported("register_hook() (register hooks outside it, on an "\n'
     '                                      "input or an output)")', "            pass",
     ["tests/test_guards.py"]),
    ("guarded reads: deriving the backward draws the forward's random numbers again",
     "tracejit/capture/autodiff.py", "        with rng_kept(random_generators(forward)):",
     "        with rng_kept([]):", ["tests/test_guards.py"]),
    ("guarded reads: a replayed backward draws new random numbers",
     "tracejit/capture/autodiff.py", "            with rng_kept(bt.generators, self.rng):",
     "            with rng_kept([]):", ["tests/test_guards.py"]),
    ("guarded reads: inputs without a gradient path get zeros", "tracejit/capture/autodiff.py",
     "        if unreached:\n            result = list(result)",
     "        if False:\n            result = list(result)", ["tests/test_guards.py"]),
    ("guarded reads: a scripted loop's weights without a gradient path get zeros",
     "tracejit/capture/loops.py",
     "    return frozenset(i for i in bt.diff if i not in reached)", "    return frozenset()",
     ["tests/test_guards.py"]),
    ("guarded reads: a scripted loop's replay draws new random numbers",
     "tracejit/capture/loops.py",
     "                with rng_kept(*self.rngs.get(call, ((), None))):  # the call's draws",
     "                with rng_kept([]):", ["tests/test_guards.py"]),
    ("guarded reads: callables other than plain functions not guarded",
     "tracejit/capture/pyvalues.py",
     "        return [(what, getter, value)] + _callable_reads(value, what, depth, seen)",
     "        return []", ["tests/test_guards.py"]),
    ("guarded reads: script mode skips a composite's autocast casts",
     "tracejit/scripting/runtime.py",
     "        return None if inner is None else fn.cast_entry(inner)",
     "        return inner", ["tests/test_guards.py"]),
]

_IGNORE = shutil.ignore_patterns(".git", ".venv", ".cache", "__pycache__", "*.egg-info",
                                 ".hypothesis", ".pytest_cache")


def run(root: Path, only: str | None = None) -> int:
    survivors = 0
    for what, path, old, new, tests in MUTANTS:
        if only and only not in what:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "checkout"
            shutil.copytree(root, copy, ignore=_IGNORE)
            target = copy / path
            text = target.read_text()
            if old not in text:
                print(f"?? {what}: the text to mutate is not in {path} any more")
                survivors += 1
                continue
            target.write_text(text.replace(old, new, 1))
            # the checkout's kernel cache: entries are keyed by their source, so a mutant's
            # kernels get entries of their own
            env = dict(os.environ, PYTHONPATH=str(copy), TRACEJIT_CACHE_DIR=str(
                root / ".cache" / "kernels"))
            r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                                "no:cacheprovider", *tests], cwd=copy, env=env,
                               capture_output=True, text=True)
            killed = r.returncode != 0
            survivors += not killed
            last = (r.stdout.strip().splitlines() or ["?"])[-1]
            print(f"{'killed ' if killed else 'SURVIVED'} {what}  ({last})")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(run(Path(__file__).resolve().parents[2], sys.argv[1] if len(sys.argv) > 1
                 else None))
