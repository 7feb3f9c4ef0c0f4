"""The kernel cache: generated kernel sources stored as importable modules so that
Numba's own cache (cache=True) keeps their machine code between processes.

Entries are keyed by a hash of the source and the numba/llvmlite versions and
written atomically. Nothing is used unchecked: the module's source is compared with the
source asked for, and the files Python and Numba keep beside it (the bytecode, Numba's
index and data files, in `__pycache__`) are checked against a manifest of their SHA-256
digests (`k_<key>.sums`), written when they are: a file that is not in the manifest or
whose digest differs (a flipped bit, two kernels' data files exchanged) makes the entry a
miss. Its files are removed and it is compiled and written again. A cache folder that
other users own or can write, or that cannot be written, is refused with a warning
(loading cached source runs it); kernels then compile in memory. TRACEJIT_CACHE_DIR
moves the cache, TRACEJIT_DISABLE_CACHE=1 turns it off.
"""
from __future__ import annotations

import hashlib
import importlib.util
from importlib._bootstrap_external import _code_to_timestamp_pyc
import json
import os
import shutil
import stat
import sys
import threading
import types
import warnings
from pathlib import Path

from ..core.diagnostics import user_stacklevel
from ..core.lazy import lazy

numba = lazy("numba")
llvmlite = lazy("llvmlite")

_warned_unsafe: set = set()


def cache_dir() -> Path | None:
    """The folder for kernels, or None when caching is off or the folder is unsafe."""
    if os.environ.get("TRACEJIT_DISABLE_CACHE") == "1":
        return None
    root = Path(os.environ.get("TRACEJIT_CACHE_DIR") or Path.home() / ".cache" / "tracejit")
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        mode = root.stat().st_mode
    except OSError as err:
        _warn_once(root, f"tracejit: kernel cache {root} is unusable ({err}); compiling in "
                         "memory")
        return None
    owner = root.stat().st_uid
    if hasattr(os, "getuid") and owner != os.getuid():
        _warn_once(root, f"tracejit: refusing kernel cache {root}: it belongs to another user "
                         f"(uid {owner}), and loading cached kernels runs their code. "
                         "Compiling in memory; use a folder of your own or "
                         "TRACEJIT_CACHE_DIR.")
        return None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        _warn_once(root, f"tracejit: refusing kernel cache {root}: other users can write it, "
                         "and loading cached kernels runs their code. Compiling in memory; "
                         "use a private folder (chmod 700) or TRACEJIT_CACHE_DIR.")
        return None
    # a folder that cannot be written cannot keep what is compiled (and its entries cannot
    # be repaired): kernels compile in memory, as with the cache off
    # (its mode is asked too: a folder made read-only is read-only even to root)
    if not (mode & stat.S_IWUSR) or not os.access(root, os.W_OK | os.X_OK) or (
            (root / "__pycache__").exists() and
            not os.access(root / "__pycache__", os.W_OK | os.X_OK)):
        _warn_once(root, f"tracejit: kernel cache {root} cannot be written; compiling in "
                         "memory (make it writable, or set TRACEJIT_CACHE_DIR)")
        return None
    return root


def _warn_once(root, message: str) -> None:
    if str(root) not in _warned_unsafe:
        _warned_unsafe.add(str(root))
        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())


def source_key(source: str) -> str:
    """Entries are keyed by their source, the compiler's versions and the source of what
    kernels import from tracejit (the float32 math forms): Numba's cache notices a
    changed kernel module, not a changed module it inlines from."""
    h = hashlib.sha256()
    for part in (source, numba.__version__, llvmlite.__version__, sys.version,
                 _imported_source()):
        h.update(part.encode())
    return h.hexdigest()[:24]


_IMPORTED: list = []


# what generated kernels compile besides their own text: a change to one is a new key
_COMPILED_WITH = ("backends/scalar_math.py", "backends/loop_math.py", "backends/numba_blas.py",
                  "backends/special.py", "ops/special.py")


def _imported_source() -> str:
    if not _IMPORTED:
        h = hashlib.sha256()
        for name in _COMPILED_WITH:
            h.update((Path(__file__).resolve().parents[1] / name).read_bytes())
        _IMPORTED.append(h.hexdigest())
    return _IMPORTED[0]


_LOAD_LOCK = threading.RLock()  # one thread writes and imports a module; others reuse it


def load_module(source: str, name_hint: str = "kernel"):
    """Import `source` as a module (from the cache folder when there is one)."""
    with _LOAD_LOCK:
        return _load_module(source, name_hint)


def _load_module(source: str, name_hint: str):
    root = cache_dir()
    key = source_key(source)
    if root is None:
        return _exec_module(source, f"tracejit_{name_hint}_{key}")
    path = root / f"k_{key}.py"
    name = f"tracejit_k_{key}"
    if name in sys.modules:
        return sys.modules[name]
    for attempt in range(2):
        try:
            made = not path.exists() or path.read_text() != source
            if made:
                _remove_compiled(root, key)  # made from another text: not this entry's
                _atomic_write(path, source)
            elif not _verified(root, key):
                _remove_compiled(root, key)
                made = True
            module = _import_file(path, name)
            if made:
                record_compiled(module)  # the bytecode the import wrote, if any
            return module
        except Exception:  # noqa: BLE001 — a damaged entry: remove it and compile again
            if attempt:
                raise
            _remove_entry(root, key)
    raise AssertionError("unreachable")


# --- the manifest: digests of the files Python and Numba write beside a module --------

_LISTING: dict = {}  # cache folder -> {key: [file names in __pycache__]}, read once


