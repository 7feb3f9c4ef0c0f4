"""Command line: `python -m tracejit demo | bench | dump | export | cache | fuzz` (installed as
`tracejit`)."""
from __future__ import annotations

import argparse
import inspect
import re
import runpy
import sys
import time
from pathlib import Path

import tracejit as tj  # (in a command's process, names are imported at the first use)

from . import __version__, _import_names
from ._startup import freeze_imports
from .core.lazy import lazy

# what the commands use, imported when one runs (`--help` and `--version` import none)
demo = lazy("tracejit.demo")
kernel_cache = lazy("tracejit.runtime.kernel_cache")
symbolic = lazy("tracejit.core.symbolic")
fuzzing = lazy("tracejit.testing.fuzz")
script_fuzzing = lazy("tracejit.testing.script_fuzz")


class InputError(Exception):
    """What a command was given is wrong (a file, a name, an --input): said in one line
    on stderr, exit status 2; `--debug` shows the traceback."""


def _bench_names(root: Path) -> list:
    """The benchmarks a bare `bench` runs: every script in benchmarks/ but the helpers
    and gpu_check (it needs a GPU: it runs by name, or as a script)."""
    return sorted(p.stem for p in root.glob("*.py") if p.stem not in ("common", "gpu_check"))


def _bench(args) -> int:
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    if not root.is_dir():
        raise InputError(f"bench: benchmarks/ not found next to the package ({root}); run "
                         "from a source checkout")
    models = root / "models" / "run.py"
    if args.list:
        for name in sorted(_bench_names(root) + ["gpu_check"]):
            doc = (root / f"{name}.py").read_text().split('"""')[1].strip().splitlines()
            print(f"{name:<22} {doc[0] if doc else ''}")
        if models.exists():  # the training steps of real models run by name only (minutes)
            print("models                 training steps of real models (models/NAME for "
                  "one: " + " ".join(sorted(p.stem for p in models.parent.glob("*.py")
                                            if p.stem != "run")) + ")")
        return 0
    names = args.names or _bench_names(root)
    model_names = [n.split("/", 1)[1] for n in names if n.startswith("models/")]
    if "models" in names or model_names:
        names = [n for n in names if n != "models" and not n.startswith("models/")] + \
            ["models"]
    for name in names:
        path = models if name == "models" else root / f"{name}.py"
        if not path.exists():
            raise InputError(f"bench: no benchmark named {name!r} in {root} (`bench --list` "
                             "names them)")
        saved = sys.argv
        sys.argv = [str(path)] + (["--isolated"] if args.isolated else [])
        if name == "models":
            sys.argv += ["--size", args.size] + model_names
        try:
            runpy.run_path(str(path), run_name="__main__")
        finally:
            sys.argv = saved
    return 0


def _parse_input(spec: str):
    """`f32[8,784]` -> a random tensor of that dtype and shape (ints: 0..9)."""
    if re.fullmatch(r"\s*-?[0-9]+\s*", spec):  # a Python int (a scripted `n: int`)
        return int(spec)
    m = re.fullmatch(r"\s*([a-z0-9]+)\[([0-9, ]*)\]\s*", spec)
    if not m:
        raise InputError(f"--input {spec!r}: expected DTYPE[SIZES], for example f32[8,784]")
    try:
        dtype = tj.dtype_from_name(m.group(1))
    except TypeError as err:
        raise InputError(f"--input {spec!r}: {err} (f32, f64, i64, bool, ...)") from None
    shape = tuple(int(s) for s in m.group(2).replace(" ", "").split(",") if s)
    if dtype.is_floating_point:
        return tj.randn(*shape, dtype=dtype)
    return tj.randint(0, 10, shape, dtype=dtype)


def _load_target(target: str, command: str):
    """The object FILE.py:NAME names (a Module class is instantiated)."""
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise InputError(f"{command}: expected FILE.py:NAME, got {target!r}")
    if not Path(path).is_file():
        raise InputError(f"{command}: {path}: no such file")
    namespace = runpy.run_path(path, run_name=f"__tracejit_{command}__")
    if name not in namespace:
        defined = sorted(k for k, v in namespace.items() if not k.startswith("_") and
                         callable(v) and getattr(v, "__module__", None) == namespace["__name__"])
        raise InputError(f"{command}: {path} defines no {name!r}"
                         + (f" (it defines {', '.join(defined)})" if defined else ""))
    obj = namespace[name]
    return obj() if isinstance(obj, type) and issubclass(obj, tj.nn.Module) else obj


