"""`tj.cpu.amp.autocast(enabled=True, dtype=tj.bfloat16)`: `tj.autocast("cpu", ...)`."""
from __future__ import annotations

from .. import amp as _amp


class autocast(_amp.autocast):
    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
