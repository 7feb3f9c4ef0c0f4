"""`nn.Module`: parameters, buffers and submodules registered by attribute assignment."""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterator

from ..runtime import memory
from ..tensor.tensor import Tensor
from .parameter import Parameter
from ..core.modes import no_grad
from ..tensor.creation import as_tensor
from ..tensor.functional import to


def _dtype_only(args, kwargs) -> bool:
    """Whether `Module.to(...)` changes only the dtype (integer buffers keep theirs)."""
    return kwargs.get("device") is None and not any(
        isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda") or
        type(a).__name__ == "device" for a in args)


class Module:
    """Base class of layers and models, with PyTorch's registration and naming rules.

    >>> class Net(tj.nn.Module):
    ...     def __init__(self):
    ...         super().__init__(); self.fc = tj.nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    """

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # ---- registration ----------------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError("cannot assign attributes before Module.__init__() call")
        params, buffers, modules = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            d.pop(name, None), buffers.pop(name, None), modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            d.pop(name, None), params.pop(name, None), buffers.pop(name, None)
            modules[name] = value
        elif name in params or name in modules:
            if value is not None:
                kind = "parameter" if name in params else "child module"
                raise TypeError(f"cannot assign '{type(value).__name__}' as {kind} '{name}' "
                                f"({'nn.Parameter' if kind == 'parameter' else 'nn.Module'} "
                                "or None expected)")
            (params if name in params else modules)[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(tracejit.Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor the module keeps (moved by `to`, listed by `buffers`), in its state dict
        unless `persistent=False`; registering a name again sets its persistence anew."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (tracejit.Tensor or None required)")
        skip = self.__dict__.setdefault("_non_persistent", set())
        if persistent:
            skip.discard(name)
        else:
            skip.add(name)
        self._buffers[name] = tensor

    def add_module(self, name: str, module: "Module | None") -> None:
        self._modules[name] = module

    register_module = add_module

    # ---- traversal -------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                       remove_duplicate)

    def get_submodule(self, target: str) -> "Module":
        """The submodule at a dotted path (`"encoder.layers.0"`); "" is the module itself."""
        m = self
        for i, part in enumerate(target.split(".") if target else ()):
            if part not in m._modules or m._modules[part] is None:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}` (looking "
                                     f"up '{'.'.join(target.split('.')[:i + 1])}')")
            m = m._modules[part]
        return m

    def _member(self, target: str, store: str, kind: str):
        path, _, name = target.rpartition(".")
        m = self.get_submodule(path)
        if name not in getattr(m, store):
            raise AttributeError(f"{type(m).__name__} has no {kind} `{name}`")
        return getattr(m, store)[name]

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at a dotted path (`"encoder.layers.0.linear1.weight"`)."""
        return self._member(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at a dotted path."""
        return self._member(target, "_buffers", "buffer")

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, m in mods:
            for name, v in getattr(m, store).items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        yield from self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- state -----------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = p.grad.detach()
                p.grad.zero_()

    def apply(self, fn) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted name (detached tensors)."""
        out = OrderedDict() if destination is None else destination
        for mod_prefix, m in self.named_modules(prefix=prefix.rstrip(".")):
            skip = m.__dict__.get("_non_persistent", set())
            for store in (m._parameters, m._buffers):
                for name, v in store.items():
                    if v is not None and name not in skip:
                        out[mod_prefix + ("." if mod_prefix else "") + name] = \
                            v if keep_vars else v.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copy tensors into parameters and buffers; with strict, every key must match."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        wrong = [f"{k}: expected {list(own[k].shape)}, got {list(_shape(v))}"
                 for k, v in state_dict.items() if k in own and tuple(_shape(v)) !=
                 tuple(own[k].shape)]
        problems = []
        if strict and missing:
            problems.append("Missing key(s): " + ", ".join(missing))
        if strict and unexpected:
            problems.append("Unexpected key(s): " + ", ".join(unexpected))
        if wrong:
            problems.append("Size mismatch: " + "; ".join(wrong))
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(problems))
        with no_grad():
            for k, v in state_dict.items():
                if k in own:
                    own[k].copy_(as_tensor(v).to(own[k].dtype))
        return _IncompatibleKeys(missing, unexpected)

    def to(self, *args, **kwargs) -> "Module":
        for m in self.modules():
            for store in (m._parameters, m._buffers):
                for _name, v in store.items():
                    if v is not None and (v.is_floating_point() or not _dtype_only(
                            args, kwargs)):
                        v._data = to(v.detach(), *args, **kwargs)._data
        return self

    def cuda(self, device=None) -> "Module":
        return self.to("cuda")

    def cpu(self) -> "Module":
        return self.to("cpu")

    def float(self) -> "Module":
        return self.to("float32")

    def double(self) -> "Module":
        return self.to("float64")

    def half(self) -> "Module":
        """Floating-point parameters and buffers to float16 (others are kept)."""
        return self.to("float16")

    def bfloat16(self) -> "Module":
        return self.to("bfloat16")

    # ---- call ------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required "
                                  "\"forward\" function")

    def __call__(self, *args, **kwargs):
        pool = memory.enter_pool()  # activations: tracejit's buffer pool (runtime/memory.py)
        if pool is None:  # (a submodule's call: the outermost module's pool is in use)
            return self.forward(*args, **kwargs)
        try:
            return self.forward(*args, **kwargs)
        finally:
            memory.leave_pool(pool)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {sub}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _shape(v):
    return v.shape if hasattr(v, "shape") else ()


class _IncompatibleKeys:
    def __init__(self, missing, unexpected):
        self.missing_keys, self.unexpected_keys = missing, unexpected

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, " \
               f"unexpected_keys={self.unexpected_keys})"
