"""Serving analyses over model graphs: totals and closed forms, phase reports,
capacity, sweeps, design-space search, request-level simulation, disaggregation, speculative
decoding, split placement and parallel plans.

The modules live in wings, each importing only those below it (an import-linter ``layers``
contract): :mod:`.step` (what one iteration costs) < :mod:`.engines` (registered engine
profiles) < :mod:`.pricing` (the predictor, priced steps, the step protocols) < :mod:`.analysis`
(phases, limits, sweeps, plans) < :mod:`.sim` (the request-level simulator) < :mod:`.planning`
(search, sizing, cost, fits) < :mod:`.present` (cards, HTML pages, reports that render themselves).

Names load on first use (PEP 562): ``import graphs.serving`` is cheap, so the command
line's fast paths (a cached decode report) never import sympy or networkx.
"""

from __future__ import annotations

from costmodel.lazy import lazy_exports

#: public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    "Workload": "step.workload",
    "as_workload": "step.workload",
    "GraphSummary": "step.totals",
    "summarize": "step.totals",
    "closed_forms": "step.totals",
    "ModelCheck": "analysis.model_check",
    "check_model": "analysis.model_check",
    "analyze": "analysis.classify",
    "decode_energy_vs_batch": "step.totals",
    "weight_params": "step.totals",
    "weight_bytes_read": "step.totals",
    "kv_cache_bytes_per_token": "step.totals",
    "attention_flops": "step.totals",
    "op_total": "step.totals",
    "CapacityReport": "step.ledger_fit",
    "capacity": "step.ledger_fit",
    "model_ledger": "step.ledger_fit",
    "peak_activation_bytes": "step.ledger_fit",
    "what_if": "step.ledger_fit",
    "PhaseReport": "analysis.phases",
    "prefill_report": "analysis.phases",
    "decode_report": "analysis.phases",
    "decode_limits": "analysis.limits",
    "near_far_memory": "analysis.phases",
    "step_time": "analysis.phases",
    "SweepResult": "analysis.sweeps",
    "sweep": "analysis.sweeps",
    "compile_decode": "analysis.sweeps",
    "disaggregated": "analysis.disagg",
    "kv_transfer_crossover": "analysis.disagg",
    "expected_tokens": "analysis.specdec",
    "speculative_decoding": "analysis.specdec",
    "speedup_closed_form": "analysis.specdec",
    "SpecConfig": "sim.specdec_sim",
    "SpecStats": "sim.specdec_sim",
    "speedup_by_batch": "sim.specdec_batch",
    "PrefixRouter": "sim.replica_routing",
    "KVTierConfig": "sim.kv_tiers",
    "TierStats": "sim.kv_tiers",
    "attention_ffn_split": "analysis.split",
    "sram_residency": "analysis.split",
    "bubble_fraction": "analysis.parallel",
    "parallel_plan": "analysis.parallel",
    "plan_frontier": "analysis.parallel",
    "search": "planning.design_search",
    "simulate": "sim.simulator",
    "Comparison": "present.comparison",
    "compare": "present.comparison",
    "Predictor": "pricing.predictor",
    "predicted_mixed_step": "pricing.predictor",
    "PricedStep": "pricing.priced",
    "priced_step": "pricing.priced",
    "SimInterval": "sim.intervals",
    "simulate_interval": "sim.intervals",
    "SimResult": "sim.simulator",
    "Topology": "sim.simulator",
    "EngineConfig": "sim.engine",
    "EngineOverheads": "pricing.overheads",
    "vllm_capture_sizes": "pricing.overheads",
    "Request": "sim.requests",
    "synthetic": "sim.requests",
    "load_trace": "sim.requests",
    "max_rate": "planning.capacity_search",
    "MaxRate": "planning.capacity_search",
    "mixed_step": "step.mixed",
    "MixedStep": "step.mixed",
    "ModelAnalysis": "analysis.node_analysis",
    "StepTotals": "analysis.node_analysis",
    "node_rows": "analysis.classify",
    "SearchResult": "planning.design_search",
    "compiled_step": "step.compiled",
    "CompiledStep": "step.compiled",
    "phase_page": "present.html_views",
    "analysis_page": "present.html_views",
    "simulation_page": "present.html_studies",
    "search_page": "present.html_studies",
    "fusion_page": "present.html_studies",
    "TokenCost": "planning.cost",
    "device_rates": "planning.cost",
    "sim_cost": "planning.cost",
    "decode_cost": "planning.cost",
    "token_cost": "planning.cost",
    "usd_per_m": "planning.cost",
    "size_deployment": "planning.sizing",
    "SizingResult": "planning.sizing",
    "Deployment": "planning.sizing",
    "SimulationRequest": "sim.simulation_request",
    "run_simulation": "present.simulation_report",
    "SimulationReport": "present.simulation_report",
    "MaxRateReport": "present.simulation_report",
    "SearchRequest": "planning.search_request",
    "SizeRequest": "planning.size_request",
    "PhaseRequest": "analysis.phase_request",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
