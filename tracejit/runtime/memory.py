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
import threading
import warnings

import numpy as np

from .kernel_cache import atomic_write_bytes, cache_dir
from ..core.lazy import lazy

llvm = lazy("llvmlite.binding")
llvmlite = lazy("llvmlite")

try:
    from numpy._core import _multiarray_umath
except ImportError:  # numpy 1.x
    from numpy.core import _multiarray_umath

_HEADER = 16  # bytes before each block: its size and its pool capacity (0: not pooled;
              # 16 bytes keep numpy's alignment)

# the handlers' state, read by the IR through `ctx`: numpy's allocator they forward to,
# the counters, then the pool (below): its lock, the bytes it holds, its limit, how many
# allocations it served, the slot it evicts next, and its slots (capacity, block) from
# _SLOT0 on
(_CTX, _MALLOC, _CALLOC, _REALLOC, _FREE, _CURRENT, _PEAK, _COUNT, _LOCK, _HELD, _LIMIT,
 _HITS, _CURSOR) = range(13)
_SLOT0 = 16
SLOTS = 512               # blocks the pool keeps at most
POOL_MIN = 1 << 15        # blocks of this many bytes and more are pooled
PAGE = 4096               # pooled capacities are whole pages


def _pool_limit() -> int:
    """The bytes the pool keeps at most (blocks beyond it are freed): a sixteenth of the
    machine's memory, at least 512 MiB, or TRACEJIT_MEMORY_POOL_LIMIT (MiB). A step that
    frees more than the pool keeps makes its next step fault the rest in again (a
    super-resolution CNN at batch 16 frees ~0.9 GB of windows and their gradients a step:
    with 512 MiB kept, ~1,700 page faults and 6-30% of its time)."""
    env = os.environ.get("TRACEJIT_MEMORY_POOL_LIMIT")
    if env:
        try:
            return max(0, int(float(env) * (1 << 20)))
        except ValueError:
            warnings.warn(f"TRACEJIT_MEMORY_POOL_LIMIT must be a number of MiB, got {env!r}: "
                          f"the pool keeps its default", RuntimeWarning, stacklevel=2)
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 0
    return max(1 << 29, physical // 16)


POOL_LIMIT = _pool_limit()
_STATE = (ctypes.c_int64 * (_SLOT0 + 2 * SLOTS))()


class _Allocator(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("malloc", ctypes.c_void_p),
                ("calloc", ctypes.c_void_p), ("realloc", ctypes.c_void_p),
                ("free", ctypes.c_void_p)]


class _Handler(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8),
                ("allocator", _Allocator)]


