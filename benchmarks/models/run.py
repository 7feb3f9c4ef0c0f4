"""Training steps of real models: each model is written once against a library module
(`tracejit` or `torch`, "change the import") and its training step (zero_grad, the loss,
backward, the optimiser's step) is timed for

- tracejit eager,
- tracejit traced: the model (whose forward returns the loss) traced with `tj.trace`,
  the optimiser eager,
- tracejit scripted: the same with `tj.script`,
- PyTorch eager, and torch.compile (inductor, CPU) of the same model,

from the same initial weights (PyTorch's initialisation, loaded into tracejit through
the state dict) and the same batch, at the same thread count. Before timing, every
contestant trains CHECK_STEPS steps and its losses are compared with tracejit eager's
(and tracejit eager's with PyTorch eager's).

Run: python benchmarks/models/run.py [--size small|large] [--isolated] [--threads N]
         [--no-first-step] [--no-profile] [--json FILE] [names...]
`--isolated` also times each contestant alone in its own process; `--exact` sets dropout
to 0, so that every contestant's losses must equal eager's (with dropout, a compiled step
draws other random numbers than eager's, in both libraries). The table gives the median
time per step and page faults per step, both ways; the first step of the traced model in
a new process with an empty kernel cache (cold) and with the same cache (warm); and where
the traced step's time goes (tj.profiler). `python run.py --markdown FILE.json...` prints
the tables of docs/benchmarks.md from the `--json` files of runs.
"""
from __future__ import annotations

import compileall
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.dirname(HERE), ROOT]  # the models, common.py, tracejit


def _threads(argv) -> int:
    if "--threads" in argv:
        return int(argv[argv.index("--threads") + 1])
    return int(os.environ.get("TJB_THREADS", 2))  # a contestant alone: its parent's count


# The thread count is fixed before numpy (OpenBLAS), numba and torch start their pools:
# every contestant gets the same number of threads.
THREADS = _threads(sys.argv)
if "numpy" not in sys.modules:  # a benchmark's process (not a test importing the models)
    os.environ["TJB_THREADS"] = str(THREADS)
    for _var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402

from common import measure_alone, measure_together, print_table  # noqa: E402

MODELS = ["gpt", "mnist_cnn", "resnet", "lstm_lm", "gru_char", "vae", "super_res", "dcgan"]
# models PyTorch's examples have that tracejit cannot express yet: what is missing
NOT_YET: dict = {}
CONTESTANTS = ["tracejit eager", "tracejit traced", "tracejit scripted", "torch eager",
               "torch.compile"]
CHECK_STEPS = 3


def load(name: str):
    return importlib.import_module(name)


def _missing(spec) -> list:
    """What the model needs that tracejit lacks (from the spec's REQUIRES)."""
    import tracejit as tj

    out = []
    for path in getattr(spec, "REQUIRES", []):
        obj = tj
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            out.append(path)
    return out


def _random(spec, cfg) -> bool:
    """Whether a step draws random numbers (dropout, sampling): then two libraries, or a
    compiled and an eager step, need not draw the same ones."""
    return cfg.get("dropout", 0) > 0 or getattr(spec, "RANDOM", False)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS)
    return torch


def reference_state(spec, cfg) -> dict:
    """PyTorch's initial weights as numpy arrays (tracejit's own when PyTorch is missing)."""
    torch = _torch()
    if torch is None:
        import tracejit as tj

        tj.manual_seed(0)
        return {k: v.detach().numpy().copy() for k, v in spec.build(tj, cfg).state_dict()
                .items()}
    torch.manual_seed(0)
    return {k: v.detach().numpy().copy() for k, v in spec.build(torch, cfg).state_dict()
            .items()}


def make_step(lib, spec, cfg, state, batch, wrap=None):
    """(step, wrapped model): a user's training step over the model built from `state`."""
    lib.manual_seed(1)
    model = spec.build(lib, cfg)
    model.load_state_dict({k: (lib.from_numpy(v.copy())) for k, v in state.items()})
    opt = spec.optimizer(lib, model, cfg)
    inputs = tuple(lib.from_numpy(a) for a in batch)
    if hasattr(spec, "train_step"):  # a step of several networks (a GAN's two): each
        nets = {name: wrap(getattr(model, name), examples) if wrap else  # wrapped alone
                getattr(model, name) for name, examples in spec.parts(inputs).items()}
        return (lambda: spec.train_step(lib, nets, opt, inputs)), nets, opt
    fn = wrap(model, inputs) if wrap else model
    clip = getattr(spec, "CLIP", None)
    params = list(model.parameters())

    def step():
        opt.zero_grad()
        loss = fn(*inputs)
        loss.backward()
        if clip is not None:
            lib.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        return loss
    return step, fn, opt


