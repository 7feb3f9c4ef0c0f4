"""`tj.optim`: optimisers with PyTorch's update equations, and learning-rate schedules."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .adam_variants import Adamax, NAdam, RAdam
from .adaptive import Adadelta, Adagrad, RMSprop
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rprop_asgd import ASGD, Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adadelta",
           "Adagrad", "RMSprop", "Rprop", "ASGD", "LBFGS", "lr_scheduler"]
