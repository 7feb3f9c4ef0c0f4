"""The kernel cache: generated kernel sources stored as importable modules so that
Numba's own cache (cache=True) keeps their machine code between processes.

Entries are keyed by a hash of the source and the numba/llvmlite versions and
written atomically. A truncated or corrupted entry (or Numba index or data
file) is removed and compiled again. A cache folder that other users own or can
write is refused with a warning (loading cached source runs it); kernels then
compile in memory. TRACEJIT_CACHE_DIR moves the cache, TRACEJIT_DISABLE_CACHE=1 turns
it off.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import stat
import sys
import threading
import warnings
from pathlib import Path

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
    return root


def _warn_once(root, message: str) -> None:
    if str(root) not in _warned_unsafe:
        _warned_unsafe.add(str(root))
        from ..tensor.dispatch import user_stacklevel

        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())


def source_key(source: str) -> str:
    """Entries are keyed by their source, the compiler's versions and the source of what
    kernels import from tracejit (the float32 math forms): Numba's cache notices a
    changed kernel module, not a changed module it inlines from."""
    import llvmlite
    import numba

    h = hashlib.sha256()
    for part in (source, numba.__version__, llvmlite.__version__, sys.version,
                 _imported_source()):
        h.update(part.encode())
    return h.hexdigest()[:24]


_IMPORTED: list = []


def _imported_source() -> str:
    if not _IMPORTED:
        path = Path(__file__).resolve().parents[1] / "backends" / "scalar_math.py"
        _IMPORTED.append(hashlib.sha256(path.read_bytes()).hexdigest())
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
    for attempt in range(2):
        try:
            if not path.exists() or path.read_text() != source:
                _atomic_write(path, source)
            return _import_file(path, f"tracejit_k_{key}")
        except Exception:  # noqa: BLE001 — a damaged entry: remove it and compile again
            if attempt:
                raise
            _remove_entry(root, key)
    raise AssertionError("unreachable")


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
    spec.loader.exec_module(module)
    sys.modules[module_name] = module
    return module


def _exec_module(source: str, module_name: str):
    import types

    module = types.ModuleType(module_name)
    exec(compile(source, f"<{module_name}>", "exec"), module.__dict__)  # noqa: S102
    return module


def _remove_entry(root: Path, key: str) -> None:
    sys.modules.pop(f"tracejit_k_{key}", None)
    for p in [root / f"k_{key}.py", *(root / "__pycache__").glob(f"k_{key}*")]:
        try:
            p.unlink()
        except OSError:
            pass


def purge_compiled(module) -> bool:
    """Remove Numba's cache files of a kernel module and reset its dispatchers' loaded
    state, once per module; False when there is nothing to remove (then the error that
    led here is not the cache's)."""
    path = getattr(module, "__file__", None)
    if path is None or getattr(module, "_tracejit_purged", False):
        return False
    module._tracejit_purged = True
    stem = Path(path).stem
    found = False
    for p in (Path(path).parent / "__pycache__").glob(f"{stem}.*.nb*"):
        try:
            p.unlink()
            found = True
        except OSError:
            pass
    return found


def clear() -> int:
    """Remove every cached kernel; returns how many files were removed."""
    root = cache_dir()
    if root is None:
        return 0
    files = [p for p in root.rglob("*") if p.is_file()]
    for p in files:
        p.unlink()
    shutil.rmtree(root / "__pycache__", ignore_errors=True)
    return len(files)


def info() -> dict:
    root = cache_dir()
    if root is None:
        return {"folder": None, "kernels": 0, "bytes": 0}
    files = [p for p in root.rglob("*") if p.is_file()]
    return {"folder": str(root), "kernels": len(list(root.glob("k_*.py"))),
            "bytes": sum(p.stat().st_size for p in files)}
