"""Frontends: compiler graphs (torch.export / torch.fx, ONNX) into cost graphs.

Every frontend maps its op names through one table (:mod:`graphs.importers.table`)
onto the rule registry, and writes nodes with one shared writer. torch and onnx
are optional extras: importing this package needs neither.
"""

from .onnx import from_onnx
from .torch_export import from_exported_program, from_graph_module

__all__ = ["from_exported_program", "from_graph_module", "from_onnx"]
