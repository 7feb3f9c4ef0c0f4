"""tracejit: PyTorch-style eager tensors and autograd, traced into fused kernels.

    import tracejit as tj
    x = tj.randn(4, 3, requires_grad=True)
    (x.tanh() * 2).sum().backward()
"""
from __future__ import annotations

from . import _startup
from .core.lazy import lazy as _lazy

_API = _lazy("tracejit._api")  # the names, imported at once or when a command asks

__version__ = "0.1.0"


def _import_names() -> None:
    """Import the package's names (defined in _api.py) into it."""
    globals().update({name: value for name, value in vars(_API.load()).items()
                      if not name.startswith("__") or name == "__getattr__"})


if _startup.command_line_starting():
    def __getattr__(name: str):
        """The first name a command asks for imports them all (cli.py asks at once for
        every command; `--help` and `--version` ask for none)."""
        if name.startswith("_"):  # the import system asks for "_api" before importing it
            raise AttributeError(f"module 'tracejit' has no attribute {name!r}")
        _import_names()
        if name in globals():
            return globals()[name]
        return _API.__getattr__(name)
else:
    _import_names()
