"""`tj.optim`: optimisers with PyTorch's update equations."""
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD"]
