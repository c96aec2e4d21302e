"""Serving analyses over model graphs: totals and closed forms, phase reports,
capacity, sweeps, design-space search, request-level simulation, disaggregation, speculative
decoding, split placement and parallel plans.

Names load on first use (PEP 562): ``import graphs.serving`` is cheap, so the command
line's fast paths (a cached decode report) never import sympy or networkx.
"""

from __future__ import annotations

from costmodel.lazy import lazy_exports

#: public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    "Workload": "workload",
    "as_workload": "workload",
    "GraphSummary": "totals",
    "summarize": "totals",
    "closed_forms": "totals",
    "analyze": "classify",
    "decode_energy_vs_batch": "totals",
    "weight_params": "totals",
    "weight_bytes_read": "totals",
    "kv_cache_bytes_per_token": "totals",
    "attention_flops": "totals",
    "op_total": "totals",
    "CapacityReport": "ledger_fit",
    "capacity": "ledger_fit",
    "model_ledger": "ledger_fit",
    "peak_activation_bytes": "ledger_fit",
    "what_if": "ledger_fit",
    "PhaseReport": "phases",
    "prefill_report": "phases",
    "decode_report": "phases",
    "decode_limits": "limits",
    "near_far_memory": "phases",
    "step_time": "phases",
    "SweepResult": "sweeps",
    "sweep": "sweeps",
    "compile_decode": "sweeps",
    "disaggregated": "disagg",
    "kv_transfer_crossover": "disagg",
    "expected_tokens": "specdec",
    "speculative_decoding": "specdec",
    "speedup_closed_form": "specdec",
    "SpecConfig": "specdec_sim",
    "SpecStats": "specdec_sim",
    "speedup_by_batch": "specdec_sim",
    "PrefixRouter": "replica_routing",
    "KVTierConfig": "kv_tiers",
    "TierStats": "kv_tiers",
    "attention_ffn_split": "split",
    "sram_residency": "split",
    "bubble_fraction": "parallel",
    "parallel_plan": "parallel",
    "plan_frontier": "parallel",
    "search": "design_search",
    "simulate": "simulator",
    "Predictor": "predictor",
    "predicted_mixed_step": "predictor",
    "PricedStep": "priced",
    "priced_step": "priced",
    "SimInterval": "intervals",
    "simulate_interval": "intervals",
    "SimResult": "simulator",
    "Topology": "simulator",
    "EngineConfig": "engine",
    "Request": "requests",
    "synthetic": "requests",
    "load_trace": "requests",
    "max_rate": "capacity_search",
    "MaxRate": "capacity_search",
    "mixed_step": "mixed",
    "MixedStep": "mixed",
    "ModelAnalysis": "analysis",
    "StepTotals": "analysis",
    "node_rows": "classify",
    "SearchResult": "design_search",
    "compiled_step": "compiled",
    "CompiledStep": "compiled",
    "phase_page": "html_views",
    "analysis_page": "html_views",
    "simulation_page": "html_studies",
    "search_page": "html_studies",
    "fusion_page": "html_studies",
    "TokenCost": "cost",
    "device_rates": "cost",
    "sim_cost": "cost",
    "decode_cost": "cost",
    "size_deployment": "sizing",
    "SizingResult": "sizing",
    "Deployment": "sizing",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
