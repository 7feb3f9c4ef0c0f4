"""The tensor frontend: `Tensor`, creation functions and tensor operations."""
from . import functional
from . import elementwise  # noqa: F401  (installs its Tensor methods)
from .creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                       initial_seed, linspace, manual_seed, ones, ones_like, rand, rand_like,
                       randint, randn, randn_like, randperm, tensor, zeros, zeros_like)
from .tensor import Size, Tensor, device

__all__ = ["functional", "Tensor", "Size", "device", "arange", "as_tensor", "empty",
           "empty_like", "eye", "from_numpy", "full", "full_like", "initial_seed", "linspace",
           "manual_seed", "ones", "ones_like", "rand", "rand_like", "randint", "randn",
           "randn_like", "randperm", "tensor", "zeros", "zeros_like"]
