"""Kernels compiled in the background: no step waits on Numba.

A kernel that is neither compiled in this process nor in the disk cache for the
arguments of its first call is sent to a worker process, which imports the same cached
module, compiles the kernel for that signature (Numba writes the machine code into the
cache) and updates the entry's digest manifest. Until the worker is done, the calls of
that kernel run its region on the interpreter (the region's ops one by one, on numpy);
the first call after it is done loads the machine code from the cache (milliseconds) and
runs it. A kernel already in the disk cache is loaded by a thread of this process (Numba
reads and links each in 10-30 ms), its calls running by ops meanwhile. Results are those
of the ops either way: the interpreter runs the same op implementations eager execution
does.

On by default where there is a disk cache to hand the code over (kernel_cache.py);
`TRACEJIT_BACKGROUND_COMPILE=0` (or `tj.jit.background_compile(False)`) compiles at the
first call instead, waiting for it. `wait()` (`tj.jit.wait_for_kernels()`) blocks until
every kernel sent off is compiled (benchmarks time the compiled steps). While a compile
has run for more than 2 s, one line on stderr says what is compiling and how many
kernels are left, at most every 2 s (`TRACEJIT_PROGRESS=0` silences it).

The worker is one process (the main process keeps the other core), started with this
Python (`python -c`, so that the user's script is not imported again, as
multiprocessing's spawn would) at the first compile sent off. Jobs and answers travel as
pickles over its stdin and stdout, written and read by two threads. At exit the jobs
still queued are handed to it (for at most half a second) and its stdin is closed: it
finishes the compiles it was given, writing them into the cache for the next run, and
ends (so a short script that never waits for its kernels still warms the cache). Its
stderr is not the program's, so a pipe reading the program's output is not held open by
it; a worker killed midway leaves no broken entry (Numba writes its files under
temporary names and renames them).
"""
from __future__ import annotations

import atexit
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..core.log import log
from ..runtime.kernel_cache import cache_dir, load_module, record_compiled

PROGRESS_AFTER = 2.0   # seconds a compile runs before the progress line
FLUSH_AT_EXIT = 0.5    # seconds an exiting program spends handing queued jobs over
_LOCK = threading.Lock()
_JOBS: dict = {}       # (module name, kernel name, signature) -> Job
_WORKER: list = []     # [(process, answers queue, jobs outbox)] once started
_LOADER: list = []     # [the loader thread's queue] once started
_SHOWN = [0.0]         # when the last progress line was printed
_SWITCH: list = [None]  # set_enabled's choice (None: the environment variable decides)


class Job:
    __slots__ = ("label", "started", "done", "error", "seconds", "load")

    def __init__(self, label: str, load: bool = False):
        self.label, self.started, self.load = label, time.monotonic(), load
        self.done, self.error, self.seconds = False, None, 0.0


def enabled() -> bool:
    on = _SWITCH[0]
    if on is None:
        on = os.environ.get("TRACEJIT_BACKGROUND_COMPILE", "1") != "0"
    return on and cache_dir() is not None


def set_enabled(on: bool | None) -> None:
    """Compile in the background (True), at first calls, waiting (False), or as
    TRACEJIT_BACKGROUND_COMPILE says (None)."""
    _SWITCH[0] = on


def pending(module, kernel, args: list, name: str) -> bool:
    """Whether this call of `kernel` (a Numba dispatcher of a cached kernel module, its
    attribute `name` there: a loop body's dispatchers are not named as their functions)
    must run without it: its compile for these arguments' types is under way in the
    worker, or has just been sent there. False when the kernel can run now (compiled, in
    the disk cache, or its compile is over: a failed one is repeated here by the call)."""
    sig = tuple(kernel.typeof_pyval(a) for a in args)
    if sig in kernel.overloads:
        return False
    key = (module.__name__, name, sig)
    with _LOCK:
        _collect()
        job = _JOBS.get(key)
        if job is None:
            if _in_disk_cache(kernel, sig):  # loaded by a thread; this call runs by ops
                job = _JOBS[key] = Job(f"loading {name} of {module.__name__}", load=True)
                _load(key, kernel, sig)
                return True
            job = _JOBS[key] = Job(f"{name} of {module.__name__}")
            _send(key, module, name, sig)
        if not job.done:
            _progress()
        return not job.done