_IR = r"""
%state = type [STATE x i64]

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

define internal i8* @finish(%state* %s, i8* %raw, i64 %size, i64 %delta, i64 %cap) {
  %null = icmp eq i8* %raw, null
  br i1 %null, label %fail, label %ok
fail:
  ret i8* null
ok:
  %h = bitcast i8* %raw to i64*
  store i64 %size, i64* %h
  %capat = getelementptr i64, i64* %h, i64 1
  store i64 %cap, i64* %capat
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
  %r = call i8* @finish(%state* %s, i8* %raw, i64 %size, i64 %size, i64 0)
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
  %r = call i8* @finish(%state* %s, i8* %raw, i64 %size, i64 %size, i64 0)
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
  %r = call i8* @finish(%state* %s, i8* %new, i64 %size, i64 %delta, i64 0)
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
  %capat = getelementptr i64, i64* %h, i64 1
  %cap = load i64, i64* %capat
  %cur.p = getelementptr %state, %state* %s, i64 0, i64 5
  %neg = sub i64 0, %stored
  %ignored = atomicrmw add i64* %cur.p, i64 %neg monotonic
  %pooled = icmp ne i64 %cap, 0
  br i1 %pooled, label %offer, label %real
offer:
  %out = call i8* @keep(%state* %s, i8* %raw, i64 %cap)
  %kept = icmp eq i8* %out, null
  br i1 %kept, label %done, label %real
real:
  ; numpy's free takes the size to keep blocks under 1 KiB in a cache of its own; a
  ; pooled block (this one, or the one evicted for it) is larger than that
  %block = phi i8* [%raw, %release], [%out, %offer]
  %f.p = getelementptr %state, %state* %s, i64 0, i64 4
  %f.i = load i64, i64* %f.p
  %f = inttoptr i64 %f.i to void (i8*, i8*, i64)*
  %c.p = getelementptr %state, %state* %s, i64 0, i64 0
  %c.i = load i64, i64* %c.p
  %c = inttoptr i64 %c.i to i8*
  %plain = add i64 %stored, 16
  %n = select i1 %pooled, i64 %cap, i64 %plain
  call void %f(i8* %c, i8* %block, i64 %n)
  ret void
}

; ---- the pool: freed blocks of POOL_MIN bytes and more, kept for the next allocation of
; the same capacity (a spin lock guards the slots; numpy allocates under the GIL, so it is
; hardly ever contended)

define internal void @lock(%state* %s) {
entry:
  %p = getelementptr %state, %state* %s, i64 0, i64 8
  br label %spin
spin:
  %r = cmpxchg i64* %p, i64 0, i64 1 acquire monotonic
  %ok = extractvalue { i64, i1 } %r, 1
  br i1 %ok, label %held, label %spin
held:
  ret void
}

define internal void @unlock(%state* %s) {
  %p = getelementptr %state, %state* %s, i64 0, i64 8
  store atomic i64 0, i64* %p release, align 8
  ret void
}

; a kept block of capacity %cap (taken out of the pool), or null
define internal i8* @take(%state* %s, i64 %cap) {
entry:
  call void @lock(%state* %s)
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %body]
  %end = icmp eq i64 %i, SLOTS
  br i1 %end, label %miss, label %body
body:
  %twice = shl i64 %i, 1
  %at = add i64 %twice, SLOT0
  %cap.p = getelementptr %state, %state* %s, i64 0, i64 %at
  %c = load i64, i64* %cap.p
  %hit = icmp eq i64 %c, %cap
  %next = add i64 %i, 1
  br i1 %hit, label %found, label %loop
found:
  store i64 0, i64* %cap.p
  %at1 = add i64 %at, 1
  %ptr.p = getelementptr %state, %state* %s, i64 0, i64 %at1
  %pv = load i64, i64* %ptr.p
  %held.p = getelementptr %state, %state* %s, i64 0, i64 9
  %held = load i64, i64* %held.p
  %less = sub i64 %held, %cap
  store i64 %less, i64* %held.p
  %hits.p = getelementptr %state, %state* %s, i64 0, i64 11
  %hits = load i64, i64* %hits.p
  %more = add i64 %hits, 1
  store i64 %more, i64* %hits.p
  call void @unlock(%state* %s)
  %raw = inttoptr i64 %pv to i8*
  ret i8* %raw
miss:
  call void @unlock(%state* %s)
  ret i8* null
}

; keep a freed block when the pool has room for it: in an empty slot, else in place of
; the block at the cursor (slots go round: sizes a program no longer makes leave the
; pool). The block to free for real (this one refused, the one evicted), or null.
define internal i8* @keep(%state* %s, i8* %raw, i64 %cap) {
entry:
  call void @lock(%state* %s)
  %held.p = getelementptr %state, %state* %s, i64 0, i64 9
  %held = load i64, i64* %held.p
  %limit.p = getelementptr %state, %state* %s, i64 0, i64 10
  %limit = load i64, i64* %limit.p
  %after = add i64 %held, %cap
  %fits = icmp ule i64 %after, %limit
  br i1 %fits, label %loop, label %refuse
loop:
  %i = phi i64 [0, %entry], [%next, %body]
  %end = icmp eq i64 %i, SLOTS
  br i1 %end, label %evict, label %body
body:
  %twice = shl i64 %i, 1
  %at = add i64 %twice, SLOT0
  %cap.p = getelementptr %state, %state* %s, i64 0, i64 %at
  %c = load i64, i64* %cap.p
  %empty = icmp eq i64 %c, 0
  %next = add i64 %i, 1
  br i1 %empty, label %found, label %loop
found:
  store i64 %cap, i64* %cap.p
  %at1 = add i64 %at, 1
  %ptr.p = getelementptr %state, %state* %s, i64 0, i64 %at1
  %pv = ptrtoint i8* %raw to i64
  store i64 %pv, i64* %ptr.p
  store i64 %after, i64* %held.p
  call void @unlock(%state* %s)
  ret i8* null
evict:
  %cur.p = getelementptr %state, %state* %s, i64 0, i64 12
  %cur = load i64, i64* %cur.p
  %cur1 = add i64 %cur, 1
  %wrap = urem i64 %cur1, SLOTS
  store i64 %wrap, i64* %cur.p
  %etwice = shl i64 %cur, 1
  %eat = add i64 %etwice, SLOT0
  %ecap.p = getelementptr %state, %state* %s, i64 0, i64 %eat
  %ecap = load i64, i64* %ecap.p
  %eat1 = add i64 %eat, 1
  %eptr.p = getelementptr %state, %state* %s, i64 0, i64 %eat1
  %epv = load i64, i64* %eptr.p
  store i64 %cap, i64* %ecap.p
  %npv = ptrtoint i8* %raw to i64
  store i64 %npv, i64* %eptr.p
  %swapped = sub i64 %after, %ecap
  store i64 %swapped, i64* %held.p
  call void @unlock(%state* %s)
  %old = inttoptr i64 %epv to i8*
  ret i8* %old
refuse:
  call void @unlock(%state* %s)
  ret i8* %raw
}

define internal i64 @capacity(i64 %n) {
  %up = add i64 %n, PAGE_MINUS_1
  %cap = and i64 %up, NEG_PAGE
  ret i64 %cap
}

define i8* @tj_pool_malloc(i8* %ctx, i64 %size) {
entry:
  %s = bitcast i8* %ctx to %state*
  %n = add i64 %size, 16
  %big = icmp uge i64 %n, POOL_MIN
  br i1 %big, label %pooled, label %plain
plain:
  %r0 = call i8* @tj_malloc(i8* %ctx, i64 %size)
  ret i8* %r0
pooled:
  %cap = call i64 @capacity(i64 %n)
  %kept = call i8* @take(%state* %s, i64 %cap)
  %miss = icmp eq i8* %kept, null
  br i1 %miss, label %fresh, label %ready
fresh:
  %new = call i8* @fwd_malloc(%state* %s, i64 %cap)
  br label %ready
ready:
  %raw = phi i8* [%kept, %pooled], [%new, %fresh]
  %r = call i8* @finish(%state* %s, i8* %raw, i64 %size, i64 %size, i64 %cap)
  ret i8* %r
}

define i8* @tj_pool_calloc(i8* %ctx, i64 %nelem, i64 %elsize) {
entry:
  %size = mul i64 %nelem, %elsize
  %r = call i8* @tj_pool_malloc(i8* %ctx, i64 %size)
  %null = icmp eq i8* %r, null
  br i1 %null, label %out, label %zero
zero:
  call void @llvm.memset.p0i8.i64(i8* %r, i8 0, i64 %size, i1 false)
  br label %out
out:
  ret i8* %r
}

declare void @llvm.memset.p0i8.i64(i8*, i8, i64, i1)

; every kept block freed (empty_cache)
define void @tj_pool_empty(i8* %ctx) {
entry:
  %s = bitcast i8* %ctx to %state*
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %cont]
  %end = icmp eq i64 %i, SLOTS
  br i1 %end, label %done, label %body
body:
  %twice = shl i64 %i, 1
  %at = add i64 %twice, SLOT0
  %cap.p = getelementptr %state, %state* %s, i64 0, i64 %at
  %next = add i64 %i, 1
  call void @lock(%state* %s)
  %c = load i64, i64* %cap.p
  %empty = icmp eq i64 %c, 0
  br i1 %empty, label %skip, label %free
skip:
  call void @unlock(%state* %s)
  br label %cont
free:
  store i64 0, i64* %cap.p
  %at1 = add i64 %at, 1
  %ptr.p = getelementptr %state, %state* %s, i64 0, i64 %at1
  %pv = load i64, i64* %ptr.p
  %held.p = getelementptr %state, %state* %s, i64 0, i64 9
  %held = load i64, i64* %held.p
  %less = sub i64 %held, %c
  store i64 %less, i64* %held.p
  call void @unlock(%state* %s)
  %f.p = getelementptr %state, %state* %s, i64 0, i64 4
  %f.i = load i64, i64* %f.p
  %f = inttoptr i64 %f.i to void (i8*, i8*, i64)*
  %c.p = getelementptr %state, %state* %s, i64 0, i64 0
  %c.i = load i64, i64* %c.p
  %cx = inttoptr i64 %c.i to i8*
  %raw = inttoptr i64 %pv to i8*
  call void %f(i8* %cx, i8* %raw, i64 %c)
  br label %cont
cont:
  br label %loop
done:
  ret void
}
""".replace("STATE", str(_SLOT0 + 2 * SLOTS)).replace("SLOTS", str(SLOTS)).replace(
    "SLOT0", str(_SLOT0)).replace("POOL_MIN", str(POOL_MIN)).replace(
    "PAGE_MINUS_1", str(PAGE - 1)).replace("NEG_PAGE", str(-PAGE))

