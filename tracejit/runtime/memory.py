"""Memory statistics for CPU tensors: `tj.memory_allocated()` and its peak.

A CPU tensor's storage is a numpy array, and numpy (since 1.22) lets a program
install its own allocator for array data (NEP 49, `PyDataMem_SetHandler`). This
module installs one that forwards to the allocator it replaces and counts bytes
as storage is made and freed: the current total, the peak, and the number of
allocations. It is written in LLVM IR and compiled by llvmlite at import (a few
milliseconds), so counting costs two atomic additions per allocation and nothing
per tensor op in Python.

What is counted: the data of every numpy array made in the main thread's context
after tracejit is imported, which is every CPU tensor's storage (eager results,
compiled programs' outputs and buffers, gradients, optimiser state) and numpy's
own temporaries inside an op while they live. numpy's handler is a context
variable: arrays made in other threads use numpy's default allocator and are not
counted. Arrays made before the import are not counted, and their frees are
not subtracted (numpy frees each array through the allocator that made it).

`import tracejit` leaves numpy's allocator alone: the allocator is installed when a
statistic is first asked for (`tj.memory_allocated()`, `max_memory_allocated()`,
`reset_peak_memory_stats()`, their `tj.cuda` names, a profiler with `profile_memory=True`),
so the figures count storage made from then on. `TRACEJIT_MEMORY_STATS=1` installs it at
the import (to count from the start); `TRACEJIT_MEMORY_STATS=0` never installs it (the
statistics are 0).
"""
from __future__ import annotations

import ctypes
import hashlib
import os

import numpy as np

_HEADER = 16  # bytes before each block: its size (keeps numpy's 16-byte alignment)

# the handler's state, read by the IR through `ctx`: numpy's allocator it forwards to,
# then the counters
_CTX, _MALLOC, _CALLOC, _REALLOC, _FREE, _CURRENT, _PEAK, _COUNT = range(8)
_STATE = (ctypes.c_int64 * 8)()


class _Allocator(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("malloc", ctypes.c_void_p),
                ("calloc", ctypes.c_void_p), ("realloc", ctypes.c_void_p),
                ("free", ctypes.c_void_p)]


class _Handler(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8),
                ("allocator", _Allocator)]


_IR = r"""
%state = type [8 x i64]

define internal i8* @fwd_malloc(%state* %s, i64 %n) {
  %f.p = getelementptr %state, %state* %s, i64 0, i64 1
  %f.i = load i64, i64* %f.p
  %f = inttoptr i64 %f.i to i8* (i8*, i64)*
  %c.p = getelementptr %state, %state* %s, i64 0, i64 0
  %c.i = load i64, i64* %c.p
  %c = inttoptr i64 %c.i to i8*
  %r = call i8* %f(i8* %c, i64 %n)
  ret i8* %r
}

define internal i8* @finish(%state* %s, i8* %raw, i64 %size, i64 %delta) {
  %null = icmp eq i8* %raw, null
  br i1 %null, label %fail, label %ok
fail:
  ret i8* null
ok:
  %h = bitcast i8* %raw to i64*
  store i64 %size, i64* %h
  %cur.p = getelementptr %state, %state* %s, i64 0, i64 5
  %old = atomicrmw add i64* %cur.p, i64 %delta monotonic
  %new = add i64 %old, %delta
  %peak.p = getelementptr %state, %state* %s, i64 0, i64 6
  %ignored = atomicrmw max i64* %peak.p, i64 %new monotonic
  %cnt.p = getelementptr %state, %state* %s, i64 0, i64 7
  %ignored2 = atomicrmw add i64* %cnt.p, i64 1 monotonic
  %user = getelementptr i8, i8* %raw, i64 16
  ret i8* %user
}

define i8* @tj_malloc(i8* %ctx, i64 %size) {
  %s = bitcast i8* %ctx to %state*
  %n = add i64 %size, 16
  %raw = call i8* @fwd_malloc(%state* %s, i64 %n)
  %r = call i8* @finish(%state* %s, i8* %raw, i64 %size, i64 %size)
  ret i8* %r
}

define i8* @tj_calloc(i8* %ctx, i64 %nelem, i64 %elsize) {
  %s = bitcast i8* %ctx to %state*
  %size = mul i64 %nelem, %elsize
  %n = add i64 %size, 16
  %f.p = getelementptr %state, %state* %s, i64 0, i64 2
  %f.i = load i64, i64* %f.p
  %f = inttoptr i64 %f.i to i8* (i8*, i64, i64)*
  %c.p = getelementptr %state, %state* %s, i64 0, i64 0
  %c.i = load i64, i64* %c.p
  %c = inttoptr i64 %c.i to i8*
  %raw = call i8* %f(i8* %c, i64 %n, i64 1)
  %r = call i8* @finish(%state* %s, i8* %raw, i64 %size, i64 %size)
  ret i8* %r
}

define i8* @tj_realloc(i8* %ctx, i8* %ptr, i64 %size) {
  %s = bitcast i8* %ctx to %state*
  %isnull = icmp eq i8* %ptr, null
  br i1 %isnull, label %fresh, label %grow
fresh:
  %r0 = call i8* @tj_malloc(i8* %ctx, i64 %size)
  ret i8* %r0
grow:
  %raw = getelementptr i8, i8* %ptr, i64 -16
  %h = bitcast i8* %raw to i64*
  %oldsize = load i64, i64* %h
  %n = add i64 %size, 16
  %f.p = getelementptr %state, %state* %s, i64 0, i64 3
  %f.i = load i64, i64* %f.p
  %f = inttoptr i64 %f.i to i8* (i8*, i8*, i64)*
  %c.p = getelementptr %state, %state* %s, i64 0, i64 0
  %c.i = load i64, i64* %c.p
  %c = inttoptr i64 %c.i to i8*
  %new = call i8* %f(i8* %c, i8* %raw, i64 %n)
  %delta = sub i64 %size, %oldsize
  %r = call i8* @finish(%state* %s, i8* %new, i64 %size, i64 %delta)
  ret i8* %r
}

define void @tj_free(i8* %ctx, i8* %ptr, i64 %size) {
  %s = bitcast i8* %ctx to %state*
  %isnull = icmp eq i8* %ptr, null
  br i1 %isnull, label %done, label %release
done:
  ret void
release:
  %raw = getelementptr i8, i8* %ptr, i64 -16
  %h = bitcast i8* %raw to i64*
  %stored = load i64, i64* %h
  %cur.p = getelementptr %state, %state* %s, i64 0, i64 5
  %neg = sub i64 0, %stored
  %ignored = atomicrmw add i64* %cur.p, i64 %neg monotonic
  %f.p = getelementptr %state, %state* %s, i64 0, i64 4
  %f.i = load i64, i64* %f.p
  %f = inttoptr i64 %f.i to void (i8*, i8*, i64)*
  %c.p = getelementptr %state, %state* %s, i64 0, i64 0
  %c.i = load i64, i64* %c.p
  %c = inttoptr i64 %c.i to i8*
  %n = add i64 %stored, 16
  call void %f(i8* %c, i8* %raw, i64 %n)
  ret void
}
"""

