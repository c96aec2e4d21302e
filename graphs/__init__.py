"""Dataflow graphs: builders (:mod:`graphs.blocks`), importers from compiler IRs
(:mod:`graphs.importers`) and the serving analyses over them (:mod:`graphs.serving`)."""

from .blocks import PHASES, GraphBuilder, PhaseDims, build_layer, build_model, phase_dims
from .importers import from_exported_program, from_graph_module, from_onnx
from .serving import *  # noqa: F403 - re-export the analyses listed in graphs.serving.__all__
from .serving import __all__ as _serving_all

__all__ = [
    "PHASES",
    "PhaseDims",
    "phase_dims",
    "build_layer",
    "build_model",
    "GraphBuilder",
    "from_exported_program",
    "from_graph_module",
    "from_onnx",
    *_serving_all,
]
