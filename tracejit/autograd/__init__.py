"""`tj.autograd`, PyTorch's namespace: `backward`, `grad`, `Function`, grad mode, anomaly
detection, gradcheck. The engine behind it is the eager runtime's (tensor/node.py,
tensor/engine.py, tensor/function.py); the modes are core/modes.py's."""
from __future__ import annotations

from ..core.modes import (enable_grad, inference_mode, is_grad_enabled,
                          is_inference_mode_enabled, no_grad, set_grad_enabled)
from ..tensor.engine import backward, detect_anomaly, grad, run_backward, set_detect_anomaly
from ..tensor.function import Function, FunctionCtx
from ..tensor.node import AccumulateGrad, Node
from . import grad_mode  # noqa: F401 (tj.autograd.grad_mode)
from .gradcheck import GradcheckError, gradcheck

__all__ = ["backward", "grad", "Function", "FunctionCtx", "gradcheck", "GradcheckError",
           "detect_anomaly", "set_detect_anomaly", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "is_inference_mode_enabled", "Node",
           "AccumulateGrad", "run_backward"]