def _check_inputs(obj, inputs: list, command: str) -> None:
    """One --input per positional argument the function (or forward) takes."""
    fn = obj.forward if isinstance(obj, tj.nn.Module) else obj
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read: the call itself will say
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    any_number = any(p.kind == p.VAR_POSITIONAL for p in params)
    if len(required) <= len(inputs) and (any_number or len(inputs) <= len(positional)):
        return
    label = f"{type(obj).__name__}.forward" if fn is not obj else getattr(
        obj, "__qualname__", repr(obj))
    wanted = len(required) if len(inputs) < len(required) else len(positional)
    names = ", ".join(p.name for p in positional[:wanted])
    raise InputError(f"{command}: {label}({names}) takes {wanted} input"
                     f"{'s' if wanted != 1 else ''}, {len(inputs)} given: one --input per "
                     "argument, e.g. --input f32[8,784]")


def _dump(args) -> int:
    obj = _load_target(args.target, "dump")
    inputs = tuple(_parse_input(s) for s in args.input)
    _check_inputs(obj, inputs, "dump")
    backend = "numba" if args.code or args.backward else "auto"
    if args.backward:  # float inputs require grad, so the trace records a backward
        inputs = tuple(t.requires_grad_() if isinstance(t, tj.Tensor) and
                       t.is_floating_point() else t for t in inputs)
    if isinstance(obj, (tj.jit.ScriptFunction, tj.jit.ScriptModule)):
        traced = obj
        traced(*inputs)
    elif args.script:
        traced = tj.script(obj, backend=backend)
        traced(*inputs)  # a scripted function is compiled at its first call
    else:
        traced = tj.trace(obj, inputs, backend=backend)
    stages = traced.traces[0].stages
    _print_stages(stages if args.stages else stages[-1:], args.sources)
    if args.backward:
        out = traced(*inputs)
        first = out[0] if isinstance(out, (tuple, list)) else out
        first.sum().backward()  # builds and runs the compiled backward
        if traced.backward_graph is None:
            print("# no compiled backward: gradients through branches and loops are "
                  "recorded by eager autograd, op by op")
            return 0
        _print_stages(traced.traces[0].backwards[0].stages if args.stages else
                      [("", traced.backward_graph, 0)], args.sources)
        pinned = _pinned_sizes(traced.graph, traced.backward_graph)
        if pinned:
            names = traced.backward_graph.symbols
            print("# the backward graph is compiled for any sizes; this trace's guards fix "
                  + ", ".join(f"{names.get(sym, sym)} = {size}"
                              for sym, size in pinned.items()))
    if args.guards:
        print("\nguards:")
        for g in traced.guards:
            print(f"  - {g}")
    if args.code:
        print("\n" + traced.code)
    return 0


