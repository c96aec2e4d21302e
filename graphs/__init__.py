"""Dataflow graphs: builders (:mod:`graphs.blocks`), importers from compiler IRs
(:mod:`graphs.importers`) and the serving analyses over them (:mod:`graphs.serving`).

Names load on first use (PEP 562), like :mod:`costmodel`: importing a light module under
``graphs`` does not build the whole engine.
"""

from __future__ import annotations

from costmodel.lazy import lazy_exports

from .serving import __all__ as _serving_all

#: public name -> the subpackage that defines it
_LAZY: dict[str, str] = {
    "PHASES": "blocks",
    "PhaseDims": "blocks",
    "phase_dims": "blocks",
    "build_layer": "blocks",
    "build_model": "blocks",
    "GraphBuilder": "blocks",
    "from_exported_program": "importers",
    "from_graph_module": "importers",
    "from_onnx": "importers",
    "from_jax": "importers",
    "from_hf_layerwise": "importers",
    "inductor_audit": "importers",
    **dict.fromkeys(_serving_all, "serving"),
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
