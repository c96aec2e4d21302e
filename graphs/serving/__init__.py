"""Serving analyses over model graphs: totals and closed forms, phase reports,
capacity, sweeps, disaggregation, speculative decoding, split placement and
parallel plans."""

from .capacity import CapacityReport, capacity, model_ledger, peak_activation_bytes, what_if
from .disagg import disaggregated, kv_transfer_crossover
from .limits import decode_limits
from .parallel import bubble_fraction, parallel_plan, plan_frontier
from .phases import PhaseReport, decode_report, near_far_memory, prefill_report, step_time
from .specdec import expected_tokens, speculative_decoding, speedup_closed_form
from .split import attention_ffn_split, sram_residency
from .sweep import SweepResult, compile_decode, sweep
from .totals import (
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
from .workload import Workload, as_workload

__all__ = [
    "Workload",
    "as_workload",
    "GraphSummary",
    "summarize",
    "closed_forms",
    "analyze",
    "decode_energy_vs_batch",
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
    "disaggregated",
    "kv_transfer_crossover",
    "expected_tokens",
    "speculative_decoding",
    "speedup_closed_form",
    "attention_ffn_split",
    "sram_residency",
    "bubble_fraction",
    "parallel_plan",
    "plan_frontier",
]