def _export(args) -> int:
    """`export FILE.py:NAME --input f32[B,784] -o model.onnx`: a letter in a size names a
    dynamic dimension (traced at an example size of 3)."""
    obj = _load_target(args.target, "export")
    inputs, dynamic = [], {}
    for k, spec in enumerate(args.input):
        m = re.fullmatch(r"\s*([a-z0-9]+)\[([A-Za-z0-9_, ]*)\]\s*", spec)
        if not m:
            raise InputError(f"--input {spec!r}: expected DTYPE[SIZES], for example f32[B,784]")
        sizes = [s for s in m.group(2).replace(" ", "").split(",") if s]
        named = {d: s for d, s in enumerate(sizes) if not s.isdigit()}
        if named:
            dynamic[f"input{k}"] = named
        example = ",".join("3" if d in named else s for d, s in enumerate(sizes))
        inputs.append(_parse_input(f"{m.group(1)}[{example}]"))
    _check_inputs(obj, inputs, "export")
    try:
        tj.onnx.export(obj, tuple(inputs), args.output,
                       input_names=[f"input{k}" for k in range(len(inputs))],
                       dynamic_axes=dynamic or None)
    except tj.onnx.ExportError as err:
        print(f"export: {err}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


def _cache(args) -> int:
    if args.action == "clear":
        print(f"removed {kernel_cache.clear()} cached files")
        return 0
    info = kernel_cache.info()
    if info["folder"] is None:
        print("kernel cache: off (TRACEJIT_DISABLE_CACHE=1, or the folder is unusable)")
    else:
        print(f"kernel cache: {info['folder']}\n  kernels: {info['kernels']}\n"
              f"  size: {info['bytes'] / 1024:.1f} KiB")
    return 0


def _fuzz(args) -> int:
    if args.script:
        return _script_fuzz(args)
    t0 = time.perf_counter()
    backends = tuple(args.backend) if args.backend else ("interpret", "numba")
    reports = fuzzing.fuzz(args.n, args.seed, backends, calls=args.calls, verbose=args.verbose)
    bad = 0
    for backend, report in reports.items():
        print(f"{backend}: {report}")
        for m in report.mismatches[:args.show]:
            print(fuzzing.format_mismatch(m))
        bad += len(report.mismatches)
    print(f"seeds {args.seed}..{args.seed + args.n - 1}, {time.perf_counter() - t0:.1f} s")
    return 1 if bad else 0


def _script_fuzz(args) -> int:
    """`fuzz --script`: random scripted programs against eager (testing/script_fuzz.py)."""
    sf = script_fuzzing
    constructs = set(sf.ALL if args.all else sf.DEFAULT)
    for name in (args.with_ or []) + (args.without or []):
        if name not in sf.CONSTRUCTS:
            raise InputError(f"fuzz: no construct named {name!r}; the constructs are: "
                             f"{', '.join(sf.CONSTRUCTS)}")
    constructs |= set(args.with_ or [])
    constructs -= set(args.without or [])
    t0 = time.perf_counter()
    backends = tuple(args.backend) if args.backend else ("interpret",)
    reports = sf.fuzz(args.n, args.seed, backends, calls=args.calls, constructs=constructs,
                      verbose=args.verbose)
    bad = 0
    for backend, report in reports.items():
        print(f"{backend}: {report}")
        for m in report.mismatches[:args.show]:
            if args.shrink:
                small = sf.shrink(sf.generate(m[0], constructs), backend, args.calls)
                m = (sf.check(small, backend, args.calls).mismatches or [m])[0]
            print(sf.format_mismatch(m))
        for seed, _, call, message in report.refused[:args.show]:
            print(f"seed {seed} ({backend}), call {call}: refused: {message}")
        bad += len(report.mismatches)
    print(f"seeds {args.seed}..{args.seed + args.n - 1}, constructs off: "
          f"{', '.join(sorted(set(sf.CONSTRUCTS) - constructs)) or 'none'}; "
          f"{time.perf_counter() - t0:.1f} s")
    return 1 if bad else 0


def _print_stages(stages, sources: bool) -> None:
    """Each stage's graph; a pass that changed nothing is one line, not the same graph
    again under its own name."""
    previous = None
    for name, graph, _ in stages:
        text = graph.format(sources=sources)
        body = text.split("\n", 1)[1]
        print(f"# after {name}: no change" if body == previous else text)
        print()
        previous = body


def _pinned_sizes(forward, backward) -> dict:
    """Size symbols of the backward graph whose values the forward graph's inputs fix
    (a weight's 784 is `T` in a backward derived for every size): symbol -> size."""
    shapes = {v.name: v.shape for v in forward.inputs}
    pinned: dict = {}
    for v in backward.inputs:
        for fwd, bwd in zip(shapes.get(v.name, ()), v.shape):
            sym = symbolic.plain_symbol(bwd)
            if isinstance(fwd, int) and sym is not None:
                pinned.setdefault(sym, fwd)
    return pinned


def main(argv=None) -> int:
    """Parse the command line and run its command; `--help` and `--version` answer before
    the package's names are imported (numpy, the op table: see _startup.py)."""
    parser = argparse.ArgumentParser(prog="tracejit", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tracejit {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="an error in what a command was given shows its traceback")
    debug = argparse.ArgumentParser(add_help=False)  # --debug after the command too
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="a guided tour of eager tensors and autograd", parents=[debug])
    export = sub.add_parser("export", help="write a traced function or module as ONNX",
                            parents=[debug])
    export.add_argument("target", help="FILE.py:NAME (a function, module or Module class)")
    export.add_argument("--input", action="append", default=[],
                        help="an example input, DTYPE[SIZES]; a letter names a dynamic size "
                             "(f32[B,784])")
    export.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    bench = sub.add_parser("bench", help="run the benchmarks in benchmarks/", parents=[debug])
    bench.add_argument("names", nargs="*", help="benchmark names (default: all)")
    bench.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    bench.add_argument("--isolated", action="store_true",
                       help="also run each contestant alone in its own process (the "
                            "benchmarks that compare contestants)")
    bench.add_argument("--size", choices=["small", "large"], default="small",
                       help="models: the overhead-bound (small) or compute-bound (large) size")
    dump = sub.add_parser("dump", help="print the IR of a function or module in a file",
                          parents=[debug])
    dump.add_argument("target", help="FILE.py:NAME (a function, a Module class or instance)")
    dump.add_argument("--input", action="append", default=[],
                      help="an example input, e.g. f32[8,784] (repeat for each argument)")
    dump.add_argument("--sources", action="store_true", help="show the source line of nodes")
    dump.add_argument("--script", action="store_true",
                      help="compile with tj.script (control flow kept) instead of tj.trace")
    dump.add_argument("--guards", action="store_true", help="list the trace's guards")
    dump.add_argument("--backward", action="store_true",
                      help="float inputs require grad: also print the compiled backward graph")
    dump.add_argument("--code", action="store_true",
                      help="print the generated host program and kernels (numba backend)")
    dump.add_argument("--stages", action="store_true",
                      help="print the graph after every pass, not only the last")
    cache = sub.add_parser("cache", help="show or clear the compiled-kernel cache", parents=[debug])
    cache.add_argument("action", choices=["info", "clear"])
    fz = sub.add_parser("fuzz", help="random programs: traced calls against eager", parents=[debug])
    fz.add_argument("--n", type=int, default=100, help="programs per backend")
    fz.add_argument("--seed", type=int, default=0, help="the first program's seed")
    fz.add_argument("--calls", type=int, default=6,
                    help="calls per program after tracing (--script: calls per program)")
    fz.add_argument("--backend", action="append", choices=["interpret", "numba"],
                    help="only this backend (repeat for both; default both)")
    fz.add_argument("--show", type=int, default=5, help="mismatches printed per backend")
    fz.add_argument("--verbose", action="store_true", help="print mismatches as found")
    fz.add_argument("--script", action="store_true",
                    help="random @tj.script programs (loops, branches, lists, helpers) "
                         "against eager; default backend: interpret")
    fz.add_argument("--all", action="store_true",
                    help="--script: every construct, those with known bugs included")
    fz.add_argument("--with", dest="with_", action="append", metavar="CONSTRUCT",
                    help="--script: also this construct (repeat)")
    fz.add_argument("--without", action="append", metavar="CONSTRUCT",
                    help="--script: not this construct (repeat)")
    fz.add_argument("--shrink", action="store_true",
                    help="--script: cut the mismatches shown down to small programs")
    args = parser.parse_args(argv)
    _import_names()  # before any command, in the order `import tracejit` imports them
    freeze_imports()  # a command runs once and exits: the collector need not walk the imports
    try:
        return _run(args)
    except InputError as err:
        if args.debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run(args) -> int:
    if args.command == "demo":
        demo.main()
        return 0
    if args.command == "export":
        return _export(args)
    if args.command == "bench":
        return _bench(args)
    if args.command == "dump":
        return _dump(args)
    if args.command == "cache":
        return _cache(args)
    if args.command == "fuzz":
        return _fuzz(args)
    return 1


if __name__ == "__main__":
    sys.exit(main())