def _compiled_files(root: Path, key: str) -> list:
    """Names of the files in `__pycache__` that belong to module k_<key> (bytecode, Numba
    index and data files), as listed when the folder was first read in this process: one
    listing, not one per module (a cache holds thousands of files)."""
    listing = _LISTING.get(root)
    if listing is None:
        listing = _LISTING[root] = {}
        try:
            with os.scandir(root / "__pycache__") as entries:
                for e in entries:
                    if e.name.startswith("k_") and _is_compiled(e.name):
                        listing.setdefault(e.name[2:].split(".", 1)[0], []).append(e.name)
        except OSError:
            pass
    return listing.get(key, [])


def _is_compiled(name: str) -> bool:
    return name.endswith((".nbi", ".nbc", ".pyc"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verified(root: Path, key: str) -> bool:
    """Whether every compiled file of k_<key> is in its manifest with the same digest (no
    files at all: nothing to check)."""
    names = set(_compiled_files(root, key))
    try:
        sums = json.loads((root / f"k_{key}.sums").read_text())
    except (OSError, ValueError):
        return not names
    if not isinstance(sums, dict):
        return False
    names |= set(sums)
    folder = root / "__pycache__"
    for n in names:
        try:
            if sums.get(n) != _digest(folder / n):
                return False
        except FileNotFoundError:
            continue  # (Numba compiles what its index names but cannot find)
        except OSError:
            return False
    return True


def record_compiled(module) -> None:
    """Write the manifest of a cached module's compiled files, after Numba has compiled
    (and written) a kernel of it: every file of the module as it is now."""
    path = getattr(module, "__file__", None)
    if path is None:
        return
    path = Path(path)
    key = path.stem[2:]
    folder = path.parent / "__pycache__"
    try:
        sums = {n: _digest(folder / n) for n in os.listdir(folder)
                if n.startswith(f"k_{key}.") and _is_compiled(n)}
        _atomic_write(path.parent / f"k_{key}.sums", json.dumps(sums, sort_keys=True))
    except OSError:
        pass  # (a manifest that is missing or out of date makes the next load a miss)


def _remove_compiled(root: Path, key: str) -> None:
    """Remove k_<key>'s compiled files and manifest (Numba and Python make them again)."""
    folder = root / "__pycache__"
    names = set(_compiled_files(root, key))
    try:
        names |= {n for n in os.listdir(folder) if n.startswith(f"k_{key}.")
                  and _is_compiled(n)}
    except OSError:
        pass
    for p in [root / f"k_{key}.sums", *(folder / n for n in names)]:
        try:
            p.unlink()
        except OSError:
            pass
    _LISTING.get(root, {}).pop(key, None)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _import_file(path: Path, module_name: str):
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    wrote = sys.dont_write_bytecode and _write_bytecode(path)
    spec.loader.exec_module(module)
    sys.modules[module_name] = module
    if wrote:
        record_compiled(module)  # the new bytecode file joins the entry's manifest
    return module


def _write_bytecode(path: Path) -> bool:
    """Write the module's bytecode into the cache where Python, told not to write any
    (PYTHONDONTWRITEBYTECODE, common in containers), would not: the cache is tracejit's
    own folder, and compiling a kernel module's source again in every new process took
    a warm start 0.4 s (137 modules of a recurrent model). Python's loader then reads it
    as it reads any bytecode file (it checks the source's time and size). False when
    there is one already or it cannot be written."""
    try:
        pyc = Path(importlib.util.cache_from_source(str(path)))
        if pyc.exists():
            return False
        source = path.read_bytes()
        st = path.stat()
        code = compile(source, str(path), "exec", dont_inherit=True)
        pyc.parent.mkdir(exist_ok=True)
        atomic_write_bytes(pyc, bytes(_code_to_timestamp_pyc(code, st.st_mtime,
                                                             st.st_size)))
        return True
    except Exception:  # noqa: BLE001 — a private helper moved, a read-only folder: compile
        return False


def _exec_module(source: str, module_name: str):
    module = types.ModuleType(module_name)
    exec(compile(source, f"<{module_name}>", "exec"), module.__dict__)  # noqa: S102
    return module


def _remove_entry(root: Path, key: str) -> None:
    sys.modules.pop(f"tracejit_k_{key}", None)
    _remove_compiled(root, key)
    try:
        (root / f"k_{key}.py").unlink()
    except OSError:
        pass


def reload_compiled(module):
    """A fresh copy of a cached kernel module whose compiled files failed to load (a
    digest can only say a file is the one written, not that Numba wrote it for this
    module): its files are removed and the module imported again, so that its
    dispatchers compile anew rather than keep the overloads already loaded. None when
    the module is not a cached one or was reloaded already (then the error that led here
    is not the cache's)."""
    path = getattr(module, "__file__", None)
    if path is None or getattr(module, "_tracejit_reloaded", False):
        return None
    path = Path(path)
    key = path.stem[2:]
    with _LOAD_LOCK:
        _remove_compiled(path.parent, key)
        sys.modules.pop(module.__name__, None)
        fresh = _import_file(path, module.__name__)
        record_compiled(fresh)
    fresh._tracejit_reloaded = True
    return fresh


def clear() -> int:
    """Remove every cached kernel; returns how many files were removed."""
    root = cache_dir()
    if root is None:
        return 0
    files = [p for p in root.rglob("*") if p.is_file()]
    for p in files:
        p.unlink()
    shutil.rmtree(root / "__pycache__", ignore_errors=True)
    _LISTING.pop(root, None)
    return len(files)


def info() -> dict:
    root = cache_dir()
    if root is None:
        return {"folder": None, "kernels": 0, "bytes": 0}
    files = [p for p in root.rglob("*") if p.is_file()]
    return {"folder": str(root), "kernels": len(list(root.glob("k_*.py"))),
            "bytes": sum(p.stat().st_size for p in files)}
