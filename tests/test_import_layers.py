"""The package import graph (every import counted, those inside functions too): the layers
import only downwards and no two packages import each other, directly or through others.
The layering is in docs/architecture.md."""
from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import tracejit

ROOT = pathlib.Path(tracejit.__file__).parent

# the lower layers, bottom first: each imports only those before it (and itself)
LAYERS = ("core", "runtime", "ops", "ir", "codegen", "backends")

# the eager runtime (tensors, dispatch, the autograd engine) and the user-facing packages
# built on it, which it must not import
EAGER = "tensor"
ABOVE_EAGER = ("autograd", "amp", "cuda", "capture", "scripting", "nn", "optim", "distributed",
               "onnx", "profiler", "utils", "testing")


def _unit(parts: tuple[str, ...]) -> str:
    """The package (or top-level module) a module of tracejit belongs to."""
    return parts[1] if len(parts) > 1 else "<root>"


def import_graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """{unit: units it imports}, for every import statement anywhere in a file."""
    edges: dict[str, set[str]] = {}
    for f in root.rglob("*.py"):
        parts = f.with_suffix("").relative_to(root.parent).parts
        is_pkg = parts[-1] == "__init__"
        mod = parts[:-1] if is_pkg else parts
        src = _unit(mod)
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = list(mod if is_pkg else mod[:-1])
                    base = base[:len(base) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                names = ([f"tracejit.{a.name}" for a in node.names] if name == "tracejit"
                         else [name])
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif _lazy_name(node):  # numba_loops = lazy("tracejit.backends.numba_loops")
                names = [_lazy_name(node)]
            else:
                continue
            for n in names:
                if n.startswith("tracejit.") and _unit(tuple(n.split("."))) != src:
                    edges.setdefault(src, set()).add(_unit(tuple(n.split("."))))
    return edges


def _lazy_name(node) -> str | None:
    """The module a `lazy("...")` call names (core/lazy.py), else None."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy" and \
            node.args and isinstance(node.args[0], ast.Constant):
        return node.args[0].value
    return None


def imports_inside_functions(root: pathlib.Path = ROOT) -> list[tuple[str, int, str]]:
    """(file, line, module) of every import statement inside a function."""
    found = set()
    for f in root.rglob("*.py"):
        for fn in ast.walk(ast.parse(f.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom):
                        name = "." * node.level + (node.module or "")
                    elif isinstance(node, ast.Import):
                        name = node.names[0].name
                    else:
                        continue
                    found.add((str(f.relative_to(root.parent)), node.lineno, name))
    return sorted(found)


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one unit (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in list(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_package_cycle():
    found = cycles(import_graph())
    assert not found, (f"import cycles among tracejit's packages: {[sorted(c) for c in found]}; "
                       "import downwards only (docs/architecture.md, the layers)")


def test_the_eager_runtime_imports_no_package_built_on_it():
    upward = import_graph().get(EAGER, set()) & set(ABOVE_EAGER)
    assert not upward, f"tensor/ imports {sorted(upward)}, which are built on it"


def test_the_lower_layers_import_only_downwards():
    """core, runtime, ops, ir, codegen and backends: none imports a layer above it
    or the eager runtime (tensors, autograd, capture), counting imports inside functions."""
    graph = import_graph()
    for k, unit in enumerate(LAYERS):
        upward = graph.get(unit, set()) - set(LAYERS[:k])
        assert not upward, f"{unit} imports {sorted(upward)}, above it"


def test_the_leaf_packages_stay_leaves():
    graph = import_graph()
    for unit in ("_startup", "core"):
        assert not graph.get(unit), (unit, graph.get(unit))


def test_the_ir_and_the_code_generators_never_import_the_eager_runtime():
    """Passes fold constants on arrays and take the user's frame from core/; the backends
    run arrays (the interpreter, which runs graphs through eager dispatch, is capture's)."""
    graph = import_graph()
    for unit in ("ir", "codegen", "backends"):
        assert not graph.get(unit, set()) & {"tensor", "autograd", "capture"}, (
            unit, sorted(graph[unit]))


def test_importing_tracejit_imports_no_compiler_and_no_optional_dependency():
    """Numba (0.35 s), its CUDA target, PyTorch and ONNX load when they are first used:
    `import tracejit` stays quick, and a program that never compiles never pays for them."""
    code = ("import sys, tracejit; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'numba', 'llvmlite', 'torch', 'onnx', 'onnxruntime', 'mpi4py'}))")
    env = {k: v for k, v in os.environ.items()  # (TRACEJIT_MEMORY_STATS=1 opts into the
           if not k.startswith("TRACEJIT_")}     # allocator, compiled with llvmlite)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == "[]", out


# the dependencies a function may import when it runs (they are optional: extras)
OPTIONAL = ("onnx", "onnxruntime", "torch", "mpi4py", "ml_dtypes")


def test_imports_inside_functions_are_optional_dependencies_only():
    """Numba, llvmlite and tracejit's modules built on them are named at the top of their
    users through `lazy` (core/lazy.py), and so is a module of the package that imports
    its user back: a function imports only an optional dependency."""
    found = imports_inside_functions()
    other = [(f, line, m) for f, line, m in found
             if m.split(".")[0] not in OPTIONAL and not m.startswith((".", "tracejit"))]
    assert not other, f"imports inside functions of what is not optional: {other}"
    own = [x for x in found if x[2].startswith((".", "tracejit"))]
    assert not own, (f"{len(own)} of tracejit's own imports inside functions: {own}; name "
                     "the module at the top with `lazy` (core/lazy.py) where it imports back")
    assert len(found) <= 40, len(found)


def test_the_import_graph_reads_lazy_modules(tmp_path):
    """A lazy module is an import: hiding an upward import behind `lazy` still fails."""
    pkg = tmp_path / "tracejit"
    for unit, text in (("ir", 'passes = lazy("tracejit.capture.trace")\n'),
                       ("capture", "from ..ir import graph\n")):
        (pkg / unit).mkdir(parents=True)
        (pkg / unit / "__init__.py").write_text(text)
    edges = import_graph(pkg)
    assert edges == {"ir": {"capture"}, "capture": {"ir"}}
    assert cycles(edges) == [{"ir", "capture"}]
