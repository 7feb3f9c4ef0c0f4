"""`tj.optim`: optimisers with PyTorch's update equations, and learning-rate schedules."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