_KEEP: list = []  # what must outlive every array it allocated: engine, handler, state
_INSTALLED = [False]


def _capsule_pointer(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


def _numpy_api():
    """numpy's C-API table (the `_ARRAY_API` capsule's pointer array)."""
    try:
        from numpy._core import _multiarray_umath as mu
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as mu

    return ctypes.cast(_capsule_pointer(mu._ARRAY_API, None), ctypes.POINTER(ctypes.c_void_p))


def install() -> bool:
    """Put the counting allocator in front of numpy's (once); False where it cannot be
    (an unexpected numpy, or TRACEJIT_MEMORY_STATS=0)."""
    if _INSTALLED[0]:
        return True
    if os.environ.get("TRACEJIT_MEMORY_STATS") == "0":
        return False
    try:
        api = _numpy_api()
        set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(api[304])
        get_handler = ctypes.PYFUNCTYPE(ctypes.py_object)(api[305])
        current = get_handler()
        old = _Handler.from_address(_capsule_pointer(current, b"mem_handler"))
        if old.version != 1 or np.lib.NumpyVersion(np.__version__) < "1.22.0":
            return False
        a = old.allocator
        _STATE[_CTX], _STATE[_MALLOC], _STATE[_CALLOC] = a.ctx or 0, a.malloc, a.calloc
        _STATE[_REALLOC], _STATE[_FREE] = a.realloc, a.free
        addresses = _compile()
        handler = _Handler(b"tracejit_counting_allocator", 1, _Allocator(
            ctypes.addressof(_STATE), *addresses))
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_void_p]
        name = ctypes.create_string_buffer(b"mem_handler")
        capsule = new(ctypes.addressof(handler), name, None)
        _KEEP.extend([handler, name, capsule, current, _STATE])
        for obj in _KEEP:  # never freed, not even at exit: arrays freed then still call in
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
        set_handler(capsule)
    except Exception:  # noqa: BLE001 — statistics are optional; numpy keeps its allocator
        return False
    _INSTALLED[0] = True
    return True


def _compile() -> tuple:
    """The four functions' addresses. Their machine code is kept in the kernel cache
    folder (generating it takes 6-12 ms of the import; loading it under 1 ms)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple().create_target_machine()
    path = _object_path(llvm, target)
    code = None
    if path is not None:
        try:
            stored = path.read_bytes()
            # (the file starts with the code's digest: damaged code is made again)
            if hashlib.sha256(stored[32:]).digest() == stored[:32]:
                code = stored[32:]
        except OSError:
            code = None
    if code is None:
        module = llvm.parse_assembly(_IR)
        module.verify()
        code = target.emit_object(module)
        if path is not None:
            from .kernel_cache import atomic_write_bytes

            try:
                atomic_write_bytes(path, hashlib.sha256(code).digest() + code)
            except OSError:
                pass
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target)
    engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    _KEEP.append(engine)
    addresses = tuple(engine.get_function_address(f"tj_{f}")
                      for f in ("malloc", "calloc", "realloc", "free"))
    if not all(addresses):
        raise RuntimeError("the counting allocator's object code lacks a function")
    return addresses


def _object_path(llvm, target):
    """Where the object code is cached: keyed by the IR, llvmlite's version and the target
    (None when the kernel cache is off or unsafe)."""
    import llvmlite

    from .kernel_cache import cache_dir

    root = cache_dir()
    if root is None:
        return None
    parts = [_IR, llvmlite.__version__, target.triple, str(llvm.llvm_version_info)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return root / f"alloc_{key}.o"


def install_at_import() -> None:
    """`TRACEJIT_MEMORY_STATS=1`: count from the import on."""
    if os.environ.get("TRACEJIT_MEMORY_STATS") == "1":
        install()


def allocated() -> int:
    """Bytes of array storage alive now (counted since statistics were first asked for)."""
    return int(_STATE[_CURRENT]) if _INSTALLED[0] or install() else 0


def peak() -> int:
    return int(_STATE[_PEAK]) if _INSTALLED[0] or install() else 0


def reset_peak() -> None:
    install()
    _STATE[_PEAK] = _STATE[_CURRENT]


def allocations() -> int:
    """How many blocks have been allocated (a count that only grows)."""
    install()
    return int(_STATE[_COUNT])
