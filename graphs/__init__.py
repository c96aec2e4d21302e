"""Dataflow-graph builders: Transformer layers and whole models, prefill and decode."""

from .analysis import (
    GraphSummary,
    analyze,
    attention_flops,
    closed_forms,
    decode_energy_vs_batch,
    kv_cache_bytes_per_token,
    op_total,
    summarize,
    weight_bytes_read,
    weight_params,
)
from .builder import GraphBuilder
from .capacity import CapacityReport, capacity, model_ledger, peak_activation_bytes, what_if
from .onnx_import import from_onnx
from .serving import PhaseReport, decode_limits, decode_report, near_far_memory, prefill_report, step_time
from .sweep import SweepResult, compile_decode, sweep
from .torch_import import from_exported_program, from_graph_module
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
    "decode_energy_vs_batch",
    "analyze",
    "weight_params",
    "weight_bytes_read",
    "kv_cache_bytes_per_token",
    "attention_flops",
    "op_total",
    "CapacityReport",
    "capacity",
    "model_ledger",
    "peak_activation_bytes",
    "what_if",
    "PhaseReport",
    "prefill_report",
    "decode_report",
    "decode_limits",
    "near_far_memory",
    "step_time",
    "SweepResult",
    "sweep",
    "compile_decode",
    "from_exported_program",
    "from_graph_module",
    "from_onnx",
]
