"""`GradScaler`: loss scaling for float16 training, with PyTorch's update equations.

scale(loss) multiplies by the scale (2**16 at first); unscale_(optimizer) multiplies
the gradients by 1/scale in place and records whether any is inf or NaN; step()
skips the optimiser step when one was; update() backs the scale off (x0.5) after a
skipped step, and grows it (x2) after `growth_interval` clean steps in a row.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..backends.cuda.device import is_available
from ..core.modes import no_grad
from ..core import dtypes
from ..tensor.creation import tensor

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        if device == "cuda" and enabled:
            if not is_available():
                warnings.warn("tj.amp.GradScaler is enabled, but CUDA is not available. "
                              "Disabling.", UserWarning, stacklevel=2)
                enabled = False
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._device, self._enabled = device, enabled
        self._init_scale, self._growth_factor = float(init_scale), float(growth_factor)
        self._backoff_factor, self._growth_interval = float(backoff_factor), int(growth_interval)
        self._scale = None           # a float32 0-dim tensor, made at the first scale()
        self._growth_tracker = 0     # clean steps in a row
        self._states: dict = {}      # id(optimizer) -> {"stage", "found_inf"}

    # ---- scaling ---------------------------------------------------------------------------
    def scale(self, outputs):
        """outputs * scale (a tensor, or an iterable of them)."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = self._full(self._init_scale)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale.to(outputs.device)

    def _full(self, value):
        t = tensor(value, dtype=dtypes.float32)
        return t.to(self._device) if self._device == "cuda" else t

    def _state(self, optimizer) -> dict:
        return self._states.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def unscale_(self, optimizer) -> None:
        """Divide the optimiser's gradients by the scale, in place; note any inf/NaN."""
        if not self._enabled:
            return
        self._check("unscale_")
        state = self._state(optimizer)
        if state["stage"] is _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = np.float32(np.float64(1.0) / np.float64(self._scale.item()))
        found = False
        seen = 0
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype.name == "float16":
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    seen += 1
                    if not found and not bool(g.isfinite().all()):
                        found = True
                    g.mul_(float(inv))
        state["found_inf"] = (found, seen)
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless the unscaled gradients held an inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check("step")
        state = self._state(optimizer)
        if state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _READY:
            self.unscale_(optimizer)
        found, seen = state["found_inf"]
        if not seen:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None if found else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Back off after a skipped step, grow after `growth_interval` clean ones."""
        if not self._enabled:
            return
        self._check("update")
        if new_scale is not None:
            value = new_scale.item() if hasattr(new_scale, "item") else float(new_scale)
            self._scale = self._full(value)
        else:
            found = any(s["found_inf"] is not None and s["found_inf"][0]
                        for s in self._states.values())
            if not self._states or all(s["found_inf"] is None for s in self._states.values()):
                raise AssertionError("No inf checks were recorded prior to update.")
            scale = np.float32(self._scale.item())
            if found:
                scale = np.float32(scale * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = np.float32(scale * np.float32(self._growth_factor))
                    if np.isfinite(grown):
                        scale = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
            self._scale = self._full(float(scale))
        self._states = {}

    def _check(self, what: str) -> None:
        if self._scale is None:
            raise AssertionError(f"Attempted {what} but _scale is None.  This may indicate "
                                 "your script did not use scaler.scale(loss or outputs) "
                                 "earlier in the iteration.")

    # ---- state -------------------------------------------------------------------------------
    def get_scale(self) -> float:
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = self._full(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
