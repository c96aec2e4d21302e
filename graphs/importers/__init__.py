"""Frontends: compiler graphs into cost graphs, and plug-ins into compilers.

torch.export / torch.fx and ONNX programs, jaxprs, graphs Dynamo captures under
``torch.compile`` (:func:`torch_backend`), Inductor's own kernels (:func:`inductor_audit`) and
big Hugging Face decoders one layer at a time (:func:`from_hf_layerwise`). Every frontend maps
its op names through one table (:mod:`graphs.importers.table`) onto the rule registry, and
writes nodes with one shared writer. torch, onnx and jax are optional extras: importing this
package needs none of them.
"""

from .inductor_audit import InductorAudit, inductor_audit
from .jax_import import compare_with_xla, from_jax, from_jaxpr
from .layerwise import from_hf_layerwise
from .onnx import from_onnx
from .torch_compile import CompileReport, graph_breaks, torch_backend
from .torch_export import from_exported_program, from_graph_module

__all__ = [
    "from_exported_program",
    "from_graph_module",
    "from_onnx",
    "from_jax",
    "from_jaxpr",
    "compare_with_xla",
    "from_hf_layerwise",
    "torch_backend",
    "CompileReport",
    "graph_breaks",
    "inductor_audit",
    "InductorAudit",
]