def setup(name: str, spec, cfg, state, batch):
    """(step, losses of the first CHECK_STEPS steps, seconds of the first step, extra)
    for one contestant; raises when it cannot run."""
    if name.startswith("tracejit"):
        import tracejit as tj

        lib = tj
        wrap = {"tracejit eager": None,
                "tracejit traced": lambda m, inputs: tj.trace(m, inputs),
                "tracejit scripted": lambda m, inputs: tj.script(m)}[name]
    else:
        lib = _torch()
        if lib is None:
            raise RuntimeError("PyTorch is not installed")
        wrap = None if name == "torch eager" else (lambda m, inputs: lib.compile(m))
    step, fn, opt = make_step(lib, spec, cfg, state, batch, wrap)
    t0 = time.perf_counter()
    losses = [step().item()]
    first = time.perf_counter() - t0
    losses += [step().item() for _ in range(CHECK_STEPS - 1)]
    if name.startswith("tracejit"):  # time the compiled steps, not the interpreted ones
        lib.jit.wait_for_kernels()
        step()
    return step, losses, first, {"fn": fn, "opt": opt, "lib": lib}


def check(spec, cfg, results: dict) -> list:
    """Lines saying how each contestant's losses compare; a contestant whose losses
    differ where they must agree is dropped (its entry gets a 'reason')."""
    lines = []
    ref = results.get("tracejit eager", {}).get("losses")
    torch_ref = results.get("torch eager", {}).get("losses")
    random = _random(spec, cfg)
    for name, r in results.items():
        if "losses" not in r:
            continue
        if not all(math.isfinite(v) for v in r["losses"]):
            r["reason"] = f"non-finite loss {r['losses']}"
            continue
        base, base_name = (torch_ref, "torch eager") if name == "torch.compile" else \
            (ref, "tracejit eager")
        if name in ("tracejit eager", "torch eager") or base is None:
            continue
        diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(r["losses"], base))
        first = abs(r["losses"][0] - base[0]) / max(abs(base[0]), 1e-12)
        r["check"] = diff
        # a deterministic step must give eager's first loss to float32 rounding; later
        # steps train on weights that differ by rounding, which a high learning rate
        # (ResNet's SGD at 0.1 with momentum) amplifies, in torch.compile's steps too
        ok = random or (first <= 1e-5 and diff <= 1e-2)
        lines.append(f"{name}: losses of {CHECK_STEPS} steps vs {base_name}: max rel diff "
                     f"{diff:.1e}, first step {first:.1e}"
                     + (" (random draws differ)" if random and diff > 1e-4 else "")
                     + ("" if ok else " -- MISMATCH, left out"))
        if not ok:
            r["reason"] = f"loss mismatch vs {base_name}: {r['losses']} vs {base}"
    if ref and torch_ref:
        diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ref, torch_ref))
        lines.append(f"tracejit eager vs torch eager (same initial weights): max rel diff "
                     f"{diff:.1e}" + (" (random draws differ between the libraries)"
                                      if random else ""))
        results["tracejit eager"]["check_torch"] = diff
    return lines


# ---- where the traced step's time goes ----------------------------------------------

def _category(name: str) -> str:
    if name.startswith("tracejit::kernel"):
        return "fused kernels"
    if "conv" in name or "im2col" in name or "col2im" in name:
        return "conv (im2col, col2im; its matmuls under matmul)"
    if name in ("aten::matmul", "aten::mm", "aten::bmm", "aten::addmm", "aten::linear"):
        return "matmul"
    if name.startswith("autograd::engine"):
        return "autograd engine"
    if name.startswith("tracejit::compile") or name.startswith("tracejit::cache_load"):
        return "compile"
    if name.startswith("tracejit::"):
        return "host programs, guards"
    if name.startswith("aten::"):
        return "other ops"
    return "python (step, optimizer)"


