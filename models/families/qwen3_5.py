"""The Hugging Face family ``qwen3_5``, ``qwen3_5_text``, ``qwen3_5_moe``, ``qwen3_5_moe_text``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fieldlog import layered
from ..fields import int_field
from ..hf_families import (
    Getter,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec
from .qwen3_next import hybrid_mixers, read_qwen3_next

__all__ = ["read_qwen3_5_fields", "read_qwen3_5"]


def read_qwen3_5_fields(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """Qwen3.5-MoE states no ``intermediate_size``: every layer is MoE, so the (unused) dense width is
    taken as the experts'."""
    if "intermediate_size" in cfg or cfg.get("num_experts") is None:
        return cfg
    return layered(cfg, overrides={"intermediate_size": int_field(cfg, "moe_intermediate_size", name)})


@register_family(
    "qwen3_5",
    "qwen3_5_text",
    "qwen3_5_moe",
    "qwen3_5_moe_text",
    aliases={"qwen3_5_moe": read_qwen3_5_fields, "qwen3_5_moe_text": read_qwen3_5_fields},
)
def read_qwen3_5(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Qwen3.5 (``qwen3_5_moe``, and ``qwen3_5`` dense; the text model of the multimodal checkpoint):
    Qwen3-Next's layers (gated delta net in three of four, gated attention in the fourth), its
    ``in_proj_qkv``/``in_proj_z``/``in_proj_b``/``in_proj_a`` split of the same weights as
    ``in_proj_qkvz``/``in_proj_ba``; MoE with a gated shared expert, or dense MLPs in the dense models."""
    if cfg.get("num_experts") is not None:
        read_qwen3_next(cfg, common, get, name)
        return
    n = pattern_layers(common, name)
    mixers = hybrid_mixers(cfg, get, name, n)
    common.update(
        qk_norm=True,
        attn_output_gate=True,
        linear_num_key_heads=get(cfg, "linear_num_key_heads", name),
        linear_num_value_heads=get(cfg, "linear_num_value_heads", name),
        linear_key_head_dim=get(cfg, "linear_key_head_dim", name),
        linear_value_head_dim=get(cfg, "linear_value_head_dim", name),
        linear_conv_kernel=get(cfg, "linear_conv_kernel_dim", name, 4),
        layer_types=tuple(LayerSpec(m, "dense") for m in mixers),
    )
