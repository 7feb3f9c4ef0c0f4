"""Every script in examples/ runs and shows what it claims."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_variable_length_rnn_loop_equals_packed():
    out = load("variable_length_rnn").main()
    assert out["max_diff"] < 1e-5 and out["shape"] == (1, 4, 8)
    assert out["script_diff"] < 1e-5 and out["compiles"] == 1


def test_scripted_rnn_compiles_once_for_new_sizes_and_matches_eager():
    out = load("scripted_rnn").main()
    assert out["compiles"] == 1 and out["worst"] < 1e-5


def test_dynamic_depth_uses_different_depths_and_trains():
    out = load("dynamic_depth").main()
    assert len(set(out["depths"])) > 1
    assert out["used"] == list(range(max(out["depths"])))
    assert out["last"] < 0.5 * out["first"]
    assert out["compiles"] == 1 and out["worst"] < 1e-5  # tj.script: one program, eager's


def test_masked_attention_ignores_unimportant_tokens():
    out = load("masked_attention").main()
    assert out["masked_weight"] == 0.0 and out["masked_grad"] == 0.0
    assert out["traced_diff"] < 1e-5 and out["compiles"] == 1
    np.testing.assert_allclose(out["row_sums"], 1.0, rtol=1e-6)


def test_vanishing_gradients_diagnosis():
    out = load("vanishing_gradients").main()
    assert out["sigmoid"] < 1e-4 and out["relu"] > 0.1
    assert out["traced_rel_diff"] < 1e-4


def test_custom_functions():
    out = load("custom_functions").main()
    assert out["gradcheck"] and out["grad"] == [0.0, 1.0, 0.5, 0.5]


def test_gradient_accumulation_equals_full_batch():
    out = load("gradient_accumulation").main()
    assert out["max_diff"] < 1e-6 and out["traced_diff"] < 1e-6 and out["compiles"] == 1


def test_freezing_layers():
    out = load("freezing_layers").main()
    assert out["frozen_same"] and out["frozen_grads_none"] and out["head_moved"] > 0.01
    assert out["traced_diff"] < 1e-5 and out["compiles"] == 1


def test_train_classifier_reaches_90_percent_and_reloads(tmp_path):
    out = load("train_classifier").main(str(tmp_path / "clf.npz"))
    assert out["accuracy"] > 0.9 and out["reloaded_same"]
    assert out["traced_diff"] < 1e-5 and out["compiles"] == 1


@pytest.mark.parametrize("script", ["custom_functions.py", "mlp.py"])
def test_examples_run_as_scripts(script):
    r = subprocess.run([sys.executable, f"examples/{script}"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_mixed_precision_trains_a_cnn_under_autocast_with_a_grad_scaler():
    out = load("mixed_precision").main()
    fp32, amp = out["fp32"], out["amp"]
    assert amp["last"] < 0.5 * amp["first"] and amp["accuracy"] > 0.8
    assert abs(amp["accuracy"] - fp32["accuracy"]) < 0.05
    assert amp["compiles"] == fp32["compiles"] == 1
    assert amp["scale"] >= 2 ** 14 and fp32["scale"] == 1.0  # disabled scaler: scale 1


@pytest.mark.compile
def test_profile_model_prints_tables_and_writes_a_chrome_trace(tmp_path, capsys,
                                                                monkeypatch):
    import json

    monkeypatch.setenv("TRACEJIT_BACKEND", "numba")  # as a user runs it: kernels to show
    out = load("profile_model").main(str(tmp_path / "trace.json"))
    text = capsys.readouterr().out
    assert "..." not in text  # names in full, kernels' file:line included
    assert "aten::matmul" in text and "Self CPU time total" in text
    assert {"tracejit::call loss_fn", "forward", "backward", "optimizer"} <= out["traced_names"]
    for kind in ("tracejit::kernel", "tracejit::program"):
        assert any(n.startswith(kind) for n in out["traced_names"]), kind
    eager_counts = {e.key: e.count for e in out["eager"].key_averages()}
    assert eager_counts["aten::linear"] == 9  # 3 layers x 3 recorded steps
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert any(e["name"] == "tracejit::call loss_fn" for e in events)
