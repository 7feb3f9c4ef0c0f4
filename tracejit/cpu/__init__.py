"""`tj.cpu`, as PyTorch spells it: `tj.cpu.amp.autocast`."""
from . import amp  # noqa: F401
