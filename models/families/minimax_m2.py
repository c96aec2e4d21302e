"""The Hugging Face family ``minimax_m2``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import ModelConfigError, bool_field
from ..hf_families import (
    Getter,
    pattern_layers,
    register_family,
)

__all__ = ["read_minimax_m2"]


@register_family("minimax_m2")
def read_minimax_m2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """MiniMax-M2: full GQA attention in every layer (``attn_type_list`` all 1; a 0, MiniMax-01's
    lightning linear attention, is refused) with q/k RMSNorms over all heads (``qk_norm_type:
    per_layer``), every layer MoE: ``num_local_experts`` experts of width ``intermediate_size``, no
    shared expert, a sigmoid router with a correction bias (``use_routing_bias``). Its MTP modules
    (``num_mtp_modules``) are not built, as ``transformers`` builds none."""
    n = pattern_layers(common, name)
    kinds = cfg.get("attn_type_list")
    if kinds is not None and (not isinstance(kinds, list) or set(kinds) - {1} or len(kinds) != n):
        raise ModelConfigError(
            f"{name}: attn_type_list must list {n} ones (full attention); a 0 is MiniMax's lightning "
            "attention, a linear-attention mixer the layer specs do not have yet (a mixer plugin with its "
            "state size and per-token cost would describe it)"
        )
    if get(cfg, "shared_intermediate_size", name, 0):
        raise ModelConfigError(f"{name}: shared_intermediate_size > 0 (a shared expert) is not mapped")
    qk = bool_field(cfg, "use_qk_norm", name, True)
    kind = cfg.get("qk_norm_type", "per_layer")
    if qk and kind not in ("per_layer", "per_head"):
        raise ModelConfigError(f"{name}: qk_norm_type {kind!r} not allowed; allowed: per_layer, per_head")
    common.update(
        num_experts=get(cfg, "num_local_experts", name),
        num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
        moe_intermediate_size=common["intermediate_size"],
        router_bias=bool_field(cfg, "use_routing_bias", name, True),
        qk_norm=qk,
        qk_norm_all_heads=qk and kind == "per_layer",
    )
