"""ONNX export (`tj.onnx.export`, PyTorch's signature); needs the `export` extra (onnx).

Importing this package does not import onnx: `export` does, when called."""
from __future__ import annotations

from ..core.lazy import lazy

exporter = lazy("tracejit.onnx.exporter")
lowering = lazy("tracejit.onnx.lowering")


def export(model_or_fn, args, f=None, input_names=None, output_names=None, dynamic_axes=None,
           opset_version=None, **kwargs):
    return exporter.export(model_or_fn, args, f, input_names=input_names, output_names=output_names,
                   dynamic_axes=dynamic_axes, opset_version=opset_version)


def __getattr__(name):
    if name == "ExportError":
        return lowering.ExportError
    raise AttributeError(name)
