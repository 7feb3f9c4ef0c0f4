"""`python -m tracejit bench --list`: every benchmark script and the model benchmarks are
named, and the helpers are not."""
from tracejit.cli import main


def test_bench_list_names_scripts_and_models(capsys):
    assert main(["bench", "--list"]) == 0
    names = capsys.readouterr().out.split()
    assert "mlp_step" in names and "models" in names and "gpt" in names
    assert "common" not in names and "run" not in names


def test_bench_unknown_name_fails(capsys):
    assert main(["bench", "no_such_benchmark"]) == 2
    assert "no benchmark named" in capsys.readouterr().err