_KEEP: list = []  # what must outlive every array it allocated: engine, handler, state
_INSTALLED = [False]


def _capsule_pointer(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


def _numpy_api():
    """numpy's C-API table (the `_ARRAY_API` capsule's pointer array)."""
    return ctypes.cast(_capsule_pointer(_multiarray_umath._ARRAY_API, None),
                       ctypes.POINTER(ctypes.c_void_p))


_HANDLERS: dict = {}  # "counting", "pool" -> capsule, once made; "set": numpy's setter


def _setup() -> bool:
    """Make the two handlers (once), both forwarding to the allocator numpy has now:
    False where they cannot be made (an unexpected numpy)."""
    if _HANDLERS:
        return "set" in _HANDLERS
    _HANDLERS["tried"] = True
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
        _STATE[_LIMIT] = POOL_LIMIT
        malloc, calloc, realloc, free, pool_malloc, pool_calloc, empty = _compile()
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_void_p]
        name = ctypes.create_string_buffer(b"mem_handler")
        made = {}
        for kind, functions in (("counting", (malloc, calloc, realloc, free)),
                                ("pool", (pool_malloc, pool_calloc, realloc, free))):
            handler = _Handler(f"tracejit_{kind}_allocator".encode(), 1, _Allocator(
                ctypes.addressof(_STATE), *functions))
            made[kind] = new(ctypes.addressof(handler), name, None)
            _KEEP.extend([handler, made[kind]])
        _KEEP.extend([name, current, _STATE])
        for obj in _KEEP:  # never freed, not even at exit: arrays freed then still call in
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    except Exception:  # noqa: BLE001 — optional: numpy keeps its allocator
        return False
    _HANDLERS.update(made, set=set_handler,
                     empty=ctypes.CFUNCTYPE(None, ctypes.c_void_p)(empty))
    return True


