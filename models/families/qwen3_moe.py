"""The Hugging Face family ``qwen3_moe``: ``num_experts``, ``moe_intermediate_size``, MoE every
``decoder_sparse_step``-th layer except ``mlp_only_layers``; q/k norms.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import (
    Getter,
    moe_mask,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec

__all__ = ["read_qwen3_moe"]


@register_family("qwen3_moe")
def read_qwen3_moe(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    common.update(
        qk_norm=True,
        num_experts=get(cfg, "num_experts", name),
        num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
        moe_intermediate_size=get(cfg, "moe_intermediate_size", name),
    )
    mlps = moe_mask(cfg, n, get, name)
    if set(mlps) != {"moe"}:
        common["layer_types"] = tuple(LayerSpec("gqa", m) for m in mlps)
