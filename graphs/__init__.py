"""Dataflow-graph builders: Transformer layers and whole models, prefill and decode."""

from .analysis import (
    GraphSummary,
    analyze,
    attention_flops,
    closed_forms,
    kv_cache_bytes_per_token,
    op_total,
    summarize,
    weight_bytes_read,
    weight_params,
)
from .builder import GraphBuilder
from .transformer import PHASES, PhaseDims, build_layer, build_model, phase_dims

__all__ = [
    "PHASES",
    "PhaseDims",
    "phase_dims",
    "build_layer",
    "build_model",
    "GraphBuilder",
    "GraphSummary",
    "summarize",
    "closed_forms",
    "analyze",
    "weight_params",
    "weight_bytes_read",
    "kv_cache_bytes_per_token",
    "attention_flops",
    "op_total",
]
