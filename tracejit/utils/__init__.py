"""`tj.utils`: checkpointing."""
from . import checkpoint

__all__ = ["checkpoint"]
