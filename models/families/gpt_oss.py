"""The Hugging Face family ``gpt_oss``: every layer MoE (``num_local_experts``, ``num_experts_per_tok``,
experts of width ``intermediate_size`` with a router bias), ``layer_types``
of ``sliding_attention`` / ``full_attention`` with ``sliding_window``, one
learned sink per head, q/k/v biases (``attention_bias``); its MXFP4 experts
(``quantization_config``) are read by :mod:`models.quantization`.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import bool_field, first_field
from ..hf_families import (
    Getter,
    mapped_layer_types,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec

__all__ = ["read_gpt_oss"]


@register_family("gpt_oss")
def read_gpt_oss(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    mixers = mapped_layer_types(cfg, name, n, {"sliding_attention": "sliding", "full_attention": "gqa"})
    common.update(
        num_experts=get(cfg, "num_local_experts", name),
        num_experts_per_tok=first_field(cfg, get, name, ("num_experts_per_tok", "experts_per_token")),
        moe_intermediate_size=common["intermediate_size"],
        router_bias=True,
        mlp_bias=True,  # GptOssExperts: gate_up_proj_bias and down_proj_bias
        qkv_bias=bool_field(cfg, "attention_bias", name, True),
        o_bias=bool_field(cfg, "attention_bias", name, True),
        attention_sinks=1,
        sliding_window=get(cfg, "sliding_window", name),
        layer_types=tuple(LayerSpec(m, "moe") for m in (mixers or ["sliding", "gqa"] * (n // 2))),
    )