def profile_step(step, lib, steps: int = 5) -> dict:
    """Self time per category, ms per step, over `steps` profiled steps (the profiler's
    own cost included), and the wall time per step under the profiler."""
    from tracejit.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = (time.perf_counter() - t0) / steps
    cats: dict = {}
    covered = 0.0
    for e in prof.events():
        cats[_category(e.name)] = cats.get(_category(e.name), 0.0) + e.self_cpu_time_total
        if e.cpu_parent is None:
            covered += e.cpu_time_total
    out = {k: v / steps / 1e3 for k, v in cats.items()}
    out["python (step, optimizer)"] = out.get("python (step, optimizer)", 0.0) + \
        max(wall * 1e3 - covered / steps / 1e3, 0.0)
    out["wall under the profiler"] = wall * 1e3
    return out


# ---- the first step in a new process ------------------------------------------------

FIRST_STEP = """
import sys, time
t0 = time.perf_counter()
sys.path[:0] = [{here!r}, {root!r}]
import numpy as np
import run
import tracejit as tj
spec = run.load({name!r})
cfg = dict(spec.SIZES[{size!r}])
state = dict(np.load({state!r}))
batch = spec.data(cfg, np.random.default_rng(0))
step, fn, opt = run.make_step(tj, spec, cfg, state, batch,
                              lambda m, inputs: {wrap})
step().item()
first = time.perf_counter() - t0
# then steps until the background compiler is done and its kernels are in use
longest, ready = first, first
status = tj.backends.background.status
while (status()["compiled"] + status()["failed"] < status()["sent"] or
       status()["loaded"] < status()["loads"]) and time.perf_counter() - t0 < 120:
    s = time.perf_counter()
    step().item()
    longest = max(longest, time.perf_counter() - s)
if status()["sent"] or status()["loads"]:
    s = time.perf_counter()
    step().item()  # the first step with every kernel compiled (they load from the cache)
    longest = max(longest, time.perf_counter() - s)
    ready = time.perf_counter() - t0
print(first, longest, ready, status()["sent"])
"""


def first_step(name: str, size: str, state: dict, kind: str = "trace",
               warm_runs: int = 2) -> tuple:
    """(cold, warm s): a new process imports tracejit, builds the model, traces it and
    runs one step, with an empty kernel cache and then with the same cache. Cold is
    [first step s, longest step s, s until a step ran with every kernel compiled, kernels
    compiled in the background]: with the background compiler (the default) the process
    keeps stepping until its kernels are compiled."""
    wrap = "tj.trace(m, inputs)" if kind == "trace" else "tj.script(m)"
    # tracejit's bytecode, as an installed package has it (pip compiles it at install):
    # a checkout run where PYTHONDONTWRITEBYTECODE is set compiles every module from
    # source in each new process, 0.15 s that is not the library's own start
    compileall.compile_dir(os.path.join(ROOT, "tracejit"), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o700)
        path = os.path.join(tmp, "state.npz")
        np.savez(path, **state)
        env = dict(os.environ, TRACEJIT_CACHE_DIR=os.path.join(tmp, "cache"),
                   TRACEJIT_BACKGROUND_COMPILE="1")  # a user's default
        script = FIRST_STEP.format(here=HERE, root=ROOT, name=name, size=size, state=path,
                                   wrap=wrap)

        def once() -> list:
            out = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                 capture_output=True, text=True).stdout
            return [float(x) for x in out.split()[-4:]]
        cold = once()
        warm = statistics.median(once()[0] for _ in range(warm_runs))
    return cold, warm


# ---- one model ----------------------------------------------------------------------

