"""The Hugging Face family ``qwen3_next``: ``layer_types`` of ``linear_attention`` / ``full_attention``
(or one full layer every ``full_attention_interval``), gated-delta-net
shapes (``linear_*``), gated full attention, MoE with a
``shared_expert_intermediate_size`` shared expert.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import (
    Getter,
    layer_period,
    mapped_layer_types,
    moe_mask,
    nth,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec
from .qwen3_moe import read_qwen3_moe

__all__ = ["read_qwen3_next", "hybrid_mixers"]


def hybrid_mixers(cfg: Mapping[str, Any], get: Getter, name: str, n: int) -> list[str]:
    """Each layer's mixer: ``layer_types`` of ``linear_attention`` / ``full_attention``, else one
    full-attention layer every ``full_attention_interval`` (default 4), the gated delta net elsewhere."""
    mixers = mapped_layer_types(
        cfg, name, n, {"linear_attention": "linear_attention", "full_attention": "gqa"}
    )
    if mixers is None:
        full = nth(n, layer_period(cfg, get, name, "full_attention_interval", 4))
        mixers = ["gqa" if f else "linear_attention" for f in full]
    return mixers


@register_family("qwen3_next")
def read_qwen3_next(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    mixers = hybrid_mixers(cfg, get, name, n)
    read_qwen3_moe(cfg, common, get, name)
    mlps = moe_mask(cfg, n, get, name)
    common.update(
        attn_output_gate=True,
        shared_expert_gate=True,
        shared_expert_intermediate_size=get(cfg, "shared_expert_intermediate_size", name, None),
        linear_num_key_heads=get(cfg, "linear_num_key_heads", name),
        linear_num_value_heads=get(cfg, "linear_num_value_heads", name),
        linear_key_head_dim=get(cfg, "linear_key_head_dim", name),
        linear_value_head_dim=get(cfg, "linear_value_head_dim", name),
        linear_conv_kernel=get(cfg, "linear_conv_kernel_dim", name, 4),
        layer_types=tuple(LayerSpec(m, f) for m, f in zip(mixers, mlps, strict=True)),
    )
