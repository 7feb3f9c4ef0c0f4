"""`tj.utils`: checkpointing, and datasets and loaders (`tj.utils.data`)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
