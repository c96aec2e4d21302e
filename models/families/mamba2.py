"""The Hugging Face family ``mamba2``: every layer a Mamba-2 mixer without MLP (``state_size``,
``num_heads``, ``head_dim``, ``n_groups``, ``conv_kernel``, ``chunk_size``).

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import bool_field
from ..hf_families import (
    Getter,
    built_as,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec

__all__ = ["read_mamba2"]


@register_family("mamba2")
def read_mamba2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    heads = get(cfg, "num_heads", name)
    common.update(
        ssm_state_size=get(cfg, "state_size", name),
        ssm_num_heads=heads,
        ssm_head_dim=get(cfg, "head_dim", name),
        ssm_n_groups=get(cfg, "n_groups", name, 1),
        ssm_conv_kernel=get(cfg, "conv_kernel", name, 4),
        ssm_chunk_size=get(cfg, "chunk_size", name, 256),
        layer_types=tuple(LayerSpec("ssm", "none") for _ in range(n)),
        tie_word_embeddings=bool_field(cfg, "tie_word_embeddings", name, True),
    )
    built_as(cfg, name, {"use_conv_bias": True, "use_bias": False}, "the Mamba-2 mixer")