def install() -> bool:
    """Put the counting allocator in front of numpy's (once); False where it cannot be
    (an unexpected numpy, or TRACEJIT_MEMORY_STATS=0)."""
    if _INSTALLED[0]:
        return True
    if os.environ.get("TRACEJIT_MEMORY_STATS") == "0" or not _setup():
        return False
    _HANDLERS["set"](_HANDLERS["counting"])
    _INSTALLED[0] = True
    return True


# ---- the pool: tracejit's own buffers reused across steps --------------------------
# While a module's forward, a backward pass, an optimiser's step or a compiled program
# runs, numpy makes arrays through the pool handler: a freed block of POOL_MIN bytes or
# more is kept (up to SLOTS blocks, POOL_LIMIT bytes) for the next allocation of the same
# page-rounded size, which a training step's next step makes. Without it, glibc hands
# the large blocks of each step back to the system (a heap top trimmed, an mmap
# unmapped) and the next step faults every page in again: 3,500-11,000 page faults per
# step of a small ResNet, up to half its time. numpy's handler is a context variable, set
# on entering the outermost of those and restored on leaving it: the user's arrays made
# elsewhere keep numpy's allocator. Arrays free through the handler that made them, so
# an output freed later returns to the pool. TRACEJIT_MEMORY_POOL=0 turns it off.

_POOL = [None]                # on (decided at the first entry)
_INSIDE = threading.local()   # .depth: pooled scopes this thread is in


def enter_pool():
    """Make numpy allocate through the pool in this thread until `leave_pool`: the token
    to give it (None where the pool is off or already in use here)."""
    if _POOL[0] is None:
        _POOL[0] = os.environ.get("TRACEJIT_MEMORY_POOL") != "0" and _setup()
    if not _POOL[0] or getattr(_INSIDE, "on", False):
        return None
    _INSIDE.on = True
    return _HANDLERS["set"](_HANDLERS["pool"])


def leave_pool(token) -> None:
    """Give numpy back the handler `enter_pool` replaced (a None token: nothing)."""
    if token is not None:
        _INSIDE.on = False
        _HANDLERS["set"](token)


def empty_cache() -> None:
    """Free the blocks the pool keeps (the memory of arrays alive is not touched)."""
    if "empty" in _HANDLERS:
        _HANDLERS["empty"](ctypes.addressof(_STATE))


def pool_stats() -> dict:
    """What the pool holds: {"blocks", "bytes", "hits" (allocations it served)}."""
    blocks = sum(1 for k in range(SLOTS) if _STATE[_SLOT0 + 2 * k])
    return {"blocks": blocks, "bytes": int(_STATE[_HELD]), "hits": int(_STATE[_HITS])}


def _compile() -> tuple:
    """The functions' addresses. Their machine code is kept in the kernel cache
    folder (generating it takes 6-12 ms of the import; loading it under 1 ms)."""
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
            try:
                atomic_write_bytes(path, hashlib.sha256(code).digest() + code)
            except OSError:
                pass
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target)
    engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    _KEEP.append(engine)
    addresses = tuple(engine.get_function_address(f"tj_{f}")
                      for f in ("malloc", "calloc", "realloc", "free", "pool_malloc",
                                "pool_calloc", "pool_empty"))
    if not all(addresses):
        raise RuntimeError("the allocators' object code lacks a function")
    return addresses


def _object_path(llvm, target):
    """Where the object code is cached: keyed by the IR, llvmlite's version and the target
    (None when the kernel cache is off or unsafe)."""
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
