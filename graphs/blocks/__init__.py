"""Layer and block builders: Transformer layers and whole models, prefill and decode.

Blocks add nodes to a :class:`GraphBuilder`; :func:`build_layer` and
:func:`build_model` assemble them into a ``networkx.DiGraph`` whose nodes carry
symbolic costs from the rule registry.
"""

from .builder import GraphBuilder
from .decomposed import attention_chain, elementwise_chain
from .phase import PHASES, PhaseDims, phase_dims
from .transformer import build_layer, build_model

__all__ = [
    "PHASES",
    "PhaseDims",
    "phase_dims",
    "build_layer",
    "build_model",
    "GraphBuilder",
    "attention_chain",
    "elementwise_chain",
]