def run_model(name: str, size: str, *, isolated: bool, first: bool, prof: bool,
              repeat: int, exact: bool = False) -> dict:
    spec = load(name)
    cfg = dict(spec.SIZES[size])
    if exact and "dropout" in cfg:
        cfg["dropout"] = 0.0  # no random draws: every contestant must give eager's losses
    title = f"{name} [{size}]: " + spec.TITLE.format(**cfg)
    missing = _missing(spec)
    if missing:
        print(f"\n{title}\n  not run: tracejit lacks {', '.join(missing)}")
        return {"model": name, "size": size, "missing": missing}
    state = reference_state(spec, cfg)
    batch = spec.data(cfg, np.random.default_rng(0))
    results: dict = {}
    steps = {}
    for c in CONTESTANTS:
        try:
            step, losses, first_s, extra = setup(c, spec, cfg, state, batch)
        except Exception as err:  # a contestant that cannot run is reported, not hidden
            results[c] = {"reason": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
            continue
        results[c] = {"losses": losses, "first": first_s, **extra}
        steps[c] = step
    notes = check(spec, cfg, results)
    for c, r in results.items():
        if "reason" in r:
            steps.pop(c, None)
    together = measure_together(steps, repeat=repeat, min_time=0.2)
    alone = {}
    if isolated:
        env = dict(os.environ, TJB_MODEL=name, TJB_SIZE=size)
        for c in steps:
            try:
                alone[c] = measure_alone(__file__, c, env=env)
            except subprocess.CalledProcessError as err:
                results[c]["alone_error"] = err.stderr.strip().splitlines()[-1:]
    header = ["contestant", "ms/step", "faults/step", "vs torch eager", "vs torch.compile"]
    if isolated:
        header += ["ms/step alone", "faults alone", "vs eager alone", "vs compile alone"]
    header += ["first step (this process)"]

    def ratio(times, c, base):
        return f"{times[c][0] / times[base][0]:.2f}x" if c in times and base in times else "-"
    rows = []
    for c in CONTESTANTS:
        if c not in steps:
            continue
        t, f = together[c]
        row = [c, f"{t * 1e3:.3g}", f"{f:.1f}", ratio(together, c, "torch eager"),
               ratio(together, c, "torch.compile")]
        if isolated:
            ta = alone.get(c)
            row += ([f"{ta[0] * 1e3:.3g}", f"{ta[1]:.1f}"] if ta else ["-", "-"])
            row += [ratio(alone, c, "torch eager"), ratio(alone, c, "torch.compile")]
        row.append(f"{results[c]['first']:.2f} s")
        rows.append(row)
    print_table(f"{title}\n(median of {repeat}, {THREADS} threads each; together: "
                "interleaved in one process" + ("; alone: each in its own process)" if isolated
                                                else ")"), header, rows)
    for c, r in results.items():
        if "reason" in r:
            print(f"  left out: {c}: {r['reason']}")
    for c in ("tracejit traced", "tracejit scripted"):
        fn = results.get(c, {}).get("fn")
        for part, wrapped in (fn.items() if isinstance(fn, dict) else [("", fn)]):
            stats = getattr(wrapped, "stats", None)
            if stats and c in steps:  # a step that recompiled or fell back to eager says so
                notes.append(f"{c}{' ' + part if part else ''}: " +
                             ", ".join(f"{k} {v}" for k, v in stats.items()))
    for line in notes + [f"note: {n}" for n in spec.NOTES]:
        print(f"  {line}")
    out = {"model": name, "size": size, "cfg": cfg, "together": together, "alone": alone,
           "left_out": {c: r["reason"] for c, r in results.items() if "reason" in r},
           "checks": notes, "first": {c: r["first"] for c, r in results.items()
                                      if "first" in r}}
    if prof and "tracejit traced" in steps:
        p = profile_step(steps["tracejit traced"], results["tracejit traced"]["lib"])
        wall = p.pop("wall under the profiler")
        parts = sorted(p.items(), key=lambda kv: -kv[1])
        print(f"  traced step under tj.profiler ({wall:.3g} ms/step): " +
              ", ".join(f"{k} {v:.3g} ms ({v / wall:.0%})" for k, v in parts if v > 0.005))
        out["profile"] = dict(p, wall=wall)
    if first and "tracejit traced" in steps:
        (cold, longest, ready, sent), warm = first_step(name, size, state)
        print(f"  first traced step in a new process (import, build, trace, step): "
              f"cold {cold:.2f} s (empty kernel cache; longest step {longest:.2f} s, "
              f"{sent:.0f} kernels compiled in the background and in use after "
              f"{ready:.1f} s), warm {warm:.2f} s (same cache)")
        out["cold"], out["warm"] = cold, warm
        out["cold_longest"], out["cold_ready"] = longest, ready
    sys.stdout.flush()
    return out


def _alone(contestant: str) -> None:
    name, size = os.environ["TJB_MODEL"], os.environ["TJB_SIZE"]
    spec = load(name)
    cfg = dict(spec.SIZES[size])
    state = reference_state(spec, cfg)
    step = setup(contestant, spec, cfg, state, spec.data(cfg, np.random.default_rng(0)))[0]
    t, f = measure_together({contestant: step}, repeat=int(os.environ.get("TJB_REPEAT", 5)),
                            min_time=0.2)[contestant]
    print(json.dumps({"time": t, "faults": f}))


def markdown(paths: list) -> None:
    """The tables of docs/benchmarks.md from the `--json` files of runs."""
    def ms(entry, c):
        return f"{entry[c][0] * 1e3:.3g}" if c in entry else "-"

    def ratio(entry, c, base):
        return f"{entry[c][0] / entry[base][0]:.2f}x" if c in entry and base in entry else "-"
    print("| model, size | contestant | ms/step together | vs torch eager | vs torch.compile "
          "| ms/step alone | vs torch eager | vs torch.compile | faults/step together / alone |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    runs = [r for path in paths for r in json.load(open(path)) if "together" in r]
    for r in runs:
        tog, alo = r["together"], r["alone"]
        for c in CONTESTANTS:
            if c not in tog:
                continue
            faults = f"{tog[c][1]:.1f} / " + (f"{alo[c][1]:.1f}" if c in alo else "-")
            print(f"| {r['model']}, {r['size']} | {c} | {ms(tog, c)} | "
                  f"{ratio(tog, c, 'torch eager')} | {ratio(tog, c, 'torch.compile')} | "
                  f"{ms(alo, c)} | {ratio(alo, c, 'torch eager')} | "
                  f"{ratio(alo, c, 'torch.compile')} | {faults} |")
    print("\n| model, size | traced: cold first step | warm first step | first step in the run's "
          "process: traced / scripted / torch.compile (cold inductor cache) |")
    print("|---|---:|---:|---|")
    for r in runs:
        f = r["first"]
        cold = f"{r['cold']:.2f} s" if "cold" in r else "-"
        if "cold_ready" in r:
            cold += f" (longest step {r['cold_longest']:.2f} s; compiled in use after " \
                    f"{r['cold_ready']:.1f} s)"
        warm = f"{r['warm']:.2f} s" if "warm" in r else "-"
        print(f"| {r['model']}, {r['size']} | {cold} | {warm} | " + " / ".join(
            f"{f[c]:.2f} s" if c in f else "-" for c in
            ("tracejit traced", "tracejit scripted", "torch.compile")) + " |")
    print("\n| model, size | traced step under the profiler | largest self-time shares |")
    print("|---|---:|---|")
    for r in runs:
        p = dict(r.get("profile", {}))
        if not p:
            continue
        wall = p.pop("wall")
        parts = sorted(p.items(), key=lambda kv: -kv[1])[:4]
        print(f"| {r['model']}, {r['size']} | {wall:.3g} ms | " + ", ".join(
            f"{k} {v / wall:.0%}" for k, v in parts) + " |")
    for r in runs:
        for c, why in r["left_out"].items():
            print(f"- {r['model']}, {r['size']}: {c} left out: {why}")


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--alone":
        _alone(argv[1])
        return
    if argv and argv[0] == "--markdown":
        markdown(argv[1:])
        return
    size, out_path, repeat = "small", None, 5
    flags = {"--isolated": False, "--no-first-step": False, "--no-profile": False,
             "--exact": False}
    names = []
    it = iter(argv)
    for a in it:
        if a == "--size":
            size = next(it)
        elif a == "--threads":
            next(it)
        elif a == "--json":
            out_path = next(it)
        elif a == "--repeat":
            repeat = int(next(it))
        elif a in flags:
            flags[a] = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return
        else:
            names.append(a)
    if size not in ("small", "large"):
        raise SystemExit("--size: small or large")
    for n in names:
        if n not in MODELS and n not in NOT_YET:
            raise SystemExit(f"no model {n!r}; models: {', '.join(MODELS)}")
    # torch.compile's first step below is a cold compile: its cache starts empty
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    os.environ["TJB_REPEAT"] = str(repeat)
    t0 = time.perf_counter()
    print(f"threads: {THREADS}; load average at start: "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    results = []
    for n in names or MODELS + list(NOT_YET):
        if n in NOT_YET:
            print(f"\n{n}: not yet possible in tracejit: it lacks {NOT_YET[n]}")
            results.append({"model": n, "missing": NOT_YET[n]})
            continue
        results.append(run_model(n, size, isolated=flags["--isolated"],
                                 first=not flags["--no-first-step"],
                                 prof=not flags["--no-profile"], repeat=repeat,
                                 exact=flags["--exact"]))
        if out_path:  # after every model: a long run cut short keeps what it measured
            with open(out_path, "w") as f:
                json.dump(results, f, indent=1, default=str)
    print(f"\n(load average at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"took {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
