"""`tj.autograd.grad_mode`, PyTorch's module name for the grad-mode switches; they are
defined with the other modes in core/modes.py."""
from ..core.modes import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                          is_inference_mode_enabled, no_grad, set_grad_enabled)