def wait(timeout: float | None = None) -> bool:
    """Block until every kernel sent to the worker is compiled (True), or `timeout`
    seconds have passed (False)."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        with _LOCK:
            _collect()
            if all(job.done for job in _JOBS.values()):
                return True
            _progress()
        if end is not None and time.monotonic() > end:
            return False
        time.sleep(0.02)


def status() -> dict:
    """Kernels sent to the worker: how many, how many compiled, how many failed (those
    compile at their next call instead), and the worker's seconds; and kernels of the
    disk cache loaded by the loader thread: how many, how many of them are in use."""
    with _LOCK:
        _collect()
        jobs = [j for j in _JOBS.values() if not j.load]
        loads = [j for j in _JOBS.values() if j.load]
    return {"sent": len(jobs), "compiled": sum(j.done and not j.error for j in jobs),
            "failed": sum(bool(j.error) for j in jobs),
            "seconds": sum(j.seconds for j in jobs),
            "loads": len(loads), "loaded": sum(j.done for j in loads)}


def _in_disk_cache(kernel, sig) -> bool:
    """Whether Numba's index for `kernel` holds machine code for `sig` (a call loads it
    in milliseconds); True when that cannot be told (the call then decides, as
    without a worker)."""
    try:
        cache = kernel._cache
        key = cache._index_key(sig, kernel.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 — Numba's internals moved: do not send it off
        return True


def _load(key, kernel, sig) -> None:
    """Load the machine code of a cached kernel in the loader thread (with _LOCK held).
    Numba takes 10-30 ms a kernel to read and link it (most of a warm start's first
    step, for a model of dozens of kernels): meanwhile the calls run by ops."""
    if not _LOADER:
        jobs: queue.Queue = queue.Queue()
        threading.Thread(target=_loader, args=(jobs,), daemon=True,
                         name="tracejit-loader").start()
        _LOADER.append(jobs)
    _LOADER[0].put((key, kernel, sig))


def _loader(jobs: queue.Queue) -> None:
    while True:
        key, kernel, sig = jobs.get()
        start = time.monotonic()
        hits = sum(kernel.stats.cache_hits.values())
        try:
            kernel.compile(sig)
            error = None
        except Exception as err:  # noqa: BLE001 — the next call compiles it, and says why
            error = f"{type(err).__name__}: {err}"
        seconds = time.monotonic() - start
        if error is None:
            loaded = sum(kernel.stats.cache_hits.values()) > hits
            log("compile", f"{'loaded' if loaded else 'compiled'} {kernel.__name__} of "
                           f"{key[0]} in {seconds:.3f} s (disk cache "
                           f"{'hit' if loaded else 'miss'}, in the loader thread)")
        with _LOCK:
            _finish(key, error, seconds)


def _send(key, module, name: str, sig) -> None:
    if not _WORKER:
        _WORKER.append(_start())
    if _WORKER[0][0].poll() is not None:  # it died (killed from outside): compile at the call
        _finish(key, "the compiler process is gone", 0.0)
        return
    with open(module.__file__, encoding="utf-8") as f:
        _WORKER[0][2].put((key, f.read(), name, sig))  # the writer thread sends it


def _start():
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, TRACEJIT_BACKGROUND_COMPILE="0",
               PYTHONPATH=os.pathsep.join([root] + [p for p in os.environ.get(
                   "PYTHONPATH", "").split(os.pathsep) if p]))
    process = subprocess.Popen(
        [sys.executable, "-c", "from tracejit.backends.background import _serve; _serve()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    answers: queue.Queue = queue.Queue()
    outbox: queue.Queue = queue.Queue()

    def read() -> None:  # the worker's answers, as they come
        while True:
            answer = _read(process.stdout)
            answers.put(answer)
            if answer is None:
                return

    def write() -> None:  # jobs, without blocking the caller on a full pipe
        while True:
            job = outbox.get()
            try:
                if job is None:  # exit: the worker ends after the jobs it was given
                    process.stdin.close()
                    return
                _write(process.stdin, job)
            except (OSError, ValueError):  # the worker is gone: `read` says so
                return
    threading.Thread(target=read, daemon=True, name="tracejit-compiler").start()
    writer = threading.Thread(target=write, daemon=True, name="tracejit-compiler")
    writer.start()

    def at_exit() -> None:
        outbox.put(None)
        writer.join(FLUSH_AT_EXIT)
    atexit.register(at_exit)
    return process, answers, outbox


def _write(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _read(stream):
    """The next pickle, or None at the end of the stream (or a message cut short)."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = struct.unpack("<Q", head)[0]
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None  # noqa: S301 — ours


def _collect() -> None:
    """Take the worker's answers (with _LOCK held)."""
    if not _WORKER:
        return
    answers = _WORKER[0][1]
    while True:
        try:
            answer = answers.get_nowait()
        except queue.Empty:
            break
        if answer is None:
            break
        _finish(*answer)
    if _WORKER[0][0].poll() is not None:  # the worker is gone (its answers taken above):
        for key, job in _JOBS.items():    # what it had not done compiles at the calls
            if not job.done:
                _finish(key, "the compiler process is gone", 0.0)


def _finish(key, error, seconds: float) -> None:
    job = _JOBS[key]
    job.done, job.error, job.seconds = True, error, seconds


def _progress() -> None:
    """One line on stderr, at most every PROGRESS_AFTER seconds, while a compile has run
    for longer than that (with _LOCK held)."""
    if os.environ.get("TRACEJIT_PROGRESS") == "0":
        return
    now = time.monotonic()
    left = [j for j in _JOBS.values() if not j.done and not j.load]
    if not left or now - _SHOWN[0] < PROGRESS_AFTER or \
            now - min(j.started for j in left) < PROGRESS_AFTER:
        return
    _SHOWN[0] = now
    print(f"[tracejit] compiling {len(left)} kernel{'s' * (len(left) != 1)} in the "
          f"background ({left[0].label}); the program runs meanwhile, unfused "
          f"(TRACEJIT_PROGRESS=0 silences this)", file=sys.stderr)


# ---- the worker process ---------------------------------------------------------------

def _serve() -> None:
    """The worker: compile each kernel it is sent and say how it went."""
    jobs, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # (anything printed must not mix with the answers)
    while True:
        job = _read(jobs)
        if job is None:
            return
        key, source, name, sig = job
        start = time.monotonic()
        try:
            module = load_module(source, "region")
            getattr(module, name).compile(sig)
            record_compiled(module)
            error = None
        except Exception as err:  # noqa: BLE001 — the main process compiles it instead
            error = f"{type(err).__name__}: {err}"
        try:
            _write(answers, (key, error, time.monotonic() - start))
        except OSError:  # the program has ended: the cache is what the next run reads
            pass
