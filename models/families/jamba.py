"""The Hugging Face family ``jamba``: ``layers_block_type`` (or one attention layer every
``attn_layer_period`` at ``attn_layer_offset``), the others Mamba-1 mixers
(``mamba_d_state``, ``mamba_expand``, ``mamba_dt_rank``, ``mamba_d_conv``);
``num_experts`` experts every ``expert_layer_period`` at ``expert_layer_offset``
(or ``layers_num_experts``), dense MLPs elsewhere.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..fields import ModelConfigError
from ..hf_families import (
    Getter,
    built_as,
    count,
    layer_period,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec

__all__ = ["read_jamba"]


@register_family("jamba")
def read_jamba(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n, d = pattern_layers(common, name), common["hidden_size"]
    blocks = cfg.get("layers_block_type")
    if blocks is None:
        period, offset = (
            layer_period(cfg, get, name, "attn_layer_period", 8),
            get(cfg, "attn_layer_offset", name, 4),
        )
        blocks = ["attention" if i % period == offset else "mamba" for i in range(n)]
    if not isinstance(blocks, list) or len(blocks) != n or set(blocks) - {"attention", "mamba"}:
        raise ModelConfigError(f"{name}: layers_block_type must list {n} of 'attention' / 'mamba'")
    experts = cfg.get("layers_num_experts")
    if experts is None:
        period, offset = (
            layer_period(cfg, get, name, "expert_layer_period", 2),
            get(cfg, "expert_layer_offset", name, 1),
        )
        e = get(cfg, "num_experts", name, 1)
        experts = [e if i % period == offset else 1 for i in range(n)]
    if not isinstance(experts, list) or len(experts) != n or not all(count(e) for e in experts):
        raise ModelConfigError(f"{name}: layers_num_experts must list {n} positive integers")
    built_as(cfg, name, {"mamba_conv_bias": True, "mamba_proj_bias": False}, "the Mamba-1 mixer")
    rank = cfg.get("mamba_dt_rank", "auto")
    rank = math.ceil(d / 16) if rank == "auto" else get(cfg, "mamba_dt_rank", name)
    common.update(
        ssm_state_size=get(cfg, "mamba_d_state", name, 16),
        ssm_inner_size=get(cfg, "mamba_expand", name, 2) * d,
        ssm_dt_rank=rank,
        ssm_conv_kernel=get(cfg, "mamba_d_conv", name, 4),
        ssm_inner_norms=True,  # JambaMambaMixer normalises delta, B and C
        rope=False,  # Jamba's attention layers use no positional encoding (Lieber et al. 2024)
    )
    moe = max(experts) > 1
    if moe:
        common.update(
            num_experts=max(experts),
            num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
            moe_intermediate_size=common["intermediate_size"],
        )
    common["layer_types"] = tuple(
        LayerSpec("mamba" if b == "mamba" else "gqa", "moe" if (moe and e > 1) else "dense")
        for b, e in zip(blocks, experts, strict=True)
    )
