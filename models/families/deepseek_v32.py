"""The Hugging Face family ``deepseek_v32`` (DeepSeek-V3.2): DeepSeek-V3's layout, read with the other
DeepSeek types by :mod:`models.hf_read`, with every layer's mixer ``dsa`` (:mod:`models.mixers.dsa`)
and the lightning indexer's fields.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import Getter, pattern_layers, register_family
from ..layers import LayerSpec

__all__ = ["read_deepseek_v32"]


@register_family("deepseek_v32")
def read_deepseek_v32(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """``model_type: deepseek_v32``: DeepSeek-V3's layout (read by :mod:`models.hf` as the other
    DeepSeek types) with every layer's mixer ``dsa`` and the indexer fields, defaulting as
    ``DeepseekV32Config`` does (64 heads of 128, top 2048)."""
    common.update(
        index_n_heads=get(cfg, "index_n_heads", name, 64),
        index_head_dim=get(cfg, "index_head_dim", name, 128),
        index_topk=get(cfg, "index_topk", name, 2048),
    )
    n = pattern_layers(common, name)
    given = common.get("layer_types")
    if given is not None:  # moe_layer_freq != 1: keep each layer's MLP, swap the mixer
        common["layer_types"] = tuple(LayerSpec("dsa", s.mlp) for s in given)
    else:
        common["layer_types"] = ("dsa",) * n
