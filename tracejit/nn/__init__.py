"""`tj.nn`: modules, parameters, layers and losses (PyTorch's names and semantics)."""
from . import functional, init
from .layers import CrossEntropyLoss, Linear, MSELoss, ReLU, Sequential, Sigmoid, Tanh
from .module import Module
from .parameter import Parameter

__all__ = ["functional", "init", "Module", "Parameter", "Linear", "ReLU", "Tanh", "Sigmoid",
           "Sequential", "MSELoss", "CrossEntropyLoss"]
